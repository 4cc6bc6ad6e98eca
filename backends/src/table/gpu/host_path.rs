//! The static tables' upserts from host memory, over the host-I/O layer ([`crate::runtime::host_io`]): a batch
//! is copied in chunks, its duplicates and updates are settled by device passes ([`crate::table::gpu::upsert`])
//! queued as the chunks land, and it is inserted by masked launches of the table's insert kernel. (Finds are
//! the layer's keyed pass with the table's find kernel: `engine.rs`.) The same driver serves packed and wide
//! tables through [`BatchTable`].

use crate::runtime::host_io::{BatchSizes, DeviceCache, check_device_memory, device_batches};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32, fill_u64};
use crate::runtime::trace::Trace;
use crate::runtime::transfer::HostTransfer;
use crate::table::gpu::kernels::ADDED_COUNTERS;
use crate::table::gpu::upsert::{
    MASK_NEW, MASK_UPDATE, count_mask_kernel, dedup_claim_kernel, dedup_mark_kernel,
    dedup_reduce_kernel, scratch_slots, sentinel_gate_kernel,
};
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::reduce::Reduce;
use hashtile_core::{Error, ProbeStats, Result};

/// Device-side steps of a table that the host path chains.
pub(crate) trait BatchTable<R: HostTransfer> {
    /// Bytes per key on the device (4: packed 32-bit pairs; 8: wide).
    const KEY_BYTES: usize;
    /// Bytes per value on the device.
    const VALUE_BYTES: usize;
    /// The table stores values (`false`: a set, whose batches carry keys only; kernels never read a value).
    const HAS_VALUES: bool;
    /// The compute client.
    fn client(&self) -> &ComputeClient<R>;
    /// The transfer state.
    fn stager(&self) -> &R::Stager;
    /// Pairs stored (settled).
    fn stored(&self) -> usize;
    /// Slots of the table.
    fn slots(&self) -> usize;
    /// Keys per device batch of an insert and per chunk of a find ([`BatchSizes`]).
    fn batch_sizes(&self) -> BatchSizes;
    /// The table's cache of host-path buffers.
    fn cache(&self) -> &DeviceCache;
    /// Marks keys marked [`MASK_NEW`] that are already stored as [`MASK_UPDATE`] (queued); with `values`, also
    /// writes each such key's value in place (see `classify_kernel`).
    fn classify(&self, keys: &Handle, values: Option<&Handle>, mask: &Handle, n: usize);
    /// Queues an insert kernel over the positions whose mask equals `mode` (all positions when `mask` is
    /// `None`); `upsert` off skips the duplicate check (keys known distinct and absent). The caller records the
    /// operations with [`BatchTable::note_queued`] before settling (this call only holds the table shared, so
    /// that it can run inside a transfer's callback).
    fn queue_insert(
        &self,
        keys: &Handle,
        values: &Handle,
        mask: Option<(&Handle, u32)>,
        n: usize,
        upsert: bool,
    );
    /// Records `ops` insert operations queued by [`BatchTable::queue_insert`].
    fn note_queued(&mut self, ops: usize);
    /// [`BatchTable::queue_insert`] and [`BatchTable::note_queued`] in one.
    fn insert_queued(
        &mut self,
        keys: &Handle,
        values: &Handle,
        mask: Option<(&Handle, u32)>,
        n: usize,
        upsert: bool,
    ) {
        self.queue_insert(keys, values, mask, n, upsert);
        self.note_queued(n);
    }
    /// Waits for queued inserts and returns their statistics and unplaced pairs (widened).
    fn settle_batch(&mut self) -> Result<(ProbeStats, Vec<(u64, u64)>)>;
}

/// Phase timings of the host path as `tracing` events (target `hashtile`, level TRACE): marks only
/// while a subscriber listens at that level (each mark waits for the device).
fn trace() -> Trace {
    Trace::new("host_path")
}

/// The duplicate pass's device buffers for a batch of `n` keys (see `crate::table::gpu::upsert`).
pub(crate) struct Dedup {
    n: usize,
    wide: bool,
    pub(crate) slots: usize,
    scratch: Handle,
    last: (Handle, usize),
    slot_of: Handle,
    /// One word: the batch position of the first sentinel key met by the claims (`u32::MAX`: none).
    guard: Handle,
}

impl Dedup {
    pub(crate) fn new<R: HostTransfer>(
        client: &ComputeClient<R>,
        cache: &DeviceCache,
        n: usize,
        wide: bool,
    ) -> Self {
        let slots = scratch_slots(n);
        // Cleared by `clear`, queued once the keys' copy has begun (so the clearing overlaps it).
        let scratch = cache.take(client, "dedup scratch", slots * 8);
        let last = if wide {
            (cache.take(client, "dedup last", slots * 4), slots)
        } else {
            (client.empty(4), 1)
        };
        let guard = client.empty(4);
        fill_u32(client, &guard, 1, u32::MAX);
        Self {
            n,
            wide,
            slots,
            scratch,
            last,
            slot_of: cache.take(client, "dedup slot", n * 4),
            guard,
        }
    }

    /// Queues the sentinel gate over the batch's `mask` of `m` entries (after every claim, before any insert).
    pub(crate) fn gate<R: HostTransfer>(&self, client: &ComputeClient<R>, mask: &Handle, m: usize) {
        // SAFETY: indices are bounded by `m` (the mask) and 1 (the guard word).
        unsafe {
            sentinel_gate_kernel::launch_unchecked::<R>(
                client,
                cube_count(m),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.guard.clone(), 1),
                ArrayArg::from_raw_parts(mask.clone(), m),
            )
        }
    }

    /// Queues the fold of the whole batch's duplicates into their last occurrences (after every claim):
    /// `reduced` is a copy of `values` (the batch's `n` values of type `V`), whose kept positions receive the
    /// reduction `F` of all their key's values (`crate::table::gpu::upsert::dedup_reduce_kernel`).
    pub(crate) fn reduce<V: Int, F: Reduce, R: HostTransfer>(
        &self,
        client: &ComputeClient<R>,
        values: &Handle,
        reduced: &Handle,
    ) {
        // SAFETY: indices are bounded by `n` or by the scratch table (slot indices come from the claims).
        unsafe {
            dedup_reduce_kernel::launch_unchecked::<V, F, R>(
                client,
                cube_count(self.n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.slot_of.clone(), self.n),
                ArrayArg::from_raw_parts(self.scratch.clone(), self.slots),
                ArrayArg::from_raw_parts(self.last.0.clone(), self.last.1),
                ArrayArg::from_raw_parts(values.clone(), self.n),
                ArrayArg::from_raw_parts(reduced.clone(), self.n),
                self.wide,
            )
        }
    }

    /// The batch position of the first sentinel key the claims met, if any (waits for them; one word).
    pub(crate) fn sentinel<R: HostTransfer>(&self, client: &ComputeClient<R>) -> Option<usize> {
        Self::sentinel_of(&client.read_one_unchecked(self.guard.clone()))
    }

    /// The sentinel guard's word (for a read together with other words; see [`Dedup::sentinel_of`]).
    pub(crate) fn guard(&self) -> Handle {
        self.guard.clone()
    }

    /// [`Dedup::sentinel`] of the guard's word as read back.
    pub(crate) fn sentinel_of(bytes: &[u8]) -> Option<usize> {
        let at = u32::from_bytes(bytes)[0];
        (at != u32::MAX).then_some(at as usize)
    }

    /// Queues the mark pass (and, with `classify`, the classify pass) after every claim, and returns the
    /// batch's mask.
    fn plan<R: HostTransfer, T: BatchTable<R>>(
        &self,
        t: &T,
        keys: &Handle,
        classify: bool,
    ) -> Handle {
        let mask = self.mark(t.client(), t.cache());
        if classify {
            t.classify(keys, None, &mask, self.n);
        }
        mask
    }

    /// Returns the buffers to `cache` (after the kernels that use them were queued; the cache's next user
    /// queues after them on the same stream, and copies wait for that stream).
    pub(crate) fn release(self, cache: &DeviceCache) {
        cache.give("dedup scratch", self.scratch, self.slots * 8);
        if self.wide {
            cache.give("dedup last", self.last.0, self.slots * 4);
        }
        cache.give("dedup slot", self.slot_of, self.n * 4);
    }

    /// Queues the clearing of the first `slots` slots of the scratch table (before the first claim).
    pub(crate) fn clear<R: HostTransfer>(&self, client: &ComputeClient<R>, slots: usize) {
        fill_u64(
            client,
            &self.scratch,
            slots,
            if self.wide { u64::MAX } else { 0 },
        );
        if self.wide {
            fill_u32(client, &self.last.0, slots, 0);
        }
    }

    /// Queues the whole duplicate pass for one segment of the batch, the `m` keys at positions `base..base + m`
    /// of `keys` (`m` at most the `n` this was made for): a scratch table of its own size (cleared first; a
    /// segment of a pinned copy's 2^20 keys then works in the GPU's L2 cache), the claims, and the mark into
    /// `mask` at the same positions. Each segment's mask thus keeps its own keys' last occurrences; duplicates
    /// across segments are the caller's to settle (see [`upload_and_plan_checked`]).
    pub(crate) fn segment<R: HostTransfer>(
        &self,
        client: &ComputeClient<R>,
        keys: &Handle,
        base: usize,
        m: usize,
        mask: &Handle,
    ) {
        debug_assert!(m <= self.n);
        let slots = scratch_slots(m);
        self.clear(client, slots);
        let kb = if self.wide { 8 } else { 4 };
        let keys = keys.clone().offset_start((base * kb) as u64);
        let args = (keys, self.slot_of.clone(), 0, base as u32, m);
        if self.wide {
            self.launch_claim::<u64, R>(client, args, slots);
        } else {
            self.launch_claim::<u32, R>(client, args, slots);
        }
        let mask = mask.clone().offset_start((base * 4) as u64);
        self.launch_mark(client, m, &mask, slots);
    }

    /// Queues phase 1 for the keys at positions `base..base + m` (`keys` holds the whole batch).
    pub(crate) fn claim<R: HostTransfer>(
        &self,
        client: &ComputeClient<R>,
        keys: &Handle,
        base: usize,
        m: usize,
    ) {
        let kb = if self.wide { 8 } else { 4 };
        let keys = keys.clone().offset_start((base * kb) as u64);
        let slot_of = self.slot_of.clone().offset_start((base * 4) as u64);
        let args = (keys, slot_of, base as u32, base as u32, m);
        if self.wide {
            self.launch_claim::<u64, R>(client, args, self.slots);
        } else {
            self.launch_claim::<u32, R>(client, args, self.slots);
        }
    }

    /// The claim launch for keys of type `K` (`u32` packed, `u64` wide): `(keys, slot_of, base, origin, m)` of a
    /// chunk (`base`: its first position in the scratch table's numbering; `origin`: in the batch), into the
    /// first `slots` slots of the scratch table (a power of two).
    fn launch_claim<K: Int, R: HostTransfer>(
        &self,
        client: &ComputeClient<R>,
        (keys, slot_of, base, origin, m): (Handle, Handle, u32, u32, usize),
        slots: usize,
    ) {
        // SAFETY: indices are bounded by `m` (the chunk) or masked into the scratch table.
        unsafe {
            dedup_claim_kernel::launch_unchecked::<K, R>(
                client,
                cube_count(m),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys, m),
                ArrayArg::from_raw_parts(self.scratch.clone(), slots),
                ArrayArg::from_raw_parts(self.last.0.clone(), self.last.1.min(slots)),
                ArrayArg::from_raw_parts(slot_of, m),
                ArrayArg::from_raw_parts(self.guard.clone(), 1),
                base,
                origin,
                self.wide,
            )
        }
    }

    /// Queues phase 2 (after every claim): the mask, 1 = insert (last occurrence), 0 = skip.
    pub(crate) fn mark<R: HostTransfer>(
        &self,
        client: &ComputeClient<R>,
        cache: &DeviceCache,
    ) -> Handle {
        let mask = cache.take(client, "dedup mask", self.n * 4);
        self.launch_mark(client, self.n, &mask, self.slots);
        mask
    }

    /// The mark launch over the first `n` entries of `slot_of` into `mask` (scratch of `slots` slots).
    fn launch_mark<R: HostTransfer>(
        &self,
        client: &ComputeClient<R>,
        n: usize,
        mask: &Handle,
        slots: usize,
    ) {
        // SAFETY: indices are bounded by `n` or by the scratch table (slot indices come from phase 1).
        unsafe {
            dedup_mark_kernel::launch_unchecked::<R>(
                client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.slot_of.clone(), n),
                ArrayArg::from_raw_parts(self.scratch.clone(), slots),
                ArrayArg::from_raw_parts(self.last.0.clone(), self.last.1.min(slots)),
                ArrayArg::from_raw_parts(mask.clone(), n),
                self.wide,
            );
        }
    }
}

/// Copies a device batch's keys (and then its values, if given) in chunks, queueing the duplicate pass's
/// claims chunk by chunk as the keys land (the values' copy overlaps the last claims); returns the keys' buffer,
/// the values' buffer (if any) and the duplicate mask (1 = insert, 0 = skip; with `classify`, 2 = stored).
fn upload_and_plan<R: HostTransfer, T: BatchTable<R>>(
    t: &T,
    keys: &[u8],
    values: Option<&[u8]>,
    m: usize,
    classify: bool,
) -> Result<(Handle, Option<Handle>, Handle)> {
    let (kh, vh, dedup, mask, _) =
        upload_and_plan_checked(t, keys, values, m, classify, None, false)?;
    dedup.release(t.cache());
    Ok((kh, vh, mask))
}

/// [`upload_and_plan`], with `sentinel` given also scanning the keys for the sentinel on the host, on a thread of
/// its own while the copies and claims go on: `sentinel` receives the first offending position (in the batch),
/// if any. Without `segmented` nothing is inserted by this function, so the caller can still refuse the batch
/// (with it, the device's sentinel gate keeps a refused batch out: see below). (The scan used to run
/// chunk by chunk inside the copy loop: on the H100 host it took 7-8 ms of the 2^26-key pinned insert's 15 ms
/// copy loop, holding back both the next copies and the claim launches.)
///
/// The mark (and classify) pass is queued as soon as the first chunk of the values has landed, so that it
/// runs while the rest of the values is copied (H100, 2^26 pinned pairs: the mark pass took 2.8 ms of 22 after
/// the copy); without values, after the keys' copy. The scratch buffers are returned with the mask; the caller
/// releases them.
///
/// With `segmented` (and values given) the batch is planned and inserted **segment by segment**, a
/// segment being one landed chunk, instead of as a whole: each key chunk gets the whole duplicate pass of its
/// own as it lands ([`Dedup::segment`]: a scratch table the size of the chunk, which stays in the GPU's L2 cache,
/// instead of claims over one scratch table of twice the batch in DRAM), and as each values chunk lands its
/// segment is classified against the table (stored keys updated in place) and its new keys inserted. Segments
/// are inserted in batch order on one stream, so a key repeated in a later segment is found stored by that
/// segment's classify pass and updated: the last occurrence still wins, and no update searches while an
/// eviction holds its key in flight (the classify launch moves no pair, and follows the previous segment's
/// inserts). H100, 2^26 pinned pairs: the whole-batch plan spent ~9 ms of GPU time in DRAM atomics and the mark
/// pass before any insert could start. The sentinel check is the claims' own in this mode (no host scan): every
/// key has landed and been claimed before the first values chunk, so the gate queued then
/// ([`sentinel_gate_kernel`]) clears the whole mask if any key was the sentinel, and nothing is inserted; the
/// caller reads [`Dedup::sentinel`] after settling. The returned count is the insert operations queued.
/// The whole-batch plan stays for batches that may not fit (their new keys are counted first) and for
/// `count_new`.
fn upload_and_plan_checked<R: HostTransfer, T: BatchTable<R>>(
    t: &T,
    keys: &[u8],
    values: Option<&[u8]>,
    m: usize,
    classify: bool,
    sentinel: Option<&mut Option<usize>>,
    segmented: bool,
) -> Result<(Handle, Option<Handle>, Dedup, Handle, usize)> {
    let client = t.client();
    let cache = t.cache();
    let kb = T::KEY_BYTES;
    let mut trace = trace();
    let segments = segmented && values.is_some();
    let chunk_keys = t.batch_sizes().chunk_for(m);
    let dedup = Dedup::new(
        client,
        cache,
        if segments { m.min(chunk_keys) } else { m },
        kb == 8,
    );
    trace.mark(client, "plan: scratch ready");
    let chunk = chunk_keys * kb;
    let srcs: Vec<&[u8]> = std::iter::once(keys).chain(values).collect();
    let dsts: Vec<Handle> = [
        ("keys", keys.len()),
        ("values", values.map_or(0, |v| v.len())),
    ][..srcs.len()]
        .iter()
        .map(|&(name, bytes)| cache.take(client, name, bytes))
        .collect();
    let vb = T::VALUE_BYTES;
    // The sentinel scan's answer (`Some(None)`: clean), set by its thread; no insert is queued before it.
    // Segments check on the device instead (the claims' own gate).
    let scanned: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let check = sentinel.is_some() && !segments;
    if !check {
        let _ = scanned.set(None);
    }
    // The sentinel gate is queued once, before the first segment's classify or insert.
    let gated = std::cell::Cell::new(false);
    let gate = |mask: &Handle| {
        if !gated.replace(true) {
            dedup.gate(client, mask, m);
        }
    };
    // Values chunks (first position, length) that landed before the scan came back.
    let mut ready: Vec<(usize, usize)> = Vec::new();
    let mut queued = 0usize;
    let mut mask = segments.then(|| cache.take(client, "dedup mask", m * 4));
    // The buffer the keys landed in (on Vulkan the upload allocates its own, not `dsts[0]`).
    let mut keys_handle: Option<Handle> = None;
    let mut on_landed = |src: usize, off: usize, len: usize, h: &Handle| {
        if src == 0 {
            if off == 0 {
                keys_handle = Some(h.clone());
                if !segments {
                    dedup.clear(client, dedup.slots);
                }
            }
            if segments {
                let mk = mask.as_ref().expect("allocated up front");
                dedup.segment(client, h, off / kb, len / kb, mk);
            } else {
                dedup.claim(client, h, off / kb, len / kb)
            }
        } else if segments {
            ready.push((off / vb, len / vb));
            if scanned.get() == Some(&None) {
                let kh = keys_handle.as_ref().expect("the keys landed first");
                let mk = mask.as_ref().expect("allocated up front");
                gate(mk);
                for (base, n) in ready.drain(..) {
                    queued += queue_segment(t, (kh, h, mk), base, n, classify || base > 0);
                }
            }
        } else if off == 0 {
            // Every key chunk has landed and its claims are queued: plan while the values arrive.
            let kh = keys_handle.as_ref().expect("the keys landed first");
            mask = Some(dedup.plan(t, kh, classify));
        }
    };
    let (uploaded, found) = std::thread::scope(|s| {
        let scanned = &scanned;
        let scan = check.then(|| {
            s.spawn(move || {
                let t0 = std::time::Instant::now();
                let found = sentinel_in(keys, kb);
                let _ = scanned.set(found);
                (found, t0.elapsed().as_secs_f64() * 1e3)
            })
        });
        let uploaded = R::upload_chunked(client, t.stager(), &srcs, &dsts, chunk, &mut on_landed);
        let found = scan.map(|h| h.join().expect("the sentinel scan panicked"));
        (uploaded, found)
    });
    if let Some((found, ms)) = found {
        tracing::trace!(target: "hashtile", phase = "sentinel scan (own thread)", ms);
        if let Some(out) = sentinel {
            *out = found;
        }
    }
    let mut h = uploaded?;
    let vh = (h.len() > 1).then(|| h.remove(1));
    let kh = h.remove(0);
    let mask = mask.unwrap_or_else(|| dedup.plan(t, &kh, classify));
    // Segments that landed before the scan came back (none are queued when it found a sentinel).
    if segments && scanned.get() == Some(&None) {
        let vh = vh.as_ref().expect("values were uploaded");
        gate(&mask);
        for (base, n) in ready.drain(..) {
            queued += queue_segment(t, (&kh, vh, &mask), base, n, classify || base > 0);
        }
    }
    trace.mark(client, "plan: copied, claims and plan done");
    Ok((kh, vh, dedup, mask, queued))
}

/// Queues one segment's insert (the `n` batch positions from `base`, whose duplicate pass is queued) over the
/// batch's `(keys, values, mask)`: with `stored` (the table may hold some of its keys), the classify pass, which
/// also updates the stored keys in place, then the new keys without the duplicate check. Returns the insert
/// operations queued.
fn queue_segment<R: HostTransfer, T: BatchTable<R>>(
    t: &T,
    (keys, values, mask): (&Handle, &Handle, &Handle),
    base: usize,
    n: usize,
    stored: bool,
) -> usize {
    let kh = keys.clone().offset_start((base * T::KEY_BYTES) as u64);
    let vh = values.clone().offset_start((base * T::VALUE_BYTES) as u64);
    let mk = mask.clone().offset_start((base * 4) as u64);
    if stored {
        t.classify(&kh, Some(&vh), &mk, n);
    }
    t.queue_insert(&kh, &vh, Some((&mk, MASK_NEW)), n, false);
    n
}

/// The position of the first all-ones key in `bytes` (keys of `kb` bytes), scanned with all cores.
fn sentinel_in(bytes: &[u8], kb: usize) -> Option<usize> {
    // The bytes are a `&[u32]` or `&[u64]` of the caller's, so they are aligned for their key type.
    if kb == 4 {
        // SAFETY: `bytes` came from a `&[u32]` (aligned, a whole number of keys).
        let keys: &[u32] =
            unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), bytes.len() / 4) };
        hashtile_core::element::first_sentinel(keys)
    } else {
        // SAFETY: `bytes` came from a `&[u64]` (aligned, a whole number of keys).
        let keys: &[u64] =
            unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), bytes.len() / 8) };
        hashtile_core::element::first_sentinel(keys)
    }
}

/// Counts the mask entries equal to `value` (one small read-back).
fn count<R: HostTransfer>(client: &ComputeClient<R>, mask: &Handle, n: usize, value: u32) -> usize {
    let counters = client.empty(ADDED_COUNTERS as usize * 4);
    fill_u32(client, &counters, ADDED_COUNTERS as usize, 0);
    // SAFETY: indices bounded by `n` and by the counter array (`CUBE_POS_X % ADDED_COUNTERS`).
    unsafe {
        count_mask_kernel::launch_unchecked::<R>(
            client,
            cube_count(n),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(mask.clone(), n),
            value,
            ArrayArg::from_raw_parts(counters.clone(), ADDED_COUNTERS as usize),
        )
    }
    u32::from_bytes(&client.read_one_unchecked(counters))
        .iter()
        .map(|&c| c as usize)
        .sum()
}

/// Device bytes one device batch of `n` keys needs beyond the table.
fn batch_bytes<R: HostTransfer, T: BatchTable<R>>(n: usize) -> u64 {
    let slots = scratch_slots(n) as u64;
    let per_slot = if T::KEY_BYTES == 8 { 12 } else { 8 };
    (n * (T::KEY_BYTES + T::VALUE_BYTES + 8)) as u64 + slots * per_slot
}

/// Upserts a host batch (`keys`, `values`: the device layout's bytes, `n` pairs; a set's `values` are ignored,
/// and nothing but its keys is copied). `distinct`: the caller guarantees distinct keys that are not stored
/// (rebuilds), so the duplicate passes are skipped.
pub(crate) fn upsert<R: HostTransfer, T: BatchTable<R>>(
    t: &mut T,
    keys: &[u8],
    values: &[u8],
    distinct: bool,
) -> Result<(ProbeStats, Vec<(u64, u64)>)> {
    let kb = T::KEY_BYTES;
    // A set copies no values: the kernels are handed the keys' buffer in their place and never read it.
    let vb = if T::HAS_VALUES { T::VALUE_BYTES } else { 0 };
    let n = keys.len() / kb;
    // The sentinel check rides along the copy of a single device batch (see `upload_and_plan_checked`);
    // a larger batch is scanned first, so that a sentinel in a later device batch leaves the table unchanged.
    if !distinct
        && n > t.batch_sizes().insert
        && let Some(index) = sentinel_in(keys, kb)
    {
        return Err(Error::SentinelKey { index });
    }
    let mut stats = ProbeStats::default();
    let mut lost = Vec::new();
    let batch = t.batch_sizes().insert;
    for (start, m) in device_batches(n, batch) {
        check_device_memory::<R>(t.stager(), "an insert batch", batch_bytes::<R, T>(m))?;
        let batch_keys = &keys[start * kb..(start + m) * kb];
        let batch_values = T::HAS_VALUES.then(|| &values[start * vb..(start + m) * vb]);
        // A segmented plan's sentinel guard, read once the batch has settled (see `upload_and_plan_checked`).
        let mut guarded = None;
        if distinct {
            let kh = R::upload(t.client(), t.stager(), batch_keys)?;
            let vh = match batch_values {
                Some(v) => R::upload(t.client(), t.stager(), v)?,
                None => kh.clone(),
            };
            t.insert_queued(&kh, &vh, None, m, false);
        } else {
            let had_pairs = t.stored() > 0;
            let mut trace = trace();
            // The claims run while the keys are still arriving; the values' copy overlaps the last claims.
            let mut sentinel = None;
            // Unless the batch may not fit (then its new keys are counted first, below), the batch is planned
            // and inserted segment by segment as the chunks land.
            let segmented = t.stored() + m <= t.slots();
            let (kh, vh, dedup, mask, queued) = upload_and_plan_checked(
                t,
                batch_keys,
                batch_values,
                m,
                had_pairs,
                Some(&mut sentinel),
                segmented,
            )?;
            // A set's batch has no values buffer of its own: its launches get the keys' in their place (see
            // above); only a buffer of its own goes back to the cache.
            let vh_in = vh.clone().unwrap_or_else(|| kh.clone());
            if let Some(i) = sentinel {
                debug_assert_eq!(queued, 0, "nothing is inserted before the scan is clean");
                dedup.release(t.cache());
                // Only scratch buffers and the mask were written: the table is unchanged.
                give_batch(t.cache(), (kh, vh, mask), m, (kb, vb));
                return Err(Error::SentinelKey { index: start + i });
            }
            if queued > 0 {
                // The segments' inserts are queued already.
                t.note_queued(queued);
                give_batch(t.cache(), (kh, vh, mask), m, (kb, vb));
                guarded = Some(dedup);
            } else {
                dedup.release(t.cache());
                // Near a full table, the batch's new keys are counted from the same mask (one small read)
                // before anything is inserted: a batch that does not fit is refused with the table unchanged.
                if t.stored() + m > t.slots() {
                    let incoming = count(t.client(), &mask, m, MASK_NEW);
                    if t.stored() + incoming > t.slots() {
                        give_batch(t.cache(), (kh, vh, mask), m, (kb, vb));
                        return Err(Error::CapacityExceeded {
                            len: t.stored(),
                            incoming,
                            capacity: t.slots(),
                        });
                    }
                }
                trace.mark(
                    t.client(),
                    "insert: keys and values copied, duplicates planned",
                );
                if had_pairs {
                    // Updates first, in a launch of their own: they never evict, so no key is in flight while
                    // they search; then the new keys, distinct and absent, without the duplicate check.
                    t.insert_queued(&kh, &vh_in, Some((&mask, MASK_UPDATE)), m, true);
                }
                t.insert_queued(&kh, &vh_in, Some((&mask, MASK_NEW)), m, false);
                give_batch(t.cache(), (kh, vh, mask), m, (kb, vb));
            }
        }
        let mut trace = trace();
        let settled = t.settle_batch();
        let found = guarded.and_then(|dedup| {
            let found = dedup.sentinel(t.client());
            dedup.release(t.cache());
            found
        });
        let (s, mut l) = settled?;
        trace.mark(t.client(), "insert: inserts settled");
        if let Some(i) = found {
            // The gate cleared every mask: nothing of this batch was inserted.
            return Err(Error::SentinelKey { index: start + i });
        }
        stats = stats.merged(s);
        lost.append(&mut l);
    }
    Ok((stats, lost))
}

/// Returns a device batch's keys, values (a set's batch has none of its own) and mask (`m` entries; `kb` / `vb` bytes per key / value) to `cache`.
fn give_batch(
    cache: &DeviceCache,
    (keys, values, mask): (Handle, Option<Handle>, Handle),
    m: usize,
    (kb, vb): (usize, usize),
) {
    cache.give("keys", keys, m * kb);
    if let Some(values) = values {
        cache.give("values", values, m * vb);
    }
    cache.give("dedup mask", mask, m * 4);
}

/// Counts the distinct keys of a host batch that are not stored (the capacity check near a full table).
/// Batches larger than one device batch are counted per device batch (a key repeated across them counts more
/// than once: an over-estimate, never an under-estimate).
pub(crate) fn count_new<R: HostTransfer, T: BatchTable<R>>(t: &T, keys: &[u8]) -> Result<usize> {
    let kb = T::KEY_BYTES;
    let n = keys.len() / kb;
    let mut new = 0;
    let batch = t.batch_sizes().insert;
    for (start, m) in device_batches(n, batch) {
        check_device_memory::<R>(t.stager(), "a capacity check", batch_bytes::<R, T>(m))?;
        let (kh, _, mask) = upload_and_plan(
            t,
            &keys[start * kb..(start + m) * kb],
            None,
            m,
            t.stored() > 0,
        )?;
        new += count(t.client(), &mask, m, MASK_NEW);
        t.cache().give("keys", kh, m * kb);
        t.cache().give("dedup mask", mask, m * 4);
    }
    Ok(new)
}
