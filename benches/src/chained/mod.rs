//! `hashtile-bench chained`: issue 10's measurements of the chained (SlabHash) tables, one experiment per file,
//! each checked against the known truth and written as `<out-dir>/chained_<experiment>.csv` and `.svg` with a
//! table on stdout:
//! - `bulk` ([`bulk`]): device-resident bulk builds (multimap insert, SlabHash's `buildBulk`; and replace) and
//!   finds (present, absent) per load, against the memory utilisation they reach, with hashtile's BCHT insert
//!   and the original SlabHash (`--peer-csv`) beside them;
//! - `incremental` ([`incremental`]): the SlabHash paper's Figure 6, the keys inserted in batches, against
//!   rebuilding BCHT from scratch after each batch (issue 10's acceptance: at least 5x);
//! - `mixes` ([`mixes`]): the paper's operation mixes (insert, erase, find present, find absent) in one batch;
//! - `alloc` ([`alloc`]): the slab allocator alone, taking and giving back a whole pool;
//! - `host` ([`host`]): the user-facing `ChainedTable` calls on host `Vec`s, against the CPU store.
//!
//! Keys: 2^n distinct random u32 keys (a bijective mix of a counter, never the empty or tombstone key); the
//! first 2^n are stored, the next 2^n never are (absent queries). Timing as in the rest of `hashtile-bench`:
//! one warm-up, then `--runs` timed runs, the median reported; each timed region is the launch (or the call)
//! and a device sync, on device-resident data except in `host`. The process exits 2 when any answer was wrong.
//!
//! Beside the experiments: `args` (the options and their checks), `peer` (the original SlabHash's results) and
//! `common` (what the experiments share: the context, device helpers, formatting, the output files); this file
//! builds the key set and runs the experiments asked for.

mod alloc;
mod args;
mod bulk;
mod common;
mod host;
mod incremental;
mod mixes;
mod peer;

pub use args::{ChainedArgs, Experiment, check};

use common::{Ctx, value_of};
use hashtile::Backend;
use hashtile::gpu::transfer::HostTransfer;
use peer::Peer;
use std::path::PathBuf;

/// Runs the mode; returns the exit status (2 when an answer was wrong).
pub fn run(a: &ChainedArgs) -> Result<i32, String> {
    let backend = crate::checks::available_backend(a.backend)?;
    let peer = a.peer_csv.as_deref().map(Peer::read).transpose()?;
    if let Some(p) = peer
        .as_ref()
        .and_then(|p| p.log2_keys.filter(|&l| l != a.log2_keys))
    {
        eprintln!(
            "chained: warning: the peer CSV was measured at 2^{p} keys, this run has 2^{}: ratios compare different sizes",
            a.log2_keys
        );
    }
    let out = PathBuf::from(&a.out_dir);
    std::fs::create_dir_all(&out).map_err(|e| format!("--out-dir {}: {e}", out.display()))?;
    let n = 1usize << a.log2_keys;
    // Distinct keys: a bijective mix of a counter, skipping the two keys a chained table reserves.
    let mut all: Vec<u32> = (0u32..)
        .map(|i| hashtile::hash::fmix32(i ^ 0x9e37_79b9))
        .filter(|&k| k < u32::MAX - 1)
        .take(2 * n)
        .collect();
    let absent = all.split_off(n);
    let values = all.iter().map(|&k| value_of(k)).collect();
    let ctx = Ctx {
        a,
        backend,
        out,
        keys: all,
        absent,
        values,
        peer,
    };
    let ok = match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => experiments::<hashtile::cubecl::cuda::CudaRuntime>(&ctx),
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => experiments::<hashtile::cubecl::wgpu::WgpuRuntime>(&ctx),
        b => Err(format!(
            "{b} has no GPU store (use --backend cuda or vulkan)"
        )),
    }?;
    if !ok {
        eprintln!("chained: some answers were wrong (rows marked NO)");
    }
    Ok(if ok { 0 } else { 2 })
}

/// Runs the chosen experiments in order on runtime `R`; returns whether every answer was right.
fn experiments<R: HostTransfer>(ctx: &Ctx) -> Result<bool, String> {
    let mut ok = true;
    for &e in &ctx.a.experiments {
        eprintln!("chained: {} (2^{} keys)", e.name(), ctx.a.log2_keys);
        let good = match e {
            Experiment::Bulk => bulk::run::<R>(ctx),
            Experiment::Incremental => incremental::run::<R>(ctx),
            Experiment::Mixes => mixes::run::<R>(ctx),
            Experiment::Alloc => alloc::run::<R>(ctx),
            Experiment::Host => host::run(ctx),
        }
        .map_err(|err| format!("{}: {err}", e.name()))?;
        ok &= good;
    }
    Ok(ok)
}
