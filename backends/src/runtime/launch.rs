//! Launch helpers every family shares: the cube size, launch geometry for `n` threads, and the one fill and
//! one copy kernel (no family keeps its own).

use cubecl::prelude::*;
use cubecl::server::Handle;

/// Threads per cube for every kernel.
pub const CUBE_SIZE: u32 = 256;
/// Maximum cubes per grid dimension.
const MAX_CUBES_X: u32 = 65_535;

/// Fills the first `n` elements of a buffer with `value` (queued).
pub fn fill<R: Runtime, E: Numeric + CubeElement>(
    client: &ComputeClient<R>,
    h: &Handle,
    n: usize,
    value: E,
) {
    // SAFETY: the kernel guards its index against the array length.
    unsafe {
        fill_kernel::launch_unchecked::<E, R>(
            client,
            cube_count(n),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(h.clone(), n),
            value,
        )
    }
}

/// [`fill`] of `u64` words (table initialisation and `clear`).
pub fn fill_u64<R: Runtime>(client: &ComputeClient<R>, h: &Handle, n: usize, value: u64) {
    fill::<R, u64>(client, h, n, value)
}

/// [`fill`] of `u32` words (counter resets).
pub fn fill_u32<R: Runtime>(client: &ComputeClient<R>, h: &Handle, n: usize, value: u32) {
    fill::<R, u32>(client, h, n, value)
}

/// Launch geometry for `n` threads: a 2-D grid when one dimension is not enough.
pub fn cube_count(n: usize) -> CubeCount {
    let cubes = (n as u64).div_ceil(CUBE_SIZE as u64).max(1);
    if cubes <= MAX_CUBES_X as u64 {
        CubeCount::Static(cubes as u32, 1, 1)
    } else {
        CubeCount::Static(MAX_CUBES_X, cubes.div_ceil(MAX_CUBES_X as u64) as u32, 1)
    }
}

/// `words[i] = value`: the one fill kernel.
#[cube(launch_unchecked)]
pub fn fill_kernel<E: Numeric + CubeElement>(words: &mut Array<E>, value: E) {
    if ABSOLUTE_POS < words.len() {
        words[ABSOLUTE_POS] = value;
    }
}

/// `output[i] = input[i]` for `i < input.len()`: the one copy kernel (pool growth, frame moves, and the scan
/// benchmark's ceiling: the least traffic a pass can move).
#[cube(launch_unchecked)]
pub fn copy_kernel<E: CubePrimitive>(input: &Array<E>, output: &mut Array<E>) {
    let pos = ABSOLUTE_POS;
    if pos < input.len() {
        output[pos] = input[pos];
    }
}

/// Queues a copy of the first `n` elements of `input` into `output` (which holds at least `n`).
pub fn copy<R: Runtime, E: CubePrimitive>(
    client: &ComputeClient<R>,
    input: &Handle,
    output: &Handle,
    n: usize,
) {
    if n == 0 {
        return;
    }
    // SAFETY: bounded by `n`, the length of both arrays as passed.
    unsafe {
        copy_kernel::launch_unchecked::<E, R>(
            client,
            cube_count(n),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(input.clone(), n),
            ArrayArg::from_raw_parts(output.clone(), n),
        )
    }
}

/// [`copy`] of `u32` words.
pub fn copy_u32<R: Runtime>(client: &ComputeClient<R>, input: &Handle, output: &Handle, n: usize) {
    copy::<R, u32>(client, input, output, n)
}
