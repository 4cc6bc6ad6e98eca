//! GPU backends through CubeCL: one generic engine, [`GpuTable`], for any CubeCL runtime (CUDA, Vulkan) and
//! any key layout ([`layout`]: [`Packed`] 32-bit pairs in one `u64` word, [`Wide`] pairs in parallel `u64`
//! arrays); the kernels are written once and instantiated per scheme and layout. Bulk calls take host slices or
//! device handles (no host round trip when the data is already on the GPU).
//!
//! **Device-resident, stream-ordered calls.** [`GpuTable::insert_device_async`] and [`GpuTable::find_device`]
//! queue their kernels and return at once, so
//! several operations can be queued back to back; each runs after the previous ones on the table's stream.
//! [`GpuTable::settle`] waits for the queued inserts and reads their counters (new keys, failures); read
//! results with the client once everything is queued. Handles of your own data come from the table's client:
//!
//! ```no_run
//! # #[cfg(feature = "cuda")] {
//! use cubecl::prelude::*;
//! use hashtile_backends::gpu::{GpuOptions, GpuTable};
//! use hashtile_core::{HashFamily, scheme::SchemeInfo};
//! use hashtile_probing::Bcht;
//! type R = cubecl::cuda::CudaRuntime;
//! let opts = GpuOptions { use_cas: true, plain_reads: true };
//! let mut t = GpuTable::<R, Bcht>::new(&Default::default(), 1 << 10, 8, HashFamily::new(1),
//!     Bcht::default_params(8), opts)?;
//! let keys: Vec<u32> = (0..1000).collect();
//! let kh = t.client().create_from_slice(u32::as_bytes(&keys)); // or t.upload(&keys)
//! let vh = t.upload(&keys);
//! t.insert_device_async(&kh, &vh, keys.len()); // queued, returns at once
//! let out = t.alloc_u32(keys.len());
//! t.find_device(&kh, &out, None, keys.len()); // queued after the insert
//! let lost = t.settle()?; // waits, reads the insert's counters
//! assert!(lost.pairs.is_empty());
//! let values = t.read_u32(out); // waits for the find, copies back
//! assert_eq!(values[7], 7);
//! # }
//! # Ok::<(), hashtile_core::Error>(())
//! ```

pub mod build;
pub mod erase;
pub(crate) mod host_path;
pub mod kernels;
pub mod upsert;

use crate::device::layout::{KeyLayout, Packed};
use crate::device::shape::ShapeScalarsLaunch;
use crate::device::shape::{SHAPE_WORDS, shape_scalars, shape_words_of, tile_width_for};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32, fill_u64};
use crate::runtime::transfer::{HostTransfer, PinnedAlloc};
use crate::runtime::words::{bytes_of, bytes_of_mut, with_words_mut, words_of};
use crate::table::engine::{Engine, Inserted};
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::{ProbingScheme, SchemeParams};
use hashtile_core::tile::EMPTY_WORD;
use hashtile_core::{Element, Error, HashFamily, Key, ProbeStats, Result, Value};
use host_path::BatchTable;
use kernels::{ADDED_COUNTERS, INSERT_COUNTERS, found_mode, select};
use std::marker::PhantomData;

/// How a GPU table claims slots (chosen from the runtime's compiler).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuOptions {
    /// Claim empty slots with compare-and-swap (else: exchange and re-insert whatever was displaced).
    pub use_cas: bool,
    /// Read buckets with plain loads during inserts (else atomic loads).
    pub plain_reads: bool,
}

/// A static hash table on a CubeCL device, driven by scheme `S`, its pairs laid out by `L` ([`layout`]:
/// [`Packed`] 32-bit pairs by default, [`Wide`] pairs in parallel `u64` arrays for stable schemes).
pub struct GpuTable<R: HostTransfer, S: ProbingScheme, L: KeyLayout = Packed> {
    pub(crate) client: ComputeClient<R>,
    /// Host-path copies (CUDA: a stream and pinned staging buffers; the table's own, or the process's shared
    /// one for tables that come in numbers: the children of a paged table).
    pub(crate) stager: std::sync::Arc<R::Stager>,
    /// How host batches are cut for the device.
    pub(crate) batch: host_path::BatchSizes,
    /// Host-path buffers kept between calls.
    pub(crate) cache: host_path::DeviceCache,
    /// The key words (`L::KEY_SHIFT`; all ones = empty).
    pub(crate) keys: Handle,
    /// The values where the layout keeps them apart; for [`Packed`] a one-word buffer of its own (never read).
    pub(crate) values: Handle,
    pub(crate) values_len: usize,
    pub(crate) shape: Handle,
    pub(crate) num_buckets: u32,
    pub(crate) bucket_size: u32,
    pub(crate) tile_width: u32,
    pub(crate) family: HashFamily,
    pub(crate) params: SchemeParams,
    pub(crate) options: GpuOptions,
    pub(crate) len: usize,
    /// The stash: receives the pairs an insert gives up on (`L::STASH_WORDS` each). Allocated once with the table
    /// (allocating a batch-sized buffer per insert cost more than the insert kernel itself), `stash_len` pairs.
    pub(crate) stash: Handle,
    pub(crate) stash_len: usize,
    /// Inserts were queued since the counters were last read.
    pub(crate) unsettled: bool,
    /// A one-word buffer passed where a kernel argument is unused.
    pub(crate) dummy: Handle,
    /// The key word of erased slots while the table may hold some (`Engine::erase_stored`), else
    /// `EMPTY_WORD` (a no-op wherever slots are scanned).
    pub(crate) erased: u64,
    /// Count probes on the device (compiled in only when on).
    pub(crate) count_probes: bool,
    /// Spread-out probe counters of the last counted find.
    pub(crate) find_probes: Handle,
    /// Keys queued by inserts since the last settle.
    pub(crate) pending_ops: u64,
    /// Probe statistics of the inserts read by the last settle.
    pub(crate) last_insert_probes: ProbeStats,
    pub(crate) counters: Handle,
    pub(crate) _scheme: PhantomData<(S, L)>,
}

/// Stash pairs of a table of `slots` slots. Failures are rare below the scheme's achievable load; 1/16 of the
/// slots is far more than a build that can succeed ever hands back, and overflow is counted, never silent.
pub(crate) fn stash_len_for(slots: usize) -> usize {
    (slots / 16).clamp(1024.min(slots), slots.max(1))
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// An empty table of `num_buckets` buckets of `bucket_size` slots on `device`. A layout that does not
    /// move pairs ([`Wide`]) needs `options.use_cas` (its claims are a compare-and-swap of the key word).
    pub fn new(
        device: &R::Device,
        num_buckets: u32,
        bucket_size: u32,
        family: HashFamily,
        params: SchemeParams,
        options: GpuOptions,
    ) -> Result<Self> {
        Self::build(
            R::client(device),
            num_buckets,
            bucket_size,
            family,
            params,
            options,
            false,
        )
    }

    /// [`GpuTable::new`], copying through the process's shared stager instead of a stream and staging ring
    /// of its own: for tables that come in numbers, such as the children of a paged table.
    pub fn new_sharing_stager(
        device: &R::Device,
        num_buckets: u32,
        bucket_size: u32,
        family: HashFamily,
        params: SchemeParams,
        options: GpuOptions,
    ) -> Result<Self> {
        Self::build(
            R::client(device),
            num_buckets,
            bucket_size,
            family,
            params,
            options,
            true,
        )
    }

    /// [`GpuTable::new`] on `client`, with a stager of its own or the process's shared one.
    pub(crate) fn build(
        client: ComputeClient<R>,
        num_buckets: u32,
        bucket_size: u32,
        family: HashFamily,
        params: SchemeParams,
        options: GpuOptions,
        share_stager: bool,
    ) -> Result<Self> {
        if !L::MOVES_PAIRS && !options.use_cas {
            return Err(Error::InvalidConfig(format!(
                "{} are claimed with compare-and-swap; GpuOptions::use_cas must be on",
                L::NAME
            )));
        }
        let tile_width = tile_width_for(&client, bucket_size)?;
        let slots = num_buckets as usize * bucket_size as usize;
        let stager = if share_stager {
            crate::runtime::dispatch::shared_stager(&client)?
        } else {
            std::sync::Arc::new(R::stager(&client)?)
        };
        let batch = host_path::BatchSizes::DEFAULT;
        let values_len = if L::MOVES_PAIRS { 1 } else { slots.max(1) };
        let table_bytes = (slots + if L::MOVES_PAIRS { 0 } else { slots }) as u64 * 8;
        host_path::check_device_memory::<R>(&stager, "the table", table_bytes)?;
        let keys = client.empty(slots.max(1) * 8);
        let values = client.empty(values_len * 8);
        let shape = client.empty(SHAPE_WORDS * 4);
        let counters = client.empty(INSERT_COUNTERS * 4);
        let find_probes = client.empty(ADDED_COUNTERS as usize * 4);
        // Failures are rare below the scheme's achievable load; 1/16 of the slots is far more than a build
        // that can succeed ever hands back, and overflow is counted, never silent.
        let stash_len = stash_len_for(slots);
        let stash = client.empty(stash_len * 8 * L::STASH_WORDS);
        let dummy = client.empty(8);
        let mut t = Self {
            client,
            stager,
            batch,
            cache: Default::default(),
            keys,
            values,
            values_len,
            shape,
            num_buckets,
            bucket_size,
            tile_width,
            family,
            params,
            options,
            len: 0,
            stash,
            stash_len,
            unsettled: false,
            erased: EMPTY_WORD,
            dummy,
            count_probes: false,
            find_probes,
            pending_ops: 0,
            last_insert_probes: ProbeStats::default(),
            counters,
            _scheme: PhantomData,
        };
        t.upload_shape();
        t.fill_empty();
        t.reset_counters();
        Ok(t)
    }

    fn upload_shape(&mut self) {
        self.shape = self
            .client
            .create_from_slice(u32::as_bytes(&self.shape_words()));
    }

    fn fill_empty(&mut self) {
        self.erased = EMPTY_WORD;
        fill_u64(&self.client, &self.keys, self.capacity(), EMPTY_WORD);
        self.len = 0;
    }

    /// The table's shape as the `u32` words kernels read (see [`crate::device::shape::load_meta`]).
    pub fn shape_words(&self) -> [u32; SHAPE_WORDS] {
        shape_words_of(self.num_buckets, self.family, self.params)
    }

    /// The shape words as the internal kernels take them: scalar arguments, which CUDA keeps in constant memory
    /// instead of 13 registers per thread (the insert kernel is limited by registers and instruction issue).
    fn shape_arg(&self) -> ShapeScalarsLaunch<R> {
        shape_scalars(self.shape_words())
    }

    /// The compute client (to allocate buffers and launch your own kernels on the same device).
    pub fn client(&self) -> &ComputeClient<R> {
        &self.client
    }

    /// Device handles for calling [`crate::device::find::tile_find`] from your own kernel (see [`DeviceRef`]).
    pub fn device_ref(&self) -> DeviceRef {
        DeviceRef {
            keys: self.keys.clone(),
            values: self.values.clone(),
            values_len: self.values_len,
            slots: self.capacity(),
            shape: self.shape.clone(),
            bucket_size: self.bucket_size,
            tile_width: self.tile_width,
        }
    }

    /// Lanes per tile (`min(B, plane size)`).
    pub fn tile_width(&self) -> u32 {
        self.tile_width
    }

    /// Inserts `n` pairs already on the device (`keys` and `values`: `n` elements of the layout's key and value
    /// types each) and waits for the result. Keys must not be the sentinel (not checked on the device) and
    /// should be distinct (see NOTES.md on duplicates in one device batch). Returns what could not be placed
    /// (normally nothing).
    pub fn insert_device(&mut self, keys: &Handle, values: &Handle, n: usize) -> Result<Unplaced> {
        self.insert_device_async(keys, values, n);
        self.settle()
    }

    /// Queues an insert of `n` device-resident pairs and returns at once (no host round trip). Counts of new
    /// keys and failures accumulate on the device until [`GpuTable::settle`] reads them; call it before
    /// trusting `len()`, and before queueing so many failures that the stash overflows.
    pub fn insert_device_async(&mut self, keys: &Handle, values: &Handle, n: usize) {
        self.launch_insert(keys, values, Selection::All, n, None);
    }

    /// Queues the insert kernel over the positions whose mask equals the given mode (all when `None`), with
    /// the table's upsert setting or `upsert` instead.
    fn launch_insert(
        &mut self,
        keys: &Handle,
        values: &Handle,
        which: Selection,
        n: usize,
        upsert: Option<bool>,
    ) {
        self.queue_insert_kernel(keys, values, which, n, upsert, &self.counters);
        self.note_queued(n);
    }

    /// Records `n` queued insert operations for the next [`GpuTable::settle`].
    fn note_queued(&mut self, n: usize) {
        if n > 0 {
            self.unsettled = true;
            self.pending_ops += n as u64;
        }
    }

    /// Queues the insert kernel only (the caller records the operations with `note_queued`), so that the host
    /// path can queue it from inside a transfer's callback, where it holds the table shared. It counts into
    /// `counters` (the table's own, or a routed batch's share).
    fn queue_insert_kernel(
        &self,
        keys: &Handle,
        values: &Handle,
        which: Selection,
        n: usize,
        upsert: Option<bool>,
        counters: &Handle,
    ) {
        if n == 0 {
            return;
        }
        let mut shape = self.shape_words();
        if let Some(u) = upsert {
            shape[8] = u as u32;
        }
        let dummy = (self.dummy.clone(), 1usize);
        let (kind, (mask_handle, mask_len), mode) = match which {
            Selection::All => (select::ALL, dummy, 0),
            Selection::Mask(m, mode) => (select::MASK, (m.clone(), n), mode),
        };
        // SAFETY: every array index in the kernel is bounded by the array lengths passed here or by the table's
        // shape, which matches the table allocation.
        unsafe {
            kernels::insert_kernel::launch_unchecked::<S, L, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(values.clone(), n),
                ArrayArg::from_raw_parts(mask_handle, mask_len),
                mode,
                ArrayArg::from_raw_parts(self.keys.clone(), self.capacity()),
                if self.options.plain_reads {
                    ArrayArg::from_raw_parts(self.keys.clone(), self.capacity())
                } else {
                    // Never bind a buffer twice in one launch: wgpu mis-binds the second use.
                    ArrayArg::from_raw_parts(self.dummy.clone(), 1)
                },
                ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                ArrayArg::from_raw_parts(self.stash.clone(), L::STASH_WORDS * self.stash_len),
                ArrayArg::from_raw_parts(counters.clone(), INSERT_COUNTERS),
                shape_scalars(shape),
                self.bucket_size,
                self.tile_width,
                self.options.use_cas,
                self.options.plain_reads,
                self.count_probes,
                kind,
            )
        }
    }

    /// Waits for queued inserts, reads their counters (one small device-to-host copy), updates `len()`, and
    /// returns what they could not place.
    pub fn settle(&mut self) -> Result<Unplaced> {
        if !self.unsettled {
            return Ok(Unplaced::default());
        }
        self.unsettled = false;
        let c = self.read_u32(self.counters.clone());
        let ops = std::mem::take(&mut self.pending_ops);
        let out = self.settle_counters(&c, ops);
        self.reset_counters();
        Ok(out)
    }

    /// Applies insert counters read back (`ops` operations): `len()`, the probe statistics, and the pairs the
    /// inserts gave up on (read from the stash).
    pub(crate) fn settle_counters(&mut self, c: &[u32], ops: u64) -> Unplaced {
        let (nfailed, added, stats) = kernels::decode_insert_counters(c, ops);
        self.len += added;
        self.last_insert_probes = stats;
        let mut out = Unplaced {
            pairs: Vec::new(),
            untracked: nfailed.saturating_sub(self.stash_len),
        };
        if nfailed > 0 {
            let words = self.read_u64(self.stash.clone());
            out.pairs =
                crate::device::layout::decode_stash::<L>(&words, nfailed.min(self.stash_len));
        }
        out
    }

    fn reset_counters(&self) {
        self.zero_u32(&self.counters, INSERT_COUNTERS);
    }

    fn zero_u32(&self, h: &Handle, n: usize) {
        fill_u32(&self.client, h, n, 0);
    }

    /// Sets the keys per device batch and per find chunk of the host path (`None`: the defaults, see
    /// [`host_path::BatchSizes`]).
    pub fn set_batch_keys(&mut self, keys: Option<usize>) {
        self.batch = host_path::BatchSizes::from_keys(keys);
    }

    /// Turns device probe counting on or off. Off (the default) compiles the counting out of the kernels.
    pub fn set_count_probes(&mut self, on: bool) {
        self.count_probes = on;
    }

    /// Probe statistics of the inserts read by the last [`GpuTable::settle`] (zero probes when not counting).
    pub fn last_insert_probes(&self) -> ProbeStats {
        self.last_insert_probes
    }

    /// Probe statistics of the last counted `find_device` of `ops` keys (reads the device counters).
    pub fn last_find_probes(&self, ops: usize) -> ProbeStats {
        let probes = if self.count_probes {
            self.read_u32(self.find_probes.clone())
                .iter()
                .map(|&x| x as u64)
                .sum()
        } else {
            0
        };
        ProbeStats {
            probes,
            ops: ops as u64,
            retries: 0,
        }
    }

    /// Finds `n` keys already on the device, writing values (all ones where absent) to `out` (`n` elements of
    /// the layout's value type) and, if given, 1/0 flags to `found` (`n` `u32`s). Nothing crosses to the host;
    /// the launch is queued, not awaited.
    pub fn find_device(&self, keys: &Handle, out: &Handle, found: Option<&Handle>, n: usize) {
        let mode = if found.is_some() {
            found_mode::FLAGS
        } else {
            found_mode::NONE
        };
        self.launch_find(keys, out, found, mode, n);
    }

    /// Queues the find kernel with presence reported per `mode` ([`found_mode`]) into `found`.
    pub(crate) fn launch_find(
        &self,
        keys: &Handle,
        out: &Handle,
        found: Option<&Handle>,
        mode: u32,
        n: usize,
    ) {
        if n == 0 {
            return;
        }
        let found_handle = found.unwrap_or(out).clone();
        let bits_len = if mode == found_mode::BITS {
            n.div_ceil(32)
        } else {
            1
        };
        let (flags, bits) = if mode == found_mode::BITS {
            (self.dummy.clone(), found_handle)
        } else {
            (found_handle, self.dummy.clone())
        };
        let (probe_handle, probe_len) = if self.count_probes {
            self.zero_u32(&self.find_probes, ADDED_COUNTERS as usize);
            (self.find_probes.clone(), ADDED_COUNTERS as usize)
        } else {
            (self.dummy.clone(), 1)
        };
        // SAFETY: indices are bounded by `n` (the lengths of keys/out/found) and by the table's shape.
        unsafe {
            kernels::find_kernel::launch_unchecked::<S, L, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(self.keys.clone(), self.capacity()),
                ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                ArrayArg::from_raw_parts(out.clone(), n),
                ArrayArg::from_raw_parts(flags, if mode == found_mode::FLAGS { n } else { 1 }),
                ArrayArg::from_raw_parts(bits, bits_len),
                self.shape_arg(),
                ArrayArg::from_raw_parts(probe_handle, probe_len),
                self.bucket_size,
                self.tile_width,
                mode,
                self.count_probes,
            )
        }
    }

    /// Uploads elements (the layout's keys or values, or anything else a kernel of yours reads) to a new device
    /// buffer.
    pub fn upload<E: Element>(&self, data: &[E]) -> Handle {
        self.client.create_from_slice(bytes_of(data))
    }

    /// A new uninitialised device buffer of `n` `u32`s.
    pub fn alloc_u32(&self, n: usize) -> Handle {
        self.client.empty(n.max(1) * 4)
    }

    /// A new uninitialised device buffer of `n` `u64`s.
    pub fn alloc_u64(&self, n: usize) -> Handle {
        self.client.empty(n.max(1) * 8)
    }

    /// Reads a device buffer of `u32`s back.
    pub fn read_u32(&self, h: Handle) -> Vec<u32> {
        u32::from_bytes(&self.client.read_one_unchecked(h)).to_vec()
    }

    /// Reads a device buffer of `u64`s back.
    pub fn read_u64(&self, h: Handle) -> Vec<u64> {
        u64::from_bytes(&self.client.read_one_unchecked(h)).to_vec()
    }

    /// Waits for all queued device work.
    pub fn sync(&self) -> Result<()> {
        cubecl::future::block_on(self.client.sync())
            .map_err(|e| Error::InvalidConfig(format!("device error: {e:?}")))
    }

    /// Every stored pair as `(slot index, key, value)`, widened (reads the table back).
    fn stored_slots(&self) -> Vec<(usize, u64, u64)> {
        let mut keys = self.read_u64(self.keys.clone());
        if self.erased != EMPTY_WORD {
            // Erased slots hold no pair.
            for w in keys.iter_mut().filter(|w| **w == self.erased) {
                *w = EMPTY_WORD;
            }
        }
        let values = if L::MOVES_PAIRS {
            Vec::new()
        } else {
            self.read_u64(self.values.clone())
        };
        decode_slots::<L>(&keys, &values)
    }

    /// Bytes of the slot arrays.
    pub(crate) fn slot_bytes(&self) -> u64 {
        (self.capacity() + if L::MOVES_PAIRS { 0 } else { self.values_len }) as u64 * 8
    }

    /// Frees the slot, stash and host-path buffers, leaving one-word stand-ins that keep the handles valid
    /// (an owner that keeps the slots elsewhere meanwhile: a paged table's child, paged out). Nothing may run
    /// on the table until [`GpuTable::install_slots`].
    pub(crate) fn stand_in_slots(&mut self) {
        self.keys = self.client.empty(8);
        if !L::MOVES_PAIRS {
            self.values = self.client.empty(8);
        }
        self.stash = self.client.empty(8);
        self.cache.clear();
    }

    /// Puts slot buffers holding the table's slots in place (`values` where the layout keeps them apart) and
    /// allocates the stash again: undoes [`GpuTable::stand_in_slots`].
    pub(crate) fn install_slots(&mut self, keys: Handle, values: Option<Handle>) {
        self.set_slots(keys, values);
        self.stash = self.client.empty(self.stash_len * 8 * L::STASH_WORDS);
    }

    /// Points the table at other slot buffers holding its slots (a copy of them: moved elsewhere on the device,
    /// such as a sub-range of a larger buffer); `values` where the layout keeps them apart.
    pub(crate) fn set_slots(&mut self, keys: Handle, values: Option<Handle>) {
        self.keys = keys;
        if let Some(v) = values.filter(|_| !L::MOVES_PAIRS) {
            self.values = v;
        }
    }

    /// Empties the table under `family` and zeroes its insert counters (rebuilds from unpacked slots).
    pub(crate) fn empty_under(&mut self, family: HashFamily) {
        self.family = family;
        self.upload_shape();
        self.fill_empty();
        self.reset_counters();
    }

    /// An empty table of this one's shape, options, probe counting and batch sizes under `family`, on the same
    /// client, copying through the process's shared stager.
    pub(crate) fn empty_like(&self, family: HashFamily) -> Result<Self> {
        let mut t = Self::build(
            self.client.clone(),
            self.num_buckets,
            self.bucket_size,
            family,
            self.params,
            self.options,
            true,
        )?;
        t.count_probes = self.count_probes;
        t.batch = self.batch;
        Ok(t)
    }

    /// Inserts the `n` device pairs (`keys`, `values`: the layout's types) whose `mask` is `mode`, all distinct
    /// and not stored, and waits: returns the pairs it could not place.
    pub(crate) fn insert_masked(
        &mut self,
        keys: &Handle,
        values: &Handle,
        mask: &Handle,
        mode: u32,
        n: usize,
    ) -> Result<Vec<(u64, u64)>> {
        self.launch_insert(keys, values, Selection::Mask(mask, mode), n, Some(false));
        self.settle_all()
    }

    /// Queues an upsert of `n` distinct device keys that fit (`keys`, `values`; `mask`: `n` words, each
    /// [`upsert::MASK_NEW`]) as a segment of the host path: stored keys are updated in place by the classify
    /// pass, then the new ones go in without the duplicate check, counting into `counters`
    /// ([`INSERT_COUNTERS`] words, read back by the caller and applied by [`GpuTable::settle_counters`]).
    pub(crate) fn queue_upsert_distinct(
        &self,
        keys: &Handle,
        values: &Handle,
        mask: &Handle,
        n: usize,
        counters: &Handle,
    ) {
        if self.len > 0 {
            BatchTable::classify(self, keys, Some(values), mask, n);
        }
        let which = Selection::Mask(mask, upsert::MASK_NEW);
        self.queue_insert_kernel(keys, values, which, n, Some(false), counters);
    }

    /// [`GpuTable::settle`], with an overflowed stash as the typed error.
    fn settle_all(&mut self) -> Result<Vec<(u64, u64)>> {
        let lost = self.settle()?;
        if lost.untracked > 0 {
            return Err(Error::StashOverflow {
                untracked: lost.untracked,
                unplaced: lost.pairs,
            });
        }
        Ok(lost.pairs)
    }
}

/// Every stored pair of a table's key (and, for layouts that keep them apart, value) words as
/// `(slot index, key, value)`, widened.
fn decode_slots<L: KeyLayout>(keys: &[u64], values: &[u64]) -> Vec<(usize, u64, u64)> {
    keys.iter()
        .copied()
        .enumerate()
        .filter(|(_, w)| *w != EMPTY_WORD)
        .map(|(i, w)| {
            let (k, v) = crate::device::layout::decode_slot::<L>(w, values.get(i).copied());
            (i, k, v)
        })
        .collect()
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    fn upsert_typed<K: Key, V: Value>(
        &mut self,
        keys: &[K],
        values: &[V],
        distinct: bool,
    ) -> Result<Inserted<K, V>> {
        let k = words_of::<K, L::Key>(keys);
        let v = words_of::<V, L::Value>(values);
        let (stats, lost) = host_path::upsert(self, bytes_of(&k), bytes_of(&v), distinct)?;
        Ok(Inserted {
            stats,
            unplaced: lost
                .into_iter()
                .map(|(k, v)| (K::narrow(k), V::narrow(v)))
                .collect(),
        })
    }

    /// Finds host keys of the layout's type into `out` (all ones where absent) and, if given, presence bits.
    fn find_words(
        &self,
        keys: &[L::Key],
        out: &mut [L::Value],
        found: Option<&mut [u32]>,
    ) -> Result<ProbeStats> {
        let mode = if found.is_some() {
            found_mode::BITS
        } else {
            found_mode::NONE
        };
        let (kb, vb) = (size_of::<L::Key>(), size_of::<L::Value>());
        host_path::find::<R>(
            &self.client,
            &self.stager,
            &self.cache,
            bytes_of(keys),
            kb,
            bytes_of_mut(out),
            vb,
            found,
            self.batch,
            |kh, oh, bits, n| self.launch_find(kh, oh, bits, mode, n),
        )?;
        Ok(self.last_find_probes(keys.len()))
    }
}

/// Which positions an insert launch inserts (the kernel's `select`).
enum Selection<'a> {
    All,
    Mask(&'a Handle, u32),
}

/// What an insert could not place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unplaced {
    /// Pairs handed back (widened to `u64`).
    pub pairs: Vec<(u64, u64)>,
    /// Pairs that could not be placed **and** did not fit the stash, so their contents are unknown. Only
    /// possible when over 1/16 of the table fails in one call, far beyond any scheme's achievable load.
    pub untracked: usize,
}

/// What a user kernel needs to call the table's device API ([`crate::device::find::tile_find`] with the table's scheme
/// and layout; its `meta` from [`crate::device::shape::load_meta`] of `shape`).
#[derive(Debug, Clone)]
pub struct DeviceRef {
    /// The key words (`&Array<u64>` in the kernel, `slots` long).
    pub keys: Handle,
    /// The value words (`&Array<u64>`, `values_len` long): the values of a [`Wide`] table, one unused word
    /// for a [`Packed`] one (whose values sit in the key words).
    pub values: Handle,
    /// Length of `values`.
    pub values_len: usize,
    /// Number of slots.
    pub slots: usize,
    /// The shape words (`&Array<u32>`, length [`SHAPE_WORDS`]).
    pub shape: Handle,
    /// Compile-time bucket size to instantiate the kernel with.
    pub bucket_size: u32,
    /// Compile-time tile width to instantiate the kernel with.
    pub tile_width: u32,
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> BatchTable<R> for GpuTable<R, S, L> {
    const KEY_BYTES: usize = size_of::<L::Key>();
    const VALUE_BYTES: usize = size_of::<L::Value>();
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
        self.capacity()
    }
    fn batch_sizes(&self) -> host_path::BatchSizes {
        self.batch
    }
    fn cache(&self) -> &host_path::DeviceCache {
        &self.cache
    }
    fn classify(&self, keys: &Handle, values: Option<&Handle>, mask: &Handle, n: usize) {
        // Without values the kernel never reads them: any one-element buffer stands in (not the table's own
        // buffers, which are bound already: wgpu mis-binds a buffer bound twice in one launch).
        let (vh, vlen) = values.map_or((self.dummy.clone(), 1), |v| (v.clone(), n));
        // SAFETY: indices are bounded by `n` and by the table's shape.
        unsafe {
            upsert::classify_kernel::launch_unchecked::<S, L, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(vh, vlen),
                ArrayArg::from_raw_parts(self.keys.clone(), self.capacity()),
                ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                ArrayArg::from_raw_parts(mask.clone(), n),
                self.shape_arg(),
                self.bucket_size,
                self.tile_width,
                values.is_some(),
            )
        }
    }
    fn queue_insert(
        &self,
        keys: &Handle,
        values: &Handle,
        mask: Option<(&Handle, u32)>,
        n: usize,
        upsert: bool,
    ) {
        let which = match mask {
            Some((m, mode)) => Selection::Mask(m, mode),
            None => Selection::All,
        };
        self.queue_insert_kernel(keys, values, which, n, Some(upsert), &self.counters);
    }
    fn note_queued(&mut self, ops: usize) {
        GpuTable::note_queued(self, ops);
    }
    fn settle_batch(&mut self) -> Result<(ProbeStats, Vec<(u64, u64)>)> {
        let lost = self.settle_all()?;
        Ok((self.last_insert_probes, lost))
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout, K: Key, V: Value> Engine<K, V>
    for GpuTable<R, S, L>
{
    fn upsert(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        self.upsert_typed(keys, values, false)
    }

    fn checks_in_pipeline(&self, n: usize) -> bool {
        // The device checks the layout's key words, so keys the layout widens (u32 keys of a wide table) are
        // checked by the table on the host: their sentinel is u32::MAX, which widens to a storable word.
        n <= self.batch.insert && size_of::<K>() == size_of::<L::Key>()
    }

    fn count_new(&self, keys: &[K]) -> Result<usize> {
        host_path::count_new(self, bytes_of(&words_of::<K, L::Key>(keys)))
    }

    fn insert_distinct(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        self.upsert_typed(keys, values, true)
    }

    fn find_into(
        &self,
        keys: &[K],
        out: &mut [V],
        found: Option<&mut [u32]>,
    ) -> Result<ProbeStats> {
        let k = words_of::<K, L::Key>(keys);
        // Where the caller's slice is the layout's own type, the values land in it directly.
        with_words_mut::<V, L::Value, _>(out, |o| self.find_words(&k, o, found))
    }

    fn pairs(&self) -> Result<Vec<(K, V)>> {
        Ok(self
            .stored_slots()
            .into_iter()
            .map(|(_, k, v)| (K::narrow(k), V::narrow(v)))
            .collect())
    }

    fn reset(&mut self, family: HashFamily) -> Result<()> {
        self.family = family;
        self.upload_shape();
        self.fill_empty();
        Ok(())
    }

    fn len(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.num_buckets as usize * self.bucket_size as usize
    }

    fn family(&self) -> HashFamily {
        self.family
    }

    fn placement(&self) -> Result<Vec<(K, u32)>> {
        Ok(self
            .stored_slots()
            .into_iter()
            .map(|(i, k, _)| (K::narrow(k), (i / self.bucket_size as usize) as u32))
            .collect())
    }

    fn alloc_pinned(&self, bytes: usize) -> Option<PinnedAlloc> {
        R::alloc_pinned(&self.stager, bytes)
    }

    fn erase_stored(&mut self, keys: &[K]) -> Result<Option<usize>> {
        // Packed pairs, and wide slots of 32-bit keys, have a key word to spare for the mark. The scheme is
        // stable (the caller's promise: `ProbingScheme` does not say; a cuckoo eviction could move the mark).
        if size_of::<K>() > 4 {
            return Ok(None);
        }
        if keys.is_empty() {
            return Ok(Some(0));
        }
        let k = words_of::<K, L::Key>(keys);
        let kh = R::upload(&self.client, &self.stager, bytes_of(&k))?;
        let count = self.client.empty(4);
        fill_u32(&self.client, &count, 1, 0);
        let erased = erase::erased_word::<L>();
        // SAFETY: indices are bounded by the keys' length and by the table's shape.
        unsafe {
            erase::erase_kernel::launch_unchecked::<S, L, R>(
                &self.client,
                cube_count(keys.len()),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(kh, keys.len()),
                ArrayArg::from_raw_parts(self.keys.clone(), self.capacity()),
                ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                ArrayArg::from_raw_parts(count.clone(), 1),
                self.shape_arg(),
                erased,
                self.bucket_size,
                self.tile_width,
            )
        }
        let bytes = self.client.read_one_unchecked(count);
        let n = u32::from_bytes(&bytes)[0] as usize;
        self.len -= n;
        self.erased = erased;
        Ok(Some(n))
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Stored pairs.
    pub fn len(&self) -> usize {
        self.len
    }
    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Slots.
    pub fn capacity(&self) -> usize {
        self.num_buckets as usize * self.bucket_size as usize
    }
    /// Empties the table (queued) and switches to `family`.
    pub fn reset(&mut self, family: HashFamily) -> Result<()> {
        Engine::<L::Key, L::Value>::reset(self, family)
    }
    /// Looks keys of the layout's type up from the host (`Some(value)` / `None`), through the host path.
    pub fn find_keys(&self, keys: &[L::Key]) -> Result<Vec<Option<L::Value>>> {
        let mut values = vec![L::Value::default(); keys.len()];
        let mut bits = vec![0u32; keys.len().div_ceil(32)];
        self.find_words(keys, &mut values, Some(&mut bits))?;
        Ok(crate::results::options_from_bits(&values, &bits))
    }
}
