//! The `csr` mode's options ([`CsrArgs`]) and their checks ([`check`]).

use crate::checks::{check_csv_path, check_log2_keys, check_repeats};
use crate::footprint::{Capacity, Footprint, check_footprint, hashmap_bytes};
use hashtile::{Backend, BackendChoice};

/// Options of the `csr` mode.
#[derive(clap::Args, Debug, Clone)]
pub struct CsrArgs {
    /// Backend of the tables and joins: auto, cpu, cuda or vulkan.
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// Keys, as a power of two (1..=30).
    #[arg(long, default_value_t = 20)]
    pub log2_keys: u32,
    /// Device build methods (comma separated): v1, or v2 / v2:BINS (vertices per bin, a power of two from 256 to
    /// 4096; v2 alone: the default). The first is used for lookups and joins. The CPU build ignores them.
    #[arg(long, value_delimiter = ',', default_value = "v2", value_parser = parse_build)]
    pub builds: Vec<hashtile::CsrBuild>,
    /// Lookup tile widths (comma separated): 1 (a thread per query), 2..32 (lanes per query), 0 (automatic).
    /// The first is used for joins. The CPU backend ignores them.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub tiles: Vec<u32>,
    /// Occurrences of each distinct key (comma separated), each a divisor of 2^log2-keys (a power of two).
    #[arg(long, value_delimiter = ',', default_value = "1,4,32")]
    pub dups: Vec<usize>,
    /// Vertices per key (comma separated), each finite and positive (the paper: 0.5 .. 2).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.5,1,2",
        allow_negative_numbers = true
    )]
    pub range: Vec<f64>,
    /// Timed runs per call after one warm-up (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// CSV output file.
    #[arg(long, default_value = "hashtile-bench-csr.csv")]
    pub csv: String,
}

/// A build method named on the command line: `v1`, `v2`, `v2:BINS`.
fn parse_build(s: &str) -> Result<hashtile::CsrBuild, String> {
    let b = match s.split_once(':') {
        None if s == "v1" => hashtile::CsrBuild::V1,
        None if s == "v2" => hashtile::CsrBuild::default(),
        Some(("v2", bins)) => hashtile::CsrBuild::V2 {
            bin_vertices: bins
                .parse()
                .map_err(|_| format!("'{bins}' is not a number of vertices per bin"))?,
        },
        _ => return Err(format!("'{s}': expected v1, v2 or v2:BINS")),
    };
    b.validate().map_err(|e| e.to_string())?;
    Ok(b)
}

/// Checks the `csr` mode's options (sizes against the machine's memory included).
pub fn check(a: CsrArgs) -> Result<CsrArgs, String> {
    check_repeats("--runs", a.runs)?;
    if a.builds.is_empty() || a.tiles.is_empty() {
        return Err("--builds and --tiles need at least one value each".into());
    }
    for &t in &a.tiles {
        hashtile::csr::check_lookup_tile(t)
            .map_err(|_| format!("--tiles {t}: must be 0 or a power of two up to 32"))?;
    }
    let log2 = check_log2_keys("--log2-keys", a.log2_keys)?;
    check_csv_path(&a.csv)?;
    let n = 1usize << log2;
    if a.dups.is_empty() || a.range.is_empty() {
        return Err("--dups and --range need at least one value each".into());
    }
    for &d in &a.dups {
        if d == 0 || d > n || !n.is_multiple_of(d) {
            return Err(format!(
                "--dups {d}: must divide 2^{log2} (so that every key occurs exactly that often)"
            ));
        }
    }
    for &r in &a.range {
        if !r.is_finite() || r <= 0.0 || r > 64.0 {
            return Err(format!(
                "--range {r}: must be finite, positive and at most 64"
            ));
        }
    }
    // Keys, values, the table (keys, values, offsets), the multimap, and the largest join's output.
    let nn = n as u64;
    let max_range = a.range.iter().cloned().fold(0.0, f64::max);
    let max_dups = *a.dups.iter().max().expect("checked non-empty") as u64;
    let need = 8 * nn
        + 8 * nn
        + (4.0 * nn as f64 * max_range) as u64
        + hashmap_bytes(nn, 8)
        + 8 * nn * max_dups;
    check_footprint(
        &format!("csr mode, 2^{log2} keys"),
        Footprint::host(need),
        Capacity::of_machine(Backend::Cpu),
    )?;
    Ok(a)
}
