//! `mixes`: the SlabHash paper's operation mixes Γ = (insert, erase, find present, find absent), each run as
//! one mixed batch (`apply_device`: one launch, so a warp mixes kinds). A table with lists for 2^n pairs at
//! load 0.6 is prefilled (untimed, replace) with 2^n / 2 keys; the batch holds 2^n / 2 operations drawn by the
//! mix: inserts (REPLACE) of keys never stored, erases of distinct prefilled keys, finds of prefilled keys
//! this batch does not erase, finds of keys never stored. Every key is distinct across the batch, so every
//! outcome is known and checked (INSERTED, ERASED, FOUND with the right value, NOT_FOUND), and the length
//! after it. The operations are shuffled with a fixed seed. Timed: the batch on device-resident arrays and a
//! sync, on a fresh prefilled table each run. SlabHash's benchmark has no mixes, so there is no peer ratio.

use super::common::{self, Ctx, lib, rate, read, sync, upload, value_of, yes};
use crate::plot::{Figure, Panel, Series, XAxis};
use hashtile::HashFamily;
use hashtile::chained::ChainedConfig;
use hashtile::gpu::chained::{op, status};
use hashtile::gpu::transfer::HostTransfer;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use std::fmt::Write as _;
use std::time::Instant;

/// The paper's mixes: fractions of inserts, erases, finds of present keys and finds of absent keys.
const MIXES: [[f64; 4]; 3] = [
    [0.5, 0.5, 0.0, 0.0],
    [0.2, 0.2, 0.3, 0.3],
    [0.1, 0.1, 0.4, 0.4],
];

/// One operation of the batch and its known outcome.
#[derive(Clone, Copy)]
struct Planned {
    op: u32,
    key: u32,
    value: u32,
    status: u32,
}

/// One mix's results.
struct Row {
    mix: [f64; 4],
    ops: usize,
    /// G operations/s.
    rate: f64,
    ok: bool,
}

/// The batch of `m` operations of `mix` over the prefilled `keys[..m]`, the unstored `keys[m..2m]` and the
/// absent keys, shuffled.
fn plan(ctx: &Ctx, mix: [f64; 4], m: usize) -> Vec<Planned> {
    let count = |f: f64| ((m as f64 * f).round() as usize).min(m);
    let (ins, era) = (count(mix[0]), count(mix[1]));
    let fp = count(mix[2]).min(m - ins - era);
    let fa = m - ins - era - fp;
    let (stored, fresh) = (&ctx.keys[..m], &ctx.keys[m..2 * m]);
    let p = |op, key, value, status| Planned {
        op,
        key,
        value,
        status,
    };
    let mut v: Vec<Planned> = fresh[..ins]
        .iter()
        .map(|&k| p(op::REPLACE, k, value_of(k), status::INSERTED))
        .chain(
            stored[..era]
                .iter()
                .map(|&k| p(op::ERASE, k, 0, status::ERASED)),
        )
        .chain(
            stored[era..era + fp]
                .iter()
                .map(|&k| p(op::FIND, k, value_of(k), status::FOUND)),
        )
        .chain(
            ctx.absent[..fa]
                .iter()
                .map(|&k| p(op::FIND, k, 0, status::NOT_FOUND)),
        )
        .collect();
    v.shuffle(&mut rand::rngs::StdRng::seed_from_u64(0x6d69_7865));
    v
}

/// Runs the experiment; returns whether every answer was right.
pub(super) fn run<R: HostTransfer>(ctx: &Ctx) -> Result<bool, String> {
    let client = R::client(&Default::default());
    let n = ctx.keys.len();
    let m = n / 2;
    let cfg = ChainedConfig::for_keys(n, 0.6);
    let family = HashFamily::new(hashtile::DEFAULT_SEED);
    let (pk, pv) = (
        upload(&client, &ctx.keys[..m]),
        upload(&client, &ctx.values[..m]),
    );
    let mut rows = Vec::new();
    for mix in MIXES {
        eprintln!("chained: mixes: {}", label(mix));
        let batch = plan(ctx, mix, m);
        let col = |f: fn(&Planned) -> u32| batch.iter().map(f).collect::<Vec<u32>>();
        let (oh, kh, vh) = (
            upload(&client, &col(|p| p.op)),
            upload(&client, &col(|p| p.key)),
            upload(&client, &col(|p| p.value)),
        );
        let inserted = batch
            .iter()
            .filter(|p| p.status == status::INSERTED)
            .count();
        let erased = batch.iter().filter(|p| p.status == status::ERASED).count();
        let (mut secs, mut ok) = (Vec::new(), true);
        for run in 0..=ctx.a.runs {
            let mut t = ctx.store(&client, family, cfg.buckets, cfg.pool_slabs)?;
            ok &= t.insert_device(&pk, &pv, m, true).map_err(lib)? == m;
            sync(&client)?;
            let t0 = Instant::now();
            let (out, aux) = t.apply_device(&oh, &kh, &vh, m).map_err(lib)?;
            sync(&client)?;
            if run > 0 {
                secs.push(t0.elapsed().as_secs_f64());
            }
            // Every run's answers are checked (outside the timed region).
            let (out, aux) = (read(&client, out, m), read(&client, aux, m));
            ok &= t.len() == m + inserted - erased
                && batch.iter().zip(out.iter().zip(&aux)).all(|(p, (&o, &s))| {
                    s == p.status && (p.status != status::FOUND || o == p.value)
                });
        }
        rows.push(Row {
            mix,
            ops: m,
            rate: rate(m, &secs) / 1e9,
            ok,
        });
    }
    println!(
        "\nmixes: one batch of 2^{} operations on a table prefilled with 2^{} keys (lists for 2^{} at load 0.6), {}, median of {} runs",
        ctx.a.log2_keys - 1,
        ctx.a.log2_keys - 1,
        ctx.a.log2_keys,
        ctx.backend,
        ctx.a.runs
    );
    println!(
        "{:<22} {:>10} {:>10}  ok",
        "mix (ins/era/f+/f-)", "ops", "G ops/s"
    );
    let mut csv = String::from(
        "backend,log2_keys,insert,erase,find_present,find_absent,ops,gops_s,checked\n",
    );
    for r in &rows {
        println!(
            "{:<22} {:>10} {:>10.3}  {}",
            label(r.mix),
            r.ops,
            r.rate,
            yes(r.ok)
        );
        let [i, e, fp, fa] = r.mix;
        let _ = writeln!(
            csv,
            "{},{},{i},{e},{fp},{fa},{},{:.4},{}",
            ctx.backend, ctx.a.log2_keys, r.ops, r.rate, r.ok
        );
    }
    common::write_outputs(ctx, "mixes", &csv, &figure(ctx, &rows))?;
    Ok(rows.iter().all(|r| r.ok))
}

/// A mix as the paper writes it.
fn label(mix: [f64; 4]) -> String {
    format!("({}, {}, {}, {})", mix[0], mix[1], mix[2], mix[3])
}

/// G ops/s vs the share of updates (inserts + erases) in the batch: one point per mix.
fn figure(ctx: &Ctx, rows: &[Row]) -> Figure {
    let mut points: Vec<(f64, Option<f64>)> = rows
        .iter()
        .map(|r| (r.mix[0] + r.mix[1], r.ok.then_some(r.rate)))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    Figure {
        caption: format!(
            "Chained tables: mixed batches of 2^{} operations, {}",
            ctx.a.log2_keys - 1,
            ctx.backend
        ),
        x_label: "share of updates (inserts + erases; the rest finds, half present)".into(),
        y_label: "G ops/s".into(),
        x_axis: XAxis::Linear,
        y_range: None,
        cols: 1,
        panels: vec![Panel {
            title: String::new(),
            series: vec![Series {
                name: "hashtile chained, apply_device".into(),
                points,
            }],
        }],
    }
}
