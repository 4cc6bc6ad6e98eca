//! `hashtile-bench`: insert and find rates (M keys/s) of a table on any backend, every result checked against
//! a `std::collections::HashMap` oracle in the same run, written as CSV.
//!
//! Timing: one warm-up run (JIT compilation, allocation), then `--runs` timed runs; each rate is the median.
//! On GPUs the keys, values and outputs are device-resident and each timed region ends with a device sync,
//! so rates are device rates (launch included, host transfers excluded).
//!
//! Subcommands: `rates` (the above; also what runs when no subcommand is given) and `sweep` (the BGHT paper's
//! experiments over every scheme: rates vs load factor and vs N, probes, build success rate; see `sweep.rs`).

mod plot;
mod sweep;
mod wide;

use clap::{Parser, Subcommand};
use hashtile::gpu::GpuTable;
use hashtile::hash::fmix32;
use hashtile::{
    Backend, BackendChoice, Bcht, Cht1, HashTable, Iht, P2bht, ProbingScheme, SchemeInfo,
    TableConfig,
};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Instant;

/// The command line: a subcommand, or the `rates` options alone (the original flat invocation).
#[derive(Parser, Debug)]
#[command(
    version,
    about = "Insert / find rates of hashtile tables, checked against a HashMap oracle",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// What to run; without one, the `rates` options below apply.
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Options of the default (`rates`) mode.
    #[command(flatten)]
    rates: Args,
}

/// Subcommands of `hashtile-bench`.
#[derive(Subcommand, Debug)]
enum Cmd {
    /// Insert / find rates per load factor, checked against a HashMap oracle (the default mode).
    Rates(Args),
    /// The BGHT paper's experiments for every scheme: rates vs load factor and vs N, average probes, build
    /// success rate over seeds; CSV, SVG plots and summary.md.
    Sweep(sweep::SweepArgs),
}

/// Options of the `rates` mode.
#[derive(clap::Args, Debug, Clone)]
struct Args {
    /// Backend: auto, cpu, cuda or vulkan.
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
    /// Number of keys, as a power of two.
    #[arg(long, default_value_t = 20)]
    log2_keys: u32,
    /// Load factors to run (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "0.8,0.9")]
    load: Vec<f64>,
    /// Probing scheme: bcht, iht, p2bht or 1cht (1CHT needs --bucket 1).
    #[arg(long, value_delimiter = ',', default_value = "bcht")]
    scheme: Vec<String>,
    /// Bucket size (slots per bucket).
    #[arg(long, value_delimiter = ',', default_value = "16")]
    bucket: Vec<u32>,
    /// Timed runs per measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seed of the key generator.
    #[arg(long, default_value_t = 1)]
    seed: u32,
    /// GPU claim path: `cas` (the default) or `exchange` (claim by exchange and re-insert what was displaced).
    #[arg(long)]
    claim: Option<String>,
    /// GPU insert bucket reads: `plain` (default on CUDA) or `atomic` (the Vulkan path: wgpu cannot bind the
    /// table twice in one launch).
    #[arg(long)]
    reads: Option<String>,
    /// Skip the duplicate check on insert (the caller promises new, distinct keys: the paper's bulk build).
    #[arg(long)]
    no_upsert: bool,
    /// Longest cuckoo eviction chain (BCHT, 1CHT) [default: the scheme's, 100].
    #[arg(long)]
    max_chain: Option<u32>,
    /// Number of hash functions [default: the scheme's: BCHT 3, IHT 3, P2BHT 2, 1CHT 4].
    #[arg(long)]
    num_hashes: Option<u32>,
    /// 64-bit keys with 64-bit values (GPUs: keys and values in parallel arrays, stable schemes IHT / P2BHT
    /// only; the CPU backend runs every scheme).
    #[arg(long)]
    wide: bool,
    /// The scheme being measured (set per iteration, not a flag).
    #[arg(skip)]
    cur_scheme: String,
    /// The bucket size being measured (set per iteration, not a flag).
    #[arg(skip)]
    cur_bucket: u32,
    /// CSV output file.
    #[arg(long, default_value = "hashtile-bench.csv")]
    csv: String,
}

/// One result row.
struct Row {
    scheme: String,
    bucket: u32,
    backend: Backend,
    load: f64,
    op: &'static str,
    present: f64,
    rates: Vec<f64>,
    checked: bool,
    /// Pairs the build could not place (a build failure, reported; not a wrong answer).
    unplaced: usize,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// `2n` distinct keys, none the sentinel: a bijective mix of a counter.
fn distinct_keys(n: usize, seed: u32) -> Vec<u32> {
    (0u32..)
        .map(|i| fmix32(i ^ fmix32(seed)))
        .filter(|&k| k != u32::MAX)
        .take(2 * n)
        .collect()
}

/// Scheme `S`'s parameters for bucket size `bucket` with the command line's knobs applied and validated.
fn scheme_params<S: SchemeInfo>(
    bucket: u32,
    no_upsert: bool,
    max_chain: Option<u32>,
    num_hashes: Option<u32>,
) -> hashtile::Result<hashtile::SchemeParams> {
    let mut p = S::default_params(bucket);
    if no_upsert {
        p.upsert = 0;
    }
    if let Some(c) = max_chain {
        p.max_chain = c;
    }
    if let Some(h) = num_hashes {
        p.num_hashes = h;
    }
    S::validate(bucket, &p).map_err(hashtile::Error::InvalidConfig)?;
    Ok(p)
}

/// [`scheme_params`] for the `rates` mode's current bucket size.
fn params_for<S: SchemeInfo>(args: &Args) -> hashtile::Result<hashtile::SchemeParams> {
    scheme_params::<S>(
        args.cur_bucket,
        args.no_upsert,
        args.max_chain,
        args.num_hashes,
    )
}

/// Queries of which a fraction `present` are inserted keys.
fn queries<K: Copy>(keys: &[K], n: usize, present: f64) -> Vec<K> {
    let hits = (n as f64 * present).round() as usize;
    keys[..hits]
        .iter()
        .chain(&keys[n..2 * n - hits])
        .copied()
        .collect()
}

/// Every raw device answer matches the oracle: the stored value for a stored key, `u32::MAX` (the absent marker)
/// otherwise; keys the build could not place (`unplaced`) must read as absent. One parallel pass over the
/// answers: at 2^26 keys, HashMap lookups dominate the host's share of a measurement, so each answer costs one
/// lookup (a serial pass turning raw answers into `Option`s first took ~7 s per find mix on the H100's host).
fn check_raw(oracle: &HashMap<u32, u32>, unplaced: &HashSet<u32>, q: &[u32], raw: &[u32]) -> bool {
    use rayon::prelude::*;
    q.len() == raw.len()
        && q.par_iter().zip(raw.par_iter()).all(|(k, &v)| {
            // A stored value of all ones reads the same as absent; it is still the right answer.
            v == expected(oracle, unplaced, k).unwrap_or(u32::MAX)
        })
}

/// The right answer for query `k`: its oracle value, or absent for keys the build could not place.
fn expected(oracle: &HashMap<u32, u32>, unplaced: &HashSet<u32>, k: &u32) -> Option<u32> {
    if unplaced.contains(k) {
        None
    } else {
        oracle.get(k).copied()
    }
}

/// Every answer matches the oracle.
fn check(oracle: &HashMap<u32, u32>, q: &[u32], got: &[Option<u32>]) -> bool {
    check_excluding(oracle, &HashSet::new(), q, got)
}

/// Every answer matches the oracle, except that keys the build could not place (`unplaced`) must be absent.
fn check_excluding(
    oracle: &HashMap<u32, u32>,
    unplaced: &HashSet<u32>,
    q: &[u32],
    got: &[Option<u32>],
) -> bool {
    // In parallel: at 2^26 keys a serial check took longer than the measurements it checks.
    use rayon::prelude::*;
    q.par_iter()
        .zip(got.par_iter())
        .all(|(k, g)| expected(oracle, unplaced, k) == *g)
}

fn main() {
    let cli = Cli::parse();
    match cli.cmd {
        Some(Cmd::Sweep(a)) => std::process::exit(sweep::run(a)),
        Some(Cmd::Rates(args)) => rates(args),
        None => rates(cli.rates),
    }
}

/// The `rates` mode.
fn rates(args: Args) {
    let backend = hashtile::resolve(args.backend);
    let n = 1usize << args.log2_keys;
    println!(
        "hashtile-bench: backend {backend} (asked: {:?}), {n} keys (2^{}), schemes {:?}, B = {:?}, loads {:?}, {} runs, claim {:?}, reads {:?}, upsert {}, pairs {} bits",
        args.backend,
        args.log2_keys,
        args.scheme,
        args.bucket,
        args.load,
        args.runs,
        args.claim,
        args.reads,
        !args.no_upsert,
        if args.wide { 128 } else { 64 }
    );
    let keys = distinct_keys(n, args.seed);
    let values: Vec<u32> = keys[..n]
        .iter()
        .map(|k| k.wrapping_mul(2_654_435_761) ^ 0x5bd1_e995)
        .collect();
    let oracle: HashMap<u32, u32> = keys[..n]
        .iter()
        .copied()
        .zip(values.iter().copied())
        .collect();
    let finds = [1.0, 0.5, 0.0];
    let total = args.load.len() as u64 * (1 + finds.len() as u64) * (args.runs as u64 + 1);
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .expect("template"),
    );
    let mut rows = Vec::new();
    // Every (scheme, bucket size) pair asked for; 1CHT only has one-slot buckets.
    let mut instances = Vec::new();
    for s in &args.scheme {
        if s == "1cht" {
            instances.push((s.clone(), 1));
        } else {
            instances.extend(args.bucket.iter().map(|&b| (s.clone(), b)));
        }
    }
    bar.set_length(total * instances.len() as u64);
    for (scheme, bucket) in instances {
        let mut args = args.clone();
        args.cur_scheme = scheme;
        args.cur_bucket = bucket;
        for &load in &args.load {
            bar.set_message(format!(
                "{} B={} load {load}",
                args.cur_scheme, args.cur_bucket
            ));
            macro_rules! measure_as {
                ($s:ty) => {
                    if args.wide {
                        wide::measure_wide::<$s>(
                            &args, backend, load, &keys, &values, &oracle, &finds, &bar,
                        )
                    } else {
                        measure::<$s>(&args, backend, load, &keys, &values, &oracle, &finds, &bar)
                    }
                };
            }
            let r = match args.cur_scheme.as_str() {
                "bcht" => measure_as!(Bcht),
                "iht" => measure_as!(Iht),
                "p2bht" => measure_as!(P2bht),
                "1cht" => measure_as!(Cht1),
                other => Err(hashtile::Error::InvalidConfig(format!(
                    "unknown scheme '{other}' (expected bcht, iht, p2bht or 1cht)"
                ))),
            };
            match r {
                Ok(mut r) => rows.append(&mut r),
                Err(e) => {
                    bar.finish_and_clear();
                    eprintln!("error at load {load}: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
    bar.finish_and_clear();
    let mut f = std::fs::File::create(&args.csv).expect("create csv");
    writeln!(f, "backend,scheme,bucket,keys,load,op,present,median_mkeys_s,min_mkeys_s,max_mkeys_s,runs,checked,unplaced,pair_bits")
        .unwrap();
    println!(
        "\n| scheme | B | load | op | present | median M keys/s | min | max | checked |\n|---|---|---|---|---|---|---|---|---|"
    );
    let mut all_ok = true;
    for mut r in rows {
        let (lo, hi) = (
            r.rates.iter().cloned().fold(f64::MAX, f64::min),
            r.rates.iter().cloned().fold(0.0, f64::max),
        );
        let m = median(&mut r.rates);
        all_ok &= r.checked;
        writeln!(
            f,
            "{},{},{},{},{},{},{},{m:.1},{lo:.1},{hi:.1},{},{},{},{}",
            r.backend,
            r.scheme,
            r.bucket,
            n,
            r.load,
            r.op,
            r.present,
            r.rates.len(),
            r.checked,
            r.unplaced,
            if args.wide { 128 } else { 64 }
        )
        .unwrap();
        println!(
            "| {} | {} | {} | {} | {:.0}% | {m:.1} | {lo:.1} | {hi:.1} | {} |",
            r.scheme,
            r.bucket,
            r.load,
            r.op,
            r.present * 100.0,
            match (r.checked, r.unplaced) {
                (false, _) => "MISMATCH".to_string(),
                (true, 0) => "ok".to_string(),
                (true, u) => format!("ok; build failed: {u} pairs unplaced"),
            }
        );
    }
    println!("\nCSV written to {}", args.csv);
    if !all_ok {
        eprintln!("some results did not match the oracle");
        std::process::exit(2);
    }
}

/// One load factor of one scheme on the chosen backend.
#[allow(clippy::too_many_arguments)]
fn measure<S: SchemeInfo>(
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
    let t = table.expect("at least one run");
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

/// The backend's default GPU options, overridden by `--claim` / `--reads`.
fn gpu_options(args: &Args, cuda: bool) -> hashtile::gpu::GpuOptions {
    hashtile::gpu::GpuOptions {
        use_cas: args.claim.as_deref().is_none_or(|c| c == "cas"),
        plain_reads: args.reads.as_deref().map_or(cuda, |r| r == "plain"),
    }
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
fn run_gpu<R: hashtile::cubecl::Runtime, S: ProbingScheme + SchemeInfo>(
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
    use hashtile::Engine;
    let n = values.len();
    let cfg = TableConfig::for_keys(n, load).bucket_size(args.cur_bucket);
    let nb = cfg.capacity.div_ceil(args.cur_bucket as usize) as u32;
    let family = hashtile::HashFamily::new(cfg.seed);
    let params = params_for::<S>(args)?;
    let device = Default::default();
    let mut ins = Vec::new();
    let mut ins_kernel = Vec::new();
    let mut unplaced = HashSet::new();
    let mut untracked = 0;
    // One table per load factor, cleared between runs (allocation stays out of the timed region).
    let mut t = GpuTable::<R, S>::new(&device, nb, args.cur_bucket, family, params, opts)?;
    let (kh, vh) = (t.upload(&keys[..n]), t.upload(values));
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
    t.find_device(&kh, &all, None, n, u32::MAX);
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
        for run in 0..=args.runs {
            t.sync()?;
            let t0 = Instant::now();
            t.find_device(&qh, &out, None, q.len(), u32::MAX);
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
    Ok(rows)
}
