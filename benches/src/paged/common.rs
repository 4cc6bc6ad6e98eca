//! What the `paged` mode's experiments share: the keys and their values, the answers' check, the paged table's
//! configuration, timed fills and finds, and the output files.

use super::args::PagedSetup;
use crate::common::median;
use crate::plot::{Figure, Panel, Series, XAxis, write_svg};
use hashtile::gpu::measure_copy_ceiling;
use hashtile::gpu::transfer::CopyCeiling;
use hashtile::hash::fmix32;
use hashtile::{Backend, BackendChoice, Bcht, DeviceBudget, PagedConfig, PagedTable, Placement};
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

/// Stored values are the key with these bits flipped.
pub(super) const VALUE_MASK: u32 = 0x5555_5555;
/// Absent keys come from counters at and above this one (stored keys from below it): `key` is a bijection of
/// 32-bit counters, so the two sets are disjoint.
pub(super) const ABSENT_FROM: u64 = 3 << 30;

/// Key of counter `i` (below 2^32 - 1): a bijection of 32-bit counters, so distinct counters give distinct
/// keys; the one counter that would give the sentinel takes the key of counter 2^32 - 1, which is never used.
pub(super) fn key(i: u64) -> u32 {
    debug_assert!(i < u32::MAX as u64);
    let k = fmix32(i as u32 ^ 0x6a09_e667);
    if k == u32::MAX {
        fmix32(u32::MAX ^ 0x6a09_e667)
    } else {
        k
    }
}

/// Keys `from..from + n` and their values.
pub(super) fn batch(from: u64, n: usize) -> (Vec<u32>, Vec<u32>) {
    let keys: Vec<u32> = (0..n as u64)
        .into_par_iter()
        .map(|i| key(from + i))
        .collect();
    let values = keys.par_iter().map(|k| k ^ VALUE_MASK).collect();
    (keys, values)
}

/// `true` when every answer is its key's value, and absent queries (`absent_from..`) are absent.
pub(super) fn answers_ok(q: &[u32], got: &[u32], present: usize) -> bool {
    q.par_iter()
        .zip(got.par_iter())
        .enumerate()
        .all(|(i, (k, g))| {
            if i < present {
                *g == k ^ VALUE_MASK
            } else {
                *g == u32::MAX
            }
        })
}

pub(super) fn lib(e: hashtile::Error) -> String {
    e.to_string()
}

pub(super) fn ceiling(backend: Backend) -> Result<Option<CopyCeiling>, String> {
    measure_copy_ceiling(backend, 256 << 20).map_err(lib)
}

/// Pinned GB/s both ways (the mean of the two directions), or NaN.
pub(super) fn pinned_gbs(c: &Option<CopyCeiling>) -> f64 {
    c.map_or(f64::NAN, |c| (c.h2d_pinned + c.d2h_pinned) / 2.0)
}

pub(super) fn paged_config(
    s: &PagedSetup,
    placement: Placement,
    children: usize,
    budget: usize,
) -> PagedConfig {
    let slots = (s.child_mib << 20) as usize / 8;
    let cfg = PagedConfig::with_child_slots(slots)
        .backend(BackendChoice::Exactly(s.backend))
        .placement(placement)
        .initial_children(if placement == Placement::HashRouted {
            children
        } else {
            1
        })
        .budget(DeviceBudget::Children(budget));
    with_switches(s, cfg)
}

/// `cfg` with the command line's A/B switches: device routing (`--host-routing`), framed upserts
/// (`--no-framed-upserts`), shared frames (`--no-shared-frames`) and prefetch (`--no-prefetch`).
pub(super) fn with_switches(s: &PagedSetup, cfg: PagedConfig) -> PagedConfig {
    cfg.device_routing(!s.host_routing)
        .framed_upserts(s.framed_upserts)
        .shared_frames(s.shared_frames)
        .prefetch(s.prefetch)
}

/// Inserts keys `0..n` in batches of `b` (generated outside the timed region) with `insert` (a paged or a
/// plain table's); returns seconds.
pub(super) fn fill(
    n: usize,
    b: usize,
    mut insert: impl FnMut(&[u32], &[u32]) -> hashtile::Result<()>,
) -> Result<f64, String> {
    let mut secs = 0.0;
    let mut at = 0;
    while at < n {
        let m = b.min(n - at);
        let (k, v) = batch(at as u64, m);
        let t0 = Instant::now();
        insert(&k, &v).map_err(lib)?;
        secs += t0.elapsed().as_secs_f64();
        at += m;
    }
    Ok(secs)
}

/// Finds `q` (the first `present` stored) `runs` times: the median seconds, the GB swapped by the last run,
/// and whether every run's answers were right.
pub(super) fn find_runs(
    t: &mut PagedTable<Bcht, u32, u32>,
    q: &[u32],
    present: usize,
    runs: usize,
) -> Result<(f64, f64, bool), String> {
    let mut times = Vec::with_capacity(runs);
    let mut ok = true;
    let mut moved = 0.0;
    // One answer buffer for every run, as the plain table's runs have (fresh pages would be faulted in by
    // the copy out, inside the timed call).
    let mut out = vec![0u32; q.len()];
    for _ in 0..runs {
        let before = t.paging().bytes_moved;
        let (fs, o) = find_timed(t, q, present, &mut out)?;
        moved = (t.paging().bytes_moved - before) as f64 / 1e9;
        times.push(fs);
        ok &= o;
    }
    Ok((median(&mut times), moved, ok))
}

/// Finds `q` (the first `present` stored) into a buffer; returns (seconds, ok).
pub(super) fn find_timed(
    t: &mut PagedTable<Bcht, u32, u32>,
    q: &[u32],
    present: usize,
    out: &mut [u32],
) -> Result<(f64, bool), String> {
    let t0 = Instant::now();
    t.find_into(q, out).map_err(lib)?;
    let s = t0.elapsed().as_secs_f64();
    Ok((s, answers_ok(q, out, present)))
}

/// Queries: `present` stored keys from `pick`, then `absent` absent ones.
pub(super) fn queries(pick: &[u32], absent: usize) -> Vec<u32> {
    let mut q = pick.to_vec();
    q.extend((0..absent as u64).map(|i| key(ABSENT_FROM + i)));
    q
}

/// A figure of one panel.
pub(super) fn one_panel(
    caption: String,
    x: &str,
    y: &str,
    x_axis: XAxis,
    series: Vec<Series>,
) -> Figure {
    Figure {
        caption,
        x_label: x.into(),
        y_label: y.into(),
        x_axis,
        y_range: None,
        cols: 1,
        panels: vec![Panel {
            title: String::new(),
            series,
        }],
    }
}

pub(super) fn csv_line(csv: &mut String, fields: &[String]) {
    let _ = writeln!(csv, "{}", fields.join(","));
}

pub(super) fn save(
    s: &PagedSetup,
    name: &str,
    csv: &str,
    fig: Option<Figure>,
) -> Result<(), String> {
    let dir = Path::new(&s.out_dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(format!("paged_{name}.csv")), csv).map_err(|e| e.to_string())?;
    if let Some(f) = fig {
        write_svg(&dir.join(format!("paged_{name}.svg")), &f)?;
    }
    println!("wrote {}/paged_{name}.csv", s.out_dir);
    Ok(())
}

/// Keys that fill `children` children of `child_mib` MiB to 0.75.
pub(super) fn fill_keys(s: &PagedSetup, children: usize) -> usize {
    ((s.child_mib << 20) as usize / 8 * children) * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashtile::Backend;

    #[test]
    fn switches_reach_the_config() {
        let s = PagedSetup {
            backend: Backend::Cpu,
            experiments: Vec::new(),
            children: 4,
            child_mib: 1,
            log2_keys: 12,
            log2_batch: 10,
            runs: 1,
            big_gib: 1,
            big_budget_gib: 1,
            big_keys: 32,
            placements: vec![Placement::HashRouted],
            host_routing: true,
            framed_upserts: false,
            shared_frames: true,
            prefetch: false,
            all_resident_only: false,
            out_dir: ".".into(),
        };
        let cfg = paged_config(&s, Placement::HashRouted, 4, 2);
        assert!(!cfg.device_routing && !cfg.framed_upserts && cfg.shared_frames && !cfg.prefetch);
        let s = PagedSetup {
            host_routing: false,
            framed_upserts: true,
            shared_frames: false,
            prefetch: true,
            ..s
        };
        let cfg = paged_config(&s, Placement::HashRouted, 4, 2);
        assert!(cfg.device_routing && cfg.framed_upserts && !cfg.shared_frames && cfg.prefetch);
    }
}
