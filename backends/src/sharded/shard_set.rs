//! The shards of a sharded family's table ([`ShardSet`]): where they live, which keys each holds, and every
//! shard's part of a host batch run on a thread of its own, with the accessors each family's table shows
//! (`shard_accessors!`). The chained and CSR families over shards are thin containers over it.

use super::route::{Partition, ShardRoute};
use super::shard_threads::merge_failures;
use super::staging::{Part, Pinned, Room, Staged, Stages, Staging, on_staged, on_staged_ref};
use crate::results::{FindAll, present};
use crate::runtime::host_io::check_out_len;
use crate::runtime::select::Backend;
use crate::runtime::trace::Trace;
use hashtile_core::{Key, Result, Value};

/// A family's shards (`T`: one family table of `K -> V` each), how keys are routed to them, and each shard's
/// staging buffers for its part of a host batch.
pub(super) struct ShardSet<T, K: Key, V: Value> {
    pub(super) shards: Vec<T>,
    /// The device ordinal of each shard.
    pub(super) devices: Vec<usize>,
    pub(super) route: ShardRoute,
    pub(super) backend: Backend,
    stages: Stages<K, V>,
}

impl<T: Pinned, K: Key, V: Value> ShardSet<T, K, V> {
    /// `shards` (one per shard of `route`) on `devices` (one each, in order).
    pub(super) fn new(
        shards: Vec<T>,
        route: ShardRoute,
        devices: Vec<usize>,
        backend: Backend,
    ) -> Self {
        debug_assert_eq!(route.shards, shards.len(), "one shard per route entry");
        Self {
            stages: Stages::new(&shards),
            shards,
            devices,
            route,
            backend,
        }
    }

    /// The shard that holds `key`.
    pub(super) fn shard_of(&self, key: K) -> usize {
        self.route.shard_of(key.widen())
    }

    /// The shard a single shard's calls go to directly (the caller's batch is its part), if there is one.
    pub(super) fn only(&self) -> Option<&T> {
        match &self.shards[..] {
            [one] => Some(one),
            _ => None,
        }
    }

    /// [`ShardSet::only`], mutably.
    pub(super) fn only_mut(&mut self) -> Option<&mut T> {
        match &mut self.shards[..] {
            [one] => Some(one),
            _ => None,
        }
    }
}

impl<T: Pinned + Send, K: Key, V: Value> ShardSet<T, K, V> {
    /// Runs `work` on every shard with its part of `keys` (and of `values`: empty parts without them), staged
    /// in its buffers, one thread each; the results in shard order, errors naming keys by their batch index.
    pub(super) fn on_parts<U: Send>(
        &mut self,
        keys: &[K],
        values: Option<&[V]>,
        work: impl Fn(&mut T, &[K], &[V]) -> Result<U> + Sync,
    ) -> Result<Vec<U>> {
        let mut trace = Trace::new("sharded");
        let room = if values.is_some() {
            Room::Values
        } else {
            Room::Keys
        };
        let (p, mut staged) =
            (self.stages).stage(&self.shards, &self.route, (keys, values), room, &mut trace);
        let results = on_staged(&mut self.shards, &mut staged, &p, |s, part| {
            let v = if values.is_some() {
                &part.values[..]
            } else {
                &[]
            };
            work(s, part.keys, v)
        });
        trace.lap("shards");
        trace.report("parts", keys.len());
        merge_failures(&p, results)
    }
}

impl<T: Pinned + Sync, K: Key, V: Value> ShardSet<T, K, V> {
    /// Runs `ask` on every shard with its staged part (`room` reserved), one thread each, reading the shards
    /// only; the partition and the staged answers, held for the join.
    fn ask_parts(
        &self,
        keys: &[K],
        room: Room,
        ask: impl Fn(&T, Part<'_, K, V>) -> Result<()> + Sync,
        trace: &mut Trace,
    ) -> Result<(Partition, Staged<'_, K, V>)> {
        let (p, mut staged) =
            (self.stages).stage(&self.shards, &self.route, (keys, None), room, trace);
        let results = on_staged_ref(&self.shards, &mut staged, &p, ask);
        trace.lap("shards");
        merge_failures(&p, results)?;
        Ok((p, staged))
    }

    /// An answer per key into `out` (as long as `keys`), in batch order: each shard writes its part's answers
    /// into its staging buffers (`room`) by `ask`, and key `i`, its shard's `j`-th, gets `answer(staging, j)`.
    fn join_into<A: Send>(
        &self,
        (keys, out): (&[K], &mut [A]),
        (call, room): (&'static str, Room),
        ask: impl Fn(&T, Part<'_, K, V>) -> Result<()> + Sync,
        answer: impl Fn(&Staging<K, V>, usize) -> A + Sync,
    ) -> Result<()> {
        check_out_len(keys.len(), out.len())?;
        let mut trace = Trace::new("sharded");
        let (p, guards) = self.ask_parts(keys, room, ask, &mut trace)?;
        let staged: &[Staging<K, V>] = &guards;
        p.join(out, |s, j| answer(&staged[s], j));
        trace.lap("join");
        trace.report(call, keys.len());
        Ok(())
    }

    /// A value per key into `out` (as long as `keys`), in batch order: each shard writes its part's answers
    /// into its staging buffer by `ask(shard, keys, answers)`.
    pub(super) fn values_into(
        &self,
        keys: &[K],
        out: &mut [V],
        ask: impl Fn(&T, &[K], &mut [V]) -> Result<()> + Sync,
    ) -> Result<()> {
        self.join_into(
            (keys, out),
            ("values", Room::Values),
            |s, part| ask(s, part.keys, part.values),
            |g, j| g.value(j),
        )
    }

    /// `Some(value)` per present key into `out` (as long as `keys`), in batch order: each shard writes its
    /// part's values and presence bits into its staging buffers by `ask(shard, keys, values, bits)`.
    pub(super) fn options_into(
        &self,
        keys: &[K],
        out: &mut [Option<V>],
        ask: impl Fn(&T, &[K], &mut [V], &mut [u32]) -> Result<()> + Sync,
    ) -> Result<()> {
        self.join_into(
            (keys, out),
            ("options", Room::Values),
            |s, part| ask(s, part.keys, part.values, part.found),
            |g, j| present(g.found(), j).then(|| g.value(j)),
        )
    }

    /// A count per key into `out` (as long as `keys`), in batch order: each shard writes its part's counts
    /// into its staging buffer by `ask(shard, keys, counts)`.
    pub(super) fn counts_into(
        &self,
        keys: &[K],
        out: &mut [u32],
        ask: impl Fn(&T, &[K], &mut [u32]) -> Result<()> + Sync,
    ) -> Result<()> {
        self.join_into(
            (keys, out),
            ("counts", Room::Counts),
            |s, part| ask(s, part.keys, part.counts),
            |g, j| g.count(j),
        )
    }

    /// A run of values per key into `out` (a multimap's `find_all`), in batch order: each shard answers its
    /// part into its kept answer by `ask(shard, keys, answer)`, and the runs are joined by their counts
    /// ([`Partition::join_runs`]).
    pub(super) fn runs_into(
        &self,
        keys: &[K],
        out: &mut FindAll<V>,
        ask: impl Fn(&T, &[K], &mut FindAll<V>) -> Result<()> + Sync,
    ) -> Result<()> {
        let mut trace = Trace::new("sharded");
        let (p, guards) = self.ask_parts(
            keys,
            Room::Keys,
            |s, part| ask(s, part.keys, part.runs),
            &mut trace,
        )?;
        let answers: Vec<&FindAll<V>> = guards.iter().map(|g| g.runs()).collect();
        p.join_runs(&answers, out)?;
        trace.lap("join");
        trace.report("runs", keys.len());
        Ok(())
    }
}

/// The accessors of a sharded family's table whose shards are `set: ShardSet<$shard, K, V>` (a family table of
/// `K -> V` with `len` and `pairs`); `$held` names what a shard holds of a key, for the docs.
macro_rules! shard_accessors {
    ($shard:ty, $held:literal) => {
        /// The backend every shard runs on.
        pub fn backend(&self) -> Backend {
            self.set.backend
        }

        /// Shards.
        pub fn shard_count(&self) -> usize {
            self.set.shards.len()
        }

        /// Shard `i` (`i < shard_count()`).
        pub fn shard(&self, i: usize) -> &$shard {
            &self.set.shards[i]
        }

        /// The device ordinal of each shard.
        pub fn devices(&self) -> &[usize] {
            &self.set.devices
        }

        #[doc = concat!("The shard that holds `key`'s ", $held, ".")]
        pub fn shard_of(&self, key: K) -> usize {
            self.set.shard_of(key)
        }

        /// Pairs stored over all shards.
        pub fn len(&self) -> usize {
            self.set.shards.iter().map(<$shard>::len).sum()
        }

        /// `true` when no shard holds a pair.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// Every stored pair (shard by shard).
        pub fn pairs(&self) -> Result<Vec<(K, V)>> {
            let mut all = Vec::with_capacity(self.len());
            for s in &self.set.shards {
                all.extend(s.pairs()?);
            }
            Ok(all)
        }
    };
}
pub(super) use shard_accessors;
