//! Experiment 3: average probes per operation vs load factor.

use super::common::{Ctx, FINDS, KeySet, Status, config, is_build_failure, rate_ops};
use super::schemes::bucket_of;
use crate::common::{check, queries};
use hashtile::{HashTable, ProbeStats, SchemeInfo};

/// One probe count (experiment 3).
#[derive(Debug, Clone)]
pub(super) struct ProbePoint {
    /// Scheme name.
    pub(super) scheme: &'static str,
    /// Bucket size.
    pub(super) bucket: u32,
    /// Load factor.
    pub(super) load: f64,
    /// `insert` or `find`.
    pub(super) op: &'static str,
    /// Fraction of the queries present (1 for inserts).
    pub(super) present: f64,
    /// Probe totals (`None` when the build failed).
    pub(super) stats: Option<ProbeStats>,
    /// Outcome.
    pub(super) status: Status,
}

/// Average probes of scheme `S` at `load` (experiment 3): one deterministic build, then the three find mixes.
pub(super) fn probe_point<S: SchemeInfo>(
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
