//! The sequences of batches that the `paged` tests run over schemes, key and value widths, and backends, each
//! checked against a `HashMap` oracle (`crate::paged`); each test's own comment says what it covers.

use crate::backends::present;
use crate::paged::{PLACEMENTS, check, filling_stashes, random_keys};
use hashtile::{
    Backend, BackendChoice, DeviceBudget, Error, Iht, Key, PagedConfig, PagedTable, Placement,
    Replacement, SchemeInfo, Value,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::{HashMap, HashSet};

/// Random batches of upserts (repeats inside and across batches), finds and erases, checked after each.
#[allow(clippy::too_many_arguments)]
pub fn random_batches<S: SchemeInfo, K: Key, V: Value>(
    backend: Backend,
    placement: Placement,
    replacement: Replacement,
    child_slots: usize,
    budget: DeviceBudget,
    batches: usize,
    batch: usize,
    seed: u64,
) -> PagedTable<S, K, V> {
    let cfg = PagedConfig::with_child_slots(child_slots)
        .backend(BackendChoice::Exactly(backend))
        .placement(placement)
        .replacement(replacement)
        .budget(budget)
        .seed(seed);
    let mut t: PagedTable<S, K, V> = PagedTable::new(cfg).unwrap();
    let mut oracle = HashMap::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let range = (batches * batch) as u64;
    for b in 0..batches {
        let what = format!(
            "{} {backend} {placement:?} {replacement:?} batch {b}",
            S::NAME
        );
        let keys: Vec<K> = random_keys(&mut rng, batch, range);
        let values: Vec<V> = (0..batch)
            .map(|_| V::narrow(rng.random::<u32>() as u64))
            .collect();
        t.insert(&keys, &values).unwrap();
        for (k, v) in keys.iter().zip(&values) {
            oracle.insert(*k, *v);
        }
        if b % 3 == 2 {
            let gone: Vec<K> = random_keys(&mut rng, batch / 4, range);
            let want: HashSet<K> = gone
                .iter()
                .filter(|k| oracle.contains_key(k))
                .copied()
                .collect();
            let n = t.erase(&gone).unwrap();
            assert_eq!(n, want.len(), "{what}: erased count");
            for k in &gone {
                oracle.remove(k);
            }
        }
        let absent: Vec<K> = (0..64).map(|i| K::narrow(range + i)).collect();
        check(&mut t, &oracle, &absent, &what);
    }
    t
}

/// [`random_batches`] under both placements and both replacement policies, one child of 512 slots resident
/// (every batch swaps): the table grew and swapped, and one child stays resident.
pub fn random_batches_both_policies<S: SchemeInfo>(backend: Backend) {
    if !present(backend) {
        return;
    }
    for placement in PLACEMENTS {
        for replacement in [Replacement::Lru, Replacement::Fifo] {
            // Children of 512 slots, one resident at a time: every batch swaps.
            let t = random_batches::<S, u32, u32>(
                backend,
                placement,
                replacement,
                512,
                DeviceBudget::Children(1),
                8,
                600,
                11,
            );
            let stats = t.paging();
            assert!(t.children() > 1, "{placement:?}: grew");
            assert!(stats.swaps_in >= 8, "{placement:?}: swapped ({stats:?})");
            assert!(stats.bytes_moved > 0);
            assert_eq!(t.resident_children().len(), 1);
        }
    }
}

/// One scheme and widths of `tombstone_erase` (tests/paged.rs): rounds of upserts and erases on one resident
/// child, checked against the oracle and for tombstones (`expect_tombstones`), then the erased keys refilled.
pub fn tombstone_erase<S: SchemeInfo, K: Key, V: Value>(backend: Backend, expect_tombstones: bool) {
    let what = format!("{backend} {} {}-bit keys", S::NAME, K::BITS);
    let cfg = PagedConfig::with_child_slots(2048)
        .backend(BackendChoice::Exactly(backend))
        .placement(Placement::HashRouted)
        .initial_children(2)
        .budget(DeviceBudget::Children(1));
    let mut t: PagedTable<S, K, V> = PagedTable::new(cfg).unwrap();
    let mut oracle = HashMap::new();
    let mut rng = StdRng::seed_from_u64(7);
    for round in 0..6u64 {
        let keys: Vec<K> = random_keys(&mut rng, 1500, 6000);
        let values: Vec<V> = (0..1500u64)
            .map(|i| V::narrow(i + round * 10_000))
            .collect();
        t.insert(&keys, &values).unwrap();
        for (k, v) in keys.iter().zip(&values) {
            oracle.insert(*k, *v);
        }
        let gone: Vec<K> = random_keys(&mut rng, 700, 6000);
        let erased = t.erase(&gone).unwrap();
        let expected = gone
            .iter()
            .collect::<HashSet<_>>()
            .into_iter()
            .filter(|k| oracle.remove(k).is_some())
            .count();
        assert_eq!(erased, expected, "{what}: erased in round {round}");
        if expect_tombstones && round == 0 {
            assert!(t.tombstones() > 0, "{what}: no tombstones after an erase");
        }
        if !expect_tombstones {
            assert_eq!(t.tombstones(), 0, "{what}: tombstones");
        }
        check(
            &mut t,
            &oracle,
            &gone[..20],
            &format!("{what}, round {round}"),
        );
        let sentinel = K::narrow(u64::MAX);
        assert_eq!(t.find(&[sentinel]).unwrap(), vec![None], "{what}: sentinel");
    }
    // Erased keys come back with new values.
    let back: Vec<K> = (0..6000u64).map(K::narrow).collect();
    let vals: Vec<V> = back.iter().map(|k| V::narrow(k.widen() ^ 0x5555)).collect();
    t.insert(&back, &vals).unwrap();
    for (k, v) in back.iter().zip(&vals) {
        oracle.insert(*k, *v);
    }
    check(
        &mut t,
        &oracle,
        &[K::narrow(7000)],
        &format!("{what}: refilled"),
    );
}

/// One widths, placement and routing of `sentinel_batches_leave_the_table_unchanged` (tests/paged.rs): batches
/// of one and of several device batches with the sentinel inside are refused, the table unchanged.
pub fn sentinel_batches_change_nothing<K: Key, V: Value>(
    backend: Backend,
    placement: Placement,
    device_routing: bool,
) {
    let cfg = PagedConfig::with_child_slots(4096)
        .backend(BackendChoice::Exactly(backend))
        .placement(placement)
        .initial_children(2)
        .batch_keys(4096)
        .device_routing(device_routing);
    let mut t: PagedTable<Iht, K, V> = PagedTable::new(cfg).unwrap();
    let keys: Vec<K> = (0..1000u64).map(K::narrow).collect();
    let values: Vec<V> = (0..1000u64).map(V::narrow).collect();
    t.insert(&keys, &values).unwrap();
    let oracle: HashMap<K, V> = keys.iter().copied().zip(values.iter().copied()).collect();
    for (n, at) in [(3000usize, 2000usize), (10_000, 9000)] {
        let mut k: Vec<K> = (0..n as u64).map(|i| K::narrow(i + 5000)).collect();
        k[at] = K::narrow(u64::MAX);
        let v: Vec<V> = (0..n as u64).map(V::narrow).collect();
        let what = format!(
            "{backend} {placement:?} {}-bit keys, sentinel at {at} of {n}",
            K::BITS
        );
        assert!(
            matches!(t.insert(&k, &v), Err(Error::SentinelKey { index }) if index == at),
            "{what}"
        );
        check(&mut t, &oracle, &k[..5], &what);
    }
}

/// One scheme, widths and seed of `random_rounds_with_tombstones_and_paging` (tests/paged.rs), with
/// `(stash pairs, resident children, max load)`: ten rounds of upserts and erases, the oracle after each.
pub fn random_rounds_with_tombstones<S: SchemeInfo, K: Key, V: Value>(
    backend: Backend,
    seed: u64,
    (stash, budget, load): (usize, usize, f64),
) {
    let cfg = PagedConfig::with_child_slots(2048)
        .backend(BackendChoice::Exactly(backend))
        .placement(Placement::HashRouted)
        .initial_children(2)
        .budget(DeviceBudget::Children(budget))
        .stash_pairs(stash)
        .max_load(load)
        .batch_keys(2048);
    let mut t: PagedTable<S, K, V> = PagedTable::new(cfg).unwrap();
    let mut oracle: HashMap<K, V> = HashMap::new();
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..10u64 {
        let what = format!("{backend} {} seed {seed} round {round}", S::NAME);
        let n = rng.random_range(1..9000);
        let keys: Vec<K> = random_keys(&mut rng, n, 20_000);
        let values: Vec<V> = (0..n as u64)
            .map(|i| V::narrow(i + round * 100_000))
            .collect();
        t.insert(&keys, &values).unwrap();
        for (k, v) in keys.iter().zip(&values) {
            oracle.insert(*k, *v);
        }
        let m = rng.random_range(0..4000);
        let gone: Vec<K> = random_keys(&mut rng, m, 20_000);
        let expected = gone
            .iter()
            .collect::<HashSet<_>>()
            .into_iter()
            .filter(|k| oracle.remove(k).is_some())
            .count();
        assert_eq!(t.erase(&gone).unwrap(), expected, "{what}: erased");
        check(&mut t, &oracle, &[K::narrow(30_000)], &what);
    }
}

/// One scheme and widths of `device_routing_agrees_with_host_routing` (tests/paged.rs): a device-routed and a
/// host-routed table, with children whose stashes fill when `stash`, against each other and the oracle.
pub fn device_routing_agrees_with_host_routing<S: SchemeInfo, K: Key, V: Value>(
    backend: Backend,
    stash: bool,
) {
    let what = format!(
        "{backend} {} {}->{}-bit{}",
        S::NAME,
        K::BITS,
        V::BITS,
        if stash { ", stashes" } else { "" }
    );
    let make = |device: bool| {
        let mut cfg = PagedConfig::with_child_slots(if stash { 256 } else { 1 << 13 })
            .backend(BackendChoice::Exactly(backend))
            .placement(Placement::HashRouted)
            .initial_children(8)
            .batch_keys(4096)
            .device_routing(device);
        if stash {
            cfg = filling_stashes(cfg);
        }
        PagedTable::<S, K, V>::new(cfg).unwrap()
    };
    let mut tables = [make(true), make(false)];
    let mut oracle = HashMap::new();
    let mut rng = StdRng::seed_from_u64(11);
    let (n, range) = if stash { (600, 2500) } else { (12_000, 40_000) };
    for round in 0..3u64 {
        let keys: Vec<K> = random_keys(&mut rng, n, range);
        let values: Vec<V> = (0..n as u64)
            .map(|i| V::narrow(i ^ (round << 20)))
            .collect();
        for t in &mut tables {
            t.insert(&keys, &values).unwrap();
        }
        for (k, v) in keys.iter().zip(&values) {
            oracle.insert(*k, *v);
        }
        let absent = [
            K::narrow(range + 1),
            K::narrow(range + 77),
            K::narrow(u64::MAX),
        ];
        for (i, t) in tables.iter_mut().enumerate() {
            check(
                t,
                &oracle,
                &absent,
                &format!("{what}, table {i}, round {round}"),
            );
        }
        // Every key of the range, in a call of several device batches.
        let q: Vec<K> = (0..range).map(K::narrow).collect();
        let want: Vec<Option<V>> = q.iter().map(|k| oracle.get(k).copied()).collect();
        for (i, t) in tables.iter_mut().enumerate() {
            assert_eq!(t.find(&q).unwrap(), want, "{what}, table {i}: every key");
        }
    }
    if stash {
        assert!(
            tables[0].stash_len() > 0,
            "{what}: stashes hold pairs ({})",
            tables[0].stash_len()
        );
    }
    // One device batch (two copy chunks) with the sentinel in its second chunk.
    let mut keys: Vec<K> = (0..4000u64).map(|i| K::narrow(range + 1000 + i)).collect();
    keys[3000] = K::narrow(u64::MAX);
    let values = vec![V::narrow(5); keys.len()];
    for (i, t) in tables.iter_mut().enumerate() {
        let len = t.len();
        assert!(
            matches!(
                t.insert(&keys, &values),
                Err(Error::SentinelKey { index: 3000 })
            ),
            "{what}, table {i}: sentinel refused"
        );
        assert_eq!(t.len(), len, "{what}, table {i}: unchanged");
    }
    check(
        &mut tables[0],
        &oracle,
        &keys[..4],
        &format!("{what}: after the sentinel"),
    );
}

/// One widths, replacement policy and seed of `prefetch_matches_paging_in_turn` (tests/paged.rs): a
/// prefetching table and one paging in at each child's turn against the oracle, and against each other.
pub fn prefetch_matches_paging_in_turn<K: Key, V: Value>(
    backend: Backend,
    replacement: Replacement,
    seed: u64,
) {
    let mut tables: Vec<PagedTable<Iht, K, V>> = [true, false]
        .into_iter()
        .map(|on| {
            // On CUDA, children of 8 MiB: a kernel that did not wait for its child's page-in would
            // run while the copy is still landing.
            let slots = if backend == Backend::Cuda {
                1 << 20
            } else {
                2048
            };
            let cfg = PagedConfig::with_child_slots(slots)
                .backend(BackendChoice::Exactly(backend))
                .placement(Placement::HashRouted)
                .initial_children(16)
                .budget(DeviceBudget::Children(2))
                .replacement(replacement)
                .prefetch(on)
                .batch_keys(4096)
                .seed(seed);
            PagedTable::new(cfg).unwrap()
        })
        .collect();
    let mut oracle: HashMap<K, V> = HashMap::new();
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..6u64 {
        let n = rng.random_range(4000..12000);
        let keys: Vec<K> = random_keys(&mut rng, n, 30_000);
        let values: Vec<V> = (0..n as u64).map(|i| V::narrow(i ^ round << 20)).collect();
        let gone: Vec<K> = random_keys(&mut rng, n / 8, 30_000);
        for (k, v) in keys.iter().zip(&values) {
            oracle.insert(*k, *v);
        }
        for k in &gone {
            oracle.remove(k);
        }
        for (i, t) in tables.iter_mut().enumerate() {
            let what = format!(
                "{backend} {replacement:?} prefetch {} round {round}",
                i == 0
            );
            t.insert(&keys, &values).unwrap();
            t.erase(&gone).unwrap();
            let absent: Vec<K> = (0..64).map(|i| K::narrow(30_000 + i)).collect();
            check(t, &oracle, &absent, &what);
        }
    }
    let [on, off] = &mut tables[..] else {
        unreachable!()
    };
    let mut a = on.pairs().unwrap();
    let mut b = off.pairs().unwrap();
    a.sort_unstable_by_key(|p| p.0.widen());
    b.sort_unstable_by_key(|p| p.0.widen());
    assert!(a == b, "{backend}: prefetching changed the pairs");
    assert_eq!(off.paging().prefetched, 0, "{backend}: prefetch off");
    if backend != Backend::Cpu {
        assert!(
            on.paging().prefetched > 0,
            "{backend}: no child was paged in ahead ({:?})",
            on.paging()
        );
    }
}
