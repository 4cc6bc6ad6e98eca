//! `HashSet` (issue 30 item 3) against a `std::collections::HashSet` oracle on every scheme and every backend
//! present (CI: the CPU and lavapipe), for 32-bit, 64-bit and signed keys: random batches with repeats,
//! erase-then-reinsert, erasing absent keys, growth, and the reserved keys (a typed error that changes nothing).

use hashtile::{
    Backend, BackendChoice, Bcht, Cht1, DoubleHashing, Error, HashSet, Iht, Key, LinearProbing,
    P2bht, SchemeInfo, TableConfig,
};
use hashtile_tests::backends::present_backends;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet as Oracle;

fn config(backend: Backend, capacity: usize) -> TableConfig {
    TableConfig::with_capacity(capacity)
        .batch_keys(1 << 11)
        .backend(BackendChoice::Exactly(backend))
}

/// The set holds exactly the oracle's keys, and answers `contains` for them and for `absent`.
fn same_keys<S: SchemeInfo, K: Key>(s: &HashSet<S, K>, o: &Oracle<K>, absent: &[K], what: &str) {
    let mut keys = s.keys().unwrap();
    keys.sort();
    let mut want: Vec<K> = o.iter().copied().collect();
    want.sort();
    assert_eq!(keys, want, "{what}: keys");
    assert_eq!(s.len(), o.len(), "{what}: len");
    let probe: Vec<K> = want.iter().chain(absent).copied().collect();
    let got = s.contains(&probe).unwrap();
    for (k, g) in probe.iter().zip(got) {
        assert_eq!(g, o.contains(k), "{what}: contains {k}");
    }
}

/// Rounds of random inserts (with repeats) and erases (with absent keys) from a small universe.
fn random_rounds<S: SchemeInfo, K: Key>(backend: Backend) {
    let what = format!("{} {}-bit keys on {backend}", S::NAME, K::BITS);
    let mut rng = StdRng::seed_from_u64(0x5e7 ^ K::BITS as u64);
    let mut s: HashSet<S, K> = HashSet::new(config(backend, 8192)).unwrap();
    let mut o = Oracle::new();
    // Spread keys of the width: two 32-bit mixes side by side.
    let key = |i: u64| {
        let lo = hashtile::hash::fmix32(i as u32 ^ 0x77) as u64;
        let hi = hashtile::hash::fmix32(i as u32 ^ 0x3c1) as u64;
        K::narrow(((hi << 32) | lo) >> (64 - K::BITS))
    };
    let universe = 5000u64;
    let absent: Vec<K> = (universe..universe + 300)
        .map(key)
        .filter(|k| !k.is_sentinel())
        .collect();
    for round in 0..6 {
        let ins: Vec<K> = (0..3000)
            .map(|_| key(rng.random_range(0..universe)))
            .filter(|k| !k.is_sentinel() && *k != K::narrow(K::EMPTY.widen() - 1))
            .collect();
        let new = ins
            .iter()
            .filter(|k| !o.contains(*k))
            .collect::<Oracle<_>>()
            .len();
        assert_eq!(
            s.insert(&ins).unwrap(),
            new,
            "{what}, round {round}: new keys"
        );
        o.extend(ins.iter().copied());
        let del: Vec<K> = (0..1500)
            .map(|_| key(rng.random_range(0..universe + 300)))
            .collect();
        let gone = del
            .iter()
            .filter(|k| o.contains(*k))
            .collect::<Oracle<_>>()
            .len();
        assert_eq!(
            s.erase(&del).unwrap(),
            gone,
            "{what}, round {round}: erased"
        );
        for k in &del {
            o.remove(k);
        }
        same_keys(&s, &o, &absent, &format!("{what}, round {round}"));
    }
    s.compact().unwrap();
    assert_eq!(s.tombstones(), 0);
    same_keys(&s, &o, &absent, &format!("{what}, compacted"));
    s.clear().unwrap();
    assert!(s.is_empty());
}

#[test]
fn sets_match_the_oracle() {
    for backend in present_backends() {
        random_rounds::<Bcht, u32>(backend);
        random_rounds::<Iht, u32>(backend);
        random_rounds::<P2bht, u32>(backend);
        random_rounds::<LinearProbing, u32>(backend);
        random_rounds::<DoubleHashing, u32>(backend);
        random_rounds::<Cht1, u32>(backend);
        // 64-bit keys: every scheme, cuckoo evictions included (a set's key word is its whole element).
        random_rounds::<Bcht, u64>(backend);
        random_rounds::<DoubleHashing, u64>(backend);
        random_rounds::<Iht, i32>(backend);
        random_rounds::<LinearProbing, i64>(backend);
    }
}

#[test]
fn reserved_keys_are_errors_that_change_nothing() {
    for backend in present_backends() {
        let mut s: HashSet<Bcht, u32> = HashSet::new(config(backend, 256)).unwrap();
        s.insert(&[1, 2, 3]).unwrap();
        assert!(matches!(
            s.insert(&[4, u32::MAX]),
            Err(Error::SentinelKey { index: 1 })
        ));
        assert!(matches!(
            s.insert(&[5, 6, u32::MAX - 1]),
            Err(Error::TombstoneKey { index: 2 })
        ));
        assert_eq!(s.len(), 3, "{backend}");
        assert_eq!(
            s.contains(&[4, 5, u32::MAX, u32::MAX - 1]).unwrap(),
            vec![false; 4]
        );
        assert_eq!(s.erase(&[u32::MAX, u32::MAX - 1, 9]).unwrap(), 0);
        // A reserved key of the user's frees the all-ones key; the erased key stays reserved.
        let mut r: HashSet<Iht, u32> =
            HashSet::new(config(backend, 256).reserved_key(0u32)).unwrap();
        assert_eq!(r.insert(&[u32::MAX, 7]).unwrap(), 2);
        assert_eq!(
            r.contains(&[u32::MAX, 7, 0]).unwrap(),
            vec![true, true, false]
        );
        assert!(matches!(
            r.insert(&[0]),
            Err(Error::SentinelKey { index: 0 })
        ));
        let mut keys = r.keys().unwrap();
        keys.sort();
        assert_eq!(keys, vec![7, u32::MAX]);
    }
}

#[test]
fn sets_grow_and_fill_up() {
    for backend in present_backends() {
        let mut s: HashSet<Bcht, u32> = HashSet::new(config(backend, 64).growth(0.85)).unwrap();
        let keys: Vec<u32> = (0..40_000u32)
            .map(|i| hashtile::hash::fmix32(i ^ 3))
            .collect();
        for chunk in keys.chunks(5000) {
            s.insert(chunk).unwrap();
        }
        assert_eq!(s.len(), keys.len(), "{backend}");
        assert!(s.load_factor() <= 0.85);
        assert!(s.contains(&keys).unwrap().iter().all(|&c| c));
        // Without growth: a batch that does not fit is refused whole.
        let mut full: HashSet<DoubleHashing, u32> = HashSet::new(config(backend, 128)).unwrap();
        let many: Vec<u32> = (0..200).collect();
        assert!(matches!(
            full.insert(&many),
            Err(Error::CapacityExceeded { .. })
        ));
        assert!(full.is_empty(), "{backend}");
    }
}
