//! Slot frames of paged tables (`gpu::frames`): resident GPU children share one device allocation and a find
//! over all of them is one launch per copy chunk. Checked against a `HashMap` oracle after every batch, with the
//! frames regrown by splits, children paged out of and into frames under a budget, 64-bit pairs, stashes and
//! tombstones, upserts over the frames (updates, new keys, failures); and the frames' bookkeeping (every child framed after a find with all resident, never more
//! frames than the budget holds).

use hashtile::{
    Backend, BackendChoice, Bcht, Cht1, DeviceBudget, Iht, Key, P2bht, PagedConfig, PagedTable,
    Placement, SchemeInfo, Value,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;

use hashtile_tests::backends::{BACKENDS, present};
use hashtile_tests::paged::{check, check_finds, filling_stashes, random_keys};

fn config(backend: Backend, child_slots: usize, budget: DeviceBudget) -> PagedConfig {
    PagedConfig::with_child_slots(child_slots)
        .backend(BackendChoice::Exactly(backend))
        .placement(Placement::HashRouted)
        .budget(budget)
        .batch_keys(4096)
        .seed(5)
}

/// Random upsert batches into a growing table; after each, every key and some absent ones are checked, and on
/// a GPU with every child resident, every child is in the frames.
fn grow_and_check<S: SchemeInfo, K: Key, V: Value>(
    backend: Backend,
    cfg: PagedConfig,
    batches: usize,
    batch: usize,
    all_resident: bool,
) -> PagedTable<S, K, V> {
    let mut t: PagedTable<S, K, V> = PagedTable::new(cfg).unwrap();
    let mut oracle = HashMap::new();
    let mut rng = StdRng::seed_from_u64(batches as u64 * 31 + batch as u64);
    let range = (batches * batch) as u64;
    for b in 0..batches {
        let what = format!("{backend} {} {}-bit batch {b}", S::NAME, K::BITS);
        let keys: Vec<K> = random_keys(&mut rng, batch, range);
        let values: Vec<V> = (0..batch)
            .map(|_| V::narrow(rng.random::<u32>() as u64))
            .collect();
        t.insert(&keys, &values).unwrap();
        for (k, v) in keys.iter().zip(&values) {
            oracle.insert(*k, *v);
        }
        let absent: Vec<K> = (0..64).map(|i| K::narrow(range + i)).collect();
        check(&mut t, &oracle, &absent, &what);
        if all_resident {
            let framed = if backend == Backend::Cpu {
                0
            } else {
                t.children()
            };
            assert_eq!(t.framed_children(), framed, "{what}: children in frames");
            assert!(t.frame_count() >= framed, "{what}: frames");
        }
    }
    t
}

#[test]
fn finds_over_frames_regrown_by_splits() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        // From 2 children to about 16: the frames are regrown several times, and split halves take the
        // spare frames between regrowths.
        let cfg = config(backend, 2048, DeviceBudget::Unlimited).initial_children(2);
        let t = grow_and_check::<Bcht, u32, u32>(backend, cfg, 8, 3000, true);
        assert!(t.children() >= 12, "{backend}: grew to {}", t.children());
        // Wide pairs (values in their own frames' buffer), a stable scheme as GPUs need.
        let cfg = config(backend, 1024, DeviceBudget::Unlimited).initial_children(2);
        grow_and_check::<Iht, u64, u64>(backend, cfg, 5, 1500, true);
        // Narrow keys in a wide table.
        let cfg = config(backend, 1024, DeviceBudget::Unlimited);
        grow_and_check::<Iht, u32, u64>(backend, cfg, 4, 1200, true);
    }
}

#[test]
fn frames_within_the_budget_while_children_page() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        // Three children fit: the frames are made while they are all resident, then the table grows past
        // the budget and children page out of frames and back into them.
        let cfg = config(backend, 2048, DeviceBudget::Children(3)).initial_children(2);
        let mut t = grow_and_check::<Bcht, u32, u32>(backend, cfg, 2, 1200, true);
        let mut oracle: HashMap<u32, u32> = t.pairs().unwrap().into_iter().collect();
        let mut rng = StdRng::seed_from_u64(7);
        for b in 0..6 {
            let what = format!("{backend} paging batch {b}");
            let keys: Vec<u32> = (0..2500).map(|_| rng.random_range(0..40_000)).collect();
            let values: Vec<u32> = keys.iter().map(|k| k ^ b).collect();
            t.insert(&keys, &values).unwrap();
            for (k, v) in keys.iter().zip(&values) {
                oracle.insert(*k, *v);
            }
            check(&mut t, &oracle, &[50_000, 50_001], &what);
            assert!(t.resident_children().len() <= 3, "{what}: budget");
            assert!(t.frame_count() <= 3, "{what}: frames past the budget");
            assert!(t.framed_children() <= 3, "{what}: framed");
        }
        assert!(t.children() > 3, "{backend}: the table outgrew its budget");
        if backend != Backend::Cpu {
            assert!(t.frame_count() > 0, "{backend}: frames were made");
            assert!(t.paging().swaps_in > 0, "{backend}: children paged in");
        }
    }
}

#[test]
fn frames_with_stashes_and_tombstones() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        let what = format!("{backend} stashes and tombstones");
        // Pairs in the stashes (two hash functions, short eviction chains, children filled to 93% of their
        // slots). The batch fits every child's room (full load), so it goes in over the frames on a GPU, and
        // the pairs given up on come back from that one launch, each to its own child (stash, rebuild or
        // split).
        let cfg =
            filling_stashes(config(backend, 512, DeviceBudget::Unlimited).initial_children(4));
        let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(cfg).unwrap();
        let mut oracle = HashMap::new();
        let keys: Vec<u32> = (0..1900).map(|i| i * 7919 % 100_003).collect();
        t.insert(&keys, &keys).unwrap();
        oracle.extend(keys.iter().map(|&k| (k, k)));
        check(&mut t, &oracle, &[100_007, 100_009], &what);
        // How many pairs a parallel build gives up on varies from run to run: most runs stash some; a run
        // whose confined rebuild placed every pair has none in its stashes.
        let stats = t.paging();
        assert!(
            t.stash_len() > 0 || stats.rebuilds > 0 || stats.grown > 0,
            "{what}: some pairs were given up on ({stats:?})"
        );
        if backend != Backend::Cpu {
            assert_eq!(stats.framed_upserts, 1, "{what}: the batch went in framed");
        }
        // Every key again with new values: stashed keys are updated in their stash (a batch that reaches a
        // child whose stash holds pairs is partitioned), the others in place.
        let values: Vec<u32> = keys.iter().map(|k| k ^ 0x5555).collect();
        t.insert(&keys, &values).unwrap();
        oracle.extend(keys.iter().zip(&values).map(|(&k, &v)| (k, v)));
        check(
            &mut t,
            &oracle,
            &[100_007, 100_009],
            &format!("{what}, updated"),
        );

        let cfg = config(backend, 1024, DeviceBudget::Unlimited).initial_children(4);
        let mut t: PagedTable<Iht, u32, u32> = PagedTable::new(cfg).unwrap();
        let keys: Vec<u32> = (0..3000).collect();
        t.insert(&keys, &keys).unwrap();
        let gone: Vec<u32> = (0..3000).step_by(3).collect();
        assert_eq!(t.erase(&gone).unwrap(), gone.len(), "{what}: erased");
        let oracle: HashMap<u32, u32> = keys
            .iter()
            .filter(|k| *k % 3 != 0)
            .map(|&k| (k, k))
            .collect();
        if backend != Backend::Cpu {
            assert!(t.tombstones() > 0, "{what}: tombstones");
        }
        // The sentinel is absent even where an erased packed slot holds its word.
        check_finds(&mut t, &oracle, &[u32::MAX, 0, 1, 2, 2999], &what);
        check(&mut t, &oracle, &[3000, 3001], &what);
    }
}

#[test]
fn frames_off_agrees() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        let cfg = config(backend, 2048, DeviceBudget::Unlimited)
            .initial_children(4)
            .shared_frames(false);
        let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(cfg).unwrap();
        let keys: Vec<u32> = (0..5000).map(|i| i * 3).collect();
        t.insert(&keys, &keys).unwrap();
        let oracle: HashMap<u32, u32> = keys.iter().map(|&k| (k, k)).collect();
        check(
            &mut t,
            &oracle,
            &[1, 2, 4],
            &format!("{backend} frames off"),
        );
        assert_eq!(t.framed_children(), 0, "{backend}: frames off");
    }
}

#[test]
fn tables_made_past_their_budget_page_through_frames() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        for budget in [DeviceBudget::Children(4), DeviceBudget::Bytes(3 * 1024 * 8)] {
            let what = format!("{backend} {budget:?}");
            let cfg = config(backend, 1024, budget).initial_children(16);
            let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(cfg).unwrap();
            let frames = match (backend, budget) {
                (Backend::Cpu, _) => 0,
                (_, DeviceBudget::Children(n)) => n,
                _ => 3,
            };
            // The budget's frames from the start, each resident child in one.
            assert_eq!(t.frame_count(), frames, "{what}: frames at creation");
            assert_eq!(t.framed_children(), frames, "{what}: children in frames");
            let mut oracle = HashMap::new();
            let mut rng = StdRng::seed_from_u64(3);
            for b in 0..5u32 {
                let keys: Vec<u32> = (0..2000).map(|_| rng.random_range(0..30_000)).collect();
                let values: Vec<u32> = keys.iter().map(|k| k.wrapping_mul(b + 1)).collect();
                t.insert(&keys, &values).unwrap();
                for (k, v) in keys.iter().zip(&values) {
                    oracle.insert(*k, *v);
                }
                let w = format!("{what} batch {b}");
                check(&mut t, &oracle, &[40_000, 40_001], &w);
                assert_eq!(t.frame_count(), frames, "{w}: frames stay the budget's");
                assert!(t.framed_children() <= frames, "{w}: framed");
                assert!(t.resident_children().len() <= 4, "{w}: budget");
            }
            assert!(t.paging().swaps_in > 0, "{what}: children paged in");
        }
    }
}

/// Asserts that `t`'s upserts went in over the frames (GPUs) or not at all (the CPU, which has none).
fn assert_framed<S: SchemeInfo, K: Key, V: Value>(t: &PagedTable<S, K, V>, backend: Backend) {
    let framed = t.paging().framed_upserts;
    let what = format!("{backend} {} {}-bit", S::NAME, K::BITS);
    if backend == Backend::Cpu {
        assert_eq!(framed, 0, "{what}: no frames on the CPU");
    } else {
        assert!(framed > 0, "{what}: framed upserts");
    }
}

#[test]
fn framed_upserts_match_the_oracle() {
    for backend in BACKENDS {
        if !present(backend) {
            continue;
        }
        // Children with room for every batch, all resident: each device batch (4096 keys, copy chunks of
        // 2048) is classified and inserted over the frames chunk by chunk, with keys repeated within a batch
        // (the last occurrence wins) and across batches (updates in place).
        let cfg = config(backend, 4096, DeviceBudget::Unlimited).initial_children(8);
        let t = grow_and_check::<Bcht, u32, u32>(backend, cfg.clone(), 6, 3000, true);
        assert_framed(&t, backend);
        let t = grow_and_check::<P2bht, u32, u32>(backend, cfg.clone(), 4, 3000, true);
        assert_framed(&t, backend);
        let cfg1 = cfg.max_load(0.45);
        let t = grow_and_check::<Cht1, u32, u32>(backend, cfg1, 4, 2000, true);
        assert_framed(&t, backend);
        // Wide pairs (values in their own frames' buffer) and overflow probes; narrow keys in a wide table.
        let cfg = config(backend, 2048, DeviceBudget::Unlimited).initial_children(8);
        let t = grow_and_check::<Iht, u64, u64>(backend, cfg.clone(), 5, 2500, true);
        assert_framed(&t, backend);
        let t = grow_and_check::<Iht, u32, u64>(backend, cfg, 4, 2500, true);
        assert_framed(&t, backend);
    }
}
