//! Mixed batches on static tables (`HashTable::apply`, issue 30 item 5) and user-chosen reserved keys
//! (`TableConfig::reserved_key`, item 9) against a `HashMap` oracle run in batch order, on every scheme and
//! every backend present (CI: the CPU and lavapipe). Adversarial batches race operations on the same keys
//! inside one batch (every operation on one key, erase-then-reinsert, inserts of one key from many
//! operations): the table must answer each operation as the oracle does, hold every key at most once, and keep
//! `len` exact. Bad input is a typed error that changes nothing.

use hashtile::{
    Backend, BackendChoice, Bcht, Cht1, DoubleHashing, Error, HashTable, Iht, Key, LinearProbing,
    Op, Outcome, P2bht, SchemeInfo, TableConfig, Value,
};
use hashtile_tests::backends::present_backends;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, HashSet};

fn config(backend: Backend, capacity: usize) -> TableConfig {
    TableConfig::with_capacity(capacity)
        .batch_keys(1 << 11)
        .backend(BackendChoice::Exactly(backend))
}

/// The oracle: each operation in batch order.
fn oracle_apply<K: Key, V: Value>(m: &mut HashMap<K, V>, ops: &[Op<K, V>]) -> Vec<Outcome<V>> {
    ops.iter()
        .map(|o| match *o {
            Op::Insert(k, v) | Op::Replace(k, v) => match m.insert(k, v) {
                Some(_) => Outcome::Updated,
                None => Outcome::Inserted,
            },
            Op::Erase(k) => match m.remove(&k) {
                Some(_) => Outcome::Erased,
                None => Outcome::NotFound,
            },
            Op::Find(k) => match m.get(&k) {
                Some(&v) => Outcome::Found(v),
                None => Outcome::NotFound,
            },
        })
        .collect()
}

/// The table holds exactly the oracle's pairs, each key once.
fn same_pairs<S: SchemeInfo, K: Key, V: Value>(
    t: &HashTable<S, K, V>,
    m: &HashMap<K, V>,
    what: &str,
) {
    let pairs = t.pairs().unwrap();
    let keys: HashSet<K> = pairs.iter().map(|p| p.0).collect();
    assert_eq!(keys.len(), pairs.len(), "{what}: a key stored twice");
    assert_eq!(t.len(), m.len(), "{what}: len");
    let got: HashMap<K, V> = pairs.into_iter().collect();
    assert_eq!(&got, m, "{what}: pairs");
    let all: Vec<K> = m.keys().copied().collect();
    let found = t.find(&all).unwrap();
    for (k, f) in all.iter().zip(found) {
        assert_eq!(f, m.get(k).copied(), "{what}: find {k}");
    }
}

/// A random batch over keys `0..universe`: finds, inserts, replaces and erases, `n` operations.
fn random_ops(rng: &mut StdRng, n: usize, universe: u32) -> Vec<Op<u32, u32>> {
    (0..n)
        .map(|_| {
            let k = rng.random_range(0..universe);
            let v = rng.random::<u32>();
            match rng.random_range(0..4) {
                0 => Op::Insert(k, v),
                1 => Op::Replace(k, v),
                2 => Op::Erase(k),
                _ => Op::Find(k),
            }
        })
        .collect()
}

/// Rounds of random mixed batches against the oracle: small universes make keys repeat within a batch.
fn random_batches<S: SchemeInfo>(backend: Backend) {
    let what = format!("{} on {backend}", S::NAME);
    let mut rng = StdRng::seed_from_u64(0x6d78 ^ S::NAME.len() as u64);
    let mut t: HashTable<S, u32, u32> = HashTable::new(config(backend, 8192)).unwrap();
    let mut m = HashMap::new();
    for (round, universe) in [(0, 500u32), (1, 3000), (2, 200), (3, 5000), (4, 60)] {
        let ops = random_ops(&mut rng, 4000, universe);
        let got = t.apply(&ops).unwrap();
        let want = oracle_apply(&mut m, &ops);
        assert_eq!(got, want, "{what}, round {round}");
        same_pairs(&t, &m, &format!("{what}, round {round}"));
    }
}

#[test]
fn mixed_batches_match_the_oracle() {
    for backend in present_backends() {
        random_batches::<Bcht>(backend);
        random_batches::<Iht>(backend);
        random_batches::<P2bht>(backend);
        random_batches::<LinearProbing>(backend);
        random_batches::<DoubleHashing>(backend);
        random_batches::<Cht1>(backend);
    }
}

/// WarpSpeed's adversarial batches: every operation on a handful of keys, inserts of one key from thousands of
/// operations, erase-then-reinsert, erasing absent keys.
fn adversarial<S: SchemeInfo>(backend: Backend) {
    let what = format!("{} on {backend}", S::NAME);
    let mut t: HashTable<S, u32, u32> = HashTable::new(config(backend, 4096)).unwrap();
    let mut m = HashMap::new();
    let stored: Vec<u32> = (0..1000).collect();
    t.insert(&stored, &stored).unwrap();
    m.extend(stored.iter().map(|&k| (k, k)));
    let batches: Vec<Vec<Op<u32, u32>>> = vec![
        // One key, every kind of operation, many times.
        (0..3000)
            .map(|i| match i % 4 {
                0 => Op::Insert(7, i),
                1 => Op::Erase(7),
                2 => Op::Find(7),
                _ => Op::Replace(7, i + 1),
            })
            .collect(),
        // One new key inserted by every operation.
        (0..2048).map(|i| Op::Insert(5000, i)).collect(),
        // Erase everything stored, then put half of it back with new values.
        (0..1000)
            .map(Op::Erase)
            .chain((0..500).map(|k| Op::Insert(k, k + 1)))
            .collect(),
        // Erasing and finding absent keys, and the sentinel (never stored).
        (20_000..21_000)
            .map(Op::Erase)
            .chain([Op::Find(u32::MAX), Op::Erase(u32::MAX)])
            .collect(),
        // Everything erased.
        (0..6000).map(Op::Erase).collect(),
    ];
    for (i, ops) in batches.iter().enumerate() {
        let got = t.apply(ops).unwrap();
        let want = oracle_apply(&mut m, ops);
        assert_eq!(got, want, "{what}, batch {i}");
        same_pairs(&t, &m, &format!("{what}, batch {i}"));
    }
    assert!(t.is_empty(), "{what}");
}

#[test]
fn adversarial_batches_never_corrupt_the_table() {
    for backend in present_backends() {
        adversarial::<Bcht>(backend);
        adversarial::<Iht>(backend);
        adversarial::<P2bht>(backend);
        adversarial::<LinearProbing>(backend);
        adversarial::<DoubleHashing>(backend);
    }
}

#[test]
fn bad_batches_change_nothing() {
    for backend in present_backends() {
        let mut t: HashTable<Iht, u32, u32> = HashTable::new(config(backend, 64)).unwrap();
        t.insert(&[1, 2, 3], &[1, 2, 3]).unwrap();
        let before = {
            let mut p = t.pairs().unwrap();
            p.sort();
            p
        };
        let sentinel = [Op::Erase(1), Op::Replace(4, 4), Op::Insert(u32::MAX, 1)];
        assert!(
            matches!(t.apply(&sentinel), Err(Error::SentinelKey { index: 2 })),
            "{backend}"
        );
        // More new keys than the table holds (erasing one stored key makes room for one).
        let overfull: Vec<Op<u32, u32>> = std::iter::once(Op::Erase(1))
            .chain((100..100 + t.capacity() as u32).map(|k| Op::Insert(k, k)))
            .collect();
        assert!(
            matches!(t.apply(&overfull), Err(Error::CapacityExceeded { .. })),
            "{backend}"
        );
        let mut after = t.pairs().unwrap();
        after.sort();
        assert_eq!(after, before, "{backend}");
        assert_eq!(t.apply(&[]).unwrap(), vec![]);
    }
}

/// A table that grows takes mixed batches larger than its capacity.
#[test]
fn mixed_batches_grow_the_table() {
    for backend in present_backends() {
        let mut t: HashTable<Bcht, u32, u32> =
            HashTable::new(config(backend, 64).growth(0.8)).unwrap();
        let mut m = HashMap::new();
        let mut rng = StdRng::seed_from_u64(3);
        for round in 0..3 {
            let ops = random_ops(&mut rng, 6000, 20_000);
            let got = t.apply(&ops).unwrap();
            assert_eq!(got, oracle_apply(&mut m, &ops), "{backend}, round {round}");
            same_pairs(&t, &m, &format!("growing on {backend}, round {round}"));
        }
        assert!(t.load_factor() <= 0.8);
    }
}

/// Each key type with a reserved key other than all ones: the all-ones key is stored and found, the reserved
/// key is refused and never found, pairs and errors name the user's keys.
fn reserved_key<S: SchemeInfo, K: Key, V: Value>(backend: Backend, reserved: K) {
    let what = format!("{} {}-bit keys on {backend}", S::NAME, K::BITS);
    let cfg = config(backend, 4096).reserved_key(reserved);
    let mut t: HashTable<S, K, V> = HashTable::new(cfg).unwrap();
    let mut m: HashMap<K, V> = HashMap::new();
    let keys: Vec<K> = (1..1500u64)
        .map(K::narrow)
        .filter(|&k| k != reserved)
        .chain([K::EMPTY])
        .collect();
    let values: Vec<V> = (0..keys.len() as u64).map(V::narrow).collect();
    t.insert(&keys, &values).unwrap();
    m.extend(keys.iter().copied().zip(values.iter().copied()));
    same_pairs(&t, &m, &what);
    assert_eq!(t.find(&[reserved]).unwrap(), vec![None], "{what}");
    let index = keys.len();
    let with_reserved: Vec<K> = keys.iter().copied().chain([reserved]).collect();
    let vs: Vec<V> = vec![V::narrow(1); with_reserved.len()];
    assert!(
        matches!(t.insert(&with_reserved, &vs), Err(Error::SentinelKey { index: i }) if i == index),
        "{what}"
    );
    // Erase and mixed batches see the user's keys too.
    assert_eq!(t.erase(&[K::EMPTY, reserved]).unwrap(), 1, "{what}");
    m.remove(&K::EMPTY);
    let ops = [
        Op::Find(K::EMPTY),
        Op::Insert(K::EMPTY, V::narrow(9)),
        Op::Find(K::EMPTY),
        Op::Find(reserved),
    ];
    let got = t.apply(&ops).unwrap();
    assert_eq!(got, oracle_apply(&mut m, &ops), "{what}");
    same_pairs(&t, &m, &what);
    assert!(
        t.placement().unwrap().iter().any(|p| p.0 == K::EMPTY),
        "{what}"
    );
    assert!(
        matches!(
            t.apply(&[Op::Replace(reserved, V::narrow(1))]),
            Err(Error::SentinelKey { index: 0 })
        ),
        "{what}"
    );
}

#[test]
fn a_reserved_key_frees_the_all_ones_key() {
    for backend in present_backends() {
        reserved_key::<Bcht, u32, u32>(backend, 0);
        reserved_key::<Iht, i32, u32>(backend, -2);
        reserved_key::<LinearProbing, u32, u32>(backend, 12345);
        reserved_key::<DoubleHashing, u64, u64>(backend, 1 << 40);
        reserved_key::<P2bht, i64, u32>(backend, i64::MIN);
    }
    // A reserved key that is not a key of the table's type.
    let cfg = config(Backend::Cpu, 64).reserved_key(1u64 << 40);
    assert!(matches!(
        HashTable::<Bcht, u32, u32>::new(cfg),
        Err(Error::InvalidConfig(_))
    ));
}

/// `GpuTable::apply_device` (one launch of mixed operations on device data, linear probing and double
/// hashing): on distinct keys every operation answers as the oracle does; racing on 24 keys (WarpSpeed's
/// adversarial batch) every key is stored at most once, holds a value some operation wrote, `len` moves by the
/// inserts minus the erases the statuses report, and each find answers a value written to its key. Cuckoo
/// schemes refuse with a typed error; an insert of the empty key answers FAILED and changes nothing.
fn apply_device_on<R: hashtile::gpu::transfer::HostTransfer, S: SchemeInfo>(
    backend: Backend,
    bucket: u32,
) {
    use hashtile::gpu::device_api::{op, status};
    use hashtile::gpu::{GpuOptions, GpuTable};
    use hashtile::{Engine, HashFamily};
    let options = GpuOptions {
        use_cas: true,
        plain_reads: backend == Backend::Cuda,
    };
    let what = format!("{} B={bucket} on {backend}", S::NAME);
    let nb = hashtile::scheme::sequence_buckets(S::SEQUENCE, 8192 / bucket);
    let mut t = GpuTable::<R, S>::new(
        &Default::default(),
        nb,
        bucket,
        HashFamily::new(4),
        S::default_params(bucket),
        options,
    )
    .unwrap();
    let code = |o: &Op<u32, u32>| match o {
        Op::Insert(..) => op::INSERT,
        Op::Replace(..) => op::REPLACE,
        Op::Erase(_) => op::ERASE,
        Op::Find(_) => op::FIND,
    };
    let run = |t: &mut GpuTable<R, S>, ops: &[Op<u32, u32>]| {
        let codes: Vec<u32> = ops.iter().map(code).collect();
        let keys: Vec<u32> = ops.iter().map(Op::key).collect();
        let values: Vec<u32> = ops
            .iter()
            .map(|o| match *o {
                Op::Insert(_, v) | Op::Replace(_, v) => v,
                _ => 0,
            })
            .collect();
        let (ch, kh, vh) = (t.upload(&codes), t.upload(&keys), t.upload(&values));
        let (out, done) = t.apply_device(&ch, &kh, &vh, ops.len()).unwrap();
        (t.read_u32(out), t.read_u32(done))
    };
    let mut rng = StdRng::seed_from_u64(9);
    let mut oracle = HashMap::new();
    // Distinct keys: the outcomes are the oracle's.
    for round in 0..3 {
        let mut keys: Vec<u32> = (0..2000).map(|_| rng.random_range(0..6000u32)).collect();
        keys.sort_unstable();
        keys.dedup();
        let ops: Vec<Op<u32, u32>> = keys
            .iter()
            .map(|&k| match rng.random_range(0..4) {
                0 => Op::Insert(k, rng.random()),
                1 => Op::Replace(k, rng.random()),
                2 => Op::Erase(k),
                _ => Op::Find(k),
            })
            .collect();
        let want = oracle_apply(&mut oracle, &ops);
        let (out, done) = run(&mut t, &ops);
        for (i, w) in want.iter().enumerate() {
            let got = match done[i] {
                status::INSERTED => Outcome::Inserted,
                status::UPDATED => Outcome::Updated,
                status::ERASED => Outcome::Erased,
                status::FOUND => Outcome::Found(out[i]),
                status::NOT_FOUND => Outcome::NotFound,
                s => panic!("{what}: status {s}"),
            };
            assert_eq!(
                &got, w,
                "{what}, round {round}: operation {i} ({:?})",
                ops[i]
            );
        }
        assert_eq!(t.len(), oracle.len(), "{what}, round {round}: len");
    }
    // Racing on 24 keys.
    let hot: Vec<u32> = (0..24).map(|i| 10_000 + i).collect();
    let ops: Vec<Op<u32, u32>> = (0..6000)
        .map(|i| {
            let k = hot[rng.random_range(0..hot.len())];
            match rng.random_range(0..4) {
                0 => Op::Insert(k, i),
                1 => Op::Replace(k, i),
                2 => Op::Erase(k),
                _ => Op::Find(k),
            }
        })
        .collect();
    let before = t.len();
    let (out, done) = run(&mut t, &ops);
    let mut written: HashMap<u32, HashSet<u32>> = HashMap::new();
    for o in &ops {
        if let Op::Insert(k, v) | Op::Replace(k, v) = *o {
            written.entry(k).or_default().insert(v);
        }
    }
    let (mut inserted, mut erased) = (0usize, 0usize);
    for (i, o) in ops.iter().enumerate() {
        let ok = match (o, done[i]) {
            (Op::Insert(..) | Op::Replace(..), status::INSERTED) => {
                inserted += 1;
                true
            }
            (Op::Insert(..) | Op::Replace(..), status::UPDATED) => true,
            (Op::Erase(_), status::ERASED) => {
                erased += 1;
                true
            }
            (Op::Erase(_) | Op::Find(_), status::NOT_FOUND) => true,
            (Op::Find(k), status::FOUND) => written[k].contains(&out[i]),
            _ => false,
        };
        assert!(
            ok,
            "{what}: operation {i} ({o:?}) answered {} / {}",
            done[i], out[i]
        );
    }
    assert_eq!(
        t.len() + erased,
        before + inserted,
        "{what}: len against the statuses"
    );
    let pairs: Vec<(u32, u32)> = Engine::<u32, u32>::pairs(&t).unwrap();
    assert_eq!(pairs.len(), t.len(), "{what}: a key stored twice");
    let stored: HashSet<u32> = pairs.iter().map(|p| p.0).collect();
    assert_eq!(stored.len(), pairs.len(), "{what}: a key stored twice");
    for (k, v) in pairs.iter().filter(|p| written.contains_key(&p.0)) {
        assert!(written[k].contains(v), "{what}: key {k} holds {v}");
    }
    let found = t.find_keys(&hot).unwrap();
    for (k, f) in hot.iter().zip(found) {
        assert_eq!(f.is_some(), stored.contains(k), "{what}: find of {k}");
    }
    // The empty key: an insert fails, a find answers not found; nothing changes.
    let len = t.len();
    let (_, done) = run(&mut t, &[Op::Insert(u32::MAX, 1), Op::Find(u32::MAX)]);
    assert_eq!(
        done,
        vec![status::FAILED, status::NOT_FOUND],
        "{what}: the empty key"
    );
    assert_eq!(t.len(), len);
}

fn apply_device_every_walk<R: hashtile::gpu::transfer::HostTransfer>(backend: Backend) {
    use hashtile::HashFamily;
    use hashtile::gpu::{GpuOptions, GpuTable};
    apply_device_on::<R, LinearProbing>(backend, 4);
    apply_device_on::<R, LinearProbing>(backend, 1);
    apply_device_on::<R, DoubleHashing>(backend, 8);
    let mut c = GpuTable::<R, Bcht>::new(
        &Default::default(),
        256,
        8,
        HashFamily::new(4),
        Bcht::default_params(8),
        GpuOptions {
            use_cas: true,
            plain_reads: backend == Backend::Cuda,
        },
    )
    .unwrap();
    let h = c.upload(&[0u32]);
    assert!(matches!(
        c.apply_device(&h, &h, &h, 1),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn vulkan_apply_device_races_never_corrupt_the_table() {
    #[cfg(feature = "vulkan")]
    if hashtile_tests::backends::present(Backend::Vulkan) {
        apply_device_every_walk::<hashtile::cubecl::wgpu::WgpuRuntime>(Backend::Vulkan);
    }
    #[cfg(not(feature = "vulkan"))]
    hashtile_tests::backends::present(Backend::Vulkan);
}

#[test]
fn cuda_apply_device_races_never_corrupt_the_table() {
    #[cfg(feature = "cuda")]
    if hashtile_tests::backends::present(Backend::Cuda) {
        apply_device_every_walk::<hashtile::cubecl::cuda::CudaRuntime>(Backend::Cuda);
    }
    #[cfg(not(feature = "cuda"))]
    hashtile_tests::backends::present(Backend::Cuda);
}
