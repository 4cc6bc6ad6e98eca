//! `hashtile-bench`: insert and find rates (M keys/s) of a table on any backend, every result checked against
//! a `std::collections::HashMap` oracle in the same run, written as CSV.
//!
//! Timing: one warm-up run (JIT compilation, allocation), then `--runs` timed runs; each rate is the median.
//! On GPUs the keys, values and outputs are device-resident and each timed region ends with a device sync,
//! so rates are device rates (launch included, host transfers excluded).
//!
//! Subcommands: `rates` (the above; also what runs when no subcommand is given), `sweep` (the BGHT paper's
//! experiments over every scheme: rates vs load factor and vs N, probes, build success rate; see `sweep/`)
//! `host` (the user-facing calls on host data, `Vec`s and pinned buffers, against the bus or `HashMap`
//! measured in the same run; see `host.rs`), `csr` (CSR tables: build, count, find_all, joins; `csr/`) and
//! `scan` (the device prefix sum against a device copy; `scan.rs`), `chained` (issue 10's experiments on the
//! chained (SlabHash) tables: bulk build and finds vs memory utilisation, incremental batches against
//! rebuilding BCHT, operation mixes, the slab allocator, the host calls against the CPU store, beside the
//! original SlabHash's results where given; one file per experiment in `chained/`), `paged` (issue 12's
//! experiments on paged tables larger than their device budget; `paged/`), `first-call` (a fresh process's first
//! insert and find, cold and from the persistent kernel cache; `first_call.rs`), `sharded` (issue 31: a sharded table
//! over 1, 2, 4 devices against one device's table; `sharded.rs`).
//!
//! Layout, top down: this file (the exit path) and `cli` (the command line) import the modes; each mode (`rates/`,
//! `sweep/`, `host.rs`, `csr/`, `scan.rs`, `chained/`, `paged/`, `first_call.rs`, `sharded.rs`) holds its options, their checks and its
//! measurements; the leaves below them import no mode: `checks` (shared checks of the command line), `families`
//! (the chained and CSR tables' host calls against the static table's, for `host`), `footprint`
//! (memory estimates), `common` (the median, keys, scheme parameters, oracle checks), `baseline` (the device
//! BCHT baseline), `error` ([`error::BenchError`]) and `plot` (SVG plots). No module imports one that imports it
//! back, and no submodule imports from its parent `mod.rs`.

mod baseline;
mod chained;
mod checks;
mod cli;
mod common;
mod csr;
mod error;
mod families;
mod first_call;
mod footprint;
mod host;
mod paged;
mod plot;
mod rates;
mod scan;
mod sharded;
mod sharded_device;
mod sharded_ranks;
mod sweep;

use cli::Cmd;
use error::BenchError;

/// The one exit path: a bad command line prints `error: ...` and exits with status 2 (before anything is
/// measured), a failed run `error: ...` and status 1; otherwise the mode's status (2: a result did not match
/// the oracle).
fn main() {
    let status = match run() {
        Ok(status) => status,
        Err(e) => {
            eprintln!("error: {e}");
            e.status()
        }
    };
    std::process::exit(status);
}

/// Parses and checks the command line, then runs the mode it asks for; returns the exit status.
fn run() -> Result<i32, BenchError> {
    let cli = cli::parse()?;
    if cli.trace {
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(std::io::stderr)
            .init();
    }
    match cli.cmd {
        Some(Cmd::Sweep(a)) => sweep::run(sweep::Setup::new(a)?),
        Some(Cmd::Rates(args)) => rates::run(rates::check(args)?),
        Some(Cmd::Host(args)) => host::run(&host::check(args)?).map_err(BenchError::Run),
        Some(Cmd::Csr(args)) => csr::run(&csr::check(args)?).map_err(BenchError::Run),
        Some(Cmd::Scan(args)) => scan::run(&scan::check(args)?).map_err(BenchError::Run),
        Some(Cmd::Chained(args)) => chained::run(&chained::check(args)?).map_err(BenchError::Run),
        Some(Cmd::Paged(args)) => paged::run(&paged::check(args)?).map_err(BenchError::Run),
        Some(Cmd::Sharded(args)) => sharded::run(&sharded::check(args)?).map_err(BenchError::Run),
        Some(Cmd::FirstCall(args)) => {
            first_call::run(&first_call::check(args)?).map_err(BenchError::Run)
        }
        None => rates::run(rates::check(cli.rates)?),
    }
}
