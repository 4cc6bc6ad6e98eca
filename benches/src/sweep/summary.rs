//! summary.md: the sweep's parameters, wall times, oracle verdict and one table row per scheme.

use super::args::Experiment;
use super::common::{Ctx, Status, rate_ops};
use super::probes::ProbePoint;
use super::rates::RatePoint;
use super::results::{Results, probe_at, rate_at};
use hashtile::Backend;
use std::fmt::Write as _;

/// Success fraction that counts as "builds" for the achievable-load column (paper Figure 1: ~99%).
const SUCCESS_BAR: f64 = 0.99;

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
pub(super) fn summary_md(
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
