//! The chained tables' device code: the slab layout's constants, the operation and status codes, and the one
//! device function every operation runs ([`chained_tile_op`]), with the batch, flush and census kernels.

use super::alloc::{OUT_OF_SLABS, alloc_slab, free_slab, resident_block, tile_alloc_slab};
use crate::device::layout::{KeyLayout, key_view};
use crate::device::shape::{ShapeScalars, TableMeta, meta_of};
use crate::runtime::host_io::store_found_bits;
use cubecl::prelude::*;
use hashtile_core::scheme::{BucketView, ProbingScheme, SchemeParams, action, blank_state};
use hashtile_core::tile::{
    EMPTY_WORD, LaneSlots, TileLane, read_slots_either, slot_word, tile_ballot, tile_lane,
    tile_loop_any, tile_shuffle, tile_shuffle_u64,
};
use hashtile_probing::Chain;

/// Words per slab (15 slots and the link).
pub const SLAB_WORDS: u32 = 16;
/// The link's slot.
pub(crate) const LINK_SLOT: u32 = 15;
/// The view bits of the 15 pair slots.
pub(crate) const PAIR_SLOTS: u32 = 0x7fff;
/// Counters of new pairs, spread out: tiles add their counts to one of these, each on its own 128-byte line.
pub(crate) const NEW_COUNTERS: u32 = 64;
/// Words between counters (a 128-byte line each: same-line atomics queue in one L2 slice).
pub(crate) const COUNTER_STRIDE: u32 = 32;
/// Words of the counter array: the retry count's line, the new-pair counters' lines, then as many lines that
/// count the erases of mixed batches.
pub(crate) const COUNTER_WORDS: usize = ((1 + 2 * NEW_COUNTERS) * COUNTER_STRIDE) as usize;
/// The sum of the [`NEW_COUNTERS`] spread-out counters from line `from` of a counter array read back (line 1:
/// new pairs; line `1 + NEW_COUNTERS`: a mixed batch's erases).
pub(crate) fn counter_lines(c: &[u32], from: u32) -> usize {
    (from..from + NEW_COUNTERS)
        .map(|i| c[(i * COUNTER_STRIDE) as usize] as usize)
        .sum()
}

/// Operation codes: each operation of a mixed batch (`ops[q]`, [`op::INSERT`] to [`op::FIND`]), and the kernel's
/// `mode` when a launch runs one kind of operation.
pub mod op {
    /// A further copy of the pair (multimap).
    pub const INSERT: u32 = 0;
    /// Insert the pair, or overwrite the key's first copy (unique keys).
    pub const REPLACE: u32 = 1;
    /// Tombstone the key's first copy.
    pub const ERASE: u32 = 2;
    /// The value of the key's first copy.
    pub const FIND: u32 = 3;
    /// How many copies (`out[q]`); a whole launch only.
    pub const COUNT: u32 = 4;
    /// Every copy's value, written from `aux[q]` (the exclusive scan of the counts) into `out`; a launch only.
    pub const GATHER: u32 = 5;
    /// Tombstone every copy (`out[q]`: how many); a launch only.
    pub const ERASE_ALL: u32 = 6;
    /// A mode only: each thread's operation is `ops[q]`.
    pub const MIXED: u32 = 7;
}

/// What one operation did (`aux[q]` of [`op::FIND`] launches and of mixed batches).
pub mod status {
    /// A find or erase of a key not stored.
    pub const NOT_FOUND: u32 = 0;
    /// A find's key is stored: `out[q]` is its first copy's value.
    pub const FOUND: u32 = 1;
    /// An insert or a replace stored a new pair.
    pub const INSERTED: u32 = 2;
    /// A replace overwrote the key's first copy.
    pub const UPDATED: u32 = 3;
    /// An erase tombstoned the key's first copy.
    pub const ERASED: u32 = 4;
    /// An insert found the pool empty and did nothing: run it again once the pool has grown (the batch calls
    /// do; a kernel calling [`crate::chained::gpu::chained_tile_op()`] sees it).
    pub const NO_SLAB: u32 = 5;
}

/// The view of a slab just read: the pair slots' masks and the link. Without `matching` (multimap inserts,
/// which never look for their key) the key comparisons and their ballots are left out: `matched` is 0.
// The masks start as runtime variables that both compile-time branches assign.
#[allow(unused_assignments)]
#[cube]
pub(crate) fn slab_view<L: KeyLayout>(
    slots: LaneSlots,
    key: L::Key,
    tl: TileLane,
    #[comptime] matching: bool,
    #[comptime] tw: u32,
) -> BucketView {
    let mut empty = 0u32;
    let mut matched = 0u32;
    if comptime!(matching) {
        let v = key_view::<L>(slots, key, tl, SLAB_WORDS, tw);
        empty = v.empty;
        matched = v.matched;
    } else {
        empty = tile_ballot(slots.w0 == EMPTY_WORD, tl, tw);
        if comptime!(SLAB_WORDS / tw >= 2) {
            empty |= tile_ballot(slots.w1 == EMPTY_WORD, tl, tw) << tw;
        }
    }
    // The link's low half only (one shuffle): its owner lane holds slot 15 in its first or second word.
    let mut mine = slots.w0;
    if comptime!(SLAB_WORDS / tw >= 2) {
        mine = slots.w1;
    }
    let next = tile_shuffle((mine & 0xffff_ffffu64) as u32, LINK_SLOT % tw, tl, tw);
    BucketView {
        empty: empty & PAIR_SLOTS,
        matched: matched & PAIR_SLOTS,
        next,
    }
}

/// Lanes per tile unless chosen (`GpuChained::with_tile_width`).
pub const DEFAULT_TILE: u32 = 8;

/// What [`chained_tile_op()`] did for one lane's operation (`V`: the layout's value type).
#[derive(CubeType, Clone, Copy)]
pub struct ChainedAnswer<V: CubePrimitive> {
    /// A find's value (its key's first copy).
    pub value: V,
    /// An erase's count (0 or 1), a count's or `erase_all`'s.
    pub count: u32,
    /// A [`status`]: [`status::NO_SLAB`] when an insert found the pool empty (not done; run it again after
    /// the pool has grown).
    pub status: u32,
}

/// One operation per lane on a chained table, **called by every lane of the plane together** (cooperative:
/// each tile of `tw` lanes serves its lanes' operations one after another, reading a slab per step as one
/// bucket, so a plane's lanes may hold different kinds of operation). Lane `i`'s operation: `my_op` on
/// `my_key` (and `my_value` for inserts) where `mine`; lanes without one (`mine == false`) still take part.
/// `mode` is a single [`op`] for every lane or [`op::MIXED`] (then `my_op` is [`op::INSERT`] to
/// [`op::FIND`]); [`op::GATHER`] writes a key's values to `out[my_at..]` (`out` is unused otherwise).
///
/// `L` is the table's key layout: `Packed` (32-bit keys and values in one slab word) or [`Wide`](crate::device::layout::Wide) (64-bit key
/// words in the slabs, the values in `slab_values` at the same index). The table comes from
/// `GpuChained::device_ref`: `slabs` (atomic) and `slabs_plain` (the same array without atomics where
/// `plain`, which only CUDA can bind twice; else a dummy), `slab_values` (wide tables; a dummy otherwise), the
/// allocator's `bitmap` and `pool`, and `meta` (from [`crate::device::shape::load_meta()`] of the shape). Launches
/// that only walk (finds, counts, gathers) may bind a dummy as `slabs` and must set `plain`.
///
/// **Wide tables and mixed operations:** a wide insert claims the key word, then stores the value; with no
/// device-wide fence in CubeCL, a find of the same key in the same kernel may see the key before its value.
/// The batch calls therefore run a wide mixed batch as two launches (finds and erases, then inserts); a kernel
/// of yours should not find keys it inserts in the same launch of a wide table.
// `act` and `slot` start as runtime variables that both branches assign (cube code has no `if` expressions
// that yield structs). The allocator's start is a multiplicative hash that wraps.
#[allow(
    clippy::too_many_arguments,
    clippy::collapsible_if,
    clippy::collapsible_else_if,
    unused_assignments,
    arithmetic_overflow
)]
#[cube]
pub fn chained_tile_op<L: KeyLayout>(
    slabs: &Array<Atomic<u64>>,
    slabs_plain: &Array<u64>,
    slab_values: &mut Array<u64>,
    bitmap: &Array<Atomic<u32>>,
    pool: u32,
    meta: TableMeta,
    mine: bool,
    my_op: u32,
    my_key: L::Key,
    my_value: L::Value,
    my_at: u32,
    out: &mut Array<L::Value>,
    #[comptime] mode: u32,
    #[comptime] plain: bool,
    #[comptime] resident: bool,
    #[comptime] tw: u32,
) -> ChainedAnswer<L::Value> {
    // Which kinds of operation this call can hold (the rest compiles away).
    let inserts = comptime!(mode == op::INSERT || mode == op::REPLACE || mode == op::MIXED);
    // Multimap inserts never look for their key; replaces, erases, finds and mixed batches do.
    let matching = comptime!(mode != op::INSERT);
    // The word of the slot an operation acts on: an update's or erase's expected word, a find's value.
    let needs_seen = comptime!(
        mode == op::REPLACE || mode == op::ERASE || mode == op::FIND || mode == op::MIXED
    );
    // A lost claim asks whose key took the slot only where a replace may be racing its own key.
    let needs_taken = comptime!(mode == op::REPLACE || mode == op::MIXED);
    let tl = tile_lane(tw);
    let mut todo = tile_ballot(mine, tl, tw);
    // Each lane hashes its own key once, in parallel; the tile takes the bucket with the key.
    let my_slab = L::bucket(meta, my_key, 0u32);
    let tomb = L::tomb_word();
    // The operation being served (the same in every lane of the tile).
    let mut active = false;
    let mut cur = u32::new(mode as i64);
    // The lane whose operation the tile serves.
    let mut serving = 0u32;
    let mut key = L::Key::new(0);
    let mut value = L::Value::new(0);
    let mut slab = 0u32;
    let mut state = blank_state();
    let mut coherent = true;
    // A claim lost to another key goes on from the same view with that slot marked taken (`reuse`: no read;
    // the view's masks and link are kept field by field, as cube code cannot reassign a struct).
    let mut reuse = false;
    let mut kept_empty = 0u32;
    let mut kept_matched = 0u32;
    let mut kept_next = 0u32;
    // Walks: matches counted, the gather cursor, the value found, the outcome.
    let mut c = 0u32;
    let mut w = 0usize;
    let mut found_value = L::Value::new(0);
    let mut result = 0u32;
    // The tile's resident allocator block (SlabAlloc's; used where `resident`).
    let mut res = resident_block(pool, tw);
    // This lane's answer, set when the tile finishes its operation.
    let mut answer_value = L::Value::new(0);
    let mut answer_count = 0u32;
    let mut answer_status = 0u32; // status::NOT_FOUND, as a literal: a runtime variable
    loop {
        // A tile without an operation takes its next lane's (shuffles: in every lane of the plane, or none).
        let pick = !active && todo != 0u32;
        if tile_loop_any(pick, tw) {
            let mut b = 0u32;
            if pick {
                b = todo.trailing_zeros();
            }
            let nk = L::shuffle_key(my_key, b, tl, tw);
            let ns = tile_shuffle(my_slab, b, tl, tw);
            let mut nv = L::Value::new(0);
            if comptime!(inserts) {
                nv = L::shuffle_value(my_value, b, tl, tw);
            }
            let mut no = 0u32;
            if comptime!(mode == op::MIXED) {
                no = tile_shuffle(my_op, b, tl, tw);
            }
            let mut na = 0u32;
            if comptime!(mode == op::GATHER) {
                na = tile_shuffle(my_at, b, tl, tw);
            }
            if pick {
                key = nk;
                value = nv;
                serving = b;
                if comptime!(mode == op::MIXED) {
                    cur = no;
                }
                slab = ns;
                Chain::insert_start(&mut state, 1u32);
                // Erases read coherently (their compare-and-swap expects the word read); so does everything
                // where no plain binding exists.
                coherent = cur == op::ERASE || cur == op::ERASE_ALL;
                if comptime!(!plain) {
                    coherent = true;
                }
                if comptime!(mode == op::GATHER) {
                    w = na as usize;
                }
                reuse = false;
                c = 0u32;
                found_value = L::Value::new(0);
                result = status::NOT_FOUND;
                active = true;
                todo &= todo - 1u32;
            }
        }
        if !tile_loop_any(active, tw) {
            break;
        }
        let slots = read_slots_either(
            slabs,
            slabs_plain,
            slab,
            active && !reuse,
            coherent,
            tl,
            SLAB_WORDS,
            tw,
        );
        let read = slab_view::<L>(slots, key, tl, matching, tw);
        let mut empty = read.empty;
        let mut matched = read.matched;
        let mut link = read.next;
        if reuse {
            empty = kept_empty;
            matched = kept_matched;
            link = kept_next;
        }
        let view = BucketView {
            empty,
            matched,
            next: link,
        };
        // The scheme's step: an insert's (claim, update, follow, append) or a walk's (found, follow, absent).
        let is_insert = cur <= op::REPLACE;
        let mut act = 0u32;
        let mut slot = 0u32;
        if is_insert {
            let mut upsert = 0u32;
            if cur == op::REPLACE {
                upsert = 1u32;
            }
            let params = SchemeParams {
                num_hashes: meta.params.num_hashes,
                max_chain: meta.params.max_chain,
                threshold: meta.params.threshold,
                upsert,
            };
            let step = Chain::insert_step(&mut state, view, params, SLAB_WORDS);
            act = step.action;
            slot = step.slot;
        } else {
            let step = Chain::find_step(&mut state, view, meta.params, SLAB_WORDS);
            act = step.action;
            slot = step.slot;
        }
        let mut seen = 0u64;
        if comptime!(needs_seen) {
            seen = slot_word(slots, slot, tl, SLAB_WORDS, tw);
        }
        // A find's value: in the slot word (packed), or read from the value array by the slot's owner lane and
        // shuffled to the tile (wide; every lane of the plane takes part).
        let mut found_here = L::Value::new(0);
        if comptime!(mode == op::FIND || mode == op::MIXED) {
            if comptime!(L::MOVES_PAIRS) {
                found_here = L::value_of(seen);
            } else {
                let finding = active && cur == op::FIND && act == action::FOUND;
                found_here =
                    L::tile_value(slots, slot, slab, finding, slab_values, tl, SLAB_WORDS, tw);
            }
        }
        let owner = slot % tw == tl.lane;
        let at = (slab * SLAB_WORDS + slot) as usize;
        let mut ok = false;
        // An append's outcome, from lane 0: the slab linked, `u32::MAX` (another tile linked first, or no
        // append) or OUT_OF_SLABS.
        let mut linked = 4294967295u32;
        let mut taken = 0xffff_ffff_ffff_ffffu64; // EMPTY_WORD, as a literal: a runtime variable
        // A new slab for a full list: from the tile's resident block (the whole plane takes part), or from
        // the hashed bitmap by lane 0 below.
        let mut p = 4294967295u32;
        if comptime!(inserts && resident) {
            let wants = active && is_insert && act == action::APPEND;
            p = tile_alloc_slab(bitmap, pool, wants, &mut res, tl, tw);
        }
        if active {
            if comptime!(inserts) {
                if is_insert && act == action::CLAIM && owner {
                    taken = slabs[at].compare_exchange_weak(EMPTY_WORD, L::slot_word(key, value));
                    ok = taken == EMPTY_WORD;
                    if comptime!(!L::MOVES_PAIRS) {
                        // The claimed key word's value, stored by the claiming lane.
                        if ok {
                            L::store_value(slab_values, at, value);
                        }
                    }
                } else if is_insert && act == action::UPDATE && owner {
                    if comptime!(L::MOVES_PAIRS) {
                        ok =
                            slabs[at].compare_exchange_weak(seen, L::slot_word(key, value)) == seen;
                    } else {
                        // The key word stays; the value is one store (racing updates: one of them wins).
                        L::store_value(slab_values, at, value);
                        ok = true;
                    }
                } else if is_insert && act == action::APPEND && tl.lane == 0u32 {
                    if comptime!(!resident) {
                        p = alloc_slab(bitmap, pool, (L::key_mix(key) ^ serving) * 2654435761u32);
                    }
                    if p == 4294967295u32 {
                        linked = OUT_OF_SLABS;
                    } else {
                        let s = meta.num_buckets + p;
                        let link_at = (slab * SLAB_WORDS + LINK_SLOT) as usize;
                        let word = 0xffff_ffff_0000_0000u64 | (s as u64);
                        if slabs[link_at].compare_exchange_weak(EMPTY_WORD, word) == EMPTY_WORD {
                            linked = s;
                        } else {
                            free_slab(bitmap, p);
                        }
                    }
                }
            }
            if comptime!(mode == op::ERASE || mode == op::MIXED) {
                if cur == op::ERASE && act == action::FOUND && owner {
                    ok = slabs[at].compare_exchange_weak(seen, tomb) == seen;
                }
            }
        }
        // Walks over every match of a slab: this lane's matched slots (`lane`, and `lane + tw` when a lane
        // holds two).
        let mut multi = 0u32;
        if comptime!(mode == op::COUNT || mode == op::GATHER || mode == op::ERASE_ALL) {
            let m0 = active && (view.matched >> tl.lane) & 1u32 == 1u32;
            let mut m1 = false;
            if comptime!(SLAB_WORDS / tw >= 2) {
                m1 = active && (view.matched >> (tl.lane + tw)) & 1u32 == 1u32;
            }
            let mut ok0 = false;
            let mut ok1 = false;
            if comptime!(mode == op::ERASE_ALL) {
                let base = (slab * SLAB_WORDS + tl.lane) as usize;
                if m0 {
                    ok0 = slabs[base].compare_exchange_weak(slots.w0, tomb) == slots.w0;
                }
                if m1 {
                    let at1 = base + tw as usize;
                    ok1 = slabs[at1].compare_exchange_weak(slots.w1, tomb) == slots.w1;
                }
            }
            if comptime!(mode == op::GATHER) {
                let base = (slab * SLAB_WORDS + tl.lane) as usize;
                let below = view.matched & ((1u32 << tl.lane) - 1u32);
                if m0 {
                    out[w + below.count_ones() as usize] =
                        L::own_value(slots.w0, slab_values, base);
                }
                if m1 {
                    let below1 = view.matched & ((1u32 << (tl.lane + tw)) - 1u32);
                    out[w + below1.count_ones() as usize] =
                        L::own_value(slots.w1, slab_values, base + tw as usize);
                }
            }
            multi = tile_ballot(ok0, tl, tw).count_ones() + tile_ballot(ok1, tl, tw).count_ones();
        }
        let done = tile_ballot(ok, tl, tw) != 0u32;
        let mut next = 4294967295u32;
        if comptime!(inserts) {
            next = tile_shuffle(linked, 0u32, tl, tw);
        }
        if comptime!(needs_taken) {
            taken = tile_shuffle_u64(taken, slot % tw, tl, tw);
        }
        let failed = next == OUT_OF_SLABS;
        reuse = false;
        if active {
            let mut finished = false;
            if is_insert {
                if act == action::CLAIM || act == action::UPDATE {
                    if done {
                        if act == action::CLAIM {
                            result = status::INSERTED;
                        } else {
                            result = status::UPDATED;
                        }
                        finished = true;
                    } else if act == action::CLAIM && (cur == op::INSERT || L::key_of(taken) != key)
                    {
                        // Another key took the slot: the next empty slot of the same view, no re-read.
                        kept_empty = empty & !(1u32 << slot);
                        kept_matched = matched;
                        kept_next = link;
                        reuse = true;
                    } else {
                        // A racing replace of our key (then a match), or a lost update: read again, coherently.
                        coherent = true;
                    }
                } else if act == action::FOLLOW {
                    slab = view.next;
                } else if act == action::APPEND {
                    if failed {
                        // Not done: to run again after the pool has grown.
                        result = status::NO_SLAB;
                        finished = true;
                    } else if next != 4294967295u32 {
                        slab = next;
                    } else {
                        // Another tile linked a slab first: re-read this one (its link is set now).
                        coherent = true;
                    }
                }
            } else {
                if act == action::FOUND {
                    if cur == op::FIND {
                        found_value = found_here;
                        result = status::FOUND;
                        act = action::ABSENT;
                    } else if cur == op::ERASE {
                        if done {
                            c = 1u32;
                            result = status::ERASED;
                            act = action::ABSENT;
                        } else {
                            // The slot changed under us: read the slab again.
                            act = action::NEXT;
                        }
                    } else {
                        if comptime!(mode == op::ERASE_ALL) {
                            c += multi;
                        } else {
                            c += view.matched.count_ones();
                        }
                        w += view.matched.count_ones() as usize;
                        act = Chain::find_more(&mut state, view, meta.params).action;
                    }
                }
                if act == action::FOLLOW {
                    slab = view.next;
                } else if act == action::ABSENT {
                    finished = true;
                }
            }
            if finished {
                active = false;
                if tl.lane == serving {
                    answer_status = result;
                    answer_count = c;
                    answer_value = found_value;
                }
            }
        }
    }
    ChainedAnswer::<L::Value> {
        value: answer_value,
        count: answer_count,
        status: answer_status,
    }
}

/// Runs operation `q` for `q < n` (with `indexed`: for `q = sel[0..n]`, the inserts of an earlier launch that
/// found the pool empty), a thread per operation: each tile serves its lanes' operations one after another
/// (warp-cooperative work sharing), so a launch has as many threads as operations, as the static kernels do.
///
/// `mode` ([`op`]) is what every thread does, or [`op::MIXED`]: thread `q` does `ops[q]`, so one warp may mix
/// inserts, erases and finds. Outputs by mode:
/// - inserts: `counters[0]` counts the operations recorded in `retry` (the pool ran out);
///   `counters[COUNTER_STRIDE * (1 + i)]` for `i < NEW_COUNTERS` count new pairs, and (mixed batches)
///   `counters[COUNTER_STRIDE * (1 + NEW_COUNTERS + i)]` erases, each tile adding its counts once, at its end (an atomic per stored pair on few lines took most of the time: 1.40 against 7.2 G keys/s
///   on the H100);
/// - [`op::FIND`] and mixed batches: `out[q]`, a found value, and `aux[q]`, a [`status`];
/// - [`op::ERASE`], [`op::COUNT`], [`op::ERASE_ALL`]: `aux[q]`, how many; [`op::GATHER`]: see [`op`].
///
/// With `compact` (the host calls' answers, [`op::FIND`], [`op::ERASE`] and [`op::ERASE_ALL`] only), a find
/// sets bit `t % 32` of `found_bits[t / 32]` for a present key instead of writing a status word (1/32 of the
/// read-back, as the static tables' finds), and erases add their counts to the counters' erase lines (one read
/// of the counters instead of a word per key). With `gated`, the launch does nothing once `gate[0]` is set (a
/// reserved key found in the batch by `first_reserved_kernel`, queued before this launch over every key).
/// `base` is the position of `keys[0]` in the host batch: inserts that found the pool empty record `base + q`,
/// so that the launches over a batch's chunks share one retry list over the whole batch.
///
/// `phase` splits a mixed batch of a wide table into two launches (see [`chained_tile_op()`]): 1 runs only its
/// erases and finds, 2 only its inserts; 0 runs everything.
///
/// **Reads.** Finds and counts read `slabs_plain` (the slab array bound without atomics: CubeCL lowers an atomic
/// load to an atomic add of zero on CUDA, 16 per slab read). Inserts read it too where `plain` (CUDA binds the
/// array twice; Vulkan binds a buffer once): a stale view only costs a failed compare-and-swap, as claims take
/// the first empty slot and links are set once. After a lost compare-and-swap, and for every erase, reads are
/// coherent (`slabs`). Launches that change nothing bind a dummy as `slabs`; launches on Vulkan that change
/// the table bind a dummy as `slabs_plain` (`plain == false`).
// `act` and `slot` start as runtime variables that both branches assign (cube code has no `if` expressions
// that yield structs).
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
#[cube(launch_unchecked)]
pub fn chained_kernel<L: KeyLayout>(
    ops: &Array<u32>,
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    sel: &Array<u32>,
    n: u32,
    slabs: &Array<Atomic<u64>>,
    slabs_plain: &Array<u64>,
    slab_values: &mut Array<u64>,
    bitmap: &Array<Atomic<u32>>,
    pool: u32,
    out: &mut Array<L::Value>,
    aux: &mut Array<u32>,
    retry: &mut Array<u32>,
    counters: &Array<Atomic<u32>>,
    found_bits: &Array<Atomic<u32>>,
    gate: &Array<u32>,
    base: u32,
    shape: &ShapeScalars,
    #[comptime] mode: u32,
    #[comptime] indexed: bool,
    #[comptime] plain: bool,
    #[comptime] phase: u32,
    #[comptime] resident: bool,
    #[comptime] tw: u32,
    #[comptime] compact: bool,
    #[comptime] gated: bool,
) {
    let inserts = comptime!(mode == op::INSERT || mode == op::REPLACE || mode == op::MIXED);
    let reports = comptime!(mode == op::FIND || mode == op::MIXED);
    let erases = comptime!(mode == op::ERASE || mode == op::ERASE_ALL);
    let tl = tile_lane(tw);
    let t = ABSOLUTE_POS;
    // This thread's operation.
    let mut mine = t < n as usize;
    let mut q = t;
    let mut key = L::Key::new(0);
    let mut value = L::Value::new(0);
    let mut kind = u32::new(mode as i64);
    let mut at = 0u32;
    if mine {
        if comptime!(indexed) {
            q = sel[t] as usize;
        }
        key = keys[q];
        if comptime!(inserts) {
            value = values[q];
        }
        if comptime!(mode == op::MIXED) {
            kind = ops[q];
        }
        if comptime!(mode == op::GATHER) {
            at = aux[q];
        }
    }
    if comptime!(phase == 1) {
        mine = mine && kind >= op::ERASE;
    }
    if comptime!(phase == 2) {
        mine = mine && kind <= op::REPLACE;
    }
    if comptime!(gated) {
        mine = mine && gate[0] == u32::MAX;
    }
    let a = chained_tile_op::<L>(
        slabs,
        slabs_plain,
        slab_values,
        bitmap,
        pool,
        meta_of(shape),
        mine,
        kind,
        key,
        value,
        at,
        out,
        mode,
        plain,
        resident,
        tw,
    );
    if mine {
        if comptime!(reports) {
            let mut v = a.value;
            if comptime!(mode == op::FIND) {
                // A find's answer for an absent key is the all-ones value (`find_into`'s convention).
                if a.status != status::FOUND {
                    v = L::Value::max_value();
                }
            }
            out[q] = v;
            if comptime!(!compact) {
                aux[q] = a.status;
            }
        } else if comptime!(!inserts && mode != op::GATHER && !(compact && erases)) {
            aux[q] = a.count;
        }
        if comptime!(inserts) {
            if a.status == status::NO_SLAB {
                // Recorded for the next launch, after the pool has grown. Always in bounds where the host
                // sized `retry` for the launch; a queued launch (`insert_queued`) has a one-word list and a
                // pool that provably suffices, and its count is checked when it settles.
                let at_retry = counters[0].fetch_add(1u32);
                if at_retry < retry.len() as u32 {
                    retry[at_retry as usize] = base + q as u32;
                }
            }
        }
    }
    if comptime!(compact && mode == op::FIND) {
        store_found_bits(found_bits, mine && a.status == status::FOUND, t);
    }
    if comptime!(compact && erases) {
        // A plane's erases, added once to one of the spread-out erase lines.
        let mut c = 0u32;
        if mine {
            c = a.count;
        }
        let all = plane_sum(c);
        let k = (t as u32 / tw) % NEW_COUNTERS;
        if UNIT_POS_PLANE == 0u32 && all > 0u32 {
            counters[((1u32 + NEW_COUNTERS + k) * COUNTER_STRIDE) as usize].fetch_add(all);
        }
    }
    if comptime!(inserts) {
        // New pairs (and a mixed batch's erases), counted once per tile on one of the spread-out lines.
        let k = (t as u32 / tw) % NEW_COUNTERS;
        let stored = tile_ballot(mine && a.status == status::INSERTED, tl, tw).count_ones();
        if tl.lane == 0u32 && stored > 0u32 {
            counters[((1u32 + k) * COUNTER_STRIDE) as usize].fetch_add(stored);
        }
        if comptime!(mode == op::MIXED) {
            let erased = tile_ballot(mine && a.status == status::ERASED, tl, tw).count_ones();
            if tl.lane == 0u32 && erased > 0u32 {
                counters[((1u32 + NEW_COUNTERS + k) * COUNTER_STRIDE) as usize].fetch_add(erased);
            }
        }
    }
}

/// Compacts bucket `b`'s list (a thread per bucket; nothing else runs meanwhile): its live pairs move to the
/// front in list order, the slabs left over are emptied and freed (`freed[0]` counts them). Wide tables move
/// each pair's value in `slab_values` with its key word.
#[cube(launch_unchecked)]
pub fn chained_flush_kernel<L: KeyLayout>(
    slabs: &mut Array<u64>,
    slab_values: &mut Array<u64>,
    bitmap: &Array<Atomic<u32>>,
    freed: &Array<Atomic<u32>>,
    buckets: u32,
) {
    let b = ABSOLUTE_POS as u32;
    if b < buckets {
        let mut ws = b;
        let mut wi = 0u32;
        let mut rs = b;
        loop {
            for i in 0..15u32 {
                let from = (rs * SLAB_WORDS + i) as usize;
                let word = slabs[from];
                // Live: neither empty nor a tombstone.
                if word != EMPTY_WORD && !L::is_tomb(word) {
                    if wi == 15u32 {
                        // The write cursor trails the read cursor: its slab's link is still intact.
                        ws =
                            (slabs[(ws * SLAB_WORDS + LINK_SLOT) as usize] & 0xffff_ffffu64) as u32;
                        wi = 0u32;
                    }
                    let to = (ws * SLAB_WORDS + wi) as usize;
                    slabs[to] = word;
                    if comptime!(!L::MOVES_PAIRS) {
                        slab_values[to] = slab_values[from];
                    }
                    wi += 1u32;
                }
            }
            let link = slabs[(rs * SLAB_WORDS + LINK_SLOT) as usize];
            if link == EMPTY_WORD {
                break;
            }
            rs = (link & 0xffff_ffffu64) as u32;
        }
        while wi < 15u32 {
            slabs[(ws * SLAB_WORDS + wi) as usize] = EMPTY_WORD;
            wi += 1u32;
        }
        let mut link = slabs[(ws * SLAB_WORDS + LINK_SLOT) as usize];
        slabs[(ws * SLAB_WORDS + LINK_SLOT) as usize] = EMPTY_WORD;
        let mut n_freed = 0u32;
        while link != EMPTY_WORD {
            let s = (link & 0xffff_ffffu64) as u32;
            link = slabs[(s * SLAB_WORDS + LINK_SLOT) as usize];
            for i in 0..16u32 {
                slabs[(s * SLAB_WORDS + i) as usize] = EMPTY_WORD;
            }
            free_slab(bitmap, s - buckets);
            n_freed += 1u32;
        }
        if n_freed > 0u32 {
            freed[0].fetch_add(n_freed);
        }
    }
}

/// Adds the live pairs among slab words `t < slabs.len()` to `count[0]` (neither empty nor a tombstone, and
/// not a link: word 15 of each slab) and the occupied slots (live pairs and tombstones) to `count[1]`, one
/// atomic each per tile.
#[cube(launch_unchecked)]
pub fn chained_live_kernel<L: KeyLayout>(
    slabs: &Array<u64>,
    count: &Array<Atomic<u32>>,
    #[comptime] tw: u32,
) {
    let t = ABSOLUTE_POS;
    let tl = tile_lane(tw);
    let mut live = false;
    let mut occupied = false;
    if t < slabs.len() {
        let w = slabs[t];
        occupied = (t as u32) % SLAB_WORDS != LINK_SLOT && w != EMPTY_WORD;
        live = occupied && !L::is_tomb(w);
    }
    let c = tile_ballot(live, tl, tw).count_ones();
    let o = tile_ballot(occupied, tl, tw).count_ones();
    if tl.lane == 0u32 && c > 0u32 {
        count[0].fetch_add(c);
    }
    if tl.lane == 0u32 && o > 0u32 {
        count[1].fetch_add(o);
    }
}
