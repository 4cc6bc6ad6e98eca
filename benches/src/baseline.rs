//! The BCHT baseline that device-resident measurements set their rates against (`csr`'s device rows and
//! `chained`'s `bulk`): hashtile's BCHT inserting unique keys on the device, in the same run.

use hashtile::gpu::transfer::HostTransfer;
use hashtile::gpu::{GpuOptions, GpuTable};
use hashtile::{Backend, Bcht, HashFamily, SchemeInfo, TableConfig};
use std::time::Instant;

/// BCHT's device-resident insert of `keys` (unique) at load 0.8, bucket 8 (CUDA's default), with the upsert
/// check (as `HashTable` inserts) and without it (the paper's bulk build): M keys/s each, checked by a find of
/// every key.
pub fn bcht_baseline(backend: Backend, keys: &[u32], runs: usize) -> Result<[f64; 2], String> {
    fn on<R: HostTransfer>(keys: &[u32], runs: usize, cuda: bool) -> hashtile::Result<[f64; 2]> {
        let n = keys.len();
        let cfg = TableConfig::for_keys(n, 0.8).bucket_size(8);
        let nb = cfg.capacity.div_ceil(8) as u32;
        let family = HashFamily::new(cfg.seed);
        let opts = GpuOptions {
            use_cas: true,
            plain_reads: cuda,
        };
        let mut out = [0.0; 2];
        for (i, upsert) in [true, false].into_iter().enumerate() {
            let mut params = Bcht::default_params(8);
            if !upsert {
                params.upsert = 0;
            }
            let mut t = GpuTable::<R, Bcht>::new(&Default::default(), nb, 8, family, params, opts)?;
            let kh = t.upload(keys);
            let mut rates = Vec::new();
            for run in 0..=runs {
                t.reset(family)?;
                t.sync()?;
                let t0 = Instant::now();
                t.insert_device_async(&kh, &kh, n);
                t.sync()?;
                let dt = t0.elapsed().as_secs_f64();
                let lost = t.settle()?;
                if !lost.pairs.is_empty() || lost.untracked > 0 || t.len() != n {
                    return Err(hashtile::Error::Device(format!(
                        "BCHT baseline build lost pairs (len {} of {n})",
                        t.len()
                    )));
                }
                if run > 0 {
                    rates.push(n as f64 / dt / 1e6);
                }
            }
            let found = t.alloc_u32(n);
            t.find_device(&kh, &found, None, n);
            if t.read_u32(found) != keys {
                return Err(hashtile::Error::Device(
                    "BCHT baseline find mismatch".into(),
                ));
            }
            out[i] = crate::common::median(&mut rates);
        }
        Ok(out)
    }
    let r = match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => on::<hashtile::cubecl::cuda::CudaRuntime>(keys, runs, true),
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => on::<hashtile::cubecl::wgpu::WgpuRuntime>(keys, runs, false),
        b => return Err(format!("{b} is not a GPU backend")),
    };
    r.map_err(|e| e.to_string())
}
