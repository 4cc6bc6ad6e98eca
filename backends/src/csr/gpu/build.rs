//! The device builds of a CSR table (issue 11): both place every pair in its vertex's contiguous range, and
//! leave `offsets` (`vertices + 1` words) describing the ranges.
//!
//! - **v1** (the paper's HashGraph-V1): count with one atomic add per key into the vertex counters, an exclusive
//!   scan of them ([`crate::runtime::scan::exclusive_scan`]), then place with an atomic cursor per vertex: the count
//!   and scatter passes below with one vertex per bin, writing straight into the table. Both
//!   atomic passes touch the `vertices` counters at random: once the counters outgrow the L2 cache, every key
//!   costs two random read-modify-writes in DRAM, plus its two random writes.
//! - **v2** (HashGraph-V2, binned): vertices are grouped into **bins** of `bin_vertices` consecutive vertices
//!   (a power of two, a multiple of the cube size). Phase 1 counts keys per bin (a small array that stays in
//!   cache) and scans those counts; phase 2 scatters every pair into its bin's range of a binned copy of the
//!   input; phase 3 runs **one cube per bin**: it counts the bin's keys per vertex in shared memory, scans them
//!   in shared memory, writes the bin's vertex offsets (the bin's start plus the local prefix: no vertex-wide
//!   scan is needed), and places the bin's pairs with shared-memory cursors, into the bin's own contiguous
//!   range of the output. The random traffic of v1 becomes cache-resident (the bin counters), shared-memory
//!   (the vertex counters) or confined to a few thousand output ranges written front to back.
//!
//!   A bin holding very many keys (all keys equal, say) is served by one cube, so v2 gets slower on such
//!   inputs than v1 (which spreads them over all units); the result is the same.

use super::CsrKey;
use crate::runtime::launch::CUBE_SIZE;
use crate::runtime::scan::cube_inclusive_scan;
use cubecl::prelude::*;

/// Units per cube, as a compile-time constant for shared memory sizes.
const CUBE: usize = CUBE_SIZE as usize;

/// Count pass: `bin_counts[vertex(key) >> bin_shift] += 1` for every key (v2's phase 1; v1's count with
/// `bin_shift = 0`, one vertex per bin).
#[cube(launch_unchecked)]
pub fn csr_bin_count_kernel<K: CsrKey>(
    keys: &Array<K::Word>,
    bin_counts: &Array<Atomic<u32>>,
    vertices: u32,
    seed: u32,
    mix: u32,
    bin_shift: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < keys.len() {
        let v = K::vertex(keys[pos], vertices, seed, mix);
        bin_counts[(v >> bin_shift) as usize].fetch_add(1u32);
    }
}

/// Keys each unit of `csr_bin_scatter_kernel` moves.
pub const SCATTER_PER_UNIT: usize = 4;

/// Scatter pass: each pair goes to `bin_offsets[b] + cursor[b]++` of its bin `b` (v2's phase 2, into the binned
/// copy; v1's place with `bin_shift = 0`, into the table: the order within a vertex is the atomics'). Each unit
/// moves [`SCATTER_PER_UNIT`] pairs (positions `CUBE` apart, so each round of loads is coalesced) and claims
/// all their slots before writing any: the claims are atomics whose result the writes wait for, and four of
/// them in flight per unit hide that round trip (one pair per unit: 2.0 ms for 2^25 keys on the H100, the
/// slowest phase of the build).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn csr_bin_scatter_kernel<K: CsrKey, V: CubePrimitive>(
    keys: &Array<K::Word>,
    values: &Array<V>,
    bin_offsets: &Array<u32>,
    bin_cursor: &Array<Atomic<u32>>,
    binned_keys: &mut Array<K::Word>,
    binned_values: &mut Array<V>,
    binned_pairs: &mut Array<u64>,
    vertices: u32,
    seed: u32,
    mix: u32,
    bin_shift: u32,
    #[comptime] packed: bool,
) {
    let n = keys.len();
    let first = CUBE_POS * (CUBE * SCATTER_PER_UNIT) + UNIT_POS as usize;
    let mut at = Array::<u32>::new(SCATTER_PER_UNIT);
    #[unroll]
    for k in 0..SCATTER_PER_UNIT {
        let pos = first + k * CUBE;
        if pos < n {
            let b = (K::vertex(keys[pos], vertices, seed, mix) >> bin_shift) as usize;
            at[k] = bin_offsets[b] + bin_cursor[b].fetch_add(1u32);
        }
    }
    #[unroll]
    for k in 0..SCATTER_PER_UNIT {
        let pos = first + k * CUBE;
        if pos < n {
            let to = at[k] as usize;
            if comptime!(packed) {
                binned_pairs[to] = pack::<K, V>(keys[pos], values[pos]);
            } else {
                binned_keys[to] = keys[pos];
                binned_values[to] = values[pos];
            }
        }
    }
}

/// A 32-bit key and a 32-bit value as one word (`packed` v2 builds: the scatter then writes one 8-byte word per
/// pair instead of two 4-byte words to two arrays, halving its scattered writes).
#[cube]
fn pack<K: CsrKey, V: CubePrimitive>(key: K::Word, value: V) -> u64 {
    u64::cast_from(key) | (u64::cast_from(value) << 32u64)
}

/// v2 phase 3, one cube per bin of `bin_vertices` vertices (a multiple of the cube size): count the bin's keys
/// per vertex in shared memory, scan the counts (each unit sums `bin_vertices / CUBE` consecutive counters,
/// then the cube scan of the units' sums, `scan::cube_inclusive_scan`), write the bin's offsets, and place its pairs through
/// shared-memory cursors. Cube 0 also writes the closing offset `offsets[vertices]`.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn csr_bin_place_kernel<K: CsrKey, V: CubePrimitive>(
    binned_keys: &Array<K::Word>,
    binned_values: &Array<V>,
    binned_pairs: &Array<u64>,
    bin_offsets: &Array<u32>,
    offsets: &mut Array<u32>,
    out_keys: &mut Array<K::Word>,
    out_values: &mut Array<V>,
    vertices: u32,
    seed: u32,
    mix: u32,
    #[comptime] bin_vertices: u32,
    #[comptime] packed: bool,
) {
    let bins = bin_offsets.len() - 1;
    let bin = CUBE_POS;
    let t = UNIT_POS as usize;
    let width = comptime!(bin_vertices as usize);
    let per_unit = comptime!(bin_vertices as usize / CUBE);
    let counters = SharedMemory::<Atomic<u32>>::new(width);
    let mut sums = SharedMemory::<u32>::new(CUBE);
    // Every unit reaches every barrier: cubes past the last bin work on an empty range.
    let mut start = 0usize;
    let mut end = 0usize;
    if bin < bins {
        start = bin_offsets[bin] as usize;
        end = bin_offsets[bin + 1] as usize;
    }
    let base = bin as u32 * bin_vertices;
    let mut i = t;
    while i < width {
        counters[i].store(0u32);
        i += CUBE;
    }
    sync_cube();
    let mut k = start + t;
    while k < end {
        let mut key = binned_keys[0];
        if comptime!(packed) {
            key = K::Word::cast_from(binned_pairs[k] & 0xffff_ffffu64);
        } else {
            key = binned_keys[k];
        }
        let v = K::vertex(key, vertices, seed, mix) - base;
        counters[v as usize].fetch_add(1u32);
        k += CUBE;
    }
    sync_cube();
    // This unit's counters: [t * per_unit, (t + 1) * per_unit).
    let first = t * per_unit;
    let mut own = u32::new(0);
    let mut c = 0usize;
    while c < per_unit {
        own += counters[first + c].load();
        c += 1;
    }
    sums[t] = own;
    sync_cube();
    cube_inclusive_scan(&mut sums, t);
    // Exclusive prefix of this unit's first counter, in the output.
    let mut run = start as u32 + sums[t] - own;
    c = 0;
    while c < per_unit {
        let slot = first + c;
        let n = counters[slot].load();
        let v = base + slot as u32;
        if v < vertices {
            offsets[v as usize] = run;
        }
        // The counter becomes the vertex's cursor.
        counters[slot].store(run);
        run += n;
        c += 1;
    }
    if bin == 0 && t == 0 {
        offsets[vertices as usize] = bin_offsets[bins];
    }
    sync_cube();
    k = start + t;
    while k < end {
        let mut key = binned_keys[0];
        let mut value = binned_values[0];
        if comptime!(packed) {
            let w = binned_pairs[k];
            key = K::Word::cast_from(w & 0xffff_ffffu64);
            value = V::cast_from(w >> 32u64);
        } else {
            key = binned_keys[k];
            value = binned_values[k];
        }
        let v = K::vertex(key, vertices, seed, mix) - base;
        let at = counters[v as usize].fetch_add(1u32) as usize;
        out_keys[at] = key;
        out_values[at] = value;
        k += CUBE;
    }
}
