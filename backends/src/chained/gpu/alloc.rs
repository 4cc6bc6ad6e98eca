//! The slab allocator's launches (its own rate, frees, the census) and the choice between its two ways
//! ([`SlabAllocator`]); the device functions themselves are `crate::device::slab`'s, which the tile driver calls.

use crate::device::slab::{alloc_slab, free_slab};
use cubecl::prelude::*;
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
