//! Mixed batches on a static table ([`HashTable::apply`]): inserts, replaces, erases and finds in one call,
//! one outcome per operation.
//!
//! **Why not one launch of mixed operations.** The tile driver runs mixed launches (the chained tables use
//! them), but on open addressing two operations of one launch on the same key can corrupt a table whose
//! placement is a choice (IHT's and P2BHT's least-loaded bucket: two inserts of one key may pick different
//! buckets) or moves pairs (BCHT's and 1CHT's evictions: an erase misses the key an eviction carries in a
//! tile's registers, and two inserts of one key may both be stored). Only linear probing and double hashing
//! converge. So a batch is resolved first and written as operations on distinct keys, which every scheme and
//! backend runs safely:
//!
//! 1. the batch's distinct keys are looked up once (one find);
//! 2. each key's operations run on the host, in batch order, from the state found: each gets its outcome,
//!    and the key its final state;
//! 3. keys stored before and absent after are erased (one erase), keys whose final value differs from the
//!    stored one are written (one insert).
//!
//! Operations on one key therefore take effect **in batch order** (a stronger contract than
//! `ChainedTable::apply`'s unspecified order), and no two writes of one launch share a key.

use super::HashTable;
use crate::results::{Op, Outcome};
use crate::runtime::disjoint::DisjointWrites;
use crate::runtime::trace::Trace;
use hashtile_core::element::first_position;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, Result, Value};
use rayon::prelude::*;

/// A batch resolved against the table's state before it (see the module docs).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Resolved<K, V> {
    /// One outcome per operation, in batch order.
    pub outcomes: Vec<Outcome<V>>,
    /// Keys stored before the batch and absent after it.
    pub erase: Vec<K>,
    /// Keys present after the batch whose value differs from the one stored before (new keys included).
    pub write_keys: Vec<K>,
    /// Their final values.
    pub write_values: Vec<V>,
    /// Keys absent before the batch and present after it.
    pub new_keys: usize,
}

/// Operations per bin that the grouping aims at: a bin's operations, its groups' table and their states stay
/// within the per-core caches while it is grouped and resolved.
const BIN_OPS: usize = 1 << 14;

/// A batch grouped by key, every pass over it in streams (a batch of millions touched at random indices spends
/// its time waiting for memory):
///
/// 1. the operations are scattered into bins by bits of a multiplicative hash of their key, by blocks of the
///    batch in parallel, each block's operations of a bin in a run of their own, so a bin keeps batch order and
///    all of a key's operations share a bin;
/// 2. each bin (in parallel) numbers its distinct keys in order of first occurrence through a small hash table
///    of its own: the batch's distinct keys are the bins' in turn;
/// 3. `resolve` walks each bin's operations in order with its keys' states, and writes the outcomes back into
///    batch order block by block, reading each block's runs as the scatter wrote them.
pub(crate) struct Groups<K, V> {
    /// The operations by bin.
    ops: Vec<Op<K, V>>,
    /// Each binned operation's group: its key's index among its bin's distinct keys.
    group: Vec<u32>,
    /// The distinct keys, bin after bin.
    keys: Vec<K>,
    /// Bin `b`'s distinct keys are `keys[key_at[b]..key_at[b + 1]]`.
    key_at: Vec<usize>,
    scatter: Scatter,
}

/// Where the scatter put each block's operations of each bin.
struct Scatter {
    bits: u32,
    /// Operations per block (the last block may be shorter).
    block: usize,
    blocks: usize,
    /// `at[b * blocks + c]`: where block `c`'s operations of bin `b` start; bin `b` starts at `at[b * blocks]`
    /// and the last entry is the batch's length.
    at: Vec<usize>,
}

impl Scatter {
    fn bins(&self) -> usize {
        1 << self.bits
    }

    /// The bin of `k` (the top `bits` of a multiplicative hash).
    fn bin_of<K: Key>(&self, k: K) -> usize {
        match self.bits {
            0 => 0,
            b => (k.widen().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - b)) as usize,
        }
    }

    /// Bin `b`'s range of the binned order.
    fn bin(&self, b: usize) -> std::ops::Range<usize> {
        self.at[b * self.blocks]..self.at[(b + 1) * self.blocks]
    }

    /// Block `c`'s cursors: where its operations of each bin start.
    fn cursors(&self, c: usize) -> Vec<usize> {
        (0..self.bins())
            .map(|b| self.at[b * self.blocks + c])
            .collect()
    }

    /// `x` cut into the bins' ranges of the binned order.
    fn bins_of<'a, T>(&self, mut x: &'a mut [T]) -> Vec<&'a mut [T]> {
        let mut parts = Vec::with_capacity(self.bins());
        for b in 0..self.bins() {
            let (part, rest) = x.split_at_mut(self.bin(b).len());
            parts.push(part);
            x = rest;
        }
        parts
    }
}

impl<K: Key, V: Value> Groups<K, V> {
    /// The batch's distinct keys (bin after bin, each bin's in order of first occurrence).
    pub(crate) fn keys(&self) -> &[K] {
        &self.keys
    }
}

/// Numbers the distinct keys of one bin's operations in order of first occurrence: each operation's number into
/// `group`, the keys returned. The bin's table of numbers, keyed by a second multiplicative hash, doubles as keys
/// arrive, so a bin of one key repeated keeps a small table.
fn number_keys<K: Key, V: Value>(ops: &[Op<K, V>], group: &mut [u32]) -> Vec<K> {
    let mut keys: Vec<K> = Vec::new();
    let mut bits = 6u32;
    let mut slots = vec![u32::MAX; 1 << bits];
    let slot_of =
        |k: K, bits: u32| (k.widen().wrapping_mul(0xD6E8_FEB8_6659_FD93) >> (64 - bits)) as usize;
    for (o, g) in ops.iter().zip(group.iter_mut()) {
        let k = o.key();
        let mask = (1usize << bits) - 1;
        let mut s = slot_of(k, bits);
        loop {
            match slots[s] {
                u32::MAX => {
                    slots[s] = keys.len() as u32;
                    *g = keys.len() as u32;
                    keys.push(k);
                    break;
                }
                id if keys[id as usize] == k => {
                    *g = id;
                    break;
                }
                _ => s = (s + 1) & mask,
            }
        }
        if keys.len() * 2 > slots.len() {
            bits += 1;
            slots = vec![u32::MAX; 1 << bits];
            let mask = (1usize << bits) - 1;
            for (id, &k) in keys.iter().enumerate() {
                let mut s = slot_of(k, bits);
                while slots[s] != u32::MAX {
                    s = (s + 1) & mask;
                }
                slots[s] = id as u32;
            }
        }
    }
    keys
}

/// Groups the batch by key (see [`Groups`]).
pub(crate) fn group<K: Key, V: Value>(ops: &[Op<K, V>]) -> Groups<K, V> {
    let n = ops.len();
    let bits = (n / BIN_OPS)
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .min(12);
    let block = n.div_ceil(rayon::current_num_threads() * 4).max(1 << 12);
    let mut scatter = Scatter {
        bits,
        block,
        blocks: n.div_ceil(block),
        at: Vec::new(),
    };
    let bins = scatter.bins();
    let counts: Vec<Vec<u32>> = ops
        .par_chunks(block)
        .map(|c| {
            let mut count = vec![0u32; bins];
            for o in c {
                count[scatter.bin_of(o.key())] += 1;
            }
            count
        })
        .collect();
    let blocks = scatter.blocks;
    scatter.at = vec![0; bins * blocks + 1];
    let mut sum = 0;
    for b in 0..bins {
        for (c, count) in counts.iter().enumerate() {
            scatter.at[b * blocks + c] = sum;
            sum += count[b] as usize;
        }
    }
    scatter.at[bins * blocks] = sum;
    let mut binned: Vec<Op<K, V>> = vec![Op::Find(K::default()); n];
    {
        let out = DisjointWrites::new(&mut binned);
        let (out, scatter) = (&out, &scatter);
        ops.par_chunks(block).enumerate().for_each(|(c, chunk)| {
            let mut next = scatter.cursors(c);
            for o in chunk {
                let b = scatter.bin_of(o.key());
                // SAFETY: block `c`'s operations of bin `b` go to `at[b][c]..` up to its count, which no other
                // block's operations of any bin take.
                unsafe { out.write(next[b], *o) };
                next[b] += 1;
            }
        });
    }
    let mut group = vec![0u32; n];
    let per_bin: Vec<Vec<K>> = (scatter.bins_of(&mut group).into_par_iter().enumerate())
        .map(|(b, g)| number_keys(&binned[scatter.bin(b)], g))
        .collect();
    let mut key_at = Vec::with_capacity(bins + 1);
    key_at.push(0);
    for k in &per_bin {
        key_at.push(key_at.last().copied().unwrap_or(0) + k.len());
    }
    let keys = per_bin.into_par_iter().flatten().collect();
    Groups {
        ops: binned,
        group,
        keys,
        key_at,
        scatter,
    }
}

/// What one key's operations leave that changes the table: an erase, or a write of its final value (`true`: a
/// new key).
#[derive(Clone, Copy)]
enum Net<V> {
    Erase,
    Write(V, bool),
}

/// Runs each key's operations in batch order from `before` (the stored value of each of [`Groups::keys`], in
/// that order), the bins in parallel; the outcomes go back into batch order (`ops`, the batch the groups were
/// made from).
pub(crate) fn resolve<K: Key, V: Value>(
    ops: &[Op<K, V>],
    groups: &Groups<K, V>,
    before: &[Option<V>],
) -> Resolved<K, V> {
    let sc = &groups.scatter;
    let mut binned_out = vec![Outcome::NotFound; ops.len()];
    let nets: Vec<Vec<(K, Net<V>)>> = (sc.bins_of(&mut binned_out).into_par_iter().enumerate())
        .map(|(b, out)| {
            let keys = &groups.keys[groups.key_at[b]..groups.key_at[b + 1]];
            let was = &before[groups.key_at[b]..groups.key_at[b + 1]];
            let mut state = was.to_vec();
            let range = sc.bin(b);
            for ((o, &g), slot) in groups.ops[range.clone()]
                .iter()
                .zip(&groups.group[range])
                .zip(out.iter_mut())
            {
                let s = &mut state[g as usize];
                *slot = match *o {
                    Op::Insert(_, v) | Op::Replace(_, v) => match s.replace(v) {
                        Some(_) => Outcome::Updated,
                        None => Outcome::Inserted,
                    },
                    Op::Erase(_) => match s.take() {
                        Some(_) => Outcome::Erased,
                        None => Outcome::NotFound,
                    },
                    Op::Find(_) => s.map_or(Outcome::NotFound, Outcome::Found),
                };
            }
            (keys.iter().zip(was).zip(&state))
                .filter_map(|((&k, &w), &s)| match (w, s) {
                    (Some(_), None) => Some((k, Net::Erase)),
                    (w, Some(v)) if w != Some(v) => Some((k, Net::Write(v, w.is_none()))),
                    _ => None,
                })
                .collect()
        })
        .collect();
    // The outcomes back in batch order: block by block, each block's runs read in the order the scatter wrote.
    let mut outcomes = vec![Outcome::NotFound; ops.len()];
    (outcomes
        .par_chunks_mut(sc.block)
        .zip(ops.par_chunks(sc.block)))
    .enumerate()
    .for_each(|(c, (out, chunk))| {
        let mut next = sc.cursors(c);
        for (slot, o) in out.iter_mut().zip(chunk) {
            let b = sc.bin_of(o.key());
            *slot = binned_out[next[b]];
            next[b] += 1;
        }
    });
    let nets: Vec<(K, Net<V>)> = nets.into_iter().flatten().collect();
    let erase = (nets.par_iter())
        .filter(|(_, n)| matches!(n, Net::Erase))
        .map(|&(k, _)| k)
        .collect();
    let (write_keys, write_values): (Vec<K>, Vec<V>) = (nets.par_iter())
        .filter_map(|&(k, n)| match n {
            Net::Write(v, _) => Some((k, v)),
            _ => None,
        })
        .unzip();
    let new_keys = (nets.par_iter())
        .filter(|(_, n)| matches!(n, Net::Write(_, true)))
        .count();
    Resolved {
        outcomes,
        erase,
        write_keys,
        write_values,
        new_keys,
    }
}

impl<S: SchemeInfo, K: Key, V: Value> HashTable<S, K, V> {
    /// Runs a mixed batch of inserts, replaces, erases and finds and returns one outcome per operation, in
    /// batch order. Keys are unique in a static table, so `Insert` of a stored key overwrites it (as
    /// [`HashTable::insert`]) and answers [`Outcome::Updated`]. Operations on one key take effect in batch
    /// order (an erase then a find of a key finds nothing; a find after a replace sees the new value);
    /// operations on different keys commute.
    ///
    /// The batch is resolved on the host against one lookup of its distinct keys, then written as one erase
    /// and one insert of distinct keys (the module docs say why not one launch of mixed operations): the cost
    /// is a find, an erase and an insert of the keys that change, plus a grouping of the batch by key on the host.
    ///
    /// Errors: an `Insert` or `Replace` of the sentinel key is [`Error::SentinelKey`] (its index in `ops`);
    /// a batch whose new keys would not fit a table without growth is [`Error::CapacityExceeded`]; both leave
    /// the table unchanged. Finds and erases of the sentinel key answer [`Outcome::NotFound`], as
    /// [`HashTable::find`] and [`HashTable::erase`] do.
    ///
    /// ```
    /// # use hashtile_backends::{Backend, BackendChoice, HashTable, TableConfig};
    /// # use hashtile_probing::Bcht;
    /// use hashtile_backends::results::{Op, Outcome};
    /// let cfg = TableConfig::for_keys(1000, 0.8).backend(BackendChoice::Exactly(Backend::Cpu));
    /// let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg)?;
    /// t.insert(&[1, 2], &[10, 20])?;
    /// let got = t.apply(&[Op::Find(1), Op::Erase(1), Op::Find(1), Op::Replace(2, 21), Op::Insert(3, 30)])?;
    /// assert_eq!(
    ///     got,
    ///     vec![Outcome::Found(10), Outcome::Erased, Outcome::NotFound, Outcome::Updated, Outcome::Inserted]
    /// );
    /// assert_eq!(t.find(&[1, 2, 3])?, vec![None, Some(21), Some(30)]);
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    pub fn apply(&mut self, ops: &[Op<K, V>]) -> Result<Vec<Outcome<V>>> {
        let stream = self.stream.id();
        stream.executes(|| {
            if let Some(index) = first_position(ops, |o| {
                matches!(o, Op::Insert(k, _) | Op::Replace(k, _) if self.swap.key(*k).is_sentinel())
            }) {
                return Err(Error::SentinelKey { index });
            }
            if ops.is_empty() {
                return Ok(Vec::new());
            }
            let mut trace = Trace::new("apply");
            let groups = group(ops);
            trace.lap("group");
            let (before, _) = self.engine.find_options(&self.swap.keys(groups.keys()))?;
            trace.lap("find");
            let r = resolve(ops, &groups, &before);
            trace.lap("resolve");
            let after = self.len() - r.erase.len() + r.new_keys;
            if self.config.growth.is_none() && after > self.capacity() {
                return Err(Error::CapacityExceeded {
                    len: self.len() - r.erase.len(),
                    incoming: r.new_keys,
                    capacity: self.capacity(),
                });
            }
            if !r.erase.is_empty() {
                let erased = self.erase(&r.erase)?;
                if erased != r.erase.len() {
                    return Err(Error::Device(format!(
                        "apply: {} keys found stored, {erased} erased",
                        r.erase.len()
                    )));
                }
            }
            trace.lap("erase");
            if !r.write_keys.is_empty() {
                self.insert(&r.write_keys, &r.write_values)?;
            }
            trace.lap("insert");
            trace.report("apply", ops.len());
            Ok(r.outcomes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_keys_and_keeps_each_keys_order() {
        let ops = [
            Op::Insert(5u32, 1u32),
            Op::Find(3),
            Op::Erase(5),
            Op::Replace(5, 2),
            Op::Find(5),
        ];
        let groups = group(&ops);
        // One bin: its keys in order of first occurrence.
        assert_eq!(groups.keys(), &[5, 3]);
        let r = resolve(&ops, &groups, &[Some(7), Some(9)]);
        assert_eq!(
            r.outcomes,
            vec![
                Outcome::Updated,
                Outcome::Found(9),
                Outcome::Erased,
                Outcome::Inserted,
                Outcome::Found(2)
            ]
        );
        // 3 is untouched; 5 ends at 2 (stored 7 before): a write, not a new key.
        assert_eq!(r.erase, Vec::<u32>::new());
        assert_eq!(
            (r.write_keys, r.write_values, r.new_keys),
            (vec![5], vec![2], 0)
        );
    }

    /// Grouping and resolving agree with running the batch one operation after another on a `HashMap`: every
    /// outcome, and the keys to erase and to write, over batches large enough for many bins and blocks, with few
    /// distinct keys (long runs), all keys equal, and all distinct.
    #[test]
    fn resolve_matches_a_sequential_map_at_every_size() {
        use std::collections::{HashMap, HashSet};
        let mix = |i: u64| {
            (i ^ 0x51ed)
                .wrapping_mul(0xD6E8_FEB8_6659_FD93)
                .rotate_left(29)
        };
        for (n, distinct) in [
            (0usize, 1u64),
            (1, 1),
            (5000, 7),
            (1 << 16, 1),
            (1 << 17, 1000),
            (300_001, 1 << 40),
        ] {
            let ops: Vec<Op<u64, u64>> = (0..n as u64)
                .map(|i| match mix(i ^ 0xabc) % 4 {
                    0 => Op::Find(mix(i) % distinct),
                    1 => Op::Insert(mix(i) % distinct, i % 5),
                    2 => Op::Replace(mix(i) % distinct, i % 3),
                    _ => Op::Erase(mix(i) % distinct),
                })
                .collect();
            // Half the keys are stored before the batch, with a value that some operations write again.
            let stored_before = |k: u64| (mix(k) % 2 == 0).then_some(k % 4);
            let groups = group(&ops);
            let keys = groups.keys();
            assert_eq!(
                keys.iter().collect::<HashSet<_>>().len(),
                keys.len(),
                "n {n}: a key is in one group"
            );
            let before: Vec<Option<u64>> = keys.iter().map(|&k| stored_before(k)).collect();
            let r = resolve(&ops, &groups, &before);
            let mut map: HashMap<u64, Option<u64>> =
                keys.iter().map(|&k| (k, stored_before(k))).collect();
            assert_eq!(
                map.len(),
                ops.iter().map(|o| o.key()).collect::<HashSet<_>>().len()
            );
            for (i, o) in ops.iter().enumerate() {
                let s = map.get_mut(&o.key()).expect("every key grouped");
                let want = match *o {
                    Op::Insert(_, v) | Op::Replace(_, v) => match s.replace(v) {
                        Some(_) => Outcome::Updated,
                        None => Outcome::Inserted,
                    },
                    Op::Erase(_) => match s.take() {
                        Some(_) => Outcome::Erased,
                        None => Outcome::NotFound,
                    },
                    Op::Find(_) => s.map_or(Outcome::NotFound, Outcome::Found),
                };
                assert_eq!(r.outcomes[i], want, "n {n}: operation {i}");
            }
            let erase: HashSet<u64> = (map.iter())
                .filter(|(k, s)| stored_before(**k).is_some() && s.is_none())
                .map(|(k, _)| *k)
                .collect();
            let writes: HashMap<u64, u64> = (map.iter())
                .filter_map(|(&k, &s)| s.filter(|&v| stored_before(k) != Some(v)).map(|v| (k, v)))
                .collect();
            let new = writes
                .keys()
                .filter(|&&k| stored_before(k).is_none())
                .count();
            assert_eq!(
                r.erase.iter().copied().collect::<HashSet<_>>(),
                erase,
                "n {n}: erase"
            );
            assert_eq!(r.erase.len(), erase.len(), "n {n}: each erase once");
            let got: HashMap<u64, u64> = r
                .write_keys
                .iter()
                .copied()
                .zip(r.write_values.iter().copied())
                .collect();
            assert_eq!(
                (got, r.write_keys.len(), r.new_keys),
                (writes.clone(), writes.len(), new),
                "n {n}"
            );
        }
    }

    #[test]
    fn net_effects_skip_what_does_not_change() {
        let ops = [
            Op::Erase(1u32),
            Op::Insert(1, 4u32),
            Op::Insert(2, 8),
            Op::Erase(2),
            Op::Erase(3),
            Op::Replace(4, 6),
        ];
        let groups = group(&ops);
        // 1: stored 4 before, erased and put back with 4: nothing to write. 2: absent before and after.
        // 3: stored, erased. 4: new.
        let r = resolve(&ops, &groups, &[Some(4), None, Some(1), None]);
        assert_eq!(r.erase, vec![3]);
        assert_eq!(
            (r.write_keys, r.write_values, r.new_keys),
            (vec![4], vec![6], 1)
        );
        assert_eq!(r.outcomes[3], Outcome::Erased);
        assert_eq!(r.outcomes[4], Outcome::Erased);
    }
}
