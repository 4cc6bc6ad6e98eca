//! Each shard's staging buffers for its part of a host batch ([`Stages`]), kept between calls and page-locked
//! on CUDA (made on the shard's own device, [`Pinned`]): a batch is partitioned straight into them, each shard's
//! part then crosses its GPU's link at the full bus rate, and its answers come back into them before they are
//! joined in the caller's order. Fresh per-shard vectors instead cost each call page faults on every part and
//! a copy from pageable memory per shard (the families over shards ran at 0.08-0.39x of one device that way,
//! NOTES.md open problem 20). Every sharded family stages its host batches here.

use super::route::{Partition, ShardRoute};
use super::shard_threads::run_each;
use crate::chained::ChainedTable;
use crate::csr::CsrTable;
use crate::results::FindAll;
use crate::runtime::host_memory::PinnedBuffer;
use crate::runtime::trace::Trace;
use crate::table::HashTable;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Element, Key, Result, Value};
use std::sync::Mutex;

/// A shard's table, which makes page-locked host buffers on its own device (ordinary memory where its backend
/// has none).
pub(super) trait Pinned {
    /// `n` elements, page-locked where the backend can.
    fn pinned<E: Element>(&self, n: usize) -> PinnedBuffer<E>;
}

impl<S: SchemeInfo, K: Key, V: Value> Pinned for HashTable<S, K, V> {
    fn pinned<E: Element>(&self, n: usize) -> PinnedBuffer<E> {
        self.pinned_buffer(n)
    }
}

impl<K: Key, V: Value> Pinned for ChainedTable<K, V> {
    fn pinned<E: Element>(&self, n: usize) -> PinnedBuffer<E> {
        self.pinned_buffer(n)
    }
}

impl<K: Key, V: Value> Pinned for CsrTable<K, V> {
    fn pinned<E: Element>(&self, n: usize) -> PinnedBuffer<E> {
        self.pinned_buffer(n)
    }
}

/// What a call needs staged besides the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Room {
    /// The keys alone (erases).
    Keys,
    /// A value per key: the batch's values in, or a find's values out.
    Values,
    /// A `u32` answer per key (counts).
    Counts,
}

/// A shard's staging buffers: its part's keys, its values in or answers out, and the answers' other forms.
pub(super) struct Staging<K: Key, V: Value> {
    keys: PinnedBuffer<K>,
    values: PinnedBuffer<V>,
    counts: PinnedBuffer<u32>,
    /// Presence bits of a find's values, a word per 32 keys.
    found: Vec<u32>,
    /// A multimap's answers, whose vectors are reused call after call.
    runs: FindAll<V>,
}

/// A shard's part of a batch in its staging buffers: the first `n` of each that the call reserved (buffers it
/// did not ask for may be shorter).
pub(super) struct Part<'a, K, V> {
    pub keys: &'a [K],
    pub values: &'a mut [V],
    pub counts: &'a mut [u32],
    pub found: &'a mut [u32],
    pub runs: &'a mut FindAll<V>,
}

/// Grows `buf` to at least `n` elements from `shard`'s page-locked memory: that memory is slow to allocate (and
/// is filled once when made), so a buffer grows by at least a quarter and is kept.
fn reserve<T: Pinned, E: Element>(buf: &mut PinnedBuffer<E>, shard: &T, n: usize) {
    if buf.len() < n {
        *buf = shard.pinned(n + n / 4);
    }
}

impl<K: Key, V: Value> Staging<K, V> {
    fn empty<T: Pinned>(shard: &T) -> Self {
        Self {
            keys: shard.pinned(0),
            values: shard.pinned(0),
            counts: shard.pinned(0),
            found: Vec::new(),
            runs: FindAll::default(),
        }
    }

    /// The part of `n` keys the split left here.
    pub fn part(&mut self, n: usize) -> Part<'_, K, V> {
        let words = n.div_ceil(32);
        if self.found.len() < words {
            self.found.resize(words, 0);
        }
        let (v, c) = (n.min(self.values.len()), n.min(self.counts.len()));
        Part {
            keys: &self.keys[..n],
            values: &mut self.values[..v],
            counts: &mut self.counts[..c],
            found: &mut self.found[..words],
            runs: &mut self.runs,
        }
    }

    /// The `j`-th value answer of the part, read after its shard has written it.
    pub fn value(&self, j: usize) -> V {
        self.values[j]
    }

    /// The part's presence bits (with [`Staging::value`]).
    pub fn found(&self) -> &[u32] {
        &self.found
    }

    /// The `j`-th count answer of the part.
    pub fn count(&self, j: usize) -> u32 {
        self.counts[j]
    }

    /// A multimap part's answers.
    pub fn runs(&self) -> &FindAll<V> {
        &self.runs
    }
}

/// Every shard's staging buffers, a set of them per call in flight: a call takes a set for itself from the
/// pool (a new, empty one when every set is in use: `&self` calls, finds, may come from several threads at
/// once) and gives it back when it is done, so one call's split never overwrites another's parts, and calls
/// from several threads still overlap. The pool keeps every set it has made (as many as calls were ever in
/// flight at once).
pub(super) struct Stages<K: Key, V: Value>(Mutex<Vec<Vec<Staging<K, V>>>>);

/// A call's set of staging buffers (one per shard, in shard order), back to its pool when dropped.
pub(super) struct Staged<'a, K: Key, V: Value> {
    set: Vec<Staging<K, V>>,
    pool: &'a Stages<K, V>,
}

impl<K: Key, V: Value> std::ops::Deref for Staged<'_, K, V> {
    type Target = [Staging<K, V>];
    fn deref(&self) -> &Self::Target {
        &self.set
    }
}

impl<K: Key, V: Value> std::ops::DerefMut for Staged<'_, K, V> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.set
    }
}

impl<K: Key, V: Value> Drop for Staged<'_, K, V> {
    fn drop(&mut self) {
        let set = std::mem::take(&mut self.set);
        self.pool.sets().push(set);
    }
}

impl<K: Key, V: Value> Stages<K, V> {
    /// A pool of one set of empty buffers for `shards`.
    pub fn new<T: Pinned>(shards: &[T]) -> Self {
        Self(Mutex::new(vec![Self::set_for(shards)]))
    }

    fn set_for<T: Pinned>(shards: &[T]) -> Vec<Staging<K, V>> {
        shards.iter().map(Staging::empty).collect()
    }

    fn sets(&self) -> std::sync::MutexGuard<'_, Vec<Vec<Staging<K, V>>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Partitions `keys` by `route` and stages the batch in a set of buffers taken for the call
    /// ([`Stages::split`]): the partition, and the set, the call's until the guard drops. The phases are laps
    /// of `trace`.
    pub fn stage<T: Pinned>(
        &self,
        shards: &[T],
        route: &ShardRoute,
        (keys, values): (&[K], Option<&[V]>),
        room: Room,
        trace: &mut Trace,
    ) -> (Partition, Staged<'_, K, V>) {
        let p = Partition::new(route, keys);
        trace.lap("partition");
        let staged = self.split(shards, &p, keys, values, room);
        trace.lap("split");
        (p, staged)
    }

    /// Takes a set of buffers for one call and copies the batch's keys (and `values`, if given) into each
    /// shard's by the partition `p`, growing them (on each shard's own device) to hold its part and what
    /// `room` asks for. The set is the call's until the returned guard drops.
    fn split<T: Pinned>(
        &self,
        shards: &[T],
        p: &Partition,
        keys: &[K],
        values: Option<&[V]>,
        room: Room,
    ) -> Staged<'_, K, V> {
        let taken = self.sets().pop();
        let mut staged = Staged {
            set: taken.unwrap_or_else(|| Self::set_for(shards)),
            pool: self,
        };
        for ((g, shard), &n) in staged.iter_mut().zip(shards).zip(p.lens()) {
            reserve(&mut g.keys, shard, n);
            match room {
                Room::Keys => {}
                Room::Values => reserve(&mut g.values, shard, n),
                Room::Counts => reserve(&mut g.counts, shard, n),
            }
        }
        {
            let mut parts: Vec<&mut [K]> = staged.iter_mut().map(|g| &mut g.keys[..]).collect();
            p.split(keys, &mut parts);
        }
        if let Some(values) = values {
            debug_assert_eq!(room, Room::Values, "values are staged in their room");
            let mut parts: Vec<&mut [V]> = staged.iter_mut().map(|g| &mut g.values[..]).collect();
            p.split(values, &mut parts);
        }
        staged
    }
}

/// Runs `work` on each shard with its staged part (`p`'s lengths), one thread each; results in shard order.
pub(super) fn on_staged<T: Send, K: Key, V: Value, U: Send>(
    shards: &mut [T],
    staged: &mut [Staging<K, V>],
    p: &Partition,
    work: impl Fn(&mut T, Part<'_, K, V>) -> Result<U> + Sync,
) -> Vec<Result<U>> {
    let mut items: Vec<(&mut T, &mut Staging<K, V>)> = shards.iter_mut().zip(staged).collect();
    run_each(&mut items, |i, (shard, st)| {
        work(shard, st.part(p.lens()[i]))
    })
}

/// [`on_staged`] for work that reads its shard only.
pub(super) fn on_staged_ref<T: Sync, K: Key, V: Value, U: Send>(
    shards: &[T],
    staged: &mut [Staging<K, V>],
    p: &Partition,
    work: impl Fn(&T, Part<'_, K, V>) -> Result<U> + Sync,
) -> Vec<Result<U>> {
    let mut items: Vec<(&T, &mut Staging<K, V>)> = shards.iter().zip(staged).collect();
    run_each(&mut items, |i, (shard, st)| {
        work(shard, st.part(p.lens()[i]))
    })
}
