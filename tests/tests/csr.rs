//! CSR (HashGraph) tables against simple oracles: a `HashMap<K, Vec<V>>` multimap for `count` / `find_all`, and
//! a nested-loop join for `CsrJoin` (both methods). Inputs: unique keys, heavy duplicates, all keys equal, empty
//! inputs, absent probe keys, a hash range of 1, the all-ones key (a CSR table has no sentinel), u32 and u64.

use hashtile::{
    Backend, BackendChoice, CsrBuild, CsrConfig, CsrJoin, CsrTable, Error, JoinMethod, Key, Value,
};
use hashtile_tests::backends::present;
use hashtile_tests::joins::nested_loop_join;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;

/// Checks `count` and `find_all` of a table built from `(keys, values)` against the multimap, for the stored
/// keys and `absent`.
fn check_lookups<K: Key, V: Value + Ord>(cfg: &CsrConfig, keys: &[K], values: &[V], absent: &[K]) {
    let t = CsrTable::build(cfg, keys, values).unwrap();
    assert_eq!(t.len(), keys.len());
    let mut oracle: HashMap<K, Vec<V>> = HashMap::new();
    for (&k, &v) in keys.iter().zip(values) {
        oracle.entry(k).or_default().push(v);
    }
    let queries: Vec<K> = oracle.keys().chain(absent).copied().collect();
    let counts = t.count(&queries).unwrap();
    let all = t.find_all(&queries).unwrap();
    assert_eq!(all.offsets.len(), queries.len() + 1);
    assert_eq!(*all.offsets.last().unwrap() as usize, all.values.len());
    for (i, q) in queries.iter().enumerate() {
        let want = oracle.get(q).cloned().unwrap_or_default();
        assert_eq!(counts[i] as usize, want.len(), "count of {q}");
        let mut got = all.values[all.offsets[i] as usize..all.offsets[i + 1] as usize].to_vec();
        let mut want = want;
        got.sort();
        want.sort();
        assert_eq!(got, want, "values of {q}");
    }
    // Every pair is stored once: the placed pairs are the input as a multiset.
    let mut placed = t.pairs().unwrap();
    let mut input: Vec<(K, V)> = keys.iter().copied().zip(values.iter().copied()).collect();
    placed.sort();
    input.sort();
    assert_eq!(placed, input);
}

/// Checks both join methods against a nested-loop join.
fn check_join<K: Key>(cfg: &CsrConfig, left: &[K], right: &[K]) {
    let want = nested_loop_join(left, right);
    for method in [JoinMethod::Probe, JoinMethod::Intersect] {
        let join = CsrJoin::plan(cfg, left, right, method).unwrap();
        if let BackendChoice::Exactly(b) = cfg.backend {
            assert_eq!(join.backend(), b);
        }
        assert_eq!(
            join.len(),
            want.len(),
            "{method:?} size, {cfg:?}, {} x {}",
            left.len(),
            right.len()
        );
        let (mut l, mut r) = (vec![0u32; join.len()], vec![0u32; join.len()]);
        join.write_into(&mut l, &mut r).unwrap();
        let mut got: Vec<(u32, u32)> = l.into_iter().zip(r).collect();
        got.sort();
        assert_eq!(got, want, "{method:?} pairs");
    }
}

fn random_keys<K: Key>(n: usize, distinct: u64, seed: u64) -> Vec<K> {
    let mut rng = StdRng::seed_from_u64(seed);
    let bits = K::BITS;
    (0..n)
        .map(|_| {
            let x = rng.random_range(0..distinct);
            // Spread the small range over the key space (a bijective mix), keeping duplicates.
            K::narrow(x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits))
        })
        .collect()
}

#[test]
fn lookups_match_multimap() {
    let cfg = CsrConfig::default();
    // Unique keys, light and heavy duplicates, all keys equal, at several hash ranges (1 vertex included).
    for (n, distinct) in [(5000, 1 << 40), (5000, 1000), (4000, 125), (3000, 1)] {
        let keys: Vec<u32> = random_keys(n, distinct, n as u64 + distinct);
        let values: Vec<u32> = (0..n as u32).collect();
        let absent: Vec<u32> = random_keys::<u32>(200, 1 << 40, 99)
            .into_iter()
            .filter(|k| !keys.contains(k))
            .collect();
        for c in [
            cfg.clone(),
            cfg.clone().range_factor(0.5),
            cfg.clone().range_factor(2.0),
            cfg.clone().vertices(1),
        ] {
            check_lookups(&c, &keys, &values, &absent);
        }
    }
}

#[test]
fn wide_keys_and_values_match_multimap() {
    let keys: Vec<u64> = random_keys(3000, 700, 5);
    let values: Vec<u64> = keys.iter().map(|k| k.rotate_left(17)).collect();
    check_lookups(&CsrConfig::default(), &keys, &values, &[1, 2, 3]);
    let narrow_values: Vec<u32> = (0..3000).collect();
    check_lookups(&CsrConfig::default(), &keys, &narrow_values, &[]);
}

#[test]
fn every_key_is_storable() {
    // No empty slots, so no sentinel: the all-ones key is an ordinary key.
    let keys = [u32::MAX, 0, u32::MAX, 5];
    let values = [1u32, 2, 3, 4];
    check_lookups(&CsrConfig::default(), &keys, &values, &[6]);
}

#[test]
fn empty_inputs() {
    let t = CsrTable::<u32, u32>::build(&CsrConfig::default(), &[], &[]).unwrap();
    assert!(t.is_empty());
    assert_eq!(t.vertices(), 1);
    assert_eq!(t.count(&[1, 2]).unwrap(), vec![0, 0]);
    let all = t.find_all(&[]).unwrap();
    assert_eq!((all.offsets, all.values), (vec![0], vec![]));
    check_join::<u32>(&CsrConfig::default(), &[], &[1, 2]);
    check_join::<u32>(&CsrConfig::default(), &[1, 2], &[]);
    check_join::<u32>(&CsrConfig::default(), &[], &[]);
}

#[test]
fn joins_match_nested_loops() {
    let cfg = CsrConfig::default();
    let mut rng = StdRng::seed_from_u64(3);
    for (nl, nr, distinct) in [
        (300, 400, 1 << 40),
        (300, 400, 50),
        (200, 150, 1),
        (500, 10, 20),
        // More vertices than one chunk of `write_into`'s intersect (4096), some chunks without pairs.
        (6000, 5000, 1500),
    ] {
        let left: Vec<u32> = random_keys(nl, distinct, rng.random());
        let right: Vec<u32> = random_keys(nr, distinct, rng.random());
        for c in [
            cfg.clone(),
            cfg.clone().vertices(1),
            cfg.clone().range_factor(0.5),
            cfg.clone().vertices(20_000),
        ] {
            check_join(&c, &left, &right);
        }
    }
    let left: Vec<u64> = random_keys(300, 40, 8);
    let right: Vec<u64> = random_keys(300, 40, 9);
    check_join(&cfg, &left, &right);
}

#[test]
fn bad_input_is_a_typed_error() {
    let cfg = CsrConfig::default();
    assert!(matches!(
        CsrTable::<u32, u32>::build(&cfg, &[1, 2], &[1]),
        Err(Error::LengthMismatch { .. })
    ));
    for f in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            matches!(
                CsrTable::<u32, u32>::build(&cfg.clone().range_factor(f), &[1], &[1]),
                Err(Error::InvalidConfig(_))
            ),
            "range factor {f}"
        );
    }
    assert!(matches!(
        CsrTable::<u32, u32>::build(&cfg.clone().vertices(0), &[1], &[1]),
        Err(Error::InvalidConfig(_))
    ));
    for b in [Backend::Cuda, Backend::Vulkan] {
        let gpu = CsrConfig {
            backend: BackendChoice::Exactly(b),
            ..CsrConfig::default()
        };
        // An absent device is a typed error for every width and for joins.
        if !hashtile::is_available(b) {
            assert!(matches!(
                CsrTable::<u32, u32>::build(&gpu, &[1], &[1]),
                Err(Error::BackendUnavailable { .. })
            ));
            assert!(matches!(
                CsrTable::<u64, u64>::build(&gpu, &[1], &[1]),
                Err(Error::BackendUnavailable { .. })
            ));
            assert!(matches!(
                CsrJoin::plan(&gpu, &[1u32], &[1u32], JoinMethod::Probe),
                Err(Error::BackendUnavailable { .. })
            ));
        }
    }
    // Device knobs are checked on every backend (the CPU ignores them, but a bad value is a bad config on
    // every machine, whichever backend `Auto` finds).
    let cpu = CsrConfig {
        backend: BackendChoice::Exactly(Backend::Cpu),
        ..cfg.clone()
    };
    for build in [0, 100, 128, 384, 8192].map(|b| CsrBuild::V2 { bin_vertices: b }) {
        let c = CsrConfig {
            build,
            ..cpu.clone()
        };
        assert!(matches!(
            CsrTable::<u32, u32>::build(&c, &[1], &[1]),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            CsrJoin::plan(&c, &[1u32], &[1u32], JoinMethod::Intersect),
            Err(Error::InvalidConfig(_))
        ));
    }
    for tile in [3, 64] {
        let c = CsrConfig {
            lookup_tile: tile,
            ..cpu.clone()
        };
        assert!(matches!(
            CsrTable::<u32, u32>::build(&c, &[1], &[1]),
            Err(Error::InvalidConfig(_))
        ));
    }
    let explicit_cpu = CsrConfig {
        backend: BackendChoice::Exactly(Backend::Cpu),
        ..CsrConfig::default()
    };
    let t = CsrTable::<u64, u64>::build(&explicit_cpu, &[1], &[1]).unwrap();
    assert_eq!(t.backend(), Backend::Cpu);
    let join = CsrJoin::plan(&cfg, &[1u32, 1], &[1u32], JoinMethod::Probe).unwrap();
    let (mut l, mut r) = (vec![0u32; 1], vec![0u32; 2]);
    assert!(matches!(
        join.write_into(&mut l, &mut r),
        Err(Error::LengthMismatch { .. })
    ));
}

/// The device CSR table (`gpu::csr::GpuCsr`, 32-bit pairs) against the CPU table and the multimap.
fn gpu_matches_cpu<R: hashtile::gpu::transfer::HostTransfer>(
    backend: Backend,
    client: hashtile::cubecl::prelude::ComputeClient<R>,
) {
    use hashtile::gpu::csr::GpuCsr;
    for (n, distinct, vertices) in [
        (5000usize, 1u64 << 40, 5000u32),
        (5000, 300, 2500),
        (3000, 1, 3000),
        (4000, 500, 1),
        (0, 1, 1),
        (70_000, 9000, 140_000),
    ] {
        let keys: Vec<u32> = random_keys(n, distinct, n as u64 ^ distinct);
        let values: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(7)).collect();
        let cfg = CsrConfig::default().vertices(vertices);
        let cpu = CsrTable::build(&cfg, &keys, &values).unwrap();
        let family = hashtile::HashFamily::new(cfg.seed);
        for (method, tile) in [
            (CsrBuild::V1, 1),
            (CsrBuild::V2 { bin_vertices: 256 }, 4),
            (CsrBuild::V2 { bin_vertices: 4096 }, 32),
        ] {
            let gpu = GpuCsr::<R>::build(&client, &family, vertices, &keys, &values, method)
                .unwrap()
                .with_lookup_tile(tile)
                .unwrap();
            assert_eq!(gpu.len(), n);
            let mut queries: Vec<u32> = keys.iter().copied().take(3000).collect();
            queries.extend([1u32, 2, 3, u32::MAX]);
            assert_eq!(
                gpu.count(&queries).unwrap(),
                cpu.count(&queries).unwrap(),
                "{backend} n {n}"
            );
            let (g, c) = (
                gpu.find_all(&queries).unwrap(),
                cpu.find_all(&queries).unwrap(),
            );
            assert_eq!(g.offsets, c.offsets, "{backend} n {n}");
            for i in 0..queries.len() {
                let mut a = g.values[g.offsets[i] as usize..g.offsets[i + 1] as usize].to_vec();
                let mut b = c.values[c.offsets[i] as usize..c.offsets[i + 1] as usize].to_vec();
                a.sort();
                b.sort();
                assert_eq!(a, b, "{backend} n {n} query {i} {method:?}");
            }
        }
    }
}

/// `CsrTable` on a GPU backend (the front end over `GpuCsr`) against the multimap: unique keys, heavy
/// duplicates, one key repeated, the all-ones key, absent queries, an empty table, a hash range of 1.
fn csr_table_on(backend: Backend) {
    if !present(backend) {
        return;
    }
    let cfg = CsrConfig {
        backend: BackendChoice::Exactly(backend),
        ..CsrConfig::default()
    };
    let t = CsrTable::<u32, u32>::build(&cfg, &[1, 2], &[3, 4]).unwrap();
    assert_eq!(t.backend(), backend);
    // Bad device knobs are typed errors.
    for bad in [
        CsrConfig {
            build: CsrBuild::V2 { bin_vertices: 384 },
            ..cfg.clone()
        },
        CsrConfig {
            lookup_tile: 3,
            ..cfg.clone()
        },
        CsrConfig {
            lookup_tile: 64,
            ..cfg.clone()
        },
    ] {
        assert!(matches!(
            CsrTable::<u32, u32>::build(&bad, &[1, 2], &[3, 4]),
            Err(Error::InvalidConfig(_))
        ));
    }
    let absent: Vec<u32> = vec![0xdead_beef, 17, u32::MAX - 1];
    for (n, distinct) in [(6000usize, 1u64 << 40), (6000, 200), (2000, 1), (0, 1)] {
        let mut keys: Vec<u32> = random_keys(n, distinct, 0xc5 ^ n as u64);
        if n > 0 {
            keys[0] = u32::MAX;
        }
        let values: Vec<u32> = (0..n as u32).map(|i| i ^ 0x5a5a).collect();
        check_lookups(&cfg, &keys, &values, &absent);
        check_lookups(&cfg.clone().vertices(1), &keys, &values, &absent);
        // The v1 build, tiles of several widths (32 runs as wide as the plane), small bins with a hash range
        // that is not a multiple of them.
        for (build, tile) in [
            (CsrBuild::V1, 8),
            (CsrBuild::V2 { bin_vertices: 256 }, 2),
            (CsrBuild::V2 { bin_vertices: 4096 }, 32),
        ] {
            let c = CsrConfig {
                build,
                lookup_tile: tile,
                ..cfg.clone()
            };
            check_lookups(&c, &keys, &values, &absent);
            check_lookups(&c.clone().vertices(1000), &keys, &values, &absent);
        }
    }
    // Joins on the device, both methods, against the nested loops.
    let mut rng = StdRng::seed_from_u64(11);
    for (nl, nr, distinct) in [
        (3000, 2000, 1 << 40),
        (3000, 4000, 300),
        (500, 300, 1),
        (0, 50, 5),
    ] {
        let left: Vec<u32> = random_keys(nl, distinct, rng.random());
        let right: Vec<u32> = random_keys(nr, distinct, rng.random());
        for c in [
            cfg.clone(),
            cfg.clone().vertices(1),
            CsrConfig {
                build: CsrBuild::V1,
                lookup_tile: 8,
                ..cfg.clone().range_factor(0.5)
            },
            CsrConfig {
                build: CsrBuild::V2 { bin_vertices: 256 },
                lookup_tile: 1,
                ..cfg.clone().range_factor(2.0)
            },
            CsrConfig {
                lookup_tile: 32,
                ..cfg.clone().vertices(37)
            },
        ] {
            check_join(&c, &left, &right);
        }
    }
    // One vertex holding a single key on each side: the intersect kernel's cross product when the keys are
    // equal, nothing when they differ; and in a range shared with other keys, the nested loop.
    let one = cfg.clone().vertices(1);
    check_join(&one, &[5u32; 100], &[5u32; 70]);
    check_join(&one, &[5u32; 100], &[7u32; 70]);
    check_join(&one, &[5u32, 7, 5, 5], &[5u32; 40]);
    // More pairs than 32-bit offsets address, from one vertex's cross product (2^16 + 1 by 2^16 keys): a typed
    // error, not a wrapped count.
    for method in [JoinMethod::Probe, JoinMethod::Intersect] {
        let r = CsrJoin::plan(&cfg, &[3u32; (1 << 16) + 1], &[3u32; 1 << 16], method);
        assert!(
            matches!(r, Err(Error::InvalidConfig(_))),
            "{method:?}: {:?}",
            r.map(|j| j.len())
        );
    }
    let left: Vec<u64> = random_keys(2000, 300, 8);
    let mut right: Vec<u64> = random_keys(2000, 300, 9);
    right[0] = left[0] | (1 << 63);
    check_join(&cfg, &left, &right);
    // 64-bit keys and values, and the mixed widths: keys that differ only in their high words share no
    // vertex by accident, the all-ones key is storable.
    for (n, distinct) in [(5000usize, 1u64 << 62), (5000, 300), (0, 1)] {
        let mut keys: Vec<u64> = random_keys(n, distinct, 0x64 ^ n as u64);
        if n > 2 {
            keys[0] = u64::MAX;
            keys[1] = 5;
            keys[2] = 5 | (1 << 40);
        }
        let wide: Vec<u64> = (0..n as u64).map(|i| i << 33 | 7).collect();
        let narrow: Vec<u32> = (0..n as u32).collect();
        let absent64: Vec<u64> = vec![6, 6 | (1 << 40), u64::MAX - 1];
        check_lookups(&cfg, &keys, &wide, &absent64);
        check_lookups(&cfg, &keys, &narrow, &absent64);
        let keys32: Vec<u32> = keys.iter().map(|&k| k as u32 ^ (k >> 32) as u32).collect();
        check_lookups(&cfg, &keys32, &wide, &absent);
    }
}

#[test]
fn vulkan_csr_table() {
    csr_table_on(Backend::Vulkan);
}

#[test]
fn cuda_csr_table() {
    csr_table_on(Backend::Cuda);
}

#[test]
fn vulkan_csr_matches_cpu() {
    if present(Backend::Vulkan) {
        use hashtile::cubecl::prelude::Runtime;
        let client = hashtile::cubecl::wgpu::WgpuRuntime::client(&Default::default());
        gpu_matches_cpu(Backend::Vulkan, client);
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_csr_matches_cpu() {
    if present(Backend::Cuda) {
        use hashtile::cubecl::prelude::Runtime;
        let client = hashtile::cubecl::cuda::CudaRuntime::client(&Default::default());
        gpu_matches_cpu(Backend::Cuda, client);
    }
}
