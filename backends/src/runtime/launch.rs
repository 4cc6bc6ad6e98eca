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

/// Launch geometry for `n` threads: a 2-D grid when one dimension is not enough, its rows as even as they
/// can be (full rows of `MAX_CUBES_X` launched up to a row of cubes with nothing to do: 131 070 cubes for
/// the 65 536 of 2^24 threads).
pub fn cube_count(n: usize) -> CubeCount {
    let (x, y) = grid_of((n as u64).div_ceil(CUBE_SIZE as u64));
    CubeCount::Static(x, y, 1)
}

/// `(x, y)` with `x <= MAX_CUBES_X` and `x * y` the fewest cubes at or above `cubes` (at least one) for the
/// fewest rows.
fn grid_of(cubes: u64) -> (u32, u32) {
    let cubes = cubes.max(1);
    let rows = cubes.div_ceil(MAX_CUBES_X as u64);
    (cubes.div_ceil(rows) as u32, rows as u32)
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

#[cfg(test)]
mod tests {
    use super::{MAX_CUBES_X, grid_of};

    #[test]
    fn a_grid_covers_its_cubes_with_less_than_a_row_to_spare() {
        for cubes in [
            0u64,
            1,
            255,
            MAX_CUBES_X as u64,
            MAX_CUBES_X as u64 + 1,
            1 << 16,
            1 << 18,
            3 * MAX_CUBES_X as u64 + 7,
            1 << 22,
        ] {
            let (x, y) = grid_of(cubes);
            let total = x as u64 * y as u64;
            assert!((1..=MAX_CUBES_X).contains(&x), "{cubes}: x = {x}");
            assert!(total >= cubes.max(1), "{cubes}: {x} x {y}");
            assert!(
                total - cubes.max(1) < y as u64,
                "{cubes}: {x} x {y} spares a row"
            );
            assert_eq!(y as u64, cubes.max(1).div_ceil(MAX_CUBES_X as u64));
        }
    }
}
