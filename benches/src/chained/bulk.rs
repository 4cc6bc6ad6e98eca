//! `bulk`: for each `--loads` value (keys per base-slab slot, which sets the number of lists) a bulk build of
//! the 2^n keys into a fresh table in INSERT mode (a further copy per pair, no duplicate check: SlabHash's
//! `buildBulk`) and in REPLACE mode (unique keys), then finds of the keys (present) and of as many keys never
//! stored (absent), and the memory utilisation the build reached (pair bytes over the bytes of the slabs in
//! use, SlabHash's measure). Every find is checked. Baselines in the same run: hashtile's BCHT device-resident
//! insert (B = 8, load 0.8); with `--peer-csv`, the SlabHash table of the nearest utilisation and the ratios.

use super::common::{self, Ctx, cell, lib, rate, ratio, read, shown, sync, upload, yes};
use super::peer::{Peer, PeerTable};
use crate::plot::{Figure, Panel, Series, XAxis};
use hashtile::HashFamily;
use hashtile::chained::ChainedConfig;
use hashtile::gpu::chained::{GpuChained, status};
use hashtile::gpu::transfer::HostTransfer;
use std::fmt::Write as _;
use std::time::Instant;

/// One load's results (rates in G keys/s).
struct Row {
    load: f64,
    utilisation: f64,
    insert: f64,
    replace: f64,
    find_present: f64,
    find_absent: f64,
    ok: bool,
}

/// Runs the experiment; returns whether every answer was right.
pub(super) fn run<R: HostTransfer>(ctx: &Ctx) -> Result<bool, String> {
    eprintln!("chained: bulk: BCHT baseline (device-resident)");
    let bcht = crate::baseline::bcht_baseline(ctx.backend, &ctx.keys, ctx.a.runs)?;
    let (bcht, bcht_bulk) = (bcht[0] / 1e3, bcht[1] / 1e3);
    let mut rows = Vec::new();
    for &load in &ctx.a.loads {
        eprintln!("chained: bulk: load {load}");
        rows.push(one_load::<R>(ctx, load)?);
    }
    let peer = ctx.peer.as_ref();
    let near = |r: &Row| peer.and_then(|p| p.nearest(r.utilisation));

    println!(
        "\nbulk: 2^{} keys, {}{}, G keys/s (median of {} runs); BCHT insert (B=8, load 0.8): {bcht:.3} with the duplicate check, {bcht_bulk:.3} without",
        ctx.a.log2_keys,
        ctx.backend,
        ctx.tile_note(),
        ctx.a.runs
    );
    print!(
        "{:>5} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "load", "util", "insert", "replace", "find+", "find-", "ins/BCHT"
    );
    if peer.is_some() {
        print!(
            " | {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "slabUtil", "slabBld", "slabF+", "slabF-", "ins/slab", "f+/slab", "f-/slab"
        );
    }
    println!("  ok");
    let mut csv = String::from(
        "backend,log2_keys,load,memory_utilisation,build_insert_gkeys_s,build_replace_gkeys_s,find_present_gkeys_s,find_absent_gkeys_s,bcht_insert_gkeys_s,bcht_bulk_gkeys_s,peer_table,peer_util,peer_build_gkeys_s,peer_find100_gkeys_s,peer_find0_gkeys_s,insert_over_peer,find_present_over_peer,find_absent_over_peer,checked\n",
    );
    for r in &rows {
        let p = near(r);
        let ratios = p.map(|p| {
            [
                ratio(r.insert, p.build),
                ratio(r.find_present, p.find100),
                ratio(r.find_absent, p.find0),
            ]
        });
        let [bi, fp, fa] = ratios.unwrap_or_default();
        print!(
            "{:>5.2} {:>5.2} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.2}",
            r.load,
            r.utilisation,
            r.insert,
            r.replace,
            r.find_present,
            r.find_absent,
            r.insert / bcht
        );
        if let Some(p) = p {
            print!(
                " | {:>8.2} {} {} {} {} {} {}",
                p.util,
                shown(p.build, 3, 8),
                shown(p.find100, 3, 8),
                shown(p.find0, 3, 8),
                shown(bi, 2, 8),
                shown(fp, 2, 8),
                shown(fa, 2, 8)
            );
        }
        println!("  {}", yes(r.ok));
        let _ = writeln!(
            csv,
            "{},{},{},{:.4},{:.4},{:.4},{:.4},{:.4},{bcht:.4},{bcht_bulk:.4},{},{},{},{},{},{},{},{},{}",
            ctx.backend,
            ctx.a.log2_keys,
            r.load,
            r.utilisation,
            r.insert,
            r.replace,
            r.find_present,
            r.find_absent,
            p.map_or("", |p| p.table.as_str()),
            cell(p.map(|p| p.util), 2),
            cell(p.and_then(|p| p.build), 3),
            cell(p.and_then(|p| p.find100), 3),
            cell(p.and_then(|p| p.find0), 3),
            cell(bi, 4),
            cell(fp, 4),
            cell(fa, 4),
            r.ok
        );
    }
    if let Some(bad) = peer.and_then(|p| p.bulk.iter().find(|t| !t.ok)) {
        println!(
            "note: the peer marked table {} WRONG (its own check failed)",
            bad.table
        );
    }
    println!(
        "util: pair bytes over the bytes of the slabs in use (15 pairs of 8 bytes per 128-byte slab at most)"
    );
    common::write_outputs(ctx, "bulk", &csv, &figure(ctx, &rows, peer))?;
    Ok(rows.iter().all(|r| r.ok))
}

/// One load: both builds, both finds, the utilisation; each answer of the last run checked.
fn one_load<R: HostTransfer>(ctx: &Ctx, load: f64) -> Result<Row, String> {
    let client = R::client(&Default::default());
    let (keys, absent, values) = (&ctx.keys, &ctx.absent, &ctx.values);
    let n = keys.len();
    let family = HashFamily::new(hashtile::DEFAULT_SEED);
    let (kh, vh, ah) = (
        upload(&client, keys),
        upload(&client, values),
        upload(&client, absent),
    );
    let cfg = ChainedConfig::for_keys(n, load);
    // A pool for the expected overflow (lists longer than one slab) and some to spare.
    let pool = ((n as f64 / 15.0) as u32).max(1024);
    let fresh = || ctx.store(&client, family, cfg.buckets, pool);
    let mut secs: [Vec<f64>; 4] = Default::default();
    let mut ok = true;
    let mut utilisation = 0.0;
    // Checks a find of every stored key: the right value, found.
    let check_present = |t: &GpuChained<R>| -> Result<bool, String> {
        let (fv, ff) = t.find_device(&kh, n);
        let (v, f) = (read(&client, fv, n), read(&client, ff, n));
        Ok(&v == values && f.iter().all(|&f| f == status::FOUND) && t.len() == n)
    };
    // A timed build into a fresh table: the table, the seconds, and whether every pair was new.
    let build = |unique: bool| -> Result<(GpuChained<R>, f64, bool), String> {
        let mut t = fresh()?;
        sync(&client)?;
        let t0 = Instant::now();
        let added = t.insert_device(&kh, &vh, n, unique).map_err(lib)?;
        sync(&client)?;
        Ok((t, t0.elapsed().as_secs_f64(), added == n))
    };
    for run in 0..=ctx.a.runs {
        let last = run == ctx.a.runs;
        // INSERT mode (multimap, no duplicate check).
        let (t, di, all_new) = build(false)?;
        ok &= all_new;
        if last {
            ok &= check_present(&t)?;
        }
        drop(t);
        // REPLACE mode (unique keys), then the finds on it.
        let (t, dr, all_new) = build(true)?;
        ok &= all_new;
        let t1 = Instant::now();
        let (fv, ff) = t.find_device(&kh, n);
        sync(&client)?;
        let dp = t1.elapsed().as_secs_f64();
        let t2 = Instant::now();
        let (_, af) = t.find_device(&ah, absent.len());
        sync(&client)?;
        let da = t2.elapsed().as_secs_f64();
        if run > 0 {
            for (s, d) in secs.iter_mut().zip([di, dr, dp, da]) {
                s.push(d);
            }
        }
        if last {
            let (v, f) = (read(&client, fv, n), read(&client, ff, n));
            let x = read(&client, af, absent.len());
            ok &= &v == values
                && f.iter().all(|&f| f == status::FOUND)
                && x.iter().all(|&f| f == status::NOT_FOUND);
            let (words, bits) = t.download().map_err(lib)?;
            let used: usize = bits.iter().map(|b| b.count_ones() as usize).sum();
            let slabs = cfg.buckets as usize + used;
            ok &= words.len() >= slabs * 16;
            utilisation = (n * 8) as f64 / (slabs * 128) as f64;
        }
    }
    let g = |s: &[f64], count: usize| rate(count, s) / 1e9;
    Ok(Row {
        load,
        utilisation,
        insert: g(&secs[0], n),
        replace: g(&secs[1], n),
        find_present: g(&secs[2], n),
        find_absent: g(&secs[3], absent.len()),
        ok,
    })
}

/// Rates vs memory utilisation: build, find present and find absent panels, ours and (if given) SlabHash's.
fn figure(ctx: &Ctx, rows: &[Row], peer: Option<&Peer>) -> Figure {
    let ours = |f: fn(&Row) -> f64| {
        let mut p: Vec<(f64, Option<f64>)> = rows
            .iter()
            .filter(|r| r.ok)
            .map(|r| (r.utilisation, Some(f(r))))
            .collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        p
    };
    let theirs = |f: fn(&PeerTable) -> Option<f64>| {
        let mut p: Vec<(f64, Option<f64>)> = peer
            .map(|p| p.bulk.iter().map(|t| (t.util, f(t))).collect())
            .unwrap_or_default();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        p
    };
    let s = |name: &str, points| Series {
        name: name.into(),
        points,
    };
    let mut build = vec![
        s("hashtile insert", ours(|r| r.insert)),
        s("hashtile replace", ours(|r| r.replace)),
    ];
    let mut present = vec![s("hashtile find", ours(|r| r.find_present))];
    let mut absent = vec![s("hashtile find", ours(|r| r.find_absent))];
    if peer.is_some() {
        build.push(s("SlabHash build", theirs(|t| t.build)));
        present.push(s("SlabHash find", theirs(|t| t.find100)));
        absent.push(s("SlabHash find", theirs(|t| t.find0)));
    }
    let panel = |title: &str, series| Panel {
        title: title.into(),
        series,
    };
    Figure {
        caption: format!(
            "Chained tables: bulk build and finds vs memory utilisation, 2^{} keys, {}",
            ctx.a.log2_keys, ctx.backend
        ),
        x_label: "memory utilisation".into(),
        y_label: "G keys/s".into(),
        x_axis: XAxis::Linear,
        y_range: None,
        cols: 3,
        panels: vec![
            panel("bulk build", build),
            panel("find, all present", present),
            panel("find, none present", absent),
        ],
    }
}
