//! `hashtile-bench csr`: CSR (HashGraph) tables. Two groups of rows, every answer checked:
//!
//! - **as users call them, on host data** (`CsrTable::build`, `count`, `find_all`, `CsrJoin` plan + write): on
//!   the resolved backend, against `std::collections::HashMap<K, Vec<V>>` (build and lookups) measured in the
//!   same run, and beside `HashTable::insert` (BCHT) of the same number of unique keys from host `Vec`s;
//! - **device-resident** (GPU backends only, `device.rs`): the kernels' rates, against hashtile's BCHT inserting
//!   the same number of unique keys on the device in the same run.
//!
//! Over duplicates per key, hash ranges (vertices per key), build methods (`--builds`) and lookup tile widths
//! (`--tiles`). Writes a CSV and SVG plots beside it (rates vs duplicates, rates vs hash range).
//!
//! Layout: `args` (the options and their checks), `common` (the row and the case both groups use), `device`
//! (the device-resident rows); this file runs the mode and writes the host rows, the CSV and the plots.

mod args;
mod common;
mod device;

pub use args::{CsrArgs, check};

use crate::common::{bus_rate, time};
use crate::plot::{Figure, Panel, Series, XAxis, write_svg};
use common::{Case, CsrRow, build_name};
use hashtile::gpu::measure_copy_ceiling;
use hashtile::gpu::transfer::CopyCeiling;
use hashtile::hash::fmix32;
use hashtile::{
    Backend, BackendChoice, Bcht, CsrBuild, CsrConfig, CsrJoin, CsrTable, HashTable, JoinMethod,
    TableConfig,
};
use rayon::prelude::*;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// Runs the mode; returns the exit status (2 when an answer was wrong).
pub fn run(a: &CsrArgs) -> Result<i32, String> {
    let err = |e: hashtile::Error| e.to_string();
    let backend = crate::checks::available_backend(a.backend)?;
    let gpu = backend != Backend::Cpu;
    let n = 1usize << a.log2_keys;
    let mut rows = Vec::new();
    // Baselines on unique keys, once: BCHT's insert from host `Vec`s and (GPUs) device-resident.
    let unique: Vec<u32> = (0..n as u32)
        .into_par_iter()
        .map(|i| fmix32(i ^ 0x5bd1_e995))
        .collect();
    let (host_bcht, _) = time(
        a.runs,
        n,
        || Ok(()),
        || {
            let cfg = TableConfig::for_keys(n, 0.8).backend(BackendChoice::Exactly(backend));
            let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg)?;
            t.insert(&unique, &unique)?;
            Ok(t.len())
        },
        |len| len == n,
    )
    .map_err(err)?;
    let dev_bcht = if gpu {
        eprintln!(
            "csr: BCHT baseline (device-resident, 2^{} unique keys)",
            a.log2_keys
        );
        Some(crate::baseline::bcht_baseline(backend, &unique, a.runs)?)
    } else {
        None
    };
    drop(unique);
    // The pageable bus, for the host rows' bus column (plain driver copies of 4 bytes a key).
    let ceiling = if gpu {
        let c = measure_copy_ceiling(backend, 4 * n).map_err(err)?;
        if let Some(c) = c {
            println!(
                "bus ({} MB copies): host->device {:.1} GB/s pageable; device->host {:.1}",
                c.bytes >> 20,
                c.h2d_pageable,
                c.d2h_pageable
            );
        }
        c
    } else {
        None
    };
    // The static insert beside the rows moves a key and a value up.
    let host_bus = bus_rate(ceiling, false, 8.0, 0.0);
    for &dups in &a.dups {
        // n keys: n / dups distinct keys (dups divides n, checked), each exactly `dups` times, `n / dups`
        // positions apart; a bijective mix of the key's number spreads the keys over the key space.
        let distinct = n / dups;
        eprintln!("csr: {n} keys, {distinct} distinct ({dups} per key)");
        let keys: Vec<u32> = (0..n as u32)
            .into_par_iter()
            .map(|i| fmix32((i % distinct as u32) ^ 0x5bd1_e995))
            .collect();
        let values: Vec<u32> = (0..n as u32).collect();
        let value_sum_all = dups as u64 * values.iter().map(|&v| v as u64).sum::<u64>();
        // Baseline on the CPU: a multimap built and probed on the same keys. On a GPU the baseline is BCHT
        // (above): a single-threaded multimap of 2^25 keys takes longer than the whole device run.
        let (map_build, map_find) = if gpu {
            (host_bcht, f64::NAN)
        } else {
            multimap_rates(a.runs, &keys, &values, distinct, dups).map_err(err)?
        };
        let mut case = Case {
            dups,
            range: 0.0,
            keys,
            values,
            value_sum_all,
        };
        for &range in &a.range {
            eprintln!("csr:   range factor {range}");
            case.range = range;
            host_rows(a, backend, &case, (map_build, map_find), ceiling, &mut rows).map_err(err)?;
            if let Some([_, bulk]) = dev_bcht {
                eprintln!("csr:   device-resident");
                device::rows(backend, a, &case, bulk, &mut rows)?;
            }
            // The CSV so far: a run cut short keeps what it measured.
            write_csv(&a.csv, &rows, (host_bcht, host_bus), dev_bcht)?;
        }
    }
    print_rows(&rows, host_bcht, dev_bcht);
    write_csv(&a.csv, &rows, (host_bcht, host_bus), dev_bcht)?;
    println!("wrote {}", a.csv);
    let plots = write_plots(&a.csv, &rows, a)?;
    for p in &plots {
        println!("wrote {p}");
    }
    Ok(if rows.iter().all(|r| r.ok) { 0 } else { 2 })
}

/// Build and lookup rates (M keys/s) of a `HashMap<u32, Vec<u32>>` multimap on the same keys.
fn multimap_rates(
    runs: usize,
    keys: &[u32],
    values: &[u32],
    distinct: usize,
    dups: usize,
) -> hashtile::Result<(f64, f64)> {
    let n = keys.len();
    let (build, _) = time(
        runs,
        n,
        || Ok(()),
        || {
            let mut m: HashMap<u32, Vec<u32>> = HashMap::with_capacity(distinct);
            for (&k, &v) in keys.iter().zip(values) {
                m.entry(k).or_default().push(v);
            }
            Ok(m)
        },
        |m| m.len() == distinct,
    )?;
    let mut map: HashMap<u32, Vec<u32>> = HashMap::with_capacity(distinct);
    for (&k, &v) in keys.iter().zip(values) {
        map.entry(k).or_default().push(v);
    }
    let (find, _) = time(
        runs,
        n,
        || Ok(()),
        || {
            Ok(keys
                .iter()
                .map(|k| map.get(k).map_or(0, |v| v.len()))
                .sum::<usize>())
        },
        |s| s == n * dups,
    )?;
    Ok((build, find))
}

/// The rows of one case on host data, as users call the API: the first build method and tile width (the
/// device-resident rows compare them all).
fn host_rows(
    a: &CsrArgs,
    backend: Backend,
    case: &Case,
    (map_build, map_find): (f64, f64),
    ceiling: Option<CopyCeiling>,
    rows: &mut Vec<CsrRow>,
) -> hashtile::Result<()> {
    let (keys, values, dups, n) = (&case.keys, &case.values, case.dups, case.keys.len());
    // Bytes per key each call moves: up (keys, values) and down (answers); `dups` values a key.
    let d = dups as f64;
    let bus = |up: f64, down: f64| bus_rate(ceiling, false, up, down);
    let base = CsrConfig {
        backend: BackendChoice::Exactly(backend),
        ..CsrConfig::default().range_factor(case.range)
    };
    let mut push =
        |op: &str, build: CsrBuild, tile: u32, (rate, ok): (f64, bool), baseline, bus| {
            rows.push(CsrRow {
                backend,
                resident: false,
                dups,
                range: case.range,
                op: op.into(),
                build: build_name(build),
                tile,
                keys: n,
                rate,
                baseline,
                bus,
                ok,
            })
        };
    let (build, tile) = (a.builds[0], a.tiles[0]);
    {
        let cfg = CsrConfig {
            build,
            lookup_tile: tile,
            ..base.clone()
        };
        let r = time(
            a.runs,
            n,
            || Ok(()),
            || CsrTable::build(&cfg, keys, values),
            |t| t.len() == n,
        )?;
        push("build", build, 0, r, map_build, bus(8.0, 0.0));
        let t = CsrTable::build(&cfg, keys, values)?;
        let r = time(
            a.runs,
            n,
            || Ok(()),
            || t.count(keys),
            |c| c.iter().all(|&c| c as usize == dups),
        )?;
        push("count", build, tile, r, map_find, bus(4.0, 4.0));
        let r = time(
            a.runs,
            n,
            || Ok(()),
            || t.find_all(keys),
            |f| {
                f.values.len() == n * dups
                    && f.values.iter().map(|&v| v as u64).sum::<u64>() == case.value_sum_all
            },
        )?;
        push(
            "find_all",
            build,
            tile,
            r,
            map_find,
            bus(4.0, 4.0 + 4.0 * d),
        );
    }
    // Joins of the keys with themselves: `dups^2` pairs per distinct key.
    let cfg = CsrConfig {
        build,
        lookup_tile: a.tiles[0],
        ..base
    };
    for (op, method) in [
        ("join probe", JoinMethod::Probe),
        ("join intersect", JoinMethod::Intersect),
    ] {
        let want = n * dups;
        let r = time(
            a.runs,
            n,
            || Ok(()),
            || {
                let j = CsrJoin::plan(&cfg, keys, keys, method)?;
                let (mut l, mut r) = (vec![0u32; j.len()], vec![0u32; j.len()]);
                j.write_into(&mut l, &mut r)?;
                Ok((l, r))
            },
            |(l, r)| {
                l.len() == want
                    && l.iter()
                        .zip(&r)
                        .all(|(&i, &j)| keys[i as usize] == keys[j as usize])
            },
        )?;
        push(op, build, a.tiles[0], r, f64::NAN, bus(8.0, 8.0 * d));
    }
    Ok(())
}

/// The table on stdout, then the aims as ratios.
fn print_rows(rows: &[CsrRow], host_bcht: f64, dev_bcht: Option<[f64; 2]>) {
    println!();
    println!(
        "{:<7} {:<9} {:<5} {:<6} {:<16} {:<8} {:>4} {:>10} {:>10} {:>10} {:>7} {:>6}  ok",
        "backend",
        "data",
        "dups",
        "range",
        "call",
        "build",
        "tile",
        "keys",
        "M keys/s",
        "baseline",
        "ratio",
        "x bus"
    );
    for r in rows {
        println!(
            "{:<7} {:<9} {:<5} {:<6} {:<16} {:<8} {:>4} {:>10} {:>10.1} {:>10.1} {:>7.2} {:>6.2}  {}",
            r.backend,
            r.data(),
            r.dups,
            r.range,
            r.op,
            r.build,
            r.tile,
            r.keys,
            r.rate,
            r.baseline,
            r.rate / r.baseline,
            r.rate / r.bus,
            if r.ok { "yes" } else { "NO" }
        );
    }
    println!(
        "baselines: host rows: a HashMap<u32, Vec<u32>> multimap on the CPU backend, BCHT's HashTable::insert from \
         host Vecs (unique keys) on a GPU; device rows: BCHT's device-resident bulk insert of the same number of \
         unique keys. Joins: the keys with themselves, rate per input key. x bus: the rate over the one the \
         pageable bus allows for the call's bytes (driver copies of this run; host rows on GPUs)."
    );
    println!(
        "BCHT insert from host Vecs (HashTable::insert, unique keys): {host_bcht:.1} M keys/s"
    );
    if let Some([upsert, bulk]) = dev_bcht {
        println!(
            "BCHT device-resident insert (B=8, load 0.8, unique keys): {upsert:.1} M keys/s with the upsert check, {bulk:.1} without"
        );
        // Issue 11's aims, per hash range: unique build vs BCHT, 32 duplicates within 20%, join vs two builds.
        for r in rows.iter().filter(|r| r.resident && r.op == "build") {
            println!(
                "aim: build {} dups {} range {}: {:.2}x BCHT's bulk insert",
                r.build,
                r.dups,
                r.range,
                r.rate / bulk
            );
        }
        for j in rows
            .iter()
            .filter(|r| r.resident && r.op.starts_with("join"))
        {
            if let Some(b) = rows.iter().find(|b| {
                b.resident
                    && b.op == "build"
                    && b.build == j.build
                    && b.dups == j.dups
                    && b.range == j.range
            }) {
                // Time of the join (tables built inside it) over the time of building two tables.
                println!(
                    "aim: {} dups {} range {}: {:.2}x the time of building both tables",
                    j.op,
                    j.dups,
                    j.range,
                    (1.0 / j.rate) / (2.0 / b.rate)
                );
            }
        }
    }
}

/// Writes the rows (and the baselines, as rows of their own) as CSV.
fn write_csv(
    path: &str,
    rows: &[CsrRow],
    (host_bcht, host_bus): (f64, f64),
    dev_bcht: Option<[f64; 2]>,
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("{path}: {e}");
    let mut f = std::fs::File::create(path).map_err(io)?;
    writeln!(
        f,
        "backend,data,dups,range,op,build,tile,keys,mkeys_s,baseline_mkeys_s,checked,bus_mkeys_s"
    )
    .map_err(io)?;
    for r in rows {
        writeln!(
            f,
            "{},{},{},{},{},{},{},{},{:.1},{:.1},{},{:.1}",
            r.backend,
            r.data(),
            r.dups,
            r.range,
            r.op,
            r.build,
            r.tile,
            r.keys,
            r.rate,
            r.baseline,
            r.ok,
            r.bus
        )
        .map_err(io)?;
    }
    let (b, n) = rows
        .first()
        .map_or((Backend::Cpu, 0), |r| (r.backend, r.keys));
    writeln!(
        f,
        "{b},host,1,,bcht insert,,0,{n},{host_bcht:.1},,true,{host_bus:.1}"
    )
    .map_err(io)?;
    if let Some([upsert, bulk]) = dev_bcht {
        writeln!(
            f,
            "{b},device,1,,bcht insert upsert,,0,{n},{upsert:.1},,true,"
        )
        .map_err(io)?;
        writeln!(f, "{b},device,1,,bcht insert bulk,,0,{n},{bulk:.1},,true,").map_err(io)?;
    }
    Ok(())
}

/// SVG plots beside the CSV: for each data placement (host, device), rates vs duplicates per key (one panel
/// per hash range) and rates vs hash range (one panel per duplicate count), a line per call.
fn write_plots(csv: &str, rows: &[CsrRow], a: &CsrArgs) -> Result<Vec<String>, String> {
    let stem = csv.strip_suffix(".csv").unwrap_or(csv);
    let mut files = Vec::new();
    for resident in [false, true] {
        let sel: Vec<&CsrRow> = rows.iter().filter(|r| r.resident == resident).collect();
        if sel.is_empty() {
            continue;
        }
        let place = if resident { "device" } else { "host" };
        // A line per call and, where it varies, per build or tile.
        let line = |r: &CsrRow| match r.op.as_str() {
            "build" => format!("build {}", r.build),
            op if r.tile > 0 && a.tiles.len() > 1 => format!("{op} tile {}", r.tile),
            op => op.to_string(),
        };
        let mut names: Vec<String> = Vec::new();
        for r in &sel {
            let l = line(r);
            if !names.contains(&l) {
                names.push(l);
            }
        }
        let series = |keep: &dyn Fn(&CsrRow) -> bool, x: &dyn Fn(&CsrRow) -> f64| -> Vec<Series> {
            names
                .iter()
                .map(|name| Series {
                    name: name.clone(),
                    points: sel
                        .iter()
                        .filter(|r| keep(r) && &line(r) == name)
                        .map(|r| (x(r), Some(r.rate)))
                        .collect(),
                })
                .filter(|s| !s.points.is_empty())
                .collect()
        };
        let fig = |caption: String, x_label: &str, x_axis, panels| Figure {
            caption,
            x_label: x_label.into(),
            y_label: "M keys/s".into(),
            x_axis,
            y_range: None,
            cols: 3,
            panels,
        };
        let backend = sel[0].backend;
        if a.dups.len() > 1 {
            let panels = a
                .range
                .iter()
                .map(|&range| Panel {
                    title: format!("{range} vertices per key"),
                    series: series(&|r| r.range == range, &|r| (r.dups as f64).log2()),
                })
                .collect();
            let path = format!("{stem}_{place}_vs_dups.svg");
            write_svg(
                Path::new(&path),
                &fig(
                    format!(
                        "CSR rates vs duplicates per key, {place} data, 2^{} keys, {backend}",
                        a.log2_keys
                    ),
                    "duplicates per key",
                    XAxis::Log2,
                    panels,
                ),
            )?;
            files.push(path);
        }
        if a.range.len() > 1 {
            let panels = a
                .dups
                .iter()
                .map(|&dups| Panel {
                    title: format!("{dups} per key"),
                    series: series(&|r| r.dups == dups, &|r| r.range),
                })
                .collect();
            let path = format!("{stem}_{place}_vs_range.svg");
            write_svg(
                Path::new(&path),
                &fig(
                    format!(
                        "CSR rates vs hash range, {place} data, 2^{} keys, {backend}",
                        a.log2_keys
                    ),
                    "vertices per key",
                    XAxis::Linear,
                    panels,
                ),
            )?;
            files.push(path);
        }
    }
    Ok(files)
}
