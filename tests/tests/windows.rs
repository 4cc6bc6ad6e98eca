//! One-lane finds of linear probing with one-slot buckets read windows of four consecutive probes on GPUs
//! (`hashtile_backends::device::window`). They must answer what the probe-by-probe walk answers, probe counts
//! included, at every position of the table: slot counts that are not multiples of the window (a last window
//! cut short), walks that wrap past the last slot, full tables (an absent key walks every slot), erased slots
//! on the walk, erases of repeated and absent keys, and keys-only sets.
//!
//! The oracle for the counts is the CPU backend: in linear probing the set of occupied slots and the sum of
//! the keys' distances from their first slots do not depend on the order of the inserts (nor on which of two
//! racing inserts won a slot), so the total probes of finding every stored key, and of every absent key, are
//! the same numbers on both backends, whatever order the GPU inserted in.

use hashtile::{
    Backend, BackendChoice, HashSet, HashTable, LinearProbing, SchemeInfo, TableConfig,
};
use hashtile_tests::backends::present;
use std::collections::HashMap;

/// Slot counts: below, at and around the window, primes, and powers of two.
const SLOTS: [usize; 10] = [1, 2, 3, 4, 5, 7, 13, 64, 1021, 4099];

fn keys(n: usize, salt: u32) -> Vec<u32> {
    (0u32..)
        .map(|i| hashtile::hash::fmix32(i ^ salt))
        .filter(|&k| k != u32::MAX)
        .take(n)
        .collect()
}

fn config(slots: usize, backend: Backend) -> TableConfig {
    TableConfig::with_capacity(slots)
        .bucket_size(1)
        .params(LinearProbing::default_params(1))
        .count_probes(true)
        .max_rebuilds(0)
        .backend(BackendChoice::Exactly(backend))
}

/// A table of `slots` slots holding `stored` keys on `backend`: the answers and the probe totals of a find of
/// every stored key, then of as many absent keys; then the same after erasing every third key.
fn walk(slots: usize, stored: usize, backend: Backend) -> Vec<(Vec<Option<u32>>, u64)> {
    let all = keys(2 * stored, 0x51ab ^ slots as u32);
    let (present, absent) = all.split_at(stored);
    let values: Vec<u32> = present.iter().map(|k| k.wrapping_mul(7) ^ 3).collect();
    let mut t: HashTable<LinearProbing, u32, u32> = HashTable::new(config(slots, backend)).unwrap();
    assert_eq!(t.capacity(), slots);
    t.insert(present, &values).unwrap();
    assert_eq!(t.len(), stored);
    let mut out = Vec::new();
    for batch in [present, absent] {
        out.push((t.find(batch).unwrap(), t.last_find_probes().probes));
    }
    // Erased slots on the windows' walks: every third key twice in one batch (exactly one copy erases it), with
    // absent keys among them; then the same batch again, now all absent.
    let gone: Vec<u32> = present.iter().copied().step_by(3).collect();
    let mut batch: Vec<u32> = gone.iter().flat_map(|&k| [k, k]).collect();
    batch.extend_from_slice(&absent[..absent.len().min(3)]);
    assert_eq!(t.erase(&batch).unwrap(), gone.len());
    assert_eq!(t.erase(&batch).unwrap(), 0);
    assert_eq!(t.len(), stored - gone.len());
    let mut every = present.to_vec();
    every.extend_from_slice(absent);
    out.push((t.find(&every).unwrap(), 0));
    out
}

fn agrees_with_cpu(backend: Backend) {
    if !present(backend) {
        return;
    }
    for slots in SLOTS {
        let mut fills = vec![1, slots / 2, (slots * 9).div_ceil(10), slots];
        fills.retain(|&f| f >= 1 && f <= slots);
        fills.dedup();
        for stored in fills {
            let cpu = walk(slots, stored, Backend::Cpu);
            let dev = walk(slots, stored, backend);
            let what = format!("{slots} slots, {stored} keys on {backend}");
            // The answers, checked against a map of what was stored (and erased).
            let all = keys(2 * stored, 0x51ab ^ slots as u32);
            let mut oracle: HashMap<u32, u32> = all[..stored]
                .iter()
                .map(|&k| (k, k.wrapping_mul(7) ^ 3))
                .collect();
            assert_eq!(dev[0].0, cpu[0].0, "{what}: present answers");
            for (k, got) in all[..stored].iter().zip(&dev[0].0) {
                assert_eq!(oracle.get(k).copied(), *got, "{what}: key {k}");
            }
            assert!(dev[1].0.iter().all(Option::is_none), "{what}: absent keys");
            assert_eq!(dev[0].1, cpu[0].1, "{what}: probes of the present keys");
            assert_eq!(dev[1].1, cpu[1].1, "{what}: probes of the absent keys");
            if stored == slots {
                // A full table: every absent key reads every slot.
                assert_eq!(
                    dev[1].1,
                    (slots * stored) as u64,
                    "{what}: full-table walks"
                );
            }
            for k in all[..stored].iter().step_by(3) {
                oracle.remove(k);
            }
            let mut every = all[..stored].to_vec();
            every.extend_from_slice(&all[stored..2 * stored]);
            for (k, got) in every.iter().zip(&dev[2].0) {
                assert_eq!(oracle.get(k).copied(), *got, "{what}: after erase, key {k}");
            }
        }
    }
}

/// Keys-only sets take the same windows (4-byte words).
fn set_agrees(backend: Backend) {
    if !present(backend) {
        return;
    }
    for slots in [5usize, 13, 1021] {
        let all = keys(2 * slots, 0x5e7 ^ slots as u32);
        let (present, absent) = all.split_at(slots);
        let mut s: HashSet<LinearProbing, u32> = HashSet::new(config(slots, backend)).unwrap();
        s.insert(present).unwrap();
        assert!(
            s.contains(present).unwrap().iter().all(|&b| b),
            "{slots} slots"
        );
        assert!(
            !s.contains(absent).unwrap().iter().any(|&b| b),
            "{slots} slots"
        );
        let gone: Vec<u32> = present.iter().copied().step_by(2).collect();
        s.erase(&gone).unwrap();
        let got = s.contains(present).unwrap();
        for (i, g) in got.iter().enumerate() {
            assert_eq!(*g, i % 2 == 1, "{slots} slots, key {i} after erase");
        }
    }
}

#[test]
fn cpu_walks_agree_with_themselves() {
    // The CPU backend is the oracle; this runs the comparison's own checks where no GPU is present.
    agrees_with_cpu(Backend::Cpu);
    set_agrees(Backend::Cpu);
}

#[test]
fn vulkan_windows_answer_as_the_walk() {
    agrees_with_cpu(Backend::Vulkan);
    set_agrees(Backend::Vulkan);
}

#[test]
fn cuda_windows_answer_as_the_walk() {
    agrees_with_cpu(Backend::Cuda);
    set_agrees(Backend::Cuda);
}
