//! `--wide`: rates of 64-bit keys with 64-bit values. The rates mode's 32-bit keys are widened by a fixed
//! bijection (the high word is derived from the low one), so the 32-bit oracle answers for the wide keys too.
//! On GPUs the table keeps keys and values in parallel arrays (`hashtile::gpu::wide`), which only the stable
//! schemes (IHT, P2BHT) support; on the CPU every scheme runs.

use super::args::Args;
use super::shared::{Row, empty_gpu_table, gpu_options, params_for};
use crate::common::queries;
use hashtile::gpu::Wide;
use hashtile::hash::fmix32;
use hashtile::{Backend, BackendChoice, Error, HashTable, SchemeInfo, TableConfig};
use indicatif::ProgressBar;
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// The 64-bit key of a 32-bit key (never all ones: the high word has its top bit clear).
pub fn widen_key(k: u32) -> u64 {
    (((fmix32(k ^ 0x5151_5151) & 0x7fff_ffff) as u64) << 32) | k as u64
}

/// The 64-bit value of a 32-bit value.
pub fn widen_value(v: u32) -> u64 {
    ((v as u64) << 32) | v.rotate_left(13) as u64
}

/// Every answer matches the (32-bit) oracle; keys the build could not place must be absent.
fn check_wide(
    oracle: &HashMap<u32, u32>,
    unplaced: &HashSet<u64>,
    q: &[u64],
    got: &[Option<u64>],
) -> bool {
    q.par_iter().zip(got.par_iter()).all(|(&k, g)| {
        let stored = widen_key(k as u32) == k && !unplaced.contains(&k);
        let want = oracle
            .get(&(k as u32))
            .filter(|_| stored)
            .map(|&v| widen_value(v));
        want == *g
    })
}

/// One load factor of one scheme with wide pairs on `backend` (the `--wide` counterpart of `measure`).
#[allow(clippy::too_many_arguments)]
pub fn measure_wide<S: SchemeInfo>(
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
    let wkeys: Vec<u64> = keys.par_iter().map(|&k| widen_key(k)).collect();
    let wvalues: Vec<u64> = values.par_iter().map(|&v| widen_value(v)).collect();
    let params = params_for::<S>(args)?;
    let cfg = TableConfig::for_keys(n, load)
        .bucket_size(args.cur_bucket)
        .params(params)
        .backend(BackendChoice::Exactly(backend));
    let row = |op, present, rates, checked, unplaced| Row {
        scheme: args.cur_scheme.clone(),
        bucket: args.cur_bucket,
        backend,
        load,
        op,
        present,
        rates,
        checked,
        unplaced,
    };
    if backend == Backend::Cpu {
        // The host API, as in the 32-bit CPU path: a fresh table per timed run.
        let mut ins = Vec::new();
        let mut table = None;
        let mut unplaced = HashSet::new();
        for run in 0..=args.runs {
            let mut t: HashTable<S, u64, u64> = HashTable::new(cfg.clone())?;
            let t0 = Instant::now();
            unplaced = match t.insert(&wkeys[..n], &wvalues) {
                Ok(()) => HashSet::new(),
                Err(Error::BuildFailed { unplaced, .. }) => unplaced.iter().map(|p| p.0).collect(),
                Err(e) => return Err(e),
            };
            if run > 0 {
                ins.push(n as f64 / t0.elapsed().as_secs_f64() / 1e6);
            }
            bar.inc(1);
            table = Some(t);
        }
        let t = table.ok_or_else(|| Error::InvalidConfig("--runs must be at least 1".into()))?;
        let all = t.find(&wkeys[..n])?;
        let ok = check_wide(oracle, &unplaced, &wkeys[..n], &all) && t.len() + unplaced.len() == n;
        let mut rows = vec![row("insert", 1.0, ins, ok, unplaced.len())];
        for &p in finds {
            let q = queries(&wkeys, n, p);
            let (mut rates, mut got) = (Vec::new(), Vec::new());
            for run in 0..=args.runs {
                let t0 = Instant::now();
                got = t.find(&q)?;
                if run > 0 {
                    rates.push(q.len() as f64 / t0.elapsed().as_secs_f64() / 1e6);
                }
                bar.inc(1);
            }
            rows.push(row(
                "find",
                p,
                rates,
                check_wide(oracle, &unplaced, &q, &got),
                unplaced.len(),
            ));
        }
        return Ok(rows);
    }
    // GPUs: refuse what HashTable refuses (cuckoo schemes with wide pairs), with its message.
    if !S::STABLE {
        HashTable::<S, u64, u64>::new(cfg)?;
        return Err(Error::InvalidConfig(format!(
            "{} moves pairs (cuckoo eviction): 64-bit pairs run on the CPU backend only",
            S::NAME
        )));
    }
    let opts = gpu_options(args, backend == Backend::Cuda);
    macro_rules! on_runtime {
        ($r:ty) => {
            run_gpu_wide::<$r, S>(args, &wkeys, &wvalues, oracle, finds, bar, load, opts)
        };
    }
    let (ins, insert_ok, unplaced, find_rows) = match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => on_runtime!(hashtile::cubecl::cuda::CudaRuntime)?,
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => on_runtime!(hashtile::cubecl::wgpu::WgpuRuntime)?,
        other => {
            return Err(Error::InvalidConfig(format!(
                "backend {other} is not a GPU backend compiled into this binary"
            )));
        }
    };
    let mut rows = vec![row("insert", 1.0, ins, insert_ok, unplaced)];
    rows.extend(
        find_rows
            .into_iter()
            .map(|(p, rates, ok)| row("find", p, rates, ok, unplaced)),
    );
    Ok(rows)
}

/// Insert rates, the insert check, unplaced pairs, and `(present, rates, check)` per find mix.
type GpuWideRates = (Vec<f64>, bool, usize, Vec<(f64, Vec<f64>, bool)>);

/// Device-resident keys and queries; each timed region ends with a device sync (inserts: with the counter
/// read-back), as in the 32-bit GPU path.
#[allow(clippy::too_many_arguments)]
fn run_gpu_wide<R: hashtile::gpu::transfer::HostTransfer, S: SchemeInfo>(
    args: &Args,
    wkeys: &[u64],
    wvalues: &[u64],
    oracle: &HashMap<u32, u32>,
    finds: &[f64],
    bar: &ProgressBar,
    load: f64,
    opts: hashtile::gpu::GpuOptions,
) -> hashtile::Result<GpuWideRates> {
    let n = wvalues.len();
    let (mut t, family) = empty_gpu_table::<R, S, Wide>(args, opts, n, load)?;
    let (kh, vh) = (t.upload(&wkeys[..n]), t.upload(wvalues));
    let mut ins = Vec::new();
    let mut unplaced = HashSet::new();
    let mut untracked = 0;
    for run in 0..=args.runs {
        t.reset(family)?;
        t.sync()?;
        let t0 = Instant::now();
        let lost = t.insert_device_distinct(&kh, &vh, n)?;
        let dt = t0.elapsed().as_secs_f64();
        unplaced = lost.pairs.iter().map(|p| p.0).collect();
        untracked += lost.untracked;
        if run > 0 {
            ins.push(n as f64 / dt / 1e6);
        }
        bar.inc(1);
    }
    let all = t.find_keys(&wkeys[..n])?;
    let insert_ok = untracked == 0
        && t.len() + unplaced.len() == n
        && check_wide(oracle, &unplaced, &wkeys[..n], &all);
    let mut find_rows = Vec::new();
    for &p in finds {
        let q = queries(wkeys, n, p);
        let qh = t.upload(&q);
        let (out, found) = (t.alloc_u64(q.len()), t.alloc_u32(q.len()));
        let mut rates = Vec::new();
        for run in 0..=args.runs {
            t.sync()?;
            let t0 = Instant::now();
            t.find_device(&qh, &out, Some(&found), q.len());
            t.sync()?;
            if run > 0 {
                rates.push(q.len() as f64 / t0.elapsed().as_secs_f64() / 1e6);
            }
            bar.inc(1);
        }
        let (vals, hit) = (t.read_u64(out), t.read_u32(found));
        let got: Vec<Option<u64>> = vals
            .into_iter()
            .zip(hit)
            .map(|(v, h)| (h == 1).then_some(v))
            .collect();
        find_rows.push((p, rates, check_wide(oracle, &unplaced, &q, &got)));
    }
    Ok((ins, insert_ok, unplaced.len(), find_rows))
}
