//! [`HashSet`]: keys without values, over the static table (as std's `HashSet` is a `HashMap` of `()`).
//!
//! The set is a [`HashTable`] built keys-only: on GPUs its slots hold the key alone (the `Keys32` / `Keys64`
//! layouts of `device::set_layout`: 4 bytes a slot for 32-bit keys, half a packed pair's 8), its host batches
//! carry no values across the bus, the CPU table allocates no values (`CpuTable::with_values`), and every
//! scheme runs on it (a set's slot word is its whole element, which a
//! cuckoo eviction moves in one exchange, 64-bit keys included). Everything else (growth, erase and its
//! tombstones, rebuilds, the reserved-key swap, the host path) is the table's own.

use super::{HashTable, TableConfig};
use crate::runtime::select::Backend;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Key, Result};

/// A set of keys `K` under probing scheme `S`, on the backend chosen at construction.
///
/// A set reserves two keys: the all-ones key (its empty slot; [`TableConfig::reserved_key`] moves it to
/// another value) and the all-ones key minus one (its erased slot). Inserting either is
/// [`Error::SentinelKey`](hashtile_core::Error::SentinelKey) /
/// [`Error::TombstoneKey`](hashtile_core::Error::TombstoneKey) and changes nothing; they are never found.
///
/// ```
/// use hashtile_backends::{Backend, BackendChoice, HashSet, TableConfig};
/// use hashtile_probing::Bcht;
/// let cfg = TableConfig::for_keys(1000, 0.8).backend(BackendChoice::Exactly(Backend::Cpu));
/// let mut s: HashSet<Bcht, u32> = HashSet::new(cfg)?;
/// assert_eq!(s.insert(&[1, 2, 3, 2])?, 3);
/// assert_eq!(s.contains(&[2, 9])?, vec![true, false]);
/// assert_eq!(s.erase(&[2])?, 1);
/// assert_eq!(s.len(), 2);
/// # Ok::<(), hashtile_core::Error>(())
/// ```
pub struct HashSet<S: SchemeInfo, K: Key> {
    /// The keys, each with an unused value (stored on no backend: the GPU layouts and the CPU table of a set hold
    /// keys alone).
    table: HashTable<S, K, u32>,
}

impl<S: SchemeInfo, K: Key> HashSet<S, K> {
    /// An empty set; the settings and errors are [`HashTable::new`]'s (a set of 64-bit keys runs every scheme
    /// on GPUs).
    pub fn new(config: TableConfig) -> Result<Self> {
        Ok(Self {
            table: HashTable::build(config, true)?,
        })
    }

    /// Inserts keys (repeats and keys already present are no-ops) and returns how many were new. Errors:
    /// [`HashTable::insert`]'s, and a reserved key (see [`HashSet`]); each leaves the set unchanged.
    pub fn insert(&mut self, keys: &[K]) -> Result<usize> {
        // On the table's stream, as every call of the table (`HashTable`'s `stream`).
        let stream = self.table.stream.id();
        stream.executes(|| {
            if let Some(e) = self.table.set_refuses(keys) {
                return Err(e);
            }
            // The table's keys (the reserved-key swap), inserted as they are: swapped once.
            let keys = self.table.swap.keys(keys);
            let before = self.table.len();
            // The values are never read on GPUs (nor copied); zeroed pages the host does not touch there.
            self.table
                .insert_keys(&keys, &vec![0u32; keys.len()])
                .map_err(|e| self.table.swap.error(e))?;
            Ok(self.table.len() - before)
        })
    }

    /// `true` for each key that is present.
    pub fn contains(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.table.contains(keys)
    }

    /// Removes keys and returns how many were present (repeats, absent and reserved keys remove nothing more);
    /// erased slots are [`HashTable::erase`]'s.
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

    /// Reclaims erased slots ([`HashTable::compact`]).
    pub fn compact(&mut self) -> Result<()> {
        self.table.compact()
    }

    /// Slots marked erased and not yet reclaimed.
    pub fn tombstones(&self) -> usize {
        self.table.tombstones()
    }

    /// Keys stored.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// `true` when no key is stored.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Slots.
    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// `len / capacity`.
    pub fn load_factor(&self) -> f64 {
        self.table.load_factor()
    }

    /// Slots per bucket.
    pub fn bucket_size(&self) -> u32 {
        self.table.bucket_size()
    }

    /// The backend the set runs on.
    pub fn backend(&self) -> Backend {
        self.table.backend()
    }
}
