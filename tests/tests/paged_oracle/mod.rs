//! The `HashMap` oracle checks of paged tables, shared by `paged.rs` and `paged_stress.rs` (each includes
//! this as `mod paged_oracle;`).

use hashtile::{Key, PagedTable, SchemeInfo, Value};
use std::collections::{HashMap, HashSet};

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
    let mut into = vec![V::zero(); q.len()];
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
