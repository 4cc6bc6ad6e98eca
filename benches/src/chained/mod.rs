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

mod alloc;
mod bulk;
mod host;
mod incremental;
mod mixes;

use crate::cli::ChainedArgs;
use crate::plot::{Figure, write_svg};
use hashtile::Backend;
use hashtile::cubecl::prelude::*;
use hashtile::cubecl::server::Handle;
use hashtile::gpu::transfer::HostTransfer;
use std::path::PathBuf;

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
    fn name(self) -> &'static str {
        match self {
            Experiment::Bulk => "bulk",
            Experiment::Incremental => "incremental",
            Experiment::Mixes => "mixes",
            Experiment::Alloc => "alloc",
            Experiment::Host => "host",
        }
    }
}

/// What every experiment reads: the options, the key set and the peer's results.
struct Ctx<'a> {
    a: &'a ChainedArgs,
    backend: Backend,
    out: PathBuf,
    /// `2^log2-keys` keys to store.
    keys: Vec<u32>,
    /// As many keys never stored.
    absent: Vec<u32>,
    /// `values[i]` is `keys[i]`'s value ([`value_of`]).
    values: Vec<u32>,
    peer: Option<Peer>,
}

/// The value stored with key `k` (so that any answer can be checked from its key alone).
fn value_of(k: u32) -> u32 {
    k.wrapping_mul(3)
}

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

impl Ctx<'_> {
    /// `, tiles of W lanes` where `--tile-width` chose them (for the tables' headers).
    fn tile_note(&self) -> String {
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
    fn store<R: Runtime>(
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
fn lib(e: hashtile::Error) -> String {
    e.to_string()
}

/// Waits for everything queued on `client`.
fn sync<R: Runtime>(client: &ComputeClient<R>) -> Result<(), String> {
    hashtile::cubecl::future::block_on(client.sync()).map_err(|e| format!("device: {e:?}"))
}

/// A new device buffer holding `v`.
fn upload<R: Runtime>(client: &ComputeClient<R>, v: &[u32]) -> Handle {
    client.create_from_slice(u32::as_bytes(v))
}

/// The first `n` words of a device buffer.
fn read<R: Runtime>(client: &ComputeClient<R>, h: Handle, n: usize) -> Vec<u32> {
    u32::from_bytes(&client.read_one_unchecked(h))[..n].to_vec()
}

/// The median of `count / s` over the timed runs' seconds `secs` (NaN when there are none).
fn rate(count: usize, secs: &[f64]) -> f64 {
    let mut r: Vec<f64> = secs.iter().map(|s| count as f64 / s).collect();
    crate::common::median(&mut r)
}

/// `yes` / `NO` for a table's check column.
fn yes(ok: bool) -> &'static str {
    if ok { "yes" } else { "NO" }
}

/// Writes `<out-dir>/chained_<name>.csv` and `.svg` and says so on stdout.
fn write_outputs(ctx: &Ctx, name: &str, csv: &str, fig: &Figure) -> Result<(), String> {
    let path = |ext: &str| ctx.out.join(format!("chained_{name}.{ext}"));
    let csv_path = path("csv");
    std::fs::write(&csv_path, csv).map_err(|e| format!("writing {}: {e}", csv_path.display()))?;
    write_svg(&path("svg"), fig)?;
    println!("wrote {} and {}", csv_path.display(), path("svg").display());
    Ok(())
}

/// One SlabHash table of the peer's bulk benchmark (`chain<load>_util<u>`): its rates in G keys/s.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PeerTable {
    pub table: String,
    /// Memory utilisation SlabHash reports for the table.
    pub util: f64,
    pub build: Option<f64>,
    pub find100: Option<f64>,
    pub find0: Option<f64>,
    /// Every row of the table said `ok`.
    pub ok: bool,
}

/// The original SlabHash's results, from the peers' `slab_bench` CSV.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Peer {
    /// Keys of the peer's run, as a power of two (`None`: no rows).
    pub(crate) log2_keys: Option<u32>,
    /// Bulk tables in file order.
    pub(crate) bulk: Vec<PeerTable>,
    /// Incremental inserts: (log2 batch size, G keys/s, ok).
    pub(crate) incremental: Vec<(u32, f64, bool)>,
}

impl Peer {
    /// Reads and parses the peer CSV at `path`.
    pub fn read(path: &str) -> Result<Peer, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--peer-csv {path}: {e}"))?;
        Peer::parse(&text).map_err(|(line, why)| format!("--peer-csv {path}, line {line}: {why}"))
    }

    /// Parses rows `slabhash,<table>,<slots>,<log2 keys>,<util>,<op>,<G keys/s>,<ok|WRONG>` (blank lines and
    /// `#` comments skipped); ops `build`, `find100`, `find0` of bulk tables, `insert` of
    /// `incremental_batch2^K`. Errors carry the 1-based line number.
    fn parse(text: &str) -> Result<Peer, (usize, String)> {
        let mut p = Peer::default();
        for (i, line) in text.lines().enumerate() {
            let err = |why: String| (i + 1, why);
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() != 8 || f[0] != "slabhash" {
                return Err(err(format!(
                    "expected 8 fields `slabhash,<table>,<slots>,<log2 keys>,<util>,<op>,<G keys/s>,<ok|WRONG>`, got `{line}`"
                )));
            }
            let num = |what: &str, s: &str| {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| err(format!("{what} `{s}` is not a number")))
            };
            let log2: u32 = f[3]
                .parse()
                .map_err(|_| err(format!("log2 keys `{}` is not an integer", f[3])))?;
            let (util, gkeys) = (num("utilisation", f[4])?, num("rate", f[6])?);
            let ok = match f[7] {
                "ok" => true,
                "WRONG" => false,
                other => return Err(err(format!("check `{other}` is neither ok nor WRONG"))),
            };
            p.log2_keys = Some(log2);
            if f[5] == "insert" {
                let batch = f[1]
                    .strip_prefix("incremental_batch2^")
                    .and_then(|b| b.parse::<u32>().ok())
                    .ok_or_else(|| {
                        err(format!(
                            "an insert row's table `{}` is not incremental_batch2^K",
                            f[1]
                        ))
                    })?;
                p.incremental.push((batch, gkeys, ok));
                continue;
            }
            let at = match p.bulk.iter().position(|t| t.table == f[1]) {
                Some(at) => at,
                None => {
                    p.bulk.push(PeerTable {
                        table: f[1].to_string(),
                        util,
                        build: None,
                        find100: None,
                        find0: None,
                        ok: true,
                    });
                    p.bulk.len() - 1
                }
            };
            let t = &mut p.bulk[at];
            t.ok &= ok;
            let slot = match f[5] {
                "build" => &mut t.build,
                "find100" => &mut t.find100,
                "find0" => &mut t.find0,
                other => {
                    return Err(err(format!(
                        "op `{other}` is none of build, find100, find0, insert"
                    )));
                }
            };
            *slot = Some(gkeys);
        }
        Ok(p)
    }

    /// The bulk table whose utilisation is nearest `util`.
    fn nearest(&self, util: f64) -> Option<&PeerTable> {
        self.bulk
            .iter()
            .min_by(|a, b| (a.util - util).abs().total_cmp(&(b.util - util).abs()))
    }
}

/// `a / b` where both are known.
fn ratio(a: f64, b: Option<f64>) -> Option<f64> {
    b.filter(|&b| b > 0.0).map(|b| a / b)
}

/// An optional number for a CSV cell (empty when absent).
fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(String::new, |v| format!("{v:.digits$}"))
}

/// An optional number for a stdout table (`-` when absent), right-aligned in `width`.
fn shown(v: Option<f64>, digits: usize, width: usize) -> String {
    format!(
        "{:>width$}",
        v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_csv_parses_and_reports_bad_lines() {
        let p = Peer::parse(
            "slabhash,chain0.6_util0.55,15,24,0.55,build,8.885,ok\n\
             slabhash,chain0.6_util0.55,15,24,0.55,find100,14.299,ok\n\
             \n\
             slabhash,chain1.0_util0.65,15,24,0.65,find0,10.020,WRONG\n\
             slabhash,incremental_batch2^15,15,24,0,insert,0.976,ok\n",
        )
        .unwrap();
        assert_eq!(p.log2_keys, Some(24));
        assert_eq!(p.bulk.len(), 2);
        assert_eq!(
            (p.bulk[0].build, p.bulk[0].find100, p.bulk[0].find0),
            (Some(8.885), Some(14.299), None)
        );
        assert!(p.bulk[0].ok && !p.bulk[1].ok);
        assert_eq!(p.incremental, vec![(15, 0.976, true)]);
        assert_eq!(p.nearest(0.6).unwrap().table, "chain0.6_util0.55");
        let line = |t: &str| Peer::parse(t).unwrap_err().0;
        assert_eq!(line("\nslabhash,a,15,24,0.5,build,x,ok"), 2);
        assert_eq!(line("slabhash,a,15,24,0.5,scan,1,ok"), 1);
        assert_eq!(line("slabhash,a,15,24,0.5,build,1,maybe"), 1);
        assert_eq!(line("slabhash,incremental_batch,15,24,0,insert,1,ok"), 1);
        assert_eq!(line("cuco,a,15,24,0.5,build,1,ok"), 1);
    }
}
