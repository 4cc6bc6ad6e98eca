//! The protocol between a paged table and its children: [`PagedChild`], a static table ([`Engine`]) that also
//! pages out and in, owns its residency (a paged-out child refuses the static table's calls with
//! `paged_out`), rebuilds and splits itself where its slots live, takes a place in [`SlotFrames`], and serves
//! batches a [`Router`] moved to the device and partitioned by child ([`RoutedBatch`]) or wrote in the frames
//! ([`FramedUpsert`]). The children are `cpu::CpuChild` (residency is logical there) and
//! `gpu::child::GpuChild`; `make_child` builds them.

use crate::table::engine::{Engine, Inserted};
use cubecl::server::Handle;
use hashtile_core::{Error, HashFamily, Key, Result, Value};

/// A split of [`PagedChild::rebuild_split`]: the pairs whose route bit `63 - depth` of
/// `route_hash(key, seed)` (`hashtile_core::hash::route_hash`) is set move to a new table built under `family`.
#[derive(Debug, Clone, Copy)]
pub struct SplitSpec {
    /// Route seed.
    pub seed: u64,
    /// The splitting table's route depth.
    pub depth: u32,
    /// Hash family of the new table.
    pub family: HashFamily,
}

/// What [`PagedChild::rebuild_split`] did.
pub struct Rebuilt<K: Key, V: Value> {
    /// Pairs the table's rebuild could not place (no longer in it).
    pub lost: Vec<(K, V)>,
    /// The split's new table, and the pairs its build could not place (in neither table).
    pub split: Option<SplitTable<K, V>>,
}

/// A split's new table and the pairs its build could not place.
pub type SplitTable<K, V> = (Box<dyn PagedChild<K, V>>, Vec<(K, V)>);

/// A child of a paged table: a static table ([`Engine`]) that owns its residency. While paged out, its
/// [`Engine`] calls that need the slots return `paged_out`'s error; [`Engine::len`], [`Engine::capacity`]
/// and [`Engine::family`] answer from the host.
pub trait PagedChild<K: Key, V: Value>: Engine<K, V> {
    /// Rebuilds the table from its own pairs under `family` where they live (GPU tables: unpacked and
    /// re-inserted on the device, nothing crosses the bus); with `split`, the pairs whose route bit is set go
    /// to a new table of the same kind instead. Paged tables' confined rebuilds and splits.
    fn rebuild_split(
        &mut self,
        family: HashFamily,
        split: Option<SplitSpec>,
    ) -> Result<Rebuilt<K, V>>;
    /// Copies the table to host memory, unless the host copy is current, and frees its device memory. Returns
    /// the bytes copied. A paged-out table answers [`PagedChild::page_in`] and the other paging calls,
    /// [`Engine::len`], [`Engine::capacity`] and [`Engine::family`]; its other calls return
    /// [`hashtile_core::Error::InvalidConfig`] (`paged_out`).
    fn page_out(&mut self) -> Result<u64>;
    /// Brings a paged-out table back to device memory; returns the bytes copied (0 when resident).
    fn page_in(&mut self) -> Result<u64>;
    /// `true` when the table's slots are in device memory (always, until [`PagedChild::page_out`]).
    fn is_resident(&self) -> bool;
    /// Device bytes the table occupies while resident (its slot arrays; on the CPU, what a device table of its
    /// slots would).
    fn device_bytes(&self) -> u64;
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
    /// [`PagedChild::page_in`] into frame `index` of `frames` (free: no resident table holds it).
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
    /// Queues the upsert of child `c`'s part of a batch routed by this engine's [`PagedChild::router`] (its keys
    /// are distinct; the caller has checked that they fit): stored keys are updated, the others inserted. Its
    /// counters go to the batch's counters of child `c` ([`RoutedBatch::counters_of`]), so that one read of
    /// the batch's counters settles every child it queued: the caller reads them ([`Router::counters`], or
    /// what [`Router::upsert`] returns) and hands each child its words with [`PagedChild::settle_routed`].
    fn upsert_routed(&mut self, _batch: &RoutedBatch, _c: usize) -> Result<()> {
        Err(no_device_batches())
    }
    /// Settles the queued [`PagedChild::upsert_routed`] from its counters as read back (the child's
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

/// The error a paged-out child gives for work that needs its slots.
pub(crate) fn paged_out() -> Error {
    Error::InvalidConfig("the table is paged out (page_in first)".into())
}

/// Words of one table's descriptor in [`SlotFrames`]: its first bucket in the frames' slot arrays, then its
/// seeds and their mixes.
pub const FRAME_DESC_WORDS: usize = crate::device::probe::FRAME_DESC_WORDS;

/// One device allocation holding the slots of `count` tables of one shape, frame after frame (`gpu::frames`):
/// made by [`PagedChild::new_frames`], filled by [`PagedChild::move_to_frame`] and
/// [`PagedChild::page_in_frame`], read by [`Router::find_framed`] and written by [`Router::upsert`] with a
/// [`FramedUpsert`]. The tables hold sub-ranges of the buffers, which live while any of them does.
#[derive(Debug, Clone)]
pub struct SlotFrames {
    /// Tells frames apart ([`PagedChild::frame`]).
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
pub const ROUTED_COUNTERS: usize = 384;
const _: () = assert!(
    ROUTED_COUNTERS >= crate::device::counters::INSERT_COUNTERS
        && ROUTED_COUNTERS.is_multiple_of(64)
);

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
    /// the partition handed to `on_part` (which queues its children's [`PagedChild::upsert_routed`]) after the
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
    /// children's [`PagedChild::find_routed`]), and copies the answers out in input order: `out[i]` the value or
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
