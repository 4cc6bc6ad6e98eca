//! Chained tables against a multimap oracle: the table builder, key generators, the oracle check, the maps that
//! run tests written on `u32` on any widths, and the SlabHash paper's operation mixes.

use hashtile::chained::{ChainStats, ChainedConfig, ChainedTable, Op, Outcome};
use hashtile::{Backend, BackendChoice, Key, Value};
use rand::{Rng, rngs::StdRng};
use std::collections::{HashMap, HashSet};

/// A table of `n` keys at `load` keys per list (the pool starts at `pool` slabs) on backend `b`.
pub fn table<K: Key, V: Value>(b: Backend, n: usize, load: f64, pool: u32) -> ChainedTable<K, V> {
    let cfg = ChainedConfig::for_keys(n, load)
        .pool_slabs(pool)
        .backend(BackendChoice::Exactly(b));
    ChainedTable::new(cfg).unwrap()
}

/// `n` distinct keys drawn from `0..universe` (never a reserved key).
pub fn distinct_keys<K: Key>(rng: &mut StdRng, n: usize, universe: u64) -> Vec<K> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let k = rng.random_range(0..universe);
        if seen.insert(k) {
            out.push(K::narrow(k));
        }
    }
    out
}

/// The table holds exactly the multimap: every key's values in insertion order (`find_all`, and
/// `find_all_into` into reused answers), its count, its first value (`find`), and the invariants.
pub fn same_as_multimap<K: Key, V: Value>(
    t: &mut ChainedTable<K, V>,
    oracle: &HashMap<K, Vec<V>>,
    absent: &[K],
) -> ChainStats {
    let stats = t.check().expect("invariants");
    let live: usize = oracle.values().map(Vec::len).sum();
    assert_eq!(t.len(), live);
    assert_eq!(stats.live, live);
    let keys: Vec<K> = oracle
        .keys()
        .copied()
        .chain(absent.iter().copied())
        .collect();
    let all = t.find_all(&keys).unwrap();
    let counts = t.count(&keys).unwrap();
    let first = t.find(&keys).unwrap();
    for (i, k) in keys.iter().enumerate() {
        let want: &[V] = oracle.get(k).map(Vec::as_slice).unwrap_or(&[]);
        assert_eq!(
            &all.values[all.offsets[i] as usize..all.offsets[i + 1] as usize],
            want,
            "find_all"
        );
        assert_eq!(counts[i] as usize, want.len(), "count");
        assert_eq!(first[i], want.first().copied(), "find");
    }
    // The same answer into a reused one that held a larger and a smaller previous answer (every width: a
    // table with a 64-bit side narrows its store's words into `out`).
    for previous in [
        [keys.as_slice(), &keys].concat(),
        keys[..keys.len() / 2].to_vec(),
    ] {
        let mut into = t.find_all(&previous).unwrap();
        t.find_all_into(&keys, &mut into).unwrap();
        assert_eq!(into, all, "find_all_into");
    }
    stats
}

/// Tests written on `u32` keys and values run on any widths through these maps: a 64-bit key or value puts
/// the number in its high half as well (all 64 bits in play), and the inverse takes it back.
pub fn key_of<K: Key>(k: u32) -> K {
    K::narrow(if K::BITS == 64 {
        (k as u64) << 32 | 0x5a5a
    } else {
        k as u64
    })
}

pub fn value_of<V: Value>(v: u32) -> V {
    V::narrow(if V::BITS == 64 {
        (v as u64) << 32 | v as u64
    } else {
        v as u64
    })
}

pub fn value_back<V: Value>(v: V) -> u32 {
    v.widen() as u32
}

/// [`ChainedTable::apply`] of `u32` operations on a table of any widths, outcomes as `u32`.
pub fn apply_u32<K: Key, V: Value>(
    t: &mut ChainedTable<K, V>,
    ops: &[Op<u32, u32>],
) -> Vec<Outcome<u32>> {
    let wide: Vec<Op<K, V>> = ops
        .iter()
        .map(|o| match *o {
            Op::Insert(k, v) => Op::Insert(key_of(k), value_of(v)),
            Op::Replace(k, v) => Op::Replace(key_of(k), value_of(v)),
            Op::Erase(k) => Op::Erase(key_of(k)),
            Op::Find(k) => Op::Find(key_of(k)),
        })
        .collect();
    t.apply(&wide)
        .unwrap()
        .into_iter()
        .map(|o| match o {
            Outcome::Found(v) => Outcome::Found(value_back(v)),
            Outcome::Inserted => Outcome::Inserted,
            Outcome::Updated => Outcome::Updated,
            Outcome::Erased => Outcome::Erased,
            Outcome::NotFound => Outcome::NotFound,
        })
        .collect()
}

pub fn keys_of<K: Key>(keys: &[u32]) -> Vec<K> {
    keys.iter().map(|&k| key_of(k)).collect()
}

/// The SlabHash paper's operation mixes Γ = (insert, erase, find present, find absent).
pub const MIXES: [[f64; 4]; 3] = [
    [0.5, 0.5, 0.0, 0.0],
    [0.2, 0.2, 0.3, 0.3],
    [0.1, 0.1, 0.4, 0.4],
];

/// A mixed batch of `n` operations drawn by `mix`, in replace (`unique`) or multimap mode, over keys below
/// `universe` (present ones drawn from `present`).
pub fn mixed_batch(
    rng: &mut StdRng,
    n: usize,
    mix: [f64; 4],
    unique: bool,
    present: &[u32],
    universe: u32,
) -> Vec<Op<u32, u32>> {
    (0..n)
        .map(|_| {
            let r: f64 = rng.random();
            let any = rng.random_range(0..universe);
            let known = if present.is_empty() {
                any
            } else {
                present[rng.random_range(0..present.len())]
            };
            if r < mix[0] {
                let v = rng.random();
                if unique {
                    Op::Replace(any, v)
                } else {
                    Op::Insert(any, v)
                }
            } else if r < mix[0] + mix[1] {
                Op::Erase(if rng.random_bool(0.7) { known } else { any })
            } else if r < mix[0] + mix[1] + mix[2] {
                Op::Find(known)
            } else {
                Op::Find(universe + rng.random_range(0..universe))
            }
        })
        .collect()
}
