//! Slab lists on the device (SlabHash's layout): a slab is a bucket of [`SLAB_WORDS`] words, 15 pair slots and
//! the link to the next slab of its list; its view for the tile driver ([`slab_view()`]); and the pool's
//! allocator, a bitmap of pool slabs taken with one atomic in the common case (`alloc_slab`) or SlabAlloc's
//! resident blocks held in a tile's lanes (`tile_alloc_slab`). The tile driver (`super::driver`) calls these
//! for schemes whose buckets chain (`ProbingScheme::CHAINS`).

use super::layout::{KeyLayout, key_view};
use cubecl::prelude::*;
use hashtile_core::scheme::BucketView;
use hashtile_core::tile::{
    EMPTY_WORD, LaneSlots, TileLane, cas_slot, tile_ballot, tile_loop_any, tile_shuffle,
};

/// Words per slab (15 slots and the link).
pub const SLAB_WORDS: u32 = 16;
/// The link's slot.
pub const LINK_SLOT: u32 = 15;
/// The view bits of the 15 pair slots.
pub const PAIR_SLOTS: u32 = 0x7fff;
/// The view of a slab just read: the pair slots' masks and the link. Without `matching` (multimap inserts,
/// which never look for their key) the key comparisons and their ballots are left out: `matched` is 0.
// The masks start as runtime variables that both compile-time branches assign.
#[allow(unused_assignments)]
#[cube]
pub fn slab_view<L: KeyLayout>(
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

/// A tile's `linked` answer when the pool had no free slab (slab indices stay below `u32::MAX - 1`).
pub(crate) const OUT_OF_SLABS: u32 = u32::MAX - 1;

/// Takes a free pool slab (its pool index), starting at word `start` of the bitmap; `u32::MAX` when every word
/// is full. One atomic in the common case.
// `div_ceil` is not a CubeCL operation.
#[allow(clippy::manual_div_ceil)]
#[cube]
pub(crate) fn alloc_slab(bitmap: &Array<Atomic<u32>>, pool: u32, start: u32) -> u32 {
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
pub(crate) fn tile_alloc_slab(
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
pub(crate) fn free_slab(bitmap: &Array<Atomic<u32>>, p: u32) {
    bitmap[(p / 32u32) as usize].fetch_and(!(1u32 << (p % 32u32)));
}

/// Links pool slab `fresh` (`u32::MAX`: none was free) after slab `bucket`, whose link is empty as the tile
/// read it; run by one lane. Returns the slab linked (its bucket index, after the table's `num_buckets`
/// buckets), `u32::MAX` when another tile linked one first (ours goes back to the pool), or [`OUT_OF_SLABS`].
#[cube]
pub(crate) fn link_slab<L: KeyLayout>(
    table: &Array<Atomic<L::Word>>,
    bitmap: &Array<Atomic<u32>>,
    fresh: u32,
    bucket: u32,
    num_buckets: u32,
) -> u32 {
    let mut linked = OUT_OF_SLABS.runtime();
    if fresh != 4294967295u32 {
        let s = num_buckets + fresh;
        let link_at = (bucket * SLAB_WORDS + LINK_SLOT) as usize;
        let word = 0xffff_ffff_0000_0000u64 | (s as u64);
        if cas_slot::<L::Word>(table, link_at, EMPTY_WORD, word) == EMPTY_WORD {
            linked = s;
        } else {
            linked = 4294967295u32;
            free_slab(bitmap, fresh);
        }
    }
    linked
}

/// A walk's work on one slab (`bucket`, whose words this lane read as `slots`): with `erase_all`, tombstones
/// this lane's matched slots (bits `lane` and `lane + tw` of `matched`); with `gather`, writes their values
/// to `out` from `cursor` on, in slot order. Returns the slots the tile tombstoned (0 without `erase_all`);
/// **every lane of the plane calls it**.
#[allow(clippy::too_many_arguments)]
#[cube]
pub(crate) fn walk_matches<L: KeyLayout>(
    table: &Array<Atomic<L::Word>>,
    table_values: &Array<u64>,
    out: &mut Array<L::Value>,
    slots: LaneSlots,
    matched: u32,
    bucket: u32,
    cursor: usize,
    active: bool,
    tl: TileLane,
    #[comptime] erase_all: bool,
    #[comptime] gather: bool,
    #[comptime] tw: u32,
) -> u32 {
    let m0 = active && (matched >> tl.lane) & 1u32 == 1u32;
    let mut m1 = false;
    if comptime!(SLAB_WORDS / tw >= 2) {
        m1 = active && (matched >> (tl.lane + tw)) & 1u32 == 1u32;
    }
    let mut ok0 = false;
    let mut ok1 = false;
    let base = (bucket * SLAB_WORDS + tl.lane) as usize;
    if comptime!(erase_all) {
        if m0 {
            ok0 = cas_slot::<L::Word>(table, base, slots.w0, L::tomb_word()) == slots.w0;
        }
        if m1 {
            let at1 = base + tw as usize;
            ok1 = cas_slot::<L::Word>(table, at1, slots.w1, L::tomb_word()) == slots.w1;
        }
    }
    if comptime!(gather) {
        let below = matched & ((1u32 << tl.lane) - 1u32);
        if m0 {
            out[cursor + below.count_ones() as usize] = L::own_value(slots.w0, table_values, base);
        }
        if m1 {
            let below1 = matched & ((1u32 << (tl.lane + tw)) - 1u32);
            out[cursor + below1.count_ones() as usize] =
                L::own_value(slots.w1, table_values, base + tw as usize);
        }
    }
    tile_ballot(ok0, tl, tw).count_ones() + tile_ballot(ok1, tl, tw).count_ones()
}
