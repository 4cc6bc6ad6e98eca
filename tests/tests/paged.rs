//! Paged tables (Starfish) against a `HashMap` oracle on every backend present (CPU always; Vulkan on lavapipe
//! in CI; CUDA where there is one), with device budgets so small that children swap on every batch.
//!
//! Covered: random batches of inserts (with repeats and updates), finds and erases under both placement
//! policies and both replacement policies; forced child failures (tiny children at high load, tiny stashes);
//! growth past 8x the initial capacity; 64-bit pairs. After every batch: every key of the oracle is found with
//! its value, absent keys are absent, `pairs` holds each key once, and `len` agrees with the oracle.

use hashtile::{
    Backend, BackendChoice, Bcht, Cht1, DeviceBudget, Error, Iht, P2bht, PagedConfig, PagedTable,
    Placement, Replacement, SchemeParams,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;

use hashtile_tests::backends::{BACKENDS, present};
use hashtile_tests::paged::{
    PLACEMENTS, check, check_finds, erase_from_oracle, insert_both, random_keys,
};
use hashtile_tests::paged_sequences::{
    self as sequences, random_batches, random_batches_both_policies,
};

#[test]
fn bcht_random_batches_swap_every_batch() {
    for b in BACKENDS {
        random_batches_both_policies::<Bcht>(b);
    }
}

#[test]
fn iht_random_batches_swap_every_batch() {
    for b in BACKENDS {
        random_batches_both_policies::<Iht>(b);
    }
}

#[test]
fn p2bht_and_cht1_random_batches() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for placement in PLACEMENTS {
            random_batches::<P2bht, u32, u32>(
                backend,
                placement,
                Replacement::Lru,
                512,
                DeviceBudget::Children(2),
                5,
                500,
                5,
            );
            random_batches::<Cht1, u32, u32>(
                backend,
                placement,
                Replacement::Fifo,
                512,
                DeviceBudget::Children(2),
                5,
                500,
                6,
            );
        }
    }
}

#[test]
fn wide_pairs() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        // One resident child: splits go through the host; three: splits and rebuilds run on the device (the
        // wide layout's unpack reads the value array).
        for budget in [DeviceBudget::Children(1), DeviceBudget::Children(3)] {
            for placement in PLACEMENTS {
                let mut t = random_batches::<Iht, u64, u64>(
                    backend,
                    placement,
                    Replacement::Lru,
                    256,
                    budget,
                    4,
                    400,
                    8,
                );
                let oracle: HashMap<u64, u64> = t.pairs().unwrap().into_iter().collect();
                for c in 0..t.children() {
                    t.rebuild_child(c).unwrap();
                }
                check(
                    &mut t,
                    &oracle,
                    &[1 << 40],
                    &format!("{backend} wide rebuilt"),
                );
            }
        }
    }
}

/// A byte budget of two children's slots: at most two resident.
#[test]
fn byte_budget() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        let cfg = PagedConfig::with_child_slots(1024)
            .backend(BackendChoice::Exactly(backend))
            .bucket_size(16)
            .budget(DeviceBudget::Bytes(2 * 1024 * 8));
        let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(cfg).unwrap();
        let keys: Vec<u32> = (0..20_000).collect();
        t.insert(&keys, &keys).unwrap();
        assert!(t.resident_bytes() <= 2 * 1024 * 8);
        assert!(t.resident_children().len() <= 2);
        let oracle: HashMap<u32, u32> = keys.iter().map(|&k| (k, k)).collect();
        check(
            &mut t,
            &oracle,
            &[20_000, 30_000],
            &format!("{backend} bytes"),
        );
        // Too small for one child.
        let cfg = PagedConfig::with_child_slots(1024)
            .backend(BackendChoice::Exactly(backend))
            .budget(DeviceBudget::Bytes(100));
        assert!(matches!(
            PagedTable::<Bcht, u32, u32>::new(cfg),
            Err(Error::InvalidConfig(_))
        ));
    }
}

/// Tiny children at high load with tiny stashes: children fail, are rebuilt alone, and grow; nothing is
/// lost or stored twice.
#[test]
fn forced_child_failures() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for placement in PLACEMENTS {
            let cfg = PagedConfig::with_child_slots(64)
                .backend(BackendChoice::Exactly(backend))
                .placement(placement)
                .max_load(1.0)
                // Two hash functions and short eviction chains: 1CHT children fail well below full.
                .params(SchemeParams {
                    num_hashes: 2,
                    max_chain: 4,
                    threshold: 0,
                    upsert: 1,
                })
                .stash_pairs(2)
                .max_rebuilds(2)
                .budget(DeviceBudget::Children(1));
            let mut t: PagedTable<Cht1, u32, u32> = PagedTable::new(cfg).unwrap();
            let mut oracle = HashMap::new();
            let mut rng = StdRng::seed_from_u64(3);
            for b in 0..6 {
                let keys: Vec<u32> = random_keys(&mut rng, 300, 5000);
                let values: Vec<u32> = (0..300).map(|_| rng.random()).collect();
                insert_both(&mut t, &mut oracle, &keys, &values);
                check(
                    &mut t,
                    &oracle,
                    &[9000, 9001],
                    &format!("{backend} {placement:?} failures {b}"),
                );
            }
            let stats = t.paging();
            assert!(
                stats.rebuilds > 0,
                "{placement:?}: children failed and were rebuilt ({stats:?})"
            );
            assert!(t.stash_len() <= 2 * t.children());
        }
    }
}

/// Growth past 8x the initial capacity by batches, both policies.
#[test]
fn growth_past_eight_times() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for placement in PLACEMENTS {
            let cfg = PagedConfig::with_child_slots(1024)
                .backend(BackendChoice::Exactly(backend))
                .placement(placement)
                .initial_children(2)
                .budget(DeviceBudget::Children(3));
            let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(cfg).unwrap();
            let initial = t.capacity();
            let mut oracle = HashMap::new();
            let mut next = 0u32;
            while t.len() <= 8 * initial {
                let keys: Vec<u32> = (next..next + 1500)
                    .map(|k| k.wrapping_mul(2_654_435_761))
                    .collect();
                next += 1500;
                t.insert(&keys, &keys).unwrap();
                for k in keys {
                    oracle.insert(k, k);
                }
                assert_eq!(t.len(), oracle.len());
            }
            check(
                &mut t,
                &oracle,
                &[],
                &format!("{backend} {placement:?} growth"),
            );
            // A confined rebuild of each child keeps every pair.
            let rebuilds = t.paging().rebuilds;
            for c in 0..t.children() {
                t.rebuild_child(c).unwrap();
            }
            assert_eq!(t.paging().rebuilds, rebuilds + t.children() as u64);
            check(
                &mut t,
                &oracle,
                &[],
                &format!("{backend} {placement:?} rebuilt"),
            );
            assert!(matches!(
                t.rebuild_child(t.children()),
                Err(Error::InvalidConfig(_))
            ));
            assert!(t.capacity() >= 8 * initial);
            assert!(t.paging().grown > 0);
            let loads: Vec<usize> = t.child_lens();
            let limit = (0.8 * t.child_capacity() as f64) as usize;
            assert!(loads.iter().all(|&l| l <= limit + 108), "{loads:?}");
        }
    }
}

#[test]
fn typed_errors_and_clear() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for placement in PLACEMENTS {
            let cfg = PagedConfig::with_child_slots(256)
                .backend(BackendChoice::Exactly(backend))
                .placement(placement)
                .max_children(2);
            let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(cfg).unwrap();
            assert!(matches!(
                t.insert(&[1, 2], &[1]),
                Err(Error::LengthMismatch { .. })
            ));
            assert!(matches!(
                t.insert(&[1, u32::MAX], &[1, 2]),
                Err(Error::SentinelKey { index: 1 })
            ));
            assert!(t.is_empty());
            let keys: Vec<u32> = (0..1000).collect();
            assert!(matches!(
                t.insert(&keys, &keys),
                Err(Error::CapacityExceeded { .. })
            ));
            assert!(t.is_empty());
            t.insert(&keys[..300], &keys[..300]).unwrap();
            assert_eq!(t.len(), 300);
            let mut out = vec![0u32; 3];
            assert!(matches!(
                t.find_into(&[1, 2], &mut out),
                Err(Error::LengthMismatch { .. })
            ));
            assert_eq!(t.contains(&[5, 700]).unwrap(), vec![true, false]);
            t.clear().unwrap();
            assert!(t.is_empty());
            assert_eq!(t.find(&[5]).unwrap(), vec![None]);
            // Empty batches.
            t.insert(&[], &[]).unwrap();
            assert_eq!(t.erase(&[]).unwrap(), 0);
            assert_eq!(t.find(&[]).unwrap(), vec![]);
        }
        let bad = PagedConfig::with_child_slots(256)
            .backend(BackendChoice::Exactly(backend))
            .max_load(0.0);
        assert!(matches!(
            PagedTable::<Bcht, u32, u32>::new(bad),
            Err(Error::InvalidConfig(_))
        ));
    }
}

/// Adversarial: one key repeated across a batch that spans several new children (arrival order), and
/// updates of keys that sit in stashes.
#[test]
fn repeats_across_children() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for placement in PLACEMENTS {
            let cfg = PagedConfig::with_child_slots(128)
                .backend(BackendChoice::Exactly(backend))
                .placement(placement)
                .budget(DeviceBudget::Children(1));
            let mut t: PagedTable<Iht, u32, u32> = PagedTable::new(cfg).unwrap();
            let mut keys: Vec<u32> = (0..2000).collect();
            let mut values: Vec<u32> = (0..2000).collect();
            for i in (0..2000).step_by(97) {
                keys[i] = 42;
                values[i] = 100_000 + i as u32;
            }
            t.insert(&keys, &values).unwrap();
            let mut oracle = HashMap::new();
            for (k, v) in keys.iter().zip(&values) {
                oracle.insert(*k, *v);
            }
            check(
                &mut t,
                &oracle,
                &[5000],
                &format!("{backend} {placement:?} repeats"),
            );
            // Update every key again, reversed.
            let vals2: Vec<u32> = keys.iter().map(|k| k ^ 0xdead).collect();
            insert_both(&mut t, &mut oracle, &keys, &vals2);
            check(
                &mut t,
                &oracle,
                &[5000],
                &format!("{backend} {placement:?} updates"),
            );
        }
    }
}

/// Review findings of 2026-11-25: nested splits through the host (one resident child, empty stashes, children
/// that fail at once) keep every pair once; the sequential CPU mode's failures keep the last occurrence.
#[test]
fn nested_splits_through_the_host() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for deterministic in [false, true] {
            if deterministic && backend != Backend::Cpu {
                continue;
            }
            let cfg = PagedConfig::with_child_slots(64)
                .backend(BackendChoice::Exactly(backend))
                .params(SchemeParams {
                    num_hashes: 2,
                    max_chain: 1,
                    threshold: 0,
                    upsert: 1,
                })
                .stash_pairs(0)
                .deterministic(deterministic)
                .budget(DeviceBudget::Children(1));
            let mut t: PagedTable<Cht1, u32, u32> = PagedTable::new(cfg).unwrap();
            let mut oracle = HashMap::new();
            let mut rng = StdRng::seed_from_u64(17);
            for b in 0..3 {
                let keys: Vec<u32> = random_keys(&mut rng, 3000, 6000);
                let values: Vec<u32> = (0..3000).map(|_| rng.random()).collect();
                insert_both(&mut t, &mut oracle, &keys, &values);
                let what = format!("{backend} deterministic={deterministic} nested {b}");
                check(&mut t, &oracle, &[7000], &what);
            }
        }
    }
}

/// A child that may not split (max_children) takes what its slots hold; the rest comes back in BuildFailed,
/// and nothing is lost or both stored and returned.
#[test]
fn full_children_return_what_they_cannot_hold() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        let cfg = PagedConfig::with_child_slots(1024)
            .backend(BackendChoice::Exactly(backend))
            .bucket_size(16)
            .max_children(3);
        let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(cfg).unwrap();
        let keys: Vec<u32> = (0..2300u32)
            .map(|k| k.wrapping_mul(2_654_435_761))
            .collect();
        let returned: Vec<(u64, u64)> = match t.insert(&keys, &keys) {
            Ok(()) => Vec::new(),
            Err(Error::BuildFailed { unplaced, .. }) => unplaced,
            Err(e) => panic!("{backend}: {e}"),
        };
        let stored: HashMap<u32, u32> = t.pairs().unwrap().into_iter().collect();
        assert_eq!(stored.len(), t.len());
        assert_eq!(
            stored.len() + returned.len(),
            keys.len(),
            "{backend}: every key stored or returned"
        );
        for (k, v) in &returned {
            assert!(
                !stored.contains_key(&(*k as u32)),
                "{backend}: {k} stored and returned"
            );
            assert_eq!(k, v);
        }
        for (k, v) in &stored {
            assert_eq!(k, v);
        }
    }
}

/// Device routing over many device batches per call (`batch_keys` small): keys repeated across device batches
/// keep their last occurrence, children that fill up in the middle of a call go through the host from that
/// device batch on (and split), and the answers agree with the oracle and with the same table partitioned
/// on the host.
#[test]
fn device_routing_across_device_batches() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for (child_slots, children) in [(1 << 15, 8), (1024, 2)] {
            let make = |device: bool| {
                let cfg = PagedConfig::with_child_slots(child_slots)
                    .backend(BackendChoice::Exactly(backend))
                    .placement(Placement::HashRouted)
                    .initial_children(children)
                    .batch_keys(4096)
                    .device_routing(device);
                PagedTable::<Bcht, u32, u32>::new(cfg).unwrap()
            };
            let (mut t, mut host) = (make(true), make(false));
            let mut oracle = HashMap::new();
            let mut rng = StdRng::seed_from_u64(child_slots as u64);
            for round in 0..3u32 {
                // 30000 keys from a range of 9000: each repeated about three times, across parts.
                let keys: Vec<u32> = random_keys(&mut rng, 30_000, 9000);
                let values: Vec<u32> = (0..30_000u32).map(|i| i ^ (round << 20)).collect();
                t.insert(&keys, &values).unwrap();
                insert_both(&mut host, &mut oracle, &keys, &values);
                let what = format!("{backend} {child_slots}-slot children, round {round}");
                check(&mut t, &oracle, &[9001, 12_345], &what);
                let q: Vec<u32> = (0..10_000).collect();
                assert_eq!(
                    t.find(&q).unwrap(),
                    host.find(&q).unwrap(),
                    "{what}: vs host"
                );
            }
            let gone: Vec<u32> = (0..3000).collect();
            let erased = t.erase(&gone).unwrap();
            let expected = erase_from_oracle(&mut oracle, &gone);
            assert_eq!(erased, expected, "{backend}: erased");
            check(
                &mut t,
                &oracle,
                &gone[..10],
                &format!("{backend}: after erase"),
            );
        }
    }
}

/// Tombstone erase: stable children (IHT, P2BHT) with 32-bit keys mark erased slots in place (counted by
/// `tombstones`, purged by a rebuild when they would push a child past its load); cuckoo children and 64-bit
/// keys rebuild without the keys instead (no tombstones). After every step: the oracle, and a lookup of the
/// sentinel key (which an erased packed slot holds) is absent.
#[test]
fn tombstone_erase() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        sequences::tombstone_erase::<Iht, u32, u32>(backend, true);
        sequences::tombstone_erase::<P2bht, u32, u32>(backend, true);
        sequences::tombstone_erase::<Iht, u32, u64>(backend, true);
        sequences::tombstone_erase::<Bcht, u32, u32>(backend, false);
        sequences::tombstone_erase::<Iht, u64, u64>(backend, false);
    }
}

/// A batch holding the sentinel key is refused with the table unchanged, whether the device checks it (one
/// device batch, device routing), the host scans it (a batch of several device batches, keys the device layout
/// widens), or the host partitions (routing on the host, arrival order).
#[test]
fn sentinel_batches_leave_the_table_unchanged() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for device_routing in [true, false] {
            sequences::sentinel_batches_change_nothing::<u32, u32>(
                backend,
                Placement::HashRouted,
                device_routing,
            );
            sequences::sentinel_batches_change_nothing::<u32, u64>(
                backend,
                Placement::HashRouted,
                device_routing,
            );
            sequences::sentinel_batches_change_nothing::<u64, u64>(
                backend,
                Placement::HashRouted,
                device_routing,
            );
        }
        sequences::sentinel_batches_change_nothing::<u32, u32>(
            backend,
            Placement::ArrivalOrder,
            true,
        );
    }
}

/// Review findings of the tenth session (each failed on the code before its fix): erasing the sentinel after
/// tombstones changed nothing but `len`; an arrival-order child full of tombstones was never purged; a table
/// that grew past the device router's 4096 children inside one call lost the rest of the call's keys.
#[test]
fn tombstone_and_routing_review_findings() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        // The sentinel is never stored: erasing it removes nothing, even where an erased slot holds it.
        let cfg = PagedConfig::with_child_slots(4096)
            .backend(BackendChoice::Exactly(backend))
            .placement(Placement::HashRouted);
        let mut t: PagedTable<Iht, u32, u32> = PagedTable::new(cfg).unwrap();
        let keys: Vec<u32> = (0..3000).collect();
        t.insert(&keys, &keys).unwrap();
        assert_eq!(t.erase(&keys[..2900]).unwrap(), 2900);
        assert!(t.tombstones() > 0, "{backend}");
        assert_eq!(
            t.erase(&[u32::MAX, 2950]).unwrap(),
            1,
            "{backend}: sentinel erase"
        );
        assert_eq!(t.len(), 99, "{backend}: len");
        assert_eq!(t.pairs().unwrap().len(), 99, "{backend}: pairs");
        // Erase everything, then refill within one child: the tombstones are purged, in both placements.
        for placement in PLACEMENTS {
            let cfg = PagedConfig::with_child_slots(4096)
                .backend(BackendChoice::Exactly(backend))
                .placement(placement)
                .max_children(1);
            let mut t: PagedTable<Iht, u32, u32> = PagedTable::new(cfg).unwrap();
            t.insert(&keys, &keys).unwrap();
            assert_eq!(t.erase(&keys).unwrap(), 3000);
            let fresh: Vec<u32> = (10_000..13_000).collect();
            t.insert(&fresh, &fresh).unwrap();
            let oracle: HashMap<u32, u32> = fresh.iter().map(|&k| (k, k)).collect();
            check(
                &mut t,
                &oracle,
                &keys[..10],
                &format!("{backend} {placement:?} refill"),
            );
        }
    }
    // Growth past the device router's children inside one call (only GPUs route on the device).
    for backend in [Backend::Vulkan, Backend::Cuda] {
        if !present(backend) {
            continue;
        }
        let cfg = PagedConfig::with_child_slots(1024)
            .backend(BackendChoice::Exactly(backend))
            .placement(Placement::HashRouted)
            .initial_children(4096)
            .batch_keys(2048);
        let mut t: PagedTable<Iht, u32, u32> = PagedTable::new(cfg).unwrap();
        // 2000 keys that all route to child 0 (past its load: it splits), then 2048 others.
        let mut keys: Vec<u32> = (0u32..)
            .filter(|&k| t.child_of(k) == Some(0))
            .take(2000)
            .collect();
        keys.extend(100_000_000u32..100_002_048);
        t.insert(&keys, &keys).unwrap();
        assert!(t.children() > 4096, "{backend}: the table grew");
        let oracle: HashMap<u32, u32> = keys.iter().map(|&k| (k, k)).collect();
        check(
            &mut t,
            &oracle,
            &[5],
            &format!("{backend} past 4096 children"),
        );
    }
}

/// Random rounds of upserts and erases with tombstones, one or two resident children, tiny stashes, high
/// loads and batches of several device batches (the review's stress, which found a purge that stored a key
/// twice), against the oracle after every round.
#[test]
fn random_rounds_with_tombstones_and_paging() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for seed in 0..2 {
            sequences::random_rounds_with_tombstones::<Iht, u32, u32>(backend, seed, (2, 1, 0.9));
            sequences::random_rounds_with_tombstones::<P2bht, u32, u32>(
                backend,
                seed,
                (4, 2, 0.95),
            );
            sequences::random_rounds_with_tombstones::<Iht, u32, u64>(backend, seed, (0, 1, 0.9));
            sequences::random_rounds_with_tombstones::<Bcht, u32, u32>(backend, seed, (1, 1, 0.9));
        }
    }
}

/// Device-routed batches against the same batches routed on the host and against the oracle: upserts whose
/// keys are routed while their values are still being copied (several copy chunks per device batch, repeats
/// across chunks, updates of stored keys), finds pipelined in parts (every child resident: many parts per
/// call, two buffer sets in turn), for packed pairs, wide pairs (widened keys; narrowed values) and children
/// whose stashes hold pairs (their keys answered on the host after the device lookup, from the presence
/// bits). A batch holding the sentinel in a later copy chunk is refused with the table unchanged.
#[test]
fn device_routing_agrees_with_host_routing() {
    for backend in [Backend::Vulkan, Backend::Cuda] {
        if !present(backend) {
            continue;
        }
        sequences::device_routing_agrees_with_host_routing::<Bcht, u32, u32>(backend, false);
        sequences::device_routing_agrees_with_host_routing::<Iht, u32, u64>(backend, false);
        sequences::device_routing_agrees_with_host_routing::<Iht, u64, u32>(backend, false);
        sequences::device_routing_agrees_with_host_routing::<Cht1, u32, u32>(backend, true);
    }
}

/// Finds large enough for the router to size each child's part from its share of the directory before
/// counting (`gpu::routing`): uniform keys fit their parts; keys that all route to one child overflow its part,
/// so the batch is counted and scattered again. The answers agree with the oracle either way, for stored and
/// absent keys, with and without presence bits.
#[test]
fn finds_whose_keys_crowd_one_child() {
    for backend in [Backend::Vulkan, Backend::Cuda] {
        if !present(backend) {
            continue;
        }
        let cfg = PagedConfig::with_child_slots(4096)
            .backend(BackendChoice::Exactly(backend))
            .placement(Placement::HashRouted)
            .initial_children(8);
        let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(cfg).unwrap();
        let keys: Vec<u32> = (0..8000).collect();
        let values: Vec<u32> = keys.iter().map(|k| k ^ 0x55).collect();
        t.insert(&keys, &values).unwrap();
        let oracle: HashMap<u32, u32> = keys.iter().copied().zip(values).collect();
        // 400,000 uniform keys (the stored ones among them), then child 0's stored keys and 300,000 absent
        // keys of child 0.
        let uniform: Vec<u32> = (0..400_000).collect();
        let mut crowded: Vec<u32> = keys
            .iter()
            .copied()
            .filter(|&k| t.child_of(k) == Some(0))
            .collect();
        crowded.extend(
            (1_000_000u32..)
                .filter(|&k| t.child_of(k) == Some(0))
                .take(300_000),
        );
        for (what, q) in [("uniform", uniform), ("crowded", crowded)] {
            check_finds(&mut t, &oracle, &q, &format!("{backend} {what}"));
        }
        check(&mut t, &oracle, &[1 << 30], &format!("{backend} after"));
    }
}

/// Prefetching (the next child paged in while the current one works; on CUDA its copy is left in flight and
/// the child's first kernel waits for it) against paging each child in at its turn: upserts, finds and erases
/// of a table eight times its budget, with both replacement policies, each checked against the oracle after
/// every round, and the two tables' pairs equal at the end. GPU tables must have prefetched (the CPU
/// backend partitions on the host, child by child, and never does).
#[test]
fn prefetch_matches_paging_in_turn() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for replacement in [Replacement::Lru, Replacement::Fifo] {
            sequences::prefetch_matches_paging_in_turn::<u32, u32>(backend, replacement, 71);
        }
        sequences::prefetch_matches_paging_in_turn::<u64, u64>(backend, Replacement::Lru, 72);
    }
}

/// Runs `f` on `t` on a new thread, and hands `t` back with `f`'s result.
fn on_new_thread<T: Send + 'static, R: Send + 'static>(
    mut t: T,
    f: impl FnOnce(&mut T) -> R + Send + 'static,
) -> (T, R) {
    std::thread::spawn(move || {
        let r = f(&mut t);
        (t, r)
    })
    .join()
    .unwrap()
}

/// A paged table moved to a new thread for every call (its children swapping on every batch) agrees with the
/// oracle: every call runs on the table's own stream, whichever thread makes it (NOTES.md D38).
#[test]
fn calls_from_new_threads() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for placement in PLACEMENTS {
            let what = format!("{backend} {placement:?}");
            let cfg = PagedConfig::with_child_slots(512)
                .backend(BackendChoice::Exactly(backend))
                .placement(placement)
                .budget(DeviceBudget::Children(1));
            let (_, made) = on_new_thread((), move |_| PagedTable::new(cfg).unwrap());
            let mut t: PagedTable<Bcht, u32, u32> = made;
            let mut oracle = HashMap::new();
            let mut rng = StdRng::seed_from_u64(41);
            for round in 0..6u32 {
                let keys: Vec<u32> = (0..700).map(|_| rng.random_range(0..5000)).collect();
                let values: Vec<u32> = keys.iter().map(|k| k ^ round).collect();
                for (&k, &v) in keys.iter().zip(&values) {
                    oracle.insert(k, v);
                }
                let (back, inserted) = on_new_thread(t, move |t| t.insert(&keys, &values));
                t = back;
                inserted.unwrap();
                let gone: Vec<u32> = (0..100).map(|_| rng.random_range(0..5000)).collect();
                let expect_erased = gone.iter().filter(|k| oracle.remove(*k).is_some()).count();
                let (back, erased) = on_new_thread(t, move |t| t.erase(&gone));
                t = back;
                assert_eq!(
                    erased.unwrap(),
                    expect_erased,
                    "{what} round {round}: erase"
                );
                let q: Vec<u32> = oracle.keys().copied().chain(5000..5100).collect();
                let (back, found) = on_new_thread(t, {
                    let q = q.clone();
                    move |t| t.find(&q)
                });
                t = back;
                for (k, f) in q.iter().zip(found.unwrap()) {
                    assert_eq!(f, oracle.get(k).copied(), "{what} round {round}: find {k}");
                }
                assert_eq!(t.len(), oracle.len(), "{what} round {round}: len");
            }
        }
    }
}
