//! `hashtile-bench host`: the user-facing calls timed as users make them, on host data.
//!
//! For each load factor: `HashTable::insert` of `N` random distinct u32 pairs from `Vec`s into an empty table,
//! `find_into` and `find` of all of them (present) and of `N` absent keys, an upsert of half the keys
//! again with new values, and an erase of that half (put back, untimed, before each run), and a count:
//! `insert_or_apply::<Add>` of `N` keys, each of `N / 16` distinct keys 16 times, with value 1, into a table
//! sized for the distinct keys (cuCollections' `count_16` from host data); then the same calls on pinned buffers
//! (`HashTable::pinned_buffer`; ordinary memory on backends without pinned memory). Every answer is checked
//! against the inputs in the same run.
//!
//! Each rate is set against a ceiling measured in the same process:
//! - GPUs: the bus, measured with plain driver copies of the same bytes (`measure_copy_ceiling`): an insert
//!   moves 8 bytes per pair to the device (a count too), a find 4 bytes per key each way, an erase 4 bytes per
//!   key up;
//! - the CPU backend: `std::collections::HashMap` (SipHash, as users get it) filled from the same keys on one
//!   thread, its lookups, its removals and its counts (`*entry(k).or_insert(0) += 1`).
//!
//! With `--families`, then the other families' calls on the same keys from `Vec`s, each against the
//! static table's call of the same shape from `Vec`s at the first load, with the bar issue 29's acceptance 8
//! sets ([`crate::families`]): one run measures whether every family's host calls move at the static table's
//! speed.

use crate::checks::{
    available_backend, check_bucket, check_csv_path, check_log2_keys, check_repeats, load_list,
    scheme_name, table_slots, with_scheme,
};
use crate::common::{bus_rate, time};
use crate::families::{self, StaticRates};
use crate::footprint::{Capacity, Footprint, check_footprint, hashmap_bytes};
use hashtile::gpu::measure_copy_ceiling;
use hashtile::gpu::transfer::CopyCeiling;
use hashtile::hash::fmix32;
use hashtile::reduce::Add;
use hashtile::{Backend, BackendChoice, Cht1, HashTable, SchemeInfo, TableConfig};
use rayon::prelude::*;
use std::collections::HashMap;
use std::io::Write;
use std::time::Instant;

/// Options of the `host` mode.
#[derive(clap::Args, Debug, Clone)]
pub struct HostArgs {
    /// Backend: auto, cpu, cuda or vulkan.
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// Keys per batch, as a power of two (1..=30).
    #[arg(long, default_value_t = 20)]
    pub log2_keys: u32,
    /// Load factors (comma separated), each in (0, 1].
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.8,0.9",
        allow_negative_numbers = true
    )]
    pub load: Vec<f64>,
    /// Probing scheme: bcht, iht, p2bht, 1cht, linear or double.
    #[arg(long, default_value = "bcht")]
    pub scheme: String,
    /// Bucket size [default: the backend's, `hashtile::default_bucket_size_of`].
    #[arg(long)]
    pub bucket: Option<u32>,
    /// Timed runs per call after one warm-up (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// CSV output file.
    #[arg(long, default_value = "hashtile-bench-host.csv")]
    pub csv: String,
    /// Also time the chained and CSR tables' calls on the same keys from `Vec`s, each against the static
    /// table's `insert` or `find_into` of this run (issue 29's acceptance 8: one host-I/O speed).
    #[arg(long)]
    pub families: bool,
    /// Copy each host batch in at least this many chunks (`TableConfig::copy_chunks`; 1, the default: chunks
    /// of 2^22 keys).
    #[arg(long, default_value_t = 1)]
    pub copy_chunks: usize,
}

/// Checks the `host` mode's options.
pub fn check(a: HostArgs) -> Result<HostSetup, String> {
    let runs = check_repeats("--runs", a.runs)?;
    let log2 = check_log2_keys("--log2-keys", a.log2_keys)?;
    let loads = load_list("--load", &a.load)?;
    let scheme = scheme_name("--scheme", &a.scheme)?;
    let bucket = match (scheme, a.bucket) {
        (s, Some(b)) if s == Cht1::NAME && b != 1 => {
            return Err(format!("--bucket {b}: 1cht has one-slot buckets only"));
        }
        (_, Some(b)) => Some(check_bucket("--bucket", b)?),
        (_, None) => None,
    };
    check_csv_path(&a.csv)?;
    if a.copy_chunks == 0 {
        return Err("--copy-chunks must be at least 1".into());
    }
    let backend = available_backend(a.backend)?;
    let n = 1usize << log2;
    let b = bucket.unwrap_or(16);
    let mut peak = Footprint::default();
    for &load in &loads {
        let slots = table_slots(&format!("{scheme} --log2-keys {log2}"), n, load, b)?;
        let nn = n as u64;
        // Host: 2n keys, values, half batch and its values, the count's keys and ones, the pinned copies of all
        // of them, one output, `find`'s answers. CPU tables: 17 bytes a slot (and a sixteenth of that for the
        // count's) and the HashMap ceiling. GPUs: the tables, one device batch (keys, values, mask, slot index, a
        // scratch table of 2n-4n words), the stash.
        let f = match backend {
            Backend::Cpu => Footprint {
                host: 80 * nn + 18 * slots + hashmap_bytes(nn, 8),
                ..Footprint::default()
            },
            _ => {
                let scratch = 8 * (2 * nn).next_power_of_two();
                Footprint {
                    host: 80 * nn,
                    device: 8 * slots + slots + 16 * nn + scratch,
                    device_buffer: (8 * slots).max(scratch),
                }
            }
        };
        peak = peak.max(f);
    }
    if a.families {
        // The chained and CSR tables run after the static ones are dropped: slabs (about 18 bytes a key at
        // load 0.6), the host calls' cached batch buffers, a CSR build's temporaries; answers on the host.
        let f = Footprint {
            host: 64 * n as u64,
            device: if backend == Backend::Cpu {
                0
            } else {
                64 * n as u64
            },
            device_buffer: if backend == Backend::Cpu {
                0
            } else {
                24 * n as u64
            },
        };
        peak = peak.max(f);
    }
    check_footprint(
        &format!("host mode, 2^{log2} keys on {backend}"),
        peak,
        Capacity::of_machine(backend),
    )?;
    Ok(HostSetup {
        backend,
        scheme,
        bucket,
        n,
        loads,
        runs,
        csv: a.csv,
        families: a.families,
        copy_chunks: a.copy_chunks,
    })
}

/// What the host mode measures (checked by [`check`]).
#[derive(Debug, Clone)]
pub struct HostSetup {
    /// The backend (available).
    pub backend: Backend,
    /// Scheme name (`bcht`, `iht`, `p2bht`, `1cht`, `linear`, `double`).
    pub scheme: &'static str,
    /// Bucket size, or the backend's default.
    pub bucket: Option<u32>,
    /// Keys per batch.
    pub n: usize,
    /// Load factors.
    pub loads: Vec<f64>,
    /// Timed runs per call (after one warm-up).
    pub runs: usize,
    /// CSV output path.
    pub csv: String,
    /// Time the chained and CSR tables' calls too ([`families`]).
    pub families: bool,
    /// `TableConfig::copy_chunks` of the static tables.
    pub copy_chunks: usize,
}

/// One measured call.
struct HostRow {
    load: f64,
    memory: &'static str,
    op: &'static str,
    keys: usize,
    /// Median M keys/s.
    rate: f64,
    /// The ceiling's M keys/s for the same call (NaN when there is none).
    ceiling: f64,
    ceiling_name: &'static str,
    /// The ratio to the ceiling a family's call must reach (NaN: none; the static table's own rows).
    bar: f64,
    ok: bool,
}

impl HostRow {
    /// Whether the ratio to the ceiling reaches the bar (`None` for a row without one).
    fn bar_met(&self) -> Option<bool> {
        (!self.bar.is_nan()).then(|| self.rate / self.ceiling >= self.bar)
    }
}

/// `count` distinct keys (a bijective mix of a counter, the sentinel and the chained tables' tombstone
/// skipped, so that every family takes the same keys), starting at counter `from`.
fn keys_from(from: u32, count: usize) -> Vec<u32> {
    (0..count as u32 + 2)
        .into_par_iter()
        .map(|i| fmix32((from + i) ^ 0x6a09_e667))
        .filter(|&k| k < u32::MAX - 1)
        .collect::<Vec<_>>()
        .into_iter()
        .take(count)
        .collect()
}

/// Runs the host mode; returns the exit status (2 when an answer did not match).
pub fn run(s: &HostSetup) -> Result<i32, String> {
    with_scheme!(s.scheme, |S| run_scheme::<S>(s), |other| Err(format!(
        "unknown scheme '{other}'"
    )))
}

fn run_scheme<S: SchemeInfo>(s: &HostSetup) -> Result<i32, String> {
    let n = s.n;
    let err = |e: hashtile::Error| e.to_string();
    eprintln!("host: generating {n} keys, {n} absent keys, values");
    let all = keys_from(0, 2 * n);
    let (keys, absent) = all.split_at(n);
    let values: Vec<u32> = keys.par_iter().map(|k| k.rotate_left(7) ^ 0x1357).collect();
    let half: Vec<u32> = keys.par_iter().step_by(2).copied().collect();
    let half_values: Vec<u32> = half.par_iter().map(|k| !k).collect();
    // The count's keys: each of the first `distinct` keys COUNT_REPEATS times, the copies `distinct` apart.
    let distinct = (n / COUNT_REPEATS).max(1);
    let count_keys: Vec<u32> = (0..n).into_par_iter().map(|i| keys[i % distinct]).collect();
    let ones = vec![1u32; n];

    let ceiling = if s.backend == Backend::Cpu {
        None
    } else {
        eprintln!(
            "host: measuring the bus with driver copies of {} MB",
            (4 * n) >> 20
        );
        measure_copy_ceiling(s.backend, 4 * n).map_err(err)?
    };
    if let Some(c) = ceiling {
        println!(
            "bus ({} MB copies): host->device {:.1} GB/s pageable, {:.1} GB/s pinned; device->host {:.1} / {:.1}",
            c.bytes >> 20,
            c.h2d_pageable,
            c.h2d_pinned,
            c.d2h_pageable,
            c.d2h_pinned
        );
    }
    let hashmap = if s.backend == Backend::Cpu {
        Some(hashmap_rates(keys, &values, absent, s.runs))
    } else {
        None
    };
    if let Some((i, f, a, e)) = hashmap {
        println!(
            "std HashMap, one thread: insert {i:.1} M keys/s, find present {f:.1}, find absent {a:.1}, erase {e:.1}"
        );
    }
    let hashmap_count =
        (s.backend == Backend::Cpu).then(|| hashmap_count_rate(&count_keys, s.runs));
    if let Some(c) = hashmap_count {
        println!("std HashMap, one thread: count {c:.1} M keys/s");
    }

    let mut rows = Vec::new();
    let mut all_ok = true;
    // A table of the run's scheme, bucket size and copy chunks for `keys` keys at `load`.
    let table = |keys: usize, load: f64| {
        let mut cfg = TableConfig::for_keys(keys, load)
            .backend(BackendChoice::Exactly(s.backend))
            .copy_chunks(s.copy_chunks);
        if let Some(b) = s.bucket {
            cfg = cfg.bucket_size(b);
        }
        HashTable::<S, u32, u32>::new(cfg).map_err(err)
    };
    for &load in &s.loads {
        let mut t = table(n, load)?;
        eprintln!(
            "host: {} B={} load {load}: {} slots on {}",
            S::NAME,
            t.bucket_size(),
            t.capacity(),
            t.backend()
        );
        let mut out = vec![0u32; n];
        for memory in ["vec", "pinned"] {
            // Inputs of this memory kind (copied outside the timed regions).
            let pin = |v: &[u32]| pinned_copy(&t, v);
            let (pk, pv, pa, ph, phv) = if memory == "pinned" {
                (
                    Some(pin(keys)),
                    Some(pin(&values)),
                    Some(pin(absent)),
                    Some(pin(&half)),
                    Some(pin(&half_values)),
                )
            } else {
                (None, None, None, None, None)
            };
            let k: &[u32] = pk.as_deref().unwrap_or(keys);
            let v: &[u32] = pv.as_deref().unwrap_or(&values);
            let a: &[u32] = pa.as_deref().unwrap_or(absent);
            let h: &[u32] = ph.as_deref().unwrap_or(&half);
            let hv: &[u32] = phv.as_deref().unwrap_or(&half_values);
            let mut pinned_out = (memory == "pinned").then(|| t.pinned_buffer::<u32>(n));
            let o: &mut [u32] = pinned_out.as_deref_mut().unwrap_or(&mut out);
            let pinned = memory == "pinned";
            let bus = |up: f64, down: f64| bus_rate(ceiling, pinned, up, down);
            let mut push = |op, keys, (rate, ok): (f64, bool), ceil: f64, name| {
                all_ok &= ok;
                rows.push(HostRow {
                    load,
                    memory,
                    op,
                    keys,
                    rate,
                    ceiling: ceil,
                    ceiling_name: name,
                    bar: f64::NAN,
                    ok,
                });
            };
            let (cname, ins_ceil, find_ceil, absent_ceil, erase_ceil) = match hashmap {
                Some((i, f, a, e)) => ("std HashMap", i, f, a, e),
                None => (
                    "bus",
                    bus(8.0, 0.0),
                    bus(4.0, 4.0),
                    bus(4.0, 4.0),
                    bus(4.0, 0.0),
                ),
            };

            eprintln!("host: {memory}: insert");
            let t = std::cell::RefCell::new(&mut t);
            let r = time(
                s.runs,
                n,
                || t.borrow_mut().clear(),
                || t.borrow_mut().insert(k, v),
                |()| t.borrow().len() == n,
            )
            .map_err(err)?;
            let t = t.into_inner();
            push("insert", n, r, ins_ceil, cname);

            eprintln!("host: {memory}: find_into, all present");
            let o = std::cell::RefCell::new(o);
            let r = time(
                s.runs,
                n,
                || Ok(()),
                || t.find_into(k, &mut o.borrow_mut()),
                |()| o.borrow().par_iter().zip(v.par_iter()).all(|(x, y)| x == y),
            )
            .map_err(err)?;
            push("find_into present", n, r, find_ceil, cname);

            eprintln!("host: {memory}: find_into, none present");
            let r = time(
                s.runs,
                n,
                || Ok(()),
                || t.find_into(a, &mut o.borrow_mut()),
                |()| o.borrow().par_iter().all(|&x| x == u32::MAX),
            )
            .map_err(err)?;
            let o = o.into_inner();
            push("find_into absent", n, r, absent_ceil, cname);

            eprintln!("host: {memory}: find (Option), all present");
            let r = time(
                s.runs,
                n,
                || Ok(()),
                || t.find(k),
                |got| {
                    got.par_iter()
                        .zip(v.par_iter())
                        .all(|(g, y)| *g == Some(*y))
                },
            )
            .map_err(err)?;
            push("find present", n, r, find_ceil, cname);

            eprintln!("host: {memory}: upsert of half the keys again");
            let t = std::cell::RefCell::new(t);
            let r = time(
                s.runs,
                h.len(),
                || Ok(()),
                || t.borrow_mut().insert(h, hv),
                |()| t.borrow().len() == n,
            )
            .map_err(err)?;
            let t = t.into_inner();
            // Check the updated values and the untouched half once, after the timed runs.
            t.find_into(k, o).map_err(err)?;
            let upsert_ok = o
                .par_iter()
                .enumerate()
                .all(|(i, &x)| x == if i % 2 == 0 { !keys[i] } else { values[i] });
            push(
                "upsert half",
                h.len(),
                (r.0, r.1 && upsert_ok),
                ins_ceil,
                cname,
            );

            eprintln!("host: {memory}: erase of half the keys");
            let t = std::cell::RefCell::new(t);
            let r = time(
                s.runs,
                h.len(),
                // Each run erases stored keys: the half goes back in first (untimed).
                || t.borrow_mut().insert(h, hv),
                || t.borrow_mut().erase(h),
                |erased| erased == h.len() && t.borrow().len() == n - h.len(),
            )
            .map_err(err)?;
            let t = t.into_inner();
            // The erased half answers absent and the other half is untouched, checked once after the runs.
            t.find_into(k, o).map_err(err)?;
            let erase_ok = o
                .par_iter()
                .enumerate()
                .all(|(i, &x)| x == if i % 2 == 0 { u32::MAX } else { values[i] });
            push(
                "erase half",
                h.len(),
                (r.0, r.1 && erase_ok),
                erase_ceil,
                cname,
            );

            eprintln!("host: {memory}: count ({COUNT_REPEATS} copies a key)");
            let tc = std::cell::RefCell::new(table(distinct, load)?);
            let (pck, pones) = if pinned {
                let c = tc.borrow();
                (
                    Some(pinned_copy(&c, &count_keys)),
                    Some(pinned_copy(&c, &ones)),
                )
            } else {
                (None, None)
            };
            let ck: &[u32] = pck.as_deref().unwrap_or(&count_keys);
            let c1: &[u32] = pones.as_deref().unwrap_or(&ones);
            let r = time(
                s.runs,
                n,
                || tc.borrow_mut().clear(),
                || tc.borrow_mut().insert_or_apply::<Add>(ck, c1),
                |()| tc.borrow().len() == distinct,
            )
            .map_err(err)?;
            // Every distinct key counted exactly COUNT_REPEATS times, checked once after the runs.
            let counted = tc.borrow().find(&keys[..distinct]).map_err(err)?;
            let count_ok = counted
                .par_iter()
                .all(|&c| c == Some((n / distinct) as u32));
            let count_ceil = hashmap_count.unwrap_or_else(|| bus(8.0, 0.0));
            push("count", n, (r.0, r.1 && count_ok), count_ceil, cname);
        }
    }
    if s.families {
        // The other families' calls against the static table's at the first load, from `Vec`s.
        let of = |op: &str| {
            rows.iter()
                .find(|r| r.load == s.loads[0] && r.memory == "vec" && r.op == op)
                .map_or(f64::NAN, |r| r.rate)
        };
        let refs = StaticRates {
            insert: of("insert"),
            find_into: of("find_into present"),
            find: of("find present"),
        };
        for f in families::run(s.backend, keys, &values, s.runs, refs).map_err(err)? {
            all_ok &= f.ok;
            rows.push(HostRow {
                load: s.loads[0],
                memory: "vec",
                op: f.call,
                keys: n,
                rate: f.rate,
                ceiling: f.reference_rate,
                ceiling_name: f.reference,
                bar: f.bar,
                ok: f.ok,
            });
        }
    }
    report(s, &rows, ceiling).map_err(|e| format!("writing {}: {e}", s.csv))?;
    Ok(if all_ok { 0 } else { 2 })
}

/// A copy of `v` in a page-locked buffer of `t`'s device (outside the timed regions).
fn pinned_copy<S: SchemeInfo>(
    t: &HashTable<S, u32, u32>,
    v: &[u32],
) -> hashtile::PinnedBuffer<u32> {
    let mut b = t.pinned_buffer::<u32>(v.len());
    b.copy_from_slice(v);
    b
}

/// Copies of each distinct key in the count row (cuCollections' `count_16`: 2^26 keys drawn from 2^22).
const COUNT_REPEATS: usize = 16;

/// `std::collections::HashMap` on one thread counting `keys` (M keys/s, best of `runs`).
fn hashmap_count_rate(keys: &[u32], runs: usize) -> f64 {
    let mut best = 0f64;
    for _ in 0..runs.max(1) {
        let t0 = Instant::now();
        let mut m: HashMap<u32, u32> = HashMap::new();
        for k in keys {
            *m.entry(*k).or_insert(0) += 1;
        }
        best = best.max(keys.len() as f64 / t0.elapsed().as_secs_f64() / 1e6);
        std::hint::black_box(m.len());
    }
    best
}

/// `std::collections::HashMap` on one thread: insert, find present, find absent, erase of every other key
/// (M keys/s, best of `runs`).
fn hashmap_rates(
    keys: &[u32],
    values: &[u32],
    absent: &[u32],
    runs: usize,
) -> (f64, f64, f64, f64) {
    let n = keys.len() as f64;
    let (mut ins, mut hit, mut miss, mut gone) = (0f64, 0f64, 0f64, 0f64);
    for _ in 0..runs.max(1) {
        let t0 = Instant::now();
        let mut m = HashMap::new();
        for (k, v) in keys.iter().zip(values) {
            m.insert(*k, *v);
        }
        ins = ins.max(n / t0.elapsed().as_secs_f64() / 1e6);
        let t0 = Instant::now();
        let s: u64 = keys.iter().map(|k| *m.get(k).unwrap_or(&0) as u64).sum();
        hit = hit.max(n / t0.elapsed().as_secs_f64() / 1e6);
        let t0 = Instant::now();
        let c = absent.iter().filter(|k| m.contains_key(k)).count();
        miss = miss.max(n / t0.elapsed().as_secs_f64() / 1e6);
        let t0 = Instant::now();
        let e = keys
            .iter()
            .step_by(2)
            .filter(|k| m.remove(k).is_some())
            .count();
        gone = gone.max(e as f64 / t0.elapsed().as_secs_f64() / 1e6);
        std::hint::black_box((s, c, e));
    }
    (ins, hit, miss, gone)
}

fn report(s: &HostSetup, rows: &[HostRow], ceiling: Option<CopyCeiling>) -> std::io::Result<()> {
    println!(
        "\n{:<6} {:<7} {:<21} {:>10} {:>12} {:>12} {:>7} {:>5}  ok",
        "load", "memory", "call", "keys", "M keys/s", "ceiling", "ratio", "bar"
    );
    let mut bars = (0, 0);
    for r in rows {
        let ratio = r.rate / r.ceiling;
        let bar = match r.bar_met() {
            None => String::new(),
            Some(met) => {
                bars.1 += 1;
                bars.0 += met as usize;
                format!("{:.1}{}", r.bar, if met { "" } else { "!" })
            }
        };
        println!(
            "{:<6} {:<7} {:<21} {:>10} {:>12.1} {:>12.1} {:>7.2} {:>5}  {}",
            r.load,
            r.memory,
            r.op,
            r.keys,
            r.rate,
            r.ceiling,
            ratio,
            bar,
            if r.ok { "yes" } else { "NO" }
        );
    }
    if bars.1 > 0 {
        let refs = rows.iter().filter(|r| !r.bar.is_nan());
        let names: Vec<&str> = refs.map(|r| r.ceiling_name).collect();
        println!(
            "chained and csr rows: ceiling = the static table's call from Vecs in this run ({}, load {}); \
             bar = issue 29's acceptance 8 (0.7, find_all and find_all_into 0.5; '!' = below): \
             {} of {} calls meet it",
            if names.contains(&"static insert") {
                "insert for inserts and builds, find for find, find_into for the other lookups and erases"
            } else {
                "find_into"
            },
            s.loads[0],
            bars.0,
            bars.1
        );
    }
    if let Some(c) = ceiling {
        println!(
            "ceiling = the bus measured in this run (driver copies of {} MB; insert moves 8 bytes/pair up, finds 4 up + 4 down)",
            c.bytes >> 20
        );
    } else if s.backend == Backend::Cpu {
        println!("ceiling = std::collections::HashMap on one thread, same keys, this run");
    }
    let mut f = std::fs::File::create(&s.csv)?;
    writeln!(
        f,
        "backend,scheme,bucket,keys,load,memory,call,rate_mkeys,ceiling,ceiling_mkeys,ratio,bar,bar_met,ok"
    )?;
    for r in rows {
        // `ok`: the answers matched the oracle; `bar_met`: the ratio reached the bar (empty without one).
        let (bar, met) = match r.bar_met() {
            None => (String::new(), String::new()),
            Some(met) => (r.bar.to_string(), met.to_string()),
        };
        writeln!(
            f,
            "{},{},{},{},{},{},{},{:.3},{},{:.3},{:.4},{},{},{}",
            s.backend,
            s.scheme,
            s.bucket.map_or("default".to_string(), |b| b.to_string()),
            r.keys,
            r.load,
            r.memory,
            r.op,
            r.rate,
            r.ceiling_name,
            r.ceiling,
            r.rate / r.ceiling,
            bar,
            met,
            r.ok
        )?;
    }
    println!("wrote {}", s.csv);
    Ok(())
}
