//! What the `chained` mode's experiments share: the context ([`Ctx`]: options, key set, peer results), device
//! helpers, rate and table formatting, and the output files.

use super::args::ChainedArgs;
use super::peer::Peer;
use crate::common::median;
use crate::plot::{Figure, write_svg};
use hashtile::Backend;
use hashtile::cubecl::prelude::*;
use hashtile::cubecl::server::Handle;
use hashtile::gpu::transfer::HostTransfer;
use std::path::PathBuf;

/// What every experiment reads: the options, the key set and the peer's results.
pub(super) struct Ctx<'a> {
    pub(super) a: &'a ChainedArgs,
    pub(super) backend: Backend,
    pub(super) out: PathBuf,
    /// `2^log2-keys` keys to store.
    pub(super) keys: Vec<u32>,
    /// As many keys never stored.
    pub(super) absent: Vec<u32>,
    /// `values[i]` is `keys[i]`'s value ([`value_of`]).
    pub(super) values: Vec<u32>,
    pub(super) peer: Option<Peer>,
}

/// The value stored with key `k` (so that any answer can be checked from its key alone).
pub(super) fn value_of(k: u32) -> u32 {
    k.wrapping_mul(3)
}

impl Ctx<'_> {
    /// `, tiles of W lanes` where `--tile-width` chose them (for the tables' headers).
    pub(super) fn tile_note(&self) -> String {
        let mut note = self
            .a
            .tile_width
            .map_or(String::new(), |w| format!(", tiles of {w} lanes"));
        if self.a.allocator == "resident" {
            note += ", resident allocator blocks";
        }
        note
    }

    /// A GPU store of `buckets` lists and `pool` slabs, with `--tile-width` if given.
    pub(super) fn store<R: HostTransfer>(
        &self,
        client: &ComputeClient<R>,
        family: hashtile::HashFamily,
        buckets: u32,
        pool: u32,
    ) -> Result<hashtile::gpu::chained::GpuChained<R>, String> {
        use hashtile::gpu::chained::GpuChained;
        let mut t = match self.a.tile_width {
            Some(w) => GpuChained::with_tile_width(client, family, buckets, pool, w),
            None => GpuChained::new(client, family, buckets, pool),
        }
        .map_err(lib)?;
        if self.a.allocator == "resident" {
            t.set_allocator(hashtile::gpu::chained::SlabAllocator::ResidentBlocks);
        }
        Ok(t)
    }
}

/// A library error as the mode's error text.
pub(super) fn lib(e: hashtile::Error) -> String {
    e.to_string()
}

/// Waits for everything queued on `client`.
pub(super) fn sync<R: Runtime>(client: &ComputeClient<R>) -> Result<(), String> {
    hashtile::cubecl::future::block_on(client.sync()).map_err(|e| format!("device: {e:?}"))
}

/// A new device buffer holding `v`.
pub(super) fn upload<R: Runtime>(client: &ComputeClient<R>, v: &[u32]) -> Handle {
    client.create_from_slice(u32::as_bytes(v))
}

/// The first `n` words of a device buffer.
pub(super) fn read<R: Runtime>(client: &ComputeClient<R>, h: Handle, n: usize) -> Vec<u32> {
    u32::from_bytes(&client.read_one_unchecked(h))[..n].to_vec()
}

/// The median of `count / s` over the timed runs' seconds `secs` (NaN when there are none).
pub(super) fn rate(count: usize, secs: &[f64]) -> f64 {
    let mut r: Vec<f64> = secs.iter().map(|s| count as f64 / s).collect();
    median(&mut r)
}

/// `yes` / `NO` for a table's check column.
pub(super) fn yes(ok: bool) -> &'static str {
    if ok { "yes" } else { "NO" }
}

/// Writes `<out-dir>/chained_<name>.csv` and `.svg` and says so on stdout.
pub(super) fn write_outputs(ctx: &Ctx, name: &str, csv: &str, fig: &Figure) -> Result<(), String> {
    let path = |ext: &str| ctx.out.join(format!("chained_{name}.{ext}"));
    let csv_path = path("csv");
    std::fs::write(&csv_path, csv).map_err(|e| format!("writing {}: {e}", csv_path.display()))?;
    write_svg(&path("svg"), fig)?;
    println!("wrote {} and {}", csv_path.display(), path("svg").display());
    Ok(())
}

/// `a / b` where both are known.
pub(super) fn ratio(a: f64, b: Option<f64>) -> Option<f64> {
    b.filter(|&b| b > 0.0).map(|b| a / b)
}

/// An optional number for a CSV cell (empty when absent).
pub(super) fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(String::new, |v| format!("{v:.digits$}"))
}

/// An optional number for a stdout table (`-` when absent), right-aligned in `width`.
pub(super) fn shown(v: Option<f64>, digits: usize, width: usize) -> String {
    format!(
        "{:>width$}",
        v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
    )
}
