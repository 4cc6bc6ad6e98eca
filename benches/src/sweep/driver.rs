//! Runs a checked sweep: the four experiments in order, a checkpoint of every output after each scheme or size,
//! then the final outputs and the exit status.

use super::args::{Experiment, Setup};
use super::common::{Ctx, KeySet, rate_ops};
use super::output::{checkpoint, write_outputs};
use super::probes::probe_point;
use super::rates::rate_points;
use super::results::Results;
use super::success::success_point;
use crate::error::BenchError;
use hashtile::SchemeInfo;
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Instant;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::args::{Plan, parse};
    use crate::sweep::schemes::scheme_names;

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
