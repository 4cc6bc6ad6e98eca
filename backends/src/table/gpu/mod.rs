//! GPU backends through CubeCL: one generic engine, [`GpuTable`], for any CubeCL runtime (CUDA, Vulkan) and
//! any key layout (`layout`: [`Packed`] 32-bit pairs in one `u64` word, `Wide` pairs in parallel `u64`
//! arrays); the kernels are written once and instantiated per scheme and layout. Bulk calls take host slices or
//! device handles (no host round trip when the data is already on the GPU).
//!
//! This module defines the table, its construction and the management of its slot buffers; the device-resident
//! API lives in `device`, the host-slice API ([`Engine`] and the host path's hooks) in `engine`, the host path
//! itself in `host_path`, the kernels in [`kernels`], [`upsert`] and [`erase`], table builds in [`build`], and
//! one-launch mixed batches of device data in [`mixed_device`].
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

mod apply;
pub mod binned;
pub mod build;
mod device;
mod engine;
pub mod erase;
pub(crate) mod host_path;
pub mod kernels;
pub mod mixed_device;
pub mod ordered;
mod partition;
pub(crate) mod rebuild;
pub mod upsert;

pub use binned::Binning;
pub use device::{DeviceRef, DeviceWriter, Unplaced};
pub use ordered::RangeOrder;

use crate::device::layout::{KeyLayout, Packed};
use crate::device::shape::ShapeScalarsLaunch;
use crate::device::shape::{SHAPE_WORDS, shape_scalars, shape_words_of, tile_width_for};
use crate::runtime::host_io::{BatchSizes, DeviceCache, HostLink, check_device_memory};
use crate::runtime::launch::{fill_u32, fill_u64};
use crate::runtime::transfer::HostTransfer;
use crate::table::engine::Engine;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::{ProbingScheme, SchemeInfo, SchemeParams};
use hashtile_core::tile::EMPTY_WORD;
use hashtile_core::{Error, HashFamily, ProbeStats, Result};
use kernels::{ADDED_COUNTERS, INSERT_COUNTERS};
use std::marker::PhantomData;

/// How a GPU table claims slots (chosen from the runtime's compiler).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuOptions {
    /// Claim empty slots with compare-and-swap (else: exchange and re-insert whatever was displaced).
    pub use_cas: bool,
    /// Read buckets with plain loads during inserts (else atomic loads).
    pub plain_reads: bool,
}

/// A static hash table on a CubeCL device, driven by scheme `S`, its pairs laid out by `L` (`layout`:
/// [`Packed`] 32-bit pairs by default, `Wide` pairs in parallel `u64` arrays for stable schemes).
pub struct GpuTable<R: HostTransfer, S: ProbingScheme, L: KeyLayout = Packed> {
    pub(crate) client: ComputeClient<R>,
    /// Host-path copies (CUDA: a stream and pinned staging buffers; the table's own, or the process's shared
    /// one for tables that come in numbers: the children of a paged table).
    pub(crate) stager: std::sync::Arc<R::Stager>,
    /// How host batches are cut for the device.
    pub(crate) batch: BatchSizes,
    /// Host-path buffers kept between calls.
    pub(crate) cache: DeviceCache,
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
    /// Racing upserts of one key converge on one slot under `params` (`SchemeInfo::upserts_converge`).
    pub(crate) upserts_converge: bool,
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
    /// Slots marked erased and not taken again by an insert, as far as the settled counters tell (erases
    /// through [`GpuTable::device_writer`] count at the next settle).
    pub(crate) marks: usize,
    /// Count probes on the device (compiled in only when on).
    pub(crate) count_probes: bool,
    /// Spread-out probe counters of the last counted find.
    pub(crate) find_probes: Handle,
    /// Keys queued by inserts since the last settle.
    pub(crate) pending_ops: u64,
    /// Probe statistics of the inserts read by the last settle.
    pub(crate) last_insert_probes: ProbeStats,
    pub(crate) counters: Handle,
    /// Whether device batches are binned before they are inserted (`binned`).
    pub(crate) binning: Binning,
    /// Whether large device batches run in table order (`ordered`).
    pub(crate) range_order: RangeOrder,
    /// Lanes per tile of the find launches ([`GpuTable::set_find_tile_width`]).
    pub(crate) find_tile_width: u32,
    /// Lanes per tile of the insert launches ([`GpuTable::set_insert_tile_width`]).
    pub(crate) insert_tile_width: u32,
    pub(crate) _scheme: PhantomData<(S, L)>,
}

/// The fewest lanes a tile can serve a bucket of `bucket_size` slots with: each lane holds at most four (at most
/// the table's `tile_width`, which is never fewer). The default tile of a find launch, and of a fold into a cached
/// table (`GpuTable::fold_tile_width`). A tile serves its lanes' keys one after another, so a narrower one has
/// more keys' bucket reads in flight per plane, each lane's slots read by independent loads; the find is bound by
/// the reads in flight, not by the bytes (NOTES.md D58: H200, 2^26 keys, BCHT B = 8 at load 0.8 finds 23.4 G
/// keys/s in tiles of 8 lanes, 29.8 in 4, 32.4 in 2).
pub(crate) fn fewest_lanes(bucket_size: u32, tile_width: u32) -> u32 {
    (bucket_size / 4).clamp(1, tile_width)
}

/// The default lanes per tile of an insert launch: half a bucket of at least 8 slots (each lane holding two),
/// at most the table's `tile_width`; smaller buckets keep the table's tiles. As for finds, the narrower tile
/// has more keys in flight per plane (D58: H200, 2^26 bulk builds at load 0.8, B = 16 in tiles of 16 and 8
/// lanes: BCHT 8.9 -> 10.9 G keys/s, IHT 7.7 -> 11.3, P2BHT 6.7 -> 8.9; BCHT B = 8 in 8 and 4 lanes: 12.1 ->
/// 13.1).
pub(crate) fn default_insert_tile_width(bucket_size: u32, tile_width: u32) -> u32 {
    if bucket_size >= 8 {
        (bucket_size / 2).min(tile_width)
    } else {
        tile_width
    }
}

/// Refuses a bucket count scheme `S`'s probe sequence cannot walk (double hashing: its step must be coprime with
/// the count), for a new table and for the one growth moves a table into.
pub(crate) fn check_bucket_count<S: ProbingScheme>(num_buckets: u32) -> Result<()> {
    if hashtile_core::scheme::sequence_buckets(S::SEQUENCE, num_buckets) != num_buckets {
        return Err(Error::InvalidConfig(format!(
            "{num_buckets} buckets: double hashing needs a prime or power-of-two bucket count (its step must \
             be coprime with it); hashtile_core::scheme::sequence_buckets gives the next one"
        )));
    }
    Ok(())
}

/// Bytes of the slot arrays of a table of `slots` slots under layout `L`: the key words, and the values where
/// the layout keeps them apart.
pub(crate) fn slot_bytes_of<L: KeyLayout>(slots: usize) -> u64 {
    (slots * L::WORD_BYTES + if L::MOVES_PAIRS { 0 } else { slots * 8 }) as u64
}

/// Fills the first `n` key words of `keys` (layout `L`'s words) with the empty word (queued).
pub(crate) fn fill_empty_slots<R: Runtime, L: KeyLayout>(
    client: &ComputeClient<R>,
    keys: &Handle,
    n: usize,
) {
    if L::WORD_BYTES == 4 {
        fill_u32(client, keys, n, u32::MAX);
    } else {
        fill_u64(client, keys, n, EMPTY_WORD);
    }
}

/// Stash pairs of a table of `slots` slots. Failures are rare below the scheme's achievable load; 1/16 of the
/// slots is far more than a build that can succeed ever hands back, and overflow is counted, never silent.
pub(crate) fn stash_len_for(slots: usize) -> usize {
    (slots / 16).clamp(1024.min(slots), slots.max(1))
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// An empty table of `num_buckets` buckets of `bucket_size` slots on `device`. A layout that does not
    /// move pairs (`Wide`) needs `options.use_cas` (its claims are a compare-and-swap of the key word).
    pub fn new(
        device: &R::Device,
        num_buckets: u32,
        bucket_size: u32,
        family: HashFamily,
        params: SchemeParams,
        options: GpuOptions,
    ) -> Result<Self>
    where
        S: SchemeInfo,
    {
        Self::build(
            crate::runtime::kernel_cache::client::<R>(device),
            num_buckets,
            bucket_size,
            family,
            params,
            options,
            false,
            S::upserts_converge(&params),
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
    ) -> Result<Self>
    where
        S: SchemeInfo,
    {
        Self::build(
            crate::runtime::kernel_cache::client::<R>(device),
            num_buckets,
            bucket_size,
            family,
            params,
            options,
            true,
            S::upserts_converge(&params),
        )
    }

    /// [`GpuTable::new`] on `client`, with a stager of its own or the process's shared one. `upserts_converge`:
    /// the scheme's [`SchemeInfo::upserts_converge`] under `params` (the callers hold the scheme's information;
    /// kernels need only [`ProbingScheme`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build(
        client: ComputeClient<R>,
        num_buckets: u32,
        bucket_size: u32,
        family: HashFamily,
        params: SchemeParams,
        options: GpuOptions,
        share_stager: bool,
        upserts_converge: bool,
    ) -> Result<Self> {
        if !L::MOVES_PAIRS && !options.use_cas {
            return Err(Error::InvalidConfig(format!(
                "{} are claimed with compare-and-swap; GpuOptions::use_cas must be on",
                L::NAME
            )));
        }
        check_bucket_count::<S>(num_buckets)?;
        let tile_width = tile_width_for(&client, bucket_size, L::WORD_BYTES)?;
        let slots = num_buckets as usize * bucket_size as usize;
        let stager = if share_stager {
            crate::runtime::dispatch::shared_stager(&client)?
        } else {
            std::sync::Arc::new(R::stager(&client)?)
        };
        let batch = BatchSizes::DEFAULT;
        let values_len = if L::MOVES_PAIRS { 1 } else { slots.max(1) };
        check_device_memory::<R>(&stager, "the table", slot_bytes_of::<L>(slots))?;
        let keys = client.empty(slots.max(1) * L::WORD_BYTES);
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
            upserts_converge,
            len: 0,
            stash,
            stash_len,
            unsettled: false,
            erased: EMPTY_WORD,
            marks: 0,
            dummy,
            count_probes: false,
            find_probes,
            pending_ops: 0,
            last_insert_probes: ProbeStats::default(),
            counters,
            binning: Binning::Off,
            range_order: RangeOrder::Auto,
            find_tile_width: fewest_lanes(bucket_size, tile_width),
            insert_tile_width: default_insert_tile_width(bucket_size, tile_width),
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
        self.marks = 0;
        fill_empty_slots::<R, L>(&self.client, &self.keys, self.capacity());
        self.len = 0;
    }

    /// The table's shape as the `u32` words kernels read (see [`crate::device::shape::load_meta()`]).
    pub fn shape_words(&self) -> [u32; SHAPE_WORDS] {
        shape_words_of(self.num_buckets, self.family, self.params)
    }

    /// The shape words as the internal kernels take them: scalar arguments, which CUDA keeps in constant memory
    /// instead of 13 registers per thread (the insert kernel is limited by registers and instruction issue).
    fn shape_arg(&self) -> ShapeScalarsLaunch<R> {
        shape_scalars(self.shape_words())
    }

    /// The table's host transfers (its stream and pinned staging buffers, or the shared ones): a sharded
    /// table moves its host slices through them.
    pub(crate) fn host_stager(&self) -> &R::Stager {
        &self.stager
    }

    /// The compute client (to allocate buffers and launch your own kernels on the same device).
    pub fn client(&self) -> &ComputeClient<R> {
        &self.client
    }

    /// Lanes per tile (`min(B, plane size)`).
    pub fn tile_width(&self) -> u32 {
        self.tile_width
    }

    /// Lanes per tile of the find launches (finds, contains, and the host path's lookups): by default the
    /// fewest whose lanes hold at most four slots of a bucket each (`fewest_lanes`).
    pub fn find_tile_width(&self) -> u32 {
        self.find_tile_width
    }

    /// Sets the lanes per tile of the find launches (`None`: the default, [`GpuTable::find_tile_width`]): a
    /// power of two at most [`GpuTable::tile_width`], each lane then holding `B / lanes` slots of a bucket, at
    /// most four. The answers do not depend on it.
    pub fn set_find_tile_width(&mut self, lanes: Option<u32>) -> Result<()> {
        let lanes = lanes.unwrap_or(fewest_lanes(self.bucket_size, self.tile_width));
        self.find_tile_width = self.narrower_tile("find", lanes)?;
        Ok(())
    }

    /// Lanes per tile of the insert launches: by default half a bucket of at least 8 slots, two slots a lane
    /// (`default_insert_tile_width`), else the table's [`GpuTable::tile_width`].
    pub fn insert_tile_width(&self) -> u32 {
        self.insert_tile_width
    }

    /// Sets the lanes per tile of the insert launches (`None`: the default, [`GpuTable::insert_tile_width`]),
    /// as [`GpuTable::set_find_tile_width`] does for finds; one-lane tiles only where the table's own are.
    pub fn set_insert_tile_width(&mut self, lanes: Option<u32>) -> Result<()> {
        let lanes = lanes.unwrap_or(default_insert_tile_width(self.bucket_size, self.tile_width));
        if lanes == 1 && self.tile_width != 1 {
            return Err(Error::InvalidConfig(
                "one-lane insert tiles are the one-slot buckets' own".into(),
            ));
        }
        self.insert_tile_width = self.narrower_tile("insert", lanes)?;
        Ok(())
    }

    /// `lanes` if a tile of that many lanes can serve this table's buckets (a power of two, at most the table's
    /// tile width, at most four slots a lane), else [`Error::InvalidConfig`] naming the `what` launches.
    fn narrower_tile(&self, what: &str, lanes: u32) -> Result<u32> {
        if !lanes.is_power_of_two() || lanes > self.tile_width || self.bucket_size / lanes > 4 {
            return Err(Error::InvalidConfig(format!(
                "{what} tiles of {lanes} lanes do not fit buckets of {} slots in tiles of at most {} lanes \
                 (a power of two, at most four slots a lane)",
                self.bucket_size, self.tile_width
            )));
        }
        Ok(lanes)
    }

    /// Sets the keys per device batch and per find chunk of the host path (`None`: the defaults, see
    /// [`BatchSizes`]).
    pub fn set_batch_keys(&mut self, keys: Option<usize>) {
        self.batch = BatchSizes::from_keys(keys).with_pieces(self.batch.pieces);
    }

    /// Copies each device batch of the host path in at least `pieces` chunks (1, the default: chunks of 2^22
    /// keys, so a smaller batch is one chunk; see [`BatchSizes::chunk_for`]).
    pub fn set_copy_chunks(&mut self, pieces: usize) {
        self.batch = self.batch.with_pieces(pieces);
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

    /// Every stored pair as `(slot index, key, value)`, widened (reads the table back).
    fn stored_slots(&self) -> Vec<(usize, u64, u64)> {
        let mut keys = self.read_slot_words(self.keys.clone());
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
        slot_bytes_of::<L>(self.capacity())
    }

    /// Reads a table's key words back, widened (a `u32` word's all ones: the empty `u64` word).
    pub(crate) fn read_slot_words(&self, h: Handle) -> Vec<u64> {
        if L::WORD_BYTES == 4 {
            self.read_u32(h)
                .into_iter()
                .map(|w| if w == u32::MAX { EMPTY_WORD } else { w as u64 })
                .collect()
        } else {
            self.read_u64(h)
        }
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
            self.upserts_converge,
        )?;
        t.count_probes = self.count_probes;
        t.batch = self.batch;
        Ok(t)
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
        self.find_options_words(keys)
    }
    /// What the host-I/O layer needs of this table for one call.
    pub(crate) fn link(&self) -> HostLink<'_, R> {
        HostLink {
            client: &self.client,
            stager: &self.stager,
            cache: &self.cache,
            sizes: self.batch,
        }
    }
}
