//! What the `rates` measurements share (a leaf: it imports no other file of the mode but `args`): the result
//! row, the scheme parameters of the current bucket size, the GPU options of the command line, and an empty GPU
//! table sized as `HashTable` would size it.

use super::args::Args;
use crate::common::scheme_params;
use hashtile::gpu::GpuTable;
use hashtile::{Backend, ProbingScheme, SchemeInfo, TableConfig};

/// One result row.
pub struct Row {
    pub scheme: String,
    pub bucket: u32,
    pub backend: Backend,
    pub load: f64,
    pub op: &'static str,
    pub present: f64,
    pub rates: Vec<f64>,
    pub checked: bool,
    /// Pairs the build could not place (a build failure, reported; not a wrong answer).
    pub unplaced: usize,
}

/// [`scheme_params`] for the `rates` mode's current bucket size.
pub fn params_for<S: SchemeInfo>(args: &Args) -> hashtile::Result<hashtile::SchemeParams> {
    scheme_params::<S>(
        args.cur_bucket,
        args.paper_params,
        args.no_upsert,
        args.max_chain,
        args.num_hashes,
    )
}

/// An empty GPU table of layout `L` for `n` keys at `load`: the current bucket size, the command line's scheme
/// parameters, `opts`, and the bucket count `HashTable` would take (`scheme::sequence_buckets`: double hashing's
/// is prime); with its hash family, for the resets between timed runs.
pub fn empty_gpu_table<
    R: hashtile::gpu::transfer::HostTransfer,
    S: ProbingScheme + SchemeInfo,
    L: hashtile::gpu::KeyLayout,
>(
    args: &Args,
    opts: hashtile::gpu::GpuOptions,
    n: usize,
    load: f64,
) -> hashtile::Result<(GpuTable<R, S, L>, hashtile::HashFamily)> {
    let cfg = TableConfig::for_keys(n, load).bucket_size(args.cur_bucket);
    let nb = hashtile::scheme::sequence_buckets(
        S::SEQUENCE,
        cfg.capacity.div_ceil(args.cur_bucket as usize) as u32,
    );
    let family = hashtile::HashFamily::new(cfg.seed);
    let params = params_for::<S>(args)?;
    let mut t = GpuTable::new(
        &Default::default(),
        nb,
        args.cur_bucket,
        family,
        params,
        opts,
    )?;
    t.set_binning(args.binning);
    t.set_range_order(args.cur_range_order);
    t.set_find_tile_width(args.find_lanes)?;
    t.set_insert_tile_width(args.insert_lanes)?;
    Ok((t, family))
}

/// The backend's default GPU options, overridden by `--claim` / `--reads`.
pub fn gpu_options(args: &Args, cuda: bool) -> hashtile::gpu::GpuOptions {
    hashtile::gpu::GpuOptions {
        use_cas: args.claim.as_deref().is_none_or(|c| c == "cas"),
        plain_reads: args.reads.as_deref().map_or(cuda, |r| r == "plain"),
    }
}
