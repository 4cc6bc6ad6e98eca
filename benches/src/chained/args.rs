//! The `chained` mode's options ([`ChainedArgs`], [`Experiment`]) and their checks ([`check`]).

use super::peer::Peer;
use crate::checks::{check_log2_keys, check_repeats};
use hashtile::{Backend, BackendChoice};
use std::path::Path;

/// One experiment of the mode (`--experiments`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    /// Bulk build and finds vs memory utilisation.
    Bulk,
    /// Batches of inserts into one table vs rebuilding BCHT after each.
    Incremental,
    /// Mixed batches of inserts, erases and finds.
    Mixes,
    /// The slab allocator alone.
    Alloc,
    /// The user-facing calls on host data.
    Host,
}

impl Experiment {
    /// How `--experiments` and the output files spell it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Experiment::Bulk => "bulk",
            Experiment::Incremental => "incremental",
            Experiment::Mixes => "mixes",
            Experiment::Alloc => "alloc",
            Experiment::Host => "host",
        }
    }
}

/// Options of the `chained` mode.
#[derive(clap::Args, Debug, Clone)]
pub struct ChainedArgs {
    /// Backend: auto, cuda or vulkan (the GPU store; `host` also runs the CPU store for reference).
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// Keys, as a power of two (1..=30; 24 is SlabHash's benchmark size).
    #[arg(long, default_value_t = 24)]
    pub log2_keys: u32,
    /// Keys per base-slab slot for `bulk` (comma separated, each in 0.05..=8): sets the number of lists.
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.6,0.7,0.8,1.0")]
    pub loads: Vec<f64>,
    /// Timed runs per case after one warm-up (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Output directory (created): `chained_<experiment>.csv` and `.svg` for each experiment.
    #[arg(long, default_value = ".")]
    pub out_dir: String,
    /// Experiments to run, comma separated, in this order: `bulk` (build and finds vs memory utilisation),
    /// `incremental` (batches of `--batches` keys), `mixes` (operation mixes), `alloc` (the slab allocator),
    /// `host` (the user-facing calls on host data).
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "bulk,incremental,mixes,alloc,host"
    )]
    pub experiments: Vec<Experiment>,
    /// Batch sizes of `incremental`, as powers of two (comma separated, each below --log2-keys).
    #[arg(long, value_delimiter = ',', default_value = "15,17,20")]
    pub batches: Vec<u32>,
    /// The original SlabHash's results (the peers' `slab_bench` CSV: `slabhash,<table>,15,<log2 keys>,<util>,
    /// <op>,<G keys/s>,<ok|WRONG>`), shown beside ours with ratios in `bulk` and `incremental`.
    #[arg(long)]
    pub peer_csv: Option<String>,
    /// Lanes per tile of the GPU store (8 or 16; default: the store's, 8), in every experiment but `host`.
    #[arg(long)]
    pub tile_width: Option<u32>,
    /// How inserts take pool slabs: `hashed` (the store's default) or `resident` (SlabAlloc's resident blocks),
    /// in every experiment but `host` and `alloc`.
    #[arg(long, default_value = "hashed", value_parser = ["hashed", "resident"])]
    pub allocator: String,
}

/// Checks the `chained` mode's options (the peer CSV is parsed here, so that a bad one stops the run before
/// anything is measured).
pub fn check(mut a: ChainedArgs) -> Result<ChainedArgs, String> {
    check_repeats("--runs", a.runs)?;
    check_log2_keys("--log2-keys", a.log2_keys)?;
    if a.backend == BackendChoice::Exactly(Backend::Cpu) {
        return Err(
            "--backend cpu: this mode measures the GPU store (use auto, cuda or vulkan)".into(),
        );
    }
    if a.loads.is_empty() || a.loads.iter().any(|l| !(0.05..=8.0).contains(l)) {
        return Err(format!("--loads {:?}: each must be in 0.05..=8", a.loads));
    }
    if a.out_dir.is_empty() {
        return Err("--out-dir: empty directory name".into());
    }
    if Path::new(&a.out_dir).exists() && !Path::new(&a.out_dir).is_dir() {
        return Err(format!(
            "--out-dir {}: exists and is not a directory",
            a.out_dir
        ));
    }
    // Each experiment once, in the order first given.
    let mut seen = Vec::new();
    a.experiments.retain(|e| {
        let new = !seen.contains(e);
        seen.push(*e);
        new
    });
    if a.experiments.is_empty() {
        return Err("--experiments: no experiment given".into());
    }
    a.batches.sort_unstable();
    a.batches.dedup();
    if a.experiments.contains(&Experiment::Incremental) {
        if a.batches.is_empty() {
            return Err("--batches: no batch size given".into());
        }
        if let Some(b) = a.batches.iter().find(|&&b| b == 0 || b >= a.log2_keys) {
            return Err(format!(
                "--batches {b}: each must be in 1..{} (a batch is smaller than the 2^{} keys)",
                a.log2_keys, a.log2_keys
            ));
        }
    }
    if let Some(p) = &a.peer_csv {
        Peer::read(p)?;
    }
    Ok(a)
}
