//! Chained (SlabHash) tables against simple oracles: a `HashMap<K, Vec<V>>` multimap (copies in insertion order)
//! for multimap inserts, a `HashMap<K, V>` for replace, over long random sequences of batches with erases and
//! re-inserts, flushes in the middle, growth past the initial slab pool, reserved keys, and concurrent mixed
//! batches (the SlabHash paper's operation mixes) with the table's invariants checked after every batch.

use hashtile::chained::{ChainedConfig, ChainedTable, Op, Outcome};
use hashtile::{Backend, BackendChoice, Error, Key, Value};
use hashtile_tests::backends::{present, present_backends};
use hashtile_tests::chained::{
    MIXES, apply_u32, distinct_keys, key_of, keys_of, mixed_batch, same_as_multimap, table,
    value_back, value_of,
};
use hashtile_tests::chained_gpu::{
    gpu_allocator_takes_every_slab_once, gpu_device_function_from_a_user_kernel,
    gpu_queued_inserts_bounded_by_occupancy, gpu_queued_inserts_match_the_multimap,
    gpu_store_matches_multimap,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::{HashMap, HashSet};

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
    for b in present_backends() {
        multimap_sequence::<u32, u32>(b, 1);
        multimap_sequence::<u64, u64>(b, 2);
        multimap_sequence::<u32, u64>(b, 3);
        multimap_sequence::<u64, u32>(b, 4);
    }
}

#[test]
fn replace_sequences_match_the_hashmap() {
    for b in present_backends() {
        replace_sequence::<u32, u32>(b);
        replace_sequence::<u64, u64>(b);
    }
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
    for b in present_backends() {
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
    for b in present_backends() {
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
        if present(g) {
            assert_eq!(t.unwrap().backend(), g);
        } else {
            assert!(matches!(t, Err(Error::BackendUnavailable { .. })));
        }
    }
}

#[test]
fn concurrent_mixed_batches_keep_the_invariants() {
    for b in present_backends() {
        mixed_batches::<u32, u32>(b);
        mixed_batches::<u64, u64>(b);
    }
}

/// One operation of a mixed batch and what it returned.
type OpAndOutcome = (Op<u32, u32>, Outcome<u32>);

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
                    let mut now: Vec<u32> = all.values
                        [all.offsets[i] as usize..all.offsets[i + 1] as usize]
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

#[test]
fn vulkan_gpu_store_matches_multimap() {
    if present(Backend::Vulkan) {
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
    if present(Backend::Cuda) {
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
    for g in present_backends()
        .into_iter()
        .filter(|&b| b != Backend::Cpu)
    {
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

#[cfg(feature = "cuda")]
#[test]
fn cuda_gpu_large_insert_launch_matches_the_multimap() {
    if present(Backend::Cuda) {
        use hashtile::cubecl::prelude::Runtime;
        hashtile_tests::chained_gpu::gpu_large_insert_launch_matches_the_multimap(
            hashtile::cubecl::cuda::CudaRuntime::client(&Default::default()),
        );
    }
}

#[test]
fn vulkan_gpu_allocator_takes_every_slab_once() {
    if present(Backend::Vulkan) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_allocator_takes_every_slab_once(hashtile::cubecl::wgpu::WgpuRuntime::client(
            &Default::default(),
        ));
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_gpu_allocator_takes_every_slab_once() {
    if present(Backend::Cuda) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_allocator_takes_every_slab_once(hashtile::cubecl::cuda::CudaRuntime::client(
            &Default::default(),
        ));
    }
}

#[test]
fn vulkan_gpu_queued_inserts_match_the_multimap() {
    if present(Backend::Vulkan) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_queued_inserts_match_the_multimap(hashtile::cubecl::wgpu::WgpuRuntime::client(
            &Default::default(),
        ));
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_gpu_queued_inserts_match_the_multimap() {
    if present(Backend::Cuda) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_queued_inserts_match_the_multimap(hashtile::cubecl::cuda::CudaRuntime::client(
            &Default::default(),
        ));
    }
}

#[test]
fn vulkan_gpu_queued_inserts_bounded_by_occupancy() {
    if present(Backend::Vulkan) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_queued_inserts_bounded_by_occupancy(hashtile::cubecl::wgpu::WgpuRuntime::client(
            &Default::default(),
        ));
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_gpu_queued_inserts_bounded_by_occupancy() {
    if present(Backend::Cuda) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_queued_inserts_bounded_by_occupancy(hashtile::cubecl::cuda::CudaRuntime::client(
            &Default::default(),
        ));
    }
}

#[test]
fn vulkan_gpu_device_function_from_a_user_kernel() {
    if present(Backend::Vulkan) {
        use hashtile::cubecl::prelude::Runtime;
        gpu_device_function_from_a_user_kernel(hashtile::cubecl::wgpu::WgpuRuntime::client(
            &Default::default(),
        ));
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_gpu_device_function_from_a_user_kernel() {
    if present(Backend::Cuda) {
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
    if present(Backend::Cuda) {
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
