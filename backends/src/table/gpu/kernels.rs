//! The static tables' launchable kernels: bulk insert and bulk find, each the tile driver
//! (`crate::device::driver`; inserts of one-lane tiles: their lanes' own walks, `crate::device::lane`) over a
//! batch, written once for every key layout (`crate::device::layout`), with their counters and presence outputs.

use crate::device::counters::{ADDED_AT, PROBES_AT, RECLAIMED_AT, RETRIES_AT, count_spread};
use crate::device::driver::{LaneOp, op, reads, store_inserted_value, tile_drive};
use crate::device::find::tile_find;
use crate::device::lane::{lane_insert, lane_walks};
use crate::device::layout::KeyLayout;
use crate::device::probe::probe_bucket;
use crate::device::shape::{ShapeScalars, TableMeta, meta_of};
/// The presence bits of finds live with the host-I/O layer that reads them (every family's finds set them).
pub use crate::runtime::host_io::store_found_bits;
use cubecl::prelude::*;
use hashtile_core::reduce::{Reduce, kind};
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::tile::tile_lane;

/// The counter layout lives with the device layer (the device API's writes count into it too).
pub use crate::device::counters::{ADDED_COUNTERS, INSERT_COUNTERS};

/// Bulk insert (upsert) of pairs in layout `L` ([`crate::device::layout`]).
///
/// - `table` holds the key words; `table_plain` is the same buffer seen without atomics (fast plain reads), or
///   a dummy when `plain_reads` is off (Vulkan: a buffer may not be bound twice); `table_values` holds the
///   values where the layout keeps them apart (a one-word dummy of its own for [`crate::device::layout::Packed`]).
/// - `use_cas`: claim empty slots with compare-and-swap (the default on every backend). Off: claim with an
///   exchange and carry on inserting whatever was displaced (a CAS-free path for compilers without one; upstream
///   cubecl-opt 0.10.0 breaks compare-and-swap on SPIR-V, which `vendor/cubecl-opt` patches). Layouts that do
///   not move pairs need it on (the table refuses otherwise).
/// - `failed` receives the pairs the scheme gave up on (`L::stash`; `counters[0]` counts them, including those
///   that did not fit); `counters[1..]` count new keys (layout of [`INSERT_COUNTERS`]).
/// - `select` (`select`): which positions are inserted. `ALL` (device-resident batches, the device API);
///   `MASK`: those with `mask[i] == mode` (the host path's update and new-key passes, `crate::table::gpu::upsert`). (Reading
///   the duplicate pass's scratch here instead of a mask, to skip the mark pass, was measured slower on the
///   H100: NOTES.md.)
// The mask test stays a comptime `if` around a runtime `if`: CubeCL cannot mix the two in one condition.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn insert_kernel<S: ProbingScheme, L: KeyLayout, F: Reduce>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    mask: &Array<u32>,
    mode: u32,
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &mut Array<u64>,
    failed: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    shape: &ShapeScalars,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] use_cas: bool,
    #[comptime] plain_reads: bool,
    #[comptime] count_probes: bool,
    #[comptime] select: u32,
    #[comptime] reclaim: bool,
) {
    // One table: no frame descriptors and no 32-bit view (one-word stand-ins, never read).
    let frames = Array::<u32>::new(1usize);
    let no_halves = Array::<Atomic<u32>>::new(1usize);
    insert_core::<S, L, F>(
        keys,
        values,
        mask,
        mode,
        table,
        table_plain,
        &no_halves,
        table_values,
        failed,
        counters,
        meta_of(shape),
        &frames,
        0u32,
        bucket_size,
        tile_width,
        use_cas,
        plain_reads,
        count_probes,
        select,
        false,
        false,
        reclaim,
    );
}

/// [`insert_kernel()`] with the table bound a third time as 32-bit words, `table_halves`, where insert-or-apply
/// with `Add` folds into a packed value's half (the driver's `halves`): launched only for that, on runtimes that
/// may bind a buffer more than once (CUDA), so that every other insert keeps the kernel without the binding.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn fold_insert_kernel<S: ProbingScheme, L: KeyLayout, F: Reduce>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    mask: &Array<u32>,
    mode: u32,
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &mut Array<u64>,
    failed: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    shape: &ShapeScalars,
    table_halves: &Array<Atomic<u32>>,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] use_cas: bool,
    #[comptime] plain_reads: bool,
    #[comptime] count_probes: bool,
    #[comptime] select: u32,
    #[comptime] reclaim: bool,
) {
    let frames = Array::<u32>::new(1usize);
    insert_core::<S, L, F>(
        keys,
        values,
        mask,
        mode,
        table,
        table_plain,
        table_halves,
        table_values,
        failed,
        counters,
        meta_of(shape),
        &frames,
        0u32,
        bucket_size,
        tile_width,
        use_cas,
        plain_reads,
        count_probes,
        select,
        false,
        true,
        reclaim,
    );
}

/// The body of [`insert_kernel`]: the tile driver ([`tile_drive`] with [`op::INSERT`], the table's upsert
/// rule; for one-lane tiles that [`lane_walks`] admits, [`lane_insert`]) over the selected positions, then the
/// counters. With `framed`, the slot arrays hold many tables of
/// `meta`'s shape (slot frames) and each lane's pair goes to table `child`, whose seeds and first bucket are
/// that table's descriptor in `frames`: the tile carries the child with the pair, and a pair an eviction
/// displaces stays in the same table. `counters` then has a failure counter per table after the
/// [`INSERT_COUNTERS`] words. `table_halves` and `halves_bound`: the driver's `halves` ([`fold_insert_kernel`]).
/// `reclaim`: the table may hold erased slots, which inserts take on their walk (the driver's `reclaim`),
/// counted at [`RECLAIMED_AT`].
// The mask test stays a comptime `if` around a runtime `if`: CubeCL cannot mix the two in one condition.
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
#[cube]
pub(crate) fn insert_core<S: ProbingScheme, L: KeyLayout, F: Reduce>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    mask: &Array<u32>,
    mode: u32,
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_halves: &Array<Atomic<u32>>,
    table_values: &mut Array<u64>,
    failed: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    meta: TableMeta,
    frames: &Array<u32>,
    child: u32,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] use_cas: bool,
    #[comptime] plain_reads: bool,
    #[comptime] count_probes: bool,
    #[comptime] select: u32,
    #[comptime] framed: bool,
    #[comptime] halves_bound: bool,
    #[comptime] reclaim: bool,
) {
    let tl = tile_lane(tile_width);
    let pos = ABSOLUTE_POS;
    let mut pending = pos < keys.len();
    if comptime!(select == select::MASK) {
        if pending {
            pending = mask[pos] == mode;
        }
    } else if comptime!(select == select::COUNTED) {
        pending = pos < mask[0] as usize;
    }
    let mut my_key = L::Key::new(0);
    let mut my_val = L::Value::new(0);
    if pending {
        my_key = keys[pos];
        if comptime!(L::HAS_VALUES) {
            my_val = values[pos];
        }
    }
    // An insert has no slab allocator and no gather output (one-word stand-ins the driver never touches).
    let mut no_out = Array::<L::Value>::new(1usize);
    let lane = LaneOp::<L::Key, L::Value> {
        mine: pending,
        op: op::INSERT,
        key: my_key,
        value: my_val,
        child,
        at: 0u32,
    };
    let read_mode = comptime!(reads::for_writes(plain_reads));
    // One-lane tiles walk on their own (`device::lane`): launches that take erased slots or combine values
    // stay on the driver.
    let alone = comptime!(
        lane_walks::<S, L>(tile_width, use_cas, framed) && !reclaim && F::KIND == kind::ASSIGN
    );
    let a = if comptime!(alone) {
        lane_insert::<S, L>(
            table,
            table_plain,
            failed,
            counters,
            meta,
            frames,
            pending,
            my_key,
            my_val,
            bucket_size,
            read_mode,
            count_probes,
        )
    } else {
        tile_drive::<S, L, F>(
            table,
            table_plain,
            table_values,
            table_halves,
            counters,
            0u32,
            failed,
            counters,
            comptime!(INSERT_COUNTERS as u32),
            &mut no_out,
            meta,
            frames,
            lane,
            op::INSERT,
            bucket_size,
            tile_width,
            read_mode,
            use_cas,
            count_probes,
            false,
            framed,
            false,
            halves_bound,
            reclaim,
        )
    };
    store_inserted_value::<L>(table_values, a, pending, my_val);
    // Tile totals, counted once per tile (its lane 0), one atomic per plane.
    let first = tl.lane == 0u32;
    count_spread(counters, ADDED_AT, select_u32(first, a.tile_added));
    if comptime!(count_probes) {
        count_spread(counters, PROBES_AT, select_u32(first, a.tile_probes));
        count_spread(counters, RETRIES_AT, select_u32(first, a.tile_retries));
    }
    if comptime!(reclaim) {
        count_spread(counters, RECLAIMED_AT, select_u32(first, a.tile_reclaimed));
    }
}

/// `value` when `pick`, else 0.
#[cube]
fn select_u32(pick: bool, value: u32) -> u32 {
    let mut v = 0u32;
    if pick {
        v = value;
    }
    v
}

/// Which positions of a batch the insert kernel inserts (see [`insert_kernel()`]).
pub mod select {
    /// Every position.
    pub const ALL: u32 = 0;
    /// Positions whose mask equals the mode.
    pub const MASK: u32 = 1;
    /// Positions below `mask[0]`, a count another kernel left on the device (the binned build's surplus).
    pub const COUNTED: u32 = 2;
}

/// How a find reports presence besides the value (the device layer's, shared with the routed gathers).
pub use crate::device::find::found_mode;

/// Bulk find in a table of layout `L`: `out[i]` = the value, or all ones when `keys[i]` is not in the table;
/// presence also as flags or bits per `found_mode` (see [`found_mode`]). `table_values` as in
/// [`insert_kernel()`].
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn find_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    table: &Array<L::Word>,
    table_values: &Array<u64>,
    out: &mut Array<L::Value>,
    found: &mut Array<u32>,
    found_bits: &Array<Atomic<u32>>,
    shape: &ShapeScalars,
    probe_counters: &Array<Atomic<u32>>,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] found_mode: u32,
    #[comptime] count_probes: bool,
) {
    let meta = meta_of(shape);
    let pos = ABSOLUTE_POS;
    let active = pos < keys.len();
    let mut key = L::Key::new(0);
    if active {
        key = keys[pos];
    }
    let r = tile_find::<S, L>(
        table,
        table_values,
        meta,
        key,
        active,
        bucket_size,
        tile_width,
        count_probes,
    );
    if active {
        let mut v = L::Value::max_value();
        if r.found == 1u32 {
            v = r.value;
        }
        if comptime!(found_mode != found_mode::BITS_ONLY) {
            out[pos] = v;
        }
        if comptime!(found_mode == found_mode::FLAGS) {
            found[pos] = r.found;
        }
    }
    if comptime!(found_mode == found_mode::BITS || found_mode == found_mode::BITS_ONLY) {
        store_found_bits(found_bits, active && r.found == 1u32, pos);
    }
    if comptime!(count_probes) {
        count_spread(probe_counters, 0u32, r.probes);
    }
}

/// Units per cube of [`binned_place_kernel()`].
pub const PLACE_CUBE: u32 = 256;

/// The binned build's placement into an **empty** table (`super::binned`): `keys` and `values` are the batch
/// binned by first bucket (bin `b`'s keys at `bin_starts[b]..bin_starts[b + 1]`, bins of `bin_buckets`
/// consecutive buckets). Each cube takes bins `CUBE_POS`, `CUBE_POS + CUBE_COUNT`, .. in turn (few cubes at a
/// time, so that the slices they write stay in the L2 cache), counts each key into its first bucket with a
/// shared-memory atomic, and writes the pair straight into slot `k` of that bucket when it is the bucket's
/// `k`-th key and `k < bucket_size`: no compare-and-swap, no bucket read, no contention (every slot has one
/// writer). Keys past their bucket's size (and any key the table cannot store, left to the insert's own checks)
/// go to `over_keys` / `over_values`, counted in `over_count[0]`, for the insert kernel ([`select::COUNTED`]).
/// Valid for schemes whose new keys fill their first bucket first (`ProbingScheme::FILLS_FIRST`): the table
/// then holds what the probing insert would have built, keys in their first bucket wherever there was room.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn binned_place_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    bin_starts: &Array<u32>,
    table: &mut Array<u64>,
    over_keys: &mut Array<L::Key>,
    over_values: &mut Array<L::Value>,
    over_count: &Array<Atomic<u32>>,
    counters: &Array<Atomic<u32>>,
    shape: &ShapeScalars,
    bins: u32,
    #[comptime] bucket_size: u32,
    #[comptime] bin_shift: u32,
) {
    let meta = meta_of(shape);
    let t = UNIT_POS;
    let width = comptime!(1u32 << bin_shift);
    let fill = SharedMemory::<Atomic<u32>>::new(comptime!(width as usize));
    // A chunk's surplus: its count, then the range it takes of the surplus arrays.
    let chunk = SharedMemory::<Atomic<u32>>::new(2usize);
    let mut placed = 0u32;
    let mut bin = CUBE_POS as u32;
    // Every unit reaches every barrier: the loops' bounds are the cube's, not the unit's.
    while bin < bins {
        let mut i = t;
        while i < width {
            fill[i as usize].store(0u32);
            i += PLACE_CUBE;
        }
        let first = bin << comptime!(bin_shift);
        let end = bin_starts[(bin + 1) as usize];
        let mut at = bin_starts[bin as usize];
        sync_cube();
        while at < end {
            let pos = at + t;
            let mut surplus = false;
            let mut key = L::Key::new(0);
            let mut value = L::Value::new(0);
            if pos < end {
                key = keys[pos as usize];
                value = values[pos as usize];
                surplus = true;
                if L::findable(key) {
                    let b = probe_bucket::<S, L>(meta, key, 0u32);
                    let k = fill[(b - first) as usize].fetch_add(1u32);
                    if k < bucket_size {
                        table[b as usize * comptime!(bucket_size as usize) + k as usize] =
                            L::slot_word(key, value);
                        placed += 1u32;
                        surplus = false;
                    }
                }
            }
            if t == 0u32 {
                chunk[0].store(0u32);
            }
            sync_cube();
            let mut rank = 0u32;
            if surplus {
                rank = chunk[0].fetch_add(1u32);
            }
            sync_cube();
            if t == 0u32 {
                let m = chunk[0].load();
                if m > 0u32 {
                    chunk[1].store(over_count[0].fetch_add(m));
                }
            }
            sync_cube();
            if surplus {
                let o = (chunk[1].load() + rank) as usize;
                over_keys[o] = key;
                over_values[o] = value;
            }
            at += PLACE_CUBE;
        }
        sync_cube();
        bin += CUBE_COUNT as u32;
    }
    count_spread(counters, ADDED_AT, placed);
}
