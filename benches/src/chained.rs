//! `hashtile-bench chained`: first measurements of the chained (SlabHash) tables' GPU store
//! (`hashtile::gpu::chained::GpuChained`). 2^n distinct random u32 keys, device-resident. For each load (keys
//! per base-slab slot, which sets the number of lists) it times a bulk build (replace mode: unique keys) into a
//! fresh table, then finds of the keys (present) and of as many keys not stored (absent), and reports the memory
//! utilisation the build reached (pair bytes over the bytes of the slabs in use, SlabHash's measure). Every
//! find is checked. Baseline: hashtile's BCHT device-resident insert of the same keys, in the same run.

use crate::cli::ChainedArgs;
use hashtile::cubecl::prelude::*;
use hashtile::gpu::chained::GpuChained;
use hashtile::{Backend, HashFamily};
use std::io::Write;
use std::time::Instant;

/// One load's results.
struct Row {
    load: f64,
    utilisation: f64,
    build: f64,
    find_present: f64,
    find_absent: f64,
    ok: bool,
}

/// Runs the mode; returns the exit status (2 when an answer was wrong).
pub fn run(a: &ChainedArgs) -> Result<i32, String> {
    let backend = crate::cli::available_backend(a.backend)?;
    let n = 1usize << a.log2_keys;
    // Distinct keys: a bijective mix of 0..2n; the first n are stored, the next n are absent.
    let all: Vec<u32> = (0..2 * n as u32)
        .map(|i| hashtile::hash::fmix32(i ^ 0x9e37_79b9))
        .filter(|&k| k < u32::MAX - 1)
        .collect();
    let (keys, absent) = all.split_at(n.min(all.len() / 2));
    eprintln!(
        "chained: BCHT baseline (device-resident, 2^{} keys)",
        a.log2_keys
    );
    let bcht = crate::csr::device::bcht_baseline(backend, keys, a.runs)?;
    let rows = match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => on::<hashtile::cubecl::cuda::CudaRuntime>(a, keys, absent),
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => on::<hashtile::cubecl::wgpu::WgpuRuntime>(a, keys, absent),
        b => Err(format!(
            "{b} has no GPU store (use --backend cuda or vulkan)"
        )),
    }?;
    println!();
    println!(
        "{:<7} {:>5} {:>6} {:>12} {:>12} {:>12} {:>10}  ok",
        "backend", "load", "util", "build G/s", "find+ G/s", "find- G/s", "build/BCHT"
    );
    let mut f = std::fs::File::create(&a.csv).map_err(|e| format!("{}: {e}", a.csv))?;
    writeln!(
        f,
        "backend,log2_keys,load,memory_utilisation,build_gkeys_s,find_present_gkeys_s,find_absent_gkeys_s,bcht_insert_gkeys_s,checked"
    )
    .map_err(|e| e.to_string())?;
    for r in &rows {
        println!(
            "{:<7} {:>5.2} {:>6.2} {:>12.2} {:>12.2} {:>12.2} {:>10.2}  {}",
            backend,
            r.load,
            r.utilisation,
            r.build,
            r.find_present,
            r.find_absent,
            r.build / (bcht[0] / 1e3),
            if r.ok { "yes" } else { "NO" }
        );
        writeln!(
            f,
            "{backend},{},{},{:.4},{:.3},{:.3},{:.3},{:.3},{}",
            a.log2_keys,
            r.load,
            r.utilisation,
            r.build,
            r.find_present,
            r.find_absent,
            bcht[0] / 1e3,
            r.ok
        )
        .map_err(|e| e.to_string())?;
    }
    println!(
        "BCHT device-resident insert (B=8, load 0.8): {:.2} G keys/s with the duplicate check, {:.2} without",
        bcht[0] / 1e3,
        bcht[1] / 1e3
    );
    println!(
        "util: pair bytes over the bytes of the slabs in use (15 pairs of 8 bytes per 128-byte slab at most)"
    );
    println!("wrote {}", a.csv);
    Ok(if rows.iter().all(|r| r.ok) { 0 } else { 2 })
}

fn on<R: Runtime>(a: &ChainedArgs, keys: &[u32], absent: &[u32]) -> Result<Vec<Row>, String> {
    let client = R::client(&Default::default());
    let sync =
        || hashtile::cubecl::future::block_on(client.sync()).map_err(|e| format!("device: {e:?}"));
    let e = |e: hashtile::Error| e.to_string();
    let n = keys.len();
    let family = HashFamily::new(hashtile::DEFAULT_SEED);
    let values: Vec<u32> = keys.iter().map(|k| k.wrapping_mul(3)).collect();
    let kh = client.create_from_slice(u32::as_bytes(keys));
    let vh = client.create_from_slice(u32::as_bytes(&values));
    let ah = client.create_from_slice(u32::as_bytes(absent));
    let mut rows = Vec::new();
    for &load in &a.loads {
        eprintln!("chained: load {load}");
        let cfg = hashtile::chained::ChainedConfig::for_keys(n, load);
        // A pool for the expected overflow (lists longer than one slab) and some to spare.
        let pool = ((n as f64 / 15.0) as u32).max(1024);
        let (mut builds, mut present, mut missing) = (Vec::new(), Vec::new(), Vec::new());
        let mut ok = true;
        let mut utilisation = 0.0;
        for run in 0..=a.runs {
            let mut t = GpuChained::new(&client, family, cfg.buckets, pool).map_err(e)?;
            sync()?;
            let t0 = Instant::now();
            let added = t.insert_device(&kh, &vh, n, true).map_err(e)?;
            sync()?;
            let db = t0.elapsed().as_secs_f64();
            ok &= added == n;
            let t1 = Instant::now();
            let (fv, ff) = t.find_device(&kh, n);
            sync()?;
            let dp = t1.elapsed().as_secs_f64();
            let t2 = Instant::now();
            let (_, af) = t.find_device(&ah, absent.len());
            sync()?;
            let da = t2.elapsed().as_secs_f64();
            if run > 0 {
                builds.push(n as f64 / db / 1e9);
                present.push(n as f64 / dp / 1e9);
                missing.push(absent.len() as f64 / da / 1e9);
            }
            if run == a.runs {
                let v = u32::from_bytes(&client.read_one_unchecked(fv))[..n].to_vec();
                let f = u32::from_bytes(&client.read_one_unchecked(ff))[..n].to_vec();
                let x = u32::from_bytes(&client.read_one_unchecked(af))[..absent.len()].to_vec();
                ok &= v == values && f.iter().all(|&f| f == 1) && x.iter().all(|&f| f == 0);
                let (words, bits) = t.download().map_err(e)?;
                let used: usize = bits.iter().map(|b| b.count_ones() as usize).sum();
                let slabs = cfg.buckets as usize + used;
                ok &= words.len() >= slabs * 16;
                utilisation = (n * 8) as f64 / (slabs * 128) as f64;
            }
        }
        rows.push(Row {
            load,
            utilisation,
            build: crate::median(&mut builds),
            find_present: crate::median(&mut present),
            find_absent: crate::median(&mut missing),
            ok,
        });
    }
    Ok(rows)
}
