//! Exclusive prefix sums of `u32` arrays on the device (reduce-then-scan), written once for every user: the CSR
//! build's offsets (issue 11), and any count-then-place pass. CubeCL 0.10 has no device-wide scan primitive
//! (its plane scans cover one plane), so this module builds one from a cube-wide scan in shared memory:
//!
//! 1. [`scan_block_kernel()`]: each cube of [`CUBE_SIZE`] units scans its block of the input in shared memory
//!    (Hillis-Steele: log2 of the block in steps, a barrier each), writes the block's exclusive prefix sums and
//!    the block's total;
//! 2. the totals (one per block, 1/256 of the input) are scanned the same way, recursively, until one block
//!    holds them;
//! 3. [`scan_add_kernel()`]: each block adds its total's prefix.
//!
//! Shared memory and cube barriers only, no plane operations, so the result does not depend on the plane
//! size (8 on lavapipe, 32 on CUDA). The sums are 32-bit: inputs whose total exceeds `u32::MAX` wrap.

use crate::runtime::launch::{CUBE_SIZE, cube_count};
use cubecl::prelude::*;
use cubecl::server::Handle;

/// Units per cube, as a compile-time constant for the shared memory size.
const BLOCK: usize = CUBE_SIZE as usize;

/// Inclusive prefix sums of `shared[0..BLOCK]`, in place, across one cube of `BLOCK` units (Hillis-Steele:
/// log2 of the block in steps, two barriers each). Every unit calls it with its position `t`, after a barrier
/// that follows its write of `shared[t]`; the sums are visible to every unit when it returns.
#[cube]
pub fn cube_inclusive_scan(shared: &mut SharedMemory<u32>, t: usize) {
    let mut d = 1usize;
    while d < BLOCK {
        let mut add = u32::new(0);
        if t >= d {
            add = shared[t - d];
        }
        sync_cube();
        shared[t] += add;
        sync_cube();
        d *= 2;
    }
}

/// Step 1 over one level: `output[i]` = the sum of `input[j]` for `j < i` within `i`'s block of `BLOCK`
/// positions; `sums[b]` = block `b`'s total. Positions `input.len()..output.len()` read as 0, so an output one
/// longer than the input ends with the input's total.
#[cube(launch_unchecked)]
pub fn scan_block_kernel(input: &Array<u32>, output: &mut Array<u32>, sums: &mut Array<u32>) {
    let t = UNIT_POS as usize;
    let pos = ABSOLUTE_POS;
    let mut shared = SharedMemory::<u32>::new(BLOCK);
    let mut v = u32::new(0);
    if pos < input.len() {
        v = input[pos];
    }
    shared[t] = v;
    sync_cube();
    cube_inclusive_scan(&mut shared, t);
    if pos < output.len() {
        output[pos] = shared[t] - v;
    }
    let block = CUBE_POS;
    if t == BLOCK - 1 && block < sums.len() {
        sums[block] = shared[t];
    }
}

/// Step 3: adds block `b`'s prefix (`offsets[b]`) to every position of block `b`.
#[cube(launch_unchecked)]
pub fn scan_add_kernel(output: &mut Array<u32>, offsets: &Array<u32>) {
    let pos = ABSOLUTE_POS;
    let block = CUBE_POS;
    if pos < output.len() && block < offsets.len() {
        output[pos] += offsets[block];
    }
}

/// Exclusive prefix sums of the first `n` words of `input`, queued: a new buffer of `n + 1` words whose last
/// word is the total.
pub fn exclusive_scan<R: Runtime>(client: &ComputeClient<R>, input: &Handle, n: usize) -> Handle {
    if n == 0 {
        return client.create_from_slice(u32::as_bytes(&[0]));
    }
    let output = client.empty((n + 1) * 4);
    exclusive_scan_into(client, input, n, &output);
    output
}

/// [`exclusive_scan`] into `output`, a buffer of at least `n + 1` words (a caller's cached one), queued.
pub fn exclusive_scan_into<R: Runtime>(
    client: &ComputeClient<R>,
    input: &Handle,
    n: usize,
    output: &Handle,
) {
    if n == 0 {
        crate::runtime::launch::fill_u32(client, output, 1, 0);
    } else {
        scan_level(client, input, n, output, n + 1);
    }
}

/// One level: scans `input` (`n_in >= 1` words) into `output` (`m` words, `m >= n_in`), recursing on the block
/// totals when there is more than one block.
fn scan_level<R: Runtime>(
    client: &ComputeClient<R>,
    input: &Handle,
    n_in: usize,
    output: &Handle,
    m: usize,
) {
    let blocks = m.div_ceil(BLOCK).max(1);
    let sums = client.empty(blocks * 4);
    // SAFETY: every index is guarded by the lengths passed here (positions past `n_in` read as 0).
    unsafe {
        scan_block_kernel::launch_unchecked::<R>(
            client,
            cube_count(m),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(input.clone(), n_in),
            ArrayArg::from_raw_parts(output.clone(), m),
            ArrayArg::from_raw_parts(sums.clone(), blocks),
        )
    }
    if blocks > 1 {
        let offsets = client.empty(blocks * 4);
        scan_level(client, &sums, blocks, &offsets, blocks);
        // SAFETY: guarded by the lengths passed here.
        unsafe {
            scan_add_kernel::launch_unchecked::<R>(
                client,
                cube_count(m),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(output.clone(), m),
                ArrayArg::from_raw_parts(offsets, blocks),
            )
        }
    }
}

/// Words of the input each cube of [`sum_blocks_kernel`] sums.
const SUM_SPAN: usize = BLOCK * 16;

/// `partial[c]` = the sum, as a `u64`, of terms `c * SUM_SPAN .. (c + 1) * SUM_SPAN` (each unit sums a stride of
/// them, then a tree reduction in shared memory). The terms are the `n` words of `input` with `squared_steps`
/// off, and the squares of the differences of consecutive words (`input[i + 1] - input[i]`, `i < n`; `input`
/// then holds `n + 1` words: offsets, whose steps are range lengths) with it on.
#[cube(launch_unchecked)]
pub fn sum_blocks_kernel(
    input: &Array<u32>,
    partial: &mut Array<u64>,
    n: usize,
    #[comptime] squared_steps: bool,
) {
    let t = UNIT_POS as usize;
    let cube = CUBE_POS;
    let mut shared = SharedMemory::<u64>::new(BLOCK);
    let base = cube * SUM_SPAN;
    let mut stop = base + SUM_SPAN;
    if stop > n {
        stop = n;
    }
    let mut s = u64::new(0);
    let mut i = base + t;
    while i < stop {
        if comptime!(squared_steps) {
            let d = (input[i + 1] - input[i]) as u64;
            s += d * d;
        } else {
            s += input[i] as u64;
        }
        i += BLOCK;
    }
    shared[t] = s;
    sync_cube();
    let mut d = 1usize;
    while d < BLOCK {
        if (t & (2 * d - 1)) == 0 {
            shared[t] += shared[t + d];
        }
        sync_cube();
        d *= 2;
    }
    if t == 0 && cube < partial.len() {
        partial[cube] = shared[0];
    }
}

/// The sum of the first `n` words of `input` as a `u64` (no wrap, unlike [`exclusive_scan`]'s total): how a
/// caller learns that 32-bit offsets would overflow. Waits for the device (it reads one word per `SUM_SPAN`
/// inputs back).
pub fn total_u64<R: Runtime>(client: &ComputeClient<R>, input: &Handle, n: usize) -> u64 {
    sum_blocks(client, input, n, false)
}

/// The sum of the squared steps `(offsets[i + 1] - offsets[i])^2` over `i < n` of `n + 1` offsets, as a `u64`:
/// divided by the total, the mean length of the range a stored key sits in. Waits for the device.
pub fn squared_steps_u64<R: Runtime>(client: &ComputeClient<R>, offsets: &Handle, n: usize) -> u64 {
    sum_blocks(client, offsets, n, true)
}

/// [`sum_blocks_kernel`] over `n` terms, its partial sums added on the host.
fn sum_blocks<R: Runtime>(
    client: &ComputeClient<R>,
    input: &Handle,
    n: usize,
    squared_steps: bool,
) -> u64 {
    if n == 0 {
        return 0;
    }
    let cubes = n.div_ceil(SUM_SPAN);
    let partial = client.empty(cubes * 8);
    // SAFETY: reads are bounded by `n`, writes by `cubes`.
    unsafe {
        sum_blocks_kernel::launch_unchecked::<R>(
            client,
            cube_count(cubes * BLOCK),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(input.clone(), n + squared_steps as usize),
            ArrayArg::from_raw_parts(partial.clone(), cubes),
            n,
            squared_steps,
        )
    }
    u64::from_bytes(&client.read_one_unchecked(partial))[..cubes]
        .iter()
        .sum()
}
