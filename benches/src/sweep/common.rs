//! What the sweep's experiments share: the find mixes, the key set and its oracle, a measurement's outcome, the
//! context every measurement reads ([`Ctx`]) and the tables' configuration.

use super::args::{Plan, SweepArgs};
use crate::common::{distinct_keys, scheme_params};
use hashtile::{Backend, BackendChoice, Error, SchemeInfo, TableConfig};
use indicatif::ProgressBar;
use std::collections::HashMap;

/// The three find mixes of the paper: fraction of the queries that are present.
pub(super) const FINDS: [f64; 3] = [1.0, 0.5, 0.0];

/// Distinct keys, their values and the oracle built from them.
pub(super) struct KeySet {
    /// Number of inserted keys.
    pub(super) n: usize,
    /// `2n` distinct keys: the first `n` are inserted, the rest are the absent queries.
    pub(super) keys: Vec<u32>,
    /// The value of each of the first `n` keys.
    pub(super) values: Vec<u32>,
    /// `key -> value` of the inserted pairs.
    pub(super) oracle: HashMap<u32, u32>,
}

impl KeySet {
    /// `2^log2` inserted keys from the `rates` mode's generator, with the `rates` mode's values.
    pub(super) fn new(log2: u32, seed: u32) -> Self {
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
    pub(super) fn inserted(&self) -> &[u32] {
        &self.keys[..self.n]
    }
}

/// Outcome of one measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
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
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::BuildFailed => "build-failed",
            Status::Mismatch => "MISMATCH",
            Status::Skipped => "skipped",
        }
    }
}

/// What every measurement needs.
pub(super) struct Ctx {
    /// The options as given.
    pub(super) args: SweepArgs,
    /// Resolved parameters.
    pub(super) plan: Plan,
    /// The backend every table runs on.
    pub(super) backend: Backend,
    /// One progress bar over all steps.
    pub(super) bar: ProgressBar,
    /// Bucket sizes given per scheme (`--scheme iht:32`); others use `--bucket`.
    pub(super) own_buckets: HashMap<&'static str, u32>,
}

impl Ctx {
    /// The bucket size asked for scheme `name`.
    pub(super) fn bucket_for(&self, name: &str) -> u32 {
        self.own_buckets
            .get(name)
            .copied()
            .unwrap_or(self.args.bucket)
    }
}

/// The scheme's paper parameters for `bucket` (the sweep repeats the paper's experiments), with `--no-upsert`,
/// `--max-chain` and `--num-hashes` applied (checked before the sweep starts, so this cannot fail later).
pub(super) fn params_of<S: SchemeInfo>(ctx: &Ctx, bucket: u32) -> hashtile::SchemeParams {
    scheme_params::<S>(
        bucket,
        true,
        ctx.args.no_upsert,
        ctx.args.max_chain,
        ctx.args.num_hashes,
    )
    .expect("parameters validated before the sweep")
}

/// A table config for scheme `S` on the sweep's backend.
pub(super) fn config<S: SchemeInfo>(ctx: &Ctx, n: usize, load: f64, bucket: u32) -> TableConfig {
    TableConfig::for_keys(n, load)
        .bucket_size(bucket)
        .params(params_of::<S>(ctx, bucket))
        .backend(BackendChoice::Exactly(ctx.backend))
}

/// `true` for the errors that mean "this table cannot be built here" rather than a fault.
pub(super) fn is_build_failure(e: &Error) -> bool {
    matches!(e, Error::BuildFailed { .. } | Error::StashOverflow { .. })
}

/// The ops a rate measurement reports (insert, then the three find mixes), as `(op, present)`.
pub(super) fn rate_ops() -> impl Iterator<Item = (&'static str, f64)> {
    std::iter::once(("insert", 1.0)).chain(FINDS.iter().map(|&p| ("find", p)))
}
