//! `host`: the user-facing calls, as users make them: `hashtile::chained::ChainedTable<u32, u32>` at load 0.6
//! (`ChainedConfig::for_keys`) on the GPU backend, keys and values in host `Vec`s, each call's copies both ways
//! included. Timed calls: `insert` (multimap) and `replace` into a fresh table, `find`, `count` and `find_all`
//! of every key on a filled table, `erase` of every key from a freshly filled one; every answer checked against
//! the input. The same on the CPU store for reference where 2^k <= 2^22, at 2^(n-4), 2^(n-2) and 2^n keys (so
//! that a run at SlabHash's 2^24 keys still has CPU references, and the per-call overhead shows). At the
//! largest size also `ChainedTable<u64, u64>` (the wide slab layout; each key `k` as `k << 32 | k`, so that
//! both halves vary), rows marked `64/64`.
//!
//! Each GPU rate is set against the bus measured in the same run with plain driver copies from and into
//! pageable memory (`measure_copy_ceiling`; the data are `Vec`s): the bytes a call must move per key (an insert
//! its key and value up; a find its key up and its value down; a count its key up and a `u32` down; a
//! `find_all` its key up and its value and count down; an erase its key up) at the bus rates.

use super::common::{self, Ctx, cell, yes};
use crate::plot::{Figure, Panel, Series, XAxis};
use hashtile::chained::ChainedConfig;
use hashtile::gpu::measure_copy_ceiling;
use hashtile::gpu::transfer::CopyCeiling;
use hashtile::{Backend, BackendChoice, ChainedTable, Key, Value};
use std::fmt::Write as _;
use std::time::Instant;

/// The calls timed, in order.
const OPS: [&str; 6] = ["insert", "replace", "find", "count", "find_all", "erase"];

/// Largest key count the CPU store is measured at.
const CPU_MAX_LOG2: u32 = 22;

/// One call at one size on one backend: M keys/s and whether its answers were right.
struct Rate {
    mkeys: f64,
    ok: bool,
}

/// One row: a call at a size, on the GPU and (where measured) the CPU.
struct Row {
    log2_keys: u32,
    /// Key / value bits: `32/32` or `64/64`.
    widths: &'static str,
    op: &'static str,
    gpu: Rate,
    cpu: Option<Rate>,
}

/// `--runs` timed calls after one warm-up, each on what `setup` returns (untimed); returns the runs' seconds
/// and the last run's table and answer.
fn timed<T, U>(
    runs: usize,
    mut setup: impl FnMut() -> hashtile::Result<T>,
    mut call: impl FnMut(&mut T) -> hashtile::Result<U>,
) -> Result<(Vec<f64>, T, U), String> {
    let mut secs = Vec::new();
    let mut last = None;
    for run in 0..=runs {
        let mut t = setup().map_err(common::lib)?;
        let t0 = Instant::now();
        let u = call(&mut t).map_err(common::lib)?;
        if run > 0 {
            secs.push(t0.elapsed().as_secs_f64());
        }
        last = Some((t, u));
    }
    let (t, u) = last.expect("at least one run");
    Ok((secs, t, u))
}

/// Bytes one key's call moves up and down at least, for call `op` with keys and values of `kb` and `vb` bytes.
fn bytes_per_key(op: &str, kb: f64, vb: f64) -> (f64, f64) {
    match op {
        "insert" | "replace" => (kb + vb, 0.0),
        "find" => (kb, vb),
        "count" => (kb, 4.0),
        "find_all" => (kb, vb + 4.0),
        _ => (kb, 0.0), // erase
    }
}

/// M keys/s the pageable bus allows for call `op` on `widths` (`32/32` or `64/64`).
fn bus_rate(c: &CopyCeiling, op: &str, widths: &str) -> f64 {
    let b = if widths == "64/64" { 8.0 } else { 4.0 };
    let (up, down) = bytes_per_key(op, b, b);
    1.0 / (up / (c.h2d_pageable * 1e9) + down / (c.d2h_pageable * 1e9)) / 1e6
}

/// Every call of [`OPS`] on `backend` with the first `m` keys, in that order, on a table of `K -> V` (the
/// bench's 32-bit keys and values spread over both halves of 64-bit ones).
fn calls<K: Key, V: Value>(ctx: &Ctx, backend: Backend, m: usize) -> Result<Vec<Rate>, String> {
    let spread = |x: u32, bits: u32| {
        if bits == 64 {
            (x as u64) << 32 | x as u64
        } else {
            x as u64
        }
    };
    let keys: Vec<K> = ctx.keys[..m]
        .iter()
        .map(|&k| K::narrow(spread(k, K::BITS)))
        .collect();
    let values: Vec<V> = ctx.values[..m]
        .iter()
        .map(|&v| V::narrow(spread(v, V::BITS)))
        .collect();
    let (keys, values) = (&keys[..], &values[..]);
    let runs = ctx.a.runs;
    let cfg = ChainedConfig::for_keys(m, 0.6).backend(BackendChoice::Exactly(backend));
    let new = || ChainedTable::<K, V>::new(cfg.clone());
    let filled = || {
        let mut t = new()?;
        t.replace(keys, values)?;
        Ok(t)
    };
    let found = |got: &[Option<V>]| got.iter().zip(values).all(|(g, v)| *g == Some(*v));
    let r = |secs: &[f64], ok: bool| Rate {
        mkeys: common::rate(m, secs) / 1e6,
        ok,
    };
    let mut out = Vec::new();
    let (secs, t, ()) = timed(runs, new, |t| t.insert(keys, values))?;
    let got = t.find(keys).map_err(common::lib)?;
    out.push(r(&secs, t.len() == m && found(&got)));
    drop(t);
    let (secs, t, added) = timed(runs, new, |t| t.replace(keys, values))?;
    out.push(r(&secs, added == m && t.len() == m));
    drop(t);
    let f = filled().map_err(common::lib)?;
    let (secs, _, got) = timed(runs, || Ok(()), |_| f.find(keys))?;
    out.push(r(&secs, found(&got)));
    let (secs, _, got) = timed(runs, || Ok(()), |_| f.count(keys))?;
    out.push(r(&secs, got.iter().all(|&c| c == 1)));
    let (secs, _, got) = timed(runs, || Ok(()), |_| f.find_all(keys))?;
    let ok = got
        .offsets
        .iter()
        .enumerate()
        .all(|(i, &o)| o as usize == i)
        && got.values == values;
    out.push(r(&secs, ok));
    drop(f);
    let (secs, t, erased) = timed(runs, filled, |t| t.erase(keys))?;
    out.push(r(&secs, erased == m && t.is_empty()));
    Ok(out)
}

/// Every call at `2^s` keys of `K -> V` on the GPU backend, and on the CPU where `s` allows.
fn rows_at<K: Key, V: Value>(ctx: &Ctx, s: u32, widths: &'static str) -> Result<Vec<Row>, String> {
    let m = 1usize << s;
    eprintln!(
        "chained: host: 2^{s} keys ({widths} bits) on {}",
        ctx.backend
    );
    let gpu = calls::<K, V>(ctx, ctx.backend, m)?;
    let cpu: Vec<Option<Rate>> = if s <= CPU_MAX_LOG2 {
        eprintln!("chained: host: 2^{s} keys ({widths} bits) on the CPU");
        calls::<K, V>(ctx, Backend::Cpu, m)?
            .into_iter()
            .map(Some)
            .collect()
    } else {
        (0..OPS.len()).map(|_| None).collect()
    };
    Ok(OPS
        .into_iter()
        .zip(gpu)
        .zip(cpu)
        .map(|((op, gpu), cpu)| Row {
            log2_keys: s,
            widths,
            op,
            gpu,
            cpu,
        })
        .collect())
}

/// Runs the experiment; returns whether every answer was right.
pub(super) fn run(ctx: &Ctx) -> Result<bool, String> {
    let l = ctx.a.log2_keys;
    eprintln!("chained: host: measuring the bus with driver copies");
    let ceiling = measure_copy_ceiling(ctx.backend, 8 << l).map_err(common::lib)?;
    let mut sizes: Vec<u32> = [l.saturating_sub(4), l.saturating_sub(2), l]
        .into_iter()
        .filter(|&s| s >= 10.min(l))
        .collect();
    sizes.dedup();
    let mut rows = Vec::new();
    for &s in &sizes {
        rows.extend(rows_at::<u32, u32>(ctx, s, "32/32")?);
    }
    // 64-bit keys and values at the largest size.
    rows.extend(rows_at::<u64, u64>(ctx, l, "64/64")?);
    println!(
        "\nhost: ChainedTable<u32, u32> (32/32) and <u64, u64> (64/64) calls on host Vecs (load 0.6), M keys/s, median of {} runs; CPU store up to 2^{CPU_MAX_LOG2} keys",
        ctx.a.runs
    );
    if let Some(c) = &ceiling {
        println!(
            "bus ({} MB driver copies): host->device {:.1} GB/s pageable ({:.1} pinned), device->host {:.1} ({:.1})",
            c.bytes >> 20,
            c.h2d_pageable,
            c.h2d_pinned,
            c.d2h_pageable,
            c.d2h_pinned
        );
    }
    println!(
        "{:>6} {:>5} {:<9} {:>10} {:>8} {:>7} {:>10} {:>8}  ok",
        "keys",
        "bits",
        "call",
        ctx.backend.to_string(),
        "bus",
        "of bus",
        "cpu",
        "gpu/cpu"
    );
    let mut csv = String::from(
        "gpu_backend,log2_keys,widths,op,gpu_mkeys_s,bus_mkeys_s,of_bus,cpu_mkeys_s,gpu_over_cpu,checked\n",
    );
    let ok_of = |r: &Row| r.gpu.ok && r.cpu.as_ref().is_none_or(|c| c.ok);
    for r in &rows {
        let cpu = r.cpu.as_ref().map(|c| c.mkeys);
        let over = cpu.filter(|&c| c > 0.0).map(|c| r.gpu.mkeys / c);
        let bus = ceiling.as_ref().map(|c| bus_rate(c, r.op, r.widths));
        let of_bus = bus.filter(|&b| b > 0.0).map(|b| r.gpu.mkeys / b);
        println!(
            "{:>6} {:>5} {:<9} {:>10.1} {} {} {} {}  {}",
            format!("2^{}", r.log2_keys),
            r.widths,
            r.op,
            r.gpu.mkeys,
            common::shown(bus, 0, 8),
            common::shown(of_bus, 2, 7),
            common::shown(cpu, 1, 10),
            common::shown(over, 2, 8),
            yes(ok_of(r))
        );
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.2},{},{},{},{},{}",
            ctx.backend,
            r.log2_keys,
            r.widths,
            r.op,
            r.gpu.mkeys,
            cell(bus, 1),
            cell(of_bus, 3),
            cell(cpu, 2),
            cell(over, 3),
            ok_of(r)
        );
    }
    common::write_outputs(ctx, "host", &csv, &figure(ctx, &rows))?;
    Ok(rows.iter().all(ok_of))
}

/// M keys/s vs keys, a panel per call, the GPU backend and the CPU.
fn figure(ctx: &Ctx, rows: &[Row]) -> Figure {
    let panels = OPS
        .iter()
        .map(|&op| {
            let of = |f: &dyn Fn(&Row) -> Option<f64>| {
                rows.iter()
                    .filter(|r| r.op == op && r.widths == "32/32")
                    .map(|r| (r.log2_keys as f64, f(r)))
                    .collect()
            };
            Panel {
                title: op.into(),
                series: vec![
                    Series {
                        name: ctx.backend.to_string(),
                        points: of(&|r| r.gpu.ok.then_some(r.gpu.mkeys)),
                    },
                    Series {
                        name: "cpu".into(),
                        points: of(&|r| r.cpu.as_ref().filter(|c| c.ok).map(|c| c.mkeys)),
                    },
                ],
            }
        })
        .collect();
    Figure {
        caption: format!(
            "Chained tables: ChainedTable calls on host data, {} and CPU",
            ctx.backend
        ),
        x_label: "keys".into(),
        y_label: "M keys/s".into(),
        x_axis: XAxis::Log2,
        y_range: None,
        cols: 3,
        panels,
    }
}
