//! `alloc`: the slab allocator alone (`allocate_device` / `release_device`, the bitmap allocator inserts call),
//! on pools of 2^(n-4) and 2^(n-2) slabs (2^20 and 2^22 at SlabHash's 2^24 keys; at least 2^10). Timed: taking
//! every slab of the pool in one launch (the last slabs are the hardest to find) and giving them all back,
//! each with a device sync. Checked every run: the indices taken are exactly `0..pool`, one more request gets
//! none (`u32::MAX`), and after the release the bitmap is all zeros.

use super::common::{self, Ctx, lib, rate, read, sync, yes};
use crate::plot::{Figure, Panel, Series, XAxis};
use hashtile::HashFamily;
use hashtile::gpu::transfer::HostTransfer;
use std::fmt::Write as _;
use std::time::Instant;

/// One pool's results (G slabs/s).
struct Row {
    log2_pool: u32,
    alloc: f64,
    free: f64,
    ok: bool,
}

/// Runs the experiment; returns whether every answer was right.
pub(super) fn run<R: HostTransfer>(ctx: &Ctx) -> Result<bool, String> {
    let client = R::client(&Default::default());
    let family = HashFamily::new(hashtile::DEFAULT_SEED);
    let mut pools = vec![
        ctx.a.log2_keys.saturating_sub(4).max(10),
        ctx.a.log2_keys.saturating_sub(2).max(10),
    ];
    pools.dedup();
    let mut rows = Vec::new();
    for &lp in &pools {
        eprintln!("chained: alloc: pool of 2^{lp} slabs");
        let pool = 1usize << lp;
        // One list: the slab array is nearly all pool.
        let mut t = ctx.store(&client, family, 1, pool as u32)?;
        let (mut taken, mut given) = (Vec::new(), Vec::new());
        let mut ok = true;
        for run in 0..=ctx.a.runs {
            sync(&client)?;
            let t0 = Instant::now();
            let slabs = t.allocate_device(pool);
            sync(&client)?;
            let da = t0.elapsed().as_secs_f64();
            let mut got = read(&client, slabs.clone(), pool);
            got.sort_unstable();
            ok &= got.iter().enumerate().all(|(i, &s)| s == i as u32);
            let extra = t.allocate_device(1);
            ok &= read(&client, extra, 1) == [u32::MAX];
            sync(&client)?;
            let t1 = Instant::now();
            t.release_device(&slabs, pool);
            sync(&client)?;
            let df = t1.elapsed().as_secs_f64();
            let (_, bits) = t.download().map_err(lib)?;
            ok &= bits.iter().all(|&w| w == 0);
            if run > 0 {
                taken.push(da);
                given.push(df);
            }
        }
        rows.push(Row {
            log2_pool: lp,
            alloc: rate(pool, &taken) / 1e9,
            free: rate(pool, &given) / 1e9,
            ok,
        });
    }
    println!(
        "\nalloc: the slab allocator alone, the whole pool taken and given back, {}, median of {} runs",
        ctx.backend, ctx.a.runs
    );
    println!(
        "{:>8} {:>14} {:>14}  ok",
        "pool", "alloc G slabs/s", "free G slabs/s"
    );
    let mut csv =
        String::from("backend,log2_pool,pool_slabs,alloc_gslabs_s,free_gslabs_s,checked\n");
    for r in &rows {
        println!(
            "{:>8} {:>14.3} {:>14.3}  {}",
            format!("2^{}", r.log2_pool),
            r.alloc,
            r.free,
            yes(r.ok)
        );
        let _ = writeln!(
            csv,
            "{},{},{},{:.4},{:.4},{}",
            ctx.backend,
            r.log2_pool,
            1u64 << r.log2_pool,
            r.alloc,
            r.free,
            r.ok
        );
    }
    let series = |name: &str, f: fn(&Row) -> f64| Series {
        name: name.into(),
        points: rows
            .iter()
            .map(|r| (r.log2_pool as f64, r.ok.then(|| f(r))))
            .collect(),
    };
    let fig = Figure {
        caption: format!(
            "Chained tables: the slab allocator, a whole pool at once, {}",
            ctx.backend
        ),
        x_label: "pool slabs".into(),
        y_label: "G slabs/s".into(),
        x_axis: XAxis::Log2,
        y_range: None,
        cols: 1,
        panels: vec![Panel {
            title: String::new(),
            series: vec![
                series("allocate", |r| r.alloc),
                series("release", |r| r.free),
            ],
        }],
    };
    common::write_outputs(ctx, "alloc", &csv, &fig)?;
    Ok(rows.iter().all(|r| r.ok))
}
