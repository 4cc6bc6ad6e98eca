//! `hashtile-bench sweep`: the BGHT paper's experiments (sections 7.1-7.4 and Figure 1) for every scheme of
//! [`for_each_scheme!`] on one backend, written as CSV files, SVG plots and a `summary.md`.
//!
//! 1. **Rates vs load factor** at a fixed number of keys: insert and find (100%, 50%, 0% of the queries
//!    present) in M keys/s (`rates_vs_load.csv`, paper Fig. 3-4 left).
//! 2. **Rates vs number of keys** at fixed load factors (0.8, 0.9), N = 2^a..2^b (`rates_vs_keys.csv`, paper
//!    Fig. 4 right).
//! 3. **Average probes per operation vs load factor** (`probes_vs_load.csv`, paper section 7.4), exact on the
//!    CPU backend in deterministic mode; a backend that reports no probes gets no probe plot.
//! 4. **Build success rate** over `--seeds` hash-function seeds with no rebuilds (`success_rate.csv`, paper
//!    Figure 1), and the highest load factor that builds with at least 99% success.
//!
//! The rate measurements are the `rates` mode's own ([`crate::measure`]: warm-up run, `--runs` timed runs,
//! median; device-resident data on GPUs). Every result of every experiment is checked against a
//! `std::collections::HashMap` oracle; a mismatch is reported and makes the command exit with status 2, like
//! the `rates` mode. A table that cannot be built at a load factor (a build failure, expected beyond a
//! scheme's achievable load) is recorded as such and the sweep goes on.

use crate::cli::{
    self, BenchError, Footprint, check_bucket, check_log2_keys, check_repeats, load_list,
};
use crate::plot::{Figure, Panel, Series, XAxis, write_svg};
use crate::{Args as RatesArgs, check, distinct_keys, measure, median, queries};
use hashtile::{
    Backend, BackendChoice, DEFAULT_SEED, Error, HashTable, ProbeStats, SchemeInfo, TableConfig,
};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// THE list of schemes the sweep runs, in legend order: expands `$body` once per scheme with `$s` bound to the
/// scheme type (`for_each_scheme!(|S| { run::<S>(); })`). One line per scheme; to leave a scheme out of
/// every experiment, comment out its line.
macro_rules! for_each_scheme {
    (|$s:ident| $body:block) => {{
        {
            type $s = hashtile::Bcht;
            $body
        } // BCHT: bucketed cuckoo hashing (--bucket, default 16)
        {
            type $s = hashtile::Iht;
            $body
        } // IHT: iceberg hashing (--bucket)
        {
            type $s = hashtile::P2bht;
            $body
        } // P2BHT: power-of-two-choices bucketed hashing (--bucket)
        {
            type $s = hashtile::Cht1;
            $body
        } // 1CHT: one-slot cuckoo hashing (bucket size always 1)
    }};
}

/// Arguments of `hashtile-bench sweep`. Options left unset take the full preset, or the `--quick` preset.
#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    /// Backend: auto, cpu, cuda or vulkan.
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
    /// Schemes to run, comma separated (default: all of bcht, iht, p2bht, 1cht); `name:B` gives one scheme
    /// its own bucket size, e.g. `--scheme bcht,iht:32,1cht` (the paper's success-rate comparison).
    #[arg(long, value_delimiter = ',')]
    scheme: Vec<String>,
    /// Bucket size of every scheme that has a choice (1CHT always uses 1).
    #[arg(long, default_value_t = 16)]
    bucket: u32,
    /// Keys of experiments 1 and 3, as a power of two [full: 20; quick: 14].
    #[arg(long)]
    log2_keys: Option<u32>,
    /// Load factors of experiments 1 and 3, comma separated
    /// [full: 0.6,0.7,0.8,0.85,0.9,0.92,0.94,0.96,0.98,0.99; quick: 0.7,0.8,0.9,0.95].
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    load: Option<Vec<f64>>,
    /// Keys of experiment 3 (probes), as a power of two [default: the keys of experiment 1]. Probe counts
    /// depend on the load factor, not on N; a smaller N keeps a 2^26 GPU sweep's host-side work short.
    #[arg(long)]
    pub probe_log2_keys: Option<u32>,
    /// Smallest number of keys of experiment 2 (rates vs N), as a power of two [full: 14; quick: 10].
    #[arg(long)]
    min_log2_keys: Option<u32>,
    /// Largest number of keys of experiment 2, as a power of two [full: 20; quick: 14].
    #[arg(long)]
    max_log2_keys: Option<u32>,
    /// Load factors of experiment 2 (rates vs N), comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.8,0.9",
        allow_negative_numbers = true
    )]
    size_load: Vec<f64>,
    /// Keys of experiment 4 (build success rate), as a power of two [full: 16; quick: 14].
    #[arg(long)]
    success_log2_keys: Option<u32>,
    /// Load factors of experiment 4, comma separated [full: 0.80, 0.81, .., 0.99; quick: 0.80, 0.84, 0.88,
    /// 0.90, 0.92, 0.94, 0.96, 0.98].
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    success_load: Option<Vec<f64>>,
    /// Builds (hash-function seeds) per load factor in experiment 4 [full: 100; quick: 20].
    #[arg(long)]
    seeds: Option<usize>,
    /// Timed runs per rate measurement, after one warm-up run (the median is reported) [full: 5; quick: 2].
    #[arg(long)]
    runs: Option<usize>,
    /// Seed of the key generator.
    #[arg(long, default_value_t = 1)]
    seed: u32,
    /// Longest cuckoo eviction chain (BCHT, 1CHT) [default: the scheme's, 100].
    #[arg(long)]
    pub max_chain: Option<u32>,
    /// Number of hash functions [default: the scheme's].
    #[arg(long)]
    pub num_hashes: Option<u32>,
    /// Skip the duplicate check on insert (the paper's bulk build of distinct keys; fewer insert probes).
    #[arg(long)]
    no_upsert: bool,
    /// Output directory (CSV files, SVG plots, summary.md).
    #[arg(long, default_value = "sweep-out")]
    out: PathBuf,
    /// Small preset (2^14 keys, 4 load factors, 2^10..2^14 keys for rates vs N, 20 seeds, 2 runs): a few
    /// seconds on 2 CPU cores.
    #[arg(long)]
    quick: bool,
    /// Experiments to run, comma separated [default: all four]: `load` (rates vs load factor), `keys` (rates
    /// vs number of keys), `probes` (probes vs load factor), `success` (build success rate). Lets a long GPU
    /// sweep be split over several runs.
    #[arg(long, value_delimiter = ',', value_enum)]
    experiments: Vec<Experiment>,
}

/// The four experiments of the sweep, in the order they run.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    /// Rates vs load factor at fixed N.
    Load,
    /// Rates vs number of keys at fixed load factors.
    Keys,
    /// Average probes per operation vs load factor.
    Probes,
    /// Build success rate over hash-function seeds.
    Success,
}

/// The sweep's parameters after presets and validation.
#[derive(Debug, Clone)]
struct Plan {
    /// log2 of the keys of experiment 1.
    log2_keys: u32,
    /// log2 of the keys of experiment 3.
    probe_log2_keys: u32,
    /// Load factors of experiments 1 and 3 (ascending).
    loads: Vec<f64>,
    /// log2 of the key counts of experiment 2.
    size_log2: Vec<u32>,
    /// Load factors of experiment 2 (ascending).
    size_loads: Vec<f64>,
    /// log2 of the keys of experiment 4.
    success_log2_keys: u32,
    /// Load factors of experiment 4 (ascending).
    success_loads: Vec<f64>,
    /// Builds per load factor in experiment 4.
    seeds: usize,
    /// Timed runs per rate.
    runs: usize,
    /// The experiments to run (`--experiments`; all when not given).
    experiments: Vec<Experiment>,
}

/// The three find mixes of the paper: fraction of the queries that are present.
const FINDS: [f64; 3] = [1.0, 0.5, 0.0];

/// Success fraction that counts as "builds" for the achievable-load column (paper Figure 1: ~99%).
const SUCCESS_BAR: f64 = 0.99;

impl Plan {
    /// `true` if experiment `e` is to run.
    fn runs(&self, e: Experiment) -> bool {
        self.experiments.contains(&e)
    }
    /// Applies the presets (`--quick` or full) to the options left unset and validates the result.
    fn resolve(a: &SweepArgs) -> Result<Self, String> {
        let q = a.quick;
        let log2_keys = check_log2_keys(
            "--log2-keys",
            a.log2_keys.unwrap_or(if q { 14 } else { 20 }),
        )?;
        let default_loads: &[f64] = if q {
            &[0.7, 0.8, 0.9, 0.95]
        } else {
            &[0.6, 0.7, 0.8, 0.85, 0.9, 0.92, 0.94, 0.96, 0.98, 0.99]
        };
        let loads = load_list("--load", a.load.as_deref().unwrap_or(default_loads))?;
        let lo = check_log2_keys(
            "--min-log2-keys",
            a.min_log2_keys.unwrap_or(if q { 10 } else { 14 }),
        )?;
        let hi = check_log2_keys(
            "--max-log2-keys",
            a.max_log2_keys.unwrap_or(if q { 14 } else { 20 }),
        )?;
        if lo > hi {
            return Err(format!(
                "--min-log2-keys {lo} is larger than --max-log2-keys {hi}"
            ));
        }
        let success_log2_keys = check_log2_keys(
            "--success-log2-keys",
            a.success_log2_keys.unwrap_or(if q { 14 } else { 16 }),
        )?;
        let probe_log2_keys = match a.probe_log2_keys {
            Some(k) => check_log2_keys("--probe-log2-keys", k)?,
            None => log2_keys,
        };
        let default_success: Vec<f64> = if q {
            vec![0.80, 0.84, 0.88, 0.90, 0.92, 0.94, 0.96, 0.98]
        } else {
            (80..=99).map(|p| p as f64 / 100.0).collect()
        };
        let success_loads = load_list(
            "--success-load",
            a.success_load.as_deref().unwrap_or(&default_success),
        )?;
        let seeds = check_repeats("--seeds", a.seeds.unwrap_or(if q { 20 } else { 100 }))?;
        let runs = check_repeats("--runs", a.runs.unwrap_or(if q { 2 } else { 5 }))?;
        Ok(Self {
            log2_keys,
            probe_log2_keys,
            loads,
            size_log2: (lo..=hi).collect(),
            size_loads: load_list("--size-load", &a.size_load)?,
            success_log2_keys,
            success_loads,
            seeds,
            runs,
            experiments: if a.experiments.is_empty() {
                vec![
                    Experiment::Load,
                    Experiment::Keys,
                    Experiment::Probes,
                    Experiment::Success,
                ]
            } else {
                a.experiments.clone()
            },
        })
    }
}

/// Distinct keys, their values and the oracle built from them.
struct KeySet {
    /// Number of inserted keys.
    n: usize,
    /// `2n` distinct keys: the first `n` are inserted, the rest are the absent queries.
    keys: Vec<u32>,
    /// The value of each of the first `n` keys.
    values: Vec<u32>,
    /// `key -> value` of the inserted pairs.
    oracle: HashMap<u32, u32>,
}

impl KeySet {
    /// `2^log2` inserted keys from the `rates` mode's generator, with the `rates` mode's values.
    fn new(log2: u32, seed: u32) -> Self {
        let n = 1usize << log2;
        let keys = distinct_keys(n, seed);
        let values: Vec<u32> = keys[..n]
            .iter()
            .map(|k| k.wrapping_mul(2_654_435_761) ^ 0x5bd1_e995)
            .collect();
        let oracle = keys[..n]
            .iter()
            .copied()
            .zip(values.iter().copied())
            .collect();
        Self {
            n,
            keys,
            values,
            oracle,
        }
    }
    /// The inserted keys.
    fn inserted(&self) -> &[u32] {
        &self.keys[..self.n]
    }
}

/// Outcome of one measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Measured, and every result matched the oracle.
    Ok,
    /// The table could not be built at this load factor; nothing was measured.
    BuildFailed,
    /// Some result differed from the oracle.
    Mismatch,
    /// Not measured: the same scheme and number of keys already failed to build at a lower load factor.
    Skipped,
}

impl Status {
    /// CSV / summary spelling.
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::BuildFailed => "build-failed",
            Status::Mismatch => "MISMATCH",
            Status::Skipped => "skipped",
        }
    }
}

/// One rate measurement (experiments 1 and 2).
#[derive(Debug, Clone)]
struct RatePoint {
    /// Scheme name (`SchemeInfo::NAME`).
    scheme: &'static str,
    /// Bucket size.
    bucket: u32,
    /// Inserted keys.
    keys: usize,
    /// Load factor.
    load: f64,
    /// `insert`, `find`, or on GPUs also `insert-async` (the kernel alone).
    op: &'static str,
    /// Fraction of the queries present (1 for inserts).
    present: f64,
    /// Median, min and max M keys/s over the timed runs (`None` when nothing was measured).
    rate: Option<(f64, f64, f64)>,
    /// Pairs the build could not place (a build failure: the rate is of an incomplete table).
    unplaced: usize,
    /// Outcome.
    status: Status,
}

/// One probe count (experiment 3).
#[derive(Debug, Clone)]
struct ProbePoint {
    /// Scheme name.
    scheme: &'static str,
    /// Bucket size.
    bucket: u32,
    /// Load factor.
    load: f64,
    /// `insert` or `find`.
    op: &'static str,
    /// Fraction of the queries present (1 for inserts).
    present: f64,
    /// Probe totals (`None` when the build failed).
    stats: Option<ProbeStats>,
    /// Outcome.
    status: Status,
}

/// One load factor of experiment 4.
#[derive(Debug, Clone)]
struct SuccessPoint {
    /// Scheme name.
    scheme: &'static str,
    /// Bucket size.
    bucket: u32,
    /// Load factor.
    load: f64,
    /// Builds that succeeded.
    successes: usize,
    /// Builds tried.
    seeds: usize,
    /// Every build, successful or not, matched the oracle (failed builds: the unplaced pairs returned plus the
    /// stored ones are exactly the input).
    checked: bool,
}

impl SuccessPoint {
    /// Fraction of successful builds.
    fn fraction(&self) -> f64 {
        self.successes as f64 / self.seeds as f64
    }
}

/// Everything measured.
#[derive(Default)]
struct Results {
    /// Experiment 1.
    by_load: Vec<RatePoint>,
    /// Experiment 2.
    by_keys: Vec<RatePoint>,
    /// Experiment 3.
    probes: Vec<ProbePoint>,
    /// Experiment 4.
    success: Vec<SuccessPoint>,
    /// Wall time of each experiment, in order.
    times: Vec<(&'static str, f64)>,
}

/// What every measurement needs.
struct Ctx {
    /// The options as given.
    args: SweepArgs,
    /// Resolved parameters.
    plan: Plan,
    /// The backend every table runs on.
    backend: Backend,
    /// One progress bar over all steps.
    bar: ProgressBar,
    /// Bucket sizes given per scheme (`--scheme iht:32`); others use `--bucket`.
    own_buckets: HashMap<&'static str, u32>,
}

impl Ctx {
    /// The bucket size asked for scheme `name`.
    fn bucket_for(&self, name: &str) -> u32 {
        self.own_buckets
            .get(name)
            .copied()
            .unwrap_or(self.args.bucket)
    }
}

/// The bucket size scheme `S` runs with: `--bucket`, unless the scheme has a single size (1CHT: 1).
fn bucket_of<S: SchemeInfo>(asked: u32) -> Result<u32, String> {
    match S::BUCKET_SIZES {
        [only] => Ok(*only),
        sizes if sizes.contains(&asked) => Ok(asked),
        sizes => Err(format!(
            "{} does not support bucket size {asked} (supported: {sizes:?})",
            S::NAME
        )),
    }
}

/// The scheme's parameters for `bucket`, with `--no-upsert`, `--max-chain` and `--num-hashes` applied (checked
/// before the sweep starts, so this cannot fail later).
fn params_of<S: SchemeInfo>(ctx: &Ctx, bucket: u32) -> hashtile::SchemeParams {
    crate::scheme_params::<S>(
        bucket,
        ctx.args.no_upsert,
        ctx.args.max_chain,
        ctx.args.num_hashes,
    )
    .expect("parameters validated before the sweep")
}

/// A table config for scheme `S` on the sweep's backend.
fn config<S: SchemeInfo>(ctx: &Ctx, n: usize, load: f64, bucket: u32) -> TableConfig {
    TableConfig::for_keys(n, load)
        .bucket_size(bucket)
        .params(params_of::<S>(ctx, bucket))
        .backend(BackendChoice::Exactly(ctx.backend))
}

/// `true` for the errors that mean "this table cannot be built here" rather than a fault.
fn is_build_failure(e: &Error) -> bool {
    matches!(e, Error::BuildFailed { .. } | Error::StashOverflow { .. })
}

/// The ops a rate measurement reports (insert, then the three find mixes), as `(op, present)`.
fn rate_ops() -> impl Iterator<Item = (&'static str, f64)> {
    std::iter::once(("insert", 1.0)).chain(FINDS.iter().map(|&p| ("find", p)))
}

/// Rates of scheme `S` with `data` at `load` (experiments 1 and 2), measured by the `rates` mode's code.
fn rate_point<S: SchemeInfo>(
    ctx: &Ctx,
    data: &KeySet,
    load: f64,
) -> Result<Vec<RatePoint>, String> {
    let bucket = bucket_of::<S>(ctx.bucket_for(S::NAME))?;
    let steps = rate_ops().count() as u64 * (ctx.plan.runs as u64 + 1);
    let start = ctx.bar.position();
    let point = |op, present, rate, unplaced, status| RatePoint {
        scheme: S::NAME,
        bucket,
        keys: data.n,
        load,
        op,
        present,
        rate,
        unplaced,
        status,
    };
    let args = RatesArgs {
        backend: ctx.args.backend,
        log2_keys: data.n.trailing_zeros(),
        load: vec![load],
        scheme: vec![S::NAME.to_string()],
        bucket: vec![bucket],
        runs: ctx.plan.runs,
        seed: ctx.args.seed,
        claim: None,
        reads: None,
        no_upsert: ctx.args.no_upsert,
        max_chain: ctx.args.max_chain,
        num_hashes: ctx.args.num_hashes,
        wide: false,
        cur_scheme: S::NAME.to_string(),
        cur_bucket: bucket,
        csv: String::new(),
    };
    let rows = measure::<S>(
        &args,
        ctx.backend,
        load,
        &data.keys,
        &data.values,
        &data.oracle,
        &FINDS,
        &ctx.bar,
    );
    ctx.bar.set_position(start + steps);
    match rows {
        // `measure` checks every answer against the oracle; keys a failed build could not place must read as
        // absent, and such a row is a build failure (its rate is of an incomplete table), not a mismatch.
        Ok(rows) => Ok(rows
            .into_iter()
            .map(|mut r| {
                let lo = r.rates.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = r.rates.iter().copied().fold(0.0, f64::max);
                let status = if !r.checked {
                    Status::Mismatch
                } else if r.unplaced > 0 {
                    Status::BuildFailed
                } else {
                    Status::Ok
                };
                let rate = (!r.rates.is_empty()).then(|| (median(&mut r.rates), lo, hi));
                point(r.op, r.present, rate, r.unplaced, status)
            })
            .collect()),
        Err(e) if is_build_failure(&e) => Ok(rate_ops()
            .map(|(op, p)| point(op, p, None, 0, Status::BuildFailed))
            .collect()),
        Err(e) => Err(e.to_string()),
    }
}

/// Rate points of scheme `S` at `load` that are not measured because a lower load failed to build (with its
/// re-seeded rebuilds, each timed run of a failing load rebuilds the table several times: skipping the
/// loads above it keeps the sweep's time for the loads a scheme can build).
fn skipped_points<S: SchemeInfo>(
    ctx: &Ctx,
    data: &KeySet,
    load: f64,
) -> Result<Vec<RatePoint>, String> {
    let bucket = bucket_of::<S>(ctx.bucket_for(S::NAME))?;
    ctx.bar
        .inc(rate_ops().count() as u64 * (ctx.plan.runs as u64 + 1));
    Ok(rate_ops()
        .map(|(op, present)| RatePoint {
            scheme: S::NAME,
            bucket,
            keys: data.n,
            load,
            op,
            present,
            rate: None,
            unplaced: 0,
            status: Status::Skipped,
        })
        .collect())
}

/// Rates of scheme `S` with `data` at each of `loads` (ascending); loads above the first one that fails to
/// build are skipped.
fn rate_points<S: SchemeInfo>(
    ctx: &Ctx,
    data: &KeySet,
    loads: &[f64],
    what: &str,
) -> Result<Vec<RatePoint>, String> {
    let mut out = Vec::new();
    let mut failed = false;
    for &load in loads {
        if failed {
            out.extend(skipped_points::<S>(ctx, data, load)?);
            continue;
        }
        ctx.bar
            .set_message(format!("{}: {what}, load {load}", S::NAME));
        let points = rate_point::<S>(ctx, data, load)?;
        failed = points.iter().any(|p| p.status == Status::BuildFailed);
        out.extend(points);
    }
    Ok(out)
}

/// Average probes of scheme `S` at `load` (experiment 3): one deterministic build, then the three find mixes.
fn probe_point<S: SchemeInfo>(
    ctx: &Ctx,
    data: &KeySet,
    load: f64,
) -> Result<Vec<ProbePoint>, String> {
    let bucket = bucket_of::<S>(ctx.bucket_for(S::NAME))?;
    let point = |op, present, stats, status| ProbePoint {
        scheme: S::NAME,
        bucket,
        load,
        op,
        present,
        stats,
        status,
    };
    // No rebuild: the insert statistics are those of one build with one hash family.
    let cfg = config::<S>(ctx, data.n, load, bucket)
        .deterministic(true)
        .count_probes(true)
        .max_rebuilds(0);
    let mut t = HashTable::<S, u32, u32>::new(cfg).map_err(|e| e.to_string())?;
    match t.insert(data.inserted(), &data.values) {
        Ok(()) => {}
        Err(e) if is_build_failure(&e) => {
            ctx.bar.inc(rate_ops().count() as u64);
            return Ok(rate_ops()
                .map(|(op, p)| point(op, p, None, Status::BuildFailed))
                .collect());
        }
        Err(e) => return Err(e.to_string()),
    }
    let ins = t.last_insert_probes();
    let got = t.find(data.inserted()).map_err(|e| e.to_string())?;
    let ok = t.len() == data.n && check(&data.oracle, data.inserted(), &got);
    let mut out = vec![point("insert", 1.0, Some(ins), ok_or_mismatch(ok))];
    ctx.bar.inc(1);
    for p in FINDS {
        let q = queries(&data.keys, data.n, p);
        let got = t.find(&q).map_err(|e| e.to_string())?;
        let ok = check(&data.oracle, &q, &got);
        out.push(point(
            "find",
            p,
            Some(t.last_find_probes()),
            ok_or_mismatch(ok),
        ));
        ctx.bar.inc(1);
    }
    Ok(out)
}

/// `Status::Ok` if `ok`, else `Status::Mismatch`.
fn ok_or_mismatch(ok: bool) -> Status {
    if ok { Status::Ok } else { Status::Mismatch }
}

/// The master seed of the `i`-th build of experiment 4.
fn build_seed(i: usize) -> u64 {
    DEFAULT_SEED ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Build success of scheme `S` at `load` over `--seeds` hash-function seeds, no rebuilds (experiment 4).
fn success_point<S: SchemeInfo>(
    ctx: &Ctx,
    data: &KeySet,
    load: f64,
) -> Result<SuccessPoint, String> {
    let bucket = bucket_of::<S>(ctx.bucket_for(S::NAME))?;
    let keys = data.inserted();
    let mut successes = 0;
    let mut checked = true;
    for i in 0..ctx.plan.seeds {
        let cfg = config::<S>(ctx, data.n, load, bucket)
            .seed(build_seed(i))
            .max_rebuilds(0)
            .deterministic(true);
        let mut t = HashTable::<S, u32, u32>::new(cfg).map_err(|e| e.to_string())?;
        match t.insert(keys, &data.values) {
            Ok(()) => {
                successes += 1;
                let got = t.find(keys).map_err(|e| e.to_string())?;
                checked &= t.len() == data.n && check(&data.oracle, keys, &got);
            }
            Err(Error::BuildFailed { unplaced, .. }) => {
                // Nothing lost: the returned pairs are the oracle's and absent, every other key is stored.
                let out: HashMap<u32, u32> = unplaced
                    .iter()
                    .map(|&(k, v)| (k as u32, v as u32))
                    .collect();
                let got = t.find(keys).map_err(|e| e.to_string())?;
                checked &= t.len() + out.len() == data.n
                    && out.iter().all(|(k, v)| data.oracle.get(k) == Some(v))
                    && keys.iter().zip(&got).all(|(k, g)| {
                        if out.contains_key(k) {
                            g.is_none()
                        } else {
                            data.oracle.get(k).copied() == *g
                        }
                    });
            }
            Err(Error::StashOverflow {
                untracked,
                unplaced,
            }) => {
                // GPU only, far past the achievable load: some pairs are gone by design; check what is stored.
                let out: HashSet<u32> = unplaced.iter().map(|&(k, _)| k as u32).collect();
                let got = t.find(keys).map_err(|e| e.to_string())?;
                checked &= t.len() + out.len() + untracked == data.n
                    && keys
                        .iter()
                        .zip(&got)
                        .all(|(k, g)| g.is_none() || data.oracle.get(k).copied() == *g);
            }
            Err(e) => return Err(e.to_string()),
        }
        ctx.bar.inc(1);
    }
    Ok(SuccessPoint {
        scheme: S::NAME,
        bucket,
        load,
        successes,
        seeds: ctx.plan.seeds,
        checked,
    })
}

/// Names of every scheme of [`for_each_scheme!`], in order.
fn scheme_names() -> Vec<&'static str> {
    let mut v = Vec::new();
    for_each_scheme!(|S| {
        v.push(S::NAME);
    });
    v
}

/// A checked `hashtile-bench sweep` command line: every option validated, the schemes picked, the backend
/// available and the sizes within the machine's memory ([`Setup::new`]), before anything is allocated.
pub struct Setup {
    /// The options as given.
    args: SweepArgs,
    /// Resolved parameters.
    plan: Plan,
    /// The schemes to run, in legend order.
    selected: Vec<&'static str>,
    /// Bucket sizes given per scheme (`--scheme iht:32`).
    own_buckets: HashMap<&'static str, u32>,
    /// The backend every table runs on.
    backend: Backend,
}

impl Setup {
    /// Checks the sweep's command line: options and presets ([`Plan::resolve`]), schemes and their bucket
    /// sizes and parameters, table sizes, the backend, then memory. Errors are bad input (one line each).
    pub fn new(args: SweepArgs) -> Result<Self, String> {
        let plan = Plan::resolve(&args)?;
        check_bucket("--bucket", args.bucket)?;
        let all = scheme_names();
        let mut own_buckets: HashMap<&'static str, u32> = HashMap::new();
        let selected: Vec<&'static str> = if args.scheme.is_empty() {
            all.clone()
        } else {
            let mut v = Vec::new();
            for entry in &args.scheme {
                // `name` or `name:B` (a bucket size for this scheme only, e.g. `iht:32`).
                let (s, own_bucket) = match entry.split_once(':') {
                    Some((s, b)) => {
                        let b = b
                            .trim()
                            .parse::<u32>()
                            .map_err(|e| format!("--scheme {entry}: bad bucket size '{b}': {e}"))?;
                        if check_bucket("--scheme", b).is_err() {
                            return Err(format!(
                                "--scheme {entry}: a bucket size must be a power of two in 1..=32 \
                                 (1, 2, 4, 8, 16 or 32)"
                            ));
                        }
                        (s, Some(b))
                    }
                    None => (entry.as_str(), None),
                };
                let name = all
                    .iter()
                    .find(|n| n.eq_ignore_ascii_case(s.trim()))
                    .ok_or_else(|| {
                        format!(
                            "--scheme: unknown scheme '{s}' (expected one of {})",
                            all.join(", ")
                        )
                    })?;
                if !v.contains(name) {
                    v.push(*name);
                }
                if let Some(b) = own_bucket {
                    own_buckets.insert(*name, b);
                }
            }
            v
        };
        let on = |name: &str| selected.contains(&name);
        // Reject an unsupported bucket size or parameter, and tables too large to index, before measuring
        // anything. `sizes`: (keys, load factors, bucket size) of every table an experiment builds.
        let mut sizes: Vec<(Experiment, usize, &[f64], u32)> = Vec::new();
        for_each_scheme!(|S| {
            if on(S::NAME) {
                let b = bucket_of::<S>(own_buckets.get(S::NAME).copied().unwrap_or(args.bucket))?;
                crate::scheme_params::<S>(b, args.no_upsert, args.max_chain, args.num_hashes)
                    .map_err(|e| format!("{} with buckets of {b}: {e}", S::NAME))?;
                sizes.push((Experiment::Load, 1 << plan.log2_keys, &plan.loads, b));
                // Rates vs N: its largest N is the one that can fail.
                let hi = plan.size_log2[plan.size_log2.len() - 1];
                sizes.push((Experiment::Keys, 1 << hi, &plan.size_loads, b));
                sizes.push((
                    Experiment::Probes,
                    1 << plan.probe_log2_keys,
                    &plan.loads,
                    b,
                ));
                sizes.push((
                    Experiment::Success,
                    1 << plan.success_log2_keys,
                    &plan.success_loads,
                    b,
                ));
            }
        });
        sizes.retain(|&(e, ..)| plan.runs(e));
        let mut tables = Vec::new();
        for &(e, n, loads, b) in &sizes {
            for &load in loads {
                let what = format!("{} experiment, {n} keys", experiment_name(e));
                tables.push((e, n, cli::table_slots(&what, n, load, b)?));
            }
        }
        if args.out.exists() && !args.out.is_dir() {
            return Err(format!(
                "--out {}: exists and is not a directory",
                args.out.display()
            ));
        }
        let backend = cli::available_backend(args.backend)?;
        // Memory: the experiments run one after the other; each holds its key set and one table at a time
        // (rates vs N also holds experiment 1's key set, kept for the probes).
        let have = cli::Capacity::of_machine(backend);
        for &(e, n, slots) in &tables {
            let keyset = cli::keyset_footprint(n);
            let need = match e {
                Experiment::Load => keyset.plus(cli::measure_footprint(backend, false, n, slots)),
                Experiment::Keys => {
                    let held = if plan.runs(Experiment::Load) {
                        cli::keyset_footprint(1 << plan.log2_keys)
                    } else {
                        Footprint::default()
                    };
                    held.plus(keyset)
                        .plus(cli::measure_footprint(backend, false, n, slots))
                }
                Experiment::Probes | Experiment::Success => {
                    keyset.plus(cli::host_api_footprint(backend, n, slots))
                }
            };
            let what = format!(
                "the sweep's {} experiment with 2^{} keys on {backend}",
                experiment_name(e),
                n.trailing_zeros()
            );
            cli::check_footprint(&what, need, have)?;
        }
        Ok(Self {
            args,
            plan,
            selected,
            own_buckets,
            backend,
        })
    }
}

/// How `--experiments` spells experiment `e`.
fn experiment_name(e: Experiment) -> &'static str {
    match e {
        Experiment::Load => "load",
        Experiment::Keys => "keys",
        Experiment::Probes => "probes",
        Experiment::Success => "success",
    }
}

/// Runs a checked `hashtile-bench sweep`; returns the process exit status (0: all matched; 2: a mismatch), or
/// the error that stopped it.
pub fn run(setup: Setup) -> Result<i32, BenchError> {
    match sweep(setup) {
        Ok(true) => Ok(0),
        Ok(false) => {
            eprintln!(
                "some results did not match the oracle (see the status columns and summary.md)"
            );
            Ok(2)
        }
        Err(e) => Err(BenchError::Run(format!("sweep: {e}"))),
    }
}

/// The sweep; `Ok(false)` when some result did not match the oracle.
fn sweep(setup: Setup) -> Result<bool, String> {
    let started = Instant::now();
    let Setup {
        args,
        plan,
        selected,
        own_buckets,
        backend,
    } = setup;
    let on = |name: &str| selected.contains(&name);
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;

    let ns = selected.len() as u64;
    let rate_steps = rate_ops().count() as u64 * (plan.runs as u64 + 1);
    let steps = |e: Experiment, n: u64| if plan.runs(e) { n } else { 0 };
    let total = ns
        * (steps(Experiment::Load, plan.loads.len() as u64 * rate_steps)
            + steps(
                Experiment::Keys,
                (plan.size_log2.len() * plan.size_loads.len()) as u64 * rate_steps,
            )
            + steps(
                Experiment::Probes,
                plan.loads.len() as u64 * rate_ops().count() as u64,
            )
            + steps(
                Experiment::Success,
                (plan.success_loads.len() * plan.seeds) as u64,
            ));
    println!(
        "hashtile-bench sweep: backend {backend} (asked: {:?}), schemes {selected:?}, B = {} (1CHT: 1), \
         2^{} keys at loads {:?}; rates vs N 2^{}..2^{} at loads {:?}; success rate 2^{} keys x {} seeds at \
         loads {:?}; {} timed runs; upsert {}; output {}",
        args.backend,
        args.bucket,
        plan.log2_keys,
        plan.loads,
        plan.size_log2[0],
        plan.size_log2[plan.size_log2.len() - 1],
        plan.size_loads,
        plan.success_log2_keys,
        plan.seeds,
        plan.success_loads,
        plan.runs,
        !args.no_upsert,
        args.out.display()
    );
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .expect("template"),
    );
    let ctx = Ctx {
        args,
        plan,
        backend,
        bar,
        own_buckets,
    };
    let mut res = Results::default();
    let plan = &ctx.plan;

    // 1. Rates vs load factor at fixed N. Its key set is kept for experiment 3 when that uses the same N.
    let mut main = None;
    if plan.runs(Experiment::Load) {
        let t0 = Instant::now();
        let main = main.insert(KeySet::new(plan.log2_keys, ctx.args.seed));
        let what = format!("rates vs load, 2^{} keys", plan.log2_keys);
        for_each_scheme!(|S| {
            if on(S::NAME) {
                res.by_load
                    .extend(rate_points::<S>(&ctx, main, &plan.loads, &what)?);
                checkpoint(&ctx, &selected, &res, started)?;
            }
        });
        res.times
            .push(("rates vs load factor", t0.elapsed().as_secs_f64()));
    }

    // 2. Rates vs N at fixed load factors.
    let t0 = Instant::now();
    let sizes: &[u32] = if plan.runs(Experiment::Keys) {
        &plan.size_log2
    } else {
        &[]
    };
    for &a in sizes {
        let data = KeySet::new(a, ctx.args.seed);
        let what = format!("rates vs N, 2^{a} keys");
        for_each_scheme!(|S| {
            if on(S::NAME) {
                res.by_keys
                    .extend(rate_points::<S>(&ctx, &data, &plan.size_loads, &what)?);
            }
        });
        checkpoint(&ctx, &selected, &res, started)?;
    }
    if plan.runs(Experiment::Keys) {
        res.times.push(("rates vs N", t0.elapsed().as_secs_f64()));
    }

    // 3. Average probes vs load factor.
    if plan.runs(Experiment::Probes) {
        let t0 = Instant::now();
        let probe_set = match main.take() {
            Some(m) if m.n == 1 << plan.probe_log2_keys => m,
            _ => KeySet::new(plan.probe_log2_keys, ctx.args.seed),
        };
        for_each_scheme!(|S| {
            if on(S::NAME) {
                for &load in &plan.loads {
                    ctx.bar
                        .set_message(format!("{}: probes at load {load}", S::NAME));
                    res.probes.extend(probe_point::<S>(&ctx, &probe_set, load)?);
                }
                checkpoint(&ctx, &selected, &res, started)?;
            }
        });
        res.times
            .push(("probes vs load factor", t0.elapsed().as_secs_f64()));
    }
    drop(main);

    // 4. Build success rate over seeds.
    if plan.runs(Experiment::Success) {
        let t0 = Instant::now();
        let data = KeySet::new(plan.success_log2_keys, ctx.args.seed);
        for_each_scheme!(|S| {
            if on(S::NAME) {
                for &load in &plan.success_loads {
                    ctx.bar.set_message(format!(
                        "{}: {} builds at load {load}",
                        S::NAME,
                        plan.seeds
                    ));
                    res.success.push(success_point::<S>(&ctx, &data, load)?);
                }
                checkpoint(&ctx, &selected, &res, started)?;
            }
        });
        res.times
            .push(("build success rate", t0.elapsed().as_secs_f64()));
    }
    ctx.bar.finish_and_clear();

    let all_ok = write_outputs(&ctx, &selected, &res, started.elapsed().as_secs_f64(), true)?;
    Ok(all_ok)
}

/// Writes every output with what has been measured so far, marked partial, so that a sweep cut short (a
/// device call's time limit, Ctrl-C) still leaves its CSV files, plots and summary behind.
fn checkpoint(
    ctx: &Ctx,
    selected: &[&'static str],
    res: &Results,
    started: Instant,
) -> Result<(), String> {
    write_outputs(ctx, selected, res, started.elapsed().as_secs_f64(), false).map(|_| ())
}

/// Writes `text` to `dir/name`.
fn write_file(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// CSV of rate points.
fn rates_csv(ctx: &Ctx, points: &[RatePoint]) -> String {
    let mut s = String::from(
        "backend,scheme,bucket,keys,load,op,present,upsert,median_mkeys_s,min_mkeys_s,max_mkeys_s,runs,unplaced,status\n",
    );
    for p in points {
        let (m, lo, hi) = match p.rate {
            Some((m, lo, hi)) => (format!("{m:.2}"), format!("{lo:.2}"), format!("{hi:.2}")),
            None => Default::default(),
        };
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{m},{lo},{hi},{},{},{}",
            ctx.backend,
            p.scheme,
            p.bucket,
            p.keys,
            p.load,
            p.op,
            p.present,
            !ctx.args.no_upsert,
            if p.rate.is_some() { ctx.plan.runs } else { 0 },
            p.unplaced,
            p.status.as_str()
        );
    }
    s
}

/// Panel title of an op.
fn op_title(op: &str, present: f64) -> String {
    if op == "find" {
        format!("find, {:.0}% present", present * 100.0)
    } else {
        op.to_string()
    }
}

/// Legend entry of a scheme.
fn label(scheme: &str, bucket: u32) -> String {
    format!("{scheme} (B={bucket})")
}

/// The median rate of a point, if it is plotted: measured, complete build, matched the oracle.
fn plotted(p: Option<&RatePoint>) -> Option<f64> {
    p.filter(|p| p.status == Status::Ok)
        .and_then(|p| p.rate)
        .map(|r| r.0)
}

/// Looks up the median rate of `scheme` for `(op, present)` at `load` and `keys` keys.
fn rate_at<'a>(
    points: &'a [RatePoint],
    scheme: &str,
    keys: usize,
    load: f64,
    op: &str,
    present: f64,
) -> Option<&'a RatePoint> {
    points.iter().find(|p| {
        p.scheme == scheme
            && p.keys == keys
            && (p.load - load).abs() < 1e-9
            && p.op == op
            && p.present == present
    })
}

/// Looks up the probe count of `scheme` for `(op, present)` at `load`.
fn probe_at<'a>(
    res: &'a Results,
    scheme: &str,
    load: f64,
    op: &str,
    present: f64,
) -> Option<&'a ProbePoint> {
    res.probes.iter().find(|p| {
        p.scheme == scheme && (p.load - load).abs() < 1e-9 && p.op == op && p.present == present
    })
}

/// One panel per op (insert, find 100% / 50% / 0% present; titles end in `suffix`), one series per scheme,
/// `y(scheme, x, op, present)` at each `x` of `xs`.
fn op_panels(
    selected: &[&'static str],
    bucket: &dyn Fn(&str) -> u32,
    suffix: &str,
    xs: &[f64],
    y: &dyn Fn(&str, f64, &str, f64) -> Option<f64>,
) -> Vec<Panel> {
    rate_ops()
        .map(|(op, present)| Panel {
            title: format!("{}{suffix}", op_title(op, present)),
            series: selected
                .iter()
                .map(|&s| Series {
                    name: label(s, bucket(s)),
                    points: xs.iter().map(|&x| (x, y(s, x, op, present))).collect(),
                })
                .collect(),
        })
        .collect()
}

/// Writes the CSV files, the SVG plots and summary.md; returns `true` if every result matched the oracle.
fn write_outputs(
    ctx: &Ctx,
    selected: &[&'static str],
    res: &Results,
    wall_s: f64,
    complete: bool,
) -> Result<bool, String> {
    let out = &ctx.args.out;
    let plan = &ctx.plan;
    let buckets: HashMap<&str, u32> = res
        .success
        .iter()
        .map(|p| (p.scheme, p.bucket))
        .chain(res.by_load.iter().map(|p| (p.scheme, p.bucket)))
        .collect();
    let bucket = |s: &str| buckets.get(s).copied().unwrap_or(ctx.args.bucket);
    let mut files = Vec::new();

    // Experiment 1.
    if plan.runs(Experiment::Load) {
        write_file(out, "rates_vs_load.csv", &rates_csv(ctx, &res.by_load))?;
        files.push("rates_vs_load.csv");
        let n = 1usize << plan.log2_keys;
        let panels = op_panels(selected, &bucket, "", &plan.loads, &|s, l, op, present| {
            plotted(rate_at(&res.by_load, s, n, l, op, present))
        });
        write_svg(
            &out.join("rates_vs_load.svg"),
            &Figure {
                caption: format!(
                    "Rates vs load factor, 2^{} keys, {} backend",
                    plan.log2_keys, ctx.backend
                ),
                x_label: "load factor".into(),
                y_label: "M keys/s".into(),
                x_axis: XAxis::Linear,
                y_range: None,
                cols: 2,
                panels,
            },
        )?;
        files.push("rates_vs_load.svg");
    }

    // Experiment 2.
    if plan.runs(Experiment::Keys) {
        write_file(out, "rates_vs_keys.csv", &rates_csv(ctx, &res.by_keys))?;
        files.push("rates_vs_keys.csv");
        let sizes: Vec<f64> = plan.size_log2.iter().map(|&a| a as f64).collect();
        let mut panels = Vec::new();
        for &load in &plan.size_loads {
            panels.extend(op_panels(
                selected,
                &bucket,
                &format!(", load {load}"),
                &sizes,
                &|s, a, op, present| {
                    plotted(rate_at(&res.by_keys, s, 1 << a as u32, load, op, present))
                },
            ));
        }
        write_svg(
            &out.join("rates_vs_keys.svg"),
            &Figure {
                caption: format!("Rates vs number of keys, {} backend", ctx.backend),
                x_label: "keys".into(),
                y_label: "M keys/s".into(),
                x_axis: XAxis::Log2,
                y_range: None,
                cols: rate_ops().count(),
                panels,
            },
        )?;
        files.push("rates_vs_keys.svg");
    }

    // Experiment 3 (only where the backend reports probes).
    let probes_reported = plan.runs(Experiment::Probes)
        && res
            .probes
            .iter()
            .any(|p| p.stats.is_some_and(|s| s.probes > 0));
    if probes_reported {
        let mut csv = String::from(
            "backend,scheme,bucket,keys,load,op,present,upsert,avg_probes,probes,ops,retries,status\n",
        );
        for p in &res.probes {
            // `retries` (GPU inserts: re-reads after a lost compare-and-swap) are included in `probes`.
            let (avg, probes, ops, retries) = match p.stats {
                Some(s) => (
                    format!("{:.4}", s.average()),
                    s.probes.to_string(),
                    s.ops.to_string(),
                    s.retries.to_string(),
                ),
                None => Default::default(),
            };
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{},{},{},{avg},{probes},{ops},{retries},{}",
                ctx.backend,
                p.scheme,
                p.bucket,
                1usize << plan.probe_log2_keys,
                p.load,
                p.op,
                p.present,
                !ctx.args.no_upsert,
                p.status.as_str()
            );
        }
        write_file(out, "probes_vs_load.csv", &csv)?;
        files.push("probes_vs_load.csv");
        let panels = op_panels(selected, &bucket, "", &plan.loads, &|s, l, op, present| {
            probe_at(res, s, l, op, present)
                .and_then(|p| p.stats)
                .map(|st| st.average())
        });
        write_svg(
            &out.join("probes_vs_load.svg"),
            &Figure {
                caption: format!(
                    "Average probes per operation vs load factor, 2^{} keys",
                    plan.log2_keys
                ),
                x_label: "load factor".into(),
                y_label: "probes per operation".into(),
                x_axis: XAxis::Linear,
                y_range: None,
                cols: 2,
                panels,
            },
        )?;
        files.push("probes_vs_load.svg");
    }

    // Experiment 4.
    if plan.runs(Experiment::Success) {
        let mut csv =
            String::from("backend,scheme,bucket,keys,load,seeds,successes,success_pct,checked\n");
        for p in &res.success {
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{},{},{:.1},{}",
                ctx.backend,
                p.scheme,
                p.bucket,
                1usize << plan.success_log2_keys,
                p.load,
                p.seeds,
                p.successes,
                p.fraction() * 100.0,
                p.checked
            );
        }
        write_file(out, "success_rate.csv", &csv)?;
        files.push("success_rate.csv");
        write_svg(
            &out.join("success_rate.svg"),
            &Figure {
                caption: format!(
                    "Build success rate, 2^{} keys, {} seeds, no rebuilds",
                    plan.success_log2_keys, plan.seeds
                ),
                x_label: "load factor".into(),
                y_label: "successful builds (%)".into(),
                x_axis: XAxis::Linear,
                y_range: Some((0.0, 105.0)),
                cols: 1,
                panels: vec![Panel {
                    title: String::new(),
                    series: selected
                        .iter()
                        .map(|&s| Series {
                            name: label(s, bucket(s)),
                            points: res
                                .success
                                .iter()
                                .filter(|p| p.scheme == s)
                                .map(|p| (p.load, Some(p.fraction() * 100.0)))
                                .collect(),
                        })
                        .collect(),
                }],
            },
        )?;
        files.push("success_rate.svg");
    }

    // Oracle verdict.
    let rate_points = res.by_load.iter().chain(&res.by_keys);
    // Every measured rate row (failed builds included: their unplaced keys must read as absent), every probe
    // row of a built table, every success-rate build.
    let checks = rate_points.clone().filter(|p| p.rate.is_some()).count()
        + res.probes.iter().filter(|p| p.stats.is_some()).count()
        + res.success.iter().map(|p| p.seeds).sum::<usize>();
    let mut mismatches: Vec<String> = rate_points
        .clone()
        .filter(|p| p.status == Status::Mismatch)
        .map(|p| {
            format!(
                "{} B={} 2^{} keys load {} {}",
                p.scheme,
                p.bucket,
                p.keys.trailing_zeros(),
                p.load,
                op_title(p.op, p.present)
            )
        })
        .collect();
    mismatches.extend(
        res.probes
            .iter()
            .filter(|p| p.status == Status::Mismatch)
            .map(|p| {
                format!(
                    "{} B={} probes at load {} {}",
                    p.scheme,
                    p.bucket,
                    p.load,
                    op_title(p.op, p.present)
                )
            }),
    );
    mismatches.extend(res.success.iter().filter(|p| !p.checked).map(|p| {
        format!(
            "{} B={} success-rate builds at load {}",
            p.scheme, p.bucket, p.load
        )
    }));

    let mut summary = summary_md(
        ctx,
        selected,
        res,
        &bucket,
        wall_s,
        probes_reported,
        checks,
        &mismatches,
        &files,
    );
    if !complete {
        summary.insert_str(
            0,
            &format!(
                "> **Partial**: written at a checkpoint after {wall_s:.0} s; the sweep had not finished. \
                 Experiments not yet reached are empty.\n\n"
            ),
        );
    }
    write_file(out, "summary.md", &summary)?;
    if complete {
        println!("{summary}");
        println!("Written to {}", out.display());
    }
    Ok(mismatches.is_empty())
}

/// `insert / find 100% / find 50% / find 0%` of one scheme at one load, from the rate points.
fn rates_cell(ctx: &Ctx, res: &Results, scheme: &str, load: f64) -> String {
    let n = 1usize << ctx.plan.log2_keys;
    let cells: Vec<String> = rate_ops()
        .map(|(op, present)| {
            let p = rate_at(&res.by_load, scheme, n, load, op, present)
                .or_else(|| rate_at(&res.by_keys, scheme, n, load, op, present));
            match p {
                Some(RatePoint {
                    rate: Some((m, ..)),
                    status: Status::Ok,
                    ..
                }) => format!("{m:.1}"),
                Some(RatePoint {
                    status: Status::Mismatch,
                    ..
                }) => "MISMATCH".into(),
                Some(RatePoint {
                    status: Status::Skipped,
                    ..
                }) => "skipped".into(),
                Some(_) => "failed".into(),
                None => "n/a".into(),
            }
        })
        .collect();
    if cells.iter().all(|c| c == "failed") {
        "build failed".into()
    } else if cells.iter().all(|c| c == "skipped") {
        "skipped (a lower load failed)".into()
    } else {
        cells.join(" / ")
    }
}

/// `insert / find 100% / 50% / 0%` average probes of one scheme at one load.
fn probes_cell(res: &Results, scheme: &str, load: f64, reported: bool) -> String {
    if !reported {
        return "not measured".into();
    }
    let cells: Vec<String> = rate_ops()
        .map(
            |(op, present)| match probe_at(res, scheme, load, op, present) {
                Some(ProbePoint { stats: Some(s), .. }) => format!("{:.2}", s.average()),
                Some(_) => "failed".into(),
                None => "n/a".into(),
            },
        )
        .collect();
    if cells.iter().all(|c| c == "failed") {
        "build failed".into()
    } else {
        cells.join(" / ")
    }
}

/// The highest load factor of experiment 4 with at least 99% successful builds.
fn max_load_cell(res: &Results, scheme: &str) -> String {
    let best = res
        .success
        .iter()
        .filter(|p| p.scheme == scheme && p.fraction() >= SUCCESS_BAR)
        .max_by(|a, b| a.load.partial_cmp(&b.load).expect("finite"));
    match best {
        Some(p) => format!("{} ({}/{})", p.load, p.successes, p.seeds),
        None => {
            let lowest = res
                .success
                .iter()
                .filter(|p| p.scheme == scheme)
                .map(|p| p.load)
                .fold(f64::INFINITY, f64::min);
            if lowest.is_finite() {
                format!("below {lowest}")
            } else {
                "n/a".into()
            }
        }
    }
}

/// The text of summary.md.
#[allow(clippy::too_many_arguments)]
fn summary_md(
    ctx: &Ctx,
    selected: &[&'static str],
    res: &Results,
    bucket: &dyn Fn(&str) -> u32,
    wall_s: f64,
    probes_reported: bool,
    checks: usize,
    mismatches: &[String],
    files: &[&str],
) -> String {
    let plan = &ctx.plan;
    let mut s = String::new();
    let _ = writeln!(s, "# hashtile sweep ({} backend)\n", ctx.backend);
    let _ = writeln!(
        s,
        "- Rates: 2^{} keys, loads {:?}; probes: 2^{} keys; rates vs N: 2^{}..2^{} keys at loads {:?}; {} \
         timed runs after one warm-up (median).",
        plan.log2_keys,
        plan.loads,
        plan.probe_log2_keys,
        plan.size_log2[0],
        plan.size_log2[plan.size_log2.len() - 1],
        plan.size_loads,
        plan.runs
    );
    let _ = writeln!(
        s,
        "- Build success: 2^{} keys, {} hash-function seeds per load, no rebuilds, loads {:?}.",
        plan.success_log2_keys, plan.seeds, plan.success_loads
    );
    let _ = writeln!(
        s,
        "- Inserts: {}; key seed {}; `--quick` {}.",
        if ctx.args.no_upsert {
            "bulk build without the duplicate check (`--no-upsert`, as in the paper)"
        } else {
            "upsert with the duplicate check (hashtile's default; `--no-upsert` gives the paper's bulk build)"
        },
        ctx.args.seed,
        ctx.args.quick
    );
    let knob = |v: Option<u32>| v.map_or("each scheme's default".to_string(), |v| v.to_string());
    let _ = writeln!(
        s,
        "- Scheme parameters: max eviction chain {}; hash functions {}.",
        knob(ctx.args.max_chain),
        knob(ctx.args.num_hashes)
    );
    let _ = writeln!(
        s,
        "- Rate tables are built as in the `rates` mode ({}); probe and success-rate tables with one hash \
         family and no rebuild, so a load can have rates but no probe counts.",
        if ctx.backend == Backend::Cpu {
            "a failed build re-seeds and rebuilds up to 8 times"
        } else {
            "default seed, no rebuild"
        }
    );
    let times: Vec<String> = res
        .times
        .iter()
        .map(|(what, t)| format!("{what} {t:.1} s"))
        .collect();
    let _ = writeln!(s, "- Wall time {wall_s:.1} s ({}).", times.join(", "));
    if mismatches.is_empty() {
        let _ = writeln!(
            s,
            "- Oracle: all {checks} checked measurements and builds matched the `HashMap` oracle."
        );
    } else {
        let _ = writeln!(
            s,
            "- **Oracle: {} of {checks} checks did NOT match**: {}.",
            mismatches.len(),
            mismatches.join("; ")
        );
    }
    if !plan.runs(Experiment::Probes) {
        let _ = writeln!(
            s,
            "- Probe counts: not measured in this run (`--experiments` left out `probes`)."
        );
    } else if !probes_reported {
        let _ = writeln!(
            s,
            "- Probe counts: the {} backend reported 0 probes, so the probe CSV and plot were skipped \
             (exact counts come from `--backend cpu`).",
            ctx.backend
        );
    }
    let _ = writeln!(
        s,
        "\nRates in M keys/s as `insert / find 100% / 50% / 0% present`; probes per operation in the same \
         order; `failed`: the table could not be built at that load.\n"
    );
    let _ = writeln!(
        s,
        "| scheme | B | rates at load 0.8 | rates at load 0.9 | probes at load 0.9 | max load with >= 99% success |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for &scheme in selected {
        let _ = writeln!(
            s,
            "| {scheme} | {} | {} | {} | {} | {} |",
            bucket(scheme),
            rates_cell(ctx, res, scheme, 0.8),
            rates_cell(ctx, res, scheme, 0.9),
            probes_cell(res, scheme, 0.9, probes_reported),
            max_load_cell(res, scheme)
        );
    }
    for (status, what) in [
        (
            Status::BuildFailed,
            "Rate points whose build failed even after re-seeded rebuilds (keys left unplaced; not plotted)",
        ),
        (
            Status::Skipped,
            "Rate points skipped because a lower load of the same scheme and N failed to build",
        ),
    ] {
        let per_scheme: Vec<String> = selected
            .iter()
            .filter_map(|&scheme| {
                // (keys, load) pairs, each once (experiments 1 and 2 meet at experiment 1's N), by keys then load.
                let mut at: Vec<(u32, f64)> = res
                    .by_load
                    .iter()
                    .chain(&res.by_keys)
                    .filter(|p| p.scheme == scheme && p.status == status)
                    .map(|p| (p.keys.trailing_zeros(), p.load))
                    .collect();
                at.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
                at.dedup();
                let loads: Vec<String> = at.iter().map(|(k, l)| format!("{l} at 2^{k}")).collect();
                (!loads.is_empty()).then(|| format!("{scheme}: {}", loads.join(", ")))
            })
            .collect();
        if !per_scheme.is_empty() {
            let _ = writeln!(s, "\n{what}, as load at keys: {}.", per_scheme.join("; "));
        }
    }
    let _ = writeln!(s, "\nFiles: {}.", files.join(", "));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// A command line holding only the sweep's options.
    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: SweepArgs,
    }

    fn parse(args: &[&str]) -> SweepArgs {
        Cmd::try_parse_from(std::iter::once("sweep").chain(args.iter().copied()))
            .expect("valid arguments")
            .args
    }

    #[test]
    fn quick_preset_and_overrides() {
        let p = Plan::resolve(&parse(&["--quick"])).unwrap();
        assert_eq!(
            (p.log2_keys, p.loads.len(), p.seeds, p.runs),
            (14, 4, 20, 2)
        );
        assert!(p.loads.contains(&0.8) && p.loads.contains(&0.9));
        let p = Plan::resolve(&parse(&[
            "--quick",
            "--seeds",
            "7",
            "--load",
            "0.9,0.5,0.9",
        ]))
        .unwrap();
        assert_eq!((p.seeds, p.loads.clone()), (7, vec![0.5, 0.9]));
        let p = Plan::resolve(&parse(&[])).unwrap();
        assert_eq!((p.log2_keys, p.seeds, p.success_loads.len()), (20, 100, 20));
        assert!(Plan::resolve(&parse(&["--load", "0"])).is_err());
        assert!(Plan::resolve(&parse(&["--min-log2-keys", "9", "--max-log2-keys", "8"])).is_err());
    }

    #[test]
    fn experiments_subset_writes_only_its_outputs() {
        let dir =
            std::env::temp_dir().join(format!("hashtile-sweep-subset-{}", std::process::id()));
        let out = dir.to_str().unwrap();
        let args = parse(&[
            "--backend",
            "cpu",
            "--scheme",
            "bcht,1cht",
            "--experiments",
            "success",
            "--success-log2-keys",
            "8",
            "--success-load",
            "0.5,0.7",
            "--seeds",
            "2",
            "--out",
            out,
        ]);
        assert_eq!(
            Plan::resolve(&args).unwrap().experiments,
            vec![Experiment::Success]
        );
        assert_eq!(
            run(Setup::new(args).unwrap()),
            Ok(0),
            "every build matches the oracle"
        );
        let success = std::fs::read_to_string(dir.join("success_rate.csv")).unwrap();
        // Header + 2 schemes x 2 loads.
        assert_eq!(success.lines().count(), 1 + 2 * 2, "{success}");
        assert!(
            success.contains("cpu,1cht,1,256,0.5,2,2,100.0,true"),
            "{success}"
        );
        for skipped in [
            "rates_vs_load.csv",
            "rates_vs_keys.csv",
            "probes_vs_load.csv",
        ] {
            assert!(
                !dir.join(skipped).exists(),
                "{skipped} written for an experiment not run"
            );
        }
        let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
        assert!(!summary.contains("**Partial**"), "{summary}");
        assert!(summary.contains("not measured in this run"), "{summary}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn setup_refuses_bad_input() {
        let err = |a: &[&str]| {
            let args = parse(&[&["--backend", "cpu", "--quick"][..], a].concat());
            Setup::new(args).err().unwrap_or_default()
        };
        assert!(err(&["--runs", "0"]).contains("--runs 0"));
        assert!(err(&["--seeds", "0"]).contains("--seeds 0"));
        assert!(err(&["--bucket", "3"]).contains("--bucket 3"));
        assert!(err(&["--scheme", "iht:3"]).contains("power of two"));
        assert!(err(&["--scheme", "iht:"]).contains("bad bucket size"));
        assert!(err(&["--scheme", "nope"]).contains("unknown scheme 'nope'"));
        assert!(err(&["--load", "nan"]).contains("(0, 1]"));
        assert!(err(&["--log2-keys", "31"]).contains("1..=30"));
        let slots = err(&[
            "--experiments",
            "success",
            "--success-log2-keys",
            "30",
            "--success-load",
            "0.1",
        ]);
        assert!(slots.contains("more than a table can index"), "{slots}");
        assert!(Setup::new(parse(&["--backend", "cpu", "--quick"])).is_ok());
    }

    #[test]
    fn bucket_sizes() {
        assert_eq!(bucket_of::<hashtile::Cht1>(16), Ok(1));
        assert_eq!(bucket_of::<hashtile::Bcht>(8), Ok(8));
        assert!(bucket_of::<hashtile::Bcht>(64).is_err());
        assert!(scheme_names().contains(&"bcht"));
    }

    #[test]
    fn tiny_sweep_writes_every_output() {
        let dir = std::env::temp_dir().join(format!("hashtile-sweep-test-{}", std::process::id()));
        let out = dir.to_str().unwrap();
        let args = parse(&[
            "--backend",
            "cpu",
            "--log2-keys",
            "8",
            "--load",
            "0.5,0.8,0.9",
            "--min-log2-keys",
            "6",
            "--max-log2-keys",
            "7",
            "--success-log2-keys",
            "8",
            "--success-load",
            "0.5,0.99",
            "--seeds",
            "3",
            "--runs",
            "1",
            "--out",
            out,
        ]);
        assert_eq!(
            run(Setup::new(args).unwrap()),
            Ok(0),
            "every result matches the oracle"
        );
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let schemes = scheme_names().len();
        // Header + schemes x loads x (insert + 3 finds).
        assert_eq!(
            read("rates_vs_load.csv").lines().count(),
            1 + schemes * 3 * 4
        );
        assert_eq!(
            read("rates_vs_keys.csv").lines().count(),
            1 + schemes * 2 * 2 * 4
        );
        assert_eq!(
            read("probes_vs_load.csv").lines().count(),
            1 + schemes * 3 * 4
        );
        let success = read("success_rate.csv");
        assert!(
            success.contains("cpu,bcht,16,256,0.5,3,3,100.0,true"),
            "{success}"
        );
        let summary = read("summary.md");
        assert!(summary.contains("| bcht | 16 |"), "{summary}");
        assert!(
            summary.contains("matched the `HashMap` oracle"),
            "{summary}"
        );
        for svg in [
            "rates_vs_load.svg",
            "rates_vs_keys.svg",
            "probes_vs_load.svg",
            "success_rate.svg",
        ] {
            assert!(read(svg).contains("bcht (B=16)"), "{svg}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
