//! Stress test of hash-routed paged tables (written by the twelfth session's review of the device router's
//! upserts routed during their copy and finds scattered into parts sized ahead): many random rounds of hash-routed paged tables against a `HashMap` oracle, on the CPU backend and on Vulkan (lavapipe)
//! when present. Small device batches (`PagedConfig::batch_keys` of 2048 to 65536 keys, each copied in chunks of
//! half a batch rounded down to a multiple of 2048 keys: 1, 2 or 3 copy chunks per batch) and one config with the
//! default batch sizes (2^26-key batches in 2^22-key chunks, so each of its calls copies in one chunk), batch
//! sizes around the chunk and batch boundaries (0, 1, 2047, 2048, 2049, just over a batch), repeats within and
//! across chunks, updates, finds of present and absent keys (`find` and `find_into`), erases, batches whose keys
//! all route to one child (upserts and finds, finds large enough to be sized ahead and overflow), a sentinel
//! inside a batch, budgets `Unlimited` and `Children(2)`, growth.
//!
//! Knobs: `STRESS_ROUNDS` (rounds per config; default 3 in the test suite, the review ran 40 with seeds 1-3),
//! `STRESS_SEED`.

use hashtile::{
    Backend, BackendChoice, Bcht, DeviceBudget, Error, Iht, Key, PagedConfig, PagedTable,
    Placement, SchemeInfo, Value,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::{HashMap, HashSet};

use hashtile_tests::backends::present;
use hashtile_tests::paged::{check, check_finds};

/// Key range of the random keys (absent keys are drawn above it).
const RANGE: u64 = 150_000;

/// Key number `x` as a key: high bits set for 64-bit keys (`x < 2^31`: never the sentinel).
fn key<K: Key>(x: u64) -> K {
    K::narrow(x.wrapping_mul(0x1_0000_0001))
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A batch size: the boundaries around chunks and device batches, or random.
fn batch_size(rng: &mut StdRng, bk: usize) -> usize {
    let chunk = (bk / 2 / 2048).max(1) * 2048;
    let picks = [
        0,
        1,
        2,
        31,
        2047,
        2048,
        2049,
        chunk - 1,
        chunk,
        chunk + 1,
        bk - 1,
        bk,
        bk + 1,
        bk + 2048,
        bk + 2049,
        2 * bk + 3,
    ];
    if rng.random_bool(0.6) {
        picks[rng.random_range(0..picks.len())]
    } else {
        rng.random_range(0..3 * bk)
    }
}

/// `n` keys: repeats of earlier keys of the batch (across chunks), stored keys (updates), and new ones; all of
/// child `only` when given.
fn gen_keys<S: SchemeInfo, K: Key, V: Value>(
    rng: &mut StdRng,
    t: &PagedTable<S, K, V>,
    stored: &[K],
    n: usize,
    only: Option<usize>,
) -> Vec<K> {
    let mut out: Vec<K> = Vec::with_capacity(n);
    let fits = |k: K| only.is_none() || t.child_of(k) == only;
    let (p_repeat, p_stored) = match rng.random_range(0..3) {
        0 => (0.0, 0.0),
        1 => (0.3, 0.3),
        _ => (0.6, 0.2),
    };
    while out.len() < n {
        let r: f64 = rng.random();
        let k = if r < p_repeat && !out.is_empty() {
            out[rng.random_range(0..out.len())]
        } else if r < p_repeat + p_stored && !stored.is_empty() {
            let k = stored[rng.random_range(0..stored.len())];
            if !fits(k) {
                continue;
            }
            k
        } else {
            let k = key::<K>(rng.random_range(0..RANGE));
            if !fits(k) {
                continue;
            }
            k
        };
        out.push(k);
    }
    out
}

struct Cfg {
    child_slots: usize,
    initial_children: usize,
    batch_keys: Option<usize>,
    budget: DeviceBudget,
    /// Most stored keys before a bulk erase.
    cap: usize,
}

fn stress<S: SchemeInfo, K: Key, V: Value>(backend: Backend, cfg: &Cfg, seed: u64, rounds: u64) {
    let start = std::time::Instant::now();
    let mut pc = PagedConfig::with_child_slots(cfg.child_slots)
        .backend(BackendChoice::Exactly(backend))
        .placement(Placement::HashRouted)
        .initial_children(cfg.initial_children)
        .budget(cfg.budget)
        .seed(seed);
    if let Some(bk) = cfg.batch_keys {
        pc = pc.batch_keys(bk);
    }
    let mut t: PagedTable<S, K, V> = PagedTable::new(pc).unwrap();
    // Device batch size the router uses (the default 2^26 keys unless the config sets one).
    let bk = cfg
        .batch_keys
        .map(|b| b.max(1).next_multiple_of(2048))
        .unwrap_or(8192);
    let name = format!(
        "{backend} {} {}->{} slots {} children {} bk {:?} {:?} seed {seed}",
        S::NAME,
        K::BITS,
        V::BITS,
        cfg.child_slots,
        cfg.initial_children,
        cfg.batch_keys,
        cfg.budget
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let mut oracle: HashMap<K, V> = HashMap::new();
    let (mut inserted, mut found) = (0usize, 0usize);
    for round in 0..rounds {
        let what = format!("{name} round {round}");
        let stored: Vec<K> = oracle.keys().copied().collect();
        let children = t.children().max(1);
        // Upserts: one or two batches per round.
        for _ in 0..rng.random_range(1..3) {
            let n = batch_size(&mut rng, bk);
            let only = rng.random_bool(0.15).then(|| rng.random_range(0..children));
            let keys = gen_keys(&mut rng, &t, &stored, n, only);
            let values: Vec<V> = (0..n)
                .map(|_| V::narrow(rng.random::<u32>() as u64 >> 1))
                .collect();
            if n > 0 && rng.random_bool(0.05) {
                // A sentinel inside the batch: refused, table unchanged.
                let mut bad = keys.clone();
                let at = rng.random_range(0..n);
                bad[at] = K::narrow(u64::MAX);
                let first = bad.iter().position(|k| k.is_sentinel()).unwrap();
                let len = t.len();
                match t.insert(&bad, &values) {
                    Err(Error::SentinelKey { index }) => {
                        assert_eq!(index, first, "{what}: sentinel index (n {n})")
                    }
                    r => panic!("{what}: sentinel at {first} of {n} not refused: {r:?}"),
                }
                assert_eq!(t.len(), len, "{what}: unchanged by the sentinel batch");
            }
            t.insert(&keys, &values)
                .unwrap_or_else(|e| panic!("{what}: insert of {n} (only {only:?}): {e}"));
            for (k, v) in keys.iter().zip(&values) {
                oracle.insert(*k, *v);
            }
            inserted += n;
            assert_eq!(
                t.len(),
                oracle.len(),
                "{what}: len after insert of {n} (only {only:?})"
            );
        }
        // Finds of random present/absent keys, boundary sizes.
        let stored: Vec<K> = oracle.keys().copied().collect();
        for _ in 0..rng.random_range(1..4) {
            let n = batch_size(&mut rng, bk);
            let q: Vec<K> = (0..n)
                .map(|_| {
                    if !stored.is_empty() && rng.random_bool(0.5) {
                        stored[rng.random_range(0..stored.len())]
                    } else {
                        key::<K>(rng.random_range(0..RANGE + 10_000))
                    }
                })
                .collect();
            check_finds(&mut t, &oracle, &q, &format!("{what}: find of {n}"));
            found += n;
        }
        // Finds whose keys all route to one child, large enough to be sized ahead (and overflow).
        if rng.random_bool(0.2) {
            let c = rng.random_range(0..t.children().max(1));
            let n = [bk, 2 * bk + 1, rng.random_range(1..4 * bk)][rng.random_range(0..3)];
            let q = gen_keys(&mut rng, &t, &stored, n, Some(c));
            check_finds(
                &mut t,
                &oracle,
                &q,
                &format!("{what}: crowded find of {n}, child {c}"),
            );
            found += n;
        }
        // Erases: occasional small ones, a bulk one past the cap.
        if rng.random_bool(0.2) || oracle.len() > cfg.cap {
            let m = if oracle.len() > cfg.cap {
                oracle.len() / 2
            } else {
                rng.random_range(0..2000)
            };
            let mut gone: Vec<K> = stored.iter().take(m).copied().collect();
            gone.extend((0..m / 4).map(|_| key::<K>(rng.random_range(0..RANGE + 10_000))));
            let want: HashSet<K> = gone
                .iter()
                .filter(|k| oracle.contains_key(k))
                .copied()
                .collect();
            let erased = t.erase(&gone).unwrap();
            assert_eq!(erased, want.len(), "{what}: erased");
            for k in &gone {
                oracle.remove(k);
            }
        }
        let absent: Vec<K> = (0..100).map(|i| key::<K>(RANGE + 20_000 + i)).collect();
        check(&mut t, &oracle, &absent, &what);
    }
    eprintln!(
        "{name}: {rounds} rounds, {inserted} keys inserted, {found} found, {} stored, {} children, {:.1}s",
        oracle.len(),
        t.children(),
        start.elapsed().as_secs_f64()
    );
}

fn configs() -> Vec<Cfg> {
    vec![
        // Growth from one child, one-chunk device batches.
        Cfg {
            child_slots: 1 << 14,
            initial_children: 1,
            batch_keys: Some(2048),
            budget: DeviceBudget::Unlimited,
            cap: 60_000,
        },
        // Two chunks per batch, paging.
        Cfg {
            child_slots: 1 << 13,
            initial_children: 2,
            batch_keys: Some(4096),
            budget: DeviceBudget::Children(2),
            cap: 40_000,
        },
        // Three chunks per batch (6144 = 2048 x 3).
        Cfg {
            child_slots: 1 << 14,
            initial_children: 4,
            batch_keys: Some(6144),
            budget: DeviceBudget::Unlimited,
            cap: 60_000,
        },
        // Batches large enough for finds sized ahead (few children).
        Cfg {
            child_slots: 1 << 17,
            initial_children: 2,
            batch_keys: Some(65_536),
            budget: DeviceBudget::Unlimited,
            cap: 100_000,
        },
        Cfg {
            child_slots: 1 << 16,
            initial_children: 2,
            batch_keys: Some(40_960),
            budget: DeviceBudget::Children(2),
            cap: 80_000,
        },
        // Default batches (one copy chunk per batch at these sizes).
        Cfg {
            child_slots: 1 << 15,
            initial_children: 2,
            batch_keys: None,
            budget: DeviceBudget::Unlimited,
            cap: 60_000,
        },
        Cfg {
            child_slots: 1 << 12,
            initial_children: 2,
            batch_keys: Some(8192),
            budget: DeviceBudget::Children(2),
            cap: 30_000,
        },
    ]
}

fn run_all(backend: Backend) {
    let rounds = env("STRESS_ROUNDS", 3);
    let seed = env("STRESS_SEED", 1);
    for (i, cfg) in configs().iter().enumerate() {
        let s = seed * 1000 + i as u64;
        stress::<Bcht, u32, u32>(backend, cfg, s, rounds);
        stress::<Iht, u64, u32>(backend, cfg, s + 100, rounds);
        stress::<Iht, u32, u64>(backend, cfg, s + 200, rounds);
    }
}

#[test]
fn stress_cpu() {
    run_all(Backend::Cpu);
}

#[test]
fn stress_vulkan() {
    if !present(Backend::Vulkan) {
        return;
    }
    run_all(Backend::Vulkan);
}
