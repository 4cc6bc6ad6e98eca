//! Everything the sweep measured ([`Results`]) and the lookups into it that the plots and summary.md share.

use super::probes::ProbePoint;
use super::rates::RatePoint;
use super::success::SuccessPoint;

/// Everything measured.
#[derive(Default)]
pub(super) struct Results {
    /// Experiment 1.
    pub(super) by_load: Vec<RatePoint>,
    /// Experiment 2.
    pub(super) by_keys: Vec<RatePoint>,
    /// Experiment 3.
    pub(super) probes: Vec<ProbePoint>,
    /// Experiment 4.
    pub(super) success: Vec<SuccessPoint>,
    /// Wall time of each experiment, in order.
    pub(super) times: Vec<(&'static str, f64)>,
}

/// Looks up the median rate of `scheme` for `(op, present)` at `load` and `keys` keys.
pub(super) fn rate_at<'a>(
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
pub(super) fn probe_at<'a>(
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
