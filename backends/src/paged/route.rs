//! Hash routing of a paged table (extendible hashing over children) and the stable partition of a batch by
//! child.
//!
//! A key's route is a 64-bit hash from a seed of its own, so it is independent of every child's hash family
//! (a child's buckets would otherwise see only the keys whose route bits agree, and fill unevenly). The
//! directory holds `2^depth` entries indexed by the route's top `depth` bits; a child of local depth `d` owns
//! the `2^(depth - d)` consecutive entries that share its top `d` bits. Splitting a child moves the keys whose
//! next route bit is set to a new child and touches no other child: a hash-routed table grows one child at a
//! time.

use crate::runtime::disjoint::DisjointWrites;
use rayon::prelude::*;

pub(crate) use hashtile_core::hash::route_hash;

/// The directory of a hash-routed table.
#[derive(Debug, Clone)]
pub(crate) struct Directory {
    /// Route seed.
    pub seed: u64,
    /// Global depth: the directory has `2^depth` entries.
    pub depth: u32,
    /// Child of each entry.
    pub entries: Vec<u32>,
}

/// The deepest directory (2^24 entries, 64 MB): far past any table a host can hold in 64 MB children.
const MAX_DEPTH: u32 = 24;

impl Directory {
    /// One entry per child of `children` (a power of two), each child at depth `log2(children)`.
    pub fn new(seed: u64, children: usize) -> Self {
        debug_assert!(children.is_power_of_two());
        let depth = children.trailing_zeros();
        Self {
            seed,
            depth,
            entries: (0..children as u32).collect(),
        }
    }

    /// The directory as the device router sees it, for a table of `children` children.
    pub fn route_map(&self, children: usize) -> crate::paged::protocol::RouteMap<'_> {
        crate::paged::protocol::RouteMap {
            seed: self.seed,
            depth: self.depth,
            entries: &self.entries,
            children,
        }
    }

    /// The child that owns `key`.
    pub fn child_of(&self, key: u64) -> u32 {
        self.entries[self.entry_of(route_hash(key, self.seed))]
    }

    fn entry_of(&self, route: u64) -> usize {
        if self.depth == 0 {
            0
        } else {
            (route >> (64 - self.depth)) as usize
        }
    }

    /// `true` when `key`'s route bit below the top `local_depth` bits is set: the key moves to the new child
    /// when its child of depth `local_depth` splits.
    pub fn goes_high(&self, key: u64, local_depth: u32) -> bool {
        route_hash(key, self.seed) >> (63 - local_depth) & 1 == 1
    }

    /// `true` when a child of local depth `local_depth` can split (the directory can double if it must).
    pub fn can_split(&self, local_depth: u32) -> bool {
        local_depth < self.depth || self.depth < MAX_DEPTH
    }

    /// Splits `child` (of local depth `local_depth`) into itself and `new_child`, doubling the directory when
    /// the child is as deep as it. Returns `false` (and changes nothing) when the directory is at its maximum
    /// depth.
    pub fn split(&mut self, child: u32, local_depth: u32, new_child: u32) -> bool {
        if local_depth == self.depth {
            if self.depth >= MAX_DEPTH {
                return false;
            }
            self.entries = self.entries.iter().flat_map(|&c| [c, c]).collect();
            self.depth += 1;
        }
        // The child's entries are consecutive; the upper half (next route bit set) goes to the new child.
        let first = self
            .entries
            .iter()
            .position(|&c| c == child)
            .expect("a split child owns directory entries");
        let span = 1usize << (self.depth - local_depth);
        for e in &mut self.entries[first + span / 2..first + span] {
            *e = new_child;
        }
        true
    }
}

/// A stable partition of a batch by child: child `c`'s part is `offsets[c]..offsets[c + 1]` of `keys`, `values`
/// (when the batch has values) and `order` (when asked for: the input positions), in input order, so that "the
/// last occurrence wins" survives partitioning.
#[derive(Default)]
pub(crate) struct Partition<K, V> {
    pub offsets: Vec<usize>,
    pub order: Vec<u32>,
    pub keys: Vec<K>,
    pub values: Vec<V>,
    /// Each input key's child (scratch).
    of: Vec<u32>,
}

impl<K, V> Partition<K, V> {
    /// The range of child `c`'s part.
    pub fn range(&self, c: usize) -> std::ops::Range<usize> {
        self.offsets[c]..self.offsets[c + 1]
    }
    /// Input positions of child `c`'s part (when the order was asked for).
    pub fn of(&self, c: usize) -> &[u32] {
        &self.order[self.range(c)]
    }
}

/// Partitions a batch by `child_of` (child below `children` for each key) in one pass over the data: a counting
/// sort in parallel pieces, each piece counting, then writing its keys, values (if `values` is not empty) and
/// positions (if `keep_order`) at its own offsets. The buffers of `reuse` (a previous partition) are filled
/// again instead of new ones: fresh memory costs a page fault per 4 KiB on first touch, which at 2^26 keys cost
/// more than the copies themselves (H100 host, TRACE events).
pub(crate) fn partition<K: Copy + Default + Send + Sync, V: Copy + Default + Send + Sync>(
    keys: &[K],
    values: &[V],
    keep_order: bool,
    children: usize,
    child_of: impl Fn(&K) -> u32 + Sync,
    reuse: Partition<K, V>,
) -> Partition<K, V> {
    let n = keys.len();
    let Partition {
        mut order,
        keys: mut out_keys,
        values: mut out_values,
        mut of,
        ..
    } = reuse;
    of.clear();
    keys.par_iter().map(&child_of).collect_into_vec(&mut of);
    let pieces = rayon::current_num_threads().clamp(1, n.div_ceil(1 << 14).max(1));
    let piece = n.div_ceil(pieces).max(1);
    let counts: Vec<Vec<usize>> = of
        .par_chunks(piece)
        .map(|chunk| {
            let mut c = vec![0usize; children];
            for &x in chunk {
                c[x as usize] += 1;
            }
            c
        })
        .collect();
    // Offsets by child, then by piece within a child: stable.
    let mut offsets = vec![0usize; children + 1];
    let mut starts = vec![vec![0usize; children]; counts.len()];
    let mut at = 0;
    for c in 0..children {
        offsets[c] = at;
        for (p, pc) in counts.iter().enumerate() {
            starts[p][c] = at;
            at += pc[c];
        }
    }
    offsets[children] = at;
    let with_values = !values.is_empty();
    let refill = |v: &mut Vec<_>, len, x| {
        v.clear();
        v.resize(len, x);
    };
    refill(&mut order, if keep_order { n } else { 0 }, 0u32);
    out_keys.clear();
    out_keys.resize(n, K::default());
    out_values.clear();
    out_values.resize(if with_values { n } else { 0 }, V::default());
    let (o, k, v) = (
        DisjointWrites::new(&mut order),
        DisjointWrites::new(&mut out_keys),
        DisjointWrites::new(&mut out_values),
    );
    of.par_chunks(piece)
        .zip(starts.into_par_iter())
        .enumerate()
        .for_each(|(p, (chunk, mut next))| {
            for (i, &x) in chunk.iter().enumerate() {
                let at = next[x as usize];
                let from = p * piece + i;
                // SAFETY: the offsets give every input position its own output index below `n`.
                unsafe {
                    k.write(at, keys[from]);
                    if with_values {
                        v.write(at, values[from]);
                    }
                    if keep_order {
                        o.write(at, from as u32);
                    }
                }
                next[x as usize] += 1;
            }
        });
    Partition {
        offsets,
        order,
        keys: out_keys,
        values: out_values,
        of,
    }
}

/// `dst[pos[i]] = vals[i]` for each `i`; `pos` holds distinct positions below `dst.len()`.
pub(crate) fn scatter<T: Copy + Send + Sync>(dst: &mut [T], pos: &[u32], vals: &[T]) {
    assert_eq!(pos.len(), vals.len());
    let out = DisjointWrites::new(dst);
    pos.par_iter().zip(vals.par_iter()).for_each(|(&p, &v)| {
        // SAFETY: positions are distinct (the caller's contract), so no two writes meet; `write` checks bounds.
        unsafe { out.write(p as usize, v) };
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_is_stable_and_complete() {
        let n = 100_003;
        let keys: Vec<u64> = (0..n as u64).collect();
        let values: Vec<u32> = (0..n as u32).map(|i| i ^ 77).collect();
        let p = partition(
            &keys,
            &values,
            true,
            7,
            |&k| ((k * 31) % 7) as u32,
            Default::default(),
        );
        assert_eq!(p.offsets[7], n);
        let mut seen = vec![false; n];
        for c in 0..7 {
            let part = p.of(c);
            assert!(part.windows(2).all(|w| w[0] < w[1]), "stable");
            for (j, &i) in part.iter().enumerate() {
                assert_eq!((i as usize * 31) % 7, c);
                assert_eq!(p.keys[p.offsets[c] + j], i as u64);
                assert_eq!(p.values[p.offsets[c] + j], i ^ 77);
                assert!(!seen[i as usize]);
                seen[i as usize] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
        let bare = partition::<u64, u32>(&keys, &[], false, 7, |&k| ((k * 31) % 7) as u32, p);
        assert_eq!(bare.keys, keys_in_order(&keys));
        assert!(bare.order.is_empty() && bare.values.is_empty());
    }

    fn keys_in_order(keys: &[u64]) -> Vec<u64> {
        let mut by: Vec<u64> = keys.to_vec();
        by.sort_by_key(|&k| ((k * 31) % 7, k));
        by
    }

    #[test]
    fn splits_move_only_the_split_childs_keys() {
        let mut d = Directory::new(42, 2);
        let keys: Vec<u64> = (0..10_000).collect();
        let before: Vec<u32> = keys.iter().map(|&k| d.child_of(k)).collect();
        // Split child 0 (depth 1) into 0 and 2.
        assert!(d.split(0, 1, 2));
        assert_eq!(d.depth, 2);
        for (&k, &b) in keys.iter().zip(&before) {
            let a = d.child_of(k);
            match b {
                1 => assert_eq!(a, 1),
                _ => assert_eq!(a, if d.goes_high(k, 1) { 2 } else { 0 }),
            }
        }
        assert!(keys.iter().any(|&k| d.child_of(k) == 2));
    }
}
