//! Dynamic tables by slab-list chaining (SlabHash, issue 10): inserts with duplicates (multimap), replace
//! (unique keys), erase, find, `find_all`, `count`, `flush`, and mixed batches of all of them.
//!
//! Each bucket is the head of a list of slabs; a slab is one bucket read of [`SLAB_SLOTS`] slots and a link.
//! Where a key goes and what happens after each slab read is decided by the chaining scheme
//! (`hashtile_probing::Chain`), the same way the static schemes decide for their buckets.
//!
//! **Backends.** The CPU store ([`cpu::CpuChained`]) is the oracle, and the table's backend for now. The GPU
//! store (`crate::gpu::chained::GpuChained`: 32-bit keys and values, every operation but mixed batches) is
//! tested against it. It goes behind this table once mixed batches and the wide layouts exist. Until then,
//! asking for a GPU backend is a typed error.
//!
//! ```
//! use hashtile_backends::chained::{ChainedConfig, ChainedTable, Op, Outcome};
//!
//! let mut t: ChainedTable<u32, u32> = ChainedTable::new(ChainedConfig::for_keys(1000, 0.6))?;
//! t.insert(&[1, 1, 2], &[10, 11, 20])?; // duplicates are kept (multimap)
//! assert_eq!(t.count(&[1, 2, 3])?, vec![2, 1, 0]);
//! t.replace(&[2], &[21])?; // unique: overwrites key 2's value
//! assert_eq!(t.find(&[2])?, vec![Some(21)]);
//! assert_eq!(t.erase_all(&[1])?, 2);
//! // A mixed batch: operations on distinct keys commute.
//! let out = t.apply(&[Op::Insert(5, 50), Op::Find(2), Op::Erase(9)])?;
//! assert_eq!(out, vec![Outcome::Inserted, Outcome::Found(21), Outcome::NotFound]);
//! // The tombstone key is reserved: a typed error, the table unchanged.
//! assert!(t.insert(&[u32::MAX - 1], &[0]).is_err());
//! assert_eq!(t.len(), 2);
//! # Ok::<(), hashtile_core::Error>(())
//! ```

pub mod cpu;

use crate::csr::FindAll;
use crate::select::{Backend, BackendChoice};
use cpu::{CpuChained, Placed};
use hashtile_core::{Error, HashFamily, Key, Result, Value};
use rayon::prelude::*;
use std::marker::PhantomData;

/// Slots per slab: a slab is read as 16 words, 15 pairs and the link (SlabHash's 128-byte slab of 32-bit pairs).
pub const SLAB_SLOTS: usize = 15;

/// An insert found the pool empty: the batch grows the pool and runs it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedSlab;

/// What a chained table holds, from [`ChainedTable::check`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainStats {
    /// Lists (base slabs).
    pub buckets: usize,
    /// Live pairs.
    pub live: usize,
    /// Erased slots not yet reclaimed by `flush`.
    pub tombstones: usize,
    /// Pool slabs linked into lists.
    pub list_slabs: usize,
    /// Pool slabs free in the allocator.
    pub free_slabs: usize,
    /// Pool slabs in all.
    pub pool_slabs: usize,
}

/// How to build a [`ChainedTable`].
#[derive(Debug, Clone, PartialEq)]
pub struct ChainedConfig {
    /// Number of lists (base slabs).
    pub buckets: u32,
    /// Free slabs in the pool at the start (it grows between batches when needed).
    pub pool_slabs: u32,
    /// Seed of the hash function.
    pub seed: u64,
    /// Where the table lives.
    pub backend: BackendChoice,
}

impl ChainedConfig {
    /// Lists for `n` keys at `load` keys per base-slab slot (SlabHash's knob: 0.6 leaves most lists one slab
    /// long), and a pool of a quarter of the buckets.
    pub fn for_keys(n: usize, load: f64) -> Self {
        let buckets = ((n as f64 / (load.max(1e-3) * SLAB_SLOTS as f64)).ceil() as u32).max(1);
        Self {
            buckets,
            pool_slabs: buckets.div_ceil(4).max(32),
            seed: crate::DEFAULT_SEED,
            backend: BackendChoice::Auto,
        }
    }

    /// The same configuration on `backend`.
    pub fn backend(mut self, backend: BackendChoice) -> Self {
        self.backend = backend;
        self
    }

    /// The same configuration with `pool_slabs` free slabs at the start.
    pub fn pool_slabs(mut self, pool_slabs: u32) -> Self {
        self.pool_slabs = pool_slabs;
        self
    }
}

/// One operation of a mixed batch ([`ChainedTable::apply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<K, V> {
    /// A further copy of the key (multimap insert).
    Insert(K, V),
    /// Insert, or overwrite the key's first copy (unique keys).
    Replace(K, V),
    /// Erase the key's first copy.
    Erase(K),
    /// The value of the key's first copy.
    Find(K),
}

impl<K: Copy, V> Op<K, V> {
    fn key(&self) -> K {
        match *self {
            Op::Insert(k, _) | Op::Replace(k, _) | Op::Erase(k) | Op::Find(k) => k,
        }
    }
}

/// What one operation of a mixed batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<V> {
    /// `Insert`, or `Replace` of a new key: a slot now holds the pair.
    Inserted,
    /// `Replace` of a stored key: its value is overwritten.
    Updated,
    /// `Erase`: the first copy is erased.
    Erased,
    /// `Find`: the value of the first copy.
    Found(V),
    /// `Erase` or `Find` of a key not stored.
    NotFound,
}

/// A dynamic hash table of `K -> V` by slab-list chaining, on the CPU (the GPU store is in progress; see the
/// module documentation).
pub struct ChainedTable<K: Key, V: Value> {
    store: CpuChained,
    backend: Backend,
    _types: PhantomData<(K, V)>,
}

/// The first key of `keys` that a chained table reserves: the empty sentinel (all ones) or the tombstone (all
/// ones minus one), as a typed error.
fn check_keys<K: Key>(keys: impl IntoIterator<Item = K>) -> Result<()> {
    let tomb = K::narrow(K::EMPTY.widen() - 1);
    for (index, k) in keys.into_iter().enumerate() {
        if k == K::EMPTY {
            return Err(Error::SentinelKey { index });
        }
        if k == tomb {
            return Err(Error::TombstoneKey { index });
        }
    }
    Ok(())
}

impl<K: Key, V: Value> ChainedTable<K, V> {
    /// An empty table.
    pub fn new(cfg: ChainedConfig) -> Result<Self> {
        let backend = match cfg.backend {
            BackendChoice::Auto | BackendChoice::Exactly(Backend::Cpu) => Backend::Cpu,
            BackendChoice::Exactly(b) => {
                return Err(Error::BackendUnavailable {
                    backend: b.name(),
                    reason: "chained (dynamic) tables run on the CPU backend so far".into(),
                    how: "use BackendChoice::Auto or Backend::Cpu; the GPU store is issue 10's next step",
                });
            }
        };
        if cfg.buckets == 0 {
            return Err(Error::InvalidConfig(
                "a chained table needs at least one bucket".into(),
            ));
        }
        let store = CpuChained::new(HashFamily::new(cfg.seed), cfg.buckets, cfg.pool_slabs)?;
        Ok(Self {
            store,
            backend,
            _types: PhantomData,
        })
    }

    /// Where the table lives.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Live pairs stored.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// Runs `op` on every index of `0..n` in parallel. Operations that found the pool empty are run again, in
    /// order, after the pool has grown (by at least as many slabs as it had, and as operations waited), until
    /// none is left: nothing is dropped, and only memory exhaustion is an error (the table stays valid).
    fn batch<T: Send>(
        &mut self,
        n: usize,
        op: impl Fn(&CpuChained, usize) -> std::result::Result<T, NeedSlab> + Sync,
    ) -> Result<Vec<T>> {
        let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
        let mut pending: Vec<usize> = (0..n).collect();
        while !pending.is_empty() {
            let store = &self.store;
            let done: Vec<(usize, std::result::Result<T, NeedSlab>)> =
                pending.par_iter().map(|&i| (i, op(store, i))).collect();
            pending.clear();
            for (i, r) in done {
                match r {
                    Ok(t) => out[i] = Some(t),
                    Err(NeedSlab) => pending.push(i),
                }
            }
            if !pending.is_empty() {
                let (pool, _) = self.store.pool();
                self.store.grow(pool.max(pending.len() as u32).max(32))?;
            }
        }
        Ok(out
            .into_iter()
            .map(|t| t.expect("every operation ran"))
            .collect())
    }

    fn pairs_checked(keys: &[K], values: &[V]) -> Result<()> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: keys.len(),
            });
        }
        check_keys(keys.iter().copied())
    }

    /// Inserts every pair as a further copy (multimap: duplicates are kept).
    pub fn insert(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        Self::pairs_checked(keys, values)?;
        self.batch(keys.len(), |s, i| {
            s.insert(keys[i].widen(), values[i].widen(), false)
        })?;
        Ok(())
    }

    /// Inserts every pair with unique keys: a stored key's first copy gets the new value. Of one key's pairs in
    /// a batch, one (unspecified) value wins. Returns how many keys were new.
    pub fn replace(&mut self, keys: &[K], values: &[V]) -> Result<usize> {
        Self::pairs_checked(keys, values)?;
        let placed = self.batch(keys.len(), |s, i| {
            s.insert(keys[i].widen(), values[i].widen(), true)
        })?;
        Ok(placed.iter().filter(|&&p| p == Placed::Inserted).count())
    }

    /// Erases the first copy of each key (a key given twice erases two copies); returns how many were erased.
    pub fn erase(&mut self, keys: &[K]) -> Result<usize> {
        check_keys(keys.iter().copied())?;
        Ok(keys
            .par_iter()
            .map(|k| self.store.erase(k.widen(), false))
            .sum())
    }

    /// Erases every copy of each key; returns how many were erased.
    pub fn erase_all(&mut self, keys: &[K]) -> Result<usize> {
        check_keys(keys.iter().copied())?;
        Ok(keys
            .par_iter()
            .map(|k| self.store.erase(k.widen(), true))
            .sum())
    }

    /// The value of each key's first copy.
    pub fn find(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        check_keys(keys.iter().copied())?;
        Ok(keys
            .par_iter()
            .map(|k| self.store.find(k.widen()).map(V::narrow))
            .collect())
    }

    /// How many copies of each key are stored.
    pub fn count(&self, keys: &[K]) -> Result<Vec<u32>> {
        check_keys(keys.iter().copied())?;
        Ok(keys
            .par_iter()
            .map(|k| self.store.count(k.widen()))
            .collect())
    }

    /// Every value of each key: `values[offsets[i]..offsets[i + 1]]` are key `i`'s, in list order.
    pub fn find_all(&self, keys: &[K]) -> Result<FindAll<V>> {
        check_keys(keys.iter().copied())?;
        let per: Vec<Vec<u64>> = keys
            .par_iter()
            .map(|k| {
                let mut v = Vec::new();
                self.store.find_all(k.widen(), &mut v);
                v
            })
            .collect();
        let mut offsets = Vec::with_capacity(keys.len() + 1);
        offsets.push(0);
        let mut sum = 0;
        for v in &per {
            sum += v.len();
            offsets.push(sum);
        }
        let values = per.into_iter().flatten().map(V::narrow).collect();
        Ok(FindAll { offsets, values })
    }

    /// Runs a mixed batch: operations on distinct keys commute; operations on one key run in an unspecified
    /// order, each seeing the table as some order of them leaves it, and never corrupt it.
    pub fn apply(&mut self, ops: &[Op<K, V>]) -> Result<Vec<Outcome<V>>> {
        check_keys(ops.iter().map(|o| o.key()))?;
        self.batch(ops.len(), |s, i| {
            Ok(match ops[i] {
                Op::Insert(k, v) => {
                    s.insert(k.widen(), v.widen(), false)?;
                    Outcome::Inserted
                }
                Op::Replace(k, v) => match s.insert(k.widen(), v.widen(), true)? {
                    Placed::Inserted => Outcome::Inserted,
                    Placed::Updated => Outcome::Updated,
                },
                Op::Erase(k) => match s.erase(k.widen(), false) {
                    0 => Outcome::NotFound,
                    _ => Outcome::Erased,
                },
                Op::Find(k) => match s.find(k.widen()) {
                    Some(v) => Outcome::Found(V::narrow(v)),
                    None => Outcome::NotFound,
                },
            })
        })
    }

    /// Compacts every list into its fewest slabs (dropping tombstones) and returns the freed slabs to the
    /// allocator; returns how many were freed.
    pub fn flush(&mut self) -> Result<usize> {
        Ok(self.store.flush())
    }

    /// Every stored pair (list by list).
    pub fn pairs(&self) -> Vec<(K, V)> {
        self.store
            .pairs()
            .into_iter()
            .map(|(k, v)| (K::narrow(k), V::narrow(v)))
            .collect()
    }

    /// Checks the table's invariants (see [`cpu::CpuChained::check`]) and returns what it holds; `Err` says
    /// which invariant broke. For tests and debugging: it reads every slab.
    pub fn check(&mut self) -> std::result::Result<ChainStats, String> {
        self.store.check()
    }

    /// Live pairs over the slots of every slab in use (base slabs and pool slabs in lists): SlabHash's memory
    /// utilisation up to its constant 15/16 (a slab's link word holds no pair).
    pub fn slot_utilisation(&self) -> f64 {
        let (pool, free) = self.store.pool();
        let slabs = self.store.buckets() as usize + pool as usize - free;
        self.len() as f64 / (slabs * SLAB_SLOTS) as f64
    }
}
