//! `hashtile-bench sweep`: the BGHT paper's experiments (sections 7.1-7.4 and Figure 1) for every scheme of
//! `for_each_scheme!` on one backend, written as CSV files, SVG plots and a `summary.md`.
//!
//! 1. **Rates vs load factor** at a fixed number of keys: insert and find (100%, 50%, 0% of the queries
//!    present) in M keys/s (`rates_vs_load.csv`, paper Fig. 3-4 left).
//! 2. **Rates vs number of keys** at fixed load factors (0.8, 0.9), N = 2^a..2^b (`rates_vs_keys.csv`, paper
//!    Fig. 4 right).
//! 3. **Average probes per operation vs load factor** (`probes_vs_load.csv`, paper section 7.4), exact on the
//!    CPU backend in deterministic mode; a backend that reports no probes gets no probe plot.
//! 4. **Build success rate** over `--seeds` hash-function seeds with no rebuilds (`success_rate.csv`, paper
//!    Figure 1), and the highest load factor that builds with at least 99% success.
//!
//! The rate measurements are the `rates` mode's own ([`crate::rates::measure`]: warm-up run, `--runs` timed
//! runs, median; device-resident data on GPUs). Every result of every experiment is checked against a
//! `std::collections::HashMap` oracle; a mismatch is reported and makes the command exit with status 2, like
//! the `rates` mode. A table that cannot be built at a load factor (a build failure, expected beyond a
//! scheme's achievable load) is recorded as such and the sweep goes on.
//!
//! Layout: `args` (command line, presets, [`Setup`]'s checks), `schemes` (the schemes' names and bucket
//! sizes), `common` (what every measurement reads: key sets, outcomes, the context), `rates` / `probes` /
//! `success` (one experiment family each), `results` (everything measured, and its lookups), `driver` (runs
//! the experiments in order), `output` (CSV files, plots, checkpoints) and `summary` (summary.md). This file
//! holds the list of schemes (`for_each_scheme!`, expanded by the modules below) and declares the modules;
//! none of them imports an item from it.

/// THE list of schemes the sweep runs, in legend order: expands `$body` once per scheme with `$s` bound to the
/// scheme type (`for_each_scheme!(|S| { run::<S>(); })`). One line per scheme; to leave a scheme out of
/// every experiment, comment out its line.
macro_rules! for_each_scheme {
    (|$s:ident| $body:block) => {{
        {
            type $s = hashtile::Bcht;
            $body
        } // BCHT: bucketed cuckoo hashing (--bucket, default 16)
        {
            type $s = hashtile::Iht;
            $body
        } // IHT: iceberg hashing (--bucket)
        {
            type $s = hashtile::P2bht;
            $body
        } // P2BHT: power-of-two-choices bucketed hashing (--bucket)
        {
            type $s = hashtile::Cht1;
            $body
        } // 1CHT: one-slot cuckoo hashing (bucket size always 1)
        {
            type $s = hashtile::LinearProbing;
            $body
        } // linear probing (--bucket: the window a tile reads, cuCollections' group size)
        {
            type $s = hashtile::DoubleHashing;
            $body
        } // double hashing (--bucket)
    }};
}

// After the macro: the modules below expand it.
mod args;
mod common;
mod driver;
mod output;
mod probes;
mod rates;
mod results;
mod schemes;
mod success;
mod summary;

pub use args::{Setup, SweepArgs};
pub use driver::run;
