//! The `paged` mode's options ([`PagedArgs`], [`Experiment`]), their checks ([`check`]) and what they resolve to
//! ([`PagedSetup`]).

use crate::checks::{available_backend, check_log2_keys, check_repeats};
use hashtile::{Backend, BackendChoice, Placement};

/// The experiments, in the order they run.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    Residency,
    Skew,
    Rebuild,
    Growth,
    Big,
}

/// What the paged mode measures (checked by [`check`]).
#[derive(Debug, Clone)]
pub struct PagedSetup {
    pub backend: Backend,
    pub experiments: Vec<Experiment>,
    pub children: usize,
    pub child_mib: u64,
    pub log2_keys: u32,
    pub log2_batch: u32,
    pub runs: usize,
    pub big_gib: u64,
    pub big_budget_gib: u64,
    pub big_keys: u32,
    pub placements: Vec<Placement>,
    /// Hash-routed batches are partitioned on the host (`PagedConfig::device_routing` off).
    pub host_routing: bool,
    /// `PagedConfig::framed_upserts` (on unless `--no-framed-upserts`).
    pub framed_upserts: bool,
    /// `PagedConfig::shared_frames` (on unless `--no-shared-frames`).
    pub shared_frames: bool,
    /// `PagedConfig::prefetch` (on unless `--no-prefetch`).
    pub prefetch: bool,
    /// `residency`: only the budget that holds every child (and the comparison with the plain table).
    pub all_resident_only: bool,
    pub out_dir: String,
}

/// Options of the `paged` mode.
#[derive(clap::Args, Debug, Clone)]
pub struct PagedArgs {
    /// Backend: auto, cpu, cuda or vulkan.
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// Experiments, comma separated: residency, skew, rebuild, growth, big.
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "residency,skew,rebuild,growth"
    )]
    pub experiments: Vec<Experiment>,
    /// Placements of `residency` and `skew`, comma separated: hash, arrival.
    #[arg(long, value_delimiter = ',', default_value = "hash,arrival", value_parser = ["hash", "arrival"])]
    pub placements: Vec<String>,
    /// Partition hash-routed batches on the host instead of the device (the A/B of the device routing).
    #[arg(long)]
    pub host_routing: bool,
    /// Turn framed upserts off: every hash-routed upsert batch is partitioned by child, even with every child
    /// resident in the shared frames (`PagedConfig::framed_upserts`; the A/B of the framed upserts).
    #[arg(long)]
    pub no_framed_upserts: bool,
    /// Turn the shared frames off: each resident GPU child has its own slot allocation and finds partition the
    /// batch by child (`PagedConfig::shared_frames`; the A/B of the shared frames).
    #[arg(long)]
    pub no_shared_frames: bool,
    /// Turn prefetch off: each child is paged in when its turn comes, not while the previous child works
    /// (`PagedConfig::prefetch`; the A/B of the prefetch).
    #[arg(long)]
    pub no_prefetch: bool,
    /// `residency`: run only the budget that holds every child, and the comparison with the plain table.
    #[arg(long)]
    pub all_resident_only: bool,
    /// Children of the `residency` and `skew` tables (a power of two, at least 4).
    #[arg(long, default_value_t = 16)]
    pub children: usize,
    /// MiB of slots per child (1..=1024; the paper's page is 64).
    #[arg(long, default_value_t = 64)]
    pub child_mib: u64,
    /// Keys of `rebuild` and the final size of `growth`, as a power of two.
    #[arg(long, default_value_t = 26)]
    pub log2_keys: u32,
    /// Batch of `growth`, as a power of two.
    #[arg(long, default_value_t = 20)]
    pub log2_batch: u32,
    /// Timed runs of each find and rebuild (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// GiB of slots of the `big` table.
    #[arg(long, default_value_t = 16)]
    pub big_gib: u64,
    /// Device budget of the `big` table, GiB.
    #[arg(long, default_value_t = 4)]
    pub big_budget_gib: u64,
    /// Key (and value) bits of the `big` table: 32 (BCHT children) or 64 (IHT children, 16-byte slots).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(32..=64))]
    pub big_keys: u32,
    /// Output directory (created).
    #[arg(long, default_value = ".")]
    pub out_dir: String,
}

/// Checks the `paged` mode's options.
pub fn check(a: PagedArgs) -> Result<PagedSetup, String> {
    let runs = check_repeats("--runs", a.runs)?;
    let log2_keys = check_log2_keys("--log2-keys", a.log2_keys)?;
    if !(a.children.is_power_of_two() && a.children >= 4) {
        return Err(format!(
            "--children {}: a power of two, at least 4",
            a.children
        ));
    }
    if !(1..=1024).contains(&a.child_mib) {
        return Err(format!("--child-mib {}: 1..=1024", a.child_mib));
    }
    if a.log2_batch == 0 || a.log2_batch > log2_keys {
        return Err(format!("--log2-batch {}: 1..=--log2-keys", a.log2_batch));
    }
    if a.big_keys != 32 && a.big_keys != 64 {
        return Err(format!("--big-keys {}: 32 or 64", a.big_keys));
    }
    if a.big_gib == 0 || a.big_budget_gib == 0 || a.big_budget_gib > a.big_gib {
        return Err(
            "--big-gib and --big-budget-gib: at least 1, and the budget at most the table".into(),
        );
    }
    Ok(PagedSetup {
        backend: available_backend(a.backend)?,
        experiments: a.experiments,
        children: a.children,
        child_mib: a.child_mib,
        log2_keys,
        log2_batch: a.log2_batch,
        runs,
        big_gib: a.big_gib,
        big_budget_gib: a.big_budget_gib,
        big_keys: a.big_keys,
        placements: a
            .placements
            .iter()
            .map(|p| {
                if p == "hash" {
                    Placement::HashRouted
                } else {
                    Placement::ArrivalOrder
                }
            })
            .collect(),
        host_routing: a.host_routing,
        framed_upserts: !a.no_framed_upserts,
        shared_frames: !a.no_shared_frames,
        prefetch: !a.no_prefetch,
        all_resident_only: a.all_resident_only,
        out_dir: a.out_dir,
    })
}
