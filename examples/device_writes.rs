//! Writing to a table from your own CubeCL kernels: a counting table built on the device. One kernel counts
//! the occurrences of each key of a device array (`tile_insert_or_apply` with `Add`: keys repeat across
//! threads, which double hashing settles in the table), a second drops the keys seen only once (`tile_find`,
//! then `tile_erase`), and the host checks every count against a `HashMap`. Runs on CUDA, else on Vulkan
//! (lavapipe works).

use hashtile::cubecl::prelude::*;
use hashtile::gpu::device_api::{load_meta, tile_erase, tile_get, tile_insert_or_apply};
use hashtile::gpu::transfer::HostTransfer;
use hashtile::gpu::{GpuOptions, GpuTable, Packed};
use hashtile::reduce::Add;
use hashtile::{DoubleHashing, HashFamily, ProbingScheme, SchemeInfo};
use std::collections::HashMap;

type Scheme = DoubleHashing;

/// Adds 1 to the count of each key of `keys`. Every thread calls the cooperative write, in range or not.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
fn count_keys(
    keys: &Array<u32>,
    table: &Array<Atomic<u64>>,
    table_plain: &Array<u64>,
    table_values: &mut Array<u64>,
    stash: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    shape: &Array<u32>,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
) {
    let meta = load_meta(shape);
    let active = ABSOLUTE_POS < keys.len();
    let mut k = u32::new(0);
    if active {
        k = keys[ABSOLUTE_POS];
    }
    tile_insert_or_apply::<Scheme, Packed, Add>(
        table,
        table_plain,
        table_values,
        stash,
        counters,
        meta,
        k,
        1u32,
        active,
        bucket_size,
        tile_width,
        plain_reads,
    );
}

/// Erases each key of `candidates` whose count is 1.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
fn drop_singletons(
    candidates: &Array<u32>,
    table: &Array<Atomic<u64>>,
    table_plain: &Array<u64>,
    table_values: &Array<u64>,
    counters: &Array<Atomic<u32>>,
    shape: &Array<u32>,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
) {
    let meta = load_meta(shape);
    let active = ABSOLUTE_POS < candidates.len();
    let mut k = u32::new(0);
    if active {
        k = candidates[ABSOLUTE_POS];
    }
    let seen = tile_get::<Scheme, Packed>(
        table,
        table_plain,
        table_values,
        meta,
        k,
        active,
        bucket_size,
        tile_width,
        plain_reads,
    );
    let once = active && seen.found == 1u32 && seen.value == 1u32;
    tile_erase::<Scheme, Packed>(
        table,
        table_plain,
        table_values,
        counters,
        meta,
        k,
        once,
        bucket_size,
        tile_width,
        plain_reads,
    );
}

/// Builds the table on runtime `R`, counts, drops singletons, and checks against a `HashMap`.
fn run<R: HostTransfer>(opts: GpuOptions) -> hashtile::Result<bool> {
    // 100 000 draws from 30 000 keys: most repeat, some appear once.
    let draws: Vec<u32> = (0..100_000u32)
        .map(|i| hashtile::hash::fmix32(i.wrapping_mul(2_654_435_761)) % 30_000 * 7 + 1)
        .collect();
    let mut want: HashMap<u32, u32> = HashMap::new();
    for &k in &draws {
        *want.entry(k).or_insert(0) += 1;
    }
    let bucket = 8;
    let mut t = GpuTable::<R, Scheme>::new(
        &Default::default(),
        hashtile::scheme::sequence_buckets(Scheme::SEQUENCE, 40_000 / bucket),
        bucket,
        HashFamily::new(1),
        Scheme::default_params(bucket),
        opts,
    )?;
    let w = t.device_writer();
    let r = w.table.clone();
    // Vulkan binds a buffer once per launch: the plain view is then a one-word stand-in, never read.
    let (plain, plain_len) = if w.plain_reads {
        (r.keys.clone(), r.slots)
    } else {
        (t.alloc_u32(2), 1)
    };
    let kh = t.upload(&draws);
    let n = draws.len();
    // SAFETY: indices are bounded by `n` and by the table's shape; the arrays are the writer's.
    unsafe {
        count_keys::launch_unchecked::<R>(
            t.client(),
            CubeCount::Static((n as u32).div_ceil(256), 1, 1),
            CubeDim::new_1d(256),
            ArrayArg::from_raw_parts(kh, n),
            ArrayArg::from_raw_parts(r.keys.clone(), r.slots),
            ArrayArg::from_raw_parts(plain.clone(), plain_len),
            ArrayArg::from_raw_parts(r.values.clone(), r.values_len),
            ArrayArg::from_raw_parts(w.stash.clone(), w.stash_words),
            ArrayArg::from_raw_parts(w.counters.clone(), w.counters_len),
            ArrayArg::from_raw_parts(r.shape.clone(), hashtile::gpu::device_api::SHAPE_WORDS),
            r.bucket_size,
            r.tile_width,
            w.plain_reads,
        )
    };
    let lost = t.settle()?;
    let counted = t.len() == want.len() && lost.pairs.is_empty();
    // The second kernel, on the distinct keys.
    let singles: Vec<u32> = want.iter().filter(|e| *e.1 == 1).map(|e| *e.0).collect();
    let candidates: Vec<u32> = want.keys().copied().collect();
    let w = t.device_writer();
    let ch = t.upload(&candidates);
    let m = candidates.len();
    // SAFETY: as above.
    unsafe {
        drop_singletons::launch_unchecked::<R>(
            t.client(),
            CubeCount::Static((m as u32).div_ceil(256), 1, 1),
            CubeDim::new_1d(256),
            ArrayArg::from_raw_parts(ch, m),
            ArrayArg::from_raw_parts(r.keys.clone(), r.slots),
            ArrayArg::from_raw_parts(plain, plain_len),
            ArrayArg::from_raw_parts(r.values.clone(), r.values_len),
            ArrayArg::from_raw_parts(w.counters.clone(), w.counters_len),
            ArrayArg::from_raw_parts(r.shape.clone(), hashtile::gpu::device_api::SHAPE_WORDS),
            r.bucket_size,
            r.tile_width,
            w.plain_reads,
        )
    };
    t.settle()?;
    for k in &singles {
        want.remove(k);
    }
    let keys: Vec<u32> = want
        .keys()
        .copied()
        .chain(singles.iter().copied())
        .collect();
    let got = t.find_keys(&keys)?;
    let right = keys
        .iter()
        .zip(&got)
        .all(|(k, g)| *g == want.get(k).copied());
    println!(
        "{} draws, {} distinct keys, {} seen once and dropped, {} left",
        n,
        want.len() + singles.len(),
        singles.len(),
        t.len()
    );
    Ok(counted && right && t.len() == want.len())
}

/// Runs on CUDA if a device answers, else on Vulkan (lavapipe counts: `scripts/install-lavapipe.sh`).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "cuda")]
    if hashtile::is_available(hashtile::Backend::Cuda) {
        let opts = GpuOptions {
            use_cas: true,
            plain_reads: true,
        };
        return report(run::<hashtile::cubecl::cuda::CudaRuntime>(opts)?);
    }
    #[cfg(feature = "vulkan")]
    if hashtile::is_available(hashtile::Backend::Vulkan) {
        let opts = GpuOptions {
            use_cas: true,
            plain_reads: false,
        };
        return report(run::<hashtile::cubecl::wgpu::WgpuRuntime>(opts)?);
    }
    Err("no CUDA or Vulkan device: this example needs a GPU (or lavapipe)".into())
}

fn report(ok: bool) -> Result<(), Box<dyn std::error::Error>> {
    if !ok {
        return Err("device writes example: MISMATCH".into());
    }
    println!("device writes example: every count matches the HashMap");
    Ok(())
}
