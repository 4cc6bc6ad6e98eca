//! Chained (SlabHash) tables against simple oracles: a `HashMap<K, Vec<V>>` multimap (copies in insertion order)
//! for multimap inserts, a `HashMap<K, V>` for replace, over long random sequences of batches with erases and
//! re-inserts, flushes in the middle, growth past the initial slab pool, reserved keys, and concurrent mixed
//! batches (the SlabHash paper's operation mixes) with the table's invariants checked after every batch.

use hashtile::chained::{ChainStats, ChainedConfig, ChainedTable, Op, Outcome};
use hashtile::{Backend, BackendChoice, Error, Key, Value};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::{HashMap, HashSet};

fn table<K: Key, V: Value>(b: Backend, n: usize, load: f64, pool: u32) -> ChainedTable<K, V> {
    let cfg = ChainedConfig::for_keys(n, load)
        .pool_slabs(pool)
        .backend(BackendChoice::Exactly(b));
    ChainedTable::new(cfg).unwrap()
}

/// The backends a table is tested on: the CPU, and each GPU present.
fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Cpu];
    b.extend(
        [Backend::Vulkan, Backend::Cuda]
            .into_iter()
            .filter(|&g| common::present(g)),
    );
    b
}

/// `n` distinct keys drawn from `0..universe` (never a reserved key).
fn distinct_keys<K: Key>(rng: &mut StdRng, n: usize, universe: u64) -> Vec<K> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let k = rng.random_range(0..universe);
        if seen.insert(k) {
            out.push(K::narrow(k));
        }
    }
    out
}

/// The table holds exactly the multimap: every key's values in insertion order (`find_all`), its count, its
/// first value (`find`), and the invariants.
fn same_as_multimap<K: Key, V: Value>(
    t: &mut ChainedTable<K, V>,
    oracle: &HashMap<K, Vec<V>>,
    absent: &[K],
) -> ChainStats {
    let stats = t.check().expect("invariants");
    let live: usize = oracle.values().map(Vec::len).sum();
    assert_eq!(t.len(), live);
    assert_eq!(stats.live, live);
    let keys: Vec<K> = oracle
        .keys()
        .copied()
        .chain(absent.iter().copied())
        .collect();
    let all = t.find_all(&keys).unwrap();
    let counts = t.count(&keys).unwrap();
    let first = t.find(&keys).unwrap();
    for (i, k) in keys.iter().enumerate() {
        let want: &[V] = oracle.get(k).map(Vec::as_slice).unwrap_or(&[]);
        assert_eq!(
            &all.values[all.offsets[i]..all.offsets[i + 1]],
            want,
            "find_all"
        );
        assert_eq!(counts[i] as usize, want.len(), "count");
        assert_eq!(first[i], want.first().copied(), "find");
    }
    stats
}

fn multimap_sequence<K: Key, V: Value>(b: Backend, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    // Few lists and a small pool: lists grow long, and the pool grows many times.
    let mut t: ChainedTable<K, V> = table(b, 2000, 4.0, 8);
    let initial_pool = t.check().unwrap().pool_slabs;
    let mut oracle: HashMap<K, Vec<V>> = HashMap::new();
    let universe = 3000u64;
    let mut serial = 0u64;
    for round in 0..40 {
        // A batch of distinct keys per call (the order of one key's copies within a batch is unspecified),
        // repeated across calls: keys collect copies in a known order.
        let n = rng.random_range(0..400);
        let keys: Vec<K> = distinct_keys(&mut rng, n, universe);
        let values: Vec<V> = keys
            .iter()
            .map(|_| {
                serial += 1;
                V::narrow(serial)
            })
            .collect();
        t.insert(&keys, &values).unwrap();
        for (k, v) in keys.iter().zip(&values) {
            oracle.entry(*k).or_default().push(*v);
        }
        // Erase the first copy of some keys, every copy of others (some absent).
        let erase: Vec<K> = distinct_keys(&mut rng, 60, universe);
        let erased = t.erase(&erase).unwrap();
        let mut want = 0;
        for k in &erase {
            if let Some(v) = oracle.get_mut(k).filter(|v| !v.is_empty()) {
                v.remove(0);
                want += 1;
            }
        }
        assert_eq!(erased, want, "erase count");
        let erase_all: Vec<K> = distinct_keys(&mut rng, 30, universe);
        let erased = t.erase_all(&erase_all).unwrap();
        let want: usize = erase_all
            .iter()
            .map(|k| oracle.remove(k).map_or(0, |v| v.len()))
            .sum();
        assert_eq!(erased, want, "erase_all count");
        oracle.retain(|_, v| !v.is_empty());
        if round % 10 == 5 {
            // Flush in the middle: tombstones dropped, slabs freed, the same contents.
            let before = t.check().unwrap();
            let freed = t.flush().unwrap();
            let after = t.check().unwrap();
            assert_eq!(after.tombstones, 0);
            assert_eq!(after.list_slabs + freed, before.list_slabs);
            assert_eq!(after.free_slabs, before.free_slabs + freed);
        }
        let absent = [K::narrow(universe + 1), K::narrow(universe + 7)];
        same_as_multimap(&mut t, &oracle, &absent);
    }
    let stats = t.check().unwrap();
    assert!(
        stats.pool_slabs > initial_pool,
        "the pool grew past its initial {initial_pool} slabs"
    );
}

#[test]
fn multimap_sequences_match_the_multimap() {
    for b in backends() {
        multimap_sequence::<u32, u32>(b, 1);
        multimap_sequence::<u64, u64>(b, 2);
        multimap_sequence::<u32, u64>(b, 3);
        multimap_sequence::<u64, u32>(b, 4);
    }
}

#[test]
fn replace_sequences_match_the_hashmap() {
    for b in backends() {
        replace_sequence::<u32, u32>(b);
        replace_sequence::<u64, u64>(b);
    }
}

/// Tests written on `u32` keys and values run on any widths through these maps: a 64-bit key or value puts
/// the number in its high half as well (all 64 bits in play), and the inverse takes it back.
fn key_of<K: Key>(k: u32) -> K {
    K::narrow(if K::BITS == 64 {
        (k as u64) << 32 | 0x5a5a
    } else {
        k as u64
    })
}
fn value_of<V: Value>(v: u32) -> V {
    V::narrow(if V::BITS == 64 {
        (v as u64) << 32 | v as u64
    } else {
        v as u64
    })
}
fn value_back<V: Value>(v: V) -> u32 {
    v.widen() as u32
}

/// [`ChainedTable::apply`] of `u32` operations on a table of any widths, outcomes as `u32`.
fn apply_u32<K: Key, V: Value>(
    t: &mut ChainedTable<K, V>,
    ops: &[Op<u32, u32>],
) -> Vec<Outcome<u32>> {
    let wide: Vec<Op<K, V>> = ops
        .iter()
        .map(|o| match *o {
            Op::Insert(k, v) => Op::Insert(key_of(k), value_of(v)),
            Op::Replace(k, v) => Op::Replace(key_of(k), value_of(v)),
            Op::Erase(k) => Op::Erase(key_of(k)),
            Op::Find(k) => Op::Find(key_of(k)),
        })
        .collect();
    t.apply(&wide)
        .unwrap()
        .into_iter()
        .map(|o| match o {
            Outcome::Found(v) => Outcome::Found(value_back(v)),
            Outcome::Inserted => Outcome::Inserted,
            Outcome::Updated => Outcome::Updated,
            Outcome::Erased => Outcome::Erased,
            Outcome::NotFound => Outcome::NotFound,
        })
        .collect()
}

fn keys_of<K: Key>(keys: &[u32]) -> Vec<K> {
    keys.iter().map(|&k| key_of(k)).collect()
}

fn replace_sequence<K: Key, V: Value>(b: Backend) {
    let mut rng = StdRng::seed_from_u64(5);
    let mut t: ChainedTable<K, V> = table(b, 1000, 2.0, 4);
    let mut oracle: HashMap<u32, u32> = HashMap::new();
    for round in 0..40 {
        // Keys repeat within a batch: one of the key's values wins.
        let keys: Vec<u32> = (0..rng.random_range(0..500))
            .map(|_| rng.random_range(0..1500))
            .collect();
        let values: Vec<u32> = (0..keys.len()).map(|_| rng.random()).collect();
        let wide_values: Vec<V> = values.iter().map(|&v| value_of(v)).collect();
        let fresh = t.replace(&keys_of(&keys), &wide_values).unwrap();
        let mut allowed: HashMap<u32, Vec<u32>> = HashMap::new();
        for (k, v) in keys.iter().zip(&values) {
            allowed.entry(*k).or_default().push(*v);
        }
        let new_keys = allowed.keys().filter(|k| !oracle.contains_key(k)).count();
        assert_eq!(fresh, new_keys, "new keys");
        let ks: Vec<u32> = allowed.keys().copied().collect();
        for (k, got) in ks.iter().zip(t.find(&keys_of(&ks)).unwrap()) {
            let got = value_back(got.expect("replaced key present"));
            assert!(allowed[k].contains(&got), "a value of this batch wins");
            oracle.insert(*k, got);
        }
        let erase: Vec<u32> = (0..100).map(|_| rng.random_range(0..1500)).collect();
        let mut unique = erase.clone();
        unique.sort();
        unique.dedup();
        let want = unique.iter().filter(|k| oracle.remove(k).is_some()).count();
        assert_eq!(t.erase(&keys_of(&erase)).unwrap(), want);
        if round == 20 {
            t.flush().unwrap();
        }
        let stats = t.check().unwrap();
        assert_eq!(stats.live, oracle.len());
        let counts = t
            .count(&keys_of(&oracle.keys().copied().collect::<Vec<_>>()))
            .unwrap();
        assert!(counts.iter().all(|&c| c == 1), "no key stored twice");
        let multimap: HashMap<K, Vec<V>> = oracle
            .iter()
            .map(|(&k, &v)| (key_of(k), vec![value_of(v)]))
            .collect();
        same_as_multimap(&mut t, &multimap, &[key_of(2000), key_of(3000)]);
    }
}

#[test]
fn heavy_duplicates_and_one_list() {
    for b in backends() {
        heavy_duplicates(b);
    }
}

fn heavy_duplicates(b: Backend) {
    // One bucket: every key in one list of many slabs; 1000 copies of one key.
    let cfg = ChainedConfig {
        buckets: 1,
        ..ChainedConfig::for_keys(10, 1.0)
    }
    .backend(BackendChoice::Exactly(b));
    let mut t: ChainedTable<u32, u32> = ChainedTable::new(cfg).unwrap();
    let keys = vec![7u32; 1000];
    let values: Vec<u32> = (0..1000).collect();
    t.insert(&keys, &values).unwrap();
    t.insert(&[8, 9], &[80, 90]).unwrap();
    assert_eq!(t.count(&[7, 8, 9, 10]).unwrap(), vec![1000, 1, 1, 0]);
    let mut all = t.find_all(&[7]).unwrap().values;
    all.sort();
    assert_eq!(all, values);
    let stats = t.check().unwrap();
    assert_eq!(stats.list_slabs, 1002usize.div_ceil(15) - 1);
    assert_eq!(t.erase_all(&[7]).unwrap(), 1000);
    assert_eq!(t.find(&[8, 9, 7]).unwrap(), vec![Some(80), Some(90), None]);
    assert_eq!(t.flush().unwrap(), stats.list_slabs);
    let after = t.check().unwrap();
    assert_eq!((after.live, after.tombstones, after.list_slabs), (2, 0, 0));
}

#[test]
fn empty_inputs_and_empty_table() {
    let mut t: ChainedTable<u64, u64> = table(Backend::Cpu, 100, 0.5, 32);
    t.insert(&[], &[]).unwrap();
    assert_eq!(t.replace(&[], &[]).unwrap(), 0);
    assert_eq!(t.erase(&[1, 2]).unwrap(), 0);
    assert_eq!(t.find(&[1]).unwrap(), vec![None]);
    let all = t.find_all(&[]).unwrap();
    assert_eq!((all.offsets, all.values.len()), (vec![0], 0));
    assert_eq!(t.apply(&[]).unwrap(), vec![]);
    assert_eq!(t.flush().unwrap(), 0);
    assert!(t.is_empty());
}

#[test]
fn reserved_keys_are_typed_errors_and_change_nothing() {
    for b in backends() {
        reserved_keys(b);
    }
}

fn reserved_keys(b: Backend) {
    let mut t: ChainedTable<u32, u32> = table(b, 100, 0.5, 32);
    t.insert(&[1, 2], &[10, 20]).unwrap();
    let tomb = u32::MAX - 1;
    assert_eq!(
        t.insert(&[3, u32::MAX], &[0, 0]),
        Err(Error::SentinelKey { index: 1 })
    );
    assert_eq!(
        t.replace(&[tomb], &[0]),
        Err(Error::TombstoneKey { index: 0 })
    );
    assert_eq!(t.erase(&[1, tomb]), Err(Error::TombstoneKey { index: 1 }));
    assert_eq!(
        t.erase_all(&[u32::MAX]),
        Err(Error::SentinelKey { index: 0 })
    );
    assert!(t.find(&[tomb]).is_err());
    assert!(t.count(&[u32::MAX]).is_err());
    assert!(t.find_all(&[tomb]).is_err());
    assert_eq!(
        t.apply(&[Op::Insert(4, 4), Op::Find(tomb)]),
        Err(Error::TombstoneKey { index: 1 })
    );
    assert!(matches!(
        t.insert(&[1], &[]),
        Err(Error::LengthMismatch { .. })
    ));
    let mut t64: ChainedTable<u64, u32> = table(b, 100, 0.5, 32);
    assert_eq!(
        t64.insert(&[u64::MAX - 1], &[0]),
        Err(Error::TombstoneKey { index: 0 })
    );
    // Nothing changed: the erase before the tombstone did not run either.
    assert_eq!(
        t.find(&[1, 2, 3, 4]).unwrap(),
        vec![Some(10), Some(20), None, None]
    );
    assert_eq!(t.len(), 2);
    t.check().unwrap();
}

#[test]
fn wide_tables_go_where_narrow_ones_do() {
    // 64-bit keys or values live on a GPU like 32-bit ones (the wide slab layout): `Auto` picks the same
    // backend for every width, and a GPU asked for exactly is a typed error only where it is absent.
    let narrow = ChainedTable::<u32, u32>::new(ChainedConfig::for_keys(10, 0.5)).unwrap();
    let wide = ChainedTable::<u64, u64>::new(ChainedConfig::for_keys(10, 0.5)).unwrap();
    assert_eq!(wide.backend(), narrow.backend());
    for g in [Backend::Cuda, Backend::Vulkan] {
        let cfg = ChainedConfig::for_keys(10, 0.5).backend(BackendChoice::Exactly(g));
        let t = ChainedTable::<u64, u32>::new(cfg);
        if common::present(g) {
            assert_eq!(t.unwrap().backend(), g);
        } else {
            assert!(matches!(t, Err(Error::BackendUnavailable { .. })));
        }
    }
}

/// The SlabHash paper's operation mixes Γ = (insert, erase, find present, find absent).
const MIXES: [[f64; 4]; 3] = [
    [0.5, 0.5, 0.0, 0.0],
    [0.2, 0.2, 0.3, 0.3],
    [0.1, 0.1, 0.4, 0.4],
];

/// One operation of a mixed batch and what it returned.
type OpAndOutcome = (Op<u32, u32>, Outcome<u32>);

/// A mixed batch of `n` operations drawn by `mix`, in replace (`unique`) or multimap mode, over keys below
/// `universe` (present ones drawn from `present`).
fn mixed_batch(
    rng: &mut StdRng,
    n: usize,
    mix: [f64; 4],
    unique: bool,
    present: &[u32],
    universe: u32,
) -> Vec<Op<u32, u32>> {
    (0..n)
        .map(|_| {
            let r: f64 = rng.random();
            let any = rng.random_range(0..universe);
            let known = if present.is_empty() {
                any
            } else {
                present[rng.random_range(0..present.len())]
            };
            if r < mix[0] {
                let v = rng.random();
                if unique {
                    Op::Replace(any, v)
                } else {
                    Op::Insert(any, v)
                }
            } else if r < mix[0] + mix[1] {
                Op::Erase(if rng.random_bool(0.7) { known } else { any })
            } else if r < mix[0] + mix[1] + mix[2] {
                Op::Find(known)
            } else {
                Op::Find(universe + rng.random_range(0..universe))
            }
        })
        .collect()
}

#[test]
fn concurrent_mixed_batches_keep_the_invariants() {
    for b in backends() {
        mixed_batches::<u32, u32>(b);
        mixed_batches::<u64, u64>(b);
    }
}

/// Concurrent mixed batches (on a GPU: one launch each, one warp mixing inserts, erases and finds), the
/// outcomes checked per key against the table before and after, and the invariants after every batch.
fn mixed_batches<K: Key, V: Value>(b: Backend) {
    let universe = 4000u32;
    for (m, mix) in MIXES.iter().enumerate() {
        for unique in [true, false] {
            let mut rng = StdRng::seed_from_u64(100 + m as u64 + 10 * unique as u64);
            let mut t: ChainedTable<K, V> = table(b, 3000, 1.0, 16);
            // Per key, the values stored (replace mode: at most one).
            let mut oracle: HashMap<u32, Vec<u32>> = HashMap::new();
            for batch in 0..30 {
                let present: Vec<u32> = oracle.keys().copied().collect();
                let ops = mixed_batch(&mut rng, 800, *mix, unique, &present, universe);
                let out = apply_u32(&mut t, &ops);
                // Per key: the batch's operations and outcomes.
                let mut per: HashMap<u32, Vec<OpAndOutcome>> = HashMap::new();
                for (op, o) in ops.iter().zip(&out) {
                    let k = match *op {
                        Op::Insert(k, _) | Op::Replace(k, _) | Op::Erase(k) | Op::Find(k) => k,
                    };
                    per.entry(k).or_default().push((*op, *o));
                }
                // Every touched key's copies now, in one call.
                let touched: Vec<u32> = per.keys().copied().collect();
                let all = t.find_all(&keys_of(&touched)).unwrap();
                for (i, k) in touched.into_iter().enumerate() {
                    let list = &per[&k];
                    let before = oracle.get(&k).cloned().unwrap_or_default();
                    let written: Vec<u32> = list
                        .iter()
                        .filter_map(|(op, _)| match *op {
                            Op::Insert(_, v) | Op::Replace(_, v) => Some(v),
                            _ => None,
                        })
                        .collect();
                    let erased = list.iter().filter(|(_, o)| *o == Outcome::Erased).count();
                    let mut now: Vec<u32> = all.values[all.offsets[i]..all.offsets[i + 1]]
                        .iter()
                        .map(|&v| value_back(v))
                        .collect();
                    if unique {
                        assert!(now.len() <= 1, "key {k} stored twice in replace mode");
                    } else {
                        // Multimap: nothing lost, nothing made up.
                        assert_eq!(
                            now.len() + erased,
                            before.len() + written.len(),
                            "key {k}: copies before {before:?}, written {written:?}, erased {erased}, now {now:?}"
                        );
                    }
                    // Every value now stored was stored before or written by this batch.
                    for v in &now {
                        assert!(
                            before.contains(v) || written.contains(v),
                            "key {k}: {v} from nowhere"
                        );
                    }
                    // Untouched by writes: whatever finds returned was there before.
                    for (op, o) in list {
                        if let (Op::Find(_), Outcome::Found(v)) = (op, o) {
                            assert!(before.contains(v) || written.contains(v));
                        }
                        if let (Op::Find(_), Outcome::NotFound) = (op, o) {
                            assert!(
                                before.is_empty() || erased > 0 || unique && !written.is_empty()
                            );
                        }
                    }
                    if unique && erased == 0 && !written.is_empty() {
                        assert_eq!(now.len(), 1, "key {k}: replaced and not erased, so present");
                    }
                    if erased == 0 && written.is_empty() {
                        now.sort();
                        let mut b = before.clone();
                        b.sort();
                        assert_eq!(now, b, "key {k}: only found, so unchanged");
                    }
                    if now.is_empty() {
                        oracle.remove(&k);
                    } else {
                        oracle.insert(k, now);
                    }
                }
                let stats = t.check().unwrap_or_else(|e| panic!("batch {batch}: {e}"));
                assert_eq!(stats.live, oracle.values().map(Vec::len).sum::<usize>());
                if batch % 10 == 9 {
                    t.flush().unwrap();
                    t.check().unwrap();
                }
            }
        }
    }
}

mod common;

/// The GPU store (`hashtile::gpu::chained`) against the multimap, as `multimap_sequence` runs the CPU table:
/// multimap inserts (distinct keys per batch), erases, erase_all, replaces, a flush in the middle, growth past
/// a small pool, and the invariants of the read-back table after every batch (`CpuChained::from_packed`).
fn gpu_store_matches_multimap<R: hashtile::gpu::transfer::HostTransfer>(
    client: hashtile::cubecl::prelude::ComputeClient<R>,
    tile_width: Option<u32>,
    allocator: hashtile::gpu::chained::SlabAllocator,
) {
    use hashtile::chained::cpu::CpuChained;
    use hashtile::gpu::chained::GpuChained;
    let family = hashtile::HashFamily::new(hashtile::DEFAULT_SEED);
    let mut rng = StdRng::seed_from_u64(77);
    // Few lists: long ones, and a pool that has to grow.
    let mut t = match tile_width {
        Some(w) => GpuChained::<R>::with_tile_width(&client, family, 40, 8, w).unwrap(),
        None => GpuChained::<R>::new(&client, family, 40, 8).unwrap(),
    };
    t.set_allocator(allocator);
    let (_, initial_pool) = t.shape_of();
    let mut oracle: HashMap<u32, Vec<u32>> = HashMap::new();
    let universe = 3000u64;
    let mut serial = 0u32;
    let check = |t: &GpuChained<R>, oracle: &HashMap<u32, Vec<u32>>| {
        let (words, bits) = t.download().unwrap();
        let (buckets, pool) = t.shape_of();
        let mut cpu = CpuChained::from_packed(family, buckets, pool, &words, &bits).unwrap();
        let stats = cpu.check().expect("GPU table invariants");
        let live: usize = oracle.values().map(Vec::len).sum();
        assert_eq!((stats.live, t.len()), (live, live));
        let mut keys: Vec<u32> = oracle.keys().copied().collect();
        keys.extend([universe as u32 + 1, universe as u32 + 9]);
        let (offsets, values) = t.find_all(&keys).unwrap();
        let counts = t.count(&keys).unwrap();
        let first = t.find(&keys).unwrap();
        for (i, k) in keys.iter().enumerate() {
            let want: &[u32] = oracle.get(k).map(Vec::as_slice).unwrap_or(&[]);
            assert_eq!(&values[offsets[i]..offsets[i + 1]], want, "find_all of {k}");
            assert_eq!(counts[i] as usize, want.len(), "count of {k}");
            assert_eq!(first[i], want.first().copied(), "find of {k}");
        }
        stats
    };
    for round in 0..12 {
        let n = rng.random_range(1..600);
        let keys: Vec<u32> = distinct_keys(&mut rng, n, universe);
        let values: Vec<u32> = keys
            .iter()
            .map(|_| {
                serial += 1;
                serial
            })
            .collect();
        assert_eq!(t.insert(&keys, &values, false).unwrap(), n);
        for (k, v) in keys.iter().zip(&values) {
            oracle.entry(*k).or_default().push(*v);
        }
        let erase: Vec<u32> = distinct_keys(&mut rng, 80, universe);
        let mut want = 0;
        for k in &erase {
            if let Some(v) = oracle.get_mut(k).filter(|v| !v.is_empty()) {
                v.remove(0);
                want += 1;
            }
        }
        assert_eq!(t.erase(&erase, false).unwrap(), want, "erase");
        let erase_all: Vec<u32> = distinct_keys(&mut rng, 40, universe);
        let want: usize = erase_all
            .iter()
            .map(|k| oracle.remove(k).map_or(0, |v| v.len()))
            .sum();
        assert_eq!(t.erase(&erase_all, true).unwrap(), want, "erase_all");
        oracle.retain(|_, v| !v.is_empty());
        // Replace of stored and new keys: the first copy takes the value; a new key gets one copy.
        let rep: Vec<u32> = distinct_keys(&mut rng, 50, universe);
        let vals: Vec<u32> = rep.iter().map(|k| k ^ 0x5555).collect();
        let fresh = rep.iter().filter(|k| !oracle.contains_key(k)).count();
        assert_eq!(t.insert(&rep, &vals, true).unwrap(), fresh, "replace");
        for (k, v) in rep.iter().zip(&vals) {
            oracle.entry(*k).or_default();
            let e = oracle.get_mut(k).unwrap();
            if e.is_empty() {
                e.push(*v);
            } else {
                e[0] = *v;
            }
        }
        if round == 6 {
            let before = check(&t, &oracle);
            let freed = t.flush().unwrap();
            let after = check(&t, &oracle);
            assert_eq!(after.tombstones, 0);
            assert_eq!(after.list_slabs + freed, before.list_slabs);
        }
        check(&t, &oracle);
    }
    let (_, pool) = t.shape_of();
    assert!(pool > initial_pool, "the pool grew");
    // Many copies of one key, inserted in one launch: every one lands (their order is unspecified).
    let same = vec![12345u32; 700];
    let vals: Vec<u32> = (0..700).collect();
    assert_eq!(t.insert(&same, &vals, false).unwrap(), 700);
    let (_, mut got) = t.find_all(&[12345]).unwrap();
    got.sort();
    let mut want = oracle.remove(&12345).unwrap_or_default();
    want.extend(&vals);
    want.sort();
    assert_eq!(got, want);
    // Replace of one key many times in one launch: stored once.
    assert_eq!(t.insert(&[777_777; 300], &[5; 300], true).unwrap(), 1);
    assert_eq!(t.count(&[777_777]).unwrap(), vec![1]);
}

#[test]
fn vulkan_gpu_store_matches_multimap() {
    if common::present(Backend::Vulkan) {
        use hashtile::cubecl::prelude::Runtime;
        use hashtile::gpu::chained::SlabAllocator;
        let client = hashtile::cubecl::wgpu::WgpuRuntime::client(&Default::default());
        gpu_store_matches_multimap(client.clone(), None, SlabAllocator::HashedBitmap);
        // SlabAlloc's resident blocks (a tile's lanes hold its block's bitmap words).
        gpu_store_matches_multimap(client, None, SlabAllocator::ResidentBlocks);
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_gpu_store_matches_multimap() {
    if common::present(Backend::Cuda) {
        use hashtile::cubecl::prelude::Runtime;
        let client = hashtile::cubecl::cuda::CudaRuntime::client(&Default::default());
        use hashtile::gpu::chained::SlabAllocator;
        gpu_store_matches_multimap(client.clone(), None, SlabAllocator::HashedBitmap);
        gpu_store_matches_multimap(client.clone(), None, SlabAllocator::ResidentBlocks);
        // Two tiles of 16 lanes per warp, a slab word per lane.
        gpu_store_matches_multimap(client, Some(16), SlabAllocator::HashedBitmap);
    }
}

/// Mixed batches of distinct keys have one answer whatever the order: each GPU backend's outcomes equal the
/// CPU table's, batch after batch, and so do the tables.
#[test]
fn gpu_mixed_batches_of_distinct_keys_match_the_cpu_table() {
    for g in backends().into_iter().filter(|&b| b != Backend::Cpu) {
        for (m, mix) in MIXES.iter().enumerate() {
            for unique in [true, false] {
                let mut rng = StdRng::seed_from_u64(300 + m as u64 + 10 * unique as u64);
                let mut cpu: ChainedTable<u32, u32> = table(Backend::Cpu, 2000, 2.0, 8);
                let mut gpu: ChainedTable<u32, u32> = table(g, 2000, 2.0, 8);
                let mut present: Vec<u32> = Vec::new();
                for batch in 0..20 {
                    let ops = mixed_batch(&mut rng, 700, *mix, unique, &present, 3000);
                    let mut seen = HashSet::new();
                    let ops: Vec<Op<u32, u32>> = ops
                        .into_iter()
                        .filter(|o| {
                            seen.insert(match *o {
                                Op::Insert(k, _)
                                | Op::Replace(k, _)
                                | Op::Erase(k)
                                | Op::Find(k) => k,
                            })
                        })
                        .collect();
                    let want = cpu.apply(&ops).unwrap();
                    let got = gpu.apply(&ops).unwrap();
                    assert_eq!(got, want, "{g}, mix {m}, unique {unique}, batch {batch}");
                    let stats = gpu.check().unwrap();
                    assert_eq!(stats.live, cpu.len());
                    if batch == 10 {
                        assert_eq!(gpu.flush().unwrap(), cpu.flush().unwrap());
                    }
                    present = cpu.pairs().unwrap().into_iter().map(|p| p.0).collect();
                }
                let mut a = cpu.pairs().unwrap();
                let mut b = gpu.pairs().unwrap();
                a.sort();
                b.sort();
                assert_eq!(a, b);
            }
        }
    }
}

/// The GPU slab allocator alone: `n` allocations from a pool of `n` take every slab once; one more finds none;
/// the slabs given back can all be taken again.
fn gpu_allocator_takes_every_slab_once<R: hashtile::gpu::transfer::HostTransfer>(
    client: hashtile::cubecl::prelude::ComputeClient<R>,
) {
    use hashtile::cubecl::prelude::CubeElement;
    use hashtile::gpu::chained::GpuChained;
    let family = hashtile::HashFamily::new(hashtile::DEFAULT_SEED);
    for pool in [32u32, 1000, 4099] {
        let mut t = GpuChained::<R>::new(&client, family, 16, pool).unwrap();
        let n = pool as usize;
        let read = |h| {
            let b = client.read_one(h).unwrap();
            u32::from_bytes(&b)[..n].to_vec()
        };
        let first = t.allocate_device(n);
        let mut got = read(first.clone());
        got.sort();
        assert_eq!(
            got,
            (0..pool).collect::<Vec<_>>(),
            "pool {pool}: every slab once"
        );
        let none = t.allocate_device(1);
        let b = client.read_one(none).unwrap();
        assert_eq!(u32::from_bytes(&b)[0], u32::MAX, "an empty pool has none");
        t.release_device(&first, n);
        let (_, bits) = t.download().unwrap();
        assert!(bits.iter().all(|&w| w == 0), "every slab given back");
        let mut again = read(t.allocate_device(n));
        again.sort();
        assert_eq!(again, (0..pool).collect::<Vec<_>>());
    }
}

#[test]
fn vulkan_gpu_allocator_takes_every_slab_once() {
    if common::present(Backend::Vulkan) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_allocator_takes_every_slab_once(hashtile::cubecl::wgpu::WgpuRuntime::client(
            &Default::default(),
        ));
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_gpu_allocator_takes_every_slab_once() {
    if common::present(Backend::Cuda) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_allocator_takes_every_slab_once(hashtile::cubecl::cuda::CudaRuntime::client(
            &Default::default(),
        ));
    }
}

/// Queued inserts (`insert_queued`, the small-batch path): many batches into a pool too small for them, so that
/// some batches are queued without a read and others find the pool short and grow it; once settled, the length,
/// every key's values and the table's invariants are those of the multimap.
fn gpu_queued_inserts_match_the_multimap<R: hashtile::gpu::transfer::HostTransfer>(
    client: hashtile::cubecl::prelude::ComputeClient<R>,
) {
    use hashtile::chained::cpu::CpuChained;
    use hashtile::cubecl::prelude::CubeElement;
    use hashtile::gpu::chained::GpuChained;
    let family = hashtile::HashFamily::new(hashtile::DEFAULT_SEED);
    let mut rng = StdRng::seed_from_u64(91);
    let mut t = GpuChained::<R>::new(&client, family, 64, 32).unwrap();
    let mut oracle: HashMap<u32, Vec<u32>> = HashMap::new();
    for batch in 0..40u32 {
        let n = rng.random_range(1..120);
        // Keys from a small universe: duplicates across and within batches; odd batches replace.
        let keys: Vec<u32> = (0..n).map(|_| rng.random_range(0..900)).collect();
        let values: Vec<u32> = (0..n as u32).map(|i| batch << 16 | i).collect();
        let unique = batch % 2 == 1;
        let kh = client.create_from_slice(u32::as_bytes(&keys));
        let vh = client.create_from_slice(u32::as_bytes(&values));
        t.insert_queued(&kh, &vh, n, unique).unwrap();
        if unique {
            // Within one launch the copies of a key race: one of them is stored, and in replace mode the first
            // copy's value is one of the batch's values for that key. Compare those keys by count only.
            for (k, v) in keys.iter().zip(&values) {
                let e = oracle.entry(*k).or_default();
                if e.is_empty() {
                    e.push(*v);
                } else {
                    e[0] = u32::MAX; // some value of this batch
                }
            }
        } else {
            for (k, v) in keys.iter().zip(&values) {
                oracle.entry(*k).or_default().push(*v);
            }
        }
    }
    let live: usize = oracle.values().map(Vec::len).sum();
    assert_eq!(t.settle().unwrap(), live);
    let (words, bits) = t.download().unwrap();
    let (buckets, pool) = t.shape_of();
    assert!(pool > 32, "the pool grew");
    let mut cpu = CpuChained::from_packed(family, buckets, pool, &words, &bits).unwrap();
    assert_eq!(cpu.check().expect("invariants").live, live);
    let keys: Vec<u32> = oracle.keys().copied().collect();
    let counts = t.count(&keys).unwrap();
    for (k, c) in keys.iter().zip(counts) {
        assert_eq!(c as usize, oracle[k].len(), "count of {k}");
    }
}

#[test]
fn vulkan_gpu_queued_inserts_match_the_multimap() {
    if common::present(Backend::Vulkan) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_queued_inserts_match_the_multimap(hashtile::cubecl::wgpu::WgpuRuntime::client(
            &Default::default(),
        ));
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_gpu_queued_inserts_match_the_multimap() {
    if common::present(Backend::Cuda) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_queued_inserts_match_the_multimap(hashtile::cubecl::cuda::CudaRuntime::client(
            &Default::default(),
        ));
    }
}

/// Queued inserts proven by the table's occupancy: keys that all fall in one list (the worst case for the
/// pool: a chain of full slabs), queued between erases and a flush, never wait for the device while the pool
/// provably suffices, never find it empty (`settle` would say so), and end as the multimap does; a pool too
/// small for the next batch grows.
fn gpu_queued_inserts_bounded_by_occupancy<R: hashtile::gpu::transfer::HostTransfer>(
    client: hashtile::cubecl::prelude::ComputeClient<R>,
) {
    use hashtile::chained::cpu::CpuChained;
    use hashtile::cubecl::prelude::CubeElement;
    use hashtile::gpu::chained::GpuChained;
    let family = hashtile::HashFamily::new(hashtile::DEFAULT_SEED);
    let buckets = 16;
    let probe = CpuChained::new(family, buckets, 32).unwrap();
    // Distinct keys of list 0 only.
    let one_list: Vec<u32> = (0..u32::MAX - 2)
        .filter(|&k| probe.bucket_of(k as u64) == 0)
        .take(3000)
        .collect();
    let mut t = GpuChained::<R>::new(&client, family, buckets, 400).unwrap();
    let mut oracle: HashMap<u32, Vec<u32>> = HashMap::new();
    let put = |x: &[u32]| client.create_from_slice(u32::as_bytes(x));
    let queue = |t: &mut GpuChained<R>, oracle: &mut HashMap<u32, Vec<u32>>, keys: &[u32]| {
        let values: Vec<u32> = keys.iter().map(|k| k.wrapping_mul(7)).collect();
        t.insert_queued(&put(keys), &put(&values), keys.len(), false)
            .unwrap();
        for (k, v) in keys.iter().zip(&values) {
            oracle.entry(*k).or_default().push(*v);
        }
    };
    // 20 batches of 100 keys of one list: at most 2000 / 15 = 133 pool slabs plus a few held, under 400.
    for b in 0..20 {
        queue(&mut t, &mut oracle, &one_list[b * 100..(b + 1) * 100]);
    }
    let s = t.queue_stats();
    assert_eq!((s.queued, s.pool_reads, s.pool_grows), (20, 0, 0));
    let live: usize = oracle.values().map(Vec::len).sum();
    assert_eq!(t.settle().unwrap(), live);
    // Erases leave tombstones (the slots stay occupied), so the bound still counts them.
    let gone: Vec<u32> = one_list[..1000].to_vec();
    assert_eq!(t.erase(&gone, true).unwrap(), 1000);
    for k in &gone {
        oracle.remove(k);
    }
    for b in 20..24 {
        queue(&mut t, &mut oracle, &one_list[b * 100..(b + 1) * 100]);
    }
    // A flush drops the tombstones: the bound falls back to the live pairs.
    t.flush().unwrap();
    for b in 24..30 {
        queue(&mut t, &mut oracle, &one_list[b * 100..(b + 1) * 100]);
    }
    let s = t.queue_stats();
    assert_eq!(s.pool_grows, 0, "{s:?}");
    // A batch past the pool's bound: the table reads the slabs in use and grows.
    let many: Vec<u32> = (0..8000u32)
        .map(|i| i.wrapping_mul(2654435761))
        .filter(|&k| k < u32::MAX - 1)
        .collect();
    queue(&mut t, &mut oracle, &many);
    let s = t.queue_stats();
    assert!(s.pool_reads >= 1 && s.pool_grows >= 1, "{s:?}");
    let live: usize = oracle.values().map(Vec::len).sum();
    assert_eq!(t.settle().unwrap(), live);
    let (words, bits) = t.download().unwrap();
    let (b, pool) = t.shape_of();
    let mut cpu = CpuChained::from_packed(family, b, pool, &words, &bits).unwrap();
    assert_eq!(cpu.check().expect("invariants").live, live);
    let keys: Vec<u32> = oracle.keys().copied().collect();
    for (k, c) in keys.iter().zip(t.count(&keys).unwrap()) {
        assert_eq!(c as usize, oracle[k].len(), "count of {k}");
    }
}

#[test]
fn vulkan_gpu_queued_inserts_bounded_by_occupancy() {
    if common::present(Backend::Vulkan) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_queued_inserts_bounded_by_occupancy(hashtile::cubecl::wgpu::WgpuRuntime::client(
            &Default::default(),
        ));
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_gpu_queued_inserts_bounded_by_occupancy() {
    if common::present(Backend::Cuda) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_queued_inserts_bounded_by_occupancy(hashtile::cubecl::cuda::CudaRuntime::client(
            &Default::default(),
        ));
    }
}

mod user {
    //! The kernel is in a module of its own: CubeCL's macro names the `cubecl` crate, here re-exported.
    use hashtile::cubecl;
    use hashtile::cubecl::prelude::*;

    /// A user's kernel calling the chained table's device function: one mixed operation per thread, as a caller
    /// would write it (the table's own batch kernel is not involved).
    #[cube(launch_unchecked)]
    pub fn user_mixed_kernel(
        ops: &Array<u32>,
        keys: &Array<u32>,
        values: &Array<u32>,
        slabs: &Array<Atomic<u64>>,
        slabs_plain: &Array<u64>,
        slab_values: &mut Array<u64>,
        bitmap: &Array<Atomic<u32>>,
        pool: u32,
        shape: &Array<u32>,
        out: &mut Array<u32>,
        status: &mut Array<u32>,
        #[comptime] plain: bool,
        #[comptime] resident: bool,
        #[comptime] tw: u32,
    ) {
        let meta = hashtile::gpu::device_api::load_meta(shape);
        let t = ABSOLUTE_POS;
        let mine = t < keys.len();
        let mut o = 0u32;
        let mut k = 0u32;
        let mut v = 0u32;
        if mine {
            o = ops[t];
            k = keys[t];
            v = values[t];
        }
        // Every lane of the plane calls it, with an operation or without.
        let a = hashtile::gpu::chained::chained_tile_op::<hashtile::gpu::Packed>(
            slabs,
            slabs_plain,
            slab_values,
            bitmap,
            pool,
            meta,
            mine,
            o,
            k,
            v,
            0u32,
            out,
            hashtile::gpu::chained::op::MIXED,
            plain,
            resident,
            tw,
        );
        if mine {
            out[t] = a.value;
            status[t] = a.status;
        }
    }
}

/// The device function from a user's kernel: mixed operations of distinct keys on a prefilled table (so every
/// outcome is known), then `recount` and host finds agree with the oracle.
fn gpu_device_function_from_a_user_kernel<R: hashtile::gpu::transfer::HostTransfer>(
    client: hashtile::cubecl::prelude::ComputeClient<R>,
) {
    use hashtile::cubecl::prelude::*;
    use hashtile::gpu::chained::{GpuChained, op, status};
    let family = hashtile::HashFamily::new(hashtile::DEFAULT_SEED);
    let mut rng = StdRng::seed_from_u64(5);
    let keys: Vec<u32> = distinct_keys(&mut rng, 6000, 1 << 30);
    let (stored, rest) = keys.split_at(3000);
    let mut t = GpuChained::<R>::new(&client, family, 200, 32).unwrap();
    let values: Vec<u32> = stored.iter().map(|k| k ^ 0xabcd).collect();
    assert_eq!(t.insert(stored, &values, true).unwrap(), 3000);
    // Operations: insert rest[..1000], erase stored[..800], find stored[800..], find rest[1000..].
    let mut batch: Vec<(u32, u32, u32)> = Vec::new();
    batch.extend(
        rest[..1000]
            .iter()
            .map(|&k| (op::REPLACE, k, k.wrapping_mul(3))),
    );
    batch.extend(stored[..800].iter().map(|&k| (op::ERASE, k, 0)));
    batch.extend(stored[800..].iter().map(|&k| (op::FIND, k, 0)));
    batch.extend(rest[1000..].iter().map(|&k| (op::FIND, k, 0)));
    use rand::seq::SliceRandom;
    batch.shuffle(&mut rng);
    let n = batch.len();
    let put = |x: Vec<u32>| client.create_from_slice(u32::as_bytes(&x));
    let oh = put(batch.iter().map(|b| b.0).collect());
    let kh = put(batch.iter().map(|b| b.1).collect());
    let vh = put(batch.iter().map(|b| b.2).collect());
    let (out, st) = (client.empty(n * 4), client.empty(n * 4));
    // The inserts take at most one slab each.
    t.reserve(1000).unwrap();
    let r = t.device_ref();
    let dummy = client.empty(8);
    let (plain_h, plain_len) = if r.plain {
        (r.slabs.clone(), r.slab_words)
    } else {
        (dummy, 1)
    };
    // SAFETY: thread `t < n` reads its operation and writes `out[t]`, `status[t]`; the table's arrays are
    // bound with their lengths.
    unsafe {
        user::user_mixed_kernel::launch_unchecked::<R>(
            &client,
            CubeCount::Static((n as u32).div_ceil(256), 1, 1),
            CubeDim::new_1d(256),
            ArrayArg::from_raw_parts(oh, n),
            ArrayArg::from_raw_parts(kh, n),
            ArrayArg::from_raw_parts(vh, n),
            ArrayArg::from_raw_parts(r.slabs.clone(), r.slab_words),
            ArrayArg::from_raw_parts(plain_h, plain_len),
            ArrayArg::from_raw_parts(r.values.clone(), r.value_words),
            ArrayArg::from_raw_parts(r.bitmap.clone(), r.bitmap_words),
            r.pool,
            ArrayArg::from_raw_parts(r.shape.clone(), hashtile::gpu::device_api::SHAPE_WORDS),
            ArrayArg::from_raw_parts(out.clone(), n),
            ArrayArg::from_raw_parts(st.clone(), n),
            r.plain,
            r.resident,
            r.tile_width,
        )
    };
    let out = u32::from_bytes(&client.read_one(out).unwrap())[..n].to_vec();
    let st = u32::from_bytes(&client.read_one(st).unwrap())[..n].to_vec();
    let stored_value: HashMap<u32, u32> =
        stored.iter().copied().zip(values.iter().copied()).collect();
    for (i, &(o, k, _)) in batch.iter().enumerate() {
        let want = match o {
            op::REPLACE => (None, status::INSERTED),
            op::ERASE => (None, status::ERASED),
            _ => match stored_value.get(&k) {
                Some(&v) => (Some(v), status::FOUND),
                None => (None, status::NOT_FOUND),
            },
        };
        assert_eq!(st[i], want.1, "operation {i} ({o} of {k})");
        if let Some(v) = want.0 {
            assert_eq!(out[i], v, "find of {k}");
        }
    }
    assert_eq!(t.recount().unwrap(), 3000 + 1000 - 800);
    let found = t.find(&keys).unwrap();
    for (i, k) in keys.iter().enumerate() {
        let want = if i < 800 {
            None
        } else if i < 3000 {
            Some(values[i])
        } else if i < 4000 {
            Some(k.wrapping_mul(3))
        } else {
            None
        };
        assert_eq!(found[i], want, "key {k}");
    }
}

#[test]
fn vulkan_gpu_device_function_from_a_user_kernel() {
    if common::present(Backend::Vulkan) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_device_function_from_a_user_kernel(hashtile::cubecl::wgpu::WgpuRuntime::client(
            &Default::default(),
        ));
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_gpu_device_function_from_a_user_kernel() {
    if common::present(Backend::Cuda) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_device_function_from_a_user_kernel(hashtile::cubecl::cuda::CudaRuntime::client(
            &Default::default(),
        ));
    }
}

/// Device memory exhaustion is a typed error, not a panic: a table whose pool cannot fit on the GPU (2^31
/// slabs of 128 bytes: 256 GiB) is refused with `OutOfMemory` (CUDA tells the free memory; Vulkan cannot).
#[cfg(feature = "cuda")]
#[test]
fn cuda_pool_past_device_memory_is_a_typed_error() {
    if common::present(Backend::Cuda) {
        let cfg = ChainedConfig::for_keys(1000, 0.5)
            .pool_slabs(1 << 31)
            .backend(BackendChoice::Exactly(Backend::Cuda));
        match ChainedTable::<u32, u32>::new(cfg) {
            Err(Error::OutOfMemory {
                needed, available, ..
            }) => assert!(needed > available),
            Err(e) => panic!("expected OutOfMemory, got {e}"),
            Ok(_) => panic!("a 256 GiB pool fitted"),
        }
    }
}
