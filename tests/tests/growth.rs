//! Growth (`TableConfig::growth`, issue 30 item 6) against a `HashMap` oracle on every backend present (CI: the
//! CPU and lavapipe): tables that start tiny and grow batch by batch keep every pair, stay under their maximum
//! load, take only the doublings they need, keep double hashing's bucket counts walkable, and drop erased slots
//! on the way; bad input and bad settings are typed errors that change nothing, the capacity included.

use hashtile::reduce::Add;
use hashtile::{
    Backend, BackendChoice, Bcht, DoubleHashing, Error, HashTable, Iht, LinearProbing, P2bht,
    ProbingScheme, SchemeInfo, TableConfig,
};
use hashtile_tests::backends::present_backends;
use std::collections::HashMap;

/// Distinct spread keys `lo..hi` (a bijective mix; never the sentinel).
fn keys(lo: u32, hi: u32) -> Vec<u32> {
    (lo..hi)
        .map(|i| hashtile::hash::fmix32(i ^ 0x5bd1))
        .collect()
}

fn config(backend: Backend, capacity: usize, max_load: f64) -> TableConfig {
    TableConfig::with_capacity(capacity)
        .growth(max_load)
        .batch_keys(1 << 12)
        .backend(BackendChoice::Exactly(backend))
}

/// Batches of `batch` new keys into a table of `start` slots that grows at `max_load`, with every other batch
/// repeating half of the previous one (updates: no growth for them) and a counting apply; checked against the
/// oracle after each batch.
fn grows_batch_by_batch<S: SchemeInfo>(backend: Backend, start: usize, max_load: f64) {
    let mut t: HashTable<S, u32, u32> = HashTable::new(config(backend, start, max_load)).unwrap();
    let mut oracle: HashMap<u32, u32> = HashMap::new();
    let batch = 3000u32;
    let mut capacities = vec![t.capacity()];
    for round in 0..8u32 {
        let ks = keys(round * batch, (round + 1) * batch);
        let vs: Vec<u32> = ks.iter().map(|k| k.wrapping_mul(3)).collect();
        t.insert(&ks, &vs).unwrap();
        oracle.extend(ks.iter().copied().zip(vs.iter().copied()));
        // Updates of stored keys never grow the table.
        let before = t.capacity();
        let again = &ks[..ks.len() / 2];
        t.insert_or_apply::<Add>(again, &vec![1; again.len()])
            .unwrap();
        for k in again {
            *oracle.get_mut(k).unwrap() += 1;
        }
        assert_eq!(
            t.capacity(),
            before,
            "{} on {backend}: updates grew the table",
            S::NAME
        );
        assert_eq!(
            t.len(),
            oracle.len(),
            "{} on {backend}, round {round}",
            S::NAME
        );
        assert!(
            t.load_factor() <= max_load,
            "{} on {backend}, round {round}: load {} past {max_load}",
            S::NAME,
            t.load_factor()
        );
        capacities.push(t.capacity());
    }
    // Doublings only, and only as many as the load needs: the last one was needed.
    let last = *capacities.last().unwrap();
    assert!(last > capacities[0], "{} on {backend}: never grew", S::NAME);
    assert!(
        (last as f64 / 2.0) * max_load < oracle.len() as f64 * 1.02,
        "{} on {backend}: grew to {last} slots for {} pairs",
        S::NAME,
        oracle.len()
    );
    let all: Vec<u32> = oracle.keys().copied().collect();
    let got = t.find(&all).unwrap();
    for (k, g) in all.iter().zip(got) {
        assert_eq!(
            g,
            oracle.get(k).copied(),
            "{} on {backend}: key {k}",
            S::NAME
        );
    }
    let absent = keys(1 << 20, (1 << 20) + 2000);
    assert!(t.find(&absent).unwrap().iter().all(Option::is_none));
    let mut pairs = t.pairs().unwrap();
    pairs.sort_unstable();
    let mut want: Vec<(u32, u32)> = oracle.into_iter().collect();
    want.sort_unstable();
    assert_eq!(pairs, want, "{} on {backend}: pairs", S::NAME);
}

#[test]
fn growth_keeps_every_pair() {
    for backend in present_backends() {
        grows_batch_by_batch::<Bcht>(backend, 64, 0.85);
        grows_batch_by_batch::<Iht>(backend, 100, 0.8);
        grows_batch_by_batch::<P2bht>(backend, 1000, 0.8);
        grows_batch_by_batch::<LinearProbing>(backend, 64, 0.9);
        grows_batch_by_batch::<DoubleHashing>(backend, 97, 0.85);
    }
}

/// One batch far larger than the table: several doublings at once, before the batch goes in.
#[test]
fn one_batch_grows_many_times() {
    for backend in present_backends() {
        let mut t: HashTable<Bcht, u32, u32> = HashTable::new(config(backend, 32, 0.8)).unwrap();
        let ks = keys(0, 50_000);
        t.insert(&ks, &ks).unwrap();
        assert_eq!(t.len(), ks.len());
        assert!(
            t.load_factor() <= 0.8 && t.load_factor() > 0.4,
            "{backend}: {}",
            t.load_factor()
        );
        assert_eq!(
            t.find(&ks).unwrap(),
            ks.iter().map(|&k| Some(k)).collect::<Vec<_>>()
        );
    }
}

/// Erased slots are dropped by growth: the grown table holds exactly the pairs left.
#[test]
fn growth_drops_erased_slots() {
    for backend in present_backends() {
        let mut t: HashTable<Iht, u32, u32> = HashTable::new(config(backend, 4096, 0.8)).unwrap();
        let first = keys(0, 3000);
        t.insert(&first, &first).unwrap();
        assert_eq!(t.erase(&first[..2000]).unwrap(), 2000);
        assert_eq!(t.tombstones(), 2000);
        let second = keys(3000, 8000);
        t.insert(&second, &second).unwrap();
        assert_eq!(t.tombstones(), 0, "{backend}");
        assert_eq!(t.len(), 6000);
        let found = t.find(&first).unwrap();
        assert!(
            found[..2000].iter().all(Option::is_none),
            "{backend}: an erased key came back"
        );
        assert!(
            found[2000..]
                .iter()
                .zip(&first[2000..])
                .all(|(f, k)| *f == Some(*k))
        );
        assert!(t.contains(&second).unwrap().iter().all(|&c| c));
    }
}

/// Double hashing grows into prime (or power-of-two) bucket counts only: its step must walk them.
#[test]
fn double_hashing_grows_into_walkable_counts() {
    for backend in present_backends() {
        let cfg = config(backend, 100, 0.9).bucket_size(4);
        let mut t: HashTable<DoubleHashing, u32, u32> = HashTable::new(cfg).unwrap();
        for round in 0..4 {
            let ks = keys(round * 5000, (round + 1) * 5000);
            t.insert(&ks, &ks).unwrap();
            let buckets = (t.capacity() / 4) as u32;
            assert_eq!(
                hashtile::scheme::sequence_buckets(DoubleHashing::SEQUENCE, buckets),
                buckets,
                "{backend}: {buckets} buckets"
            );
        }
        assert_eq!(t.len(), 20_000);
    }
}

/// A sentinel in a batch that would grow the table is refused before anything moves; a bad maximum load is
/// refused at construction; 64-bit pairs grow too (wide layout on GPUs).
#[test]
fn growth_errors_change_nothing() {
    for backend in present_backends() {
        let mut t: HashTable<Bcht, u32, u32> = HashTable::new(config(backend, 64, 0.8)).unwrap();
        let ks = keys(0, 40);
        t.insert(&ks, &ks).unwrap();
        let cap = t.capacity();
        let mut bad = keys(100, 1100);
        bad[700] = u32::MAX;
        assert!(matches!(
            t.insert(&bad, &bad),
            Err(Error::SentinelKey { index: 700 })
        ));
        assert_eq!((t.capacity(), t.len()), (cap, 40), "{backend}");
        assert!(matches!(
            t.insert(&bad[..10], &bad[..9]),
            Err(Error::LengthMismatch { .. })
        ));
        for max_load in [0.0, -1.0, 1.5, f64::NAN] {
            let r = HashTable::<Bcht, u32, u32>::new(config(backend, 64, max_load));
            assert!(matches!(r, Err(Error::InvalidConfig(_))), "{max_load}");
        }
    }
    for backend in present_backends() {
        let cfg = config(backend, 64, 0.8);
        let mut t: HashTable<Iht, u64, u64> = HashTable::new(cfg).unwrap();
        let ks: Vec<u64> = (0..5000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | (1 << 40))
            .collect();
        t.insert(&ks, &ks).unwrap();
        assert_eq!(t.len(), 5000);
        assert!(t.load_factor() <= 0.8);
        assert_eq!(
            t.find(&ks).unwrap(),
            ks.iter().map(|&k| Some(k)).collect::<Vec<_>>()
        );
    }
}

/// Without growth, the capacity is fixed: a batch that does not fit is `CapacityExceeded`, the table unchanged.
#[test]
fn fixed_capacity_without_growth() {
    let cfg = TableConfig::with_capacity(64).backend(BackendChoice::Exactly(Backend::Cpu));
    let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg).unwrap();
    let ks = keys(0, 100);
    assert!(matches!(
        t.insert(&ks, &ks),
        Err(Error::CapacityExceeded { .. })
    ));
    assert_eq!((t.len(), t.capacity()), (0, 64));
}
