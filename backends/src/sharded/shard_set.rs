//! The shards of a sharded family's table ([`ShardSet`]): where they live, which keys each holds, and every
//! shard's part of a host batch run on a thread of its own, with the accessors each family's table shows
//! (`shard_accessors!`). The chained and CSR families over shards are thin containers over it.

use super::route::{Partition, ShardRoute};
use super::shard_threads::{merge_failures, run_each, run_each_ref};
use crate::results::FindAll;
use crate::runtime::host_io::check_out_len;
use crate::runtime::trace::Trace;
use crate::select::Backend;
use hashtile_core::{Key, Result};

/// A family's shards (`T`: one family table each) and how keys are routed to them.
pub(super) struct ShardSet<T> {
    pub(super) shards: Vec<T>,
    /// The device ordinal of each shard.
    pub(super) devices: Vec<usize>,
    pub(super) route: ShardRoute,
    pub(super) backend: Backend,
}

impl<T> ShardSet<T> {
    /// `shards` (one per shard of `route`) on `devices` (one each, in order).
    pub(super) fn new(
        shards: Vec<T>,
        route: ShardRoute,
        devices: Vec<usize>,
        backend: Backend,
    ) -> Self {
        debug_assert_eq!(route.shards, shards.len(), "one shard per route entry");
        Self {
            shards,
            devices,
            route,
            backend,
        }
    }

    /// The shard that holds `key`.
    pub(super) fn shard_of<K: Key>(&self, key: K) -> usize {
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

impl<T: Send> ShardSet<T> {
    /// Runs `work` on every shard with its part of `keys` (and of `values`: empty parts without them), one
    /// thread each; the partition and the results in shard order, errors naming keys by their batch index.
    pub(super) fn on_parts<K: Key, V: Copy + Send + Sync, U: Send>(
        &mut self,
        keys: &[K],
        values: Option<&[V]>,
        work: impl Fn(&mut T, &[K], &[V]) -> Result<U> + Sync,
    ) -> Result<(Partition, Vec<U>)> {
        let mut trace = Trace::new("sharded");
        let p = Partition::new(&self.route, keys);
        let ks = p.parts(keys);
        let vs = values.map(|v| p.parts(v));
        trace.lap("partition");
        let results = run_each(&mut self.shards, |i, s| {
            work(s, &ks[i], vs.as_ref().map_or(&[][..], |v| &v[i][..]))
        });
        trace.lap("shards");
        trace.report("parts", keys.len());
        let out = merge_failures(&p, results)?;
        Ok((p, out))
    }
}

impl<T: Sync> ShardSet<T> {
    /// [`ShardSet::on_parts`] for calls that read the shards only, its phases laps of `trace`.
    fn on_parts_ref<K: Key, U: Send>(
        &self,
        keys: &[K],
        work: impl Fn(&T, &[K]) -> Result<U> + Sync,
        trace: &mut Trace,
    ) -> Result<(Partition, Vec<U>)> {
        let p = Partition::new(&self.route, keys);
        let ks = p.parts(keys);
        trace.lap("partition");
        let results = run_each_ref(&self.shards, |i, s| work(s, &ks[i]));
        trace.lap("shards");
        let out = merge_failures(&p, results)?;
        Ok((p, out))
    }

    /// One answer per key into `out` (as long as `keys`), in batch order: each shard answers its part by `ask`.
    pub(super) fn answers_into<K: Key, A: Copy + Send + Sync>(
        &self,
        keys: &[K],
        out: &mut [A],
        ask: impl Fn(&T, &[K]) -> Result<Vec<A>> + Sync,
    ) -> Result<()> {
        check_out_len(keys.len(), out.len())?;
        let mut trace = Trace::new("sharded");
        let (p, answers) = self.on_parts_ref(keys, ask, &mut trace)?;
        p.join(out, |s, j| answers[s][j]);
        trace.lap("join");
        trace.report("answers", keys.len());
        Ok(())
    }

    /// A run of values per key into `out` (a multimap's `find_all`), in batch order: each shard answers its part
    /// by `ask`, and the runs are joined by their counts ([`Partition::join_runs`]).
    pub(super) fn runs_into<K: Key, V: Copy + Send + Sync>(
        &self,
        keys: &[K],
        out: &mut FindAll<V>,
        ask: impl Fn(&T, &[K]) -> Result<FindAll<V>> + Sync,
    ) -> Result<()> {
        let mut trace = Trace::new("sharded");
        let (p, answers) = self.on_parts_ref(keys, ask, &mut trace)?;
        p.join_runs(&answers, out)?;
        trace.lap("join");
        trace.report("runs", keys.len());
        Ok(())
    }
}

/// The accessors of a sharded family's table whose shards are `set: ShardSet<$shard>` (a family table of
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
