//! The `rates` mode's rows of operations beyond insert and find, on device-resident keys, each as
//! cuCollections' same row of `peers` measures it and every answer checked:
//!
//! - `--count`: insert-or-apply with `Add`, each distinct key repeated about 16 times (`count_16`: N keys drawn
//!   from N/16 distinct ones, value 1, into a table sized for the distinct keys at the load; `--count-repeats`
//!   sets the copies per key, the row's name following: `count1`, `count4`, `count16`, `count64`);
//! - `--erase`: N keys inserted (not timed), the first half erased, then every key looked up (`erase` and
//!   `find_after_erase`: the erased half must answer absent).
//! - `--set`: a set of 32-bit keys (the `Keys32` layout, 4 bytes a slot): N keys inserted (`set insert`), then
//!   contains of the N keys (`set contains`, present 100%) and of N absent keys (present 0%), as cuCollections'
//!   `static_set` rows (`set_insert`, `set_contains100`, `set_contains0`).

use super::args::Args;
use super::shared::{Row, empty_gpu_table};
use hashtile::gpu::{Keys32, Packed};
use hashtile::reduce::Add;
use hashtile::{Backend, ProbingScheme, SchemeInfo};
use indicatif::ProgressBar;
use std::time::Instant;

/// The rows of the device operations beyond insert and find that the command line asks for (`--count`,
/// `--set`, `--erase`), each on tables of its own.
pub fn op_rows<R: hashtile::gpu::transfer::HostTransfer, S: ProbingScheme + SchemeInfo>(
    args: &Args,
    backend: Backend,
    opts: hashtile::gpu::GpuOptions,
    load: f64,
    keys: &[u32],
    values: &[u32],
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    let n = values.len();
    let mut rows = Vec::new();
    if args.count {
        rows.push(count_row::<R, S>(args, backend, opts, load, keys, n, bar)?);
    }
    if args.set {
        rows.extend(set_rows::<R, S>(args, backend, opts, load, keys, n, bar)?);
    }
    // Erases of device keys mark slots in place (`GpuTable::erase_device`): every scheme whose inserts take the
    // marks again or never move pairs.
    if args.erase && (S::STABLE || opts.use_cas) {
        rows.extend(erase_rows::<R, S>(
            args, backend, opts, load, keys, values, bar,
        )?);
    }
    Ok(rows)
}

/// The counting row's name for `repeats` copies of each distinct key (`--count-repeats`).
fn count_op(repeats: usize) -> &'static str {
    match repeats {
        1 => "count1",
        4 => "count4",
        64 => "count64",
        _ => "count16",
    }
}

/// The counting row of one scheme at one load on a GPU runtime `R`: `keys` holds at least
/// `n / args.count_repeats` distinct keys; the batch is `n` of them, key `j` of position `i` chosen by
/// cuCollections' mix.
pub fn count_row<R: hashtile::gpu::transfer::HostTransfer, S: ProbingScheme + SchemeInfo>(
    args: &Args,
    backend: Backend,
    opts: hashtile::gpu::GpuOptions,
    load: f64,
    keys: &[u32],
    n: usize,
    bar: &ProgressBar,
) -> hashtile::Result<Row> {
    let d = n / args.count_repeats;
    let mut want = vec![0u32; d];
    let batch: Vec<u32> = (0..n)
        .map(|i| {
            let j = mix32((i as u32).wrapping_mul(2_654_435_761)) as usize % d;
            want[j] += 1;
            keys[j]
        })
        .collect();
    let ones = vec![1u32; n];
    let (mut t, family) = empty_gpu_table::<R, S, Packed>(args, opts, d, load)?;
    let (kh, vh) = (t.upload(&batch), t.upload(&ones));
    let mut rates = Vec::new();
    let mut unplaced = 0;
    for run in 0..=args.runs {
        t.reset(family)?;
        t.sync()?;
        let t0 = Instant::now();
        let lost = t.insert_or_apply_device::<Add>(&kh, &vh, n)?;
        let dt = t0.elapsed().as_secs_f64();
        unplaced = lost.pairs.len() + lost.untracked;
        if run > 0 {
            rates.push(n as f64 / dt / 1e6);
        }
        bar.inc(1);
    }
    let got = t.find_keys(&keys[..d])?;
    // Keys are drawn with replacement: a key drawn no time is absent (most of them at one copy a key).
    let drawn = want.iter().filter(|&&w| w > 0).count();
    let checked = unplaced == 0
        && t.len() == drawn
        && got
            .iter()
            .zip(&want)
            .all(|(g, &w)| *g == (w > 0).then_some(w));
    Ok(Row {
        scheme: args.cur_scheme.clone(),
        bucket: args.cur_bucket,
        backend,
        load,
        op: count_op(args.count_repeats),
        present: 1.0,
        rates,
        checked,
        unplaced,
    })
}

/// The set rows of one scheme at one load on a GPU runtime `R` (see the module docs): `keys[..n]` inserted into
/// an empty set per run, then looked up, and `keys[n..2n]` (absent) looked up.
pub fn set_rows<R: hashtile::gpu::transfer::HostTransfer, S: ProbingScheme + SchemeInfo>(
    args: &Args,
    backend: Backend,
    opts: hashtile::gpu::GpuOptions,
    load: f64,
    keys: &[u32],
    n: usize,
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    let (mut t, family) = empty_gpu_table::<R, S, Keys32>(args, opts, n, load)?;
    let (kh, ah) = (t.upload(&keys[..n]), t.upload(&keys[n..2 * n]));
    let (present, absent) = (t.alloc_u32(n), t.alloc_u32(n));
    let (mut ins, mut hit, mut miss) = (Vec::new(), Vec::new(), Vec::new());
    let mut unplaced = 0;
    for run in 0..=args.runs {
        t.reset(family)?;
        t.sync()?;
        let t0 = Instant::now();
        // A set's insert reads no values: the keys' handle stands in.
        let lost = t.insert_device_distinct(&kh, &kh, n)?;
        let dt_ins = t0.elapsed().as_secs_f64();
        unplaced = lost.pairs.len() + lost.untracked;
        let t0 = Instant::now();
        t.find_device(&kh, &present, None, n);
        t.sync()?;
        let dt_hit = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        t.find_device(&ah, &absent, None, n);
        t.sync()?;
        let dt_miss = t0.elapsed().as_secs_f64();
        if run > 0 {
            ins.push(n as f64 / dt_ins / 1e6);
            hit.push(n as f64 / dt_hit / 1e6);
            miss.push(n as f64 / dt_miss / 1e6);
        }
        bar.inc(3);
    }
    // A found key answers value 0, an absent one all ones.
    let checked = unplaced == 0
        && t.len() == n
        && t.read_u32(present).iter().all(|&v| v == 0)
        && t.read_u32(absent).iter().all(|&v| v == u32::MAX);
    let row = |op: &'static str, present: f64, rates: Vec<f64>| Row {
        scheme: args.cur_scheme.clone(),
        bucket: args.cur_bucket,
        backend,
        load,
        op,
        present,
        rates,
        checked,
        unplaced,
    };
    Ok(vec![
        row("set insert", 1.0, ins),
        row("set contains", 1.0, hit),
        row("set contains", 0.0, miss),
    ])
}

/// The peers' benchmark mix (`peers/common.cuh`'s `mix32`, lowbias32), so that the repeats fall as theirs do.
fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// The erase rows of one scheme at one load on a GPU runtime `R` (`erase`: the first half of `keys[..n]`;
/// `find after erase`: all of them), on a table of `n` pairs built before each timed run.
#[allow(clippy::too_many_arguments)]
pub fn erase_rows<R: hashtile::gpu::transfer::HostTransfer, S: ProbingScheme + SchemeInfo>(
    args: &Args,
    backend: Backend,
    opts: hashtile::gpu::GpuOptions,
    load: f64,
    keys: &[u32],
    values: &[u32],
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    let n = values.len();
    let h = n / 2;
    let (mut t, family) = empty_gpu_table::<R, S, Packed>(args, opts, n, load)?;
    let (kh, vh, hh) = (t.upload(&keys[..n]), t.upload(values), t.upload(&keys[..h]));
    let out = t.alloc_u32(n);
    let (mut erase, mut find) = (Vec::new(), Vec::new());
    let mut ok = true;
    for run in 0..=args.runs {
        t.reset(family)?;
        let lost = t.insert_device_distinct(&kh, &vh, n)?;
        ok &= lost.pairs.is_empty() && lost.untracked == 0;
        t.sync()?;
        let t0 = Instant::now();
        let erased = t.erase_device(&hh, h)?;
        let dt_erase = t0.elapsed().as_secs_f64();
        ok &= erased == h && t.len() == n - h;
        t.sync()?;
        let t0 = Instant::now();
        t.find_device(&kh, &out, None, n);
        t.sync()?;
        let dt_find = t0.elapsed().as_secs_f64();
        if run > 0 {
            erase.push(h as f64 / dt_erase / 1e6);
            find.push(n as f64 / dt_find / 1e6);
        }
        bar.inc(1);
    }
    let got = t.read_u32(out);
    ok &= got[..h].iter().all(|&v| v == u32::MAX) && got[h..] == values[h..];
    let row = |op: &'static str, rates: Vec<f64>| Row {
        scheme: args.cur_scheme.clone(),
        bucket: args.cur_bucket,
        backend,
        load,
        op,
        present: 0.5,
        rates,
        checked: ok,
        unplaced: 0,
    };
    Ok(vec![row("erase", erase), row("find after erase", find)])
}
