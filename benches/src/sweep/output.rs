//! The sweep's outputs: CSV files and SVG plots of every experiment, the oracle verdict, and the checkpoints
//! that rewrite them all while the sweep runs.

use super::args::Experiment;
use super::common::{Ctx, Status, rate_ops};
use super::rates::RatePoint;
use super::results::{Results, probe_at, rate_at};
use super::summary::summary_md;
use crate::plot::{Figure, Panel, Series, XAxis, write_svg};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

/// Writes every output with what has been measured so far, marked partial, so that a sweep cut short (a
/// device call's time limit, Ctrl-C) still leaves its CSV files, plots and summary behind.
pub(super) fn checkpoint(
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
pub(super) fn op_title(op: &str, present: f64) -> String {
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
pub(super) fn write_outputs(
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
