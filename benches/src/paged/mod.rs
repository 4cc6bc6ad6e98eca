//! `hashtile-bench paged`: paged tables (Starfish, issue 12), every call made as users make it (host data), every
//! answer checked against the keys' formula (value = key ^ VALUE_MASK; absent keys come from a disjoint
//! counter range).
//!
//! Experiments (`--experiments`), one CSV and one SVG each in `--out-dir`:
//! - `residency`: a table of `--children` children (BCHT, `--child-mib` MiB each, filled to 0.75) built and
//!   searched under budgets of 1/4, 1/2, 3/4 and all of its children (the paper's Starfish-x), both
//!   placements; beside it, in the same run, a plain `HashTable` of the same slots and the pinned copy ceiling
//!   (swap traffic in GB/s against it).
//! - `skew`: finds at a budget of 1/4 of the children, with queries on the resident children's keys only
//!   (hash-routed: keys that route there; arrival order: the newest keys) against uniform queries.
//! - `rebuild`: `rebuild_child` of one child of a table of 2^`--log2-keys` keys against rebuilding a plain
//!   static table of the same keys (clear, then insert them all from the host).
//! - `growth`: batches of 2^`--log2-batch` keys into a growing hash-routed table (one child at first) up to
//!   2^`--log2-keys`, against a static table rebuilt for each size with every key so far.
//! - `big`: a table of `--big-gib` GiB of slots under a budget of `--big-budget-gib` GiB (hash-routed, keys
//!   generated per batch), built and sampled; swap GB/s against the pinned ceiling.
//!
//! A/B switches, each off by default and applied to every paged table of the run (the warm-up's included):
//! `--host-routing` (`PagedConfig::device_routing` off), `--no-framed-upserts` (`framed_upserts` off),
//! `--no-shared-frames` (`shared_frames` off) and `--no-prefetch` (`prefetch` off).
//!
//! Layout: `args` (the options, their checks and [`PagedSetup`]), `common` (keys, answers, the paged table's
//! configuration, timed fills and finds, outputs), `residency` (`residency`, `skew`), `rebuild` (`rebuild`,
//! `growth`) and `big`; this file warms up and runs the experiments asked for.

mod args;
mod big;
mod common;
mod rebuild;
mod residency;

pub use args::{PagedArgs, check};

use args::{Experiment, PagedSetup};
use common::{batch, lib, with_switches};
use hashtile::{
    BackendChoice, Bcht, DeviceBudget, HashTable, PagedConfig, PagedTable, TableConfig,
};

/// Compiles every kernel the experiments use (CubeCL compiles a kernel at its first launch, a one-time cost of
/// the process that would otherwise land in whichever experiment runs first): a small paged table that grows by
/// splits, rebuilds a child, finds and erases, and a plain table's insert and find.
fn warm_up(s: &PagedSetup) -> Result<(), String> {
    let cfg = PagedConfig::with_child_slots(1 << 12)
        .backend(BackendChoice::Exactly(s.backend))
        .budget(DeviceBudget::Children(4));
    let cfg = with_switches(s, cfg);
    let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(cfg).map_err(lib)?;
    let (k, v) = batch(0, 1 << 14);
    t.insert(&k, &v).map_err(lib)?;
    t.rebuild_child(0).map_err(lib)?;
    let mut out = vec![0u32; k.len()];
    t.find_into(&k, &mut out).map_err(lib)?;
    t.erase(&k[..16]).map_err(lib)?;
    let cfg = TableConfig::with_capacity(1 << 15).backend(BackendChoice::Exactly(s.backend));
    let mut plain: HashTable<Bcht, u32, u32> = HashTable::new(cfg).map_err(lib)?;
    plain.insert(&k, &v).map_err(lib)?;
    plain.find_into(&k, &mut out).map_err(lib)?;
    plain.clear().map_err(lib)?;
    plain.insert(&k, &v).map_err(lib)
}

/// Runs the experiments; the exit status is 2 when an answer was wrong.
pub fn run(s: &PagedSetup) -> Result<i32, String> {
    warm_up(s)?;
    let mut ok = true;
    for e in &s.experiments {
        eprintln!("paged: {e:?} on {}", s.backend);
        ok &= match e {
            Experiment::Residency => residency::residency(s)?,
            Experiment::Skew => residency::skew(s)?,
            Experiment::Rebuild => rebuild::rebuild(s)?,
            Experiment::Growth => rebuild::growth(s)?,
            Experiment::Big => big::big(s)?,
        };
    }
    if !ok {
        eprintln!("error: some answers did not match (see the `ok` columns)");
    }
    Ok(if ok { 0 } else { 2 })
}
