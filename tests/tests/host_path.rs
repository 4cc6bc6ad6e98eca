//! The host API's batch semantics on every backend present (CPU always; Vulkan on lavapipe in CI; CUDA where
//! there is one), against a `HashMap` oracle: duplicates in a batch (last occurrence wins), upserts into a
//! filled table, absent keys, zero-length batches, batch sizes at the device batch / find chunk boundaries
//! (made small with `TableConfig::batch_keys`), pinned buffers, and wide pairs. Schemes: BCHT (evicts) and
//! IHT (stable), so both insert kernels' masked passes run.

use hashtile::{Backend, BackendChoice, Bcht, HashTable, Iht, Key, SchemeInfo, TableConfig, Value};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;

use hashtile_tests::backends::{BACKENDS, present};

/// A table of `S` for `n` keys at load 0.7 on `backend`, with device batches of `batch` keys.
fn table<S: SchemeInfo, K: Key, V: Value>(
    backend: Backend,
    n: usize,
    batch: Option<usize>,
) -> HashTable<S, K, V> {
    let mut cfg = TableConfig::for_keys(n.max(64), 0.7)
        .bucket_size(16)
        .backend(BackendChoice::Exactly(backend));
    if let Some(b) = batch {
        cfg = cfg.batch_keys(b);
    }
    HashTable::new(cfg).unwrap()
}

/// Inserts `(keys, values)` into the table and the oracle (last occurrence wins in both), then checks every
/// key of the oracle and `absent` through `find` and `find_into`.
fn insert_and_check<S: SchemeInfo>(
    t: &mut HashTable<S, u32, u32>,
    oracle: &mut HashMap<u32, u32>,
    keys: &[u32],
    values: &[u32],
    absent: &[u32],
) {
    t.insert(keys, values).unwrap();
    for (k, v) in keys.iter().zip(values) {
        oracle.insert(*k, *v);
    }
    assert_eq!(t.len(), oracle.len(), "{} stored count", S::NAME);
    let q: Vec<u32> = oracle.keys().chain(absent).copied().collect();
    let got = t.find(&q).unwrap();
    let mut into = vec![0u32; q.len()];
    t.find_into(&q, &mut into).unwrap();
    for (i, k) in q.iter().enumerate() {
        let want = oracle.get(k).copied();
        assert_eq!(got[i], want, "{} find({k})", S::NAME);
        assert_eq!(
            into[i],
            want.unwrap_or(u32::MAX),
            "{} find_into({k})",
            S::NAME
        );
    }
}

fn distinct_keys(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut seen = std::collections::HashSet::new();
    std::iter::from_fn(|| Some(rng.random::<u32>()))
        .filter(|&k| k != u32::MAX && seen.insert(k))
        .take(n)
        .collect()
}

/// `batch`: keys per device batch (copied in chunks of half that), so that duplicates straddle segments and
/// device batches; `None`: the defaults (one segment).
fn duplicates_and_updates<S: SchemeInfo>(backend: Backend, batch: Option<usize>) {
    if !present(backend) {
        return;
    }
    let n = 3000;
    // Across device batches the capacity check over-counts repeated keys (documented), so small device batches
    // get room for every occurrence.
    let cap = if batch.is_some() { 2 * n } else { n };
    let keys = distinct_keys(2 * n, 7);
    let (stored, absent) = keys.split_at(n);

    // Every key equal: one pair, the last value.
    let mut t = table::<S, u32, u32>(backend, cap, batch);
    let mut oracle = HashMap::new();
    let same = vec![stored[0]; 1000];
    let vals: Vec<u32> = (0..1000).collect();
    insert_and_check(&mut t, &mut oracle, &same, &vals, absent);
    assert_eq!(t.find(&[stored[0]]).unwrap(), vec![Some(999)]);

    // Every key twice (interleaved and far apart), the second value wins.
    let mut t = table::<S, u32, u32>(backend, cap, batch);
    let mut oracle = HashMap::new();
    let twice: Vec<u32> = stored.iter().chain(stored.iter()).copied().collect();
    let vals: Vec<u32> = (0..twice.len() as u32).collect();
    insert_and_check(&mut t, &mut oracle, &twice, &vals, absent);
    let pairs: Vec<u32> = stored.iter().flat_map(|&k| [k, k]).collect();
    let vals: Vec<u32> = (0..pairs.len() as u32).map(|i| i ^ 0x5555).collect();
    insert_and_check(&mut t, &mut oracle, &pairs, &vals, absent);

    // Upsert after insert: half the keys again with new values, plus new keys, in random order.
    let mut t = table::<S, u32, u32>(backend, 2 * n, batch);
    let mut oracle = HashMap::new();
    let first: Vec<u32> = stored.to_vec();
    insert_and_check(&mut t, &mut oracle, &first, &first, absent);
    let mut second: Vec<u32> = stored[..n / 2]
        .iter()
        .chain(&absent[..n / 2])
        .copied()
        .collect();
    let mut rng = StdRng::seed_from_u64(11);
    for i in (1..second.len()).rev() {
        second.swap(i, rng.random_range(0..=i));
    }
    let vals: Vec<u32> = second.iter().map(|k| k.wrapping_mul(3)).collect();
    insert_and_check(&mut t, &mut oracle, &second, &vals, &absent[n / 2..]);
}

#[test]
fn duplicates_and_updates_match_oracle() {
    for b in BACKENDS {
        for batch in [None, Some(2048)] {
            duplicates_and_updates::<Bcht>(b, batch);
            duplicates_and_updates::<Iht>(b, batch);
        }
    }
}

fn chunk_boundaries(backend: Backend) {
    if !present(backend) {
        return;
    }
    let chunk = 4096; // keys per device batch (copied in chunks of 2048): a multiple of CHUNK_ALIGN
    let keys = distinct_keys(8 * chunk, 3);
    for len in [
        0,
        1,
        chunk - 1,
        chunk,
        chunk + 1,
        2 * chunk - 1,
        2 * chunk,
        2 * chunk + 1,
    ] {
        let mut t = table::<Bcht, u32, u32>(backend, 4 * chunk, Some(chunk));
        let mut oracle = HashMap::new();
        // The batch repeats its first keys at the end, so duplicates straddle device batches.
        let mut batch: Vec<u32> = keys[..len].to_vec();
        batch.extend_from_slice(&keys[..len.min(40)]);
        let vals: Vec<u32> = (0..batch.len() as u32).collect();
        insert_and_check(
            &mut t,
            &mut oracle,
            &batch,
            &vals,
            &keys[4 * chunk..4 * chunk + len],
        );
        // A second batch of updates and new keys crossing the same boundaries.
        let upd: Vec<u32> = keys[len / 2..len + len / 2].to_vec();
        let vals: Vec<u32> = upd.iter().map(|k| !k).collect();
        insert_and_check(&mut t, &mut oracle, &upd, &vals, &keys[6 * chunk..]);
    }
}

#[test]
fn batch_sizes_at_chunk_boundaries_match_oracle() {
    for b in BACKENDS {
        chunk_boundaries(b);
    }
}

/// Batches smaller than one default copy chunk (2^22 keys) cut into `pieces` chunks of at least 2^16 keys
/// (`TableConfig::copy_chunks`): duplicates straddle the chunks (the first keys repeated at the end), and a second
/// batch updates half the keys and adds new ones.
fn several_chunks<S: SchemeInfo>(backend: Backend, pieces: usize, len: usize) {
    if !present(backend) {
        return;
    }
    let keys = distinct_keys(3 * len, 5);
    let cfg = TableConfig::for_keys(2 * len, 0.7)
        .bucket_size(16)
        .copy_chunks(pieces)
        .backend(BackendChoice::Exactly(backend));
    let mut t = HashTable::<S, u32, u32>::new(cfg).unwrap();
    let mut oracle = HashMap::new();
    let mut batch: Vec<u32> = keys[..len].to_vec();
    batch.extend_from_slice(&keys[..1000]);
    let vals: Vec<u32> = (0..batch.len() as u32).collect();
    insert_and_check(&mut t, &mut oracle, &batch, &vals, &keys[2 * len..]);
    let upd: Vec<u32> = keys[len / 2..len + len / 2].to_vec();
    let vals: Vec<u32> = upd.iter().map(|k| !k).collect();
    insert_and_check(&mut t, &mut oracle, &upd, &vals, &keys[2 * len..]);
}

#[test]
fn small_batches_copied_in_several_chunks_match_oracle() {
    for b in BACKENDS {
        // With the 1000 repeated keys: 4 chunks of 67 584 keys (2^16 rounded up to CHUNK_ALIGN; the last short),
        // and 3 of 67 584 (the last short).
        several_chunks::<Bcht>(b, 4, (1 << 18) + 7);
        several_chunks::<Iht>(b, 3, 3 << 16);
    }
}

fn zero_length(backend: Backend) {
    if !present(backend) {
        return;
    }
    let mut t = table::<Bcht, u32, u32>(backend, 100, None);
    t.insert(&[], &[]).unwrap();
    assert_eq!(t.find(&[]).unwrap(), Vec::<Option<u32>>::new());
    t.find_into(&[], &mut []).unwrap();
    t.insert(&[5], &[6]).unwrap();
    t.insert(&[], &[]).unwrap();
    assert_eq!(t.len(), 1);
    assert_eq!(t.find(&[5, 7]).unwrap(), vec![Some(6), None]);
}

#[test]
fn zero_length_batches_are_no_ops() {
    for b in BACKENDS {
        zero_length(b);
    }
}

fn pinned(backend: Backend) {
    if !present(backend) {
        return;
    }
    let n = 5000;
    let keys = distinct_keys(2 * n, 5);
    let mut t = table::<Bcht, u32, u32>(backend, n, Some(1024));
    let mut k = t.pinned_buffer::<u32>(n);
    k.copy_from_slice(&keys[..n]);
    let mut v = t.pinned_buffer::<u32>(n);
    for (i, x) in v.iter_mut().enumerate() {
        *x = i as u32 * 7;
    }
    // On CUDA the buffers are page-locked and take the direct path; elsewhere they are ordinary memory.
    assert_eq!(k.is_pinned(), backend == Backend::Cuda);
    t.insert(&k, &v).unwrap();
    let mut q = t.pinned_buffer::<u32>(2 * n);
    q.copy_from_slice(&keys);
    let mut out = t.pinned_buffer::<u32>(2 * n);
    t.find_into(&q, &mut out).unwrap();
    for i in 0..2 * n {
        let want = if i < n { i as u32 * 7 } else { u32::MAX };
        assert_eq!(out[i], want, "pinned find_into at {i}");
    }
}

#[test]
fn pinned_buffers_round_trip() {
    for b in BACKENDS {
        pinned(b);
    }
}

fn wide_pairs(backend: Backend) {
    if !present(backend) {
        return;
    }
    // Iht is stable, so 64-bit pairs run on GPUs too (parallel key and value arrays).
    let n = 2000;
    let mut rng = StdRng::seed_from_u64(9);
    let keys: Vec<u64> = (0..n).map(|_| rng.random::<u64>() >> 1).collect();
    let mut t = table::<Iht, u64, u64>(backend, n, Some(512));
    let mut oracle = HashMap::new();
    let batch: Vec<u64> = keys.iter().chain(&keys[..300]).copied().collect();
    let vals: Vec<u64> = (0..batch.len() as u64).map(|i| i << 40).collect();
    t.insert(&batch, &vals).unwrap();
    for (k, v) in batch.iter().zip(&vals) {
        oracle.insert(*k, *v);
    }
    assert_eq!(t.len(), oracle.len());
    let absent: Vec<u64> = (0..500).map(|i| (1u64 << 63) | i).collect();
    let q: Vec<u64> = keys.iter().chain(&absent).copied().collect();
    for (k, got) in q.iter().zip(t.find(&q).unwrap()) {
        assert_eq!(got, oracle.get(k).copied());
    }
    // A stored all-ones value is still reported present by `find`.
    t.insert(&[keys[0]], &[u64::MAX]).unwrap();
    assert_eq!(t.find(&[keys[0]]).unwrap(), vec![Some(u64::MAX)]);
}

#[test]
fn wide_pairs_match_oracle() {
    for b in BACKENDS {
        wide_pairs(b);
    }
}

/// Mixed widths (32-bit keys, 64-bit values) take the wide layout on GPUs.
#[test]
fn mixed_widths_match_oracle() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        let keys = distinct_keys(1500, 21);
        let mut t = table::<Iht, u32, u64>(backend, keys.len(), None);
        let vals: Vec<u64> = keys.iter().map(|&k| (k as u64) << 20).collect();
        t.insert(&keys, &vals).unwrap();
        let got = t.find(&keys).unwrap();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(got[i], Some((*k as u64) << 20));
        }
    }
}

/// Bad input is a typed error at the door, never a panic or a huge allocation.
#[test]
fn bad_configurations_are_typed_errors() {
    use hashtile::Error;
    let cpu = BackendChoice::Exactly(Backend::Cpu);
    for lf in [-0.5, 0.0, 1.5, f64::NAN, f64::INFINITY] {
        let r = HashTable::<Bcht, u32, u32>::new(TableConfig::for_keys(1000, lf).backend(cpu));
        assert!(
            matches!(&r, Err(Error::InvalidConfig(m)) if m.contains("load factor")),
            "load factor {lf}: {:?}",
            r.err()
        );
    }
    for b in [0, 3, 64] {
        let r = HashTable::<Bcht, u32, u32>::new(
            TableConfig::for_keys(1000, 0.8).bucket_size(b).backend(cpu),
        );
        assert!(matches!(r, Err(Error::InvalidConfig(_))), "bucket size {b}");
    }
    let r = HashTable::<Bcht, u32, u32>::new(TableConfig::with_capacity(0).backend(cpu));
    assert!(matches!(r, Err(Error::InvalidConfig(_))), "zero capacity");
    let r = HashTable::<Bcht, u32, u32>::new(TableConfig::for_keys(1 << 40, 0.8).backend(cpu));
    assert!(
        matches!(r, Err(Error::InvalidConfig(_))),
        "2^40 keys: {:?}",
        r.err()
    );
    let r = HashTable::<Bcht, u32, u32>::new(TableConfig::with_capacity(1 << 32).backend(cpu));
    assert!(matches!(r, Err(Error::InvalidConfig(_))), "2^32 slots");
    let r = HashTable::<Bcht, u32, u32>::new(
        TableConfig::for_keys(1000, 0.8).batch_keys(0).backend(cpu),
    );
    assert!(matches!(r, Err(Error::InvalidConfig(_))), "zero batch keys");
    let r = HashTable::<Bcht, u32, u32>::new(
        TableConfig::for_keys(1000, 0.8).copy_chunks(0).backend(cpu),
    );
    assert!(
        matches!(&r, Err(Error::InvalidConfig(m)) if m.contains("copy_chunks")),
        "zero copy chunks: {:?}",
        r.err()
    );
    let mut t =
        HashTable::<Bcht, u32, u32>::new(TableConfig::for_keys(100, 0.8).backend(cpu)).unwrap();
    assert!(matches!(
        t.insert(&[1, 2], &[1]),
        Err(Error::LengthMismatch { .. })
    ));
    assert!(matches!(
        t.find_into(&[1, 2], &mut [0]),
        Err(Error::LengthMismatch { .. })
    ));
    assert!(matches!(
        t.insert(&[1, u32::MAX], &[1, 2]),
        Err(Error::SentinelKey { index: 1 })
    ));
    let too_many: Vec<u32> = (0..1000).collect();
    assert!(matches!(
        t.insert(&too_many, &too_many),
        Err(Error::CapacityExceeded { .. })
    ));
    assert!(t.is_empty(), "failed inserts leave the table unchanged");
}

fn sentinel_refused(backend: Backend) {
    if !present(backend) {
        return;
    }
    // Device batches of 4096 keys in chunks of 2048: the sentinel sits in the first chunk, a later chunk, and a
    // later device batch; each time the whole call is refused and the table keeps what it had. The 4000-key
    // batches are one device batch, whose inserts are queued chunk by chunk as the values land: none may be
    // queued before the scan has passed the whole batch.
    let keys = distinct_keys(10_000, 13);
    for (len, at) in [
        (10_000, 0),
        (10_000, 3000),
        (10_000, 9000),
        (4000, 0),
        (4000, 3999),
    ] {
        let keys = &keys[..len];
        let mut t = table::<Bcht, u32, u32>(backend, 20_000, Some(4096));
        t.insert(&keys[..100], &keys[..100]).unwrap();
        let mut batch = keys.to_vec();
        batch[at] = u32::MAX;
        let r = t.insert(&batch, &batch);
        assert!(
            matches!(r, Err(hashtile::Error::SentinelKey { index }) if index == at),
            "{backend} sentinel at {at}: {r:?}"
        );
        assert_eq!(
            t.len(),
            100,
            "{backend}: a refused insert changed the table"
        );
        assert_eq!(t.find(&keys[100..101]).unwrap(), vec![None]);
        let kept: Vec<Option<u32>> = keys[..100].iter().map(|&k| Some(k)).collect();
        assert_eq!(t.find(&keys[..100]).unwrap(), kept, "{backend}");
    }
    // Wider pairs: u64 keys (the sentinel is u64::MAX), and u32 keys with u64 values, whose keys the GPUs widen
    // (the sentinel stays u32::MAX, not the widened word's all ones).
    let wide: Vec<u64> = keys.iter().map(|&k| (k as u64) << 20 | 7).collect();
    let mut t = table::<Iht, u64, u64>(backend, 20_000, Some(4096));
    t.insert(&wide[..100], &wide[..100]).unwrap();
    let mut batch = wide[..4000].to_vec();
    batch[3999] = u64::MAX;
    let r = t.insert(&batch, &batch);
    assert!(
        matches!(r, Err(hashtile::Error::SentinelKey { index: 3999 })),
        "{backend} u64: {r:?}"
    );
    assert_eq!(t.len(), 100, "{backend} u64");
    let mut t = table::<Iht, u32, u64>(backend, 20_000, Some(4096));
    let mut batch = keys[..4000].to_vec();
    batch[2500] = u32::MAX;
    let vals: Vec<u64> = batch.iter().map(|&k| k as u64).collect();
    let r = t.insert(&batch, &vals);
    assert!(
        matches!(r, Err(hashtile::Error::SentinelKey { index: 2500 })),
        "{backend} u32 keys, u64 values: {r:?}"
    );
    assert_eq!(t.len(), 0, "{backend} u32 keys, u64 values");
}

#[test]
fn sentinel_keys_are_refused_with_the_table_unchanged() {
    for b in BACKENDS {
        sentinel_refused(b);
    }
}

fn near_full(backend: Backend) {
    if !present(backend) {
        return;
    }
    let keys = distinct_keys(3000, 17);
    let mut t = table::<Bcht, u32, u32>(backend, 1000, None);
    let cap = t.capacity();
    t.insert(&keys[..1000], &keys[..1000]).unwrap();
    // Overlapping batch whose new keys do not fit: refused, nothing changed (updates included).
    let over = cap - 1000 + 1;
    let batch: Vec<u32> = keys[500..1000 + over].to_vec();
    let vals = vec![7u32; batch.len()];
    match t.insert(&batch, &vals) {
        Err(hashtile::Error::CapacityExceeded { len, incoming, .. }) => {
            assert_eq!((len, incoming), (1000, over), "{backend}");
        }
        other => panic!("{backend}: expected CapacityExceeded, got {other:?}"),
    }
    assert_eq!(t.len(), 1000);
    assert_eq!(t.find(&keys[500..501]).unwrap(), vec![Some(keys[500])]);
    // A batch larger than the free space that mostly updates fits: accepted.
    let batch: Vec<u32> = keys[..1000 + 20].to_vec();
    let vals = vec![9u32; batch.len()];
    t.insert(&batch, &vals).unwrap();
    assert_eq!(t.len(), 1020, "{backend}");
    assert!(t.find(&batch).unwrap().iter().all(|v| *v == Some(9)));
}

#[test]
fn near_full_batches_are_counted_exactly() {
    for b in BACKENDS {
        near_full(b);
    }
}

/// IHT B = 16 at load 0.95 with the paper's two-choice rule (`paper_params`), which gives up on some keys there:
/// its default overflow sequence (BGHT's backyard) places every key in one build (no re-seeded rebuild), matching the oracle and
/// keeping each key in one of its candidate buckets; `max_chain = 0` (the paper's rule) leaves keys unplaced at
/// the same load.
fn iht_at_load_0_95(backend: Backend) {
    if !present(backend) {
        return;
    }
    let n = 1 << 15;
    let keys = distinct_keys(n, 90);
    let values: Vec<u32> = keys.iter().map(|k| k.wrapping_mul(7)).collect();
    let cfg = |max_chain: u32| {
        let mut p = Iht::paper_params(16);
        p.max_chain = max_chain;
        TableConfig::for_keys(n, 0.95)
            .bucket_size(16)
            .params(p)
            .max_rebuilds(0)
            .backend(BackendChoice::Exactly(backend))
    };
    let mut t: HashTable<Iht, u32, u32> =
        HashTable::new(cfg(Iht::paper_params(16).max_chain)).unwrap();
    t.insert(&keys, &values).unwrap();
    assert_eq!(t.len(), n, "iht overflow on {backend}: every key placed");
    let absent = distinct_keys(n, 91);
    let absent: Vec<u32> = absent
        .into_iter()
        .filter(|k| !keys.contains(k))
        .take(4096)
        .collect();
    let mut q = keys.clone();
    q.extend(&absent);
    let got = t.find(&q).unwrap();
    for (i, k) in q.iter().enumerate() {
        let want = (i < n).then(|| values[i]);
        assert_eq!(got[i], want, "iht overflow on {backend}: find({k})");
    }
    for (k, b) in t.placement().unwrap() {
        assert!(
            t.candidate_buckets(k).contains(&b),
            "{k} outside its candidates on {backend}"
        );
    }
    let mut paper: HashTable<Iht, u32, u32> = HashTable::new(cfg(0)).unwrap();
    assert!(
        matches!(
            paper.insert(&keys, &values),
            Err(hashtile::Error::BuildFailed { .. })
        ),
        "the paper's IHT-16 at load 0.95 on {backend} was expected to leave keys unplaced"
    );
}

#[test]
fn iht_overflow_builds_at_load_0_95() {
    for b in BACKENDS {
        iht_at_load_0_95(b);
    }
}
