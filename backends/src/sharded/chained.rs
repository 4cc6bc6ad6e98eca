//! [`ShardedChainedTable`]: a chained multimap ([`ChainedTable`]) over shards, as [`ShardedTable`] is a static
//! map over them. A key's copies all live in the shard its route hash picks (`route`), so every operation on
//! a key is its shard's own: a host batch is partitioned by shard straight into each shard's kept staging
//! buffers (`sharded::staging`: page-locked on CUDA; one parallel pass, the caller's order kept within each
//! part), each shard runs its part on a thread of its own (each GPU over its own link at the pinned rate, on
//! its table's own stream) with its answers written into those buffers, and the answers are joined in the
//! caller's order. `find_all`'s answers, a run of values
//! per key, are joined by their counts: the offsets are made in the caller's order, then each key's run is
//! copied from its shard's answer.
//!
//! [`ShardedTable`]: super::ShardedTable

use super::config::ShardedConfig;
use super::route::{Partition, ShardRoute};
use super::shard_set::{ShardSet, shard_accessors};
use super::shard_threads::{merge_failures, run_each};
use crate::chained::{ChainStats, ChainedConfig, ChainedTable, Op, Outcome, check_keys};
use crate::results::FindAll;
use crate::runtime::host_io::check_len;
use crate::runtime::select::Backend;
use hashtile_core::{Error, Key, Result, Value};
use rayon::prelude::*;

/// A multimap `K -> V` by slab-list chaining, spread over shards: one [`ChainedTable`] per device of the backend
/// by default (see [`ShardedConfig`]; [`ShardedConfig::shards`] puts several side by side on one device or the
/// CPU). Every call takes host data and answers in the caller's order, with a [`ChainedTable`]'s semantics:
/// duplicates are kept, `replace` keeps keys unique, `erase` takes one copy per key given.
///
/// ```
/// use hashtile_backends::chained::ChainedConfig;
/// use hashtile_backends::{Backend, BackendChoice, ShardedChainedTable, ShardedConfig};
/// let config = ShardedConfig::new(
///     ChainedConfig::for_keys(1000, 0.6).backend(BackendChoice::Exactly(Backend::Cpu)),
/// )
/// .shards(3);
/// let mut t: ShardedChainedTable<u32, u32> = ShardedChainedTable::new(config)?;
/// t.insert(&[1, 1, 2, 3], &[10, 11, 20, 30])?;
/// assert_eq!(t.count(&[1, 2, 9])?, vec![2, 1, 0]);
/// let all = t.find_all(&[9, 1])?;
/// assert_eq!(all.get(0), Some(&[][..]));
/// let mut ones = all.get(1).unwrap().to_vec();
/// ones.sort();
/// assert_eq!(ones, vec![10, 11]);
/// assert_eq!(t.erase_all(&[1])?, 2);
/// assert_eq!(t.len(), 2);
/// # Ok::<(), hashtile_core::Error>(())
/// ```
pub struct ShardedChainedTable<K: Key, V: Value> {
    set: ShardSet<ChainedTable<K, V>, K, V>,
}

impl<K: Key, V: Value> ShardedChainedTable<K, V> {
    /// An empty table: one [`ChainedTable`] per shard on its device, each with the whole table's lists and first
    /// pool slabs divided by the shard count (and room for the keys' spread). Errors are [`ChainedTable::new`]'s
    /// and [`ShardedConfig::shard_devices`]'; a table over ranks is not available yet ([`Error::InvalidConfig`]).
    pub fn new(config: ShardedConfig<ChainedConfig>) -> Result<Self> {
        if config.ranks.is_some() {
            return Err(Error::InvalidConfig(
                "a sharded chained table over ranks is not available yet; one process holds every shard"
                    .into(),
            ));
        }
        let devices = config.shard_devices()?;
        let shards = devices
            .iter()
            .map(|&d| ChainedTable::new(config.shard_table(devices.len(), d)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            set: ShardSet::new(
                shards,
                ShardRoute::new(config.route_seed, devices.len()),
                devices,
                config.backend(),
            ),
        })
    }

    shard_accessors!(ChainedTable<K, V>, "copies");

    /// Inserts every pair as a further copy ([`ChainedTable::insert`]). [`Error::LengthMismatch`] and a reserved
    /// key ([`Error::SentinelKey`], [`Error::TombstoneKey`]: its batch index) leave every shard unchanged.
    pub fn insert(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        if let Some(one) = self.set.only_mut() {
            // One shard: the caller's batch is its part.
            return one.insert(keys, values);
        }
        check_len("values", values.len(), keys.len())?;
        check_keys(keys)?;
        if keys.is_empty() {
            return Ok(());
        }
        self.set
            .on_parts(keys, Some(values), |s, k, v| s.insert(k, v))
            .map(|_| ())
    }

    /// Inserts every pair with unique keys ([`ChainedTable::replace`]): a stored key's first copy gets the new
    /// value. Returns how many keys were new. Errors as [`ShardedChainedTable::insert`].
    pub fn replace(&mut self, keys: &[K], values: &[V]) -> Result<usize> {
        if let Some(one) = self.set.only_mut() {
            return one.replace(keys, values);
        }
        check_len("values", values.len(), keys.len())?;
        check_keys(keys)?;
        if keys.is_empty() {
            return Ok(0);
        }
        let new = (self.set).on_parts(keys, Some(values), |s, k, v| s.replace(k, v))?;
        Ok(new.into_iter().sum())
    }

    /// Erases the first copy of each key (a key given twice erases two copies); returns how many were erased.
    pub fn erase(&mut self, keys: &[K]) -> Result<usize> {
        self.erase_some(keys, false)
    }

    /// Erases every copy of each key; returns how many were erased.
    pub fn erase_all(&mut self, keys: &[K]) -> Result<usize> {
        self.erase_some(keys, true)
    }

    fn erase_some(&mut self, keys: &[K], all: bool) -> Result<usize> {
        if let Some(one) = self.set.only_mut() {
            return if all {
                one.erase_all(keys)
            } else {
                one.erase(keys)
            };
        }
        check_keys(keys)?;
        if keys.is_empty() {
            return Ok(0);
        }
        let erased = self.set.on_parts(keys, None, |s, k, _| match all {
            true => s.erase_all(k),
            false => s.erase(k),
        })?;
        Ok(erased.into_iter().sum())
    }

    /// The value of each key's first copy.
    pub fn find(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        if let Some(one) = self.set.only() {
            return one.find(keys);
        }
        check_keys(keys)?;
        let mut out = vec![None; keys.len()];
        (self.set).options_into(keys, &mut out, |s, k, v, found| {
            s.find_bits_into(k, v, found)
        })?;
        Ok(out)
    }

    /// The value of each key's first copy into `out` (as long as `keys`), or [`Value::ABSENT`] for an absent key.
    pub fn find_into(&self, keys: &[K], out: &mut [V]) -> Result<()> {
        if let Some(one) = self.set.only() {
            return one.find_into(keys, out);
        }
        check_keys(keys)?;
        self.set.values_into(keys, out, |s, k, o| s.find_into(k, o))
    }

    /// How many copies of each key are stored.
    pub fn count(&self, keys: &[K]) -> Result<Vec<u32>> {
        let mut out = vec![0u32; keys.len()];
        self.count_into(keys, &mut out)?;
        Ok(out)
    }

    /// How many copies of each key are stored, into `out` (as long as `keys`).
    pub fn count_into(&self, keys: &[K], out: &mut [u32]) -> Result<()> {
        if let Some(one) = self.set.only() {
            return one.count_into(keys, out);
        }
        check_keys(keys)?;
        self.set
            .counts_into(keys, out, |s, k, o| s.count_into(k, o))
    }

    /// Every value of each key, in its list's order ([`ChainedTable::find_all`]).
    pub fn find_all(&self, keys: &[K]) -> Result<FindAll<V>> {
        let mut out = FindAll::default();
        self.find_all_into(keys, &mut out)?;
        Ok(out)
    }

    /// Every value of each key into `out`, reusing its allocations ([`ChainedTable::find_all_into`]): each shard
    /// answers its part, and the runs are joined in the caller's order. More than `u32::MAX` values in all is
    /// a typed error (the offsets are 32-bit). On an error, `out`'s contents are unspecified.
    pub fn find_all_into(&self, keys: &[K], out: &mut FindAll<V>) -> Result<()> {
        if let Some(one) = self.set.only() {
            return one.find_all_into(keys, out);
        }
        check_keys(keys)?;
        self.set
            .runs_into(keys, out, |s, k, o| s.find_all_into(k, o))
    }

    /// A mixed batch ([`ChainedTable::apply`]): each shard runs its operations; one outcome per operation, in
    /// batch order. Operations on distinct keys commute; those on one key (all in one shard) run as a
    /// [`ChainedTable`] runs them.
    pub fn apply(&mut self, ops: &[Op<K, V>]) -> Result<Vec<Outcome<V>>> {
        if let Some(one) = self.set.only_mut() {
            return one.apply(ops);
        }
        let keys: Vec<K> = ops.par_iter().map(|o| o.key()).collect();
        check_keys(&keys)?;
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let p = Partition::new(&self.set.route, &keys);
        let parts = p.parts(ops);
        let results = run_each(&mut self.set.shards, |i, s| s.apply(&parts[i]));
        let outcomes = merge_failures(&p, results)?;
        let mut out = vec![Outcome::NotFound; ops.len()];
        p.join(&mut out, |s, j| outcomes[s][j]);
        Ok(out)
    }

    /// Compacts every shard's lists ([`ChainedTable::flush`]); returns how many slabs were freed.
    pub fn flush(&mut self) -> Result<usize> {
        let freed = run_each(&mut self.set.shards, |_, s| s.flush());
        Ok(freed.into_iter().collect::<Result<Vec<_>>>()?.iter().sum())
    }

    /// Checks every shard's invariants ([`ChainedTable::check`]) and that each holds only the keys routed to it,
    /// and returns what they hold together; `Err` says which shard and invariant broke. For tests and debugging:
    /// it reads every slab.
    pub fn check(&mut self) -> std::result::Result<ChainStats, String> {
        let mut all = ChainStats::default();
        for i in 0..self.set.shards.len() {
            let s = self.set.shards[i]
                .check()
                .map_err(|e| format!("shard {i}: {e}"))?;
            let pairs = self.set.shards[i].pairs().map_err(|e| e.to_string())?;
            if let Some((k, _)) = pairs.iter().find(|(k, _)| self.shard_of(*k) != i) {
                return Err(format!(
                    "shard {i} holds key {k}, routed to shard {}",
                    self.shard_of(*k)
                ));
            }
            all.buckets += s.buckets;
            all.live += s.live;
            all.tombstones += s.tombstones;
            all.list_slabs += s.list_slabs;
            all.free_slabs += s.free_slabs;
            all.pool_slabs += s.pool_slabs;
        }
        Ok(all)
    }
}
