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

use crate::plot::{Figure, Panel, Series, XAxis, write_svg};
use hashtile::gpu::transfer::{CopyCeiling, measure_copy_ceiling};
use hashtile::hash::fmix32;
use hashtile::{
    Backend, BackendChoice, Bcht, DeviceBudget, HashTable, PagedConfig, PagedTable, Placement,
    TableConfig,
};
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

/// Stored values are the key with these bits flipped.
const VALUE_MASK: u32 = 0x5555_5555;
/// Absent keys come from counters at and above this one (stored keys from below it): `key` is a bijection of
/// 32-bit counters, so the two sets are disjoint.
const ABSENT_FROM: u64 = 3 << 30;

/// The experiments, in the order they run.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    Residency,
    Skew,
    Rebuild,
    Growth,
    Big,
}

/// What the paged mode measures (checked by `cli`).
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
    /// `residency`: only the budget that holds every child (and the comparison with the plain table).
    pub all_resident_only: bool,
    pub out_dir: String,
}

/// Key of counter `i` (below 2^32 - 1): a bijection of 32-bit counters, so distinct counters give distinct
/// keys; the one counter that would give the sentinel takes the key of counter 2^32 - 1, which is never used.
fn key(i: u64) -> u32 {
    debug_assert!(i < u32::MAX as u64);
    let k = fmix32(i as u32 ^ 0x6a09_e667);
    if k == u32::MAX {
        fmix32(u32::MAX ^ 0x6a09_e667)
    } else {
        k
    }
}

/// Keys `from..from + n` and their values.
fn batch(from: u64, n: usize) -> (Vec<u32>, Vec<u32>) {
    let keys: Vec<u32> = (0..n as u64)
        .into_par_iter()
        .map(|i| key(from + i))
        .collect();
    let values = keys.par_iter().map(|k| k ^ VALUE_MASK).collect();
    (keys, values)
}

/// `true` when every answer is its key's value, and absent queries (`absent_from..`) are absent.
fn answers_ok(q: &[u32], got: &[u32], present: usize) -> bool {
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

fn lib(e: hashtile::Error) -> String {
    e.to_string()
}

fn ceiling(backend: Backend) -> Result<Option<CopyCeiling>, String> {
    measure_copy_ceiling(backend, 256 << 20).map_err(lib)
}

/// Pinned GB/s both ways (the mean of the two directions), or NaN.
fn pinned_gbs(c: &Option<CopyCeiling>) -> f64 {
    c.map_or(f64::NAN, |c| (c.h2d_pinned + c.d2h_pinned) / 2.0)
}

fn paged_config(
    s: &PagedSetup,
    placement: Placement,
    children: usize,
    budget: usize,
) -> PagedConfig {
    let slots = (s.child_mib << 20) as usize / 8;
    PagedConfig::with_child_slots(slots)
        .backend(BackendChoice::Exactly(s.backend))
        .placement(placement)
        .initial_children(if placement == Placement::HashRouted {
            children
        } else {
            1
        })
        .budget(DeviceBudget::Children(budget))
        .device_routing(!s.host_routing)
}

/// Inserts keys `0..n` in batches of `b` (generated outside the timed region) with `insert` (a paged or a
/// plain table's); returns seconds.
fn fill(
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
fn find_runs(
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
    Ok((crate::common::median(&mut times), moved, ok))
}

/// Finds `q` (the first `present` stored) into a buffer; returns (seconds, ok).
fn find_timed(
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
fn queries(pick: &[u32], absent: usize) -> Vec<u32> {
    let mut q = pick.to_vec();
    q.extend((0..absent as u64).map(|i| key(ABSENT_FROM + i)));
    q
}

/// A figure of one panel.
fn one_panel(caption: String, x: &str, y: &str, x_axis: XAxis, series: Vec<Series>) -> Figure {
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

fn csv_line(csv: &mut String, fields: &[String]) {
    let _ = writeln!(csv, "{}", fields.join(","));
}

fn save(s: &PagedSetup, name: &str, csv: &str, fig: Option<Figure>) -> Result<(), String> {
    let dir = Path::new(&s.out_dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(format!("paged_{name}.csv")), csv).map_err(|e| e.to_string())?;
    if let Some(f) = fig {
        write_svg(&dir.join(format!("paged_{name}.svg")), &f)?;
    }
    println!("wrote {}/paged_{name}.csv", s.out_dir);
    Ok(())
}

/// Compiles every kernel the experiments use (CubeCL compiles a kernel at its first launch, a one-time cost of
/// the process that would otherwise land in whichever experiment runs first): a small paged table that grows by
/// splits, rebuilds a child, finds and erases, and a plain table's insert and find.
fn warm_up(s: &PagedSetup) -> Result<(), String> {
    let cfg = PagedConfig::with_child_slots(1 << 12)
        .backend(BackendChoice::Exactly(s.backend))
        .budget(DeviceBudget::Children(4));
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
            Experiment::Residency => residency(s)?,
            Experiment::Skew => skew(s)?,
            Experiment::Rebuild => rebuild(s)?,
            Experiment::Growth => growth(s)?,
            Experiment::Big => big(s)?,
        };
    }
    if !ok {
        eprintln!("error: some answers did not match (see the `ok` columns)");
    }
    Ok(if ok { 0 } else { 2 })
}

/// Keys that fill `children` children of `child_mib` MiB to 0.75.
fn fill_keys(s: &PagedSetup, children: usize) -> usize {
    ((s.child_mib << 20) as usize / 8 * children) * 3 / 4
}

fn residency(s: &PagedSetup) -> Result<bool, String> {
    let c = s.children;
    let n = fill_keys(s, c);
    let b = (n / 8).max(1);
    let ceil = ceiling(s.backend)?;
    let pinned = pinned_gbs(&ceil);
    let mut csv = String::from(
        "table,placement,children,resident,op,keys,seconds,M_keys_per_s,swap_GB,swap_GB_per_s,pinned_GB_per_s,of_pinned,ok\n",
    );
    let mut all_ok = true;
    let (stored, _) = batch(0, n);
    let q = queries(&stored, n / 8);
    let mut series = Vec::new();
    for &placement in &s.placements {
        let mut build_pts = Vec::new();
        let mut find_pts = Vec::new();
        let budgets = if s.all_resident_only {
            vec![c]
        } else {
            vec![c / 4, c / 2, 3 * c / 4, c]
        };
        for x in budgets {
            let x = x.max(1);
            let mut t: PagedTable<Bcht, u32, u32> =
                PagedTable::new(paged_config(s, placement, c, x)).map_err(lib)?;
            let before = t.paging().bytes_moved;
            let secs = fill(n, b, |k, v| t.insert(k, v))?;
            let moved = (t.paging().bytes_moved - before) as f64 / 1e9;
            let ok = t.len() == n;
            let rate = n as f64 / secs / 1e6;
            build_pts.push((x as f64, ok.then_some(rate)));
            let row = |op: &str, keys: usize, secs: f64, moved: f64, ok: bool| {
                vec![
                    "paged".into(),
                    format!("{placement:?}"),
                    c.to_string(),
                    x.to_string(),
                    op.into(),
                    keys.to_string(),
                    format!("{secs:.4}"),
                    format!("{:.1}", keys as f64 / secs / 1e6),
                    format!("{moved:.3}"),
                    format!("{:.2}", moved / secs),
                    format!("{pinned:.2}"),
                    format!("{:.3}", moved / secs / pinned),
                    ok.to_string(),
                ]
            };
            csv_line(&mut csv, &row("insert", n, secs, moved, ok));
            let (fs, fmoved, fok) = find_runs(&mut t, &q, n, s.runs)?;
            csv_line(&mut csv, &row("find", q.len(), fs, fmoved, fok));
            find_pts.push((x as f64, fok.then_some(q.len() as f64 / fs / 1e6)));
            all_ok &= ok && fok;
            eprintln!(
                "  {placement:?} x={x}/{c}: insert {rate:.1} M keys/s ({moved:.2} GB swapped), find {:.1} M keys/s",
                q.len() as f64 / fs / 1e6
            );
        }
        series.push(Series {
            name: format!("{placement:?} insert"),
            points: build_pts,
        });
        series.push(Series {
            name: format!("{placement:?} find"),
            points: find_pts,
        });
    }
    // Every child resident against the plain static table of the same slots, in the same run and
    // interleaved: fresh tables filled in turn, then finds in turn (the H100 host's copy rates drift within a
    // run and between runs; interleaved runs see the same conditions). Medians of `runs` each.
    let placement = s.placements[0];
    let slots = (s.child_mib << 20) as usize / 8 * c;
    let cfg = TableConfig::with_capacity(slots).backend(BackendChoice::Exactly(s.backend));
    let (mut paged_ins, mut plain_ins) = (Vec::new(), Vec::new());
    let mut tables = None;
    for _ in 0..s.runs.max(1) {
        drop(tables.take()); // the previous run's tables are freed first
        let mut paged: PagedTable<Bcht, u32, u32> =
            PagedTable::new(paged_config(s, placement, c, c)).map_err(lib)?;
        paged_ins.push(fill(n, b, |k, v| paged.insert(k, v))?);
        let mut plain: HashTable<Bcht, u32, u32> = HashTable::new(cfg.clone()).map_err(lib)?;
        plain_ins.push(fill(n, b, |k, v| plain.insert(k, v))?);
        all_ok &= paged.len() == n && plain.len() == n;
        tables = Some((paged, plain));
    }
    let (mut paged, plain) = tables.expect("at least one run");
    let (mut paged_find, mut plain_find) = (Vec::new(), Vec::new());
    let (mut paged_out, mut plain_out) = (vec![0u32; q.len()], vec![0u32; q.len()]);
    for _ in 0..s.runs.max(1) {
        let (secs, ok) = find_timed(&mut paged, &q, n, &mut paged_out)?;
        paged_find.push(secs);
        all_ok &= ok;
        let t0 = Instant::now();
        plain.find_into(&q, &mut plain_out).map_err(lib)?;
        plain_find.push(t0.elapsed().as_secs_f64());
        all_ok &= answers_ok(&q, &plain_out, n);
    }
    let rows = [
        (
            "paged (interleaved)",
            "insert",
            n,
            crate::common::median(&mut paged_ins),
        ),
        ("plain", "insert", n, crate::common::median(&mut plain_ins)),
        (
            "paged (interleaved)",
            "find",
            q.len(),
            crate::common::median(&mut paged_find),
        ),
        (
            "plain",
            "find",
            q.len(),
            crate::common::median(&mut plain_find),
        ),
    ];
    for (table, op, keys, secs) in rows {
        let paged_row = table != "plain";
        csv_line(
            &mut csv,
            &[
                table.into(),
                if paged_row {
                    format!("{placement:?}")
                } else {
                    "-".into()
                },
                if paged_row { c.to_string() } else { "1".into() },
                if paged_row { c.to_string() } else { "1".into() },
                op.into(),
                keys.to_string(),
                format!("{secs:.4}"),
                format!("{:.1}", keys as f64 / secs / 1e6),
                "0".into(),
                "0".into(),
                format!("{pinned:.2}"),
                "0".into(),
                all_ok.to_string(),
            ],
        );
        if !paged_row {
            series.push(Series {
                name: format!("plain table {op}"),
                points: [c / 4, c]
                    .iter()
                    .map(|&x| (x.max(1) as f64, Some(keys as f64 / secs / 1e6)))
                    .collect(),
            });
        }
    }
    let rate = |i: usize| rows[i].2 as f64 / rows[i].3 / 1e6;
    eprintln!(
        "  plain table: insert {:.1} M keys/s, find {:.1} M keys/s; pinned ceiling {pinned:.1} GB/s",
        rate(1),
        rate(3)
    );
    eprintln!(
        "  {placement:?}, all {c} resident, interleaved with the plain table ({} runs, medians): insert {:.1} M keys/s ({:.3}x), find {:.1} M keys/s ({:.3}x)",
        s.runs.max(1),
        rate(0),
        rate(0) / rate(1),
        rate(2),
        rate(2) / rate(3)
    );
    let fig = one_panel(
        format!(
            "Paged BCHT: {c} children of {} MiB, 2^{:.1} keys, rates vs resident children, {}",
            s.child_mib,
            (n as f64).log2(),
            s.backend
        ),
        "resident children",
        "M keys/s (host data)",
        XAxis::Linear,
        series,
    );
    save(s, "residency", &csv, Some(fig))?;
    Ok(all_ok)
}

fn skew(s: &PagedSetup) -> Result<bool, String> {
    let c = s.children;
    let n = fill_keys(s, c);
    let x = (c / 4).max(1);
    let mut csv = String::from("placement,queries,keys,seconds,M_keys_per_s,swap_GB,ok\n");
    let mut all_ok = true;
    let mut series = Vec::new();
    for &placement in &s.placements {
        let mut t: PagedTable<Bcht, u32, u32> =
            PagedTable::new(paged_config(s, placement, c, x)).map_err(lib)?;
        fill(n, (n / 8).max(1), |k, v| t.insert(k, v))?;
        let (stored, _) = batch(0, n);
        let m = n / 4;
        let hot: Vec<u32> = match placement {
            Placement::HashRouted => {
                let resident = t.resident_children();
                stored
                    .iter()
                    .copied()
                    .filter(|&k| resident.contains(&t.child_of(k).expect("routed")))
                    .take(m)
                    .collect()
            }
            // The newest keys live in the last children, which the fill left resident.
            Placement::ArrivalOrder => stored[n - m..].to_vec(),
        };
        let uniform: Vec<u32> = (0..m).map(|i| stored[(i * 4 + 1) % n]).collect();
        let mut pts = Vec::new();
        for (name, q) in [("concentrated", &hot), ("uniform", &uniform)] {
            let (fs, moved, ok) = find_runs(&mut t, q, q.len(), s.runs)?;
            let rate = q.len() as f64 / fs / 1e6;
            csv_line(
                &mut csv,
                &[
                    format!("{placement:?}"),
                    name.into(),
                    q.len().to_string(),
                    format!("{fs:.4}"),
                    format!("{rate:.1}"),
                    format!("{moved:.3}"),
                    ok.to_string(),
                ],
            );
            eprintln!(
                "  {placement:?} {name}: {rate:.1} M keys/s, {moved:.2} GB swapped per batch"
            );
            pts.push((
                if name == "uniform" { 1.0 } else { 0.0 },
                ok.then_some(rate),
            ));
            all_ok &= ok;
        }
        series.push(Series {
            name: format!("{placement:?}"),
            points: pts,
        });
    }
    let fig = one_panel(
        format!(
            "Paged finds, {x} of {c} children resident: concentrated (x = 0) vs uniform (x = 1) queries, {}",
            s.backend
        ),
        "0 = queries on resident children, 1 = uniform",
        "M keys/s",
        XAxis::Linear,
        series,
    );
    save(s, "skew", &csv, Some(fig))?;
    Ok(all_ok)
}

fn rebuild(s: &PagedSetup) -> Result<bool, String> {
    let n = 1usize << s.log2_keys;
    let slots_per_child = (s.child_mib << 20) as usize / 8;
    let children = (n as f64 / 0.75 / slots_per_child as f64).ceil().max(1.0) as usize;
    let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(paged_config(
        s,
        Placement::HashRouted,
        children.next_power_of_two(),
        usize::MAX,
    ))
    .map_err(lib)?;
    let (k, v) = batch(0, n);
    t.insert(&k, &v).map_err(lib)?;
    let mut child_t = Vec::new();
    for r in 0..s.runs {
        let t0 = Instant::now();
        t.rebuild_child(r % t.children()).map_err(lib)?;
        child_t.push(t0.elapsed().as_secs_f64());
    }
    let q = queries(&k, n / 8);
    let (_, ok1) = find_timed(&mut t, &q, n, &mut vec![0u32; q.len()])?;
    let ok1 = ok1 && t.len() == n;
    let cfg = TableConfig::for_keys(n, 0.75).backend(BackendChoice::Exactly(s.backend));
    let mut plain: HashTable<Bcht, u32, u32> = HashTable::new(cfg).map_err(lib)?;
    plain.insert(&k, &v).map_err(lib)?;
    let mut whole_t = Vec::new();
    for _ in 0..s.runs {
        let t0 = Instant::now();
        plain.clear().map_err(lib)?;
        plain.insert(&k, &v).map_err(lib)?;
        whole_t.push(t0.elapsed().as_secs_f64());
    }
    let mut out = vec![0u32; q.len()];
    plain.find_into(&q, &mut out).map_err(lib)?;
    let ok2 = answers_ok(&q, &out, n) && plain.len() == n;
    let (ct, wt) = (
        crate::common::median(&mut child_t),
        crate::common::median(&mut whole_t),
    );
    let csv = format!(
        "keys,children,child_keys,child_rebuild_s,whole_rebuild_s,speedup,ok\n{n},{},{},{ct:.5},{wt:.5},{:.1},{}\n",
        t.children(),
        n / t.children(),
        wt / ct,
        ok1 && ok2
    );
    eprintln!(
        "  confined rebuild of one of {} children: {:.2} ms; whole static table of 2^{}: {:.2} ms ({:.1}x)",
        t.children(),
        ct * 1e3,
        s.log2_keys,
        wt * 1e3,
        wt / ct
    );
    save(s, "rebuild", &csv, None)?;
    Ok(ok1 && ok2)
}

fn growth(s: &PagedSetup) -> Result<bool, String> {
    let n = 1usize << s.log2_keys;
    let b = 1usize << s.log2_batch.min(s.log2_keys);
    let mut t: PagedTable<Bcht, u32, u32> =
        PagedTable::new(paged_config(s, Placement::HashRouted, 1, usize::MAX)).map_err(lib)?;
    let mut csv = String::from("keys,paged_s,static_rebuild_s,paged_cum_s,static_cum_s\n");
    eprintln!("  growth: children of {} MiB", s.child_mib);
    let (mut pc, mut sc) = (0.0, 0.0);
    let (all_k, all_v) = batch(0, n);
    let mut pts_p = Vec::new();
    let mut pts_s = Vec::new();
    let mut at = 0;
    while at < n {
        let m = b.min(n - at);
        let t0 = Instant::now();
        t.insert(&all_k[at..at + m], &all_v[at..at + m])
            .map_err(lib)?;
        let ps = t0.elapsed().as_secs_f64();
        at += m;
        // The static alternative: a table sized for every key so far, built from all of them.
        let t0 = Instant::now();
        let cfg = TableConfig::for_keys(at, 0.75).backend(BackendChoice::Exactly(s.backend));
        let mut plain: HashTable<Bcht, u32, u32> = HashTable::new(cfg).map_err(lib)?;
        plain.insert(&all_k[..at], &all_v[..at]).map_err(lib)?;
        let ss = t0.elapsed().as_secs_f64();
        pc += ps;
        sc += ss;
        csv_line(
            &mut csv,
            &[
                at.to_string(),
                format!("{ps:.5}"),
                format!("{ss:.5}"),
                format!("{pc:.4}"),
                format!("{sc:.4}"),
            ],
        );
        pts_p.push(((at as f64).log2(), Some(pc)));
        pts_s.push(((at as f64).log2(), Some(sc)));
    }
    let q = queries(&all_k, n / 8);
    let (_, ok) = find_timed(&mut t, &q, n, &mut vec![0u32; q.len()])?;
    let ok = ok && t.len() == n;
    eprintln!(
        "  growth to 2^{} by 2^{}: paged {pc:.2} s ({} children, {} splits), static rebuilt per batch {sc:.2} s ({:.1}x)",
        s.log2_keys,
        s.log2_batch,
        t.children(),
        t.paging().grown,
        sc / pc
    );
    let _ = writeln!(csv, "# speedup {:.2}, ok {ok}", sc / pc);
    let fig = one_panel(
        format!(
            "Growth by batches of 2^{}: paged table vs static table rebuilt per batch, {}",
            s.log2_batch, s.backend
        ),
        "keys stored",
        "cumulative seconds",
        XAxis::Log2,
        vec![
            Series {
                name: "paged (hash-routed, splits)".into(),
                points: pts_p,
            },
            Series {
                name: "static, rebuilt per batch".into(),
                points: pts_s,
            },
        ],
    );
    save(s, &format!("growth_{}mib", s.child_mib), &csv, Some(fig))?;
    Ok(ok)
}

/// Keys of the `big` table: 32-bit pairs in BCHT children, or 64-bit pairs in IHT children (16-byte slots: the
/// only way to fill a table past 2^32 slots with distinct keys).
trait BigKey: hashtile::Key + hashtile::Value {
    /// Device bytes of one slot.
    const SLOT_BYTES: u64;
    /// First counter of the absent keys.
    const ABSENT_COUNTER: u64;
    /// The key of counter `i` (a bijection, never the sentinel, for the counters used).
    fn of(i: u64) -> Self;
    /// Its stored value.
    fn value(self) -> Self;
}

impl BigKey for u32 {
    const SLOT_BYTES: u64 = 8;
    const ABSENT_COUNTER: u64 = ABSENT_FROM;
    fn of(i: u64) -> Self {
        key(i)
    }
    fn value(self) -> Self {
        self ^ VALUE_MASK
    }
}

impl BigKey for u64 {
    const SLOT_BYTES: u64 = 16;
    const ABSENT_COUNTER: u64 = 1 << 62;
    fn of(i: u64) -> Self {
        // The splitmix64 finaliser is a bijection of u64; the one counter that gives the sentinel takes the key
        // of counter 2^63, which is never used.
        let f = |x: u64| {
            let mut z = x ^ 0x6a09_e667_f3bc_c908;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        match f(i) {
            u64::MAX => f(1 << 63),
            k => k,
        }
    }
    fn value(self) -> Self {
        self ^ 0x5555_5555_5555_5555
    }
}

/// The `big` experiment with the key width `--big-keys` asks for.
fn big(s: &PagedSetup) -> Result<bool, String> {
    if s.big_keys == 64 {
        big_of::<hashtile::Iht, u64>(s)
    } else {
        big_of::<Bcht, u32>(s)
    }
}

fn big_of<S: hashtile::SchemeInfo, K: BigKey>(s: &PagedSetup) -> Result<bool, String> {
    let gib = s.big_gib;
    // Children: a power of two near 64 MiB each.
    let children = ((gib << 30) / (64 << 20)).next_power_of_two() as usize;
    let child_bytes = (gib << 30) / children as u64;
    let budget = ((s.big_budget_gib << 30) / child_bytes).max(1) as usize;
    let child_slots = (child_bytes / K::SLOT_BYTES) as usize;
    let ceil = ceiling(s.backend)?;
    let pinned = pinned_gbs(&ceil);
    let cfg = PagedConfig::with_child_slots(child_slots)
        .backend(BackendChoice::Exactly(s.backend))
        .placement(Placement::HashRouted)
        .initial_children(children)
        .budget(DeviceBudget::Children(budget))
        .device_routing(!s.host_routing);
    // Making the table pages the children past the budget out at once (their pinned host images are
    // allocated then): timed apart from the build.
    let t_new = Instant::now();
    let mut t: PagedTable<S, K, K> = PagedTable::new(cfg).map_err(lib)?;
    let create_s = t_new.elapsed().as_secs_f64();
    let n = child_slots * children * 3 / 4;
    let b = 1usize << 27;
    let make = |from: u64, m: usize| -> (Vec<K>, Vec<K>) {
        let k: Vec<K> = (0..m as u64)
            .into_par_iter()
            .map(|i| K::of(from + i))
            .collect();
        let v = k.par_iter().map(|k| k.value()).collect();
        (k, v)
    };
    let mut secs = 0.0;
    let mut at = 0;
    let t_all = Instant::now();
    eprintln!(
        "  big: {gib} GiB of {}-bit pairs ({} {}), {children} children, {budget} resident, {n} keys",
        K::BITS,
        S::NAME,
        t.bucket_size()
    );
    while at < n {
        let m = b.min(n - at);
        let (k, v) = make(at as u64, m);
        let before = t.paging().bytes_moved;
        let t0 = Instant::now();
        t.insert(&k, &v).map_err(lib)?;
        let bs = t0.elapsed().as_secs_f64();
        secs += bs;
        at += m;
        eprintln!(
            "  big: {at}/{n} keys, batch {:.2} s, {:.1} GB swapped ({:.1} GB/s; pinned {pinned:.1})",
            bs,
            (t.paging().bytes_moved - before) as f64 / 1e9,
            (t.paging().bytes_moved - before) as f64 / 1e9 / bs
        );
    }
    let moved = t.paging().bytes_moved as f64 / 1e9;
    // Warm-up: a find of 2^22 stored keys whose children are resident compiles the find's kernels (each
    // kernel compiles at its first launch: 210 of a 524 ms find in session 14's call C), pages nothing, and
    // leaves the paging state as the build left it.
    let resident: std::collections::HashSet<usize> = t.resident_children().into_iter().collect();
    let warm: Vec<K> = (0..n as u64)
        .map(K::of)
        .filter(|k| t.child_of(*k).is_some_and(|c| resident.contains(&c)))
        .take(1 << 22)
        .collect();
    let swaps = t.paging().swaps_in;
    let mut out = vec![K::zero(); warm.len()];
    t.find_into(&warm, &mut out).map_err(lib)?;
    if t.paging().swaps_in != swaps {
        return Err("the warm-up find paged children in".into());
    }
    // Sample: 2^24 stored keys spread over the whole range, then 2^20 absent ones.
    let m = (1usize << 24).min(n);
    let step = n as u64 / m as u64;
    let mut q: Vec<K> = (0..m as u64)
        .into_par_iter()
        .map(|i| K::of(i * step))
        .collect();
    q.extend((0..1u64 << 20).map(|i| K::of(K::ABSENT_COUNTER + i)));
    let before = t.paging().bytes_moved;
    let mut out = vec![K::zero(); q.len()];
    let t0 = Instant::now();
    t.find_into(&q, &mut out).map_err(lib)?;
    let fs = t0.elapsed().as_secs_f64();
    let fmoved = (t.paging().bytes_moved - before) as f64 / 1e9;
    let ok = q
        .par_iter()
        .zip(out.par_iter())
        .enumerate()
        .all(|(i, (k, g))| {
            if i < m {
                *g == k.value()
            } else {
                *g == <K as hashtile::Value>::ABSENT
            }
        })
        && t.len() == n;
    let csv = format!(
        "table_GiB,key_bits,budget_GiB,children,resident,keys,create_s,build_s,build_M_keys_per_s,build_swap_GB,build_swap_GB_per_s,find_keys,find_s,find_swap_GB,find_swap_GB_per_s,pinned_GB_per_s,build_of_pinned,find_of_pinned,wall_s,ok\n\
         {gib},{},{},{children},{budget},{n},{create_s:.3},{secs:.3},{:.1},{moved:.2},{:.2},{},{fs:.3},{fmoved:.2},{:.2},{pinned:.2},{:.3},{:.3},{:.1},{ok}\n",
        K::BITS,
        s.big_budget_gib,
        n as f64 / secs / 1e6,
        moved / secs,
        q.len(),
        fmoved / fs,
        moved / secs / pinned,
        fmoved / fs / pinned,
        t_all.elapsed().as_secs_f64()
    );
    eprintln!(
        "  big: {gib} GiB in {children} children, {budget} resident: made in {create_s:.2} s; build {:.1} M keys/s, swaps {:.1} GB/s ({:.2} of pinned); find {:.1} GB/s ({:.2}); answers {}",
        n as f64 / secs / 1e6,
        moved / secs,
        moved / secs / pinned,
        fmoved / fs,
        fmoved / fs / pinned,
        if ok { "right" } else { "WRONG" }
    );
    save(s, &format!("big_{gib}g_{}bit", K::BITS), &csv, None)?;
    Ok(ok)
}
