//! Helpers the measuring modes share: the median of timed runs, timed calls ([`time`]), the key generator,
//! scheme parameters from the command line's knobs, find queries, the checks of answers against a `HashMap`
//! oracle, and the rate the bus allows a host call ([`bus_rate`]).

use hashtile::SchemeInfo;
use hashtile::gpu::transfer::CopyCeiling;
use hashtile::hash::fmix32;
use std::collections::{HashMap, HashSet};

/// M keys/s of a host call that moves `up` bytes per key to the device and `down` bytes back at the bus `c`
/// (plain driver copies from and to pinned or pageable memory, measured in the same run); NaN without a bus.
pub fn bus_rate(c: Option<CopyCeiling>, pinned: bool, up: f64, down: f64) -> f64 {
    c.map_or(f64::NAN, |c| {
        let (h2d, d2h) = if pinned {
            (c.h2d_pinned, c.d2h_pinned)
        } else {
            (c.h2d_pageable, c.d2h_pageable)
        };
        let secs_per_key = up / (h2d * 1e9) + down / (d2h * 1e9);
        if secs_per_key > 0.0 {
            1.0 / secs_per_key / 1e6
        } else {
            f64::NAN
        }
    })
}

/// The median of `v` (NaN if `v` is empty; `--runs` is at least 1, so it never is).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `2n` distinct keys, none the sentinel: a bijective mix of a counter.
pub fn distinct_keys(n: usize, seed: u32) -> Vec<u32> {
    (0u32..)
        .map(|i| fmix32(i ^ fmix32(seed)))
        .filter(|&k| k != u32::MAX)
        .take(2 * n)
        .collect()
}

/// Scheme `S`'s parameters for bucket size `bucket` (its paper's with `paper`, else its defaults) with the
/// command line's knobs applied and validated.
pub fn scheme_params<S: SchemeInfo>(
    bucket: u32,
    paper: bool,
    no_upsert: bool,
    max_chain: Option<u32>,
    num_hashes: Option<u32>,
) -> hashtile::Result<hashtile::SchemeParams> {
    let mut p = if paper {
        S::paper_params(bucket)
    } else {
        S::default_params(bucket)
    };
    if no_upsert {
        p.upsert = 0;
    }
    if let Some(c) = max_chain {
        p.max_chain = c;
    }
    if let Some(h) = num_hashes {
        p.num_hashes = h;
    }
    S::validate(bucket, &p).map_err(hashtile::Error::InvalidConfig)?;
    Ok(p)
}

/// Queries of which a fraction `present` are inserted keys.
pub fn queries<K: Copy>(keys: &[K], n: usize, present: f64) -> Vec<K> {
    let hits = (n as f64 * present).round() as usize;
    keys[..hits]
        .iter()
        .chain(&keys[n..2 * n - hits])
        .copied()
        .collect()
}

/// Every raw device answer matches the oracle: the stored value for a stored key, `u32::MAX` (the absent marker)
/// otherwise; keys the build could not place (`unplaced`) must read as absent. One parallel pass over the
/// answers: at 2^26 keys, HashMap lookups dominate the host's share of a measurement, so each answer costs one
/// lookup (a serial pass turning raw answers into `Option`s first took ~7 s per find mix on the H100's host).
pub fn check_raw(
    oracle: &HashMap<u32, u32>,
    unplaced: &HashSet<u32>,
    q: &[u32],
    raw: &[u32],
) -> bool {
    use rayon::prelude::*;
    q.len() == raw.len()
        && q.par_iter().zip(raw.par_iter()).all(|(k, &v)| {
            // A stored value of all ones reads the same as absent; it is still the right answer.
            v == expected(oracle, unplaced, k).unwrap_or(u32::MAX)
        })
}

/// The right answer for query `k`: its oracle value, or absent for keys the build could not place.
fn expected(oracle: &HashMap<u32, u32>, unplaced: &HashSet<u32>, k: &u32) -> Option<u32> {
    if unplaced.contains(k) {
        None
    } else {
        oracle.get(k).copied()
    }
}

/// Every answer matches the oracle.
pub fn check(oracle: &HashMap<u32, u32>, q: &[u32], got: &[Option<u32>]) -> bool {
    check_excluding(oracle, &HashSet::new(), q, got)
}

/// Every answer matches the oracle, except that keys the build could not place (`unplaced`) must be absent.
pub fn check_excluding(
    oracle: &HashMap<u32, u32>,
    unplaced: &HashSet<u32>,
    q: &[u32],
    got: &[Option<u32>],
) -> bool {
    // In parallel: at 2^26 keys a serial check took longer than the measurements it checks.
    use rayon::prelude::*;
    q.par_iter()
        .zip(got.par_iter())
        .all(|(k, g)| expected(oracle, unplaced, k) == *g)
}

/// Runs `setup` then `call` once as a warm-up and `runs` times more, timing only `call`; `check` judges every
/// answer, outside the timed region. Returns the median M keys/s for `keys` keys and whether every answer
/// passed (the `host` and `csr` modes time their calls with it).
pub fn time<T>(
    runs: usize,
    keys: usize,
    mut setup: impl FnMut() -> hashtile::Result<()>,
    mut call: impl FnMut() -> hashtile::Result<T>,
    mut check: impl FnMut(T) -> bool,
) -> hashtile::Result<(f64, bool)> {
    let mut rates = Vec::with_capacity(runs);
    let mut ok = true;
    for run in 0..=runs {
        setup()?;
        let t0 = std::time::Instant::now();
        let answer = call()?;
        let secs = t0.elapsed().as_secs_f64();
        ok &= check(answer);
        if run > 0 {
            rates.push(keys as f64 / secs / 1e6);
        }
    }
    Ok((median(&mut rates), ok))
}
