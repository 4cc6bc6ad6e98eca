//! One measurement of the `rates` mode: a table of one scheme at one load factor on one backend, built and
//! searched `--runs` times after a warm-up, every answer checked against the oracle. The `sweep` mode's rate
//! experiments measure with the same code.

use super::args::Args;
use super::shared::{Row, empty_gpu_table, gpu_options, params_for};
use crate::common::{check_excluding, check_raw, queries};
use hashtile::{Backend, BackendChoice, HashTable, ProbingScheme, SchemeInfo, TableConfig};
use indicatif::ProgressBar;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// One load factor of one scheme on the chosen backend.
#[allow(clippy::too_many_arguments)]
pub fn measure<S: SchemeInfo>(
    args: &Args,
    backend: Backend,
    load: f64,
    keys: &[u32],
    values: &[u32],
    oracle: &HashMap<u32, u32>,
    finds: &[f64],
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    match backend {
        // The CPU backend's rows beyond insert and find are the lifecycle ones, measured by the caller.
        Backend::Cpu if args.ops_only => Ok(Vec::new()),
        Backend::Cpu => run_host::<S>(args, backend, load, keys, values, oracle, finds, bar),
        Backend::Cuda | Backend::Vulkan => {
            run_gpu_backend::<S>(args, backend, load, keys, values, oracle, finds, bar)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_host<S: SchemeInfo>(
    args: &Args,
    backend: Backend,
    load: f64,
    keys: &[u32],
    values: &[u32],
    oracle: &HashMap<u32, u32>,
    finds: &[f64],
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    let n = values.len();
    let params = params_for::<S>(args)?;
    let cfg = TableConfig::for_keys(n, load)
        .bucket_size(args.cur_bucket)
        .params(params)
        .backend(BackendChoice::Exactly(backend));
    let mut ins = Vec::new();
    let mut table: Option<HashTable<S, u32, u32>> = None;
    let mut unplaced = HashSet::new();
    for run in 0..=args.runs {
        let mut t = HashTable::new(cfg.clone())?;
        let t0 = Instant::now();
        unplaced = match t.insert(&keys[..n], values) {
            Ok(()) => HashSet::new(),
            Err(hashtile::Error::BuildFailed { unplaced, .. }) => {
                unplaced.iter().map(|p| p.0 as u32).collect()
            }
            Err(e) => return Err(e),
        };
        if run > 0 {
            ins.push(n as f64 / t0.elapsed().as_secs_f64() / 1e6);
        }
        bar.inc(1);
        table = Some(t);
    }
    let t =
        table.ok_or_else(|| hashtile::Error::InvalidConfig("--runs must be at least 1".into()))?;
    let all = t.find(&keys[..n])?;
    let mut rows = vec![Row {
        scheme: args.cur_scheme.clone(),
        bucket: args.cur_bucket,
        backend,
        load,
        op: "insert",
        present: 1.0,
        rates: ins,
        checked: check_excluding(oracle, &unplaced, &keys[..n], &all)
            && t.len() + unplaced.len() == n,
        unplaced: unplaced.len(),
    }];
    for &p in finds {
        let q = queries(keys, n, p);
        let mut rates = Vec::new();
        let mut got = Vec::new();
        for run in 0..=args.runs {
            let t0 = Instant::now();
            got = t.find(&q)?;
            if run > 0 {
                rates.push(q.len() as f64 / t0.elapsed().as_secs_f64() / 1e6);
            }
            bar.inc(1);
        }
        rows.push(Row {
            scheme: args.cur_scheme.clone(),
            bucket: args.cur_bucket,
            backend,
            load,
            op: "find",
            present: p,
            rates,
            checked: check_excluding(oracle, &unplaced, &q, &got),
            unplaced: unplaced.len(),
        });
    }
    Ok(rows)
}

/// One load factor of one scheme on a GPU backend, with that backend's options (or `--claim` / `--reads`).
#[allow(clippy::too_many_arguments)]
fn run_gpu_backend<S: SchemeInfo>(
    args: &Args,
    backend: Backend,
    load: f64,
    keys: &[u32],
    values: &[u32],
    oracle: &HashMap<u32, u32>,
    finds: &[f64],
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    let opts = gpu_options(args, backend == Backend::Cuda);
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => run_gpu::<hashtile::cubecl::cuda::CudaRuntime, S>(
            args, backend, opts, load, keys, values, oracle, finds, bar,
        ),
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => run_gpu::<hashtile::cubecl::wgpu::WgpuRuntime, S>(
            args, backend, opts, load, keys, values, oracle, finds, bar,
        ),
        other => Err(hashtile::Error::InvalidConfig(format!(
            "backend {other} is not a GPU backend compiled into this binary"
        ))),
    }
}

#[allow(clippy::too_many_arguments)]
fn run_gpu<R: hashtile::gpu::transfer::HostTransfer, S: ProbingScheme + SchemeInfo>(
    args: &Args,
    backend: Backend,
    opts: hashtile::gpu::GpuOptions,
    load: f64,
    keys: &[u32],
    values: &[u32],
    oracle: &HashMap<u32, u32>,
    finds: &[f64],
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    if args.ops_only {
        return super::ops::op_rows::<R, S>(args, backend, opts, load, keys, values, bar);
    }
    let n = values.len();
    let mut ins = Vec::new();
    let mut ins_kernel = Vec::new();
    let mut unplaced = HashSet::new();
    let mut untracked = 0;
    // One table per load factor, cleared between runs (allocation stays out of the timed region).
    let (mut t, family) = empty_gpu_table::<R, S, hashtile::gpu::Packed>(args, opts, n, load)?;
    let (kh, vh) = (t.upload(&keys[..n]), t.upload(values));
    warm_clock(args.warm_ms, || {
        t.reset(family)?;
        t.insert_device_async(&kh, &vh, n);
        t.sync()?;
        t.settle().map(|_| ())
    })?;
    for run in 0..=args.runs {
        t.reset(family)?;
        t.sync()?;
        let t0 = Instant::now();
        t.insert_device_async(&kh, &vh, n);
        t.sync()?;
        let dt_kernel = t0.elapsed().as_secs_f64();
        let lost = t.settle()?;
        let dt = t0.elapsed().as_secs_f64();
        // A build failure: keep the last run's unplaced keys; they must read as absent.
        unplaced = lost.pairs.iter().map(|p| p.0 as u32).collect();
        untracked += lost.untracked;
        if run > 0 {
            ins.push(n as f64 / dt / 1e6);
            ins_kernel.push(n as f64 / dt_kernel / 1e6);
        }
        bar.inc(1);
    }
    // Check the build through the device-resident keys (no host-side copies of 2^26 keys).
    let all = t.alloc_u32(n);
    t.find_device(&kh, &all, None, n);
    let insert_ok = untracked == 0
        && t.len() + unplaced.len() == n
        && check_raw(oracle, &unplaced, &keys[..n], &t.read_u32(all));
    if !insert_ok {
        eprintln!(
            "insert check failed: len {} + unplaced {} of {n}, untracked {untracked}",
            t.len(),
            unplaced.len()
        );
    }
    let mut rows = vec![
        Row {
            scheme: args.cur_scheme.clone(),
            bucket: args.cur_bucket,
            backend,
            load,
            op: "insert",
            present: 1.0,
            rates: ins,
            checked: insert_ok,
            unplaced: unplaced.len(),
        },
        // The kernel alone: queued with insert_device_async, timed to the device sync, before settle().
        Row {
            scheme: args.cur_scheme.clone(),
            bucket: args.cur_bucket,
            backend,
            load,
            op: "insert-async",
            present: 1.0,
            rates: ins_kernel,
            checked: insert_ok,
            unplaced: unplaced.len(),
        },
    ];
    for &p in finds {
        let q = queries(keys, n, p);
        let qh = t.upload(&q);
        let out = t.alloc_u32(q.len());
        let mut rates = Vec::new();
        warm_clock(args.warm_ms, || {
            t.find_device(&qh, &out, None, q.len());
            t.sync()
        })?;
        for run in 0..=args.runs {
            t.sync()?;
            let t0 = Instant::now();
            t.find_device(&qh, &out, None, q.len());
            t.sync()?;
            if run > 0 {
                rates.push(q.len() as f64 / t0.elapsed().as_secs_f64() / 1e6);
            }
            bar.inc(1);
        }
        let got = t.read_u32(out);
        rows.push(Row {
            scheme: args.cur_scheme.clone(),
            bucket: args.cur_bucket,
            backend,
            load,
            op: "find",
            present: p,
            rates,
            checked: check_raw(oracle, &unplaced, &q, &got),
            unplaced: unplaced.len(),
        });
    }
    rows.extend(super::ops::op_rows::<R, S>(
        args, backend, opts, load, keys, values, bar,
    )?);
    Ok(rows)
}

/// Repeats `op` (untimed) until `ms` milliseconds have passed, at least once when `ms > 0`: the GPU's clock
/// rises with sustained work, so the timed runs after it see the clock an application's sustained calls get
/// (`--warm-ms`).
fn warm_clock(ms: u64, mut op: impl FnMut() -> hashtile::Result<()>) -> hashtile::Result<()> {
    let t0 = Instant::now();
    while ms > 0 && t0.elapsed().as_millis() < ms as u128 {
        op()?;
    }
    Ok(())
}
