//! Slab allocation on the device: a bitmap of pool slabs taken with one atomic in the common case, or
//! SlabAlloc's resident blocks held in a tile's lanes ([`SlabAllocator`]).

use cubecl::prelude::*;
use hashtile_core::tile::{TileLane, tile_ballot, tile_loop_any, tile_shuffle};
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
