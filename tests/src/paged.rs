//! Paged tables against a `HashMap` oracle: the checks and generators of the paged tests (`paged`,
//! `paged_frames`, `paged_stress`).

use hashtile::{Key, PagedConfig, PagedTable, Placement, SchemeInfo, SchemeParams, Value};
use rand::{Rng, rngs::StdRng};
use std::collections::{HashMap, HashSet};

/// Both placements, in the order the tests run them.
pub const PLACEMENTS: [Placement; 2] = [Placement::HashRouted, Placement::ArrivalOrder];

/// `n` random keys below `range` (repeats likely: upserts and finds of the same keys).
pub fn random_keys<K: Key>(rng: &mut StdRng, n: usize, range: u64) -> Vec<K> {
    (0..n)
        .map(|_| K::narrow(rng.random_range(0..range)))
        .collect()
}

/// `n` random values (from random `u32`s).
pub fn random_values<V: Value>(rng: &mut StdRng, n: usize) -> Vec<V> {
    (0..n)
        .map(|_| V::narrow(rng.random::<u32>() as u64))
        .collect()
}

/// Upserts the pairs into the table and into the oracle (a key's last pair wins in both).
pub fn insert_both<S: SchemeInfo, K: Key, V: Value>(
    t: &mut PagedTable<S, K, V>,
    oracle: &mut HashMap<K, V>,
    keys: &[K],
    values: &[V],
) {
    t.insert(keys, values).unwrap();
    for (k, v) in keys.iter().zip(values) {
        oracle.insert(*k, *v);
    }
}

/// Removes the keys of `gone` from the oracle and returns how many distinct ones it held: what the table's
/// `erase` of `gone` reports.
pub fn erase_from_oracle<K: Key, V: Value>(oracle: &mut HashMap<K, V>, gone: &[K]) -> usize {
    gone.iter().filter(|k| oracle.remove(k).is_some()).count()
}

/// Checks the answers to `q` against the oracle with both calls: `find` (`Some(value)` / `None`) and
/// `find_into` (the value, or `V::ABSENT`).
pub fn check_finds<S: SchemeInfo, K: Key, V: Value>(
    t: &mut PagedTable<S, K, V>,
    oracle: &HashMap<K, V>,
    q: &[K],
    what: &str,
) {
    let got = t.find(q).unwrap();
    assert_eq!(got.len(), q.len(), "{what}: find length");
    for (i, (k, g)) in q.iter().zip(&got).enumerate() {
        assert_eq!(*g, oracle.get(k).copied(), "{what}: find #{i} ({k})");
    }
    let mut into = vec![V::default(); q.len()];
    t.find_into(q, &mut into).unwrap();
    for (i, (k, g)) in q.iter().zip(&into).enumerate() {
        assert_eq!(
            *g,
            oracle.get(k).copied().unwrap_or(V::ABSENT),
            "{what}: find_into #{i} ({k})"
        );
    }
}

/// Checks the table against the oracle: `len`, every stored key and the `absent` keys with both finds, and
/// `pairs` (each key once, with its value, none lost).
pub fn check<S: SchemeInfo, K: Key, V: Value>(
    t: &mut PagedTable<S, K, V>,
    oracle: &HashMap<K, V>,
    absent: &[K],
    what: &str,
) {
    assert_eq!(t.len(), oracle.len(), "{what}: len");
    let q: Vec<K> = oracle.keys().chain(absent).copied().collect();
    check_finds(t, oracle, &q, what);
    let pairs = t.pairs().unwrap();
    assert_eq!(
        pairs.len(),
        oracle.len(),
        "{what}: pairs stored twice or lost"
    );
    let mut seen = HashSet::new();
    for (k, v) in pairs {
        assert!(seen.insert(k), "{what}: key {k} stored twice");
        assert_eq!(oracle.get(&k), Some(&v), "{what}: pair ({k}, {v})");
    }
}

/// `cfg` with children that fill their stashes: full load, two hash functions and short eviction chains, room
/// for 64 pairs per stash, one rebuild.
pub fn filling_stashes(cfg: PagedConfig) -> PagedConfig {
    cfg.max_load(1.0)
        .params(SchemeParams {
            num_hashes: 2,
            max_chain: 4,
            threshold: 0,
            upsert: 1,
        })
        .stash_pairs(64)
        .max_rebuilds(1)
}
