//! `hashtile-bench`: insert and find rates (M keys/s) of a table on any backend, every result checked against
//! a `std::collections::HashMap` oracle in the same run, written as CSV.
//!
//! Timing: one warm-up run (JIT compilation, allocation), then `--runs` timed runs; each rate is the median.
//! On GPUs the keys, values and outputs are device-resident and each timed region ends with a device sync,
//! so rates are device rates (launch included, host transfers excluded).
//!
//! Subcommands: `rates` (the above; also what runs when no subcommand is given), `sweep` (the BGHT paper's
//! experiments over every scheme: rates vs load factor and vs N, probes, build success rate; see `sweep/`)
//! `host` (the user-facing calls on host data, `Vec`s and pinned buffers, against the bus or `HashMap`
//! measured in the same run; see `host.rs`), `csr` (CSR tables: build, count, find_all, joins; `csr/`) and
//! `scan` (the device prefix sum against a device copy; `scan.rs`), `chained` (issue 10's experiments on the
//! chained (SlabHash) tables: bulk build and finds vs memory utilisation, incremental batches against
//! rebuilding BCHT, operation mixes, the slab allocator, the host calls against the CPU store, beside the
//! original SlabHash's results where given; one file per experiment in `chained/`).

mod baseline;
mod chained;
mod checks;
mod cli;
mod common;
mod csr;
mod error;
mod footprint;
mod host;
mod paged;
mod plot;
mod scan;
mod sweep;
mod wide;

use cli::{Args, Cmd};
use common::{check_excluding, check_raw, distinct_keys, median, queries, scheme_params};
use error::BenchError;
use hashtile::gpu::GpuTable;
use hashtile::{
    Backend, BackendChoice, Bcht, Cht1, HashTable, Iht, P2bht, ProbingScheme, SchemeInfo,
    TableConfig,
};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Instant;

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

/// [`scheme_params`] for the `rates` mode's current bucket size.
fn params_for<S: SchemeInfo>(args: &Args) -> hashtile::Result<hashtile::SchemeParams> {
    scheme_params::<S>(
        args.cur_bucket,
        args.no_upsert,
        args.max_chain,
        args.num_hashes,
    )
}

/// The one exit path: a bad command line prints `error: ...` and exits with status 2 (before anything is
/// measured), a failed run `error: ...` and status 1; otherwise the mode's status (2: a result did not match
/// the oracle).
fn main() {
    let status = match run() {
        Ok(status) => status,
        Err(e) => {
            eprintln!("error: {e}");
            e.status()
        }
    };
    std::process::exit(status);
}

/// Parses and checks the command line, then runs the mode it asks for; returns the exit status.
fn run() -> Result<i32, BenchError> {
    let cli = cli::parse()?;
    match cli.cmd {
        Some(Cmd::Sweep(a)) => sweep::run(sweep::Setup::new(a)?),
        Some(Cmd::Rates(args)) => rates(cli::rates(args)?),
        Some(Cmd::Host(args)) => host::run(&cli::host(args)?).map_err(BenchError::Run),
        Some(Cmd::Csr(args)) => csr::run(&cli::csr(args)?).map_err(BenchError::Run),
        Some(Cmd::Scan(args)) => scan::run(&cli::scan(args)?).map_err(BenchError::Run),
        Some(Cmd::Chained(args)) => chained::run(&cli::chained(args)?).map_err(BenchError::Run),
        Some(Cmd::Paged(args)) => paged::run(&cli::paged(args)?).map_err(BenchError::Run),
        None => rates(cli::rates(cli.rates)?),
    }
}

/// The `rates` mode, on a command line [`cli::rates`] has checked.
fn rates(checked: cli::Rates) -> Result<i32, BenchError> {
    let cli::Rates {
        args,
        backend,
        instances,
    } = checked;
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
    let bar = ProgressBar::new(total * instances.len() as u64).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .expect("template"),
    );
    let mut rows = Vec::new();
    for (scheme, bucket) in instances {
        let mut args = args.clone();
        args.cur_scheme = scheme.to_string();
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
                    return Err(BenchError::Run(format!(
                        "{} B={} at load {load}: {e}",
                        args.cur_scheme, args.cur_bucket
                    )));
                }
            }
        }
    }
    bar.finish_and_clear();
    let (table, all_ok) = write_csv(&args, n, rows)
        .map_err(|e| BenchError::Run(format!("writing {}: {e}", args.csv)))?;
    println!(
        "\n| scheme | B | load | op | present | median M keys/s | min | max | checked |\n|---|---|---|---|---|---|---|---|---|"
    );
    print!("{table}");
    println!("\nCSV written to {}", args.csv);
    if !all_ok {
        eprintln!("some results did not match the oracle");
        return Ok(2);
    }
    Ok(0)
}

/// Writes the rows to `--csv`; returns the markdown table rows and whether every result matched the oracle.
fn write_csv(args: &Args, n: usize, rows: Vec<Row>) -> std::io::Result<(String, bool)> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(&args.csv)?);
    writeln!(
        f,
        "backend,scheme,bucket,keys,load,op,present,median_mkeys_s,min_mkeys_s,max_mkeys_s,runs,checked,unplaced,pair_bits"
    )?;
    let mut table = String::new();
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
        )?;
        table.push_str(&format!(
            "| {} | {} | {} | {} | {:.0}% | {m:.1} | {lo:.1} | {hi:.1} | {} |\n",
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
        ));
    }
    f.flush()?;
    Ok((table, all_ok))
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
    Ok(rows)
}
