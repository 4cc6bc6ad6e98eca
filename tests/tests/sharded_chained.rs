//! `ShardedChainedTable` (issue 31: the chained multimap over shards) against a multimap oracle (`HashMap` of
//! each key's values) on every backend present (CI: the CPU and lavapipe, N shards side by side; the GPU
//! machine: one shard per GPU as well): random rounds of inserts with many copies, counts, `find_all` runs in
//! the caller's order, finds, replaces, erases of one copy and of all, mixed batches and flushes; and the
//! adversarial batches: every key in one shard, empty shards, an empty batch, a reserved key's index (a typed
//! error that changes no shard), length mismatches, and a table called from a new thread each time.

use hashtile::chained::ChainedConfig;
use hashtile::{
    Backend, BackendChoice, Error, Op, Outcome, ShardedChainedTable, ShardedConfig, Shards,
};
use hashtile_tests::backends::present_backends;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

/// A multimap oracle: each key's values (order unspecified).
type Multi = HashMap<u32, Vec<u32>>;

fn config(backend: Backend, keys: usize, shards: Shards) -> ShardedConfig<ChainedConfig> {
    ShardedConfig {
        shards,
        ..ShardedConfig::new(
            ChainedConfig::for_keys(keys, 0.6)
                .batch_keys(1 << 11)
                .backend(BackendChoice::Exactly(backend)),
        )
    }
}

/// Spread keys from an index, never a reserved one.
fn key(i: u32) -> u32 {
    hashtile::hash::fmix32(i ^ 0x5c4a) >> 1
}

fn sorted(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v
}

/// The table holds exactly the oracle's pairs (every shard only its own keys), and counts, `find_all`, `find`
/// and `find_into` answer `probe` as the oracle does, in the caller's order.
fn agrees(t: &mut ShardedChainedTable<u32, u32>, o: &Multi, probe: &[u32], what: &str) {
    let stats = t.check().unwrap_or_else(|e| panic!("{what}: {e}"));
    let len: usize = o.values().map(Vec::len).sum();
    assert_eq!((t.len(), stats.live), (len, len), "{what}: len");
    let mut want: Vec<(u32, u32)> = o
        .iter()
        .flat_map(|(k, vs)| vs.iter().map(move |v| (*k, *v)))
        .collect();
    want.sort_unstable();
    assert_eq!(sorted_pairs(t.pairs().unwrap()), want, "{what}: pairs");
    let none = Vec::new();
    let of = |k: &u32| o.get(k).unwrap_or(&none);
    let counts = t.count(probe).unwrap();
    let all = t.find_all(probe).unwrap();
    let found = t.find(probe).unwrap();
    let mut into = vec![7u32; probe.len()];
    t.find_into(probe, &mut into).unwrap();
    assert_eq!(all.len(), probe.len(), "{what}: find_all answers");
    for (i, k) in probe.iter().enumerate() {
        let vs = of(k);
        assert_eq!(
            counts[i] as usize,
            vs.len(),
            "{what}: count of {k} (query {i})"
        );
        assert_eq!(
            sorted(all.get(i).unwrap().to_vec()),
            sorted(vs.clone()),
            "{what}: find_all of {k} (query {i})"
        );
        match found[i] {
            None => assert!(vs.is_empty(), "{what}: find missed {k}"),
            Some(v) => assert!(vs.contains(&v), "{what}: find of {k} gave {v}"),
        }
        assert_eq!(
            found[i].unwrap_or(u32::MAX),
            into[i],
            "{what}: find_into of {k}"
        );
    }
}

fn sorted_pairs(mut p: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    p.sort_unstable();
    p
}

/// Random rounds on `shards` shards of `backend`: inserts of a small universe's keys with copies, replaces of
/// keys that hold at most one copy, erases of single copies and of every copy, mixed batches of distinct keys.
fn rounds(backend: Backend, shards: Shards, seed: u64) {
    let what = format!("{backend} {shards:?}");
    let mut t: ShardedChainedTable<u32, u32> =
        ShardedChainedTable::new(config(backend, 20_000, shards)).unwrap();
    let mut o = Multi::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let universe = 3000u32;
    let probe: Vec<u32> = (0..universe + 200).map(key).collect();
    for round in 0..4 {
        // Inserts: keys drawn with repeats, so a key gets several copies in one batch.
        let n = 3000 + round * 500;
        let keys: Vec<u32> = (0..n).map(|_| key(rng.random_range(0..universe))).collect();
        let values: Vec<u32> = (0..n).map(|_| rng.random_range(0..1_000_000)).collect();
        t.insert(&keys, &values).unwrap();
        for (k, v) in keys.iter().zip(&values) {
            o.entry(*k).or_default().push(*v);
        }
        agrees(&mut t, &o, &probe, &format!("{what} round {round}: insert"));
        // Replaces: distinct keys with at most one copy (the first copy is the only one).
        let mut rk: Vec<u32> = (0..universe + 200)
            .map(key)
            .filter(|k| o.get(k).is_none_or(|v| v.len() <= 1))
            .filter(|_| rng.random_bool(0.3))
            .collect();
        rk.dedup();
        let rv: Vec<u32> = rk.iter().map(|k| k ^ 0x77).collect();
        let new = rk.iter().filter(|k| !o.contains_key(k)).count();
        assert_eq!(
            t.replace(&rk, &rv).unwrap(),
            new,
            "{what}: replace's new keys"
        );
        for (k, v) in rk.iter().zip(&rv) {
            o.insert(*k, vec![*v]);
        }
        agrees(
            &mut t,
            &o,
            &probe,
            &format!("{what} round {round}: replace"),
        );
        // Erase one copy of single-copy keys (and absent keys), then every copy of others.
        let ek: Vec<u32> = (0..universe + 200)
            .map(key)
            .filter(|k| o.get(k).is_none_or(|v| v.len() == 1))
            .filter(|_| rng.random_bool(0.2))
            .collect();
        let erased = ek.iter().filter(|k| o.contains_key(k)).count();
        assert_eq!(t.erase(&ek).unwrap(), erased, "{what}: erase");
        for k in &ek {
            o.remove(k);
        }
        let ak: Vec<u32> = (0..universe)
            .map(key)
            .filter(|_| rng.random_bool(0.1))
            .collect();
        let mut ak_distinct = ak.clone();
        ak_distinct.sort_unstable();
        ak_distinct.dedup();
        let gone: usize = ak_distinct
            .iter()
            .map(|k| o.get(k).map_or(0, Vec::len))
            .sum();
        assert_eq!(t.erase_all(&ak).unwrap(), gone, "{what}: erase_all");
        for k in &ak_distinct {
            o.remove(k);
        }
        agrees(&mut t, &o, &probe, &format!("{what} round {round}: erase"));
        // A mixed batch of distinct keys (they commute): outcomes in batch order.
        let mut mk: Vec<u32> = (0..universe + 200)
            .map(key)
            .filter(|k| o.get(k).is_none_or(|v| v.len() <= 1))
            .filter(|_| rng.random_bool(0.2))
            .collect();
        mk.dedup();
        let mut ops = Vec::new();
        let mut want = Vec::new();
        for (i, k) in mk.iter().enumerate() {
            let (op, out) = match (i % 4, o.get(k).map(|v| v[0])) {
                (0, _) => {
                    o.entry(*k).or_default().push(i as u32);
                    (Op::Insert(*k, i as u32), Outcome::Inserted)
                }
                (1, Some(_)) => {
                    o.insert(*k, vec![i as u32]);
                    (Op::Replace(*k, i as u32), Outcome::Updated)
                }
                (1, None) => {
                    o.insert(*k, vec![i as u32]);
                    (Op::Replace(*k, i as u32), Outcome::Inserted)
                }
                (2, Some(_)) => {
                    o.remove(k);
                    (Op::Erase(*k), Outcome::Erased)
                }
                (2, None) => (Op::Erase(*k), Outcome::NotFound),
                (_, Some(v)) => (Op::Find(*k), Outcome::Found(v)),
                (_, None) => (Op::Find(*k), Outcome::NotFound),
            };
            ops.push(op);
            want.push(out);
        }
        assert_eq!(t.apply(&ops).unwrap(), want, "{what} round {round}: apply");
        agrees(&mut t, &o, &probe, &format!("{what} round {round}: apply"));
    }
    t.flush().unwrap();
    let stats = t.check().unwrap();
    assert_eq!(stats.tombstones, 0, "{what}: flush drops every tombstone");
    agrees(&mut t, &o, &probe, &format!("{what}: flush"));
}

#[test]
fn random_rounds_match_the_multimap() {
    for b in present_backends() {
        for (i, shards) in [Shards::Count(1), Shards::Count(3), Shards::Count(4)]
            .into_iter()
            .enumerate()
        {
            rounds(b, shards, 11 + i as u64);
        }
        rounds(b, Shards::AllDevices, 7);
    }
}

/// Every key in one shard (the others empty), a key with a thousand copies, an empty batch, and batches whose
/// keys all miss.
#[test]
fn one_shard_full_the_others_empty() {
    for b in present_backends() {
        let mut t: ShardedChainedTable<u32, u32> =
            ShardedChainedTable::new(config(b, 10_000, Shards::Count(4))).unwrap();
        let keys: Vec<u32> = (0..40_000)
            .map(key)
            .filter(|&k| t.shard_of(k) == 2)
            .take(2000)
            .collect();
        let mut o = Multi::new();
        let mut batch = keys.clone();
        batch.extend(std::iter::repeat_n(keys[0], 1000));
        let values: Vec<u32> = (0..batch.len() as u32).collect();
        t.insert(&batch, &values).unwrap();
        for (k, v) in batch.iter().zip(&values) {
            o.entry(*k).or_default().push(*v);
        }
        for s in [0, 1, 3] {
            assert!(
                t.shard(s).is_empty(),
                "{b}: shard {s} holds a key routed elsewhere"
            );
        }
        let absent: Vec<u32> = (40_000..40_100).map(key).collect();
        let mut probe = absent.clone();
        probe.extend_from_slice(&keys[..100]);
        agrees(&mut t, &o, &probe, &format!("{b}: one shard"));
        assert_eq!(t.count(&absent).unwrap(), vec![0; absent.len()]);
        assert!(t.find_all(&absent).unwrap().values.is_empty());
        t.insert(&[], &[]).unwrap();
        assert_eq!(t.erase_all(&[]).unwrap(), 0);
        assert_eq!(t.find_all(&[]).unwrap().len(), 0);
        assert_eq!(t.apply(&[]).unwrap(), vec![]);
        assert_eq!(t.erase_all(&keys[..1]).unwrap(), 1001);
        o.remove(&keys[0]);
        agrees(&mut t, &o, &probe, &format!("{b}: after erase_all"));
    }
}

/// A reserved key is a typed error naming its index in the caller's batch, and no shard changes; so are
/// length mismatches.
#[test]
fn refused_batches_change_no_shard() {
    for b in present_backends() {
        let mut t: ShardedChainedTable<u32, u32> =
            ShardedChainedTable::new(config(b, 10_000, Shards::Count(3))).unwrap();
        t.insert(&[key(1), key(2)], &[1, 2]).unwrap();
        let mut keys: Vec<u32> = (10..5000).map(key).collect();
        keys[3000] = u32::MAX;
        let values = vec![5u32; keys.len()];
        assert!(matches!(
            t.insert(&keys, &values),
            Err(Error::SentinelKey { index: 3000 })
        ));
        keys[3000] = u32::MAX - 1;
        assert!(matches!(
            t.insert(&keys, &values),
            Err(Error::TombstoneKey { index: 3000 })
        ));
        assert!(matches!(
            t.replace(&keys, &values),
            Err(Error::TombstoneKey { index: 3000 })
        ));
        assert!(matches!(
            t.erase_all(&keys),
            Err(Error::TombstoneKey { index: 3000 })
        ));
        let ops: Vec<Op<u32, u32>> = keys.iter().map(|&k| Op::Insert(k, 1)).collect();
        assert!(matches!(
            t.apply(&ops),
            Err(Error::TombstoneKey { index: 3000 })
        ));
        assert!(matches!(
            t.insert(&keys[..5], &values[..4]),
            Err(Error::LengthMismatch { .. })
        ));
        let mut out = vec![0u32; 3];
        assert!(matches!(
            t.find_into(&keys[..4], &mut out),
            Err(Error::LengthMismatch { .. })
        ));
        assert_eq!(t.len(), 2, "{b}: a refused batch changed a shard");
        let mut o = Multi::new();
        o.insert(key(1), vec![1]);
        o.insert(key(2), vec![2]);
        agrees(
            &mut t,
            &o,
            &[key(1), key(2), key(3)],
            &format!("{b}: refused"),
        );
    }
}

/// A table moved to a new thread for each call (each shard runs on its table's own CubeCL stream).
#[test]
fn calls_from_new_threads() {
    for b in present_backends() {
        let mut t: ShardedChainedTable<u32, u32> =
            ShardedChainedTable::new(config(b, 20_000, Shards::Count(2))).unwrap();
        let mut o = Multi::new();
        for round in 0..6u32 {
            let keys: Vec<u32> = (0..2000).map(|i| key(i % 700 + round * 100)).collect();
            let values: Vec<u32> = (0..2000).map(|i| i + round).collect();
            for (k, v) in keys.iter().zip(&values) {
                o.entry(*k).or_default().push(*v);
            }
            t = std::thread::spawn(move || {
                t.insert(&keys, &values).unwrap();
                t
            })
            .join()
            .unwrap();
        }
        let probe: Vec<u32> = (0..1300).map(key).collect();
        let t2 = std::thread::spawn(move || {
            let counts = t.count(&probe).unwrap();
            (t, probe, counts)
        });
        let (mut t, probe, counts) = t2.join().unwrap();
        for (k, c) in probe.iter().zip(&counts) {
            assert_eq!(
                *c as usize,
                o.get(k).map_or(0, Vec::len),
                "{b}: count of {k}"
            );
        }
        agrees(&mut t, &o, &probe, &format!("{b}: threads"));
    }
}

/// Over ranks: refused with a typed error (one process holds every shard).
#[test]
fn ranks_are_refused() {
    let r = hashtile::Ranks::new(
        0,
        2,
        hashtile::Rendezvous::File(std::env::temp_dir().join("hashtile-chained-ranks")),
    );
    let cfg = config(Backend::Cpu, 1000, Shards::AllDevices).ranks(r);
    assert!(matches!(
        ShardedChainedTable::<u32, u32>::new(cfg),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn stored_all_ones_values_are_found_and_staging_is_kept_across_batch_sizes() {
    for backend in present_backends() {
        for shards in [Shards::Count(2), Shards::Count(3)] {
            let what = format!("{backend} {shards:?}");
            let mut t: ShardedChainedTable<u32, u32> =
                ShardedChainedTable::new(config(backend, 40_000, shards)).unwrap();
            let mut o = Multi::new();
            // A large batch, then a small one, then a large one again: each call's parts are the first keys of
            // buffers that an earlier, larger call filled further.
            for (round, n) in [20_000u32, 300, 9_000, 1].into_iter().enumerate() {
                let base = round as u32 * 50_000;
                let keys: Vec<u32> = (base..base + n).map(key).collect();
                // Every third value is the all-ones word, which only presence bits tell from an absent key.
                let values: Vec<u32> = (0..n)
                    .map(|i| if i % 3 == 0 { u32::MAX } else { i })
                    .collect();
                t.insert(&keys, &values).unwrap();
                for (k, v) in keys.iter().zip(&values) {
                    o.entry(*k).or_default().push(*v);
                }
                let probe: Vec<u32> = (base.saturating_sub(500)..base + n + 500)
                    .map(key)
                    .collect();
                let found = t.find(&probe).unwrap();
                for (k, f) in probe.iter().zip(&found) {
                    assert_eq!(
                        *f,
                        o.get(k).map(|v| v[0]),
                        "{what} round {round}: find of {k}"
                    );
                }
                agrees(&mut t, &o, &probe, &format!("{what} round {round}"));
            }
        }
    }
}

/// Lookups from several threads at once on one table (`&self` calls: finds, counts, `find_all`): each call holds
/// its shards' staging buffers from its split to its join.
#[test]
fn concurrent_lookups_from_several_threads() {
    for backend in present_backends() {
        let mut t: ShardedChainedTable<u32, u32> =
            ShardedChainedTable::new(config(backend, 40_000, Shards::Count(3))).unwrap();
        let keys: Vec<u32> = (0..15_000u32).map(key).collect();
        // Every key twice: values `k` and `k ^ 1`.
        let twice: Vec<u32> = keys.iter().chain(&keys).copied().collect();
        let values: Vec<u32> = (keys.iter().copied())
            .chain(keys.iter().map(|k| k ^ 1))
            .collect();
        t.insert(&twice, &values).unwrap();
        let t = &t;
        std::thread::scope(|sc| {
            for th in 0..4usize {
                let keys = &keys;
                sc.spawn(move || {
                    for round in 0..5usize {
                        let n = 400 + (th * 2500 + round * 1300) % 7000;
                        let q: Vec<u32> = (0..n)
                            .map(|i| match i % 3 {
                                // Never stored: the stored keys' top bit is clear (`key`).
                                0 => (key((th * n + i) as u32) | 0x8000_0000) & !3,
                                _ => keys[(i * 7 + th * 31 + round) % keys.len()],
                            })
                            .collect();
                        let counts = t.count(&q).unwrap();
                        let found = t.find(&q).unwrap();
                        let all = t.find_all(&q).unwrap();
                        for (i, k) in q.iter().enumerate() {
                            let present = i % 3 != 0;
                            let what = format!("{backend} thread {th} round {round}: query {i}");
                            assert_eq!(counts[i], if present { 2 } else { 0 }, "{what}: count");
                            match found[i] {
                                Some(v) => {
                                    assert!(present && (v == *k || v == k ^ 1), "{what}: find")
                                }
                                None => assert!(!present, "{what}: find missed"),
                            }
                            let want = if present { vec![k ^ 1, *k] } else { vec![] };
                            let mut want = want;
                            want.sort_unstable();
                            assert_eq!(
                                sorted(all.get(i).unwrap().to_vec()),
                                want,
                                "{what}: find_all"
                            );
                        }
                    }
                });
            }
        });
    }
}
