//! [`ShardedSet`]: keys without values over several shards, as [`HashSet`](crate::HashSet) is over one table: a
//! [`ShardedTable`] whose shards are keys-only tables (4 bytes a slot for 32-bit keys on GPUs), so the partition,
//! the threads and the per-shard checks are the sharded table's own. Host data in one process (the device-data
//! calls and ranks take packed pairs).

use super::ShardedTable;
use super::config::ShardedConfig;
use crate::runtime::select::Backend;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, Result};

/// A set of keys `K` under probing scheme `S`, spread over shards as a [`ShardedTable`] is (a key's shard from
/// its route hash, one shard per device by default). It reserves the keys a [`HashSet`](crate::HashSet)
/// reserves: inserting the empty or the erased key is a typed error that changes no shard.
///
/// ```
/// use hashtile_backends::{Backend, BackendChoice, ShardedConfig, ShardedSet, TableConfig};
/// use hashtile_probing::Bcht;
/// let config = ShardedConfig::new(
///     TableConfig::for_keys(1000, 0.8).backend(BackendChoice::Exactly(Backend::Cpu)),
/// )
/// .shards(3);
/// let mut s: ShardedSet<Bcht, u32> = ShardedSet::new(config)?;
/// assert_eq!(s.insert(&[1, 2, 3, 2])?, 3);
/// assert_eq!(s.contains(&[2, 9])?, vec![true, false]);
/// assert_eq!(s.erase(&[2, 7])?, 1);
/// assert_eq!(s.len(), 2);
/// # Ok::<(), hashtile_core::Error>(())
/// ```
pub struct ShardedSet<S: SchemeInfo, K: Key> {
    /// The keys, each with an unused value (not stored on GPUs).
    table: ShardedTable<S, K, u32>,
}

impl<S: SchemeInfo, K: Key> ShardedSet<S, K> {
    /// An empty set; settings and errors are [`ShardedTable::new`]'s. A set over ranks is not available yet
    /// ([`Error::InvalidConfig`]).
    pub fn new(config: ShardedConfig) -> Result<Self> {
        if config.ranks.is_some() {
            return Err(Error::InvalidConfig(
                "a sharded set over ranks is not available yet; one process holds every shard"
                    .into(),
            ));
        }
        Ok(Self {
            table: ShardedTable::build(config, true)?,
        })
    }

    /// Inserts keys (repeats and keys already present are no-ops) and returns how many were new. A reserved
    /// key is [`Error::SentinelKey`] / [`Error::TombstoneKey`] with its batch index, and every other error is
    /// [`ShardedTable::insert`]'s; a refused batch changes no shard.
    pub fn insert(&mut self, keys: &[K]) -> Result<usize> {
        if let Some(e) = self.table.shards[0].set_refuses(keys) {
            return Err(e);
        }
        let before = self.len();
        // The values are never read (nor copied to GPUs).
        self.table.insert(keys, &vec![0u32; keys.len()])?;
        Ok(self.len() - before)
    }

    /// `true` for each key that is present, in the caller's order.
    pub fn contains(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.table.contains(keys)
    }

    /// Removes keys and returns how many were present (repeats, absent and reserved keys remove nothing more).
    pub fn erase(&mut self, keys: &[K]) -> Result<usize> {
        self.table.erase(keys)
    }

    /// Every key (order unspecified).
    pub fn keys(&self) -> Result<Vec<K>> {
        Ok(self.table.pairs()?.into_iter().map(|(k, _)| k).collect())
    }

    /// Removes every key.
    pub fn clear(&mut self) -> Result<()> {
        self.table.clear()
    }

    /// Reclaims erased slots in every shard.
    pub fn compact(&mut self) -> Result<()> {
        self.table.compact()
    }

    /// Keys stored, over all shards.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// `true` when no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots, over all shards.
    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Erased slots not yet reclaimed, over all shards.
    pub fn tombstones(&self) -> usize {
        self.table.tombstones()
    }

    /// How many shards.
    pub fn shard_count(&self) -> usize {
        self.table.shard_count()
    }

    /// The shard `key` lives in.
    pub fn shard_of(&self, key: K) -> usize {
        self.table.shard_of(key)
    }

    /// The keys of shard `i` (a shard holds only the keys whose shard is `i`).
    pub fn shard_keys(&self, i: usize) -> Result<Vec<K>> {
        Ok(self
            .table
            .shard(i)
            .pairs()?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }

    /// The backend every shard runs on.
    pub fn backend(&self) -> Backend {
        self.table.backend()
    }
}
