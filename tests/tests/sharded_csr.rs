//! `ShardedCsrTable` and `ShardedCsrJoin` (issue 31: HashGraph's CSR multimap and its hash join over shards)
//! against simple oracles on every backend present (CI: the CPU and lavapipe, N shards side by side): a
//! `HashMap<K, Vec<V>>` multimap for `count` / `find_all` (answers in the caller's order) and a nested-loop join
//! for both join methods. Inputs: unique keys, heavy duplicates, all keys equal, every key in one shard, empty
//! columns, the all-ones key (a CSR table has no sentinel), u32 and u64 keys, a fixed vertex count and
//! `range_factor`; length mismatches are typed errors; calls from new threads.

use hashtile::{
    Backend, BackendChoice, CsrConfig, Error, JoinMethod, Key, ShardedConfig, ShardedCsrJoin,
    ShardedCsrTable, Shards, Value,
};
use hashtile_tests::backends::present_backends;
use hashtile_tests::joins::nested_loop_join;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;

fn config(backend: Backend, csr: CsrConfig, shards: Shards) -> ShardedConfig<CsrConfig> {
    ShardedConfig {
        shards,
        ..ShardedConfig::new(
            csr.batch_keys(1 << 11)
                .backend(BackendChoice::Exactly(backend)),
        )
    }
}

/// `n` keys drawn from `distinct` values, spread over the key space (duplicates kept).
fn random_keys<K: Key>(n: usize, distinct: u64, seed: u64) -> Vec<K> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let x = rng.random_range(0..distinct);
            K::narrow(x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - K::BITS))
        })
        .collect()
}

/// `count` and `find_all` of the table built from `(keys, values)` against the multimap, for the stored keys
/// (each twice, in a shuffled order) and `absent`; and the stored pairs as a multiset.
fn check_lookups<K: Key, V: Value + Ord>(
    cfg: &ShardedConfig<CsrConfig>,
    keys: &[K],
    values: &[V],
    absent: &[K],
    what: &str,
) {
    let t = ShardedCsrTable::build(cfg, keys, values).unwrap();
    assert_eq!(t.len(), keys.len(), "{what}: len");
    let mut oracle: HashMap<K, Vec<V>> = HashMap::new();
    for (&k, &v) in keys.iter().zip(values) {
        oracle.entry(k).or_default().push(v);
    }
    // Every shard holds only its own keys.
    for i in 0..t.shard_count() {
        for (k, _) in t.shard(i).pairs().unwrap() {
            assert_eq!(t.shard_of(k), i, "{what}: key {k} in the wrong shard");
        }
    }
    let mut queries: Vec<K> = oracle
        .keys()
        .chain(oracle.keys())
        .chain(absent)
        .copied()
        .collect();
    let mut rng = StdRng::seed_from_u64(keys.len() as u64);
    for i in (1..queries.len()).rev() {
        queries.swap(i, rng.random_range(0..=i));
    }
    let counts = t.count(&queries).unwrap();
    let all = t.find_all(&queries).unwrap();
    assert_eq!(all.len(), queries.len(), "{what}: answers");
    assert_eq!(*all.offsets.last().unwrap() as usize, all.values.len());
    for (i, q) in queries.iter().enumerate() {
        let mut want = oracle.get(q).cloned().unwrap_or_default();
        assert_eq!(
            counts[i] as usize,
            want.len(),
            "{what}: count of {q} (query {i})"
        );
        let mut got = all.get(i).unwrap().to_vec();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{what}: values of {q} (query {i})");
    }
    let mut placed = t.pairs().unwrap();
    let mut input: Vec<(K, V)> = keys.iter().copied().zip(values.iter().copied()).collect();
    placed.sort();
    input.sort();
    assert_eq!(placed, input, "{what}: pairs");
}

/// Both join methods against a nested-loop join.
fn check_join<K: Key>(cfg: &ShardedConfig<CsrConfig>, left: &[K], right: &[K], what: &str) {
    let want = nested_loop_join(left, right);
    for method in [JoinMethod::Probe, JoinMethod::Intersect] {
        let join = ShardedCsrJoin::plan(cfg, left, right, method).unwrap();
        assert_eq!(join.len(), want.len(), "{what}: {method:?} size");
        let (mut l, mut r) = (vec![0u32; join.len()], vec![0u32; join.len()]);
        join.write_into(&mut l, &mut r).unwrap();
        let mut got: Vec<(u32, u32)> = l.into_iter().zip(r).collect();
        got.sort();
        assert_eq!(got, want, "{what}: {method:?} pairs");
    }
}

#[test]
fn lookups_match_the_multimap() {
    for b in present_backends() {
        for shards in [Shards::Count(1), Shards::Count(3), Shards::AllDevices] {
            for csr in [
                CsrConfig::default(),
                CsrConfig::default().range_factor(0.5),
                CsrConfig::default().vertices(64),
            ] {
                let cfg = config(b, csr.clone(), shards.clone());
                for (n, distinct) in [(5000, 1 << 40), (5000, 700), (3000, 1)] {
                    let what = format!("{b} {shards:?} {csr:?}: {n} keys of {distinct}");
                    let keys: Vec<u32> = random_keys(n, distinct, n as u64 ^ distinct);
                    let values: Vec<u32> = (0..n as u32).collect();
                    let absent: Vec<u32> = random_keys::<u32>(300, 1 << 40, 7)
                        .into_iter()
                        .filter(|k| !keys.contains(k))
                        .collect();
                    check_lookups(&cfg, &keys, &values, &absent, &what);
                }
            }
        }
        let cfg = config(b, CsrConfig::default(), Shards::Count(4));
        let keys: Vec<u64> = random_keys(3000, 500, 3);
        let values: Vec<u64> = keys.iter().map(|k| k.rotate_left(9)).collect();
        check_lookups(&cfg, &keys, &values, &[1, 2], &format!("{b}: u64"));
        // No sentinel: the all-ones key is an ordinary key.
        let keys = [u32::MAX, 0, u32::MAX, 5, u32::MAX - 1];
        check_lookups(
            &cfg,
            &keys,
            &[1u32, 2, 3, 4, 5],
            &[9],
            &format!("{b}: all ones"),
        );
        check_lookups::<u32, u32>(&cfg, &[], &[], &[1, 2], &format!("{b}: empty"));
    }
}

/// Every key in one shard (the others built from nothing), and the joins of such columns.
#[test]
fn one_shard_full_the_others_empty() {
    for b in present_backends() {
        let cfg = config(b, CsrConfig::default(), Shards::Count(4));
        let probe = ShardedCsrTable::<u32, u32>::build(&cfg, &[], &[]).unwrap();
        let keys: Vec<u32> = random_keys::<u32>(40_000, 1 << 40, 5)
            .into_iter()
            .filter(|&k| probe.shard_of(k) == 1)
            .take(3000)
            .collect();
        let mut dup = keys.clone();
        dup.extend(std::iter::repeat_n(keys[0], 500));
        let values: Vec<u32> = (0..dup.len() as u32).collect();
        check_lookups(&cfg, &dup, &values, &[], &format!("{b}: one shard"));
        let t = ShardedCsrTable::build(&cfg, &dup, &values).unwrap();
        for s in [0, 2, 3] {
            assert!(t.shard(s).is_empty(), "{b}: shard {s} holds a key");
        }
        check_join(
            &cfg,
            &dup[..1200],
            &keys[..800],
            &format!("{b}: one-shard join"),
        );
    }
}

#[test]
fn joins_match_nested_loops() {
    for b in present_backends() {
        for shards in [Shards::Count(1), Shards::Count(3), Shards::AllDevices] {
            let cfg = config(b, CsrConfig::default(), shards.clone());
            for (nl, nr, distinct) in [(1500, 1000, 400), (800, 1200, 1 << 40), (600, 300, 3)] {
                let what = format!("{b} {shards:?}: {nl} x {nr} of {distinct}");
                let left: Vec<u32> = random_keys(nl, distinct, 1);
                let right: Vec<u32> = random_keys(nr, distinct, 2);
                check_join(&cfg, &left, &right, &what);
            }
            check_join::<u32>(&cfg, &[], &[1, 2], &format!("{b} {shards:?}: empty left"));
            check_join::<u32>(&cfg, &[1, 2], &[], &format!("{b} {shards:?}: empty right"));
            let left: Vec<u64> = random_keys(900, 300, 3);
            let right: Vec<u64> = random_keys(700, 300, 4);
            check_join(&cfg, &left, &right, &format!("{b} {shards:?}: u64"));
        }
    }
}

#[test]
fn bad_lengths_are_typed_errors() {
    for b in present_backends() {
        let cfg = config(b, CsrConfig::default(), Shards::Count(2));
        assert!(matches!(
            ShardedCsrTable::build(&cfg, &[1u32, 2], &[1u32]),
            Err(Error::LengthMismatch { .. })
        ));
        let t = ShardedCsrTable::build(&cfg, &[1u32, 2], &[10u32, 20]).unwrap();
        let mut out = vec![0u32; 1];
        assert!(matches!(
            t.count_into(&[1, 2], &mut out),
            Err(Error::LengthMismatch { .. })
        ));
        let join = ShardedCsrJoin::plan(&cfg, &[1u32, 2, 2], &[2u32], JoinMethod::Probe).unwrap();
        assert_eq!(join.len(), 2);
        let (mut l, mut r) = (vec![0u32; 1], vec![0u32; 2]);
        assert!(matches!(
            join.write_into(&mut l, &mut r),
            Err(Error::LengthMismatch { .. })
        ));
    }
}

/// A table built on one thread and read from others (each shard runs on its table's own CubeCL stream).
#[test]
fn calls_from_new_threads() {
    for b in present_backends() {
        let cfg = config(b, CsrConfig::default(), Shards::Count(2));
        let keys: Vec<u32> = random_keys(4000, 900, 8);
        let values: Vec<u32> = (0..4000).collect();
        let t = std::thread::spawn(move || ShardedCsrTable::build(&cfg, &keys, &values).unwrap())
            .join()
            .unwrap();
        let queries: Vec<u32> = random_keys(2000, 900, 8);
        let counts = std::thread::spawn(move || (t.count(&queries).unwrap(), t, queries))
            .join()
            .unwrap();
        let (counts, t, queries) = counts;
        let again = std::thread::spawn(move || t.count(&queries).unwrap())
            .join()
            .unwrap();
        assert_eq!(counts, again, "{b}: counts from two threads");
        assert!(counts.iter().any(|&c| c > 0), "{b}: nothing found");
    }
}

#[test]
fn ranks_are_refused() {
    let r = hashtile::Ranks::new(
        0,
        2,
        hashtile::Rendezvous::File(std::env::temp_dir().join("hashtile-csr-ranks")),
    );
    let cfg = config(Backend::Cpu, CsrConfig::default(), Shards::AllDevices).ranks(r);
    assert!(matches!(
        ShardedCsrTable::<u32, u32>::build(&cfg, &[1], &[1]),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        ShardedCsrJoin::<u32>::plan(&cfg, &[1], &[1], JoinMethod::Probe),
        Err(Error::InvalidConfig(_))
    ));
}

/// Lookups of one table in batches of falling and rising sizes: each call's parts are the first queries of
/// staging buffers that an earlier, larger call filled further (`sharded::staging`), so stale answers must not
/// leak into a later call's.
#[test]
fn staging_is_kept_across_batch_sizes() {
    for backend in present_backends() {
        for shards in [Shards::Count(2), Shards::Count(3)] {
            let what = format!("{backend} {shards:?}");
            let cfg = config(backend, CsrConfig::default(), shards);
            let keys: Vec<u32> = random_keys(30_000, 9_000, 5);
            let values: Vec<u32> = (0..keys.len() as u32).collect();
            let t = ShardedCsrTable::build(&cfg, &keys, &values).unwrap();
            let mut oracle: HashMap<u32, Vec<u32>> = HashMap::new();
            for (&k, &v) in keys.iter().zip(&values) {
                oracle.entry(k).or_default().push(v);
            }
            let mut all = hashtile::FindAll::default();
            for (round, n) in [20_000usize, 7, 4_000, 1, 12_000].into_iter().enumerate() {
                // Stored keys and keys never stored, mixed.
                let queries: Vec<u32> = (0..n)
                    .map(|i| match i % 3 {
                        0 => keys[(i * 7 + round) % keys.len()],
                        _ => random_keys::<u32>(1, u64::MAX, (i + round * 100_000) as u64)[0],
                    })
                    .collect();
                let counts = t.count(&queries).unwrap();
                t.find_all_into(&queries, &mut all).unwrap();
                assert_eq!(all.len(), n, "{what} round {round}: find_all answers");
                for (i, q) in queries.iter().enumerate() {
                    let mut want = oracle.get(q).cloned().unwrap_or_default();
                    want.sort_unstable();
                    let mut got = all.get(i).unwrap().to_vec();
                    got.sort_unstable();
                    assert_eq!(
                        counts[i] as usize,
                        want.len(),
                        "{what} round {round}: count {i}"
                    );
                    assert_eq!(got, want, "{what} round {round}: find_all {i}");
                }
            }
        }
    }
}
