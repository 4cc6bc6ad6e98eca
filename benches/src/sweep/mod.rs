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
//!
//! Layout: `args` (command line, presets, [`Setup`]'s checks), `rates` / `probes` / `success` (one experiment
//! family each), `driver` (runs the experiments in order), `output` (CSV files, plots, checkpoints) and
//! `summary` (summary.md); this file holds what they share.

use crate::common::distinct_keys;
use hashtile::{Backend, BackendChoice, Error, SchemeInfo, TableConfig};
use indicatif::ProgressBar;
use std::collections::HashMap;

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

// After the macro: the modules below expand it.
mod args;
mod driver;
mod output;
mod probes;
mod rates;
mod success;
mod summary;

pub use args::{Experiment, Setup, SweepArgs};
pub use driver::run;

use args::Plan;
use probes::ProbePoint;
use rates::RatePoint;
use success::SuccessPoint;

/// The three find mixes of the paper: fraction of the queries that are present.
const FINDS: [f64; 3] = [1.0, 0.5, 0.0];

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
    crate::common::scheme_params::<S>(
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

/// Names of every scheme of [`for_each_scheme!`], in order.
fn scheme_names() -> Vec<&'static str> {
    let mut v = Vec::new();
    for_each_scheme!(|S| {
        v.push(S::NAME);
    });
    v
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

    /// The sweep's options parsed from `args` (without the subcommand).
    pub(super) fn parse(args: &[&str]) -> SweepArgs {
        Cmd::try_parse_from(std::iter::once("sweep").chain(args.iter().copied()))
            .expect("valid arguments")
            .args
    }

    #[test]
    fn bucket_sizes() {
        assert_eq!(bucket_of::<hashtile::Cht1>(16), Ok(1));
        assert_eq!(bucket_of::<hashtile::Bcht>(8), Ok(8));
        assert!(bucket_of::<hashtile::Bcht>(64).is_err());
        assert!(scheme_names().contains(&"bcht"));
    }
}
