//! The command line of `hashtile-bench`: the top-level clap definitions ([`Cli`], [`Cmd`]) and the parse. Each
//! mode's options and their checks live beside the mode (`rates::args`, `sweep::args`, `host`, `csr::args`,
//! `scan`, `chained::args`, `paged::args`), the checks the modes share in `checks` and the memory estimates in
//! `footprint`: this module imports them, none of them imports it.
//!
//! Every bad input ends in one `error: ...` line on stderr and exit status 2
//! ([`crate::error::BenchError::Input`], printed by `main`), before anything large is allocated: never a panic,
//! never an allocation the machine cannot hold. The checks run in this order: parsing (clap), values (ranges,
//! lists, names), table sizes (slots must fit in `u32`), the backend (an explicitly asked GPU backend must
//! answer), memory (an estimate of the run's peak host and device bytes against what the machine has).

use crate::{chained, csr, first_call, host, paged, rates, scan, sharded, sweep};

/// The command line: a subcommand, or the `rates` options alone (the original flat invocation).
#[derive(clap::Parser, Debug)]
#[command(
    version,
    about = "Insert / find rates of hashtile tables, checked against a HashMap oracle",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to run; without one, the `rates` options below apply.
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    /// Options of the default (`rates`) mode.
    #[command(flatten)]
    pub rates: rates::Args,
    /// Print the library's phase timings (`tracing` events of target `hashtile` at level TRACE) on stderr
    /// (after a subcommand: `hashtile-bench chained --trace`). Each phase mark waits for the device, so a
    /// traced run is slower: for diagnosis, not for figures.
    #[arg(long, global = true)]
    pub trace: bool,
}

/// Subcommands of `hashtile-bench`.
#[derive(clap::Subcommand, Debug)]
pub enum Cmd {
    /// Insert / find rates per load factor, checked against a HashMap oracle (the default mode).
    Rates(rates::Args),
    /// The BGHT paper's experiments for every scheme: rates vs load factor and vs N, average probes, build
    /// success rate over seeds; CSV, SVG plots and summary.md.
    Sweep(sweep::SweepArgs),
    /// The user-facing calls (`insert`, `find_into`, `find`, upsert) on host data, from `Vec`s and from pinned
    /// buffers, each against a ceiling measured in the same run (GPUs: the bus; CPU: `std::collections::HashMap`).
    Host(host::HostArgs),
    /// CSR (HashGraph) tables: build, count, find_all and joins over hash ranges and duplicates per key, against
    /// a `HashMap<K, Vec<V>>` multimap and hashtile's BCHT measured in the same run (on GPUs also
    /// device-resident), with SVG plots beside the CSV.
    Csr(csr::CsrArgs),
    /// The device prefix sum (`gpu::scan::exclusive_scan`, the CSR build's scan) at several sizes, against a
    /// device copy of the same words measured in the same run, every result checked against a host prefix sum.
    Scan(scan::ScanArgs),
    /// Chained (SlabHash) tables on a GPU, issue 10's experiments (`--experiments`): bulk build and finds vs
    /// memory utilisation (with BCHT's insert and, from `--peer-csv`, the original SlabHash beside them),
    /// incremental batches (SlabHash's Figure 6, against rebuilding BCHT after each batch), operation mixes,
    /// the slab allocator alone, and the user-facing host calls (against the CPU store). One CSV and one SVG
    /// per experiment in `--out-dir`; every answer checked.
    Chained(chained::ChainedArgs),
    /// Paged tables (Starfish) larger than their device budget, issue 12's experiments (`--experiments`): rates
    /// vs resident children beside a plain table and the pinned copy ceiling, concentrated vs uniform finds,
    /// a confined rebuild vs a whole-table rebuild, growth vs rebuild-per-batch, and one big table. One CSV (and
    /// SVG) per experiment in `--out-dir`; every answer checked.
    Paged(paged::PagedArgs),
    /// What a fresh process pays for its first insert and find: a cold process (every kernel compiled) and
    /// warm ones (every kernel loaded from the persistent kernel cache), each also timing a second table's
    /// calls; every answer checked.
    FirstCall(first_call::FirstCallArgs),
    /// A sharded table over 1, 2, 4, ... devices against one device's table in the same run (weak scaling:
    /// the same keys per shard): insert, find_into and find on host data, every answer checked; CSV and an SVG
    /// plot of speedup against devices.
    Sharded(sharded::ShardedArgs),
}

/// Parses the process's command line. `--help` and `--version` print and exit here (status 0); every parse
/// error comes back as one line.
pub fn parse() -> Result<Cli, String> {
    parse_from(std::env::args_os())
}

/// [`parse`] of an explicit command line (its first item is the program name).
pub fn parse_from<I, T>(args: I) -> Result<Cli, String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::Parser;
    Cli::try_parse_from(args).map_err(|e| {
        if !e.use_stderr() {
            // --help, --version: not errors.
            e.exit();
        }
        clap_one_line(&e)
    })
}

/// A clap error as one line: the message and its tips (clap spreads them over several lines, followed by the
/// usage), without the leading `error: ` (main adds it back).
fn clap_one_line(e: &clap::Error) -> String {
    // `Display` renders without colour codes.
    let text = e.to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect();
    let joined = parts.join("; ");
    let msg = joined.strip_prefix("error: ").unwrap_or(&joined);
    let msg = if msg.is_empty() {
        "invalid command line"
    } else {
        msg
    };
    format!("{msg} (see --help)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashtile::Backend;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        parse_from(std::iter::once("hashtile-bench").chain(args.iter().copied()))
    }

    #[test]
    fn trace_is_accepted_alone_and_after_a_subcommand() {
        assert!(parse(&["--trace", "--log2-keys", "10"]).unwrap().trace);
        assert!(parse(&["chained", "--trace"]).unwrap().trace);
        assert!(!parse(&["host"]).unwrap().trace);
    }

    fn rates_of(args: &[&str]) -> Result<rates::args::Rates, String> {
        let cli = parse(args)?;
        rates::check(cli.rates)
    }

    #[test]
    fn clap_errors_are_one_line() {
        for bad in [
            &["--no-such-flag"][..],
            &["--runs", "x"],
            &["--log2-keys", "-3"],
            &["--claim", "swap"],
            &["--backend", "tpu"],
            &["sweep", "--experiments", "nope"],
        ] {
            let e = parse(bad).err().unwrap_or_else(|| panic!("{bad:?} parsed"));
            assert!(!e.contains('\n'), "{bad:?}: {e}");
            assert!(!e.starts_with("error"), "{bad:?}: {e}");
            assert!(!e.contains('\u{1b}'), "colour codes in {e:?}");
        }
        let e = parse(&["--claim", "swap"]).err().unwrap();
        assert!(e.contains("cas") && e.contains("exchange"), "{e}");
    }

    #[test]
    fn values_are_checked() {
        let err = |args: &[&str]| rates_of(args).err().unwrap_or_default();
        assert!(err(&["--runs", "0"]).contains("--runs 0"));
        assert!(err(&["--log2-keys", "40"]).contains("1..=30"));
        assert!(err(&["--log2-keys", "0"]).contains("1..=30"));
        for l in ["-0.5", "nan", "1.5", "0", "inf"] {
            assert!(err(&["--load", l]).contains("(0, 1]"), "{l}");
        }
        assert!(err(&["--bucket", "3"]).contains("power of two"));
        assert!(err(&["--bucket", "64"]).contains("power of two"));
        assert!(err(&["--scheme", "bcht,cuckoo"]).contains("unknown scheme 'cuckoo'"));
        assert!(err(&["--scheme", "1cht", "--num-hashes", "9"]).contains("1cht"));
        assert!(err(&["--csv", "/no/such/dir/x.csv"]).contains("does not exist"));
        let slots = err(&["--log2-keys", "30", "--load", "0.1"]);
        assert!(slots.contains("more than a table"), "{slots}");
        assert!(err(&["--ops", "count,sort"]).contains("unknown operation 'sort'"));
        assert!(err(&["--ops", "growth", "--wide"]).contains("drop --wide"));
        assert!(err(&["--ops", "mixed", "--wide"]).contains("drop --wide"));
    }

    #[test]
    fn ops_turn_on_their_flags() {
        let r = rates_of(&[
            "--backend",
            "cpu",
            "--log2-keys",
            "10",
            "--ops",
            "count,erase,set,growth,aging,mixed",
        ])
        .unwrap();
        assert!(r.args.count && r.args.erase && r.args.growth && r.args.aging);
        assert!(r.args.set && r.args.mixed);
        let r = rates_of(&["--backend", "cpu", "--log2-keys", "10", "--ops", "aging"]).unwrap();
        assert!(r.args.aging && !r.args.count && !r.args.erase && !r.args.growth);
    }

    #[test]
    fn good_input_is_accepted() {
        let r = rates_of(&[
            "--backend",
            "cpu",
            "--log2-keys",
            "10",
            "--scheme",
            "BCHT,1cht",
            "--bucket",
            "8,16",
        ])
        .unwrap();
        assert_eq!(r.backend, Backend::Cpu);
        assert_eq!(r.args.scheme, vec!["bcht", "1cht"]);
        assert_eq!(r.instances, vec![("bcht", 8), ("bcht", 16), ("1cht", 1)]);
    }

    #[test]
    fn chained_options_are_checked() {
        let of = |args: &[&str]| match parse(&[&["chained"][..], args].concat())?.cmd {
            Some(Cmd::Chained(a)) => chained::check(a),
            other => panic!("parsed as {other:?}"),
        };
        let err = |args: &[&str]| of(args).err().unwrap_or_default();
        assert!(err(&["--backend", "cpu"]).contains("GPU store"));
        assert!(err(&["--runs", "0"]).contains("--runs 0"));
        assert!(err(&["--loads", "9"]).contains("0.05..=8"));
        assert!(err(&["--log2-keys", "14"]).contains("--batches 15"));
        assert!(err(&["--log2-keys", "14", "--batches", "0"]).contains("--batches 0"));
        assert!(parse(&["chained", "--experiments", "bulk,nope"]).is_err());
        assert!(err(&["--peer-csv", "/no/such/peer.csv"]).contains("/no/such/peer.csv"));
        // Batch sizes only matter to `incremental`; experiments run once each, in the order given.
        let a = of(&[
            "--log2-keys",
            "14",
            "--experiments",
            "host,bulk,host",
            "--batches",
            "12,10,12",
        ])
        .unwrap();
        use crate::chained::Experiment::{Bulk, Host};
        assert_eq!(a.experiments, vec![Host, Bulk]);
        assert_eq!(a.batches, vec![10, 12]);
        assert_eq!(a.out_dir, ".");
    }

    #[test]
    fn sharded_options_are_checked() {
        let of = |args: &[&str]| match parse(&[&["sharded"][..], args].concat())?.cmd {
            Some(Cmd::Sharded(a)) => sharded::check(a),
            other => panic!("parsed as {other:?}"),
        };
        let err = |args: &[&str]| of(args).err().unwrap_or_default();
        assert!(err(&["--shards", "0,2"]).contains("--shards"));
        assert!(err(&["--load", "1.5"]).contains("--load 1.5"));
        assert!(err(&["--runs", "0"]).contains("--runs 0"));
        assert!(err(&["--scheme", "nope"]).contains("nope"));
        let a = of(&["--shards", "1,2,4,8", "--log2-keys", "20"]).unwrap();
        assert_eq!(a.shards, vec![1, 2, 4, 8]);
        assert_eq!(a.log2_keys, 20);
    }

    #[test]
    fn paged_switches_are_on_unless_turned_off() {
        let of = |args: &[&str]| match parse(&[&["paged", "--backend", "cpu"][..], args].concat())
            .unwrap()
            .cmd
        {
            Some(Cmd::Paged(a)) => paged::check(a).unwrap(),
            other => panic!("parsed as {other:?}"),
        };
        let s = of(&[]);
        assert!(s.framed_upserts && s.shared_frames && s.prefetch && !s.host_routing);
        let s = of(&["--no-framed-upserts", "--no-prefetch"]);
        assert!(!s.framed_upserts && s.shared_frames && !s.prefetch);
        let s = of(&["--no-shared-frames", "--host-routing"]);
        assert!(s.framed_upserts && !s.shared_frames && s.prefetch && s.host_routing);
    }
}
