//! The GPU store of chained tables (`hashtile::gpu::chained`) checked on one CubeCL runtime: each check is
//! generic over the runtime and shared by a test per GPU backend (`tests/chained.rs`), with the user kernel
//! that calls the table's device function.

use crate::chained::distinct_keys;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;

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

/// The GPU store (`hashtile::gpu::chained`) against the multimap, as `multimap_sequence` (tests/chained.rs)
/// runs the CPU table: multimap inserts (distinct keys per batch), erases, erase_all, replaces, a flush in the
/// middle, growth past a small pool, and the invariants of the read-back table after every batch
/// (`CpuChained::from_packed`).
pub fn gpu_store_matches_multimap<R: hashtile::gpu::transfer::HostTransfer>(
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
            assert_eq!(
                &values[offsets[i] as usize..offsets[i + 1] as usize],
                want,
                "find_all of {k}"
            );
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

/// The GPU slab allocator alone: `n` allocations from a pool of `n` take every slab once; one more finds none;
/// the slabs given back can all be taken again.
pub fn gpu_allocator_takes_every_slab_once<R: hashtile::gpu::transfer::HostTransfer>(
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

/// Queued inserts (`insert_queued`, the small-batch path): many batches into a pool too small for them, so that
/// some batches are queued without a read and others find the pool short and grow it; once settled, the length,
/// every key's values and the table's invariants are those of the multimap.
pub fn gpu_queued_inserts_match_the_multimap<R: hashtile::gpu::transfer::HostTransfer>(
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

/// Queued inserts proven by the table's occupancy: keys that all fall in one list (the worst case for the
/// pool: a chain of full slabs), queued between erases and a flush, never wait for the device while the pool
/// provably suffices, never find it empty (`settle` would say so), and end as the multimap does; a pool too
/// small for the next batch grows.
pub fn gpu_queued_inserts_bounded_by_occupancy<R: hashtile::gpu::transfer::HostTransfer>(
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

/// The device function from a user's kernel: mixed operations of distinct keys on a prefilled table (so every
/// outcome is known), then `recount` and host finds agree with the oracle.
pub fn gpu_device_function_from_a_user_kernel<R: hashtile::gpu::transfer::HostTransfer>(
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

/// One launch of multimap inserts with more threads than a GPU holds at once (600 000 pairs, about six copies a
/// key, into a pool that has to grow): on CUDA it runs the insert entry held to 8 resident cubes per
/// multiprocessor (`chained_insert_kernel_min_blocks_8`), and its retries after the pool grew run the other.
/// The table equals the multimap: every key's values (in any order) and its count, and the lists' invariants.
pub fn gpu_large_insert_launch_matches_the_multimap<R: hashtile::gpu::transfer::HostTransfer>(
    client: hashtile::cubecl::prelude::ComputeClient<R>,
) {
    use hashtile::chained::cpu::CpuChained;
    use hashtile::cubecl::CubeElement;
    use hashtile::gpu::chained::GpuChained;
    let family = hashtile::HashFamily::new(hashtile::DEFAULT_SEED);
    let mut rng = StdRng::seed_from_u64(78);
    let n = 600_000usize;
    let universe = 100_000u32;
    let keys: Vec<u32> = (0..n).map(|_| rng.random_range(0..universe)).collect();
    let values: Vec<u32> = (0..n as u32).collect();
    // A list per 8 pairs and a pool for a quarter of them: the launch finds the pool empty, grows it and retries.
    let mut t = GpuChained::<R>::new(&client, family, (n / 8) as u32, (n / 60) as u32).unwrap();
    let kh = client.create_from_slice(u32::as_bytes(&keys));
    let vh = client.create_from_slice(u32::as_bytes(&values));
    assert_eq!(t.insert_device(&kh, &vh, n, false).unwrap(), n);
    let mut oracle: HashMap<u32, Vec<u32>> = HashMap::new();
    for (k, v) in keys.iter().zip(&values) {
        oracle.entry(*k).or_default().push(*v);
    }
    let (words, bits) = t.download().unwrap();
    let (buckets, pool) = t.shape_of();
    let mut cpu = CpuChained::from_packed(family, buckets, pool, &words, &bits).unwrap();
    assert_eq!(cpu.check().expect("GPU table invariants").live, n);
    assert_eq!(t.len(), n);
    let mut asked: Vec<u32> = oracle.keys().copied().collect();
    asked.extend([universe, universe + 7]);
    let (offsets, found) = t.find_all(&asked).unwrap();
    let counts = t.count(&asked).unwrap();
    for (i, k) in asked.iter().enumerate() {
        let mut got = found[offsets[i] as usize..offsets[i + 1] as usize].to_vec();
        got.sort_unstable();
        let mut want = oracle.get(k).cloned().unwrap_or_default();
        want.sort_unstable();
        assert_eq!(got, want, "values of {k}");
        assert_eq!(counts[i] as usize, want.len(), "count of {k}");
    }
}
