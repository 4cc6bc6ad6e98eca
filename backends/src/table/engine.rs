//! The typed engine interface every backend implements; [`crate::HashTable`] sits on top.
//!
//! Keys and values cross this boundary as the caller's `K` and `V` slices, never widened on the way: a GPU
//! table of 32-bit pairs hands the caller's `&[u32]` to its copies as is ([`hashtile_core::Element::as_u32s`]).
//! Duplicates and updates are settled inside each engine (on GPUs by device passes, `gpu::upsert`).

use cubecl::server::Handle;
use hashtile_core::{Error, HashFamily, Key, ProbeStats, Result, Value};

/// What an insert did: probe statistics and the pairs it could not place (normally none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inserted<K, V> {
    /// Probe statistics (zero probes where the backend does not count).
    pub stats: ProbeStats,
    /// Pairs that are not in the table.
    pub unplaced: Vec<(K, V)>,
}

/// A split of [`Engine::rebuild_split`]: the pairs whose route bit `63 - depth` of
/// `paged::route_hash(key, seed)` is set move to a new table built under `family`.
#[derive(Debug, Clone, Copy)]
pub struct SplitSpec {
    /// Route seed.
    pub seed: u64,
    /// The splitting table's route depth.
    pub depth: u32,
    /// Hash family of the new table.
    pub family: HashFamily,
}

/// What [`Engine::rebuild_split`] did.
pub struct Rebuilt<K: Key, V: Value> {
    /// Pairs the table's rebuild could not place (no longer in it).
    pub lost: Vec<(K, V)>,
    /// The split's new table, and the pairs its build could not place (in neither table).
    pub split: Option<SplitTable<K, V>>,
}

/// A split's new table and the pairs its build could not place.
pub type SplitTable<K, V> = (Box<dyn Engine<K, V>>, Vec<(K, V)>);

/// One backend's table of `K -> V`.
pub trait Engine<K: Key, V: Value>: Send + Sync {
    /// Upserts a batch of equal lengths. The **last** occurrence of a key in the batch wins; a stored key gets
    /// the new value. Unless [`Engine::checks_in_pipeline`] says so for this batch size, the caller has checked
    /// the keys for the sentinel and the batch's new keys against the capacity; an engine that checks returns
    /// `Error::SentinelKey` / `Error::CapacityExceeded` with the table unchanged.
    fn upsert(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>>;
    /// `true` when [`Engine::upsert`] of `n` keys checks the sentinel and the capacity itself (GPUs, for one
    /// device batch: the sentinel during the copy, the capacity from the duplicate pass's own mask), so that
    /// the caller skips its host scan and its separate count of new keys.
    fn checks_in_pipeline(&self, _n: usize) -> bool {
        false
    }
    /// Counts the distinct keys of a batch that are not stored (the exact capacity check near a full table).
    fn count_new(&self, keys: &[K]) -> Result<usize>;
    /// Inserts pairs whose keys are distinct and not stored (rebuilds): no duplicate or update passes.
    fn insert_distinct(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>>;
    /// Looks keys up: `out[i]` = the value, or `V::ABSENT`; if `found` is given (`keys.len().div_ceil(32)`
    /// words), bit `i % 32` of `found[i / 32]` is set for present keys.
    fn find_into(&self, keys: &[K], out: &mut [V], found: Option<&mut [u32]>)
    -> Result<ProbeStats>;
    /// Every stored pair.
    fn pairs(&self) -> Result<Vec<(K, V)>>;
    /// Empties the table and switches to `family` (used by rebuilds).
    fn reset(&mut self, family: HashFamily) -> Result<()>;
    /// Stored pairs.
    fn len(&self) -> usize;
    /// `true` when no pair is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Slots.
    fn capacity(&self) -> usize;
    /// The hash family in use.
    fn family(&self) -> HashFamily;
    /// For placement checks: `(key, bucket index)` of every stored pair.
    fn placement(&self) -> Result<Vec<(K, u32)>>;
    /// Host memory of `bytes` bytes that the engine copies at the full bus rate (pinned memory on CUDA), or
    /// `None` when ordinary memory is as good (CPU, Vulkan).
    fn alloc_pinned(&self, _bytes: usize) -> Option<crate::runtime::transfer::PinnedAlloc> {
        None
    }
    /// Rebuilds the table from its own pairs under `family` where they live (GPU tables: unpacked and
    /// re-inserted on the device, nothing crosses the bus); with `split`, the pairs whose route bit is set go
    /// to a new table of the same kind instead. Paged tables' confined rebuilds and splits.
    fn rebuild_split(
        &mut self,
        family: HashFamily,
        split: Option<SplitSpec>,
    ) -> Result<Rebuilt<K, V>>;
    /// Paging (device tables larger than the device, `crate::paged`): copies the table to host memory, unless
    /// the host copy is current, and frees its device memory. Returns the bytes copied. A paged-out table
    /// answers only [`Engine::page_in`], [`Engine::len`], [`Engine::capacity`] and [`Engine::family`]; its
    /// other calls return [`hashtile_core::Error::InvalidConfig`].
    fn page_out(&mut self) -> Result<u64>;
    /// Brings a paged-out table back to device memory; returns the bytes copied (0 when resident).
    fn page_in(&mut self) -> Result<u64>;
    /// `true` when the table's slots are in device memory (always, until [`Engine::page_out`]).
    fn is_resident(&self) -> bool;
    /// Device bytes the table occupies while resident (its slot arrays).
    fn device_bytes(&self) -> u64;
    /// Tombstone erase, for stable schemes only (`SchemeInfo::STABLE`: the caller checks; a cuckoo eviction
    /// would move the mark): marks the slots of the stored keys among `keys` (distinct) erased in place and
    /// returns how many were; `None` where the table cannot (64-bit keys leave no key word to spare for the
    /// mark), leaving it unchanged. An erased slot stays taken (lookups probe past it, inserts do
    /// not reuse it) until the table is rebuilt ([`Engine::reset`], [`Engine::rebuild_split`]).
    fn erase_stored(&mut self, _keys: &[K]) -> Result<Option<usize>> {
        Ok(None)
    }
    /// Slot frames (`gpu::frames`): one device allocation of up to `count` frames (fewer where the runtime's
    /// largest allocation holds fewer: check [`SlotFrames::count`]), each holding the slots of one
    /// table of this engine's shape, so that one kernel launch can serve every table placed in them (a paged
    /// table's children: [`Router::find_framed`]). `Ok(None)` where the engine has no device (CPU) or the
    /// device lacks the memory (the caller goes on without frames).
    fn new_frames(&self, _count: usize) -> Result<Option<SlotFrames>> {
        Ok(None)
    }
    /// Moves the (resident) slots into frame `index` of `frames` (a device-side copy; the table's own
    /// allocation is freed). The table keeps the frame until it is paged out.
    fn move_to_frame(&mut self, _frames: &SlotFrames, _index: usize) -> Result<()> {
        Err(no_device_batches())
    }
    /// [`Engine::page_in`] into frame `index` of `frames` (free: no resident table holds it).
    fn page_in_frame(&mut self, _frames: &SlotFrames, _index: usize) -> Result<u64> {
        self.page_in()
    }
    /// The frame holding the slots: `(SlotFrames::id, index)`, or `None` (own allocation, or paged out).
    fn frame(&self) -> Option<(u64, usize)> {
        None
    }
    /// The table's descriptor in `frames` ([`Router::find_framed`]), or `None` when its slots are not there.
    fn frame_desc(&self, _frames: &SlotFrames) -> Option<[u32; FRAME_DESC_WORDS]> {
        None
    }
    /// A router of batches to tables of this engine's kind on the device ([`Router`]), or `None` where the
    /// engine has no device (CPU): paged tables then partition on the host.
    fn router(&self) -> Option<Box<dyn Router<K, V>>> {
        None
    }
    /// Queues the upsert of child `c`'s part of a batch routed by this engine's [`Engine::router`] (its keys
    /// are distinct; the caller has checked that they fit): stored keys are updated, the others inserted. Its
    /// counters go to the batch's counters of child `c` ([`RoutedBatch::counters_of`]), so that one read of
    /// the batch's counters settles every child it queued: the caller reads them ([`Router::counters`], or
    /// what [`Router::upsert`] returns) and hands each child its words with [`Engine::settle_routed`].
    fn upsert_routed(&mut self, _batch: &RoutedBatch, _c: usize) -> Result<()> {
        Err(no_device_batches())
    }
    /// Settles the queued [`Engine::upsert_routed`] from its counters as read back (the child's
    /// [`ROUTED_COUNTERS`] words of the batch's counters) and returns what it could not place.
    fn settle_routed(&mut self, _counters: &[u32]) -> Result<Inserted<K, V>> {
        Err(no_device_batches())
    }
    /// Looks child `c`'s part of a routed find batch up, into the batch's routed values and presence bits.
    fn find_routed(&self, _batch: &RoutedBatch, _c: usize) -> Result<()> {
        Err(no_device_batches())
    }
    /// Records a framed upsert ([`Router::upsert`] with a [`FramedUpsert`]) that wrote into this table's
    /// frame: `stored` more pairs are held (its new keys less those given up on), and its host image is stale
    /// (0 after a framed batch that failed: the image is stale, the count unknown). The table must be settled
    /// and in frames.
    fn note_framed(&mut self, _stored: usize) -> Result<()> {
        Err(no_device_batches())
    }
}

fn no_device_batches() -> Error {
    Error::InvalidConfig("this backend has no device batches".into())
}

/// Words of one table's descriptor in [`SlotFrames`]: its first bucket in the frames' slot arrays, then its
/// seeds and their mixes.
pub const FRAME_DESC_WORDS: usize = crate::device::probe::FRAME_DESC_WORDS;

/// One device allocation holding the slots of `count` tables of one shape, frame after frame (`gpu::frames`):
/// made by [`Engine::new_frames`], filled by [`Engine::move_to_frame`] and [`Engine::page_in_frame`], read by
/// [`Router::find_framed`] and written by [`Router::upsert`] with a [`FramedUpsert`]. The tables hold sub-ranges of the buffers, which live while any of them does.
#[derive(Debug, Clone)]
pub struct SlotFrames {
    /// Tells frames apart ([`Engine::frame`]).
    pub id: u64,
    /// Key words of every frame (`count * stride` words).
    pub keys: Handle,
    /// Value words of every frame where the layout keeps values apart; else one unused word.
    pub values: Handle,
    /// Words of `values`.
    pub values_len: usize,
    /// Frames.
    pub count: usize,
    /// Slots per frame: a table's slots, rounded up to 256 bytes (Vulkan's binding alignment) and to a whole
    /// bucket.
    pub stride: usize,
    /// The shape words of the tables (bucket count and scheme parameters; seeds differ per table).
    pub shape: [u32; crate::device::shape::SHAPE_WORDS],
    /// Slots per bucket.
    pub bucket_size: u32,
    /// Lanes per tile.
    pub tile_width: u32,
}

/// A paged table's route directory as the device sees it: a key goes to child `entries[route >> (64 - depth)]`
/// (`entries[0]` at depth 0), `route` being `paged::route::route_hash(key, seed)`.
#[derive(Debug, Clone, Copy)]
pub struct RouteMap<'a> {
    /// Route seed.
    pub seed: u64,
    /// Global depth: `entries` has `2^depth` entries.
    pub depth: u32,
    /// Child of each directory entry.
    pub entries: &'a [u32],
    /// Children (every entry is below it).
    pub children: usize,
}

/// `u32` words of one child's insert counters in a routed batch's counters ([`RoutedBatch::counters`]): room
/// for a GPU insert's counters, and a whole multiple of 256 bytes, so that each child's share is a valid buffer
/// binding (Vulkan's offset alignment).
pub const ROUTED_COUNTERS: usize = 256;

/// A batch copied to the device and partitioned by child there (`gpu::routing`): child `c`'s part is
/// `counts[c]` consecutive elements from `starts[c]` (a multiple of 2048, so every part is a valid buffer
/// binding) of the routed buffers, which belong to the router (valid while it hands the part over).
pub struct RoutedBatch {
    /// Input keys.
    pub n: usize,
    /// First routed position of each child's part.
    pub starts: Vec<usize>,
    /// Keys in each child's part.
    pub counts: Vec<usize>,
    /// Routed positions: the parts, and the gaps between them (parts may be sized before the keys are
    /// counted).
    pub len: usize,
    /// Bytes of a key and of a value on the device.
    pub widths: (usize, usize),
    /// Routed keys.
    pub keys: Handle,
    /// Upserts: routed values, and a mask of `MASK_NEW` at every routed position (the classify pass marks the
    /// stored keys). Finds: routed values out (all ones until found), and presence bits.
    pub values: Handle,
    /// See `values`.
    pub aux: Handle,
    /// The routed position of each input key (upserts: of each kept key; the router scatters the values
    /// there as they land, and finds' answers are gathered from there).
    pub positions: Handle,
    /// Finds: presence bits are wanted (else `aux` is unused and the children look values up only).
    pub with_bits: bool,
    /// Upserts: [`ROUTED_COUNTERS`] zeroed insert counters per child, child after child.
    pub counters: Option<Handle>,
}

impl RoutedBatch {
    /// Child `c`'s part of the routed keys.
    pub fn keys_of(&self, c: usize) -> Handle {
        self.keys
            .clone()
            .offset_start((self.starts[c] * self.widths.0) as u64)
    }
    /// Child `c`'s part of the routed values.
    pub fn values_of(&self, c: usize) -> Handle {
        self.values
            .clone()
            .offset_start((self.starts[c] * self.widths.1) as u64)
    }
    /// Child `c`'s insert counters (upserts).
    pub fn counters_of(&self, c: usize) -> Handle {
        let all = self.counters.clone().expect("an upsert batch");
        all.offset_start((c * ROUTED_COUNTERS * 4) as u64)
    }
    /// Child `c`'s part of the insert mask (one `u32` per key) or of the presence bits (one bit per key; parts
    /// start on a multiple of 2048 keys, so on a whole word).
    pub fn aux_of(&self, c: usize, bits: bool) -> Handle {
        let bytes = if bits {
            self.starts[c] / 8
        } else {
            self.starts[c] * 4
        };
        self.aux.clone().offset_start(bytes as u64)
    }
}

/// A framed upsert's plan ([`Router::upsert`]): every child of the table is resident in `frames`, so that a
/// batch whose kept keys fit goes in with one classify and one insert launch per copy chunk over the frames,
/// each key's child by the route, instead of a partition and two launches per child.
#[derive(Debug, Clone, Copy)]
pub struct FramedUpsert<'a> {
    /// The frames every child is in.
    pub frames: &'a SlotFrames,
    /// Each child's descriptor ([`FRAME_DESC_WORDS`] per child, in child order).
    pub descs: &'a [u32],
    /// Keys each child may take in this batch (every kept key counted as new): a batch that routes more to
    /// some child is partitioned instead, so that its caller can split the child first (0 for a child that
    /// must not be written in frames, one whose stash holds pairs say).
    pub room: &'a [usize],
    /// Some child holds pairs (else the classify pass is skipped: every kept key is new).
    pub stored: bool,
}

/// What a [`Router::upsert`] did.
#[derive(Debug)]
pub enum Upserted<K, V> {
    /// Partitioned, each child's part queued by `on_part`: the batch's insert counters, read back in one read
    /// after `on_part` ([`ROUTED_COUNTERS`] words per child; empty when `on_part` failed).
    Routed(Vec<u32>),
    /// Framed ([`FramedUpsert`]): every child took its part in the frames.
    Framed(FramedCounts<K, V>),
}

/// The outcome of a framed upsert batch.
#[derive(Debug)]
pub struct FramedCounts<K, V> {
    /// Kept keys (each key's last occurrence) per child: the children written.
    pub kept: Vec<usize>,
    /// Pairs each child holds more than before: its kept keys that were not stored, less those its inserts
    /// gave up on.
    pub stored: Vec<usize>,
    /// The pairs given up on, as far as the launch's stash holds them (each is its child's own: a cuckoo
    /// eviction may hand back a pair the child held before); the route says whose.
    pub unplaced: Vec<(K, V)>,
    /// Pairs given up on past the launch's stash (lost: reported as `Error::StashOverflow`).
    pub untracked: usize,
}

/// Moves host batches to the device partitioned by child, and finds' answers back (hash-routed paged tables on
/// a GPU: the host never touches the keys, `gpu::routing`). One router serves every child of a table, since
/// all share one runtime.
pub trait Router<K: Key, V: Value>: Send + Sync {
    /// The most keys one call takes (larger host batches go as several calls, in order).
    fn batch_keys(&self) -> usize;
    /// `true` when [`Router::upsert`] refuses a batch holding the sentinel key with
    /// `Error::SentinelKey`, before anything is inserted (the duplicate pass's claims check the keys as they
    /// land): the caller then skips its host scan for single-call batches. Keys the device layout widens
    /// (32-bit keys of a wide table) are the caller's to check.
    fn checks_sentinel(&self) -> bool;
    /// Copies an upsert batch in and keeps each key's last occurrence. With `framed`, when every child's kept
    /// keys fit its room, they are upserted in the frames as the values land and the counts come back
    /// ([`Upserted::Framed`]; `on_part` is not called). Otherwise the kept pairs are partitioned by child and
    /// the partition handed to `on_part` (which queues its children's [`Engine::upsert_routed`]) after the
    /// copy, so that `on_part` may page children in ([`Upserted::Routed`]).
    fn upsert(
        &self,
        keys: &[K],
        values: &[V],
        route: RouteMap<'_>,
        framed: Option<FramedUpsert<'_>>,
        on_part: &mut dyn FnMut(&RoutedBatch) -> Result<()>,
    ) -> Result<Upserted<K, V>>;
    /// A routed upsert batch's insert counters as they stand (waits for the queued kernels; one read), for
    /// children that must settle before `on_part` returns.
    fn counters(&self, batch: &RoutedBatch) -> Result<Vec<u32>>;
    /// Copies a find batch in, partitions it by child, hands the partition to `on_part` (which queues its
    /// children's [`Engine::find_routed`]), and copies the answers out in input order: `out[i]` the value or
    /// all ones, and with `bits`, bit `i % 32` of `bits[i / 32]` for present keys (without, the children look
    /// the values up only).
    fn find(
        &self,
        keys: &[K],
        route: RouteMap<'_>,
        on_part: &mut dyn FnMut(&RoutedBatch) -> Result<()>,
        out: &mut [V],
        bits: Option<&mut [u32]>,
    ) -> Result<()>;
    /// A find of `keys` in tables whose slots all lie in `frames` (a paged table whose children are all
    /// resident), one kernel per copy chunk as it lands: each key's child by `route`, that child's descriptor
    /// from `descs` ([`FRAME_DESC_WORDS`] per child, in child order). Answers as in [`Router::find`]. No
    /// partition, no per-child launches, no gather: the plain table's find, with the route and the
    /// descriptor read per key.
    fn find_framed(
        &self,
        keys: &[K],
        route: RouteMap<'_>,
        frames: &SlotFrames,
        descs: &[u32],
        out: &mut [V],
        bits: Option<&mut [u32]>,
    ) -> Result<()>;
    /// Child `c`'s part of a routed upsert, copied out.
    fn download(&self, batch: &RoutedBatch, c: usize) -> Result<(Vec<K>, Vec<V>)>;
}
