//! The GPU store of chained (SlabHash) tables (issue 10), behind `ChainedTable` for every key and value width:
//! one device function ([`chained_tile_op`]) serves every operation, a thread per operation, each tile serving
//! its lanes' operations one after another (warp-cooperative work sharing); the batch kernel
//! ([`chained_kernel`]) and users' kernels call it. Tested against the CPU store (`tests/tests/chained.rs`).
//!
//! **Layout.** One slab array of `u64` words, 16 per slab: slots 0..15 hold key words and word 15 the link
//! (`NO_NEXT` in its low half: none; all ones until linked). Slab `b < buckets` is bucket `b`'s head; pool slab
//! `p` is slab `buckets + p`. The key layout `L` says what a key word is: [`Packed`], a 32-bit pair
//! `key << 32 | value` (all ones: empty, key `u32::MAX - 1`: tombstone); `Wide`, a 64-bit key (all ones minus
//! one: tombstone) whose value sits in a second array at the same index. A tile of 8 lanes (two slab words
//! each; 16 by choice) reads a slab as one bucket (`read_slots` at bucket size 16) and the chaining scheme
//! (`hashtile_probing::Chain`) decides each step from the view, as the static drivers do.
//!
//! **Allocation** ([`SlabAllocator`]). By default a bitmap of pool slabs: a tile's lane 0 reads one word
//! (chosen by a hash of the operation), takes a clear bit with one atomic OR, and moves to the next word only
//! when its word is full; or SlabAlloc's resident blocks, a block of the bitmap held in the tile's lanes. The
//! tile links the slab with one compare-and-swap on the tail's link word, and frees the slab again if another
//! tile linked first. An operation that finds no free slab is recorded in a retry list. The host grows the
//! pool (a larger array, the old slabs copied; indices stay valid) and runs the recorded operations again.

use crate::device::layout::{KeyLayout, Packed, key_view};
use crate::device::shape::{ShapeScalars, TableMeta, meta_of};
use crate::device::shape::{shape_scalars, shape_words_of};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32, fill_u64};
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::{
    BucketView, ProbingScheme, SchemeInfo, SchemeParams, action, blank_state,
};
use hashtile_core::tile::{
    EMPTY_WORD, LaneSlots, TileLane, read_slots_either, slot_word, tile_ballot, tile_lane,
    tile_loop_any, tile_shuffle, tile_shuffle_u64,
};
use hashtile_core::{Error, HashFamily, Result};
use hashtile_probing::Chain;

/// Words per slab (15 slots and the link).
pub const SLAB_WORDS: u32 = 16;
/// The link's slot.
const LINK_SLOT: u32 = 15;
/// The view bits of the 15 pair slots.
const PAIR_SLOTS: u32 = 0x7fff;
/// Counters of new pairs, spread out: tiles add their counts to one of these, each on its own 128-byte line.
const NEW_COUNTERS: u32 = 64;
/// Words between counters (a 128-byte line each: same-line atomics queue in one L2 slice).
const COUNTER_STRIDE: u32 = 32;
/// Words of the counter array: the retry count's line, the new-pair counters' lines, then as many lines that
/// count the erases of mixed batches.
const COUNTER_WORDS: usize = ((1 + 2 * NEW_COUNTERS) * COUNTER_STRIDE) as usize;
/// The sum of the [`NEW_COUNTERS`] spread-out counters from line `from` of a counter array read back (line 1:
/// new pairs; line `1 + NEW_COUNTERS`: a mixed batch's erases).
fn counter_lines(c: &[u32], from: u32) -> usize {
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
    /// do; a kernel calling [`crate::chained::gpu::chained_tile_op`] sees it).
    pub const NO_SLAB: u32 = 5;
}

/// The view of a slab just read: the pair slots' masks and the link. Without `matching` (multimap inserts,
/// which never look for their key) the key comparisons and their ballots are left out: `matched` is 0.
// The masks start as runtime variables that both compile-time branches assign.
#[allow(unused_assignments)]
#[cube]
fn slab_view<L: KeyLayout>(
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

/// Lanes per tile unless chosen ([`GpuChained::with_tile_width`]).
pub const DEFAULT_TILE: u32 = 8;

/// A tile's `linked` answer when the pool had no free slab (slab indices stay below `u32::MAX - 1`).
const OUT_OF_SLABS: u32 = u32::MAX - 1;

/// Takes a free pool slab (its pool index), starting at word `start` of the bitmap; `u32::MAX` when every word
/// is full. One atomic in the common case.
// `div_ceil` is not a CubeCL operation.
#[allow(clippy::manual_div_ceil)]
#[cube]
fn alloc_slab(bitmap: &Array<Atomic<u32>>, pool: u32, start: u32) -> u32 {
    let words = (pool + 31u32) / 32u32;
    let mut got = 4294967295u32; // u32::MAX, as a literal: a runtime variable
    let mut w = start % words;
    let mut seen = 0u32;
    loop {
        if seen >= words || got != 4294967295u32 {
            break;
        }
        // Bits past the pool's end count as taken.
        let tail = pool - w * 32u32;
        let mut valid = 4294967295u32;
        if tail < 32u32 {
            valid = (1u32 << tail) - 1u32;
        }
        let open = !bitmap[w as usize].load() & valid;
        let b = open.trailing_zeros();
        let bit = 1u32 << (b % 32u32);
        let mut before = bit;
        if open != 0u32 {
            before = bitmap[w as usize].fetch_or(bit);
        }
        if before & bit == 0u32 {
            got = w * 32u32 + b;
        }
        // A full word moves on; a bit another tile took first sends us back to the same word.
        if open == 0u32 {
            w = (w + 1u32) % words;
            seen += 1u32;
        }
    }
    got
}

/// A tile's resident allocator block (SlabAlloc's): block `block` of the pool bitmap is `tw` consecutive 32-bit
/// words, `tw * 32` slabs; lane `i` holds word `block * tw + i` in `word` (set bits: taken, or past the pool's
/// end) once `loaded`. Kept for the tile's whole life in the kernel, across the operations it serves.
#[derive(CubeType, Clone, Copy)]
pub struct ResidentBlock {
    /// The block's index.
    pub block: u32,
    /// This lane's bitmap word of it, as last seen.
    pub word: u32,
    /// Whether `word` holds the block's word (false: read it before use).
    pub loaded: bool,
}

/// A tile's first resident block: a hash of the tile's index, so that tiles spread over the pool.
// The hash is a wrapping multiply; `div_ceil` is not a CubeCL operation.
#[allow(arithmetic_overflow, clippy::manual_div_ceil)]
#[cube]
pub fn resident_block(pool: u32, #[comptime] tw: u32) -> ResidentBlock {
    let blocks = ((pool + 31u32) / 32u32 + tw - 1u32) / tw;
    let tile = ABSOLUTE_POS as u32 / tw;
    ResidentBlock {
        block: (tile * 2654435761u32) % blocks,
        word: 0u32,
        loaded: false,
    }
}

/// Takes a pool slab for each tile that `wants` one (the same in every lane of a tile; **every lane of the
/// plane calls it**): SlabAlloc's allocation. The tile's lanes hold their words of the resident block; a ballot
/// picks the lowest lane with a clear bit, which claims it with one atomic OR (the common case: one atomic per
/// allocation). A lost bit refreshes that lane's word; a full block moves the tile on to the next block, and a
/// tile that has seen every block full gets `u32::MAX` (the pool is empty). Returns the pool index in every
/// lane of a wanting tile.
#[allow(clippy::manual_div_ceil)]
#[cube]
fn tile_alloc_slab(
    bitmap: &Array<Atomic<u32>>,
    pool: u32,
    wants: bool,
    res: &mut ResidentBlock,
    tl: TileLane,
    #[comptime] tw: u32,
) -> u32 {
    let words = (pool + 31u32) / 32u32;
    let blocks = (words + tw - 1u32) / tw;
    let mut got = 4294967295u32; // u32::MAX, as a literal: a runtime variable
    let mut pending = wants;
    let mut moved = 0u32;
    loop {
        if !tile_loop_any(pending, tw) {
            break;
        }
        let w = res.block * tw + tl.lane;
        // Words past the pool's end, and bits past its last slab, read as taken.
        let mut beyond = 4294967295u32;
        if w < words {
            beyond = 0u32;
            let tail = pool - w * 32u32;
            if tail < 32u32 {
                beyond = !((1u32 << tail) - 1u32);
            }
        }
        if pending && !res.loaded {
            let mut fresh = 4294967295u32;
            if w < words {
                fresh = bitmap[w as usize].load() | beyond;
            }
            res.word = fresh;
            res.loaded = true;
        }
        let open = tile_ballot(pending && res.word != 4294967295u32, tl, tw);
        let claimer = open.trailing_zeros() % tw;
        let mut won = false;
        let mut mine = 0u32;
        if pending && open != 0u32 && tl.lane == claimer {
            let b = (!res.word).trailing_zeros();
            let bit = 1u32 << b;
            let before = bitmap[w as usize].fetch_or(bit);
            res.word = before | bit | beyond;
            if before & bit == 0u32 {
                won = true;
                mine = w * 32u32 + b;
            }
        }
        let winner = tile_ballot(won, tl, tw);
        let taken = tile_shuffle(mine, claimer, tl, tw);
        if pending {
            if winner != 0u32 {
                got = taken;
                pending = false;
            } else if open == 0u32 {
                // The whole block is taken: the next one, until every block has been seen full.
                moved += 1u32;
                res.block = (res.block + 1u32) % blocks;
                res.loaded = false;
                if moved > blocks {
                    pending = false;
                }
            }
        }
    }
    got
}

/// Returns pool slab `p` to the allocator.
#[cube]
fn free_slab(bitmap: &Array<Atomic<u32>>, p: u32) {
    bitmap[(p / 32u32) as usize].fetch_and(!(1u32 << (p % 32u32)));
}

/// What [`chained_tile_op`] did for one lane's operation (`V`: the layout's value type).
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
/// `L` is the table's key layout: [`Packed`] (32-bit keys and values in one slab word) or [`Wide`](crate::device::layout::Wide) (64-bit key
/// words in the slabs, the values in `slab_values` at the same index). The table comes from
/// [`GpuChained::device_ref`]: `slabs` (atomic) and `slabs_plain` (the same array without atomics where
/// `plain`, which only CUDA can bind twice; else a dummy), `slab_values` (wide tables; a dummy otherwise), the
/// allocator's `bitmap` and `pool`, and `meta` (from [`crate::device::shape::load_meta`] of the shape). Launches
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
/// `phase` splits a mixed batch of a wide table into two launches (see [`chained_tile_op`]): 1 runs only its
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
    shape: &ShapeScalars,
    #[comptime] mode: u32,
    #[comptime] indexed: bool,
    #[comptime] plain: bool,
    #[comptime] phase: u32,
    #[comptime] resident: bool,
    #[comptime] tw: u32,
) {
    let inserts = comptime!(mode == op::INSERT || mode == op::REPLACE || mode == op::MIXED);
    let reports = comptime!(mode == op::FIND || mode == op::MIXED);
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
            out[q] = a.value;
            aux[q] = a.status;
        } else if comptime!(!inserts && mode != op::GATHER) {
            aux[q] = a.count;
        }
        if comptime!(inserts) {
            if a.status == status::NO_SLAB {
                // Recorded for the next launch, after the pool has grown. Always in bounds where the host
                // sized `retry` for the launch; a queued launch (`insert_queued`) has a one-word list and a
                // pool that provably suffices, and its count is checked when it settles.
                let at_retry = counters[0].fetch_add(1u32);
                if at_retry < retry.len() as u32 {
                    retry[at_retry as usize] = q as u32;
                }
            }
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

/// Takes a free pool slab for each `t < n` (`out[t]`: its pool index, or `u32::MAX` when none was left), the
/// allocator as inserts call it, a thread per slab: the allocator's own rate (`hashtile-bench chained`).
// The macro's expansion evaluates the hash of a placeholder position at compile time (and overflows); on the
// device it is the wrapping multiply the inserts use.
#[allow(arithmetic_overflow)]
#[cube(launch_unchecked)]
pub fn chained_alloc_kernel(bitmap: &Array<Atomic<u32>>, pool: u32, n: u32, out: &mut Array<u32>) {
    let t = ABSOLUTE_POS;
    if t < n as usize {
        out[t] = alloc_slab(bitmap, pool, (t as u32) * 2654435761u32);
    }
}

/// Returns pool slabs `slabs[t]` (`t < n`, `u32::MAX` skipped) to the allocator, a thread per slab.
#[cube(launch_unchecked)]
pub fn chained_free_kernel(bitmap: &Array<Atomic<u32>>, slabs: &Array<u32>, n: u32) {
    let t = ABSOLUTE_POS;
    if t < n as usize {
        let p = slabs[t];
        if p != 4294967295u32 {
            free_slab(bitmap, p);
        }
    }
}

/// Adds the pool slabs in use (the set bits of the allocator's `words` bitmap words) to `count[0]`.
#[cube(launch_unchecked)]
pub fn chained_used_kernel(bitmap: &Array<u32>, words: u32, count: &Array<Atomic<u32>>) {
    let t = ABSOLUTE_POS;
    if t < words as usize {
        let ones = bitmap[t].count_ones();
        if ones > 0u32 {
            count[0].fetch_add(ones);
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

/// `dst[i] = src[i]` for `i < src.len()`.
#[cube(launch_unchecked)]
pub fn copy_u64_kernel(src: &Array<u64>, dst: &mut Array<u64>) {
    if ABSOLUTE_POS < src.len() {
        dst[ABSOLUTE_POS] = src[ABSOLUTE_POS];
    }
}

/// `dst[i] = src[i]` for `i < src.len()`.
#[cube(launch_unchecked)]
pub fn copy_u32_kernel(src: &Array<u32>, dst: &mut Array<u32>) {
    if ABSOLUTE_POS < src.len() {
        dst[ABSOLUTE_POS] = src[ABSOLUTE_POS];
    }
}

/// The operation arrays of a launch (`n` words each; `ops` and `values` bound only where the mode reads them).
struct Arrays<'a> {
    ops: &'a Handle,
    keys: &'a Handle,
    values: &'a Handle,
    n: usize,
}

/// A chained table on a device: 32-bit keys and values packed into the slab words ([`Packed`], the default),
/// or 64-bit keys in the slab words and 64-bit values in an array beside them ([`Wide`](crate::device::layout::Wide)).
pub struct GpuChained<R: Runtime, L: KeyLayout = Packed> {
    client: ComputeClient<R>,
    family: HashFamily,
    buckets: u32,
    pool: u32,
    slabs: Handle,
    /// The values of a wide table, at their key words' indices (a one-word dummy for packed tables).
    values: Handle,
    bitmap: Handle,
    tile: u32,
    /// Inserts read slabs with plain loads first (CUDA, where the slab array may be bound twice).
    plain_reads: bool,
    len: usize,
    /// The counters that queued inserts add their new pairs to, until [`GpuChained::settle`] reads them.
    queued: Option<Handle>,
    /// A lower bound of the free pool slabs (`None`: not known since the last change that took slabs), so
    /// that queued inserts need not read the device to know the pool suffices.
    free_floor: Option<u64>,
    /// An upper bound of the occupied pair slots (live pairs and tombstones; `None`: unknown, after a kernel
    /// of the user's may have inserted). Slots never become empty again except by flush, and a list links a
    /// slab only after its tail is full, so the lists hold at most `occupied / 15` pool slabs: a bound on the
    /// pool that needs no read of the device (see [`GpuChained::insert_queued`]).
    occupied: Option<u64>,
    /// Pairs of queued launches counted into `occupied` (each launch's `n`), replaced by the exact count when
    /// they settle.
    queued_pairs: u64,
    /// Slabs handed out by [`GpuChained::allocate_device`] and not given back (an upper bound).
    outside: u64,
    /// At most this many tiles run at once on the device (each holds at most one slab not yet in a list).
    resident_tiles: u64,
    stats: QueueStats,
    /// Slabs come from each tile's resident block of the bitmap (SlabAlloc's) rather than hashed words.
    resident: bool,
    /// Free device memory in bytes, where the runtime can tell (tables made through `ChainedTable`: the host
    /// path's stager asks the driver); growth beyond it is a typed [`Error::OutOfMemory`], not a panic.
    free_memory: Option<FreeMemory>,
    _layout: std::marker::PhantomData<L>,
}

/// Asks how many bytes of device memory are free.
type FreeMemory = std::sync::Arc<dyn Fn() -> Option<u64> + Send + Sync>;

/// How inserts take a slab from the pool (both: one atomic per slab in the common case).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SlabAllocator {
    /// The appending tile's lane 0 reads a bitmap word chosen by a hash of the operation and claims a clear
    /// bit (the default: on the H100 it built 12% faster than resident blocks with tiles of 16 lanes).
    #[default]
    HashedBitmap,
    /// SlabAlloc's: each tile keeps a resident block of the bitmap in its lanes' registers (a 32-bit word per
    /// lane), a ballot picks a lane with a clear bit, and that lane claims it; a full block moves the tile on.
    ResidentBlocks,
}

/// How often queued inserts ([`GpuChained::insert_queued`]) had to wait for the device or grow the pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Launches queued without any read of the device.
    pub queued: u64,
    /// Reads of the slabs in use (a wait for the device each) when the bounds could not prove the pool
    /// sufficient.
    pub pool_reads: u64,
    /// Pool growths.
    pub pool_grows: u64,
}

/// A device buffer holding `s` (32- or 64-bit words).
fn put<R: Runtime, E: hashtile_core::Element>(client: &ComputeClient<R>, s: &[E]) -> Handle {
    client.create_from_slice(crate::runtime::words::bytes_of(s))
}

/// The first `n` elements of bytes read back.
fn elements<E: hashtile_core::Element>(bytes: &[u8], n: usize) -> Vec<E> {
    let w = (E::BITS / 8) as usize;
    bytes[..n * w]
        .chunks_exact(w)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..w].copy_from_slice(c);
            E::narrow(u64::from_le_bytes(b))
        })
        .collect()
}

/// Where host data goes in and comes out of the table's host calls: CubeCL's own copies ([`Plain`], what
/// [`GpuChained`]'s methods use), or the host path's stager ([`Staging`], what `ChainedTable` uses).
trait HostIo {
    /// A device buffer holding `s`.
    fn up<E: hashtile_core::Element>(&self, s: &[E]) -> Result<Handle>;
    /// The first `n` elements of a device buffer (after every queued kernel).
    fn down<E: hashtile_core::Element>(&self, h: &Handle, n: usize) -> Result<Vec<E>>;
}

/// CubeCL's `create_from_slice` / `read_one` (pageable memory, no staging).
struct Plain<R: Runtime>(ComputeClient<R>);

impl<R: Runtime> HostIo for Plain<R> {
    fn up<E: hashtile_core::Element>(&self, s: &[E]) -> Result<Handle> {
        Ok(put(&self.0, s))
    }
    fn down<E: hashtile_core::Element>(&self, h: &Handle, n: usize) -> Result<Vec<E>> {
        let bytes = self
            .0
            .read_one(h.clone())
            .map_err(|e| Error::Device(format!("{e:?}")))?;
        Ok(elements(&bytes, n))
    }
}

/// The runtime's shared host-transfer stager (CUDA: pinned staging buffers and a copy stream;
/// `gpu/transfer.rs`).
struct Staging<R: crate::runtime::transfer::HostTransfer> {
    client: ComputeClient<R>,
    stager: std::sync::Arc<R::Stager>,
}

impl<R: crate::runtime::transfer::HostTransfer> HostIo for Staging<R> {
    fn up<E: hashtile_core::Element>(&self, s: &[E]) -> Result<Handle> {
        crate::runtime::dispatch::upload(&self.client, &self.stager, s)
    }
    fn down<E: hashtile_core::Element>(&self, h: &Handle, n: usize) -> Result<Vec<E>> {
        let mut v = vec![E::zero(); n];
        if n > 0 {
            R::download(
                &self.client,
                &self.stager,
                h,
                crate::runtime::words::bytes_of_mut(&mut v),
            )?;
        }
        Ok(v)
    }
}

impl<R: Runtime, L: KeyLayout> GpuChained<R, L> {
    /// `buckets` empty lists and a pool of `pool` free slabs on `client`'s device, read by tiles of 8 lanes
    /// (two slab words per lane, four tiles per plane of 32): on the H100 they build 1.2x and find 1.25x
    /// faster than tiles of 16, as a plane step's control work is shared by four operations instead of two
    /// (`docs/PERFORMANCE.md`).
    pub fn new(
        client: &ComputeClient<R>,
        family: HashFamily,
        buckets: u32,
        pool: u32,
    ) -> Result<Self> {
        Self::with_tile_width(client, family, buckets, pool, DEFAULT_TILE)
    }

    /// [`GpuChained::new`] with tiles of `tile_width` lanes: 16 (a lane per slab word) or 8 (two words per
    /// lane, four tiles per plane of 32); at most the plane size. A design-space knob: narrower tiles serve
    /// more operations per plane step.
    pub fn with_tile_width(
        client: &ComputeClient<R>,
        family: HashFamily,
        buckets: u32,
        pool: u32,
        tile_width: u32,
    ) -> Result<Self> {
        Self::with_memory_probe(client, family, buckets, pool, tile_width, None)
    }

    fn with_memory_probe(
        client: &ComputeClient<R>,
        family: HashFamily,
        buckets: u32,
        pool: u32,
        tile_width: u32,
        free_memory: Option<FreeMemory>,
    ) -> Result<Self> {
        let plane = crate::device::shape::tile_width_for(client, SLAB_WORDS)?;
        if !matches!(tile_width, 8 | 16) || tile_width > plane {
            return Err(Error::InvalidConfig(format!(
                "chained tables read a slab with tiles of 8 or 16 lanes (at most {plane} here), got {tile_width}"
            )));
        }
        let tile = tile_width;
        // An NVIDIA multiprocessor keeps at most 2048 threads resident; elsewhere, a generous 2^17 tiles.
        let resident_tiles = match client.properties().hardware.num_streaming_multiprocessors {
            Some(sms) => sms as u64 * 2048 / tile as u64,
            None => 1 << 17,
        };
        let mut t = Self {
            client: client.clone(),
            family,
            buckets,
            pool: 0,
            slabs: client.empty(8),
            values: client.empty(8),
            bitmap: client.empty(4),
            tile,
            plain_reads: R::name(client) == "cuda",
            len: 0,
            queued: None,
            free_floor: None,
            occupied: Some(0),
            queued_pairs: 0,
            outside: 0,
            resident_tiles,
            stats: QueueStats::default(),
            resident: false,
            free_memory,
            _layout: std::marker::PhantomData,
        };
        t.resize(pool.max(32))?;
        Ok(t)
    }

    fn slab_words(&self, pool: u32) -> usize {
        (self.buckets as usize + pool as usize) * SLAB_WORDS as usize
    }

    /// Bytes of one value in kernels' inputs and outputs.
    const VALUE_BYTES: usize = (<L::Value as hashtile_core::Element>::BITS / 8) as usize;

    /// Length of the value array as bound (a one-word dummy for packed tables).
    fn value_words(&self) -> usize {
        if L::MOVES_PAIRS {
            1
        } else {
            self.slab_words(self.pool)
        }
    }

    fn bitmap_words(pool: u32) -> usize {
        pool.div_ceil(32).max(1) as usize
    }

    /// Grows the pool to `pool` slabs: new arrays, the old contents copied, the rest empty (queued).
    fn resize(&mut self, pool: u32) -> Result<()> {
        if self.buckets as u64 + pool as u64 >= u32::MAX as u64 {
            return Err(Error::InvalidConfig(format!(
                "a chained table addresses at most 2^32 - 1 slabs: {} buckets and a pool of {pool}",
                self.buckets
            )));
        }
        let (old_words, new_words) = (self.slab_words(self.pool), self.slab_words(pool));
        if let Some(free) = self.free_memory.as_ref().and_then(|f| f()) {
            // The new arrays live beside the old ones until the copy is done.
            let arrays = if L::MOVES_PAIRS { 1 } else { 2 };
            let needed = (arrays * new_words * 8 + Self::bitmap_words(pool) * 4) as u64;
            if needed > free {
                return Err(Error::OutOfMemory {
                    what: "chained table slabs",
                    device: "device",
                    needed,
                    available: free,
                });
            }
        }
        let slabs = self.client.empty(new_words * 8);
        fill_u64(&self.client, &slabs, new_words, EMPTY_WORD);
        let (old_bits, new_bits) = (Self::bitmap_words(self.pool), Self::bitmap_words(pool));
        let bitmap = self.client.empty(new_bits * 4);
        fill_u32(&self.client, &bitmap, new_bits, 0);
        let wide = !L::MOVES_PAIRS;
        let values = if wide {
            let v = self.client.empty(new_words * 8);
            fill_u64(&self.client, &v, new_words, 0);
            v
        } else {
            self.values.clone()
        };
        if self.pool > 0 {
            // SAFETY: each copy reads `src.len()` words, at most `dst`'s length.
            unsafe {
                copy_u64_kernel::launch_unchecked::<R>(
                    &self.client,
                    cube_count(old_words),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(self.slabs.clone(), old_words),
                    ArrayArg::from_raw_parts(slabs.clone(), new_words),
                );
                copy_u32_kernel::launch_unchecked::<R>(
                    &self.client,
                    cube_count(old_bits),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(self.bitmap.clone(), old_bits),
                    ArrayArg::from_raw_parts(bitmap.clone(), new_bits),
                );
                if wide {
                    copy_u64_kernel::launch_unchecked::<R>(
                        &self.client,
                        cube_count(old_words),
                        CubeDim::new_1d(CUBE_SIZE),
                        ArrayArg::from_raw_parts(self.values.clone(), old_words),
                        ArrayArg::from_raw_parts(values.clone(), new_words),
                    );
                }
            }
        }
        self.slabs = slabs;
        self.values = values;
        self.bitmap = bitmap;
        self.pool = pool;
        Ok(())
    }

    /// The table's shape for kernels (inserts choose upsert per operation).
    fn shape(&self) -> [u32; crate::device::shape::SHAPE_WORDS] {
        shape_words_of(self.buckets, self.family, Chain::default_params(SLAB_WORDS))
    }

    /// Inserts the pairs (a further copy, or with `unique` insert-or-overwrite); returns how many were new.
    pub fn insert(&mut self, keys: &[L::Key], values: &[L::Value], unique: bool) -> Result<usize> {
        let io = Plain(self.client.clone());
        self.insert_via(&io, keys, values, unique)
    }

    fn insert_via(
        &mut self,
        io: &impl HostIo,
        keys: &[L::Key],
        values: &[L::Value],
        unique: bool,
    ) -> Result<usize> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: keys.len(),
            });
        }
        if keys.is_empty() {
            return Ok(0);
        }
        let (kh, vh) = (io.up(keys)?, io.up(values)?);
        self.insert_device(&kh, &vh, keys.len(), unique)
    }

    /// [`GpuChained::insert`] of `n` pairs already on the device. Operations that found the pool empty run
    /// again (from the device's list of them) after it grows; waits for the device (one small read per pass).
    pub fn insert_device(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
        unique: bool,
    ) -> Result<usize> {
        let mode = if unique { op::REPLACE } else { op::INSERT };
        let none = self.client.empty(4);
        self.free_floor = None;
        let (added, _) = self.run_placing(mode, (&none, keys, values), n, (&none, &none))?;
        Ok(added)
    }

    /// Slabs a launch of `n` inserts holds outside the lists at any moment, at most: each running tile holds
    /// at most one (taken and not yet linked, or linked and not yet written to), and a launch runs at most
    /// `ceil(n / tile)` tiles, no more than the device keeps resident at once.
    fn held_at_most(&self, n: usize) -> u64 {
        (n as u64)
            .div_ceil(self.tile as u64)
            .min(self.resident_tiles)
    }

    /// [`GpuChained::insert_device`] without waiting for the device, where the pool provably holds every slab
    /// the pairs could need: the launch is only queued, and its new pairs are counted on the device until
    /// [`GpuChained::settle`]. This is the call for many small batches (SlabHash's incremental inserts): a
    /// batch of 2^15 pairs takes a few microseconds of kernel time, about what a read from the device costs.
    ///
    /// Two bounds prove the pool sufficient, the first without any read:
    /// - **occupancy:** a list links a slab only once its tail is full, and a slot never becomes empty again
    ///   (tombstones stay until a flush), so the lists hold at most `occupied / 15` pool slabs, where
    ///   `occupied` (live pairs and tombstones, counted on the host as an upper bound) includes this launch's
    ///   `n`; plus the slabs running tiles hold and those [`GpuChained::allocate_device`] handed out;
    /// - **free slabs:** a read of the slabs in use, after which each launch may take at most `n` new slabs
    ///   (each holds at least one of its pairs) plus what its tiles hold.
    ///
    /// Where neither holds, the pool grows first (at least doubling; a queued copy). [`QueueStats`] counts
    /// the reads and growths.
    pub fn insert_queued(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
        unique: bool,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let held = self.held_at_most(n);
        let by_occupancy = self
            .occupied
            .map(|o| (o + n as u64) / (SLAB_WORDS as u64 - 1) + held + self.outside);
        let need = n as u64 + held;
        let proven = by_occupancy.is_some_and(|u| u <= self.pool as u64)
            || self.free_floor.is_some_and(|f| f >= need);
        if !proven {
            self.stats.pool_reads += 1;
            let used = self.used_slabs()? as u64;
            // The tighter of the two bounds, now that the slabs in use are known.
            let want = by_occupancy.map_or(used + need, |u| u.min(used + need));
            if want > self.pool as u64 {
                // Grown now, without waiting (the copy is queued): the bound then holds for this launch.
                let grown = want.max(2 * self.pool as u64);
                if grown >= u32::MAX as u64 - self.buckets as u64 {
                    return self.insert_device(keys, values, n, unique).map(|_| ());
                }
                self.stats.pool_grows += 1;
                self.resize(grown as u32)?;
            }
            self.free_floor = Some(self.pool as u64 - used);
        }
        self.stats.queued += 1;
        // The free floor falls by what this launch may take (or becomes unknown if it could take more).
        self.free_floor = self.free_floor.and_then(|f| f.checked_sub(need));
        if let Some(o) = &mut self.occupied {
            *o += n as u64;
        }
        self.queued_pairs += n as u64;
        let mode = if unique { op::REPLACE } else { op::INSERT };
        let counters = match &self.queued {
            Some(c) => c.clone(),
            None => {
                let c = self
                    .client
                    .create_from_slice(u32::as_bytes(&[0; COUNTER_WORDS]));
                self.queued = Some(c.clone());
                c
            }
        };
        let none = self.client.empty(4);
        self.launch(
            mode,
            Arrays {
                ops: &none,
                keys,
                values,
                n,
            },
            None,
            n,
            (&none, 1, &none, 1),
            (&none, 1, &counters),
        );
        Ok(())
    }

    /// Waits for queued inserts ([`GpuChained::insert_queued`]) and counts their new pairs into
    /// [`GpuChained::len`]; returns the length.
    pub fn settle(&mut self) -> Result<usize> {
        if let Some(c) = self.queued.take() {
            let c = self.read(c, COUNTER_WORDS)?;
            if c[0] > 0 {
                return Err(Error::Device(format!(
                    "{} queued inserts found the pool empty (the pool bound was wrong): the table misses them",
                    c[0]
                )));
            }
            let added = counter_lines(&c, 1);
            self.len += added;
            // The launches' bound replaced by what they stored.
            if let Some(o) = &mut self.occupied {
                *o = *o - self.queued_pairs + added as u64;
            }
            self.queued_pairs = 0;
        }
        Ok(self.len)
    }

    /// Chooses how inserts take pool slabs (the default: [`SlabAllocator::HashedBitmap`]).
    pub fn set_allocator(&mut self, a: SlabAllocator) {
        self.resident = a == SlabAllocator::ResidentBlocks;
    }

    /// How often [`GpuChained::insert_queued`] waited for the device or grew the pool, since the table was
    /// made.
    pub fn queue_stats(&self) -> QueueStats {
        self.stats
    }

    /// Pool slabs in use (counted on the device from the allocator's bitmap; waits).
    pub fn used_slabs(&self) -> Result<u32> {
        let words = Self::bitmap_words(self.pool);
        let count = self.client.create_from_slice(u32::as_bytes(&[0u32]));
        // SAFETY: thread `t < words` reads bitmap word `t` and adds to `count[0]`.
        unsafe {
            chained_used_kernel::launch_unchecked::<R>(
                &self.client,
                cube_count(words),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.bitmap.clone(), words),
                words as u32,
                ArrayArg::from_raw_parts(count.clone(), 1),
            )
        }
        Ok(self.read(count, 1)?[0])
    }

    /// A mixed batch of `n` operations already on the device: operation `ops[q]` ([`op::INSERT`] to
    /// [`op::FIND`]) of `keys[q]` (and `values[q]`, which only inserts read). Returns `(out, aux)`: the value
    /// found and the [`status`] of each operation. Operations on distinct keys commute; operations on one key
    /// run in an unspecified order and never corrupt the table. Waits for the device.
    pub fn apply_device(
        &mut self,
        ops: &Handle,
        keys: &Handle,
        values: &Handle,
        n: usize,
    ) -> Result<(Handle, Handle)> {
        let out = self.client.empty(n.max(1) * Self::VALUE_BYTES);
        let aux = self.client.empty(n.max(1) * 4);
        self.free_floor = None;
        if n > 0 {
            let mut erased_first = 0;
            if !L::MOVES_PAIRS {
                // Wide tables: the erases and finds first, then the inserts (see `chained_tile_op`).
                let counters = put(&self.client, &[0u32; COUNTER_WORDS]);
                let none = self.client.empty(4);
                self.launch_phase(
                    op::MIXED,
                    Arrays {
                        ops,
                        keys,
                        values,
                        n,
                    },
                    None,
                    n,
                    (&out, n, &aux, n),
                    (&none, 1, &counters),
                    1,
                );
                erased_first = counter_lines(
                    &self.read::<u32>(counters, COUNTER_WORDS)?,
                    1 + NEW_COUNTERS,
                );
            }
            self.len -= erased_first;
            self.run_placing(op::MIXED, (ops, keys, values), n, (&out, &aux))?;
        }
        Ok((out, aux))
    }

    /// [`GpuChained::apply_device`] from host data: `(value, status)` of each operation.
    pub fn apply(
        &mut self,
        ops: &[u32],
        keys: &[L::Key],
        values: &[L::Value],
    ) -> Result<Vec<(L::Value, u32)>> {
        let io = Plain(self.client.clone());
        self.apply_via(&io, ops, keys, values)
    }

    fn apply_via(
        &mut self,
        io: &impl HostIo,
        ops: &[u32],
        keys: &[L::Key],
        values: &[L::Value],
    ) -> Result<Vec<(L::Value, u32)>> {
        for (what, got) in [("ops", ops.len()), ("values", values.len())] {
            if got != keys.len() {
                return Err(Error::LengthMismatch {
                    what,
                    got,
                    expected: keys.len(),
                });
            }
        }
        if let Some(index) = ops.iter().position(|&o| o > op::FIND) {
            return Err(Error::InvalidConfig(format!(
                "operation {index} has code {}: a mixed batch holds codes 0 (insert) to 3 (find)",
                ops[index]
            )));
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (oh, kh, vh) = (io.up(ops)?, io.up(keys)?, io.up(values)?);
        let (out, aux) = self.apply_device(&oh, &kh, &vh, keys.len())?;
        let out = io.down::<L::Value>(&out, keys.len())?;
        let aux = io.down::<u32>(&aux, keys.len())?;
        Ok(out.into_iter().zip(aux).collect())
    }

    /// Runs `n` operations of an insert `mode` or of [`op::MIXED`] until none waits for a slab: those that
    /// found the pool empty are recorded on the device and run again, only they, after the pool has grown.
    /// Returns how many new pairs the inserts stored and how many the erases of a mixed batch removed.
    /// `reports`: `out` and `aux` of mixed batches (`n` words each).
    fn run_placing(
        &mut self,
        mode: u32,
        (ops, keys, values): (&Handle, &Handle, &Handle),
        n: usize,
        (out, aux): (&Handle, &Handle),
    ) -> Result<(usize, usize)> {
        let (mut added, mut erased) = (0usize, 0usize);
        let mut sel: Option<(Handle, usize)> = None;
        loop {
            let m = sel.as_ref().map_or(n, |s| s.1);
            if m == 0 {
                break;
            }
            let retry = self.client.empty(m * 4);
            let counters = self
                .client
                .create_from_slice(u32::as_bytes(&[0; COUNTER_WORDS]));
            self.launch(
                mode,
                Arrays {
                    ops,
                    keys,
                    values,
                    n,
                },
                sel.as_ref().map(|s| &s.0),
                m,
                {
                    let l = if mode == op::MIXED { n } else { 1 };
                    (out, l, aux, l)
                },
                (&retry, m, &counters),
            );
            let c = self.read(counters, COUNTER_WORDS)?;
            // Counted as each pass lands, so that the table's length stays right if growing fails below.
            let (a, e) = (counter_lines(&c, 1), counter_lines(&c, 1 + NEW_COUNTERS));
            (added, erased) = (added + a, erased + e);
            self.len = self.len + a - e;
            if let Some(o) = &mut self.occupied {
                *o += a as u64;
            }
            if c[0] > 0 {
                // Only real device-memory exhaustion fails here (typed, where the runtime can tell): the
                // operations still waiting are not done, everything else is, and the table stays valid.
                self.resize(self.pool.saturating_mul(2).max(self.pool + c[0]))?;
            }
            sel = Some((retry, c[0] as usize));
        }
        Ok((added, erased))
    }

    /// One launch of [`chained_kernel`] over `m` operations: the first `m` of `arrays`, or those `sel` names.
    /// `outputs`: `out` and `aux` with their lengths; `places`: the retry list and its length (`m` words where inserts may need it) and the counters.
    /// Mixed batches of wide tables run their inserts here (their erases and finds ran first, in phase 1).
    fn launch(
        &self,
        mode: u32,
        arrays: Arrays<'_>,
        sel: Option<&Handle>,
        m: usize,
        outputs: (&Handle, usize, &Handle, usize),
        places: (&Handle, usize, &Handle),
    ) {
        let phase = if mode == op::MIXED && !L::MOVES_PAIRS {
            2
        } else {
            0
        };
        self.launch_phase(mode, arrays, sel, m, outputs, places, phase);
    }

    /// [`GpuChained::launch`] of one `phase` of [`chained_kernel`].
    #[allow(clippy::too_many_arguments)]
    fn launch_phase(
        &self,
        mode: u32,
        arrays: Arrays<'_>,
        sel: Option<&Handle>,
        m: usize,
        outputs: (&Handle, usize, &Handle, usize),
        places: (&Handle, usize, &Handle),
        phase: u32,
    ) {
        let words = self.slab_words(self.pool);
        // Finds and counts bind the array only without atomics; changes bind it with atomics, and on CUDA
        // also without (plain first reads); Vulkan binds a buffer once.
        let read_only = matches!(mode, op::FIND | op::COUNT | op::GATHER);
        let plain = read_only || self.plain_reads;
        let dummy = self.client.empty(8);
        let (atomic, atomic_len) = if read_only {
            (dummy.clone(), 1)
        } else {
            (self.slabs.clone(), words)
        };
        let (plain_h, plain_len) = if plain {
            (self.slabs.clone(), words)
        } else {
            (dummy, 1)
        };
        let inserts = matches!(mode, op::INSERT | op::REPLACE | op::MIXED);
        let len = |used: bool| if used { arrays.n.max(1) } else { 1 };
        let (out, out_len, aux, aux_len) = outputs;
        let sel_h = sel.cloned().unwrap_or_else(|| self.client.empty(4));
        // SAFETY: thread `t < m` reads operation `t` (or `sel[t] < n`) of arrays of `n`; it writes `out[q]` and
        // `aux[q]` (`q < n`), or (GATHER) `out[aux[q]..aux[q + 1]]`, and `retry[< m]`. Slabs are addressed by
        // bucket indices below `buckets` and links below `buckets + pool`.
        unsafe {
            chained_kernel::launch_unchecked::<L, R>(
                &self.client,
                cube_count(m.max(1)),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(arrays.ops.clone(), len(mode == op::MIXED)),
                ArrayArg::from_raw_parts(arrays.keys.clone(), len(true)),
                ArrayArg::from_raw_parts(arrays.values.clone(), len(inserts)),
                ArrayArg::from_raw_parts(sel_h, if sel.is_some() { m } else { 1 }),
                m as u32,
                ArrayArg::from_raw_parts(atomic, atomic_len),
                ArrayArg::from_raw_parts(plain_h, plain_len),
                ArrayArg::from_raw_parts(self.values.clone(), self.value_words()),
                ArrayArg::from_raw_parts(self.bitmap.clone(), Self::bitmap_words(self.pool)),
                self.pool,
                ArrayArg::from_raw_parts(out.clone(), out_len.max(1)),
                ArrayArg::from_raw_parts(aux.clone(), aux_len.max(1)),
                ArrayArg::from_raw_parts(places.0.clone(), places.1.max(1)),
                ArrayArg::from_raw_parts(places.2.clone(), COUNTER_WORDS),
                shape_scalars::<R>(self.shape()),
                mode,
                sel.is_some(),
                plain,
                phase,
                self.resident,
                self.tile,
            )
        }
    }

    fn walk(
        &self,
        io: &impl HostIo,
        keys: &[L::Key],
        mode: u32,
        out_len: usize,
        aux: Option<Handle>,
    ) -> Result<(Handle, Handle)> {
        let kh = io.up(keys)?;
        Ok(self.walk_device(&kh, keys.len(), mode, out_len, aux))
    }

    /// Queues `find` of `n` keys already on the device: `(values, found)`, a value and a `u32` per key
    /// (`found`: [`status::FOUND`] if the key is stored; its value is then the first copy's).
    pub fn find_device(&self, keys: &Handle, n: usize) -> (Handle, Handle) {
        self.walk_device(keys, n, op::FIND, n, None)
    }

    /// Queues a launch of a walk `mode` ([`op::FIND`], [`op::ERASE`], [`op::COUNT`], [`op::GATHER`],
    /// [`op::ERASE_ALL`]) over `n` keys on the device: `(out, aux)`, `out` the values found or gathered
    /// (`out_len`), `aux` the statuses or counts; `aux` in: the gather's starts (`n + 1`).
    fn walk_device(
        &self,
        keys: &Handle,
        n: usize,
        mode: u32,
        out_len: usize,
        aux: Option<Handle>,
    ) -> (Handle, Handle) {
        let out = self.client.empty(out_len.max(1) * Self::VALUE_BYTES);
        let aux_len = if aux.is_some() { n + 1 } else { n.max(1) };
        let aux = aux.unwrap_or_else(|| self.client.empty(n.max(1) * 4));
        let none = self.client.empty(4);
        let counters = self.client.empty(COUNTER_WORDS * 4);
        self.launch(
            mode,
            Arrays {
                ops: &none,
                keys,
                values: &none,
                n,
            },
            None,
            n,
            (&out, out_len, &aux, aux_len),
            (&none, 1, &counters),
        );
        (out, aux)
    }

    /// The first `n` elements of a device buffer, through CubeCL's own copy (counters and small reads).
    fn read<E: hashtile_core::Element>(&self, h: Handle, n: usize) -> Result<Vec<E>> {
        Plain(self.client.clone()).down(&h, n)
    }

    /// The first copy's value of each key.
    pub fn find(&self, keys: &[L::Key]) -> Result<Vec<Option<L::Value>>> {
        self.find_via(&Plain(self.client.clone()), keys)
    }

    fn find_via(&self, io: &impl HostIo, keys: &[L::Key]) -> Result<Vec<Option<L::Value>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (v, f) = self.walk(io, keys, op::FIND, keys.len(), None)?;
        let v = io.down::<L::Value>(&v, keys.len())?;
        let f = io.down::<u32>(&f, keys.len())?;
        use rayon::prelude::*;
        Ok(v.into_par_iter()
            .zip(f)
            .map(|(v, f)| (f == status::FOUND).then_some(v))
            .collect())
    }

    /// How many copies of each key are stored.
    pub fn count(&self, keys: &[L::Key]) -> Result<Vec<u32>> {
        self.count_via(&Plain(self.client.clone()), keys)
    }

    fn count_via(&self, io: &impl HostIo, keys: &[L::Key]) -> Result<Vec<u32>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (_, c) = self.walk(io, keys, op::COUNT, keys.len(), None)?;
        io.down(&c, keys.len())
    }

    /// Every value of each key: offsets (`keys + 1`) and values, in list order.
    pub fn find_all(&self, keys: &[L::Key]) -> Result<(Vec<usize>, Vec<L::Value>)> {
        self.find_all_via(&Plain(self.client.clone()), keys)
    }

    fn find_all_via(
        &self,
        io: &impl HostIo,
        keys: &[L::Key],
    ) -> Result<(Vec<usize>, Vec<L::Value>)> {
        let n = keys.len();
        if n == 0 {
            return Ok((vec![0], Vec::new()));
        }
        // The keys go up once; the counts' starts are scanned on the device (one download of the offsets the
        // caller gets anyway, nothing uploaded back), and the gather walks the same keys.
        let kh = io.up(keys)?;
        let (_, counts) = self.walk_device(&kh, n, op::COUNT, n, None);
        let starts = crate::runtime::scan::exclusive_scan(&self.client, &counts, n);
        let offsets: Vec<usize> = io
            .down::<u32>(&starts, n + 1)?
            .into_iter()
            .map(|o| o as usize)
            .collect();
        let total = offsets[n];
        if total == 0 {
            return Ok((offsets, Vec::new()));
        }
        let (vals, _) = self.walk_device(&kh, n, op::GATHER, total, Some(starts));
        Ok((offsets, io.down(&vals, total)?))
    }

    /// Erases the first copy of each key (`all == false`) or every copy; returns how many.
    pub fn erase(&mut self, keys: &[L::Key], all: bool) -> Result<usize> {
        let io = Plain(self.client.clone());
        self.erase_via(&io, keys, all)
    }

    fn erase_via(&mut self, io: &impl HostIo, keys: &[L::Key], all: bool) -> Result<usize> {
        if keys.is_empty() {
            return Ok(0);
        }
        let mode = if all { op::ERASE_ALL } else { op::ERASE };
        let (_, c) = self.walk(io, keys, mode, keys.len(), None)?;
        let n: usize = io
            .down::<u32>(&c, keys.len())?
            .iter()
            .map(|&c| c as usize)
            .sum();
        self.len -= n;
        Ok(n)
    }

    /// Compacts every list and frees the slabs left over; returns how many.
    pub fn flush(&mut self) -> Result<usize> {
        self.settle()?;
        let freed = put(&self.client, &[0u32]);
        // SAFETY: thread `b < buckets` walks bucket `b`'s list: links below `buckets + pool`.
        unsafe {
            chained_flush_kernel::launch_unchecked::<L, R>(
                &self.client,
                cube_count(self.buckets as usize),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.slabs.clone(), self.slab_words(self.pool)),
                ArrayArg::from_raw_parts(self.values.clone(), self.value_words()),
                ArrayArg::from_raw_parts(self.bitmap.clone(), Self::bitmap_words(self.pool)),
                ArrayArg::from_raw_parts(freed.clone(), 1),
                self.buckets,
            )
        }
        let freed = self.read::<u32>(freed, 1)?[0] as usize;
        // Compacted: no tombstones are left, and every list's slabs but its last are full.
        self.occupied = Some(self.len as u64);
        self.free_floor = None;
        Ok(freed)
    }

    /// Takes `n` free slabs from the pool on the device (the allocator alone, as inserts call it: one atomic
    /// per slab in the common case): a buffer of `n` pool indices, `u32::MAX` for each slab the pool did not
    /// have. The slabs stay empty and unlinked; give them back with [`GpuChained::release_device`] (or they
    /// are lost to the table). Queued, not waited for.
    pub fn allocate_device(&mut self, n: usize) -> Handle {
        let out = self.client.empty(n.max(1) * 4);
        self.free_floor = None;
        self.outside += n as u64;
        // SAFETY: thread `t < n` writes `out[t]`; the bitmap has `ceil(pool / 32)` words.
        unsafe {
            chained_alloc_kernel::launch_unchecked::<R>(
                &self.client,
                cube_count(n.max(1)),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.bitmap.clone(), Self::bitmap_words(self.pool)),
                self.pool,
                n as u32,
                ArrayArg::from_raw_parts(out.clone(), n.max(1)),
            )
        }
        out
    }

    /// Gives back the `n` slabs [`GpuChained::allocate_device`] took (`u32::MAX` entries are skipped).
    /// Queued, not waited for.
    pub fn release_device(&mut self, slabs: &Handle, n: usize) {
        self.outside = self.outside.saturating_sub(n as u64);
        // SAFETY: thread `t < n` reads `slabs[t]`, a pool index below `pool` or `u32::MAX`.
        unsafe {
            chained_free_kernel::launch_unchecked::<R>(
                &self.client,
                cube_count(n.max(1)),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.bitmap.clone(), Self::bitmap_words(self.pool)),
                ArrayArg::from_raw_parts(slabs.clone(), n.max(1)),
                n as u32,
            )
        }
    }

    /// The client the table's buffers live on (for callers that put their own operation arrays there).
    pub fn client(&self) -> &ComputeClient<R> {
        &self.client
    }

    /// Pairs stored (those of queued inserts counted once [`GpuChained::settle`]d).
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole table read back: slab words and the pool bitmap (for the invariant check). Wide tables'
    /// values: [`GpuChained::download_values`].
    pub fn download(&self) -> Result<(Vec<u64>, Vec<u32>)> {
        let words = self.read::<u64>(self.slabs.clone(), self.slab_words(self.pool))?;
        let bits = self.read(self.bitmap.clone(), Self::bitmap_words(self.pool))?;
        Ok((words, bits))
    }

    /// A wide table's value array read back (at its key words' indices); `None` for packed tables.
    pub fn download_values(&self) -> Result<Option<Vec<u64>>> {
        if L::MOVES_PAIRS {
            return Ok(None);
        }
        Ok(Some(self.read::<u64>(
            self.values.clone(),
            self.slab_words(self.pool),
        )?))
    }

    /// Lists and pool slabs.
    pub fn shape_of(&self) -> (u32, u32) {
        (self.buckets, self.pool)
    }

    /// Device handles for calling [`chained_tile_op`] from your own kernel (see [`ChainedDeviceRef`]). Call
    /// [`GpuChained::reserve`] first for the slabs your kernel's inserts may take, and
    /// [`GpuChained::recount`] after a kernel that changed the table. The handles stay valid until the pool
    /// grows (a call that inserts from the host may grow it). Until [`GpuChained::recount`], queued inserts
    /// no longer bound the pool by the table's occupancy (your kernel may insert).
    pub fn device_ref(&mut self) -> ChainedDeviceRef {
        self.occupied = None;
        self.free_floor = None;
        ChainedDeviceRef {
            slabs: self.slabs.clone(),
            slab_words: self.slab_words(self.pool),
            values: self.values.clone(),
            value_words: self.value_words(),
            bitmap: self.bitmap.clone(),
            bitmap_words: Self::bitmap_words(self.pool),
            pool: self.pool,
            shape: self.client.create_from_slice(u32::as_bytes(&self.shape())),
            tile_width: self.tile,
            plain: self.plain_reads,
            resident: self.resident,
        }
    }

    /// Grows the pool, if needed, so that at least `free` slabs are free (reads how many are in use).
    pub fn reserve(&mut self, free: u32) -> Result<()> {
        let used = self.used_slabs()?;
        let want = used as u64 + free as u64;
        if want > self.pool as u64 {
            let grown = want.max(2 * self.pool as u64).min(u32::MAX as u64) as u32;
            self.resize(grown)?;
        }
        self.free_floor = None;
        Ok(())
    }

    /// Counts the pairs stored, on the device (after a kernel of yours changed the table; waits), and makes it
    /// [`GpuChained::len`]; also counts the occupied slots again, for [`GpuChained::insert_queued`]'s bound.
    /// Queued inserts are settled first.
    pub fn recount(&mut self) -> Result<usize> {
        self.settle()?;
        let words = self.slab_words(self.pool);
        let count = self.client.create_from_slice(u32::as_bytes(&[0u32; 2]));
        // SAFETY: thread `t < words` reads slab word `t` and adds to `count[0]` and `count[1]`.
        unsafe {
            chained_live_kernel::launch_unchecked::<L, R>(
                &self.client,
                cube_count(words),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.slabs.clone(), words),
                ArrayArg::from_raw_parts(count.clone(), 2),
                self.tile,
            )
        }
        let c = self.read::<u32>(count, 2)?;
        self.len = c[0] as usize;
        self.occupied = Some(c[1] as u64);
        Ok(self.len)
    }
}

/// What a kernel of yours needs to call [`chained_tile_op`] on a [`GpuChained`] table (from
/// [`GpuChained::device_ref`]). Bind `slabs` as the atomic array; as `slabs_plain` bind `slabs` again where
/// `plain` (CUDA), else a one-word dummy, and pass `plain` as the compile-time flag; a kernel that only finds
/// or counts may bind a dummy as the atomic array and the slabs as `slabs_plain` with `plain == true`. Build
/// `meta` in the kernel with [`crate::device::shape::load_meta`] of `shape`.
#[derive(Debug, Clone)]
pub struct ChainedDeviceRef {
    /// The slab words (`Array<Atomic<u64>>` or `Array<u64>`, `slab_words` long).
    pub slabs: Handle,
    /// Length of `slabs`.
    pub slab_words: usize,
    /// A wide table's values (`slab_values`, `Array<u64>`); a one-word dummy for packed tables.
    pub values: Handle,
    /// Length of `values`.
    pub value_words: usize,
    /// The allocator's bitmap (`Array<Atomic<u32>>`, `bitmap_words` long).
    pub bitmap: Handle,
    /// Length of `bitmap`.
    pub bitmap_words: usize,
    /// Pool slabs (the `pool` argument).
    pub pool: u32,
    /// The shape words (`Array<u32>`, [`crate::device::shape::SHAPE_WORDS`] long).
    pub shape: Handle,
    /// Lanes per tile (the compile-time `tw`).
    pub tile_width: u32,
    /// Whether this runtime may bind the slabs twice (CUDA): the compile-time `plain`.
    pub plain: bool,
    /// The table's allocator: the compile-time `resident` ([`SlabAllocator::ResidentBlocks`]).
    pub resident: bool,
}

/// A GPU table read back: slab words, a wide table's values, the pool bitmap.
pub(crate) type Slabs = (Vec<u64>, Option<Vec<u64>>, Vec<u32>);

/// A chained table's GPU store behind `ChainedTable`, whatever the runtime: keys and values
/// of one word type `W`, `u32` ([`Packed`]) or `u64` ([`Wide`](crate::device::layout::Wide); 32-bit keys or values of a table with a 64-bit
/// side are widened by the caller).
pub(crate) trait DeviceChained<W>: Send + Sync {
    fn insert(&mut self, keys: &[W], values: &[W], unique: bool) -> Result<usize>;
    fn erase(&mut self, keys: &[W], all: bool) -> Result<usize>;
    fn find(&self, keys: &[W]) -> Result<Vec<Option<W>>>;
    fn count(&self, keys: &[W]) -> Result<Vec<u32>>;
    fn find_all(&self, keys: &[W]) -> Result<(Vec<usize>, Vec<W>)>;
    fn apply(&mut self, ops: &[u32], keys: &[W], values: &[W]) -> Result<Vec<(W, u32)>>;
    fn flush(&mut self) -> Result<usize>;
    fn len(&self) -> usize;
    fn download(&self) -> Result<Slabs>;
    fn shape_of(&self) -> (u32, u32);
}

/// The GPU store as `ChainedTable` uses it: host data moves through the runtime's shared
/// host-transfer stager ([`Staging`]), not through CubeCL's pageable `create_from_slice` / `read_one`.
struct Staged<R: crate::runtime::transfer::HostTransfer, L: KeyLayout> {
    table: GpuChained<R, L>,
    io: Staging<R>,
}

impl<
    R: crate::runtime::transfer::HostTransfer,
    W: hashtile_core::Element,
    L: KeyLayout<Key = W, Value = W>,
> DeviceChained<W> for Staged<R, L>
{
    fn insert(&mut self, keys: &[W], values: &[W], unique: bool) -> Result<usize> {
        self.table.insert_via(&self.io, keys, values, unique)
    }
    fn erase(&mut self, keys: &[W], all: bool) -> Result<usize> {
        self.table.erase_via(&self.io, keys, all)
    }
    fn find(&self, keys: &[W]) -> Result<Vec<Option<W>>> {
        self.table.find_via(&self.io, keys)
    }
    fn count(&self, keys: &[W]) -> Result<Vec<u32>> {
        self.table.count_via(&self.io, keys)
    }
    fn find_all(&self, keys: &[W]) -> Result<(Vec<usize>, Vec<W>)> {
        self.table.find_all_via(&self.io, keys)
    }
    fn apply(&mut self, ops: &[u32], keys: &[W], values: &[W]) -> Result<Vec<(W, u32)>> {
        self.table.apply_via(&self.io, ops, keys, values)
    }
    fn flush(&mut self) -> Result<usize> {
        self.table.flush()
    }
    fn len(&self) -> usize {
        self.table.len()
    }
    fn download(&self) -> Result<Slabs> {
        let (words, bits) = self.table.download()?;
        Ok((words, self.table.download_values()?, bits))
    }
    fn shape_of(&self) -> (u32, u32) {
        self.table.shape_of()
    }
}

/// An empty GPU store of layout `L` on `backend` (checked available and not the CPU by the caller).
pub(crate) fn device_chained<W: hashtile_core::Element, L: KeyLayout<Key = W, Value = W>>(
    backend: crate::select::Backend,
    family: HashFamily,
    buckets: u32,
    pool: u32,
) -> Result<Box<dyn DeviceChained<W>>> {
    struct Make<L> {
        family: HashFamily,
        buckets: u32,
        pool: u32,
        _layout: std::marker::PhantomData<L>,
    }
    impl<W: hashtile_core::Element, L: KeyLayout<Key = W, Value = W>>
        crate::runtime::dispatch::OnRuntime for Make<L>
    {
        type Out = Box<dyn DeviceChained<W>>;
        fn run<R: crate::runtime::transfer::HostTransfer>(
            self,
            client: ComputeClient<R>,
        ) -> Result<Self::Out> {
            let stager = crate::runtime::dispatch::shared_stager(&client)?;
            let probe = stager.clone();
            let free: FreeMemory = std::sync::Arc::new(move || R::free_device_memory(&probe));
            let table = GpuChained::<R, L>::with_memory_probe(
                &client,
                self.family,
                self.buckets,
                self.pool,
                DEFAULT_TILE,
                Some(free),
            )?;
            Ok(Box::new(Staged {
                table,
                io: Staging { client, stager },
            }))
        }
    }
    crate::runtime::dispatch::on_backend(
        backend,
        Make::<L> {
            family,
            buckets,
            pool,
            _layout: std::marker::PhantomData,
        },
    )
}
