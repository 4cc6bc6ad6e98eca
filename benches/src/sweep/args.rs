//! The sweep's command line: [`SweepArgs`], its presets and validation ([`Plan`]), and the checks run before
//! anything is allocated ([`Setup`]).

use super::schemes::{bucket_of, scheme_names};
use crate::checks::{
    available_backend, check_bucket, check_log2_keys, check_repeats, load_list, table_slots,
};
use crate::footprint::{
    Capacity, Footprint, check_footprint, host_api_footprint, keyset_footprint, measure_footprint,
};
use hashtile::{Backend, BackendChoice, SchemeInfo};
use std::collections::HashMap;
use std::path::PathBuf;

/// Arguments of `hashtile-bench sweep`. Options left unset take the full preset, or the `--quick` preset.
#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    /// Backend: auto, cpu, cuda or vulkan.
    #[arg(long, default_value = "auto")]
    pub(super) backend: BackendChoice,
    /// Schemes to run, comma separated (default: all of bcht, iht, p2bht, 1cht, linear, double); `name:B` gives
    /// one scheme its own bucket size, e.g. `--scheme bcht,iht:32,1cht` (the paper's success-rate comparison).
    #[arg(long, value_delimiter = ',')]
    pub(super) scheme: Vec<String>,
    /// Bucket size of every scheme that has a choice (1CHT always uses 1).
    #[arg(long, default_value_t = 16)]
    pub(super) bucket: u32,
    /// Keys of experiments 1 and 3, as a power of two [full: 20; quick: 14].
    #[arg(long)]
    pub(super) log2_keys: Option<u32>,
    /// Load factors of experiments 1 and 3, comma separated
    /// [full: 0.6,0.7,0.8,0.85,0.9,0.92,0.94,0.96,0.98,0.99; quick: 0.7,0.8,0.9,0.95].
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub(super) load: Option<Vec<f64>>,
    /// Keys of experiment 3 (probes), as a power of two [default: the keys of experiment 1]. Probe counts
    /// depend on the load factor, not on N; a smaller N keeps a 2^26 GPU sweep's host-side work short.
    #[arg(long)]
    pub probe_log2_keys: Option<u32>,
    /// Smallest number of keys of experiment 2 (rates vs N), as a power of two [full: 14; quick: 10].
    #[arg(long)]
    pub(super) min_log2_keys: Option<u32>,
    /// Largest number of keys of experiment 2, as a power of two [full: 20; quick: 14].
    #[arg(long)]
    pub(super) max_log2_keys: Option<u32>,
    /// Load factors of experiment 2 (rates vs N), comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.8,0.9",
        allow_negative_numbers = true
    )]
    pub(super) size_load: Vec<f64>,
    /// Keys of experiment 4 (build success rate), as a power of two [full: 16; quick: 14].
    #[arg(long)]
    pub(super) success_log2_keys: Option<u32>,
    /// Load factors of experiment 4, comma separated [full: 0.80, 0.81, .., 0.99; quick: 0.80, 0.84, 0.88,
    /// 0.90, 0.92, 0.94, 0.96, 0.98].
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub(super) success_load: Option<Vec<f64>>,
    /// Builds (hash-function seeds) per load factor in experiment 4 [full: 100; quick: 20].
    #[arg(long)]
    pub(super) seeds: Option<usize>,
    /// Timed runs per rate measurement, after one warm-up run (the median is reported) [full: 5; quick: 2].
    #[arg(long)]
    pub(super) runs: Option<usize>,
    /// Seed of the key generator.
    #[arg(long, default_value_t = 1)]
    pub(super) seed: u32,
    /// Longest cuckoo eviction chain (BCHT, 1CHT) [default: the scheme's, 100].
    #[arg(long)]
    pub max_chain: Option<u32>,
    /// Number of hash functions [default: the scheme's].
    #[arg(long)]
    pub num_hashes: Option<u32>,
    /// Skip the duplicate check on insert (the paper's bulk build of distinct keys; fewer insert probes).
    #[arg(long)]
    pub(super) no_upsert: bool,
    /// Output directory (CSV files, SVG plots, summary.md).
    #[arg(long, default_value = "sweep-out")]
    pub(super) out: PathBuf,
    /// Small preset (2^14 keys, 4 load factors, 2^10..2^14 keys for rates vs N, 20 seeds, 2 runs): a few
    /// seconds on 2 CPU cores.
    #[arg(long)]
    pub(super) quick: bool,
    /// Experiments to run, comma separated [default: all four]: `load` (rates vs load factor), `keys` (rates
    /// vs number of keys), `probes` (probes vs load factor), `success` (build success rate). Lets a long GPU
    /// sweep be split over several runs.
    #[arg(long, value_delimiter = ',', value_enum)]
    pub(super) experiments: Vec<Experiment>,
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
pub(super) struct Plan {
    /// log2 of the keys of experiment 1.
    pub(super) log2_keys: u32,
    /// log2 of the keys of experiment 3.
    pub(super) probe_log2_keys: u32,
    /// Load factors of experiments 1 and 3 (ascending).
    pub(super) loads: Vec<f64>,
    /// log2 of the key counts of experiment 2.
    pub(super) size_log2: Vec<u32>,
    /// Load factors of experiment 2 (ascending).
    pub(super) size_loads: Vec<f64>,
    /// log2 of the keys of experiment 4.
    pub(super) success_log2_keys: u32,
    /// Load factors of experiment 4 (ascending).
    pub(super) success_loads: Vec<f64>,
    /// Builds per load factor in experiment 4.
    pub(super) seeds: usize,
    /// Timed runs per rate.
    pub(super) runs: usize,
    /// The experiments to run (`--experiments`; all when not given).
    pub(super) experiments: Vec<Experiment>,
}

impl Plan {
    /// `true` if experiment `e` is to run.
    pub(super) fn runs(&self, e: Experiment) -> bool {
        self.experiments.contains(&e)
    }
    /// Applies the presets (`--quick` or full) to the options left unset and validates the result.
    pub(super) fn resolve(a: &SweepArgs) -> Result<Self, String> {
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

/// A checked `hashtile-bench sweep` command line: every option validated, the schemes picked, the backend
/// available and the sizes within the machine's memory ([`Setup::new`]), before anything is allocated.
pub struct Setup {
    /// The options as given.
    pub(super) args: SweepArgs,
    /// Resolved parameters.
    pub(super) plan: Plan,
    /// The schemes to run, in legend order.
    pub(super) selected: Vec<&'static str>,
    /// Bucket sizes given per scheme (`--scheme iht:32`).
    pub(super) own_buckets: HashMap<&'static str, u32>,
    /// The backend every table runs on.
    pub(super) backend: Backend,
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
                crate::common::scheme_params::<S>(
                    b,
                    true,
                    args.no_upsert,
                    args.max_chain,
                    args.num_hashes,
                )
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
                tables.push((e, n, table_slots(&what, n, load, b)?));
            }
        }
        if args.out.exists() && !args.out.is_dir() {
            return Err(format!(
                "--out {}: exists and is not a directory",
                args.out.display()
            ));
        }
        let backend = available_backend(args.backend)?;
        // Memory: the experiments run one after the other; each holds its key set and one table at a time
        // (rates vs N also holds experiment 1's key set, kept for the probes).
        let have = Capacity::of_machine(backend);
        for &(e, n, slots) in &tables {
            let keyset = keyset_footprint(n);
            let need = match e {
                Experiment::Load => keyset.plus(measure_footprint(backend, false, n, slots)),
                Experiment::Keys => {
                    let held = if plan.runs(Experiment::Load) {
                        keyset_footprint(1 << plan.log2_keys)
                    } else {
                        Footprint::default()
                    };
                    held.plus(keyset)
                        .plus(measure_footprint(backend, false, n, slots))
                }
                Experiment::Probes | Experiment::Success => {
                    keyset.plus(host_api_footprint(backend, n, slots))
                }
            };
            let what = format!(
                "the sweep's {} experiment with 2^{} keys on {backend}",
                experiment_name(e),
                n.trailing_zeros()
            );
            check_footprint(&what, need, have)?;
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

/// The sweep's options parsed from `args` (without the subcommand), for the tests.
#[cfg(test)]
pub(super) fn parse(args: &[&str]) -> SweepArgs {
    use clap::Parser;

    /// A command line holding only the sweep's options.
    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: SweepArgs,
    }

    Cmd::try_parse_from(std::iter::once("sweep").chain(args.iter().copied()))
        .expect("valid arguments")
        .args
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
