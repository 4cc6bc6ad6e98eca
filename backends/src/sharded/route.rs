//! Which shard a key lives in, and the stable partition of a host batch by shard.
//!
//! A key's shard comes from its route hash (`hashtile_core::hash::route_hash`, the paged tables' route) under a
//! seed of the sharded table's own: the bits it uses are independent of every shard's hash family, so each
//! shard's buckets see a uniform sample of the keys. The top [`ROUTE_BITS`] bits index a directory whose entry
//! `e` is shard `e * shards >> ROUTE_BITS` (a multiply-high, so any count works, not only powers of two): the
//! paged tables' directory lookup, so the device partitions with their kernels (`device::route`, given these
//! entries) and the host with the same table.
//!
//! A [`Partition`] cuts a batch into chunks, counts each chunk's keys per shard, and gives every (chunk, shard)
//! its start in the shard's part, so that splitting a batch into parts and joining the parts' answers back in
//! the caller's order are each one parallel pass with no sort and no index vector.

use crate::results::FindAll;
use crate::runtime::disjoint::DisjointWrites;
use crate::runtime::host_memory::answer_room;
use crate::runtime::host_memory::offsets_from_counts;
use hashtile_core::hash::route_hash;
use hashtile_core::{Key, Result};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Keys per chunk of a partition's passes.
const CHUNK: usize = 1 << 16;

/// The most shards a table has (a key's shard is held in a byte during a partition).
pub const MAX_SHARDS: usize = 256;

/// Route bits a key's shard is read from: a directory of `2^ROUTE_BITS` entries (16 KB on a device), of which
/// each shard takes `4096 / shards` rounded down or up, so shards' expected shares differ by at most one entry's
/// (1/4096 of the keys).
pub const ROUTE_BITS: u32 = 12;

/// A key's shard: its directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardRoute {
    /// Route seed (independent of the shards' hash families).
    pub seed: u64,
    /// Shards, `1..=MAX_SHARDS`.
    pub shards: usize,
    /// Shard of each entry (indexed by the route's top [`ROUTE_BITS`] bits).
    pub entries: Vec<u32>,
}

impl ShardRoute {
    /// The route of `shards` shards under `seed`.
    pub fn new(seed: u64, shards: usize) -> Self {
        let entries = (0..1u64 << ROUTE_BITS)
            .map(|e| ((e * shards as u64) >> ROUTE_BITS) as u32)
            .collect();
        Self {
            seed,
            shards,
            entries,
        }
    }

    /// The shard of the widened key `key`.
    #[inline]
    pub fn shard_of(&self, key: u64) -> usize {
        self.entries[(route_hash(key, self.seed) >> (64 - ROUTE_BITS)) as usize] as usize
    }
}

/// A batch's keys by shard: each key's shard, and where each chunk's keys of each shard start in that shard's
/// part (parts keep the batch's order).
#[derive(Debug)]
pub(crate) struct Partition {
    shard: Vec<u8>,
    /// `starts[c * shards + s]`: the position in shard `s`'s part of chunk `c`'s first key of shard `s`.
    starts: Vec<usize>,
    lens: Vec<usize>,
    shards: usize,
}

impl Partition {
    /// The partition of `keys` under `route`.
    pub fn new<K: Key>(route: &ShardRoute, keys: &[K]) -> Self {
        let shards = route.shards;
        debug_assert!((1..=MAX_SHARDS).contains(&shards));
        let mut shard = vec![0u8; keys.len()];
        let counts: Vec<Vec<usize>> = shard
            .par_chunks_mut(CHUNK)
            .zip(keys.par_chunks(CHUNK))
            .map(|(ids, keys)| {
                let mut count = vec![0usize; shards];
                for (id, k) in ids.iter_mut().zip(keys) {
                    let s = route.shard_of(k.widen());
                    *id = s as u8;
                    count[s] += 1;
                }
                count
            })
            .collect();
        let mut starts = vec![0usize; counts.len() * shards];
        let mut lens = vec![0usize; shards];
        for (c, count) in counts.iter().enumerate() {
            for s in 0..shards {
                starts[c * shards + s] = lens[s];
                lens[s] += count[s];
            }
        }
        Self {
            shard,
            starts,
            lens,
            shards,
        }
    }

    /// Each shard's part length.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    /// Copies `src` (one element per key of the batch) into the shards' parts: `parts[s][..lens[s]]` holds shard
    /// `s`'s elements in batch order. Each part must hold at least its length.
    pub fn split<T: Copy + Send + Sync>(&self, src: &[T], parts: &mut [&mut [T]]) {
        assert_eq!(src.len(), self.shard.len(), "one element per key");
        assert_eq!(parts.len(), self.shards, "one part per shard");
        for (p, &n) in parts.iter().zip(&self.lens) {
            assert!(p.len() >= n, "a part shorter than its shard's keys");
        }
        let writers: Vec<DisjointWrites<'_, T>> =
            parts.iter_mut().map(|p| DisjointWrites::new(p)).collect();
        let writers = &writers;
        src.par_chunks(CHUNK)
            .zip(self.shard.par_chunks(CHUNK))
            .enumerate()
            .for_each(|(c, (src, ids))| {
                let mut at = self.starts[c * self.shards..(c + 1) * self.shards].to_vec();
                for (&x, &s) in src.iter().zip(ids) {
                    let s = s as usize;
                    // SAFETY: chunk `c` writes shard `s`'s positions `starts[c][s]..starts[c + 1][s]`, which no
                    // other chunk writes.
                    unsafe { writers[s].write(at[s], x) };
                    at[s] += 1;
                }
            });
    }

    /// Writes each key's answer back in batch order: `out[i] = answer(s, j)` for the key `i` that was shard
    /// `s`'s `j`-th.
    pub fn join<U: Send>(&self, out: &mut [U], answer: impl Fn(usize, usize) -> U + Sync) {
        assert_eq!(out.len(), self.shard.len(), "one answer per key");
        out.par_chunks_mut(CHUNK)
            .zip(self.shard.par_chunks(CHUNK))
            .enumerate()
            .for_each(|(c, (out, ids))| {
                let mut at = self.starts[c * self.shards..(c + 1) * self.shards].to_vec();
                for (o, &s) in out.iter_mut().zip(ids) {
                    let s = s as usize;
                    *o = answer(s, at[s]);
                    at[s] += 1;
                }
            });
    }

    /// `src` (one element per key of the batch) cut into the shards' parts, each in batch order. The parts'
    /// memory is first written by the parallel split itself (a serial fill of each part first cost more than
    /// the split: at 2^24 keys a shard, 64 MB of stores and page faults per part on one thread).
    pub fn parts<T: Copy + Send + Sync>(&self, src: &[T]) -> Vec<Vec<T>> {
        let mut parts: Vec<Vec<T>> = self.lens.iter().map(|&n| Vec::with_capacity(n)).collect();
        {
            let mut views: Vec<&mut [MaybeUninit<T>]> = parts
                .iter_mut()
                .zip(&self.lens)
                .map(|(v, &n)| &mut v.spare_capacity_mut()[..n])
                .collect();
            // SAFETY: `MaybeUninit<T>` has `T`'s layout, and any `T` is a valid `MaybeUninit<T>`.
            let src: &[MaybeUninit<T>] =
                unsafe { std::slice::from_raw_parts(src.as_ptr().cast(), src.len()) };
            self.split(src, &mut views);
        }
        for (v, &n) in parts.iter_mut().zip(&self.lens) {
            // SAFETY: the split wrote every position below the part's length (the lengths are the counts of
            // the batch's keys per shard, and each key's element goes to one position of its shard's part).
            unsafe { v.set_len(n) };
        }
        parts
    }

    /// Joins the shards' multimap answers (`answers[s]`: shard `s`'s part, a run of values per key) into
    /// `out` in batch order, reusing its allocations: the offsets are made from the runs' lengths in batch
    /// order, then each key's run is copied from its shard's answer. More than `u32::MAX` values in all is a
    /// typed error (the offsets are 32-bit).
    pub fn join_runs<V: Copy + Send + Sync>(
        &self,
        answers: &[&FindAll<V>],
        out: &mut FindAll<V>,
    ) -> Result<()> {
        // Each key's shard and position in that shard's answer, in batch order.
        let mut at = vec![(0u32, 0u32); self.shard.len()];
        self.join(&mut at, |s, j| (s as u32, j as u32));
        let run = |&(s, j): &(u32, u32)| {
            let o = &answers[s as usize].offsets;
            (o[j as usize] as usize, o[j as usize + 1] as usize)
        };
        let total = offsets_from_counts(
            &mut out.offsets,
            at.iter().map(|a| {
                let (from, to) = run(a);
                to - from
            }),
        )?;
        out.values.clear();
        answer_room(&mut out.values, total);
        let offsets = &out.offsets;
        let writer = DisjointWrites::new(&mut out.values.spare_capacity_mut()[..total]);
        at.par_chunks(CHUNK).enumerate().for_each(|(c, chunk)| {
            for (i, a) in chunk.iter().enumerate() {
                let (from, to) = run(a);
                let dst = offsets[c * CHUNK + i] as usize;
                for (k, v) in answers[a.0 as usize].values[from..to].iter().enumerate() {
                    // SAFETY: key `i`'s run `offsets[i]..offsets[i + 1]` is written by its chunk alone.
                    unsafe { writer.write(dst + k, MaybeUninit::new(*v)) };
                }
            }
        });
        // SAFETY: the runs cover `0..total` (the offsets are their running sums), every value written above.
        unsafe { out.values.set_len(total) };
        Ok(())
    }

    /// The batch index of shard `s`'s `j`-th key (for errors that name a key by its index).
    pub fn index_of(&self, s: usize, j: usize) -> usize {
        let chunks = self.starts.len() / self.shards.max(1);
        // The last chunk whose part of shard `s` starts at or before `j`.
        let c = (0..chunks)
            .rev()
            .find(|&c| self.starts[c * self.shards + s] <= j)
            .unwrap_or(0);
        let mut at = self.starts[c * self.shards + s];
        for (i, &id) in self.shard.iter().enumerate().skip(c * CHUNK) {
            if id as usize == s {
                if at == j {
                    return i;
                }
                at += 1;
            }
        }
        unreachable!("shard {s} has no key {j}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_then_join_is_the_identity_and_keeps_order() {
        for shards in [1usize, 2, 3, 4, 7] {
            let route = ShardRoute::new(9, shards);
            let keys: Vec<u32> = (0..200_000u32)
                .map(|i| i.wrapping_mul(2654435761))
                .collect();
            let p = Partition::new(&route, &keys);
            assert_eq!(p.lens().iter().sum::<usize>(), keys.len());
            let mut bufs: Vec<Vec<u32>> = p.lens().iter().map(|&n| vec![0; n]).collect();
            let mut parts: Vec<&mut [u32]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
            p.split(&keys, &mut parts);
            for (s, b) in bufs.iter().enumerate() {
                assert!(b.iter().all(|&k| route.shard_of(k as u64) == s));
                // Batch order within the part.
                let expect: Vec<u32> = keys
                    .iter()
                    .copied()
                    .filter(|&k| route.shard_of(k as u64) == s)
                    .collect();
                assert_eq!(b, &expect);
            }
            let mut back = vec![0u32; keys.len()];
            p.join(&mut back, |s, j| bufs[s][j]);
            assert_eq!(back, keys);
            for (s, b) in bufs.iter().enumerate() {
                for j in [0, b.len() / 2, b.len().saturating_sub(1)] {
                    if j < b.len() {
                        assert_eq!(keys[p.index_of(s, j)], b[j]);
                    }
                }
            }
        }
    }

    #[test]
    fn shards_are_balanced() {
        let route = ShardRoute::new(1, 4);
        let keys: Vec<u32> = (0..1u32 << 20).collect();
        let p = Partition::new(&route, &keys);
        for &n in p.lens() {
            let expect = (1 << 20) as f64 / 4.0;
            assert!((n as f64 - expect).abs() < 5.0 * expect.sqrt(), "{n}");
        }
    }
}
