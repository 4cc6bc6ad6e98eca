//! The device API's cooperative find: table lookups callable from your own CubeCL kernels.
//!
//! A [`TableMeta`] carries a table's shape, seeds and scheme parameters (build it in your kernel from the
//! shape buffer [`crate::table::gpu::GpuTable::device_ref`] returns, with `super::meta::load_meta`). [`tile_find()`] is
//! cooperative: **every lane of the plane must call it**, each with its own key and an `active` flag; lanes of a
//! tile take turns serving each other's keys (warp-cooperative work sharing), and each lane gets its own answer
//! back.

use super::driver::{LaneOp, TileAnswer, op, reads, status, tile_drive};
use super::layout::KeyLayout;
use super::shape::TableMeta;
use super::window::{window_find, windowed};
use cubecl::prelude::*;
use hashtile_core::reduce::Assign;
use hashtile_core::scheme::ProbingScheme;

/// How a find, or a gather of routed answers, reports presence besides the value.
pub mod found_mode {
    /// Values only (absent keys get the `absent` value).
    pub const NONE: u32 = 0;
    /// `found[i]` = 1 or 0.
    pub const FLAGS: u32 = 1;
    /// Bit `i % 32` of `found_bits[i / 32]` is set for present keys (the buffer must start zeroed): 1/32 of the
    /// flags' read-back, for the host API's `Option` answers.
    pub const BITS: u32 = 2;
    /// [`BITS`] and no values (`contains` from host data: the presence bits are all that travels back).
    pub const BITS_ONLY: u32 = 3;
}

/// A lane's find answer (`V`: the layout's value type).
#[derive(CubeType, Clone, Copy)]
pub struct FindResult<V: Int> {
    /// 1 if the key is present.
    pub found: u32,
    /// Its value (0 when `found == 0`).
    pub value: V,
    /// Buckets read for this key (only counted when `count_probes` is on; else 0).
    pub probes: u32,
}

/// A [`FindResult`] with the address of the slot holding the key (`bucket * bucket_size + slot`, the index
/// into the table's slot arrays; 0 when absent): where the host path's classify pass updates a value in place.
/// Kept apart from [`FindResult`] so that finds which do not need it do not carry it (on the H100 the address
/// cost the wide find kernel 3-4 registers and 6-7% of its absent-key rate).
#[derive(CubeType, Clone, Copy)]
pub struct FoundAt<V: Int> {
    /// As in [`FindResult`].
    pub found: u32,
    /// As in [`FindResult`].
    pub value: V,
    /// As in [`FindResult`].
    pub probes: u32,
    /// The slot address (valid when `found == 1`).
    pub slot: u32,
}

/// Cooperative find in a table of layout `L` ([`crate::device::layout`]): `table_keys` holds the key words,
/// `table_values` the values where the layout keeps them apart ([`crate::device::layout::Wide`]; any one-word array
/// for [`crate::device::layout::Packed`], which never reads it). All lanes of the plane must call it, each with its own
/// key and `active` flag; the lane owning the matching slot reads the value and hands it to the lane that asked.
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn tile_find<S: ProbingScheme, L: KeyLayout>(
    table_keys: &Array<L::Word>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] count_probes: bool,
) -> FindResult<L::Value> {
    let r = tile_find_at::<S, L>(
        table_keys,
        table_values,
        meta,
        key,
        active,
        bucket_size,
        tile_width,
        count_probes,
        false,
    );
    without_slot::<L::Value>(r)
}

/// A [`FoundAt`] without its slot: the answer of the finds that do not ask for it.
#[cube]
pub(crate) fn without_slot<V: Int>(r: FoundAt<V>) -> FindResult<V> {
    FindResult::<V> {
        found: r.found,
        value: r.value,
        probes: r.probes,
    }
}

/// [`tile_find()`], with the slot's address in the answer when `want_slot` (else the address is left 0 and
/// compiled out).
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn tile_find_at<S: ProbingScheme, L: KeyLayout>(
    table_keys: &Array<L::Word>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] count_probes: bool,
    #[comptime] want_slot: bool,
) -> FoundAt<L::Value> {
    // One table: no frame descriptors (a one-word stand-in, never read).
    let frames = Array::<u32>::new(1usize);
    tile_find_core::<S, L>(
        table_keys,
        table_values,
        meta,
        key,
        active,
        &frames,
        0u32,
        bucket_size,
        tile_width,
        count_probes,
        want_slot,
        false,
    )
}

/// [`tile_find_at`] on the tile driver ([`tile_drive`] with [`op::FIND`]). With `framed`, the slot arrays hold
/// many tables of `meta`'s shape (a paged table's children, `gpu::frames`), each lane's key is looked up in
/// table `child`, whose seeds and first bucket are descriptor `child` of `frames` ([`FRAME_DESC_WORDS`](super::probe::FRAME_DESC_WORDS) each).
#[allow(clippy::too_many_arguments)]
#[cube]
pub(crate) fn tile_find_core<S: ProbingScheme, L: KeyLayout>(
    table_keys: &Array<L::Word>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    frames: &Array<u32>,
    child: u32,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] count_probes: bool,
    #[comptime] want_slot: bool,
    #[comptime] framed: bool,
) -> FoundAt<L::Value> {
    // Plain reads: no atomic view of the table (a one-word local stand-in the driver never touches).
    let no_words = Array::<Atomic<L::Word>>::new(1usize);
    find_reading::<S, L>(
        &no_words,
        table_keys,
        table_values,
        meta,
        key,
        active,
        frames,
        child,
        bucket_size,
        tile_width,
        reads::PLAIN,
        count_probes,
        want_slot,
        framed,
    )
}

/// [`tile_find_core`] reading buckets per `read_mode` ([`reads`]): plain loads of `table_keys`, or coherent
/// loads of `table_atomic` (the same buffer, bound atomically: the device API's writes on Vulkan, where a
/// kernel binds the table once).
#[allow(clippy::too_many_arguments)]
#[cube]
pub(crate) fn find_reading<S: ProbingScheme, L: KeyLayout>(
    table_atomic: &Array<Atomic<L::Word>>,
    table_keys: &Array<L::Word>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    frames: &Array<u32>,
    child: u32,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] read_mode: u32,
    #[comptime] count_probes: bool,
    #[comptime] want_slot: bool,
    #[comptime] framed: bool,
) -> FoundAt<L::Value> {
    let a = drive_lookup::<S, L>(
        table_atomic,
        table_keys,
        table_values,
        meta,
        key,
        active,
        frames,
        child,
        op::FIND,
        bucket_size,
        tile_width,
        read_mode,
        count_probes,
        want_slot,
        framed,
    );
    FoundAt::<L::Value> {
        found: u32::cast_from(a.status == status::FOUND),
        value: a.value,
        probes: a.probes,
        slot: a.slot,
    }
}

/// One keyed operation per lane that looks its key up and changes at most its slot ([`op::FIND`], or
/// [`op::ERASE`]: the owner lane swaps the found slot to the erased word), on the tile driver; the finds' and
/// the erase's one way in. No allocator, stash or gather output (one-word local stand-ins the driver never
/// touches in these modes). All lanes must call.
#[allow(clippy::too_many_arguments)]
#[cube]
pub(crate) fn drive_lookup<S: ProbingScheme, L: KeyLayout>(
    table_atomic: &Array<Atomic<L::Word>>,
    table_keys: &Array<L::Word>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    frames: &Array<u32>,
    child: u32,
    #[comptime] mode: u32,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] read_mode: u32,
    #[comptime] count_probes: bool,
    #[comptime] want_slot: bool,
    #[comptime] framed: bool,
) -> TileAnswer<L::Value> {
    let no_counts = Array::<Atomic<u32>>::new(1usize);
    let mut no_stash = Array::<u64>::new(1usize);
    let mut no_out = Array::<L::Value>::new(1usize);
    // The sentinel key is never stored, so it is never looked for: an erased packed slot carries its key bits
    // (and a set's erased word is a key of its own).
    let mine = active && L::findable(key);
    // One-lane finds of one-slot linear buckets read windows of probes instead (`super::window`).
    if comptime!(
        mode == op::FIND
            && !S::CHAINS
            && windowed(
                S::FIND_WALKS,
                S::SEQUENCE,
                bucket_size,
                tile_width,
                read_mode == reads::PLAIN,
                framed
            )
    ) {
        window_find::<L>(
            table_keys,
            table_values,
            meta,
            key,
            mine,
            count_probes,
            want_slot,
        )
    } else {
        let lane = LaneOp::<L::Key, L::Value> {
            mine,
            op: mode,
            key,
            value: L::Value::new(0),
            child,
            at: 0u32,
        };
        tile_drive::<S, L, Assign>(
            table_atomic,
            table_keys,
            table_values,
            &no_counts,
            &no_counts,
            0u32,
            &mut no_stash,
            &no_counts,
            0u32,
            &mut no_out,
            meta,
            frames,
            lane,
            mode,
            bucket_size,
            tile_width,
            read_mode,
            true,
            count_probes,
            want_slot,
            framed,
            false,
            false,
            false,
        )
    }
}
