//! `hashtile-bench scan`: the device prefix sum (`hashtile::gpu::scan::exclusive_scan`, reduce-then-scan) at
//! several sizes, against a device copy of the same words (`copy_u32`: the least traffic a scan can move)
//! measured in the same run. Data is device-resident; each timed region ends with a device sync. Every scan is
//! checked against a host prefix sum.

use crate::checks::{check_csv_path, check_log2_keys, check_repeats};
use hashtile::cubecl::prelude::*;
use hashtile::gpu::launch::copy_u32;
use hashtile::gpu::scan::exclusive_scan;
use hashtile::{Backend, BackendChoice};
use std::io::Write;
use std::time::Instant;

/// Options of the `scan` mode.
#[derive(clap::Args, Debug, Clone)]
pub struct ScanArgs {
    /// Backend: auto, cuda or vulkan (a GPU: the scan is a device primitive).
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// Input sizes in 32-bit words, as powers of two (comma separated, 1..=30).
    #[arg(long, value_delimiter = ',', default_value = "16,20,24")]
    pub log2_words: Vec<u32>,
    /// Timed runs per size after one warm-up (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// CSV output file.
    #[arg(long, default_value = "hashtile-bench-scan.csv")]
    pub csv: String,
}

/// Checks the `scan` mode's options.
pub fn check(a: ScanArgs) -> Result<ScanArgs, String> {
    check_repeats("--runs", a.runs)?;
    check_csv_path(&a.csv)?;
    if a.log2_words.is_empty() {
        return Err("--log2-words needs at least one size".into());
    }
    if a.backend == BackendChoice::Exactly(Backend::Cpu) {
        return Err(
            "--backend cpu: the scan is a device primitive (use auto, cuda or vulkan)".into(),
        );
    }
    for &l in &a.log2_words {
        check_log2_keys("--log2-words", l)?;
    }
    Ok(a)
}

/// Runs the mode; returns the exit status (2 when a scan was wrong).
pub fn run(a: &ScanArgs) -> Result<i32, String> {
    let backend = crate::checks::available_backend(a.backend)?;
    let rows = match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => on::<hashtile::cubecl::cuda::CudaRuntime>(a),
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => on::<hashtile::cubecl::wgpu::WgpuRuntime>(a),
        b => Err(format!(
            "the scan is a device primitive: {b} has none (use --backend cuda or vulkan)"
        )),
    }?;
    println!();
    println!(
        "{:<7} {:>6} {:>14} {:>14} {:>7}  ok",
        "backend", "words", "scan G w/s", "copy G w/s", "ratio"
    );
    let mut f = std::fs::File::create(&a.csv).map_err(|e| format!("{}: {e}", a.csv))?;
    writeln!(f, "backend,log2_words,scan_gwords_s,copy_gwords_s,checked")
        .map_err(|e| e.to_string())?;
    for &(log2, scan, copy, ok) in &rows {
        println!(
            "{:<7} {:>6} {:>14.2} {:>14.2} {:>7.2}  {}",
            backend,
            format!("2^{log2}"),
            scan,
            copy,
            scan / copy,
            if ok { "yes" } else { "NO" }
        );
        writeln!(f, "{backend},{log2},{scan:.3},{copy:.3},{ok}").map_err(|e| e.to_string())?;
    }
    println!(
        "ratio: the scan's rate over a device copy of the same words (1.0 = as fast as moving the data once)"
    );
    println!("wrote {}", a.csv);
    Ok(if rows.iter().all(|r| r.3) { 0 } else { 2 })
}

/// `(log2 words, scan G words/s, copy G words/s, checked)` per size.
fn on<R: Runtime>(a: &ScanArgs) -> Result<Vec<(u32, f64, f64, bool)>, String> {
    let client = R::client(&Default::default());
    let sync =
        || hashtile::cubecl::future::block_on(client.sync()).map_err(|e| format!("device: {e:?}"));
    let mut rows = Vec::new();
    for &log2 in &a.log2_words {
        let n = 1usize << log2;
        eprintln!("scan: 2^{log2} words");
        // Small counts, as a CSR build's: 0..=7 from a mix of the position.
        let input: Vec<u32> = (0..n as u32)
            .map(|i| hashtile::hash::fmix32(i) & 7)
            .collect();
        let ih = client.create_from_slice(u32::as_bytes(&input));
        let copy = client.empty(n * 4);
        let (mut scan_rates, mut copy_rates) = (Vec::new(), Vec::new());
        let mut last = None;
        for run in 0..=a.runs {
            sync()?;
            let t0 = Instant::now();
            let out = exclusive_scan(&client, &ih, n);
            sync()?;
            let dt = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            copy_u32(&client, &ih, &copy, n);
            sync()?;
            let dc = t1.elapsed().as_secs_f64();
            if run > 0 {
                scan_rates.push(n as f64 / dt / 1e9);
                copy_rates.push(n as f64 / dc / 1e9);
            }
            last = Some(out);
        }
        let got =
            u32::from_bytes(&client.read_one_unchecked(last.expect("one run")))[..n + 1].to_vec();
        let mut sum = 0u32;
        let mut ok = got[0] == 0;
        for i in 0..n {
            sum = sum.wrapping_add(input[i]);
            ok &= got[i + 1] == sum;
        }
        rows.push((
            log2,
            crate::common::median(&mut scan_rates),
            crate::common::median(&mut copy_rates),
            ok,
        ));
    }
    Ok(rows)
}
