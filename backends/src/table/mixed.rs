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

/// A batch grouped by key: its `(key, operation index)` pairs grouped so that each key's operations are a run,
/// in batch order, and where each key's run starts.
pub(crate) struct Groups<K> {
    order: Vec<(K, u32)>,
    starts: Vec<usize>,
}

impl<K: Key> Groups<K> {
    /// The batch's distinct keys, in group order (by bin, then key order within a bin).
    pub(crate) fn keys(&self) -> Vec<K> {
        self.starts.par_iter().map(|&s| self.order[s].0).collect()
    }

    /// Operation indices of group `g`, in batch order.
    fn run(&self, g: usize) -> &[(K, u32)] {
        let end = self.starts.get(g + 1).copied().unwrap_or(self.order.len());
        &self.order[self.starts[g]..end]
    }
}

/// Pairs per bin that the grouping aims at: a bin's `(key, index)` pairs (8 or 16 bytes each) are sorted within
/// the per-core caches.
const BIN_PAIRS: usize = 1 << 14;

/// Groups the batch by key: the `(key, index)` pairs are scattered into bins by bits of a multiplicative hash
/// of the key (one counting pass and one stable scatter, both in parallel blocks, so a bin keeps batch order
/// and all of a key's pairs share a bin), then every bin is sorted on its own, in parallel. A parallel sort of
/// the whole batch instead moves every pair through memory once per merge level.
pub(crate) fn group<K: Key, V: Value>(ops: &[Op<K, V>]) -> Groups<K> {
    let n = ops.len();
    let bits = (n / BIN_PAIRS)
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .min(12);
    let bin_of = |k: K| -> usize {
        match bits {
            0 => 0,
            b => (k.widen().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - b)) as usize,
        }
    };
    let bins = 1usize << bits;
    // Blocks of the batch, a few per thread: each counts its pairs per bin, then scatters them.
    let block = n.div_ceil(rayon::current_num_threads() * 4).max(1 << 12);
    let counts: Vec<Vec<u32>> = ops
        .par_chunks(block)
        .map(|c| {
            let mut count = vec![0u32; bins];
            for o in c {
                count[bin_of(o.key())] += 1;
            }
            count
        })
        .collect();
    // `at[b * blocks + c]`: where block `c`'s pairs of bin `b` start; bin `b` starts at `at[b * blocks]`.
    let blocks = counts.len();
    let mut at = vec![0usize; bins * blocks + 1];
    let mut sum = 0;
    for b in 0..bins {
        for (c, count) in counts.iter().enumerate() {
            at[b * blocks + c] = sum;
            sum += count[b] as usize;
        }
    }
    at[bins * blocks] = sum;
    let mut order: Vec<(K, u32)> = vec![(K::default(), 0); n];
    {
        let out = DisjointWrites::new(&mut order);
        let (out, at) = (&out, &at);
        ops.par_chunks(block).enumerate().for_each(|(c, chunk)| {
            let mut next: Vec<usize> = (0..bins).map(|b| at[b * blocks + c]).collect();
            for (j, o) in chunk.iter().enumerate() {
                let k = o.key();
                let b = bin_of(k);
                // SAFETY: block `c`'s pairs of bin `b` go to `at[b][c]..` up to its count, which no other
                // block's pairs of any bin take.
                unsafe { out.write(next[b], (k, (c * block + j) as u32)) };
                next[b] += 1;
            }
        });
    }
    // Each bin sorted on its own: its pairs are in batch order already, so a key's run stays in it.
    let mut rest = &mut order[..];
    let mut parts = Vec::with_capacity(bins);
    for b in 0..bins {
        let len = at[(b + 1) * blocks] - at[b * blocks];
        let (part, tail) = rest.split_at_mut(len);
        parts.push(part);
        rest = tail;
    }
    parts.into_par_iter().for_each(|p| p.sort_unstable());
    let starts = (0..order.len())
        .into_par_iter()
        .filter(|&j| j == 0 || order[j].0 != order[j - 1].0)
        .collect();
    Groups { order, starts }
}

/// What one key's operations leave: nothing to write, an erase, or a write of its final value (`true`: a new
/// key).
#[derive(Clone, Copy)]
enum Net<V> {
    Keep,
    Erase,
    Write(V, bool),
}

/// Runs each key's operations in batch order from `before` (the stored value of each of the groups' keys, in
/// key order), the groups in parallel.
pub(crate) fn resolve<K: Key, V: Value>(
    ops: &[Op<K, V>],
    groups: &Groups<K>,
    before: &[Option<V>],
) -> Resolved<K, V> {
    let mut outcomes = vec![Outcome::NotFound; ops.len()];
    let out = DisjointWrites::new(&mut outcomes);
    let out = &out;
    let nets: Vec<Net<V>> = (0..groups.starts.len())
        .into_par_iter()
        .map(|g| {
            let mut s = before[g];
            for &(_, i) in groups.run(g) {
                let o = match ops[i as usize] {
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
                // SAFETY: no other group holds operation `i` (every operation is in exactly one group).
                unsafe { out.write(i as usize, o) };
            }
            match (before[g], s) {
                (Some(_), None) => Net::Erase,
                (b, Some(v)) if b != Some(v) => Net::Write(v, b.is_none()),
                _ => Net::Keep,
            }
        })
        .collect();
    let key = |g: usize| groups.order[groups.starts[g]].0;
    let erase = nets
        .par_iter()
        .enumerate()
        .filter(|(_, n)| matches!(n, Net::Erase))
        .map(|(g, _)| key(g))
        .collect();
    let (write_keys, write_values): (Vec<K>, Vec<V>) = nets
        .par_iter()
        .enumerate()
        .filter_map(|(g, n)| match *n {
            Net::Write(v, _) => Some((key(g), v)),
            _ => None,
        })
        .unzip();
    let new_keys = nets
        .par_iter()
        .filter(|n| matches!(n, Net::Write(_, true)))
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
    /// is a find, an erase and an insert of the keys that change, plus a sort of the batch's keys on the host.
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
            let distinct = groups.keys();
            trace.lap("group");
            let (before, _) = self.engine.find_options(&self.swap.keys(&distinct))?;
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
        assert_eq!(groups.keys(), vec![3, 5]);
        assert_eq!(
            groups.run(1).iter().map(|p| p.1).collect::<Vec<_>>(),
            vec![0, 2, 3, 4]
        );
        let r = resolve(&ops, &groups, &[Some(9), Some(7)]);
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

    /// Every key's group holds exactly its operations, in batch order, and each key has one group: over batches
    /// large enough for many bins, with few distinct keys (long runs), all keys equal, and all distinct.
    #[test]
    fn groups_match_a_map_of_each_keys_indices_at_every_size() {
        use std::collections::HashMap;
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
                .map(|i| match i % 3 {
                    0 => Op::Find(mix(i) % distinct),
                    1 => Op::Insert(mix(i) % distinct, i),
                    _ => Op::Erase(mix(i) % distinct),
                })
                .collect();
            let mut want: HashMap<u64, Vec<u32>> = HashMap::new();
            for (i, o) in ops.iter().enumerate() {
                want.entry(o.key()).or_default().push(i as u32);
            }
            let groups = group(&ops);
            let keys = groups.keys();
            assert_eq!(keys.len(), want.len(), "n {n}: one group per key");
            for (g, k) in keys.iter().enumerate() {
                let run: Vec<u32> = groups.run(g).iter().map(|p| p.1).collect();
                assert!(groups.run(g).iter().all(|p| p.0 == *k), "n {n}: group {g}");
                assert_eq!(Some(&run), want.get(k), "n {n}: key {k}'s operations");
            }
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
