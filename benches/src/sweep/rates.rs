//! Experiments 1 and 2: insert and find rates vs load factor and vs number of keys, measured by the `rates`
//! mode's code.

use super::common::{Ctx, FINDS, KeySet, Status, is_build_failure, rate_ops};
use super::schemes::bucket_of;
use crate::common::median;
use crate::rates::args::Args as RatesArgs;
use crate::rates::measure::measure;
use hashtile::SchemeInfo;

/// One rate measurement (experiments 1 and 2).
#[derive(Debug, Clone)]
pub(super) struct RatePoint {
    /// Scheme name (`SchemeInfo::NAME`).
    pub(super) scheme: &'static str,
    /// Bucket size.
    pub(super) bucket: u32,
    /// Inserted keys.
    pub(super) keys: usize,
    /// Load factor.
    pub(super) load: f64,
    /// `insert`, `find`, or on GPUs also `insert-async` (the kernel alone).
    pub(super) op: &'static str,
    /// Fraction of the queries present (1 for inserts).
    pub(super) present: f64,
    /// Median, min and max M keys/s over the timed runs (`None` when nothing was measured).
    pub(super) rate: Option<(f64, f64, f64)>,
    /// Pairs the build could not place (a build failure: the rate is of an incomplete table).
    pub(super) unplaced: usize,
    /// Outcome.
    pub(super) status: Status,
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
        // The sweep's many short rows keep to one warm-up run each (its rates are compared within a run).
        warm_ms: 0,
        paper_params: true,
        seed: ctx.args.seed,
        claim: None,
        reads: None,
        binning: Default::default(),
        range_order: vec![hashtile::gpu::RangeOrder::Auto],
        cur_range_order: hashtile::gpu::RangeOrder::Auto,
        no_upsert: ctx.args.no_upsert,
        find_lanes: None,
        insert_lanes: None,
        max_chain: ctx.args.max_chain,
        num_hashes: ctx.args.num_hashes,
        wide: false,
        count: false,
        count_repeats: 16,
        erase: false,
        growth: false,
        aging: false,
        mixed: false,
        set: false,
        ops: Vec::new(),
        ops_only: false,
        copy_chunks: 1,
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
pub(super) fn rate_points<S: SchemeInfo>(
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
