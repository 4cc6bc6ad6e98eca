//! The launchable kernels: bulk insert and bulk find, each the scheme's step functions driven by the
//! tile-cooperative bucket in a plane-uniform work-sharing loop (see `hashtile_core::tile`), written once for
//! every key layout (`crate::device::layout`).

use crate::device::find::tile_find;
use crate::device::layout::{KeyLayout, key_view};
use crate::device::probe::frame_bucket;
use crate::device::shape::{ShapeScalars, TableMeta, meta_of};
/// The presence bits of finds live with the host-I/O layer that reads them (every family's finds set them).
pub use crate::runtime::host_io::store_found_bits;
use cubecl::prelude::*;
use hashtile_core::scheme::{NO_PAIR, ProbingScheme, action, blank_state};
use hashtile_core::tile::{
    EMPTY_WORD, LaneSlots, TileLane, pick_slots, read_slots_atomic, read_slots_either,
    slot_address, slot_word, tile_ballot, tile_lane, tile_shuffle, tile_shuffle_u64,
};

/// Number of spread-out counters per statistic: one shared counter would serialise millions of atomics.
pub const ADDED_COUNTERS: u32 = 64;
/// Layout of an insert's counter array: `[failures, added x 64, probes x 64, retries x 64]`.
pub const INSERT_COUNTERS: usize = 1 + 3 * ADDED_COUNTERS as usize;

/// An insert's counters read back: `(failures, new keys, probe statistics of `ops` operations)`.
pub fn decode_insert_counters(c: &[u32], ops: u64) -> (usize, usize, hashtile_core::ProbeStats) {
    let spread = ADDED_COUNTERS as usize;
    let sum = |r: std::ops::Range<usize>| c[r].iter().map(|&x| x as u64).sum::<u64>();
    let stats = hashtile_core::ProbeStats {
        probes: sum(1 + spread..1 + 2 * spread),
        ops,
        retries: sum(1 + 2 * spread..1 + 3 * spread),
    };
    (c[0] as usize, sum(1..1 + spread) as usize, stats)
}

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
pub fn insert_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    mask: &Array<u32>,
    mode: u32,
    table: &Array<Atomic<u64>>,
    table_plain: &Array<u64>,
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
) {
    // One table: no frame descriptors (a one-word stand-in, never read).
    let frames = Array::<u32>::new(1usize);
    insert_core::<S, L>(
        keys,
        values,
        mask,
        mode,
        table,
        table_plain,
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
    );
}

/// The body of [`insert_kernel`]. With `framed`, the slot arrays hold many tables of `meta`'s shape (slot
/// frames) and each lane's pair goes to table `child`, whose seeds and first bucket are that table's
/// descriptor in `frames`: the tile carries the child with the pair, and a pair an eviction
/// displaces stays in the same table. `counters` then has a failure counter per table after the
/// [`INSERT_COUNTERS`] words.
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
#[cube]
pub(crate) fn insert_core<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    mask: &Array<u32>,
    mode: u32,
    table: &Array<Atomic<u64>>,
    table_plain: &Array<u64>,
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
) {
    let tl = tile_lane(tile_width);
    let pos = ABSOLUTE_POS;
    let mut pending = pos < keys.len();
    if comptime!(select == select::MASK) {
        if pending {
            pending = mask[pos] == mode;
        }
    }

    let mut my_key = L::Key::new(0);
    let mut my_val = L::Value::new(0);
    if pending {
        my_key = keys[pos];
        my_val = values[pos];
    }
    let mut has_op = false;
    let mut cur_key = L::Key::new(0);
    let mut cur_val = L::Value::new(0);
    let mut cur_child = u32::new(0);
    let mut coherent = false;
    let mut added = u32::new(0);
    let mut probes = u32::new(0);
    // Lost compare-and-swaps: each costs one more read of the same bucket (a probe the sequential model lacks).
    let mut retries = u32::new(0);
    let mut state = blank_state();
    while plane_any(pending || has_op) {
        // An idle tile takes the next pending lane's pair.
        let queue = tile_ballot(pending, tl, tile_width);
        let next = queue.trailing_zeros() % tile_width;
        let next_key = L::shuffle_key(my_key, next, tl, tile_width);
        let next_val = L::shuffle_value(my_val, next, tl, tile_width);
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
            cur_val = next_val;
            coherent = false;
            S::insert_start(&mut state, L::key_mix(cur_key));
            if tl.lane == next {
                pending = false;
            }
        }

        // One probe: read the bucket the state names and let the scheme decide.
        let read_index = state.hash_index;
        let b = frame_bucket::<S, L>(meta, frames, cur_child, cur_key, read_index, framed);
        // Plain loads are fast but may hit a stale cache line; after a lost compare-and-swap the bucket is re-read
        // with atomic loads.
        let slots = read_bucket(
            table,
            table_plain,
            b,
            has_op,
            coherent,
            tl,
            bucket_size,
            tile_width,
            plain_reads,
        );
        // A scheme that reads two buckets before deciding (`S::PAIR_AT`) gets the second one loaded together
        // with the first, so that both loads are in flight at once; everything here compiles out for the others.
        let mut pair = false;
        let mut b2 = b;
        let mut slots2 = slots;
        if comptime!(S::PAIR_AT != NO_PAIR) {
            pair = has_op && read_index == S::PAIR_AT;
            if pair {
                b2 = frame_bucket::<S, L>(
                    meta,
                    frames,
                    cur_child,
                    cur_key,
                    read_index + 1u32,
                    framed,
                );
            }
            let second = read_bucket(
                table,
                table_plain,
                b2,
                pair,
                coherent,
                tl,
                bucket_size,
                tile_width,
                plain_reads,
            );
            slots2.w0 = second.w0;
            slots2.w1 = second.w1;
            slots2.w2 = second.w2;
            slots2.w3 = second.w3;
        }
        let view = key_view::<L>(slots, cur_key, tl, bucket_size, tile_width);
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
        // The action is on the pair's second bucket (whose slots are then the ones to act on).
        let mut on_second = false;
        if comptime!(S::PAIR_AT != NO_PAIR) {
            // The view's ballots only when some tile of the plane read a pair (uniform across the plane).
            if plane_any(pair) {
                let view2 = key_view::<L>(slots2, cur_key, tl, bucket_size, tile_width);
                if pair && act == action::NEXT && state.hash_index == read_index + 1u32 {
                    let st = S::insert_step(&mut state, view2, meta.params, bucket_size);
                    if comptime!(count_probes) {
                        probes += 1u32;
                    }
                    act = st.action;
                    target = st.target;
                    slot = st.slot;
                    on_second = target == read_index + 1u32;
                }
            }
        }
        if comptime!(!L::MOVES_PAIRS) {
            // A layout whose pairs cannot move atomically hands an eviction back as a failure (stable schemes,
            // the only ones such tables run, never ask for one).
            if act == action::EVICT {
                act = action::FAIL;
            }
        }

        // Execute the memory action on the owner lane of the slot, then broadcast what it saw. An update of a
        // packed pair swaps the word it saw; a layout that keeps values apart only stores the value.
        let seen = if comptime!(L::MOVES_PAIRS) {
            if comptime!(S::PAIR_AT != NO_PAIR) {
                slot_word(
                    pick_slots(slots, slots2, on_second),
                    slot,
                    tl,
                    bucket_size,
                    tile_width,
                )
            } else {
                slot_word(slots, slot, tl, bucket_size, tile_width)
            }
        } else {
            EMPTY_WORD.runtime()
        };
        // The action's bucket is nearly always the one just read; hashing again costs ~10% of the instructions.
        let mut tb = b;
        if on_second {
            tb = b2;
        } else if target != read_index {
            tb = frame_bucket::<S, L>(meta, frames, cur_child, cur_key, target, framed);
        }
        let owner = slot % tile_width;
        let mine = L::slot_word(cur_key, cur_val);
        let mut old = EMPTY_WORD.runtime();
        if has_op && tl.lane == owner {
            let addr = slot_address(tb, slot, bucket_size);
            if act == action::CLAIM {
                if comptime!(use_cas) {
                    old = table[addr].compare_exchange_weak(EMPTY_WORD, mine);
                } else {
                    old = table[addr].swap(mine);
                }
                if comptime!(!L::MOVES_PAIRS) {
                    if old == EMPTY_WORD {
                        L::store_value(table_values, addr, cur_val);
                    }
                }
            } else if act == action::EVICT {
                if comptime!(L::MOVES_PAIRS) {
                    old = table[addr].swap(mine);
                }
            } else if act == action::UPDATE {
                if comptime!(L::MOVES_PAIRS) {
                    if comptime!(use_cas) {
                        old = table[addr].compare_exchange_weak(seen, mine);
                    } else {
                        old = table[addr].swap(mine);
                    }
                } else {
                    // The key word stays; only the value changes (updates of one key never share a launch).
                    L::store_value(table_values, addr, cur_val);
                    old = seen;
                }
            }
        }
        let old_all = tile_shuffle_u64(old, owner, tl, tile_width);

        // Tile-uniform bookkeeping.
        if has_op {
            if act == action::CLAIM || act == action::EVICT {
                if old_all == EMPTY_WORD {
                    has_op = false;
                    added += 1;
                } else if act == action::CLAIM && comptime!(use_cas) {
                    coherent = true; // lost the race: re-read this bucket coherently
                    if comptime!(count_probes) {
                        retries += 1u32;
                    }
                } else if comptime!(L::MOVES_PAIRS) {
                    // We hold the displaced pair now and must place it.
                    cur_key = L::key_of(old_all);
                    cur_val = L::value_of(old_all);
                    coherent = false;
                    if act == action::EVICT {
                        let mut from = meta.params.num_hashes;
                        let mut j = meta.params.num_hashes;
                        while j > 0u32 {
                            j -= 1u32;
                            if frame_bucket::<S, L>(meta, frames, cur_child, cur_key, j, framed)
                                == tb
                            {
                                from = j;
                            }
                        }
                        if from == meta.params.num_hashes {
                            from = 0u32;
                        }
                        S::after_evict(&mut state, from, meta.params);
                    } else {
                        // An exchange-claim displaced a pair stored concurrently: insert it afresh.
                        S::insert_start(&mut state, L::key_mix(cur_key));
                    }
                }
            } else if act == action::UPDATE {
                if comptime!(use_cas) {
                    if old_all == seen {
                        has_op = false;
                    } else {
                        coherent = true;
                        if comptime!(count_probes) {
                            retries += 1u32;
                        }
                    }
                } else if L::key_of(old_all) == cur_key {
                    has_op = false;
                } else {
                    cur_key = L::key_of(old_all);
                    cur_val = L::value_of(old_all);
                    S::insert_start(&mut state, L::key_mix(cur_key));
                }
            } else if act == action::FAIL {
                has_op = false;
                if tl.lane == 0u32 {
                    let at = counters[0].fetch_add(1u32);
                    L::stash(failed, at as usize, mine, cur_key, cur_val);
                    if comptime!(framed) {
                        // Each table's failures too (rare: one atomic each), so that each table's count of
                        // stored pairs stays exact even when the launch's stash overflows.
                        counters[(comptime!(INSERT_COUNTERS as u32) + cur_child) as usize]
                            .fetch_add(1u32);
                    }
                }
            }
        }
    }
    // One atomic per plane into a spread-out counter.
    let mut tile_added = u32::new(0);
    if tl.lane == 0u32 {
        tile_added = added;
    }
    let total = plane_sum(tile_added);
    if UNIT_POS_PLANE == 0u32 && total > 0u32 {
        counters[(1u32 + CUBE_POS_X % ADDED_COUNTERS) as usize].fetch_add(total);
    }
    if comptime!(count_probes) {
        let mut tile_probes = u32::new(0);
        let mut tile_retries = u32::new(0);
        if tl.lane == 0u32 {
            tile_probes = probes;
            tile_retries = retries;
        }
        let all = plane_sum(tile_probes);
        if UNIT_POS_PLANE == 0u32 && all > 0u32 {
            counters[(1u32 + ADDED_COUNTERS + CUBE_POS_X % ADDED_COUNTERS) as usize].fetch_add(all);
        }
        let lost = plane_sum(tile_retries);
        if UNIT_POS_PLANE == 0u32 && lost > 0u32 {
            counters[(1u32 + 2u32 * ADDED_COUNTERS + CUBE_POS_X % ADDED_COUNTERS) as usize]
                .fetch_add(lost);
        }
    }
}

/// The insert kernel's read of `bucket`: plain loads where the backend allows them (`plain_reads`; coherent
/// atomic loads after a lost compare-and-swap, `coherent`), else atomic loads.
#[allow(clippy::too_many_arguments)]
#[cube]
fn read_bucket(
    table: &Array<Atomic<u64>>,
    table_plain: &Array<u64>,
    bucket: u32,
    active: bool,
    coherent: bool,
    tl: TileLane,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
) -> LaneSlots {
    if comptime!(plain_reads) {
        read_slots_either(
            table,
            table_plain,
            bucket,
            active,
            coherent,
            tl,
            bucket_size,
            tile_width,
        )
    } else {
        read_slots_atomic(table, bucket, active, tl, bucket_size, tile_width)
    }
}

/// Which positions of a batch the insert kernel inserts (see [`insert_kernel()`]).
pub mod select {
    /// Every position.
    pub const ALL: u32 = 0;
    /// Positions whose mask equals the mode.
    pub const MASK: u32 = 1;
}

/// How a find reports presence besides the value.
pub mod found_mode {
    /// Values only (absent keys get the `absent` value).
    pub const NONE: u32 = 0;
    /// `found[i]` = 1 or 0.
    pub const FLAGS: u32 = 1;
    /// Bit `i % 32` of `found_bits[i / 32]` is set for present keys (the buffer must start zeroed): 1/32 of the
    /// flags' read-back, for the host API's `Option` answers.
    pub const BITS: u32 = 2;
}

/// Bulk find in a table of layout `L`: `out[i]` = the value, or all ones when `keys[i]` is not in the table;
/// presence also as flags or bits per `found_mode` (see [`found_mode`]). `table_values` as in
/// [`insert_kernel()`].
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn find_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    table: &Array<u64>,
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
        out[pos] = v;
        if comptime!(found_mode == found_mode::FLAGS) {
            found[pos] = r.found;
        }
    }
    if comptime!(found_mode == found_mode::BITS) {
        store_found_bits(found_bits, active && r.found == 1u32, pos);
    }
    if comptime!(count_probes) {
        let all = plane_sum(r.probes);
        if UNIT_POS_PLANE == 0u32 && all > 0u32 {
            probe_counters[(CUBE_POS_X % ADDED_COUNTERS) as usize].fetch_add(all);
        }
    }
}
