//! The device-resident API of [`GpuTable`]: inserts and finds of data already on the device, queued on the
//! table's stream ([`GpuTable::insert_device_async`], [`GpuTable::find_device`]) and settled by
//! [`GpuTable::settle`], which reads the insert counters and the stash ([`Unplaced`]); buffer helpers (upload,
//! alloc, read back); the insert and find launches the host path queues too; and [`DeviceRef`], the handles a
//! kernel of yours needs to call the table's device API.

use super::GpuTable;
use super::host_path::BatchTable;
use super::kernels::{self, ADDED_COUNTERS, INSERT_COUNTERS, found_mode, select};
use super::upsert;
use crate::device::layout::KeyLayout;
use crate::device::shape::shape_scalars;
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::transfer::HostTransfer;
use crate::runtime::words::bytes_of;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::reduce::{Assign, Reduce};
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::tile::EMPTY_WORD;
use hashtile_core::{Element, Error, Result};

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Device handles for calling [`crate::device::find::tile_find()`] from your own kernel (see [`DeviceRef`]).
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

    /// Device handles for the device API's writes from your own kernels ([`crate::device::write`]:
    /// insert-or-assign, insert-or-apply, erase, contains; see [`DeviceWriter`]). Call [`GpuTable::settle`] after
    /// your kernels ran: it brings `len()` up to date from the table's counters and returns the pairs an insert
    /// could not place. The table counts itself as possibly holding erased slots from here on (its rebuilds
    /// and reads skip them).
    pub fn device_writer(&mut self) -> DeviceWriter {
        self.unsettled = true;
        if S::STABLE && L::MOVES_PAIRS {
            self.erased = L::ERASED_WORD;
        }
        DeviceWriter {
            table: self.device_ref(),
            stash: self.stash.clone(),
            stash_words: L::STASH_WORDS * self.stash_len,
            counters: self.counters.clone(),
            counters_len: INSERT_COUNTERS,
            plain_reads: self.options.plain_reads,
        }
    }

    /// Inserts `n` pairs already on the device (`keys` and `values`: `n` elements of the layout's key and value
    /// types each) and waits for the result; returns what could not be placed (normally nothing). Keys may
    /// repeat: a repeated key is stored once, with its last value (on linear probing and double hashing with
    /// packed pairs and the upsert rule, racing copies converge in the table in one pass, and one of the
    /// values wins). Elsewhere racing copies of a key could each be stored (a cuckoo eviction, IHT's and
    /// P2BHT's choice of bucket), so the batch first goes through the duplicate pass that
    /// [`GpuTable::insert_or_apply_device`] runs: a batch known to hold distinct keys saves it with
    /// [`GpuTable::insert_device_distinct`]. A sentinel key refuses the batch ([`Error::SentinelKey`],
    /// nothing changed) where the duplicate pass runs; elsewhere it is not checked on the device.
    pub fn insert_device(&mut self, keys: &Handle, values: &Handle, n: usize) -> Result<Unplaced> {
        if L::MOVES_PAIRS && S::UPSERTS_CONVERGE && self.options.use_cas && self.params.upsert == 1
        {
            self.insert_device_distinct(keys, values, n)
        } else {
            self.insert_or_apply_device::<Assign>(keys, values, n)
        }
    }

    /// [`GpuTable::insert_device`] of a batch whose keys the caller promises distinct and not the sentinel (a
    /// bulk build, as BGHT's and cuCollections' benchmarks build): one insert pass, no duplicate pass. Repeated
    /// keys break the promise: on cuckoo schemes, IHT and P2BHT a key may then be stored twice.
    pub fn insert_device_distinct(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
    ) -> Result<Unplaced> {
        self.insert_device_async(keys, values, n);
        self.settle()
    }

    /// Queues an insert of `n` device-resident pairs with distinct keys (the promise of
    /// [`GpuTable::insert_device_distinct`]) and returns at once (no host round trip). Counts of new keys and
    /// failures accumulate on the device until [`GpuTable::settle`] reads them; call it before trusting
    /// `len()`, and before queueing so many failures that the stash overflows.
    /// A large batch is binned first (`GpuTable::set_binning`, the `binned` module): the same placement, in an
    /// order that keeps the table's reads in the L2 cache.
    pub fn insert_device_async(&mut self, keys: &Handle, values: &Handle, n: usize) {
        match (self.bins_for(n), self.ranges_for(n, true)) {
            (Some(bins), _) => {
                self.queue_binned_insert(keys, values, n, bins);
            }
            (None, Some(ranges)) => {
                let (keys, values) = self.order_batch((keys, values, n), ranges, true);
                let values = values.expect("values asked for");
                self.launch_insert(&keys, &values, Selection::All, n, None)
            }
            (None, None) => self.launch_insert(keys, values, Selection::All, n, None),
        }
    }

    /// Queues the insert kernel over the positions whose mask equals the given mode (all when `None`), with
    /// the table's upsert setting or `upsert` instead.
    pub(super) fn launch_insert(
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
    pub(super) fn note_queued(&mut self, n: usize) {
        if n > 0 {
            self.unsettled = true;
            self.pending_ops += n as u64;
        }
    }

    /// Queues the insert kernel only (the caller records the operations with `note_queued`), so that the host
    /// path can queue it from inside a transfer's callback, where it holds the table shared. It counts into
    /// `counters` (the table's own, or a routed batch's share).
    pub(super) fn queue_insert_kernel(
        &self,
        keys: &Handle,
        values: &Handle,
        which: Selection,
        n: usize,
        upsert: Option<bool>,
        counters: &Handle,
    ) {
        let tw = self.insert_tile_width;
        self.queue_insert_as::<S, Assign>(keys, values, which, n, upsert, counters, None, tw);
    }

    /// [`GpuTable::queue_insert_kernel`] under scheme `Sch` (the table's own, or an adaptor of it such as
    /// `NoEvictions`), whose updates of packed pairs combine values by `F` (insert-or-apply in the table;
    /// `Assign`: the plain insert), stashing the pairs it gives up on in `failed` (a buffer and its length in
    /// `u64` words) instead of the table's stash where given, in tiles of `tile_width` lanes (the table's, or
    /// narrower: a lane holds up to four slots of a bucket).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn queue_insert_as<Sch: ProbingScheme, F: Reduce>(
        &self,
        keys: &Handle,
        values: &Handle,
        which: Selection,
        n: usize,
        upsert: Option<bool>,
        counters: &Handle,
        failed: Option<(&Handle, usize)>,
        tile_width: u32,
    ) {
        if n == 0 {
            return;
        }
        let mut shape = self.shape_words();
        if let Some(u) = upsert {
            shape[8] = u as u32;
        }
        let dummy = (self.dummy.clone(), 1usize);
        // A set's kernels never read values: a one-word stand-in of its own (a buffer bound twice in one launch
        // is mis-bound by wgpu).
        let (values, values_len) = if L::HAS_VALUES {
            (values.clone(), n)
        } else {
            (self.client.empty(8), 1)
        };
        let (kind, (mask_handle, mask_len), mode) = match which {
            Selection::All => (select::ALL, dummy, 0),
            Selection::Mask(m, mode) => (select::MASK, (m.clone(), n), mode),
            Selection::Counted(c) => (select::COUNTED, (c.clone(), 1), 0),
        };
        // Inserts take erased slots again where the table may hold some (a kernel of its own: tables without
        // marks keep the insert loop without the reclaim steps).
        let reclaim = self.may_hold_marks();
        let (failed, failed_len) = match failed {
            Some((h, len)) => (h.clone(), len),
            None => (self.stash.clone(), L::STASH_WORDS * self.stash_len),
        };
        // One argument list for both kernels; the fold kernel takes the table as 32-bit words last.
        macro_rules! launch {
            ($kernel:ident $(, $halves:expr)?) => {
                // SAFETY: every array index in the kernel is bounded by the array lengths passed here or by the
                // table's shape, which matches the table allocation.
                unsafe {
                    kernels::$kernel::launch_unchecked::<Sch, L, F, R>(
                        &self.client,
                        cube_count(n),
                        CubeDim::new_1d(CUBE_SIZE),
                        ArrayArg::from_raw_parts(keys.clone(), n),
                        ArrayArg::from_raw_parts(values, values_len),
                        ArrayArg::from_raw_parts(mask_handle, mask_len),
                        mode,
                        ArrayArg::from_raw_parts(self.keys.clone(), self.capacity()),
                        self.plain_slots_arg(),
                        ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                        ArrayArg::from_raw_parts(failed, failed_len),
                        ArrayArg::from_raw_parts(counters.clone(), INSERT_COUNTERS),
                        shape_scalars(shape),
                        $($halves,)?
                        self.bucket_size,
                        tile_width,
                        self.options.use_cas,
                        self.options.plain_reads,
                        self.count_probes,
                        kind,
                        reclaim,
                    )
                }
            };
        }
        // `Add` folds into a packed value's 32-bit half where the table may be bound again as 32-bit words
        // (`plain_reads`: CUDA); every other insert keeps the kernel without that binding.
        if F::KIND == hashtile_core::reduce::kind::ADD && L::MOVES_PAIRS && self.options.plain_reads
        {
            let words = self.capacity() * L::WORD_BYTES / 4;
            launch!(
                fold_insert_kernel,
                ArrayArg::from_raw_parts(self.keys.clone(), words)
            );
        } else {
            launch!(insert_kernel);
        }
    }

    /// Waits for queued inserts, reads their counters (one small device-to-host copy), updates `len()`, and
    /// returns what they could not place.
    pub fn settle(&mut self) -> Result<Unplaced> {
        if !self.unsettled {
            return Ok(Unplaced::default());
        }
        self.unsettled = false;
        let c = self.take_counters();
        let ops = std::mem::take(&mut self.pending_ops);
        Ok(self.settle_counters(&c, ops))
    }

    /// The table's insert counters read back (a wait for the queued launches), then zeroed for the next ones.
    pub(super) fn take_counters(&self) -> Vec<u32> {
        let c = self.read_u32(self.counters.clone());
        self.reset_counters();
        c
    }

    /// Applies insert counters read back (`ops` operations): `len()`, the probe statistics, and the pairs the
    /// inserts gave up on (read from the stash).
    pub(crate) fn settle_counters(&mut self, c: &[u32], ops: u64) -> Unplaced {
        let counts = crate::device::counters::decode_counters(c, ops);
        let (nfailed, stats) = (counts.failed, counts.stats);
        self.len = self.len + counts.added - counts.erased;
        self.marks = (self.marks + counts.erased).saturating_sub(counts.reclaimed);
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

    /// The slot array bound a second time without atomics, for plain reads (CUDA), or a one-word stand-in where
    /// the table is bound once (Vulkan: wgpu mis-binds a buffer bound twice in one launch).
    pub(super) fn plain_slots_arg(&self) -> ArrayArg<R> {
        // SAFETY: the lengths are the buffers' own (the slot array's capacity, the one-word stand-in's 1).
        unsafe {
            if self.options.plain_reads {
                ArrayArg::from_raw_parts(self.keys.clone(), self.capacity())
            } else {
                ArrayArg::from_raw_parts(self.dummy.clone(), 1)
            }
        }
    }

    /// Slots marked erased and not yet taken again by an insert or reclaimed by a rebuild (as of the last
    /// settle): lookups probe past them; inserts take them again where [`GpuTable::takes_marks`].
    pub fn marks(&self) -> usize {
        self.marks
    }

    /// Whether inserts take erased slots again: every scheme, claiming by compare-and-swap. Linear probing's and
    /// double hashing's racing copies of a key converge; the other schemes' launches hold distinct keys
    /// (`insert_device` settles duplicates first, the host path too).
    pub fn takes_marks(&self) -> bool {
        self.options.use_cas
    }

    /// Whether inserts run the kernel that takes erased slots again: [`GpuTable::takes_marks`], and the table
    /// may hold marks (counted, or erased by a user kernel since the last settle).
    pub(crate) fn may_hold_marks(&self) -> bool {
        self.takes_marks() && (self.marks > 0 || (self.unsettled && self.erased != EMPTY_WORD))
    }

    pub(super) fn reset_counters(&self) {
        self.zero_u32(&self.counters, INSERT_COUNTERS);
    }

    fn zero_u32(&self, h: &Handle, n: usize) {
        fill_u32(&self.client, h, n, 0);
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
        let with_bits = mode == found_mode::BITS || mode == found_mode::BITS_ONLY;
        let bits_len = if with_bits { n.div_ceil(32) } else { 1 };
        let (flags, bits) = if with_bits {
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
                // Presence alone (`BITS_ONLY`) writes no values: `out` may be a one-word stand-in.
                ArrayArg::from_raw_parts(
                    out.clone(),
                    if mode == found_mode::BITS_ONLY { 1 } else { n },
                ),
                ArrayArg::from_raw_parts(flags, if mode == found_mode::FLAGS { n } else { 1 }),
                ArrayArg::from_raw_parts(bits, bits_len),
                self.shape_arg(),
                ArrayArg::from_raw_parts(probe_handle, probe_len),
                self.bucket_size,
                self.find_tile_width,
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
    pub(super) fn settle_all(&mut self) -> Result<Vec<(u64, u64)>> {
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

/// Which positions an insert launch inserts (the kernel's `select`).
pub(super) enum Selection<'a> {
    All,
    Mask(&'a Handle, u32),
    /// Positions below the count in the handle's first word (`select::COUNTED`).
    Counted(&'a Handle),
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

/// What a user kernel needs to write to the table through the device API ([`crate::device::write`]), from
/// [`GpuTable::device_writer`]. Bind `table.keys` twice (as `&Array<Atomic<u64>>` and, where `plain_reads`,
/// as the plain `&Array<u64>` view; otherwise pass any one-word array there), `table.values` as
/// `&mut Array<u64>`, `stash` (`stash_words` long) and `counters` (`counters_len` long), and instantiate with
/// `table.bucket_size`, `table.tile_width` and `plain_reads`.
#[derive(Debug, Clone)]
pub struct DeviceWriter {
    /// The table's arrays and shape, as for finds.
    pub table: DeviceRef,
    /// Where inserts put the pairs they give up on (`&mut Array<u64>`).
    pub stash: Handle,
    /// Length of `stash`.
    pub stash_words: usize,
    /// The table's write counters (`&Array<Atomic<u32>>`, `crate::device::counters`).
    pub counters: Handle,
    /// Length of `counters`.
    pub counters_len: usize,
    /// Read buckets with plain loads of the second binding of the key words (CUDA); else atomic loads only
    /// (Vulkan, where a buffer is bound once per launch).
    pub plain_reads: bool,
}

/// What a user kernel needs to call the table's device API ([`crate::device::find::tile_find()`] with the table's scheme
/// and layout; its `meta` from [`crate::device::shape::load_meta()`] of `shape`).
#[derive(Debug, Clone)]
pub struct DeviceRef {
    /// The key words (`&Array<u64>` in the kernel, `slots` long).
    pub keys: Handle,
    /// The value words (`&Array<u64>`, `values_len` long): the values of a [`Wide`](crate::device::layout::Wide) table, one unused word
    /// for a [`Packed`](crate::device::layout::Packed) one (whose values sit in the key words).
    pub values: Handle,
    /// Length of `values`.
    pub values_len: usize,
    /// Number of slots.
    pub slots: usize,
    /// The shape words (`&Array<u32>`, length [`SHAPE_WORDS`](crate::device::shape::SHAPE_WORDS)).
    pub shape: Handle,
    /// Compile-time bucket size to instantiate the kernel with.
    pub bucket_size: u32,
    /// Compile-time tile width to instantiate the kernel with.
    pub tile_width: u32,
}
