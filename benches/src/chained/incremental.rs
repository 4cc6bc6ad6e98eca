//! `incremental`: the SlabHash paper's Figure 6. One table sized for the final count (`ceil(n / 9)` lists, as
//! SlabHash's benchmark puts 9 pairs per bucket; a pool of `n / 15` slabs, at least 1024) receives the 2^n keys
//! in batches of 2^k (`--batches`), INSERT mode (no duplicate check, like SlabHash's `buildBulk`). Each batch is
//! uploaded as its own buffer before timing (SlabHash times only its kernels); the time is that of all batches
//! and the final sync, as G keys/s. Checked: the table's length and a find of every key afterwards.
//!
//! Baseline, same run: what a static table would do instead, rebuilding hashtile's BCHT (B = 8, load 0.8,
//! bulk build without the duplicate check, device-resident, as `csr::device::bcht_baseline` builds it) from
//! scratch after each batch with every key so far. A rebuild is timed from emptying the table to the sync
//! after its insert; the table's allocation (with its host staging buffers) is left out, which favours the
//! baseline. Each rebuild size is built `--runs` + 1 times on one table, and run `r`'s total is the sum of
//! every size's run `r`. Speed-up = rebuild time / incremental time (issue 10's acceptance: at least 5x).

use super::common::{self, Ctx, cell, lib, rate, read, shown, sync, upload, yes};
use crate::plot::{Figure, Panel, Series, XAxis};
use hashtile::cubecl::prelude::*;
use hashtile::cubecl::server::Handle;
use hashtile::gpu::chained::{GpuChained, QueueStats, status};
use hashtile::gpu::transfer::HostTransfer;
use hashtile::gpu::{GpuOptions, GpuTable};
use hashtile::{Backend, Bcht, HashFamily, SchemeInfo, TableConfig};
use std::fmt::Write as _;
use std::time::Instant;

/// One batch size's results.
struct Row {
    log2_batch: u32,
    /// Median seconds of all batches into the chained table.
    incremental_s: f64,
    /// Median seconds the host took to queue them (the calls returned, before the wait for the device): near
    /// `incremental_s`, the host's launches set the rate; well below it, the device's kernels do.
    queued_s: f64,
    /// Median seconds of every rebuild.
    rebuild_s: f64,
    /// G keys/s: the keys over the incremental time.
    rate: f64,
    /// The peer's rate at this batch size, if given.
    peer: Option<f64>,
    /// The last run's waits for the device and pool growths among its batches.
    stats: QueueStats,
    ok: bool,
}

/// The timed loop's insert of one batch: queued without waiting where the store proves the pool suffices
/// (`insert_queued`; it waits and grows the pool otherwise). The one line to change to compare calls.
fn insert_batch<R: HostTransfer>(
    t: &mut GpuChained<R>,
    keys: &Handle,
    values: &Handle,
    n: usize,
) -> Result<(), String> {
    t.insert_queued(keys, values, n, false).map_err(lib)
}

/// Waits for the queued batches; returns the table's length.
fn finish<R: HostTransfer>(t: &mut GpuChained<R>) -> Result<usize, String> {
    t.settle().map_err(lib)
}

/// Runs the experiment; returns whether every answer was right.
pub(super) fn run<R: HostTransfer>(ctx: &Ctx) -> Result<bool, String> {
    let client = R::client(&Default::default());
    let n = ctx.keys.len();
    let (kh, vh) = (upload(&client, &ctx.keys), upload(&client, &ctx.values));
    let mut rows = Vec::new();
    for &k in &ctx.a.batches {
        eprintln!("chained: incremental: batches of 2^{k}");
        let (incremental_s, queued_s, stats, ok) = incremental::<R>(ctx, &client, &kh, k)?;
        eprintln!("chained: incremental: BCHT rebuilt after each batch of 2^{k}");
        let (rebuild_s, rebuilt_ok) = rebuilds::<R>(ctx, &kh, &vh, k)?;
        let peer = ctx
            .peer
            .as_ref()
            .and_then(|p| p.incremental.iter().find(|i| i.0 == k).map(|i| i.1));
        rows.push(Row {
            log2_batch: k,
            incremental_s,
            queued_s,
            rebuild_s,
            rate: n as f64 / incremental_s / 1e9,
            peer,
            stats,
            ok: ok && rebuilt_ok,
        });
    }
    println!(
        "\nincremental: 2^{} keys in batches, {}{}, INSERT mode, median of {} runs; rebuild: BCHT (B=8, load 0.8) from scratch after each batch",
        ctx.a.log2_keys,
        ctx.backend,
        ctx.tile_note(),
        ctx.a.runs
    );
    println!(
        "{:>6} {:>7} {:>5} {:>5} {:>10} {:>9} {:>9} {:>10} {:>10} {:>8} {:>5} {:>9} {:>8}  ok",
        "batch",
        "batches",
        "waits",
        "grows",
        "incr ms",
        "queued ms",
        "G keys/s",
        "rebuild ms",
        "rebuild G",
        "speedup",
        ">=5x",
        "SlabHash",
        "ours/slab"
    );
    let mut csv = String::from(
        "backend,log2_keys,log2_batch,batches,waits,grows,incremental_ms,incremental_gkeys_s,rebuild_ms,rebuild_gkeys_s,speedup,peer_gkeys_s,over_peer,checked,queued_ms\n",
    );
    for r in &rows {
        let batches = n >> r.log2_batch;
        let rebuild_rate = n as f64 / r.rebuild_s / 1e9;
        let speedup = r.rebuild_s / r.incremental_s;
        let over = r.peer.filter(|&p| p > 0.0).map(|p| r.rate / p);
        println!(
            "{:>6} {:>7} {:>5} {:>5} {:>10.2} {:>9.2} {:>9.3} {:>10.2} {:>10.3} {:>8.1} {:>5} {} {}  {}",
            format!("2^{}", r.log2_batch),
            batches,
            r.stats.pool_reads,
            r.stats.pool_grows,
            r.incremental_s * 1e3,
            r.queued_s * 1e3,
            r.rate,
            r.rebuild_s * 1e3,
            rebuild_rate,
            speedup,
            yes(speedup >= 5.0),
            shown(r.peer, 3, 9),
            shown(over, 2, 8),
            yes(r.ok)
        );
        let _ = writeln!(
            csv,
            "{},{},{},{batches},{},{},{:.3},{:.4},{:.3},{rebuild_rate:.4},{speedup:.2},{},{},{},{:.3}",
            ctx.backend,
            ctx.a.log2_keys,
            r.log2_batch,
            r.stats.pool_reads,
            r.stats.pool_grows,
            r.incremental_s * 1e3,
            r.rate,
            r.rebuild_s * 1e3,
            cell(r.peer, 3),
            cell(over, 3),
            r.ok,
            r.queued_s * 1e3
        );
    }
    println!(
        "rebuild G = keys / total rebuild time (each batch's rebuild inserts every key so far); speedup = rebuild time / incremental time; queued ms: the host's time to queue the batches (near incr ms: its launches set the rate); waits / grows: batches of the last run that waited for a read of the slabs in use / grew the pool"
    );
    common::write_outputs(ctx, "incremental", &csv, &figure(ctx, &rows))?;
    Ok(rows.iter().all(|r| r.ok))
}

/// The chained table's batches of `2^k` keys: (median seconds, median seconds to queue them, the last run's
/// queue statistics, checked).
fn incremental<R: HostTransfer>(
    ctx: &Ctx,
    client: &ComputeClient<R>,
    all_keys: &Handle,
    k: u32,
) -> Result<(f64, f64, QueueStats, bool), String> {
    let n = ctx.keys.len();
    let batch = 1usize << k;
    let family = HashFamily::new(hashtile::DEFAULT_SEED);
    let buckets = n.div_ceil(9) as u32;
    let pool = ((n / 15) as u32).max(1024);
    // Each batch its own buffer, uploaded before timing.
    let batches: Vec<(Handle, Handle)> = ctx
        .keys
        .chunks(batch)
        .zip(ctx.values.chunks(batch))
        .map(|(k, v)| (upload(client, k), upload(client, v)))
        .collect();
    let mut secs = Vec::new();
    let mut queued = Vec::new();
    let mut ok = true;
    let mut stats = QueueStats::default();
    for run in 0..=ctx.a.runs {
        let mut t = ctx.store(client, family, buckets, pool)?;
        sync(client)?;
        let t0 = Instant::now();
        for (kb, vb) in &batches {
            insert_batch(&mut t, kb, vb, batch)?;
        }
        let queued_s = t0.elapsed().as_secs_f64();
        let len = finish(&mut t)?;
        sync(client)?;
        let dt = t0.elapsed().as_secs_f64();
        ok &= len == n;
        if run > 0 {
            secs.push(dt);
            queued.push(queued_s);
        }
        stats = t.queue_stats();
        if run == ctx.a.runs {
            let (fv, ff) = t.find_device(all_keys, n);
            let (v, f) = (read(client, fv, n), read(client, ff, n));
            ok &= v == ctx.values && f.iter().all(|&f| f == status::FOUND);
        }
    }
    Ok((
        n as f64 / rate(n, &secs),
        n as f64 / rate(n, &queued),
        stats,
        ok,
    ))
}

/// The baseline: BCHT rebuilt from scratch after each batch of `2^k` with every key so far: (median total
/// seconds, checked). Every rebuild must place all its keys; the last one's finds are checked.
fn rebuilds<R: HostTransfer>(
    ctx: &Ctx,
    kh: &Handle,
    vh: &Handle,
    k: u32,
) -> Result<(f64, bool), String> {
    let n = ctx.keys.len();
    let batch = 1usize << k;
    let runs = ctx.a.runs;
    let mut totals = vec![0.0; runs];
    let mut ok = true;
    let mut params = Bcht::default_params(8);
    params.upsert = 0;
    let opts = GpuOptions {
        use_cas: true,
        plain_reads: ctx.backend == Backend::Cuda,
    };
    let device = Default::default();
    for m in (1..=n / batch).map(|i| i * batch) {
        let cfg = TableConfig::for_keys(m, 0.8).bucket_size(8);
        let family = HashFamily::new(cfg.seed);
        let nb = cfg.capacity.div_ceil(8) as u32;
        let mut t = GpuTable::<R, Bcht>::new(&device, nb, 8, family, params, opts).map_err(lib)?;
        for run in 0..=runs {
            t.sync().map_err(lib)?;
            let t0 = Instant::now();
            t.reset(family).map_err(lib)?;
            t.insert_device_async(kh, vh, m);
            t.sync().map_err(lib)?;
            let dt = t0.elapsed().as_secs_f64();
            let lost = t.settle().map_err(lib)?;
            ok &= lost.pairs.is_empty() && lost.untracked == 0 && t.len() == m;
            if run > 0 {
                totals[run - 1] += dt;
            }
        }
        if m == n {
            let out = t.alloc_u32(n);
            t.find_device(kh, &out, None, n);
            ok &= t.read_u32(out) == ctx.values;
        }
        let client = t.client().clone();
        drop(t);
        // Give the table's memory back before the next, larger one (the sizes only grow).
        client.memory_cleanup();
    }
    if !ok {
        eprintln!("chained: incremental: a BCHT rebuild lost pairs or answered wrong");
    }
    Ok((crate::common::median(&mut totals), ok))
}

/// G keys/s vs batch size: ours, SlabHash's (if given) and the rebuilt BCHT's effective rate.
fn figure(ctx: &Ctx, rows: &[Row]) -> Figure {
    let n = ctx.keys.len() as f64;
    let series = |name: &str, f: &dyn Fn(&Row) -> Option<f64>| Series {
        name: name.into(),
        points: rows.iter().map(|r| (r.log2_batch as f64, f(r))).collect(),
    };
    let mut s = vec![
        series("hashtile chained", &|r| r.ok.then_some(r.rate)),
        series("BCHT rebuilt after each batch", &|r| {
            r.ok.then_some(n / r.rebuild_s / 1e9)
        }),
    ];
    if ctx.peer.is_some() {
        s.push(series("SlabHash", &|r| r.peer));
    }
    Figure {
        caption: format!(
            "Chained tables: incremental inserts of 2^{} keys, {}",
            ctx.a.log2_keys, ctx.backend
        ),
        x_label: "batch size".into(),
        y_label: "G keys/s".into(),
        x_axis: XAxis::Log2,
        y_range: None,
        cols: 1,
        panels: vec![Panel {
            title: String::new(),
            series: s,
        }],
    }
}
