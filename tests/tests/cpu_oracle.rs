//! BCHT on the CPU backend against a `std::collections::HashMap` oracle: random u32->u32 and u64->u64 data at
//! load factors 0.5..0.95, keys inserted twice, absent keys, empty input, sentinel keys, wrong lengths.

use hashtile::{Backend, BackendChoice, Bcht, Error, HashTable, Key, TableConfig, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, HashSet};

fn cpu(n: usize, load: f64, deterministic: bool) -> TableConfig {
    TableConfig::for_keys(n, load)
        .backend(BackendChoice::Exactly(Backend::Cpu))
        .deterministic(deterministic)
}

/// `n` distinct random non-sentinel keys of type K.
fn distinct<K: Key>(rng: &mut StdRng, n: usize, exclude: &HashSet<u64>) -> Vec<K> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let raw: u64 = rng.random();
        let k = K::narrow(raw);
        if !k.is_sentinel() && !exclude.contains(&k.widen()) && seen.insert(k.widen()) {
            out.push(k);
        }
    }
    out
}

fn check_matches_oracle<K: Key, V: Value>(load: f64, deterministic: bool, seed: u64) {
    let n = 20_000;
    let mut rng = StdRng::seed_from_u64(seed);
    let keys: Vec<K> = distinct(&mut rng, n, &HashSet::new());
    let values: Vec<V> = (0..n).map(|_| V::narrow(rng.random())).collect();
    let mut table: HashTable<Bcht, K, V> = HashTable::new(cpu(n, load, deterministic)).unwrap();
    let mut oracle = HashMap::new();

    // First half, then the second half plus a re-insert of a quarter of the first half with new values.
    let half = n / 2;
    table.insert(&keys[..half], &values[..half]).unwrap();
    oracle.extend(
        keys[..half]
            .iter()
            .copied()
            .zip(values[..half].iter().copied()),
    );
    let mut k2: Vec<K> = keys[half..].to_vec();
    let mut v2: Vec<V> = values[half..].to_vec();
    for &k in &keys[..half / 4] {
        k2.push(k);
        v2.push(V::narrow(rng.random()));
    }
    table.insert(&k2, &v2).unwrap();
    oracle.extend(k2.iter().copied().zip(v2.iter().copied()));

    assert_eq!(table.len(), oracle.len(), "len at load {load}");
    assert!((table.load_factor() - n as f64 / table.capacity() as f64).abs() < 1e-12);

    let exclude: HashSet<u64> = keys.iter().map(|k| k.widen()).collect();
    let absent: Vec<K> = distinct(&mut rng, 5_000, &exclude);
    let queries: Vec<K> = keys.iter().chain(&absent).copied().collect();
    let got = table.find(&queries).unwrap();
    for (k, g) in queries.iter().zip(&got) {
        assert_eq!(oracle.get(k).copied(), *g, "key {k} at load {load}");
    }
    let contains = table.contains(&queries).unwrap();
    assert_eq!(contains.iter().filter(|&&c| c).count(), oracle.len());

    // Every stored pair sits in one of its key's candidate buckets.
    for (k, b) in table.placement().unwrap() {
        assert!(table.candidate_buckets(k).contains(&b), "key {k} misplaced");
    }
}

#[test]
fn u32_matches_hashmap_at_every_load() {
    for (i, load) in [0.5, 0.8, 0.9, 0.95].into_iter().enumerate() {
        check_matches_oracle::<u32, u32>(load, false, i as u64);
        check_matches_oracle::<u32, u32>(load, true, 100 + i as u64);
    }
}

#[test]
fn u64_matches_hashmap_at_every_load() {
    for (i, load) in [0.5, 0.8, 0.9, 0.95].into_iter().enumerate() {
        check_matches_oracle::<u64, u64>(load, false, 10 + i as u64);
        check_matches_oracle::<u64, u64>(load, true, 110 + i as u64);
    }
}

#[test]
fn duplicate_keys_in_one_batch_keep_the_last_value() {
    let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cpu(100, 0.5, false)).unwrap();
    t.insert(&[7, 8, 7, 7], &[1, 2, 3, 4]).unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(t.find(&[7, 8]).unwrap(), vec![Some(4), Some(2)]);
}

#[test]
fn empty_input_is_a_no_op() {
    let mut t: HashTable<Bcht, u64, u64> = HashTable::new(cpu(100, 0.5, false)).unwrap();
    t.insert(&[], &[]).unwrap();
    assert!(t.is_empty());
    assert_eq!(t.find(&[]).unwrap(), Vec::<Option<u64>>::new());
}

#[test]
fn sentinel_key_is_rejected_and_table_unchanged() {
    let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cpu(100, 0.5, false)).unwrap();
    t.insert(&[1, 2], &[10, 20]).unwrap();
    let err = t.insert(&[3, u32::MAX, 4], &[30, 0, 40]).unwrap_err();
    assert_eq!(err, Error::SentinelKey { index: 1 });
    assert_eq!(t.len(), 2);
    assert_eq!(t.find(&[3, 4, u32::MAX]).unwrap(), vec![None, None, None]);
    let mut t64: HashTable<Bcht, u64, u64> = HashTable::new(cpu(100, 0.5, false)).unwrap();
    assert_eq!(
        t64.insert(&[u64::MAX], &[1]).unwrap_err(),
        Error::SentinelKey { index: 0 }
    );
    assert!(t64.is_empty());
}

#[test]
fn wrong_lengths_and_capacity_are_typed_errors() {
    let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cpu(16, 1.0, false)).unwrap();
    assert!(matches!(
        t.insert(&[1, 2], &[1]),
        Err(Error::LengthMismatch {
            got: 1,
            expected: 2,
            ..
        })
    ));
    let keys: Vec<u32> = (0..t.capacity() as u32 + 1).collect();
    assert!(matches!(
        t.insert(&keys, &keys),
        Err(Error::CapacityExceeded { .. })
    ));
    assert!(t.is_empty());
    let mut out = vec![0u32; 3];
    assert!(matches!(
        t.find_into(&[1], &mut out),
        Err(Error::LengthMismatch { .. })
    ));
}

#[test]
fn find_into_writes_the_absent_sentinel() {
    let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cpu(100, 0.5, false)).unwrap();
    t.insert(&[5], &[50]).unwrap();
    let mut out = vec![0u32; 2];
    t.find_into(&[5, 6], &mut out).unwrap();
    assert_eq!(out, vec![50, u32::MAX]);
}

#[test]
fn clear_empties_the_table() {
    let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cpu(100, 0.5, false)).unwrap();
    t.insert(&[1, 2, 3], &[1, 2, 3]).unwrap();
    t.clear().unwrap();
    assert!(t.is_empty());
    assert_eq!(t.find(&[1]).unwrap(), vec![None]);
}

#[test]
fn overfull_buckets_fail_with_every_pair_accounted_for() {
    // Bucket size 1, two hash functions, load 1.0: cuckoo cannot place everything.
    let n = 2_000;
    let params = hashtile::SchemeParams {
        num_hashes: 2,
        max_chain: 20,
        threshold: 0,
        upsert: 1,
    };
    let cfg = TableConfig::with_capacity(n)
        .bucket_size(1)
        .params(params)
        .max_rebuilds(2)
        .backend(BackendChoice::Exactly(Backend::Cpu));
    let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg).unwrap();
    let keys: Vec<u32> = (0..n as u32).collect();
    match t.insert(&keys, &keys) {
        Err(Error::BuildFailed { attempts, unplaced }) => {
            assert_eq!(attempts, 3);
            assert!(!unplaced.is_empty());
            // Nothing silently lost: stored + unplaced = all keys, no overlap.
            let stored: HashSet<u32> = t.pairs().unwrap().into_iter().map(|p| p.0).collect();
            let lost: HashSet<u32> = unplaced.iter().map(|p| p.0 as u32).collect();
            assert!(stored.is_disjoint(&lost));
            assert_eq!(stored.len() + lost.len(), n);
            assert_eq!(t.len(), stored.len());
        }
        other => panic!("expected BuildFailed, got {other:?}"),
    }
}

#[test]
fn deterministic_mode_reproduces_probe_counts() {
    let n = 10_000;
    let keys: Vec<u32> = (0..n as u32)
        .map(|i| hashtile::hash::fmix32(i ^ 99))
        .collect();
    let run = || {
        let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cpu(n, 0.9, true)).unwrap();
        t.insert(&keys, &keys).unwrap();
        t.find(&keys).unwrap();
        (
            t.last_insert_probes(),
            t.last_find_probes(),
            t.placement().unwrap(),
        )
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b);
    // BGHT reports ~1.1 probes per positive find for BCHT b=16 at 0.9.
    assert!(
        a.1.average() > 1.0 && a.1.average() < 1.3,
        "find probes {}",
        a.1.average()
    );
}

/// The parallel upsert (batch partitioned by bucket range, settled per range, updates before new keys) on
/// batches large enough for many ranges: duplicates spread over the batch (the last occurrence wins), updates
/// mixed with new keys, a second batch large enough that the capacity check counts its new keys, loads where
/// cuckoo chains and deferred inserts run. No key may be stored twice.
fn parallel_upsert_matches_oracle<S: hashtile::SchemeInfo, K: Key, V: Value>(load: f64, seed: u64) {
    let n = 120_000;
    let mut rng = StdRng::seed_from_u64(seed);
    let keys: Vec<K> = distinct(&mut rng, n, &HashSet::new());
    let mut table: HashTable<S, K, V> = HashTable::new(cpu(n, load, false)).unwrap();
    let mut oracle: HashMap<K, V> = HashMap::new();
    let mut batch = |table: &mut HashTable<S, K, V>, ks: Vec<K>| {
        let vs: Vec<V> = (0..ks.len()).map(|_| V::narrow(rng.random())).collect();
        table.insert(&ks, &vs).unwrap();
        oracle.extend(ks.iter().copied().zip(vs.iter().copied()));
    };
    // Batch 1: the first 60% of the keys, a third of them two or three times, in random positions.
    let mut b1: Vec<K> = keys[..n * 6 / 10].to_vec();
    b1.extend_from_within(..n / 5);
    b1.extend_from_within(n / 10..n / 5);
    shuffle(&mut b1, seed);
    batch(&mut table, b1);
    // Batch 2: every key (the stored 60% are updates, some twice, the rest new), so that len + batch exceeds the
    // capacity and the exact count of new keys decides.
    let mut b2: Vec<K> = keys.clone();
    b2.extend_from_within(..n / 4);
    shuffle(&mut b2, seed + 1);
    batch(&mut table, b2);

    let name = S::NAME;
    assert_eq!(table.len(), oracle.len(), "{name} len at load {load}");
    let pairs = table.pairs().unwrap();
    let distinct_stored: HashSet<u64> = pairs.iter().map(|(k, _)| k.widen()).collect();
    assert_eq!(
        distinct_stored.len(),
        pairs.len(),
        "{name}: a key is stored twice"
    );
    assert_eq!(pairs.len(), oracle.len());
    let got = table.find(&keys).unwrap();
    for (k, g) in keys.iter().zip(&got) {
        assert_eq!(oracle.get(k).copied(), *g, "{name} key {k} at load {load}");
    }
    let exclude: HashSet<u64> = keys.iter().map(|k| k.widen()).collect();
    let absent: Vec<K> = distinct(&mut rng, 10_000, &exclude);
    assert!(table.find(&absent).unwrap().iter().all(Option::is_none));
    for (k, b) in table.placement().unwrap() {
        assert!(
            table.candidate_buckets(k).contains(&b),
            "{name} key {k} misplaced"
        );
    }
}

/// A seeded Fisher-Yates shuffle.
fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5bd1_e995);
    for i in (1..v.len()).rev() {
        v.swap(i, rng.random_range(0..=i));
    }
}

#[test]
fn parallel_upsert_of_large_batches_matches_oracle() {
    for (i, load) in [0.8, 0.95].into_iter().enumerate() {
        parallel_upsert_matches_oracle::<Bcht, u32, u32>(load, 20 + i as u64);
        parallel_upsert_matches_oracle::<Bcht, u64, u64>(load, 30 + i as u64);
    }
    parallel_upsert_matches_oracle::<hashtile::Iht, u32, u64>(0.85, 40);
    parallel_upsert_matches_oracle::<hashtile::P2bht, u64, u32>(0.8, 41);
}
