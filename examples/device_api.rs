//! Calling a table from your own CubeCL kernel: each thread looks up `key + 1` for its key and writes the
//! sum of both values (0 where either is absent). Runs on CUDA, else on Vulkan (lavapipe works).

use hashtile::cubecl::prelude::*;
use hashtile::gpu::device_api::{load_meta, tile_find};
use hashtile::gpu::{GpuTable, Packed};
use hashtile::{Bcht, HashFamily, SchemeInfo};

#[cube(launch_unchecked)]
fn neighbour_sum(
    keys: &Array<u32>,
    table_keys: &Array<u64>,
    table_values: &Array<u64>,
    shape: &Array<u32>,
    out: &mut Array<u32>,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) {
    let meta = load_meta(shape);
    let active = ABSOLUTE_POS < keys.len();
    let mut k = u32::new(0);
    if active {
        k = keys[ABSOLUTE_POS];
    }
    // Every lane of the plane calls the cooperative find, active or not. `Packed` is the table's key layout
    // (32-bit pairs in one word; `table_values` is then an unused word).
    let (tk, tv) = (table_keys, table_values);
    let a = tile_find::<Bcht, Packed>(tk, tv, meta, k, active, bucket_size, tile_width, false);
    let b = tile_find::<Bcht, Packed>(tk, tv, meta, k + 1, active, bucket_size, tile_width, false);
    if active {
        let mut s = u32::new(0);
        if a.found == 1 && b.found == 1 {
            s = a.value + b.value;
        }
        out[ABSOLUTE_POS] = s;
    }
}

/// Builds a table on runtime `R`, inserts `0..n` (value = key), and runs the user kernel above on it.
fn run<R: hashtile::gpu::transfer::HostTransfer>(
    opts: hashtile::gpu::GpuOptions,
) -> hashtile::Result<bool> {
    let n = 1024u32;
    let mut t = GpuTable::<R, Bcht>::new(
        &Default::default(),
        128,
        16,
        HashFamily::new(1),
        Bcht::default_params(16),
        opts,
    )?;
    let keys: Vec<u32> = (0..n).collect();
    let (kh, vh) = (t.upload(&keys), t.upload(&keys));
    assert_eq!(t.insert_device(&kh, &vh, n as usize)?, Default::default());
    let r = t.device_ref();
    let out = t.alloc_u32(n as usize);
    // SAFETY: indices are bounded by `n` and by the table's shape.
    unsafe {
        neighbour_sum::launch_unchecked::<R>(
            t.client(),
            CubeCount::Static(n.div_ceil(256), 1, 1),
            CubeDim::new_1d(256),
            ArrayArg::from_raw_parts(kh.clone(), n as usize),
            ArrayArg::from_raw_parts(r.keys.clone(), r.slots),
            ArrayArg::from_raw_parts(r.values.clone(), r.values_len),
            ArrayArg::from_raw_parts(r.shape.clone(), hashtile::gpu::device_api::SHAPE_WORDS),
            ArrayArg::from_raw_parts(out.clone(), n as usize),
            r.bucket_size,
            r.tile_width,
        )
    };
    let got = t.read_u32(out);
    Ok((0..n).all(|k| got[k as usize] == if k + 1 < n { 2 * k + 1 } else { 0 }))
}

/// Runs on CUDA if a device answers, else on Vulkan (lavapipe counts: `scripts/install-lavapipe.sh`).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "cuda")]
    if hashtile::is_available(hashtile::Backend::Cuda) {
        let opts = hashtile::gpu::GpuOptions {
            use_cas: true,
            plain_reads: true,
        };
        return report(run::<hashtile::cubecl::cuda::CudaRuntime>(opts)?);
    }
    #[cfg(feature = "vulkan")]
    if hashtile::is_available(hashtile::Backend::Vulkan) {
        let opts = hashtile::gpu::GpuOptions {
            use_cas: true,
            plain_reads: false,
        };
        return report(run::<hashtile::cubecl::wgpu::WgpuRuntime>(opts)?);
    }
    Err("no CUDA or Vulkan device: this example needs a GPU (or lavapipe)".into())
}

fn report(ok: bool) -> Result<(), Box<dyn std::error::Error>> {
    if !ok {
        return Err("device API example: MISMATCH".into());
    }
    println!("device API example: all sums correct");
    Ok(())
}
