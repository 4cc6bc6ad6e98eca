//! Every family's calls on host data go through one host-I/O layer (device batches, copy chunks with a launch
//! per chunk as it lands, answers straight into the caller's memory, reserved keys checked on the device as
//! they land). These tests drive the chained and CSR tables across its boundaries, with device batches of
//! 4096 keys copied in chunks of 2048 (`batch_keys`), on every backend present (the CPU always; Vulkan on
//! lavapipe in CI; CUDA where there is one), against `HashMap` oracles: empty batches, batches of one key,
//! larger than one chunk and than one device batch, duplicates within and across chunks and device batches,
//! and reserved keys in a later chunk or a later device batch (a typed error, the table unchanged).
//! `find_all_into` answers as `find_all` does into an answer that starts empty, larger or smaller.

use hashtile::chained::{ChainedConfig, ChainedTable};
use hashtile::{Backend, BackendChoice, CsrConfig, CsrTable, Error, FindAll};
use hashtile_tests::backends::present_backends;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;

/// Keys per device batch of the tables under test (copied in chunks of half that).
const BATCH: usize = 4096;

/// Batch lengths around the chunk (2048) and device batch (4096) boundaries.
const LENGTHS: [usize; 6] = [0, 1, 2049, 4096, 4097, 10_000];

fn chained(b: Backend, n: usize) -> ChainedTable<u32, u32> {
    let cfg = ChainedConfig::for_keys(n.max(64), 0.6)
        .batch_keys(BATCH)
        .backend(BackendChoice::Exactly(b));
    ChainedTable::new(cfg).unwrap()
}

/// `len` keys from `0..universe` (never reserved), with duplicates: the batch repeats its first keys at its
/// end, so that copies of one key straddle chunks and device batches.
fn keys_with_repeats(rng: &mut StdRng, len: usize, universe: u32) -> Vec<u32> {
    let mut keys: Vec<u32> = (0..len - len / 8)
        .map(|_| rng.random_range(0..universe))
        .collect();
    let head: Vec<u32> = keys[..len / 8].to_vec();
    keys.extend(head);
    keys
}

/// `find_all_into` (through `into`) answers `probe` as `find_all` did (`want`) into an `out` that starts
/// empty, that holds a larger previous answer (of `probe` twice over) and that holds a smaller one (of half of
/// `probe`), and once more into the same `out`: the previous contents are replaced, whatever the allocations.
fn find_all_into_matches(
    probe: &[u32],
    want: &FindAll<u32>,
    into: impl Fn(&[u32], &mut FindAll<u32>),
) {
    let twice: Vec<u32> = probe.iter().chain(probe).copied().collect();
    let mut larger = FindAll::default();
    into(&twice, &mut larger);
    let mut smaller = FindAll::default();
    into(&probe[..probe.len() / 2], &mut smaller);
    assert!(larger.offsets.len() > want.offsets.len() || probe.is_empty());
    assert!(smaller.offsets.len() < want.offsets.len() || probe.is_empty());
    for (before, mut out) in [
        ("empty", FindAll::default()),
        ("larger", larger),
        ("smaller", smaller),
    ] {
        into(probe, &mut out);
        assert_eq!(&out, want, "find_all_into into an answer {before} before");
        into(probe, &mut out);
        assert_eq!(&out, want, "find_all_into again (first {before})");
    }
}

/// The chained table holds exactly the multimap (per key: its values as a multiset, its count, a first value
/// among them), and its invariants hold.
fn chained_matches(t: &mut ChainedTable<u32, u32>, oracle: &HashMap<u32, Vec<u32>>, probe: &[u32]) {
    t.check().expect("invariants");
    assert_eq!(t.len(), oracle.values().map(Vec::len).sum::<usize>());
    let all = t.find_all(probe).unwrap();
    find_all_into_matches(probe, &all, |p, out| t.find_all_into(p, out).unwrap());
    let counts = t.count(probe).unwrap();
    let first = t.find(probe).unwrap();
    // The same answers into the caller's slices (filled with garbage first: every element is written).
    let mut first_into = vec![7u32; probe.len()];
    t.find_into(probe, &mut first_into).unwrap();
    let mut counts_into = vec![7u32; probe.len()];
    t.count_into(probe, &mut counts_into).unwrap();
    assert_eq!(counts_into, counts, "count_into against count");
    assert_eq!(all.offsets.len(), probe.len() + 1);
    for (i, k) in probe.iter().enumerate() {
        let mut want = oracle.get(k).cloned().unwrap_or_default();
        let mut got = all.values[all.offsets[i] as usize..all.offsets[i + 1] as usize].to_vec();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "find_all of key {k}");
        assert_eq!(counts[i] as usize, want.len(), "count of key {k}");
        match first[i] {
            Some(v) => assert!(want.contains(&v), "find of key {k}: {v} is not stored"),
            None => assert!(want.is_empty(), "find of key {k}: stored, found none"),
        }
        assert_eq!(
            first_into[i],
            first[i].unwrap_or(u32::MAX),
            "find_into of key {k} (all ones when absent)"
        );
    }
    // An answer slice of the wrong length is a typed error.
    let mut short = vec![0u32; probe.len() + 1];
    assert!(matches!(
        t.find_into(probe, &mut short),
        Err(Error::LengthMismatch { what: "out", .. })
    ));
    assert!(matches!(
        t.count_into(probe, &mut short),
        Err(Error::LengthMismatch { what: "out", .. })
    ));
}

fn chained_at(b: Backend, len: usize) {
    let mut rng = StdRng::seed_from_u64(len as u64 + 29);
    let universe = (len as u32).max(8) * 2;
    let mut t = chained(b, len);
    let mut oracle: HashMap<u32, Vec<u32>> = HashMap::new();
    // Multimap inserts: every copy is kept.
    let keys = keys_with_repeats(&mut rng, len, universe);
    let values: Vec<u32> = (0..len as u32).collect();
    t.insert(&keys, &values).unwrap();
    for (&k, &v) in keys.iter().zip(&values) {
        oracle.entry(k).or_default().push(v);
    }
    // Probes: every key inserted, in a batch of its own length, and as many absent ones.
    let probe: Vec<u32> = keys
        .iter()
        .copied()
        .chain((0..len as u32).map(|i| universe + i))
        .collect();
    chained_matches(&mut t, &oracle, &probe);
    // Replace of distinct keys, half stored and half new: a stored key's first copy (in list order: the one
    // `find` answers, whose value names it, values being distinct) gets the new value.
    let mut distinct: Vec<u32> = oracle.keys().copied().take(len / 2).collect();
    distinct.extend((0..(len / 2) as u32).map(|i| 2 * universe + i));
    let firsts = t.find(&distinct).unwrap();
    let new_values: Vec<u32> = (0..distinct.len() as u32).map(|i| len as u32 + i).collect();
    let added = t.replace(&distinct, &new_values).unwrap();
    let mut want_added = 0;
    for ((&k, &v), first) in distinct.iter().zip(&new_values).zip(&firsts) {
        let copies = oracle.entry(k).or_default();
        match first {
            Some(f) => {
                let at = copies.iter().position(|c| c == f).expect("a stored value");
                copies[at] = v;
            }
            None => {
                want_added += 1;
                copies.push(v);
            }
        }
    }
    assert_eq!(added, want_added);
    assert_eq!(
        t.find(&distinct).unwrap(),
        new_values.iter().map(|&v| Some(v)).collect::<Vec<_>>()
    );
    chained_matches(&mut t, &oracle, &probe);
    // Erase the first copy of each key of a batch that names some keys twice: two copies go.
    let erase: Vec<u32> = keys_with_repeats(&mut rng, len, universe);
    let erased = t.erase(&erase).unwrap();
    let mut want_erased = 0;
    let mut left: HashMap<u32, usize> = oracle.iter().map(|(k, v)| (*k, v.len())).collect();
    for k in &erase {
        if let Some(c) = left.get_mut(k).filter(|c| **c > 0) {
            *c -= 1;
            want_erased += 1;
        }
    }
    assert_eq!(erased, want_erased);
    assert_eq!(t.len(), left.values().sum::<usize>());
    // Which copies went is the table's: the counts say how many are left of each key.
    let counts = t.count(&probe).unwrap();
    for (k, c) in probe.iter().zip(&counts) {
        assert_eq!(
            *c as usize,
            left.get(k).copied().unwrap_or(0),
            "count of key {k}"
        );
    }
    // Erase every copy of the stored keys: the table is empty.
    let stored: Vec<u32> = left.keys().copied().collect();
    assert_eq!(t.erase_all(&stored).unwrap(), left.values().sum::<usize>());
    assert!(t.is_empty());
    t.check().expect("invariants");
}

#[test]
fn chained_calls_across_chunks_and_device_batches_match_the_multimap() {
    for b in present_backends() {
        for len in LENGTHS {
            chained_at(b, len);
        }
    }
}

fn chained_reserved(b: Backend) {
    let tomb = u32::MAX - 1;
    let mut t = chained(b, 10_000);
    let keys: Vec<u32> = (0..10_000).collect();
    t.insert(&keys, &keys).unwrap();
    // One device batch, a reserved key in its second chunk (checked on the device as the keys land), and a
    // batch of several device batches, one in its last (checked on the host first).
    for (len, at) in [(4000, 3000), (10_000, 9000)] {
        for (bad, sentinel) in [(u32::MAX, true), (tomb, false)] {
            let mut batch: Vec<u32> = (20_000..20_000 + len as u32).collect();
            batch[at] = bad;
            let want = if sentinel {
                Error::SentinelKey { index: at }
            } else {
                Error::TombstoneKey { index: at }
            };
            assert_eq!(t.insert(&batch, &batch), Err(want.clone()));
            assert_eq!(t.replace(&batch, &batch), Err(want.clone()));
            assert_eq!(t.find(&batch), Err(want.clone()));
            assert_eq!(t.count(&batch), Err(want.clone()));
            assert_eq!(t.find_all(&batch), Err(want.clone()));
            let mut out = FindAll::default();
            assert_eq!(t.find_all_into(&batch, &mut out), Err(want.clone()));
            // Stored keys before the reserved one: none is erased.
            let mut erase = keys[..len].to_vec();
            erase[at] = bad;
            assert_eq!(t.erase(&erase), Err(want.clone()));
            assert_eq!(t.erase_all(&erase), Err(want));
        }
    }
    assert_eq!(t.len(), keys.len());
    assert_eq!(t.count(&keys).unwrap(), vec![1; keys.len()]);
    t.check().expect("invariants");
}

#[test]
fn chained_reserved_keys_in_later_chunks_and_batches_change_nothing() {
    for b in present_backends() {
        chained_reserved(b);
    }
}

fn csr_at(b: Backend, pairs: usize, queries: usize) {
    let mut rng = StdRng::seed_from_u64((pairs * 31 + queries) as u64);
    let universe = (pairs as u32 / 3).max(4);
    // Keys with many duplicates (about three values each), values their positions.
    let keys: Vec<u32> = (0..pairs).map(|_| rng.random_range(0..universe)).collect();
    let values: Vec<u32> = (0..pairs as u32).collect();
    let cfg = CsrConfig::default().batch_keys(BATCH).range_factor(1.0);
    let cfg = CsrConfig {
        backend: BackendChoice::Exactly(b),
        ..cfg
    };
    let t = CsrTable::<u32, u32>::build(&cfg, &keys, &values).unwrap();
    assert_eq!(t.len(), pairs);
    let mut oracle: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&k, &v) in keys.iter().zip(&values) {
        oracle.entry(k).or_default().push(v);
    }
    // Queries: stored and absent keys, each query key possibly several times.
    let q: Vec<u32> = (0..queries)
        .map(|_| rng.random_range(0..universe + universe / 2))
        .collect();
    let counts = t.count(&q).unwrap();
    let mut counts_into = vec![7u32; queries];
    t.count_into(&q, &mut counts_into).unwrap();
    assert_eq!(counts_into, counts, "count_into against count");
    let mut long = vec![0u32; queries + 1];
    assert!(matches!(
        t.count_into(&q, &mut long),
        Err(Error::LengthMismatch { what: "out", .. })
    ));
    let all = t.find_all(&q).unwrap();
    find_all_into_matches(&q, &all, |p, out| t.find_all_into(p, out).unwrap());
    assert_eq!(counts.len(), queries);
    assert_eq!(all.offsets.len(), queries + 1);
    for (i, k) in q.iter().enumerate() {
        let mut want = oracle.get(k).cloned().unwrap_or_default();
        let mut got = all.values[all.offsets[i] as usize..all.offsets[i + 1] as usize].to_vec();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(counts[i] as usize, want.len(), "count of key {k}");
        assert_eq!(got, want, "find_all of key {k}");
    }
    assert_eq!(all.values.len(), *all.offsets.last().unwrap() as usize);
    let mut got = t.pairs().unwrap();
    let mut want: Vec<(u32, u32)> = keys.iter().copied().zip(values.iter().copied()).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "pairs");
}

#[test]
fn csr_calls_across_chunks_and_device_batches_match_the_multimap() {
    for b in present_backends() {
        for len in LENGTHS {
            // Builds of every length (one chunk, several, none), queried with batches of every length.
            csr_at(b, len, 10_000 - len);
            csr_at(b, 5000, len);
        }
    }
}
