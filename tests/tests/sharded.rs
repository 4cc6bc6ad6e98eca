//! `ShardedTable` (issue 31) against a `HashMap` oracle on every backend present (CI: the CPU and lavapipe, N
//! shards side by side; the GPU machine: one shard per GPU as well): random rounds of inserts with repeats,
//! finds of present and absent keys, erases, counting and mixed batches, answers in the caller's order; and
//! the adversarial batches: every key in one shard, empty shards, an empty batch, a refused key's index, and a
//! shard that would overflow (a typed error that changes no shard); and a table called from a new thread each
//! time (each table runs on a CubeCL stream of its own).

use hashtile::reduce::{Add, Max};
use hashtile::sharded::config::DEFAULT_EXCHANGE_STEP;
use hashtile::{
    Backend, BackendChoice, Bcht, DoubleHashing, Error, Iht, Key, Op, Outcome, SchemeInfo,
    ShardedConfig, ShardedTable, Shards, TableConfig, Value,
};
use hashtile_tests::backends::present_backends;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

fn config(backend: Backend, capacity: usize, shards: Shards) -> ShardedConfig {
    ShardedConfig {
        shards,
        ..ShardedConfig::new(
            TableConfig::with_capacity(capacity)
                .batch_keys(1 << 11)
                .backend(BackendChoice::Exactly(backend)),
        )
    }
}

/// Spread keys of `K`'s width from an index.
fn key<K: Key>(i: u64) -> K {
    let lo = hashtile::hash::fmix32(i as u32 ^ 0x51) as u64;
    let hi = hashtile::hash::fmix32(i as u32 ^ 0x2b7) as u64;
    K::narrow(((hi << 32) | lo) >> (64 - K::BITS))
}

/// The table holds exactly the oracle's pairs, finds them in the caller's order, and misses `absent`.
fn same_pairs<S: SchemeInfo, K: Key + std::hash::Hash, V: Value>(
    t: &ShardedTable<S, K, V>,
    o: &HashMap<K, V>,
    absent: &[K],
    what: &str,
) {
    assert_eq!(t.len(), o.len(), "{what}: len");
    let mut pairs = t.pairs().unwrap();
    pairs.sort();
    let mut want: Vec<(K, V)> = o.iter().map(|(k, v)| (*k, *v)).collect();
    want.sort();
    assert_eq!(pairs, want, "{what}: pairs");
    // Every shard holds only its own keys.
    for i in 0..t.shard_count() {
        for (k, _) in t.shard(i).pairs().unwrap() {
            assert_eq!(t.shard_of(k), i, "{what}: key {k} in the wrong shard");
        }
    }
    let probe: Vec<K> = want
        .iter()
        .map(|p| p.0)
        .chain(absent.iter().copied())
        .collect();
    let got = t.find(&probe).unwrap();
    let mut into = vec![V::default(); probe.len()];
    t.find_into(&probe, &mut into).unwrap();
    let has = t.contains(&probe).unwrap();
    for (i, k) in probe.iter().enumerate() {
        let w = o.get(k).copied();
        assert_eq!(got[i], w, "{what}: find {k}");
        assert_eq!(into[i], w.unwrap_or(V::ABSENT), "{what}: find_into {k}");
        assert_eq!(has[i], w.is_some(), "{what}: contains {k}");
    }
}

/// Rounds of inserts with repeats, erases with absent keys, counting and mixed batches.
fn random_rounds<S: SchemeInfo, K: Key + std::hash::Hash>(backend: Backend, shards: Shards) {
    let what = format!("{} {}-bit keys on {backend}, {shards:?}", S::NAME, K::BITS);
    let mut rng = StdRng::seed_from_u64(0x5a4d ^ K::BITS as u64);
    let mut t: ShardedTable<S, K, u32> =
        ShardedTable::new(config(backend, 16_384, shards)).unwrap();
    let mut o: HashMap<K, u32> = HashMap::new();
    let universe = 6000u64;
    let absent: Vec<K> = (universe..universe + 300).map(key).collect();
    for round in 0..5u32 {
        let keys: Vec<K> = (0..3000)
            .map(|_| key(rng.random_range(0..universe)))
            .collect();
        let values: Vec<u32> = (0..keys.len() as u32).map(|i| i ^ round << 20).collect();
        t.insert(&keys, &values).unwrap();
        for (k, v) in keys.iter().zip(&values) {
            o.insert(*k, *v); // the last occurrence wins
        }
        same_pairs(&t, &o, &absent, &format!("{what}: insert round {round}"));

        let gone: Vec<K> = (0..800)
            .map(|_| key(rng.random_range(0..universe + 300)))
            .collect();
        let mut want = 0;
        for k in &gone {
            want += o.remove(k).is_some() as usize;
        }
        assert_eq!(t.erase(&gone).unwrap(), want, "{what}: erased count");
        same_pairs(&t, &o, &absent, &format!("{what}: erase round {round}"));

        let counted: Vec<K> = (0..1500)
            .map(|_| key(rng.random_range(0..universe)))
            .collect();
        t.insert_or_apply::<Add>(&counted, &vec![1; counted.len()])
            .unwrap();
        for k in &counted {
            *o.entry(*k).or_insert(0) += 1;
        }
        same_pairs(&t, &o, &absent, &format!("{what}: count round {round}"));

        // Operations racing on a few keys, in one batch: each key's take effect in batch order.
        let ops: Vec<Op<K, u32>> = (0..2000)
            .map(|i| {
                let k = key(rng.random_range(0..40u64));
                match rng.random_range(0..4) {
                    0 => Op::Insert(k, i),
                    1 => Op::Replace(k, i + 7),
                    2 => Op::Erase(k),
                    _ => Op::Find(k),
                }
            })
            .collect();
        let got = t.apply(&ops).unwrap();
        for (op, g) in ops.iter().zip(&got) {
            let w = match *op {
                Op::Insert(k, v) | Op::Replace(k, v) => match o.insert(k, v) {
                    Some(_) => Outcome::Updated,
                    None => Outcome::Inserted,
                },
                Op::Erase(k) => match o.remove(&k) {
                    Some(_) => Outcome::Erased,
                    None => Outcome::NotFound,
                },
                Op::Find(k) => o.get(&k).map_or(Outcome::NotFound, |v| Outcome::Found(*v)),
            };
            assert_eq!(*g, w, "{what}: outcome of {op:?}");
        }
        same_pairs(&t, &o, &absent, &format!("{what}: mixed round {round}"));
    }
}

fn shard_counts() -> Vec<Shards> {
    vec![Shards::Count(1), Shards::Count(3), Shards::Count(4)]
}

#[test]
fn random_rounds_match_the_oracle() {
    for backend in present_backends() {
        for shards in shard_counts() {
            random_rounds::<Bcht, u32>(backend, shards.clone());
            random_rounds::<Iht, u32>(backend, shards.clone());
            // 64-bit pairs on GPUs take a stable scheme.
            random_rounds::<DoubleHashing, u64>(backend, shards);
        }
    }
}

#[test]
fn one_shard_per_device_matches_the_oracle() {
    // The default placement: every GPU of the backend (one shard on the CPU and on a one-GPU machine).
    for backend in present_backends() {
        random_rounds::<Bcht, u32>(backend, Shards::AllDevices);
    }
}

/// Keys whose shard (under `t`'s route) is `shard`.
fn keys_of_shard<S: SchemeInfo>(t: &ShardedTable<S, u32, u32>, shard: usize, n: usize) -> Vec<u32> {
    (0u64..)
        .map(key::<u32>)
        .filter(|&k| t.shard_of(k) == shard && !k.is_sentinel())
        .take(n)
        .collect()
}

#[test]
fn every_key_in_one_shard() {
    for backend in present_backends() {
        let what = format!("one shard on {backend}");
        // Growth: the crowded shard doubles, the others stay empty.
        let mut cfg = config(backend, 8192, Shards::Count(4));
        cfg.table = cfg.table.growth(0.8);
        let mut t: ShardedTable<Bcht, u32, u32> = ShardedTable::new(cfg).unwrap();
        let keys = keys_of_shard(&t, 2, 6000);
        let values: Vec<u32> = (0..keys.len() as u32).collect();
        t.insert(&keys, &values).unwrap();
        let o: HashMap<u32, u32> = keys.iter().copied().zip(values.iter().copied()).collect();
        same_pairs(&t, &o, &keys_of_shard(&t, 1, 100), &what);
        for i in 0..4 {
            assert_eq!(
                t.shard(i).len(),
                if i == 2 { keys.len() } else { 0 },
                "{what}: shard {i}"
            );
        }

        // Without growth the crowded shard overflows: a typed error, and no shard changes.
        let mut t: ShardedTable<Bcht, u32, u32> =
            ShardedTable::new(config(backend, 8192, Shards::Count(4))).unwrap();
        let early: Vec<u32> = keys_of_shard(&t, 0, 100);
        t.insert(&early, &early).unwrap();
        let mut batch = keys_of_shard(&t, 3, 50);
        batch.extend(keys_of_shard(&t, 1, 4000));
        let err = t.insert(&batch, &batch).unwrap_err();
        assert!(
            matches!(err, Error::CapacityExceeded { .. }),
            "{what}: {err:?}"
        );
        let o: HashMap<u32, u32> = early.iter().map(|&k| (k, k)).collect();
        same_pairs(&t, &o, &batch, &format!("{what}: after the refused batch"));
    }
}

#[test]
fn empty_batches_and_refused_keys() {
    for backend in present_backends() {
        let what = format!("edge batches on {backend}");
        let mut t: ShardedTable<Bcht, u32, u32> =
            ShardedTable::new(config(backend, 4096, Shards::Count(3))).unwrap();
        t.insert(&[], &[]).unwrap();
        assert_eq!(t.find(&[]).unwrap(), vec![]);
        assert_eq!(t.erase(&[]).unwrap(), 0);
        assert_eq!(t.apply(&[]).unwrap(), vec![]);
        assert!(t.is_empty());
        // The refused key's index is the batch's, whichever shard it would go to.
        let mut keys: Vec<u32> = (0..500u64).map(key).collect();
        keys[321] = u32::MAX;
        let err = t.insert(&keys, &keys).unwrap_err();
        assert_eq!(err, Error::SentinelKey { index: 321 }, "{what}");
        assert!(t.is_empty(), "{what}: nothing stored");
        let err = t.insert(&keys[..10], &keys[..9]).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { .. }), "{what}");
        // A user's reserved key moves the refusal: all ones becomes storable.
        let mut cfg = config(backend, 4096, Shards::Count(3));
        cfg.table = cfg.table.reserved_key(0u32);
        let mut t: ShardedTable<Bcht, u32, u32> = ShardedTable::new(cfg).unwrap();
        t.insert(&[u32::MAX, 5], &[1, 2]).unwrap();
        assert_eq!(
            t.find(&[u32::MAX, 5, 0]).unwrap(),
            vec![Some(1), Some(2), None]
        );
        let err = t.insert(&[7, 8, 0], &[1, 1, 1]).unwrap_err();
        assert_eq!(err, Error::SentinelKey { index: 2 }, "{what}: reserved key");
    }
}

#[test]
fn bad_configs_are_typed_errors() {
    let cfg = config(Backend::Cpu, 4096, Shards::Count(0));
    assert!(matches!(
        ShardedTable::<Bcht, u32, u32>::new(cfg),
        Err(Error::InvalidConfig(_))
    ));
    let cfg = config(Backend::Cpu, 4096, Shards::Count(257));
    assert!(matches!(
        ShardedTable::<Bcht, u32, u32>::new(cfg),
        Err(Error::InvalidConfig(_))
    ));
    let cfg = config(Backend::Cpu, 4096, Shards::Devices(vec![]));
    assert!(matches!(
        ShardedTable::<Bcht, u32, u32>::new(cfg),
        Err(Error::InvalidConfig(_))
    ));
    let cfg = config(Backend::Cpu, 4096, Shards::Count(2)).exchange_step(0);
    assert!(matches!(
        ShardedTable::<Bcht, u32, u32>::new(cfg),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn a_table_called_from_a_new_thread_each_time() {
    // CubeCL queues work on a stream per calling thread; a table runs every call on its own stream, so a
    // table (or a set) handed from thread to thread answers as one used from one thread.
    use hashtile::{HashSet, HashTable};
    for backend in present_backends() {
        let what = format!("threads on {backend}");
        let cfg = TableConfig::with_capacity(16_384)
            .batch_keys(1 << 11)
            .backend(BackendChoice::Exactly(backend));
        let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg.clone()).unwrap();
        let mut s: HashSet<Bcht, u64> = HashSet::new(cfg).unwrap();
        let mut o: HashMap<u32, u32> = HashMap::new();
        let mut so = std::collections::HashSet::new();
        let mut rng = StdRng::seed_from_u64(77);
        for round in 0..6 {
            let keys: Vec<u32> = (0..3000)
                .map(|_| key(rng.random_range(0..5000u64)))
                .collect();
            std::thread::scope(|sc| {
                sc.spawn(|| {
                    t.insert_or_apply::<Add>(&keys, &vec![1; keys.len()])
                        .unwrap()
                });
            });
            for k in &keys {
                *o.entry(*k).or_insert(0) += 1;
            }
            let wide: Vec<u64> = keys.iter().map(|&k| k as u64 * 3).collect();
            let new =
                std::thread::scope(|sc| sc.spawn(|| s.insert(&wide).unwrap()).join().unwrap());
            let before = so.len();
            so.extend(wide.iter().copied());
            assert_eq!(new, so.len() - before, "{what}: new keys of round {round}");
            let gone: Vec<u32> = keys[..500].to_vec();
            let n = std::thread::scope(|sc| sc.spawn(|| t.erase(&gone).unwrap()).join().unwrap());
            let mut want = 0;
            for k in &gone {
                want += o.remove(k).is_some() as usize;
            }
            assert_eq!(n, want, "{what}: erased in round {round}");
            let probe: Vec<u32> = (0..5000u64).map(key).collect();
            let got = std::thread::scope(|sc| sc.spawn(|| t.find(&probe).unwrap()).join().unwrap());
            for (k, g) in probe.iter().zip(got) {
                assert_eq!(g, o.get(k).copied(), "{what}: find {k} in round {round}");
            }
            assert_eq!(t.len(), o.len(), "{what}: len in round {round}");
            assert_eq!(s.len(), so.len(), "{what}: set len in round {round}");
        }
    }
}

/// Device slices (one per shard's device) through `insert_device` / `find_device` on runtime `R`, against a
/// `HashMap`: keys repeated within and across slices (one value per key and round, so the stored value is
/// known), an empty slice, present and absent queries.
/// Device slices in exchange steps of `step` keys (the default, one step here; 2048, the least: slices of one and
/// two steps side by side, so that some slices send nothing in the last step).
fn device_slices<R: hashtile::gpu::transfer::HostTransfer>(
    backend: Backend,
    shards: Shards,
    step: usize,
) {
    use hashtile::cubecl::prelude::*;
    let what = format!("device slices on {backend}, {shards:?}, steps of {step}");
    let mut t: ShardedTable<Bcht, u32, u32> =
        ShardedTable::new(config(backend, 1 << 15, shards).exchange_step(step)).unwrap();
    let n = t.shard_count();
    let clients: Vec<ComputeClient<R>> = (0..n).map(|g| t.client::<R>(g).unwrap()).collect();
    let mut rng = StdRng::seed_from_u64(0xd5);
    let mut o: HashMap<u32, u32> = HashMap::new();
    for round in 0..3u32 {
        let lens: Vec<usize> = (0..n)
            .map(|g| {
                if round == 1 && g == n - 1 {
                    0
                } else {
                    2000 + 700 * g
                }
            })
            .collect();
        let slices: Vec<Vec<u32>> = lens
            .iter()
            .map(|&l| (0..l).map(|_| key(rng.random_range(0..9000u64))).collect())
            .collect();
        let value = |k: u32| k.rotate_left(3) ^ round;
        let up = |g: usize, v: &[u32]| clients[g].create_from_slice(u32::as_bytes(v));
        let keys: Vec<_> = slices.iter().enumerate().map(|(g, s)| up(g, s)).collect();
        let values: Vec<_> = slices
            .iter()
            .enumerate()
            .map(|(g, s)| up(g, &s.iter().map(|&k| value(k)).collect::<Vec<_>>()))
            .collect();
        t.insert_device::<R>(&keys, &values, &lens).unwrap();
        for s in &slices {
            for &k in s {
                o.insert(k, value(k));
            }
        }
        assert_eq!(t.len(), o.len(), "{what}: len in round {round}");
        // Queries: stored keys and absent ones, per slice.
        let queries: Vec<Vec<u32>> = (0..n)
            .map(|g| {
                (0..1500 + 300 * g)
                    .map(|_| key(rng.random_range(0..12_000u64)))
                    .collect()
            })
            .collect();
        let qlens: Vec<usize> = queries.iter().map(|q| q.len()).collect();
        let qs: Vec<_> = queries.iter().enumerate().map(|(g, q)| up(g, q)).collect();
        let out: Vec<_> = qlens
            .iter()
            .enumerate()
            .map(|(g, &l)| clients[g].empty(l * 4))
            .collect();
        let found: Vec<_> = qlens
            .iter()
            .enumerate()
            .map(|(g, &l)| clients[g].empty(l * 4))
            .collect();
        t.find_device::<R>(&qs, &qlens, &out, &found).unwrap();
        for g in 0..n {
            let got = u32::from_bytes(&clients[g].read_one(out[g].clone()).unwrap()).to_vec();
            let has = u32::from_bytes(&clients[g].read_one(found[g].clone()).unwrap()).to_vec();
            for (i, k) in queries[g].iter().enumerate() {
                let w = o.get(k).copied();
                assert_eq!(
                    has[i] == 1,
                    w.is_some(),
                    "{what}: found {k} (slice {g}, round {round})"
                );
                assert_eq!(
                    got[i],
                    w.unwrap_or(u32::MAX),
                    "{what}: value of {k} (slice {g})"
                );
            }
        }
        // The host calls see the same table.
        same_pairs(&t, &o, &[], &format!("{what}: round {round}"));
    }
}

#[test]
fn device_slices_match_the_oracle() {
    for backend in present_backends() {
        match backend {
            #[cfg(feature = "vulkan")]
            Backend::Vulkan => {
                for step in [DEFAULT_EXCHANGE_STEP, 1] {
                    device_slices::<hashtile::cubecl::wgpu::WgpuRuntime>(
                        backend,
                        Shards::Count(1),
                        step,
                    );
                    device_slices::<hashtile::cubecl::wgpu::WgpuRuntime>(
                        backend,
                        Shards::Count(3),
                        step,
                    );
                }
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda => {
                for step in [DEFAULT_EXCHANGE_STEP, 1] {
                    device_slices::<hashtile::cubecl::cuda::CudaRuntime>(
                        backend,
                        Shards::Count(3),
                        step,
                    );
                    // One shard per GPU: NCCL when there are several.
                    device_slices::<hashtile::cubecl::cuda::CudaRuntime>(
                        backend,
                        Shards::AllDevices,
                        step,
                    );
                }
            }
            _ => {}
        }
    }
    // Device-data calls on the CPU backend are typed errors.
    let t: ShardedTable<Bcht, u32, u32> =
        ShardedTable::new(config(Backend::Cpu, 4096, Shards::Count(2))).unwrap();
    #[cfg(feature = "vulkan")]
    assert!(matches!(
        t.client::<hashtile::cubecl::wgpu::WgpuRuntime>(0),
        Err(Error::InvalidConfig(_))
    ));
    let _ = t;
}

/// Counting and erases of device slices: `insert_or_apply_device::<Add>` with keys repeated
/// within and across slices (and so across exchange steps: the copies of a key travel in one step), then `Max`
/// (whose exchange parts are padded with repeated pairs), then `erase_device` of present, absent and repeated
/// keys, against a `HashMap`.
fn device_counts_and_erases<S: SchemeInfo, R: hashtile::gpu::transfer::HostTransfer>(
    backend: Backend,
    shards: Shards,
    step: usize,
) {
    use hashtile::cubecl::prelude::*;
    let what = format!(
        "device counts and erases on {backend}, {}, {shards:?}, steps of {step}",
        S::NAME
    );
    let mut t: ShardedTable<S, u32, u32> =
        ShardedTable::new(config(backend, 1 << 15, shards).exchange_step(step)).unwrap();
    let n = t.shard_count();
    let clients: Vec<ComputeClient<R>> = (0..n).map(|g| t.client::<R>(g).unwrap()).collect();
    let up = |g: usize, v: &[u32]| clients[g].create_from_slice(u32::as_bytes(v));
    let mut rng = StdRng::seed_from_u64(0xc0);
    let mut o: HashMap<u32, u32> = HashMap::new();
    for round in 0..3u32 {
        let lens: Vec<usize> = (0..n)
            .map(|g| {
                if round == 1 && g == 0 {
                    0
                } else {
                    2500 + 400 * g
                }
            })
            .collect();
        let slices: Vec<Vec<u32>> = lens
            .iter()
            .map(|&l| (0..l).map(|_| key(rng.random_range(0..3000u64))).collect())
            .collect();
        let value = |k: u32| (k % 7) + 1;
        let keys: Vec<_> = slices.iter().enumerate().map(|(g, s)| up(g, s)).collect();
        let values: Vec<_> = slices
            .iter()
            .enumerate()
            .map(|(g, s)| up(g, &s.iter().map(|&k| value(k)).collect::<Vec<_>>()))
            .collect();
        t.insert_or_apply_device::<Add, R>(&keys, &values, &lens)
            .unwrap();
        for &k in slices.iter().flatten() {
            let e = o.entry(k).or_insert(0);
            *e = e.wrapping_add(value(k));
        }
        assert_eq!(
            t.len(),
            o.len(),
            "{what}: len after counting, round {round}"
        );
        same_pairs(&t, &o, &[], &format!("{what}: counts, round {round}"));
        // An idempotent reduction (its parts padded with repeated pairs): the largest of stored and given.
        let big = |k: u32| k % 13 + round * 3;
        let bigs: Vec<_> = slices
            .iter()
            .enumerate()
            .map(|(g, s)| up(g, &s.iter().map(|&k| big(k)).collect::<Vec<_>>()))
            .collect();
        t.insert_or_apply_device::<Max, R>(&keys, &bigs, &lens)
            .unwrap();
        for &k in slices.iter().flatten() {
            let e = o.entry(k).or_insert(0);
            *e = (*e).max(big(k));
        }
        same_pairs(&t, &o, &[], &format!("{what}: max, round {round}"));
        // Erase present, absent and repeated keys from every slice.
        let gone: Vec<Vec<u32>> = (0..n)
            .map(|g| {
                (0..300 + 50 * g)
                    .map(|_| key(rng.random_range(0..4000u64)))
                    .collect()
            })
            .collect();
        let glens: Vec<usize> = gone.iter().map(|v| v.len()).collect();
        let handles: Vec<_> = gone.iter().enumerate().map(|(g, v)| up(g, v)).collect();
        let erased = t.erase_device::<R>(&handles, &glens).unwrap();
        let mut expected = 0;
        for k in gone.iter().flatten() {
            expected += usize::from(o.remove(k).is_some());
        }
        assert_eq!(erased, expected, "{what}: erased, round {round}");
        assert_eq!(t.len(), o.len(), "{what}: len after erases, round {round}");
        same_pairs(&t, &o, &[], &format!("{what}: erases, round {round}"));
    }
}

#[test]
fn device_counts_and_erases_match_the_oracle() {
    for backend in present_backends() {
        match backend {
            #[cfg(feature = "vulkan")]
            Backend::Vulkan => {
                type W = hashtile::cubecl::wgpu::WgpuRuntime;
                for step in [DEFAULT_EXCHANGE_STEP, 1] {
                    device_counts_and_erases::<DoubleHashing, W>(backend, Shards::Count(3), step);
                    device_counts_and_erases::<Iht, W>(backend, Shards::Count(3), step);
                }
                device_counts_and_erases::<Iht, W>(backend, Shards::Count(1), 1);
                // A cuckoo scheme erases on the device too (its inserts take the marks again).
                device_counts_and_erases::<Bcht, W>(backend, Shards::Count(2), 1);
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda => {
                type C = hashtile::cubecl::cuda::CudaRuntime;
                for step in [DEFAULT_EXCHANGE_STEP, 1] {
                    device_counts_and_erases::<DoubleHashing, C>(backend, Shards::Count(3), step);
                    device_counts_and_erases::<Iht, C>(backend, Shards::AllDevices, step);
                }
                device_counts_and_erases::<Bcht, C>(backend, Shards::Count(2), 1);
            }
            _ => {}
        }
    }
}

/// A sharded set against a `HashSet`: rounds of inserts with repeats (the new keys counted), `contains` of
/// present and absent keys, erases with absent keys, every shard holding only its keys, and the reserved keys
/// refused with their batch index, no shard changed.
fn set_rounds<S: SchemeInfo, K: Key + std::hash::Hash>(backend: Backend, shards: Shards) {
    let what = format!(
        "set {} {}-bit keys on {backend}, {shards:?}",
        S::NAME,
        K::BITS
    );
    let mut s: hashtile::ShardedSet<S, K> =
        hashtile::ShardedSet::new(config(backend, 16_384, shards)).unwrap();
    let mut o: std::collections::HashSet<K> = std::collections::HashSet::new();
    let mut rng = StdRng::seed_from_u64(0x5e7 ^ K::BITS as u64);
    for round in 0..4 {
        let batch: Vec<K> = (0..3000)
            .map(|_| key::<K>(rng.random_range(0..7000u64)))
            .collect();
        let new = s.insert(&batch).unwrap();
        let before = o.len();
        o.extend(batch.iter().copied());
        assert_eq!(new, o.len() - before, "{what}: new keys, round {round}");
        assert_eq!(s.len(), o.len(), "{what}: len, round {round}");
        let gone: Vec<K> = (0..700)
            .map(|_| key::<K>(rng.random_range(0..9000u64)))
            .collect();
        let mut expected = 0;
        for k in &gone {
            expected += usize::from(o.remove(k));
        }
        assert_eq!(s.erase(&gone).unwrap(), expected, "{what}: erased");
        let probe: Vec<K> = (0..4000).map(|i| key::<K>(i * 3)).collect();
        let has = s.contains(&probe).unwrap();
        for (k, h) in probe.iter().zip(has) {
            assert_eq!(h, o.contains(k), "{what}: contains {k}, round {round}");
        }
        let mut keys = s.keys().unwrap();
        keys.sort();
        let mut want: Vec<K> = o.iter().copied().collect();
        want.sort();
        assert_eq!(keys, want, "{what}: keys, round {round}");
    }
    for i in 0..s.shard_count() {
        for k in s.shard_keys(i).unwrap() {
            assert_eq!(s.shard_of(k), i, "{what}: key {k} in the wrong shard");
        }
    }
    // The empty and the erased key are refused with their index; nothing changes.
    let len = s.len();
    let erased = K::narrow(K::EMPTY.widen() - 1);
    for (bad, at) in [(K::EMPTY, 2), (erased, 1)] {
        let batch = [key::<K>(90_001), bad, key::<K>(90_002)];
        let batch = if at == 2 {
            [batch[0], batch[2], bad]
        } else {
            batch
        };
        match s.insert(&batch) {
            Err(Error::SentinelKey { index }) | Err(Error::TombstoneKey { index }) => {
                assert_eq!(index, at, "{what}: refused index")
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    assert_eq!(s.len(), len, "{what}: a refused batch changes nothing");
}

#[test]
fn sets_match_the_oracle() {
    for backend in present_backends() {
        let mut layouts = vec![Shards::Count(1), Shards::Count(3)];
        if backend == Backend::Cuda {
            layouts.push(Shards::AllDevices);
        }
        for shards in layouts {
            set_rounds::<Bcht, u32>(backend, shards.clone());
            set_rounds::<Iht, u64>(backend, shards);
        }
    }
}

/// Finds from several threads at once on one table (`&self` calls): each call holds its shards' staging buffers
/// from its split to its join, so no call's parts or answers are overwritten by another's.
#[test]
fn concurrent_finds_from_several_threads() {
    for backend in present_backends() {
        let mut t: ShardedTable<Bcht, u32, u32> =
            ShardedTable::new(config(backend, 40_000, Shards::Count(3))).unwrap();
        let keys: Vec<u32> = (0..20_000u64).map(key::<u32>).collect();
        let values: Vec<u32> = keys.iter().map(|k| k.wrapping_mul(3)).collect();
        t.insert(&keys, &values).unwrap();
        let t = &t;
        std::thread::scope(|sc| {
            for th in 0..4usize {
                let keys = &keys;
                sc.spawn(move || {
                    for round in 0..6usize {
                        // Each thread's batches differ in size and keys, absent keys among them.
                        let n = 500 + (th * 3000 + round * 1700) % 9000;
                        let q: Vec<u32> = (0..n)
                            .map(|i| match i % 4 {
                                0 => key::<u32>(1_000_000 + (th * n + i) as u64),
                                _ => keys[(i * 13 + th * 101 + round) % keys.len()],
                            })
                            .collect();
                        let found = t.find(&q).unwrap();
                        let mut into = vec![0u32; n];
                        t.find_into(&q, &mut into).unwrap();
                        for (i, k) in q.iter().enumerate() {
                            let want = (i % 4 != 0).then(|| k.wrapping_mul(3));
                            assert_eq!(
                                found[i], want,
                                "{backend} thread {th} round {round}: find {i}"
                            );
                            assert_eq!(
                                into[i],
                                want.unwrap_or(u32::MAX),
                                "{backend}: find_into {i}"
                            );
                        }
                    }
                });
            }
        });
    }
}
