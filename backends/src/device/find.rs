//! The device API's cooperative find: table lookups callable from your own CubeCL kernels.
//!
//! A [`TableMeta`] carries a table's shape, seeds and scheme parameters (build it in your kernel from the
//! shape buffer [`crate::table::gpu::GpuTable::device_ref`] returns, with `super::meta::load_meta`). [`tile_find()`] is
//! cooperative: **every lane of the plane must call it**, each with its own key and an `active` flag; lanes of a
//! tile take turns serving each other's keys (warp-cooperative work sharing), and each lane gets its own answer
//! back.

use super::probe::frame_bucket;
use super::shape::TableMeta;
use crate::device::layout::{KeyLayout, key_view};
use cubecl::prelude::*;
use hashtile_core::scheme::{ProbingScheme, action, blank_state};
use hashtile_core::tile::{read_slots, tile_ballot, tile_lane, tile_shuffle};

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
    table_keys: &Array<u64>,
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
    FindResult::<L::Value> {
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
    table_keys: &Array<u64>,
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

/// The cooperative find loop of [`tile_find_at`]. With `framed`, the slot arrays hold many tables of `meta`'s
/// shape (a paged table's children, `gpu::frames`), each lane's key is looked up in table `child`, whose seeds
/// and first bucket are descriptor `child` of `frames` ([`FRAME_DESC_WORDS`] each): the tile moves the child's
/// index with the key, and each probe reads three words of its descriptor (cached: a few children's words are
/// hot).
#[allow(clippy::too_many_arguments)]
#[cube]
pub(crate) fn tile_find_core<S: ProbingScheme, L: KeyLayout>(
    table_keys: &Array<u64>,
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
    let tl = tile_lane(tile_width);
    let mut pending = active;
    let mut result = FoundAt::<L::Value> {
        found: 0u32,
        value: L::Value::new(0),
        probes: 0u32,
        slot: 0u32,
    };
    let mut steps = u32::new(0);
    let mut has_op = false;
    let mut cur_key = L::Key::new(0);
    let mut cur_child = u32::new(0);
    let mut src = u32::new(0);
    let mut state = blank_state();
    while plane_any(pending || has_op) {
        // An idle tile takes the next pending lane's key.
        let queue = tile_ballot(pending, tl, tile_width);
        let next = queue.trailing_zeros() % tile_width;
        let next_key = L::shuffle_key(key, next, tl, tile_width);
        let mut next_child = u32::new(0);
        if comptime!(framed) {
            next_child = tile_shuffle(child, next, tl, tile_width);
        }
        if !has_op && queue != 0 {
            has_op = true;
            cur_key = next_key;
            if comptime!(framed) {
                cur_child = next_child;
            }
            src = next;
            S::find_start(&mut state);
            steps = 0u32;
            if tl.lane == next {
                pending = false;
            }
        }
        // One probe.
        let b = frame_bucket::<S, L>(meta, frames, cur_child, cur_key, state.hash_index, framed);
        let slots = read_slots(table_keys, b, has_op, tl, bucket_size, tile_width);
        let view = key_view::<L>(slots, cur_key, tl, bucket_size, tile_width);
        let mut act = u32::new(action::NEXT as i64);
        let mut slot = u32::new(0);
        if has_op {
            let st = S::find_step(&mut state, view, meta.params, bucket_size);
            if comptime!(count_probes) {
                steps += 1u32;
            }
            act = st.action;
            slot = st.slot;
        }
        let value = L::tile_value(
            slots,
            slot,
            b,
            has_op && act == action::FOUND,
            table_values,
            tl,
            bucket_size,
            tile_width,
        );
        if has_op && act != action::NEXT {
            has_op = false;
            if tl.lane == src {
                result.probes = steps;
                if act == action::FOUND {
                    result.found = 1u32;
                    result.value = value;
                    if comptime!(want_slot) {
                        result.slot = b * bucket_size + slot;
                    }
                }
            }
        }
    }
    result
}
