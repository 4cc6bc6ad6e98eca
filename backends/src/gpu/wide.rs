//! Pairs wider than 64 bits on GPUs (64-bit keys or 64-bit values): keys and values in parallel arrays (the
//! BGHT paper's structure-of-arrays layout), keys widened to `u64` with the all-ones word as the empty slot.
//!
//! One compare-and-swap claims a key slot; the claiming lane then stores the value. That is a complete insert
//! only for **stable** schemes (IHT, P2BHT: a stored pair never moves). A cuckoo eviction would have to move
//! key and value together, which needs a per-bucket lock or a reserved key state (docs/ARCHITECTURE.md), so
//! `HashTable` keeps wide pairs of BCHT and 1CHT on the CPU backend. Values written by an insert are visible
//! to every later kernel (inserts and finds are separate launches).

use super::device_api::{ShapeScalars, bucket_of_wide, meta_of, tile_find_wide};
use super::host_path::{self, BatchTable};
use super::kernels::{ADDED_COUNTERS, INSERT_COUNTERS, decode_insert_counters};
use super::transfer::{HostTransfer, PinnedAlloc};
use super::{
    CUBE_SIZE, GpuOptions, cube_count, fill_u32, fill_u64, shape_scalars, shape_words_of,
    tile_width_for,
};
use crate::engine::{Engine, Inserted};
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::hash::fmix32;
use hashtile_core::scheme::{ProbingScheme, SchemeParams, action, blank_state};
use hashtile_core::tile::{
    EMPTY_WORD, read_slots_atomic, read_slots_either, slot_address, tile_ballot, tile_lane,
    tile_shuffle_u64, view_of_keys,
};
use hashtile_core::{Element, Error, HashFamily, Key, ProbeStats, Result, Value};
use std::marker::PhantomData;

/// Bulk insert (upsert) of wide pairs for a stable scheme. Same work-sharing loop as
/// [`super::kernels::insert_kernel`]; CLAIM is a compare-and-swap of the key word followed by a store of the
/// value, UPDATE a store of the value (keys in one call are distinct: the host deduplicates). A scheme that
/// asks for an eviction gets the pair handed back as failed (stable schemes never do).
// The mask test stays a comptime `if` around a runtime `if`: CubeCL cannot mix the two in one condition.
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
#[cube(launch_unchecked)]
pub fn insert_wide_kernel<S: ProbingScheme>(
    keys: &Array<u64>,
    values: &Array<u64>,
    mask: &Array<u32>,
    mode: u32,
    table_keys: &Array<Atomic<u64>>,
    table_keys_plain: &Array<u64>,
    table_values: &mut Array<u64>,
    failed: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    shape: &ShapeScalars,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
    #[comptime] count_probes: bool,
    #[comptime] masked: bool,
) {
    let meta = meta_of(shape);
    let tl = tile_lane(tile_width);
    let pos = ABSOLUTE_POS;
    let mut pending = pos < keys.len();
    if comptime!(masked) {
        if pending {
            pending = mask[pos] == mode;
        }
    }
    let mut my_key = EMPTY_WORD.runtime();
    let mut my_val = EMPTY_WORD.runtime();
    if pending {
        my_key = keys[pos];
        my_val = values[pos];
    }
    let mut has_op = false;
    let mut cur_key = EMPTY_WORD.runtime();
    let mut cur_val = EMPTY_WORD.runtime();
    let mut coherent = false;
    let mut added = u32::new(0);
    let mut probes = u32::new(0);
    let mut retries = u32::new(0);
    let mut state = blank_state();
    while plane_any(pending || has_op) {
        // An idle tile takes the next pending lane's pair.
        let queue = tile_ballot(pending, tl, tile_width);
        let next = queue.trailing_zeros() % tile_width;
        let next_key = tile_shuffle_u64(my_key, next, tl);
        let next_val = tile_shuffle_u64(my_val, next, tl);
        if !has_op && queue != 0 {
            has_op = true;
            cur_key = next_key;
            cur_val = next_val;
            coherent = false;
            // The CPU backend's key_mix: fmix32(lo ^ fmix32(hi)).
            let lo = (cur_key & 0xffff_ffffu64) as u32;
            let hi = (cur_key >> 32u64) as u32;
            S::insert_start(&mut state, fmix32(lo ^ fmix32(hi)));
            if tl.lane == next {
                pending = false;
            }
        }

        // One probe.
        let read_index = state.hash_index;
        let b = bucket_of_wide(meta, cur_key, read_index);
        let slots = if comptime!(plain_reads) {
            read_slots_either(
                table_keys,
                table_keys_plain,
                b,
                has_op,
                coherent,
                tl,
                bucket_size,
                tile_width,
            )
        } else {
            read_slots_atomic(table_keys, b, has_op, tl, bucket_size, tile_width)
        };
        let view = view_of_keys(slots, cur_key, tl, bucket_size, tile_width);
        let mut act = u32::new(action::NEXT as i64);
        let mut target = u32::new(0);
        let mut slot = u32::new(0);
        if has_op {
            let st = S::insert_step(&mut state, view, meta.params, bucket_size);
            if comptime!(count_probes) {
                probes += 1u32;
            }
            act = st.action;
            target = st.target;
            slot = st.slot;
        }
        let mut tb = b;
        if target != read_index {
            tb = bucket_of_wide(meta, cur_key, target);
        }

        // The owner lane of the slot claims it (key CAS, then the value) or updates the value.
        let owner = slot % tile_width;
        let mut old = EMPTY_WORD.runtime();
        if has_op && tl.lane == owner {
            let addr = slot_address(tb, slot, bucket_size);
            if act == action::CLAIM {
                old = table_keys[addr].compare_exchange_weak(EMPTY_WORD, cur_key);
                if old == EMPTY_WORD {
                    table_values[addr] = cur_val;
                }
            } else if act == action::UPDATE {
                table_values[addr] = cur_val;
            }
        }
        let old_all = tile_shuffle_u64(old, owner, tl);

        // Tile-uniform bookkeeping.
        if has_op {
            if act == action::CLAIM {
                if old_all == EMPTY_WORD {
                    has_op = false;
                    added += 1;
                } else {
                    coherent = true; // lost the race: re-read this bucket coherently
                    if comptime!(count_probes) {
                        retries += 1u32;
                    }
                }
            } else if act == action::UPDATE {
                has_op = false;
            } else if act == action::FAIL || act == action::EVICT {
                has_op = false;
                if tl.lane == 0u32 {
                    let at = counters[0].fetch_add(1u32);
                    if (2 * at as usize + 1) < failed.len() {
                        failed[2 * at as usize] = cur_key;
                        failed[2 * at as usize + 1] = cur_val;
                    }
                }
            }
        }
    }
    // One atomic per plane into spread-out counters (layout of `INSERT_COUNTERS`).
    let mut tile_added = u32::new(0);
    let mut tile_probes = u32::new(0);
    let mut tile_retries = u32::new(0);
    if tl.lane == 0u32 {
        tile_added = added;
        tile_probes = probes;
        tile_retries = retries;
    }
    let spread = CUBE_POS_X % ADDED_COUNTERS;
    let total = plane_sum(tile_added);
    if UNIT_POS_PLANE == 0u32 && total > 0u32 {
        counters[(1u32 + spread) as usize].fetch_add(total);
    }
    if comptime!(count_probes) {
        let all = plane_sum(tile_probes);
        if UNIT_POS_PLANE == 0u32 && all > 0u32 {
            counters[(1u32 + ADDED_COUNTERS + spread) as usize].fetch_add(all);
        }
        let lost = plane_sum(tile_retries);
        if UNIT_POS_PLANE == 0u32 && lost > 0u32 {
            counters[(1u32 + 2u32 * ADDED_COUNTERS + spread) as usize].fetch_add(lost);
        }
    }
}

/// Bulk find of wide keys: `out[i]` = value and `found[i]` = 1, or `found[i]` = 0 (see
/// [`tile_find_wide`]).
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn find_wide_kernel<S: ProbingScheme>(
    keys: &Array<u64>,
    table_keys: &Array<u64>,
    table_values: &Array<u64>,
    out: &mut Array<u64>,
    found: &mut Array<u32>,
    probe_counters: &Array<Atomic<u32>>,
    shape: &ShapeScalars,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] count_probes: bool,
) {
    let meta = meta_of(shape);
    let pos = ABSOLUTE_POS;
    let active = pos < keys.len();
    let mut key = EMPTY_WORD.runtime();
    if active {
        key = keys[pos];
    }
    let r = tile_find_wide::<S>(
        table_keys,
        table_values,
        meta,
        key,
        active,
        bucket_size,
        tile_width,
        count_probes,
    );
    if active {
        out[pos] = r.value;
        found[pos] = r.found;
    }
    if comptime!(count_probes) {
        let all = plane_sum(r.probes);
        if UNIT_POS_PLANE == 0u32 && all > 0u32 {
            probe_counters[(CUBE_POS_X % ADDED_COUNTERS) as usize].fetch_add(all);
        }
    }
}

/// What a user kernel needs to call [`tile_find_wide`] on a [`GpuWideTable`].
#[derive(Debug, Clone)]
pub struct WideDeviceRef {
    /// The key words (`&Array<u64>`, all ones = empty).
    pub keys: Handle,
    /// The value words (`&Array<u64>`).
    pub values: Handle,
    /// Number of slots (length of both arrays).
    pub slots: usize,
    /// The shape words (`&Array<u32>`, length `device_api::SHAPE_WORDS`).
    pub shape: Handle,
    /// Compile-time bucket size to instantiate the kernel with.
    pub bucket_size: u32,
    /// Compile-time tile width to instantiate the kernel with.
    pub tile_width: u32,
}

/// A table of wide pairs (keys and values widened to `u64`) on a CubeCL device, for a stable scheme `S`.
pub struct GpuWideTable<R: HostTransfer, S: ProbingScheme> {
    client: ComputeClient<R>,
    stager: R::Stager,
    /// How host batches are cut for the device.
    batch: host_path::BatchSizes,
    /// Host-path buffers kept between calls.
    cache: host_path::DeviceCache,
    /// Failure buffer of the queued inserts (2 words per pair) and its length in words.
    failed: Option<(Handle, usize)>,
    /// Keys queued since the last settle.
    pending_ops: u64,
    keys: Handle,
    values: Handle,
    num_buckets: u32,
    bucket_size: u32,
    tile_width: u32,
    family: HashFamily,
    params: SchemeParams,
    plain_reads: bool,
    count_probes: bool,
    len: usize,
    counters: Handle,
    find_probes: Handle,
    dummy: Handle,
    _scheme: PhantomData<S>,
}

fn u64_bytes(v: &[u64]) -> &[u8] {
    u64::as_bytes(v)
}

impl<R: HostTransfer, S: ProbingScheme> GpuWideTable<R, S> {
    /// An empty table of `num_buckets` buckets of `bucket_size` slots on `device`. `options.use_cas` must be on
    /// (wide pairs are claimed with a compare-and-swap of the key).
    pub fn new(
        device: &R::Device,
        num_buckets: u32,
        bucket_size: u32,
        family: HashFamily,
        params: SchemeParams,
        options: GpuOptions,
    ) -> Result<Self> {
        let client = R::client(device);
        let tile_width = tile_width_for(&client, bucket_size)?;
        if !options.use_cas {
            return Err(Error::InvalidConfig(
                "wide pairs are claimed with compare-and-swap; GpuOptions::use_cas must be on"
                    .into(),
            ));
        }
        let slots = num_buckets as usize * bucket_size as usize;
        let stager = R::stager(&client)?;
        let batch = host_path::BatchSizes::DEFAULT;
        host_path::check_device_memory::<R>(&stager, "the table", slots as u64 * 16)?;
        let t = Self {
            stager,
            batch,
            cache: Default::default(),
            failed: None,
            pending_ops: 0,
            keys: client.empty(slots.max(1) * 8),
            values: client.empty(slots.max(1) * 8),
            counters: client.empty(INSERT_COUNTERS * 4),
            find_probes: client.empty(ADDED_COUNTERS as usize * 4),
            dummy: client.empty(8),
            client,
            num_buckets,
            bucket_size,
            tile_width,
            family,
            params,
            plain_reads: options.plain_reads,
            count_probes: false,
            len: 0,
            _scheme: PhantomData,
        };
        t.fill_keys_empty();
        Ok(t)
    }

    /// Device handles for calling [`tile_find_wide`] from your own kernel (its `meta` from
    /// `device_api::load_meta` of the `shape` buffer); the kernel must be instantiated with the returned
    /// compile-time `bucket_size` and `tile_width`. The shape buffer is made afresh (13 words) on each call.
    pub fn device_ref(&self) -> WideDeviceRef {
        let words = shape_words_of(self.num_buckets, self.family, self.params);
        WideDeviceRef {
            keys: self.keys.clone(),
            values: self.values.clone(),
            slots: self.slots(),
            shape: self.client.create_from_slice(u32::as_bytes(&words)),
            bucket_size: self.bucket_size,
            tile_width: self.tile_width,
        }
    }

    /// The compute client (to allocate buffers and launch your own kernels on the same device).
    pub fn client(&self) -> &ComputeClient<R> {
        &self.client
    }

    /// Sets the keys per device batch and per find chunk of the host path (`None`: the defaults).
    pub fn set_batch_keys(&mut self, keys: Option<usize>) {
        self.batch = host_path::BatchSizes::from_keys(keys);
    }

    /// Turns device probe counting on or off (compiled out of the kernels when off).
    pub fn set_count_probes(&mut self, on: bool) {
        self.count_probes = on;
    }

    fn slots(&self) -> usize {
        self.num_buckets as usize * self.bucket_size as usize
    }

    fn fill_keys_empty(&self) {
        fill_u64(&self.client, &self.keys, self.slots(), EMPTY_WORD);
    }

    fn zero_u32(&self, h: &Handle, n: usize) {
        fill_u32(&self.client, h, n, 0);
    }

    fn read_u32(&self, h: Handle) -> Vec<u32> {
        u32::from_bytes(&self.client.read_one_unchecked(h)).to_vec()
    }

    fn read_u64(&self, h: Handle) -> Vec<u64> {
        u64::from_bytes(&self.client.read_one_unchecked(h)).to_vec()
    }
}

impl<R: HostTransfer, S: ProbingScheme> GpuWideTable<R, S> {
    /// Inserts `n` pairs already on the device (`keys`, `values`: `n` `u64` words each; keys distinct, none
    /// all ones, not checked on the device) and waits for the counters. Returns the probe statistics and the
    /// pairs the scheme could not place (every one of them: the failure buffer has room for all `n`).
    pub fn insert_device(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
    ) -> Result<(ProbeStats, Vec<(u64, u64)>)> {
        self.launch_insert(keys, values, None, n, None);
        self.settle()
    }

    /// Queues the insert kernel over the positions whose mask equals the given mode (all when `None`), with
    /// the table's upsert setting or `upsert` instead. Failures go to a buffer with room for every queued pair.
    fn launch_insert(
        &mut self,
        keys: &Handle,
        values: &Handle,
        mask: Option<(&Handle, u32)>,
        n: usize,
        upsert: Option<bool>,
    ) {
        if n == 0 {
            return;
        }
        if self.failed.is_none() {
            self.zero_u32(&self.counters, INSERT_COUNTERS);
        }
        // One failure buffer per settle, sized for the largest queued launch (a pair fails at most once).
        let need = 2 * n;
        if self.failed.as_ref().is_none_or(|(_, len)| *len < need) {
            self.failed = Some((self.client.empty(need * 8), need));
        }
        let (failed, failed_len) = self.failed.clone().expect("set above");
        self.pending_ops += n as u64;
        let mut shape = shape_words_of(self.num_buckets, self.family, self.params);
        if let Some(u) = upsert {
            shape[8] = u as u32;
        }
        let (mask_handle, mode) = match mask {
            Some((m, mode)) => (m.clone(), mode),
            None => (self.dummy.clone(), 0),
        };
        // SAFETY: indices are bounded by `n`, by the failure buffer (2 words per pair, checked in the kernel) and
        // by the table's shape, which matches its allocation.
        unsafe {
            insert_wide_kernel::launch_unchecked::<S, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(values.clone(), n),
                ArrayArg::from_raw_parts(mask_handle, if mask.is_some() { n } else { 1 }),
                mode,
                ArrayArg::from_raw_parts(self.keys.clone(), self.slots()),
                if self.plain_reads {
                    ArrayArg::from_raw_parts(self.keys.clone(), self.slots())
                } else {
                    // Never bind a buffer twice in one launch: wgpu mis-binds the second use.
                    ArrayArg::from_raw_parts(self.dummy.clone(), 1)
                },
                ArrayArg::from_raw_parts(self.values.clone(), self.slots()),
                ArrayArg::from_raw_parts(failed, failed_len),
                ArrayArg::from_raw_parts(self.counters.clone(), INSERT_COUNTERS),
                shape_scalars(shape),
                self.bucket_size,
                self.tile_width,
                self.plain_reads,
                self.count_probes,
                mask.is_some(),
            )
        }
    }

    /// Queues an insert of `n` device-resident pairs and returns at once (stream-ordered: later launches on
    /// this table see it). Counts accumulate on the device until [`GpuWideTable::settle`]; keys distinct, none
    /// all ones (not checked on the device).
    pub fn insert_device_async(&mut self, keys: &Handle, values: &Handle, n: usize) {
        self.launch_insert(keys, values, None, n, None);
    }

    /// Waits for queued inserts, reads their counters (one small read), updates `len()`, and returns their
    /// statistics and the pairs they could not place.
    pub fn settle(&mut self) -> Result<(ProbeStats, Vec<(u64, u64)>)> {
        let Some((failed, failed_len)) = self.failed.take() else {
            return Ok((ProbeStats::default(), Vec::new()));
        };
        let c = self.read_u32(self.counters.clone());
        let (nfailed, added, stats) =
            decode_insert_counters(&c, std::mem::take(&mut self.pending_ops));
        self.len += added;
        let mut lost = Vec::with_capacity(nfailed);
        if nfailed > 0 {
            let words = self.read_u64(failed);
            let kept = nfailed.min(failed_len / 2);
            lost.extend(words[..2 * kept].chunks(2).map(|w| (w[0], w[1])));
            if kept < nfailed {
                return Err(Error::StashOverflow {
                    untracked: nfailed - kept,
                    unplaced: lost,
                });
            }
        }
        Ok((stats, lost))
    }

    /// Finds `n` keys already on the device, writing values to `out` (`n` `u64` words; 0 where absent) and
    /// 1/0 to `found` (`n` `u32` words). Nothing crosses to the host; the launch is queued, not awaited.
    pub fn find_device(&self, keys: &Handle, out: &Handle, found: &Handle, n: usize) {
        if n == 0 {
            return;
        }
        let (probe_handle, probe_len) = if self.count_probes {
            self.zero_u32(&self.find_probes, ADDED_COUNTERS as usize);
            (self.find_probes.clone(), ADDED_COUNTERS as usize)
        } else {
            (self.dummy.clone(), 1)
        };
        // SAFETY: indices are bounded by `n` and by the table's shape.
        unsafe {
            find_wide_kernel::launch_unchecked::<S, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(self.keys.clone(), self.slots()),
                ArrayArg::from_raw_parts(self.values.clone(), self.slots()),
                ArrayArg::from_raw_parts(out.clone(), n),
                ArrayArg::from_raw_parts(found.clone(), n),
                ArrayArg::from_raw_parts(probe_handle, probe_len),
                shape_scalars(shape_words_of(self.num_buckets, self.family, self.params)),
                self.bucket_size,
                self.tile_width,
                self.count_probes,
            )
        }
    }

    /// Uploads `u64`s to a new device buffer.
    pub fn upload(&self, data: &[u64]) -> Handle {
        self.client.create_from_slice(u64_bytes(data))
    }

    /// Waits for all queued device work.
    pub fn sync(&self) -> Result<()> {
        cubecl::future::block_on(self.client.sync())
            .map_err(|e| Error::InvalidConfig(format!("device error: {e:?}")))
    }

    /// Reads a device buffer of `u64`s back.
    pub fn read_u64_buffer(&self, h: Handle) -> Vec<u64> {
        self.read_u64(h)
    }

    /// Reads a device buffer of `u32`s back.
    pub fn read_u32_buffer(&self, h: Handle) -> Vec<u32> {
        self.read_u32(h)
    }
}

impl<R: HostTransfer, S: ProbingScheme> BatchTable<R> for GpuWideTable<R, S> {
    const KEY_BYTES: usize = 8;
    const VALUE_BYTES: usize = 8;
    fn client(&self) -> &ComputeClient<R> {
        &self.client
    }
    fn stager(&self) -> &R::Stager {
        &self.stager
    }
    fn stored(&self) -> usize {
        self.len
    }
    fn slots(&self) -> usize {
        self.num_buckets as usize * self.bucket_size as usize
    }
    fn batch_sizes(&self) -> host_path::BatchSizes {
        self.batch
    }
    fn cache(&self) -> &host_path::DeviceCache {
        &self.cache
    }
    fn classify(&self, keys: &Handle, mask: &Handle, n: usize) {
        // SAFETY: indices are bounded by `n` and by the table's shape.
        unsafe {
            super::upsert::classify_wide_kernel::launch_unchecked::<S, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(self.keys.clone(), self.slots()),
                ArrayArg::from_raw_parts(self.values.clone(), self.slots()),
                ArrayArg::from_raw_parts(mask.clone(), n),
                shape_scalars(shape_words_of(self.num_buckets, self.family, self.params)),
                self.bucket_size,
                self.tile_width,
            )
        }
    }
    fn insert_queued(
        &mut self,
        keys: &Handle,
        values: &Handle,
        mask: Option<(&Handle, u32)>,
        n: usize,
        upsert: bool,
    ) {
        self.launch_insert(keys, values, mask, n, Some(upsert));
    }
    fn settle_batch(&mut self) -> Result<(ProbeStats, Vec<(u64, u64)>)> {
        self.settle()
    }
}

/// A typed slice as the wide layout's `u64` words: as is for 64-bit elements, widened (a copy) for 32-bit
/// ones (a table of a 32-bit key with a 64-bit value, or the reverse, is the one case that widens).
fn words<E: Element>(s: &[E]) -> std::borrow::Cow<'_, [u64]> {
    match E::as_u64s(s) {
        Some(w) => std::borrow::Cow::Borrowed(w),
        None => {
            use rayon::prelude::*;
            std::borrow::Cow::Owned(s.par_iter().map(|e| e.widen()).collect())
        }
    }
}

impl<R: HostTransfer, S: ProbingScheme> GpuWideTable<R, S> {
    fn upsert_typed<K: Key, V: Value>(
        &mut self,
        keys: &[K],
        values: &[V],
        distinct: bool,
    ) -> Result<Inserted<K, V>> {
        let (k, v) = (words(keys), words(values));
        let (stats, lost) =
            host_path::upsert(self, u64::as_bytes(&k), u64::as_bytes(&v), distinct)?;
        Ok(Inserted {
            stats,
            unplaced: lost
                .into_iter()
                .map(|(k, v)| (K::narrow(k), V::narrow(v)))
                .collect(),
        })
    }
}

impl<R: HostTransfer, S: ProbingScheme> GpuWideTable<R, S> {
    /// Stored pairs.
    pub fn len(&self) -> usize {
        self.len
    }
    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Empties the table (queued) and switches to `family`.
    pub fn reset(&mut self, family: HashFamily) -> Result<()> {
        Engine::<u64, u64>::reset(self, family)
    }
    /// Looks host keys up (`Some(value)` / `None`), through the host path.
    pub fn find_keys(&self, keys: &[u64], out: &mut [Option<u64>]) -> Result<ProbeStats> {
        let mut values = vec![0u64; keys.len()];
        let mut bits = vec![0u32; keys.len().div_ceil(32)];
        let stats = Engine::<u64, u64>::find_into(self, keys, &mut values, Some(&mut bits))?;
        for (i, o) in out.iter_mut().enumerate() {
            *o = (bits[i / 32] >> (i % 32) & 1 == 1).then_some(values[i]);
        }
        Ok(stats)
    }
}

impl<R: HostTransfer, S: ProbingScheme, K: Key, V: Value> Engine<K, V> for GpuWideTable<R, S> {
    fn upsert(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        self.upsert_typed(keys, values, false)
    }

    fn insert_distinct(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        self.upsert_typed(keys, values, true)
    }

    fn checks_in_pipeline(&self, n: usize) -> bool {
        n <= self.batch.insert
    }

    fn count_new(&self, keys: &[K]) -> Result<usize> {
        host_path::count_new(self, u64::as_bytes(&words(keys)))
    }

    fn find_into(
        &self,
        keys: &[K],
        out: &mut [V],
        found: Option<&mut [u32]>,
    ) -> Result<ProbeStats> {
        let n = keys.len();
        if n == 0 {
            return Ok(ProbeStats::default());
        }
        let k = words(keys);
        let mut flags_all = vec![0u32; n];
        let mut direct = V::as_u64s_mut(out);
        let mut widened = if direct.is_none() {
            vec![0u64; n]
        } else {
            Vec::new()
        };
        let dst: &mut [u64] = match direct.as_deref_mut() {
            Some(d) => d,
            None => &mut widened,
        };
        // The wide find writes 1/0 flags; they are read back per chunk next to the values.
        for start in (0..n).step_by(self.batch.find) {
            let m = (n - start).min(self.batch.find);
            let kh = R::upload(
                &self.client,
                &self.stager,
                u64::as_bytes(&k[start..start + m]),
            )?;
            let (oh, fh) = (self.client.empty(m * 8), self.client.empty(m * 4));
            self.find_device(&kh, &oh, &fh, m);
            R::download(
                &self.client,
                &self.stager,
                &oh,
                host_path::u64_bytes_mut(&mut dst[start..start + m]),
            )?;
            R::download(
                &self.client,
                &self.stager,
                &fh,
                host_path::u32_bytes_mut(&mut flags_all[start..start + m]),
            )?;
        }
        {
            use rayon::prelude::*;
            dst.par_iter_mut()
                .zip(flags_all.par_iter())
                .for_each(|(o, &f)| {
                    if f == 0 {
                        *o = u64::MAX;
                    }
                });
        }
        if direct.is_none() {
            for (o, w) in out.iter_mut().zip(&widened) {
                *o = V::narrow(*w);
            }
        }
        if let Some(bits) = found {
            crate::engine::bits_from(bits, n, |i| flags_all[i] == 1);
        }
        let probes = if self.count_probes {
            self.read_u32(self.find_probes.clone())
                .iter()
                .map(|&x| x as u64)
                .sum()
        } else {
            0
        };
        Ok(ProbeStats {
            probes,
            ops: n as u64,
            retries: 0,
        })
    }

    fn pairs(&self) -> Result<Vec<(K, V)>> {
        let (k, v) = (
            self.read_u64(self.keys.clone()),
            self.read_u64(self.values.clone()),
        );
        Ok(k.into_iter()
            .zip(v)
            .filter(|(k, _)| *k != EMPTY_WORD)
            .map(|(k, v)| (K::narrow(k), V::narrow(v)))
            .collect())
    }

    fn reset(&mut self, family: HashFamily) -> Result<()> {
        self.family = family;
        self.fill_keys_empty();
        self.len = 0;
        Ok(())
    }

    fn len(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.slots()
    }

    fn family(&self) -> HashFamily {
        self.family
    }

    fn placement(&self) -> Result<Vec<(K, u32)>> {
        Ok(self
            .read_u64(self.keys.clone())
            .into_iter()
            .enumerate()
            .filter(|(_, k)| *k != EMPTY_WORD)
            .map(|(i, k)| (K::narrow(k), (i / self.bucket_size as usize) as u32))
            .collect())
    }

    fn alloc_pinned(&self, bytes: usize) -> Option<PinnedAlloc> {
        R::alloc_pinned(&self.stager, bytes)
    }
}
