//! The `rates` mode's run: every (scheme, bucket size) at every load factor, measured ([`super::measure`]), then
//! written as CSV and printed as a table.

use super::args::{Args, Rates};
use super::measure::measure;
use super::shared::Row;
use super::{lifecycle, wide};
use crate::checks::{SCHEMES, with_scheme};
use crate::common::{distinct_keys, median};
use crate::error::BenchError;
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::io::Write;

/// The `rates` mode, on a command line [`super::check`] has checked.
pub fn run(checked: Rates) -> Result<i32, BenchError> {
    let Rates {
        args,
        backend,
        instances,
    } = checked;
    let n = 1usize << args.log2_keys;
    println!(
        "hashtile-bench: backend {backend} (asked: {:?}), {n} keys (2^{}), schemes {:?}, B = {:?}, loads {:?}, {} runs, claim {:?}, reads {:?}, upsert {}, pairs {} bits",
        args.backend,
        args.log2_keys,
        args.scheme,
        args.bucket,
        args.load,
        args.runs,
        args.claim,
        args.reads,
        !args.no_upsert,
        if args.wide { 128 } else { 64 }
    );
    let keys = distinct_keys(n, args.seed);
    let values: Vec<u32> = keys[..n]
        .iter()
        .map(|k| k.wrapping_mul(2_654_435_761) ^ 0x5bd1_e995)
        .collect();
    let oracle: HashMap<u32, u32> = keys[..n]
        .iter()
        .copied()
        .zip(values.iter().copied())
        .collect();
    let finds = [1.0, 0.5, 0.0];
    let rates_rows = if args.ops_only {
        0
    } else {
        1 + finds.len() as u64
    };
    let rows = rates_rows
        + u64::from(args.count)
        + u64::from(args.erase)
        + 3 * u64::from(args.set)
        + lifecycle::rows_of(&args);
    let total = (args.load.len() * args.range_order.len()) as u64 * rows * (args.runs as u64 + 1);
    let bar = ProgressBar::new(total * instances.len() as u64).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .expect("template"),
    );
    let mut rows = Vec::new();
    for (scheme, bucket) in instances {
        let mut args = args.clone();
        args.cur_scheme = scheme.to_string();
        args.cur_bucket = bucket;
        for (&load, order) in args
            .load
            .iter()
            .flat_map(|l| args.range_order.iter().map(move |o| (l, *o)))
        {
            args.cur_range_order = order;
            bar.set_message(format!(
                "{} B={} load {load}",
                args.cur_scheme, args.cur_bucket
            ));
            macro_rules! measure_as {
                ($s:ty) => {
                    if args.wide {
                        wide::measure_wide::<$s>(
                            &args, backend, load, &keys, &values, &oracle, &finds, &bar,
                        )
                    } else {
                        measure::<$s>(&args, backend, load, &keys, &values, &oracle, &finds, &bar)
                            .and_then(|mut rows| {
                                rows.extend(life_rows::<$s>(&args, backend, load, &keys, &bar)?);
                                Ok(rows)
                            })
                    }
                };
            }
            let r = with_scheme!(args.cur_scheme.as_str(), |S| measure_as!(S), |other| Err(
                hashtile::Error::InvalidConfig(format!(
                    "unknown scheme '{other}' (expected one of {SCHEMES:?})"
                ))
            ));
            match r {
                Ok(mut r) => {
                    let tag = match order {
                        hashtile::gpu::RangeOrder::Auto => None,
                        hashtile::gpu::RangeOrder::Off => Some("off".to_string()),
                        hashtile::gpu::RangeOrder::Ranges(bits) => Some(format!("r{bits}")),
                    };
                    if let Some(tag) = tag {
                        for row in &mut r {
                            row.scheme = format!("{}+{tag}", row.scheme);
                        }
                    }
                    rows.append(&mut r)
                }
                Err(e) => {
                    bar.finish_and_clear();
                    return Err(BenchError::Run(format!(
                        "{} B={} at load {load}: {e}",
                        args.cur_scheme, args.cur_bucket
                    )));
                }
            }
        }
    }
    bar.finish_and_clear();
    let (table, all_ok) = write_csv(&args, n, rows)
        .map_err(|e| BenchError::Run(format!("writing {}: {e}", args.csv)))?;
    println!(
        "\n| scheme | B | load | op | present | median M keys/s | min | max | checked |\n|---|---|---|---|---|---|---|---|---|"
    );
    print!("{table}");
    println!("\nCSV written to {}", args.csv);
    if !all_ok {
        eprintln!("some results did not match the oracle");
        return Ok(2);
    }
    Ok(0)
}

/// The `--growth`, `--aging` and `--mixed` rows of scheme `S` at `load` (`keys`: the run's `2n` distinct keys).
fn life_rows<S: hashtile::SchemeInfo>(
    args: &Args,
    backend: hashtile::Backend,
    load: f64,
    keys: &[u32],
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    let n = 1usize << args.log2_keys;
    let mut rows = Vec::new();
    if args.growth {
        rows.extend(lifecycle::growth_rows::<S>(
            args, backend, load, keys, n, bar,
        )?);
    }
    if args.aging {
        // Fresh keys continue `distinct_keys`' sequence past the run's keys: distinct from all of them.
        let salt = hashtile::hash::fmix32(args.seed);
        let fresh = |i: usize| {
            let k = hashtile::hash::fmix32((2 * n + 1 + i) as u32 ^ salt);
            if k == u32::MAX {
                hashtile::hash::fmix32(u32::MAX ^ salt)
            } else {
                k
            }
        };
        rows.extend(lifecycle::aging_rows::<S>(
            args, backend, load, keys, n, fresh, bar,
        )?);
    }
    if args.mixed {
        rows.extend(lifecycle::mixed_rows::<S>(
            args, backend, load, keys, n, bar,
        )?);
    }
    if args.set {
        rows.extend(lifecycle::set_host_rows::<S>(
            args, backend, load, keys, n, bar,
        )?);
    }
    Ok(rows)
}

/// Writes the rows to `--csv`; returns the markdown table rows and whether every result matched the oracle.
fn write_csv(args: &Args, n: usize, rows: Vec<Row>) -> std::io::Result<(String, bool)> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(&args.csv)?);
    writeln!(
        f,
        "backend,scheme,bucket,keys,load,op,present,median_mkeys_s,min_mkeys_s,max_mkeys_s,runs,checked,unplaced,pair_bits"
    )?;
    let mut table = String::new();
    let mut all_ok = true;
    for mut r in rows {
        let (lo, hi) = (
            r.rates.iter().cloned().fold(f64::MAX, f64::min),
            r.rates.iter().cloned().fold(0.0, f64::max),
        );
        let m = median(&mut r.rates);
        all_ok &= r.checked;
        writeln!(
            f,
            "{},{},{},{},{},{},{},{m:.1},{lo:.1},{hi:.1},{},{},{},{}",
            r.backend,
            r.scheme,
            r.bucket,
            n,
            r.load,
            r.op,
            r.present,
            r.rates.len(),
            r.checked,
            r.unplaced,
            if args.wide { 128 } else { 64 }
        )?;
        table.push_str(&format!(
            "| {} | {} | {} | {} | {:.0}% | {m:.1} | {lo:.1} | {hi:.1} | {} |\n",
            r.scheme,
            r.bucket,
            r.load,
            r.op,
            r.present * 100.0,
            match (r.checked, r.unplaced) {
                (false, _) => "MISMATCH".to_string(),
                (true, 0) => "ok".to_string(),
                (true, u) => format!("ok; build failed: {u} pairs unplaced"),
            }
        ));
    }
    f.flush()?;
    Ok((table, all_ok))
}
