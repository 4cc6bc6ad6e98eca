//! Device-resident CSR rates (GPU backends only): the keys, values and queries are already on the GPU and each
//! timed region ends with a device sync, as the `rates` mode measures hash tables, so these are the kernels'
//! rates. The baseline is hashtile's BCHT inserting the same number of **unique** keys, device-resident, in the
//! same run (issue 11's aims: a unique-key CSR build at least as fast as BCHT's insert; at 32 duplicates per key
//! within 20% of it; a join within 2x of building both tables).

use super::args::CsrArgs;
use super::common::{Case, CsrRow, build_name};
use hashtile::csr::DeviceCsrParams;
use hashtile::cubecl::prelude::*;
use hashtile::gpu::csr::join::GpuJoin;
use hashtile::gpu::csr::{GpuCsr, Key32};
use hashtile::gpu::transfer::HostTransfer;
use hashtile::{Backend, HashFamily, JoinMethod};
use std::time::Instant;

/// The device-resident rows of one case (keys with `case.dups` occurrences each, one hash range): the build
/// by every method, `count` and `find_all` by every tile width, and both joins of the keys with themselves.
pub(super) fn rows(
    backend: Backend,
    a: &CsrArgs,
    case: &Case,
    bcht: f64,
    rows: &mut Vec<CsrRow>,
) -> Result<(), String> {
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => on::<hashtile::cubecl::cuda::CudaRuntime>(backend, a, case, bcht, rows),
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => on::<hashtile::cubecl::wgpu::WgpuRuntime>(backend, a, case, bcht, rows),
        b => return Err(format!("{b} is not a GPU backend")),
    }
    .map_err(|e| e.to_string())
}

/// Median rate (M keys/s of `n`) of `runs` timed calls after one warm-up; each call ends with a device sync.
fn timed<R: Runtime, T>(
    client: &ComputeClient<R>,
    runs: usize,
    n: usize,
    mut call: impl FnMut() -> hashtile::Result<T>,
) -> hashtile::Result<(f64, T)> {
    let mut rates = Vec::new();
    let mut last = None;
    for run in 0..=runs {
        hashtile::cubecl::future::block_on(client.sync())
            .map_err(|e| hashtile::Error::Device(format!("{e:?}")))?;
        let t0 = Instant::now();
        let out = call()?;
        hashtile::cubecl::future::block_on(client.sync())
            .map_err(|e| hashtile::Error::Device(format!("{e:?}")))?;
        if run > 0 {
            rates.push(n as f64 / t0.elapsed().as_secs_f64() / 1e6);
        }
        last = Some(out);
    }
    Ok((
        crate::common::median(&mut rates),
        last.expect("at least one run"),
    ))
}

fn on<R: HostTransfer>(
    backend: Backend,
    a: &CsrArgs,
    case: &Case,
    bcht: f64,
    rows: &mut Vec<CsrRow>,
) -> hashtile::Result<()> {
    let client = R::client(&Default::default());
    let n = case.keys.len();
    let family = HashFamily::new(hashtile::DEFAULT_SEED);
    let vertices = ((n as f64 * case.range).ceil() as u32).max(1);
    let kh = client.create_from_slice(u32::as_bytes(&case.keys));
    let vh = client.create_from_slice(u32::as_bytes(&case.values));
    let mut push = |op: String, build: String, tile: u32, rate: f64, ok: bool| {
        rows.push(CsrRow {
            backend,
            resident: true,
            dups: case.dups,
            range: case.range,
            op,
            build,
            tile,
            keys: n,
            rate,
            baseline: bcht,
            bus: f64::NAN,
            ok,
        })
    };
    let want_count = case.dups as u32;
    for &build in &a.builds {
        let (rate, t) = timed(&client, a.runs, n, || {
            GpuCsr::<R, Key32, u32>::build_device(&client, &family, vertices, &kh, &vh, n, build)
        })?;
        // Checked: every key's count is its number of occurrences.
        let counts = t.count(&case.keys[..n.min(1 << 16)])?;
        let ok = t.len() == n && counts.iter().all(|&c| c == want_count);
        push("build".into(), build_name(build), 0, rate, ok);
    }
    let build = a.builds[0];
    let table =
        GpuCsr::<R, Key32, u32>::build_device(&client, &family, vertices, &kh, &vh, n, build)?;
    for &tile in &a.tiles {
        let t =
            GpuCsr::<R, Key32, u32>::build_device(&client, &family, vertices, &kh, &vh, n, build)?
                .with_lookup_tile(tile)?;
        let tile = t.tile();
        let (rate, counts) = timed(&client, a.runs, n, || {
            let c = t.find_all_plan(&kh, n)?;
            Ok(c)
        })?;
        // `find_all_plan` counts and scans; its total is checked (every key finds `dups` values).
        let ok = counts.1 == n * case.dups;
        push("count+scan".into(), build_name(build), tile, rate, ok);
        let (starts, total) = counts;
        let (rate, out) = timed(&client, a.runs, n, || {
            let out = client.empty(total.max(1) * 4);
            t.gather_into(&kh, n, &starts, &out, total);
            Ok(out)
        })?;
        let got = u32::from_bytes(&client.read_one_unchecked(out))[..total]
            .iter()
            .map(|&v| v as u64)
            .sum::<u64>();
        push(
            "find_all gather".into(),
            build_name(build),
            tile,
            rate,
            got == case.value_sum_all,
        );
    }
    drop(table);
    for &tile in &a.tiles {
        let params = DeviceCsrParams {
            device: 0,
            family,
            vertices,
            build,
            lookup_tile: tile,
        };
        for (op, method) in [
            ("join probe", JoinMethod::Probe),
            ("join intersect", JoinMethod::Intersect),
        ] {
            let (rate, (j, lo, ro)) = timed(&client, a.runs, n, || {
                let j = GpuJoin::<R, Key32>::plan_device(&client, &params, &kh, n, &kh, n, method)?;
                let (lo, ro) = j.write_device();
                Ok((j, lo, ro))
            })?;
            let want = n * case.dups;
            let ok = j.len() == want && {
                // Spot check: the first pairs join equal keys.
                let k = want.min(1 << 16);
                let l = u32::from_bytes(&client.read_one_unchecked(lo))[..k].to_vec();
                let r = u32::from_bytes(&client.read_one_unchecked(ro))[..k].to_vec();
                l.iter()
                    .zip(&r)
                    .all(|(&i, &j)| case.keys[i as usize] == case.keys[j as usize])
            };
            push(op.into(), build_name(build), j.tile(), rate, ok);
        }
    }
    Ok(())
}
