//! `hashtile-bench csr`: CSR (HashGraph) tables as users call them, on host data: build, `count`, `find_all`
//! and both joins, over hash ranges and duplicates per key, each against `std::collections::HashMap<K, Vec<V>>`
//! (build and lookups) measured in the same run. Every answer is checked (counts, value totals, join sizes).
//! `--backend` picks where the tables live (through `CsrTable`; joins run on the CPU so far, issue 11), and the
//! rows name the backend each call ran on.

use crate::cli::CsrArgs;
use crate::host::time;
use hashtile::hash::fmix32;
use hashtile::{CsrConfig, CsrJoin, CsrTable, JoinMethod};
use rayon::prelude::*;
use std::collections::HashMap;
use std::io::Write;

/// One result row.
struct CsrRow {
    backend: hashtile::Backend,
    dups: usize,
    range: f64,
    op: &'static str,
    keys: usize,
    rate: f64,
    baseline: f64,
    ok: bool,
}

/// Runs the mode; returns the exit status (2 when an answer was wrong).
pub fn run(a: &CsrArgs) -> Result<i32, String> {
    let err = |e: hashtile::Error| e.to_string();
    let n = 1usize << a.log2_keys;
    let mut rows = Vec::new();
    for &dups in &a.dups {
        // n keys: n / dups distinct keys (dups divides n, checked), each exactly `dups` times, `n / dups`
        // positions apart; a bijective mix of the key's number spreads the keys over the key space.
        let distinct = n / dups;
        eprintln!("csr: {n} keys, {distinct} distinct ({dups} per key)");
        let keys: Vec<u32> = (0..n as u32)
            .into_par_iter()
            .map(|i| fmix32((i % distinct as u32) ^ 0x5bd1_e995))
            .collect();
        let values: Vec<u32> = (0..n as u32).collect();
        let per_key = n / distinct;
        // Baseline: a multimap built and probed on the same keys.
        let (map_build, _) = time(
            a.runs,
            n,
            || Ok(()),
            || {
                let mut m: HashMap<u32, Vec<u32>> = HashMap::with_capacity(distinct);
                for (&k, &v) in keys.iter().zip(&values) {
                    m.entry(k).or_default().push(v);
                }
                Ok(m)
            },
            |m| m.len() == distinct,
        )
        .map_err(err)?;
        let mut map: HashMap<u32, Vec<u32>> = HashMap::with_capacity(distinct);
        for (&k, &v) in keys.iter().zip(&values) {
            map.entry(k).or_default().push(v);
        }
        let (map_find, _) = time(
            a.runs,
            n,
            || Ok(()),
            || {
                Ok(keys
                    .iter()
                    .map(|k| map.get(k).map_or(0, |v| v.len()))
                    .sum::<usize>())
            },
            |s| s == n * per_key,
        )
        .map_err(err)?;
        drop(map);
        for &range in &a.range {
            eprintln!("csr:   range factor {range}");
            let mut cfg = CsrConfig::default().range_factor(range);
            cfg.backend = a.backend;
            // Joins run on the CPU so far: `Auto` keeps them there, a GPU named would be refused.
            let mut join_cfg = cfg.clone();
            join_cfg.backend = hashtile::BackendChoice::Exactly(hashtile::Backend::Cpu);
            let mut push = |backend, op, keys, (rate, ok): (f64, bool), baseline| {
                rows.push(CsrRow {
                    backend,
                    dups,
                    range,
                    op,
                    keys,
                    rate,
                    baseline,
                    ok,
                })
            };
            let r = time(
                a.runs,
                n,
                || Ok(()),
                || CsrTable::build(&cfg, &keys, &values),
                |t| t.len() == n,
            )
            .map_err(err)?;
            let t = CsrTable::build(&cfg, &keys, &values).map_err(err)?;
            let on = t.backend();
            push(on, "build", n, r, map_build);
            let r = time(
                a.runs,
                n,
                || Ok(()),
                || t.count(&keys),
                |c| c.iter().all(|&c| c as usize == per_key),
            )
            .map_err(err)?;
            push(on, "count", n, r, map_find);
            let r = time(
                a.runs,
                n,
                || Ok(()),
                || t.find_all(&keys),
                |f| f.values.len() == n * per_key,
            )
            .map_err(err)?;
            push(on, "find_all", n, r, map_find);
            // Joins of the keys with themselves: `per_key^2` pairs per distinct key.
            for (op, method) in [
                ("join probe", JoinMethod::Probe),
                ("join intersect", JoinMethod::Intersect),
            ] {
                let want = distinct * per_key * per_key;
                let r = time(
                    a.runs,
                    n,
                    || Ok(()),
                    || {
                        let j = CsrJoin::plan(&join_cfg, &keys, &keys, method)?;
                        let (mut l, mut r) = (vec![0u32; j.len()], vec![0u32; j.len()]);
                        j.write_into(&mut l, &mut r)?;
                        Ok((l, r))
                    },
                    |(l, r)| {
                        l.len() == want
                            && l.iter()
                                .zip(&r)
                                .all(|(&i, &j)| keys[i as usize] == keys[j as usize])
                    },
                )
                .map_err(err)?;
                push(hashtile::Backend::Cpu, op, n, r, f64::NAN);
            }
        }
    }
    println!();
    println!(
        "{:<7} {:<6} {:<6} {:<16} {:>10} {:>12} {:>12} {:>7}  ok",
        "backend", "dups", "range", "call", "keys", "M keys/s", "HashMap", "ratio"
    );
    for r in &rows {
        println!(
            "{:<7} {:<6} {:<6} {:<16} {:>10} {:>12.1} {:>12.1} {:>7.2}  {}",
            r.backend,
            r.dups,
            r.range,
            r.op,
            r.keys,
            r.rate,
            r.baseline,
            r.rate / r.baseline,
            if r.ok { "yes" } else { "NO" }
        );
    }
    println!(
        "joins: the keys with themselves, on the CPU; rate per key; HashMap: a multimap on the CPU"
    );
    let mut f = std::fs::File::create(&a.csv).map_err(|e| format!("{}: {e}", a.csv))?;
    writeln!(
        f,
        "backend,dups,range,op,keys,mkeys_s,hashmap_mkeys_s,checked"
    )
    .map_err(|e| e.to_string())?;
    for r in &rows {
        writeln!(
            f,
            "{},{},{},{},{},{:.1},{:.1},{}",
            r.backend, r.dups, r.range, r.op, r.keys, r.rate, r.baseline, r.ok
        )
        .map_err(|e| e.to_string())?;
    }
    println!("wrote {}", a.csv);
    Ok(if rows.iter().all(|r| r.ok) { 0 } else { 2 })
}
