//! Dynamic tables by slab-list chaining (SlabHash, issue 10): inserts with duplicates (multimap), replace
//! (unique keys), erase, find, `find_all`, `count`, `flush`, and mixed batches of all of them.
//!
//! Each bucket is the head of a list of slabs; a slab is one bucket read of [`SLAB_SLOTS`] slots and a link.
//! Where a key goes and what happens after each slab read is decided by the chaining scheme
//! (`hashtile_probing::Chain`), the same way the static schemes decide for their buckets.
//!
//! **Backends.** The CPU store ([`cpu::CpuChained`]) is the oracle and the default without a GPU. The GPU
//! store (`crate::chained::gpu::GpuChained`) holds every width: 32-bit keys and values packed into its slab
//! words, anything with a 64-bit side widened to 64 bits (keys in the slabs, values beside them); host data
//! moves through the host-I/O layer every family shares (`crate::runtime::host_io`: pinned staging, a launch
//! per chunk as it lands, answers straight into the caller's memory), and reserved keys are checked on the
//! device as they land.
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

pub mod config;
pub mod cpu;
pub mod gpu;

pub use crate::results::{Op, Outcome};
pub use config::{ChainStats, ChainedConfig, NeedSlab, SLAB_SLOTS};

use crate::chained::gpu::{DeviceChained, StoreSpec, device_chained, op, status};
use crate::device::layout::{Packed, Wide};
use crate::results::FindAll;
use crate::runtime::dispatch::{TableStream, table_stream};
use crate::runtime::host_io::{BatchSizes, check_out_len, first_reserved, reserved_keys};
use crate::runtime::host_memory::offsets_from_counts;
use crate::runtime::host_memory::{PinnedBuffer, answer_room, zeroed_answers};
use crate::runtime::select::{Backend, BackendChoice};
use crate::runtime::words::{same_options_vec, with_find_all_words, with_words_mut, words_of};
use cpu::{CpuChained, Placed};
use hashtile_core::{Element, Error, HashFamily, Key, Result, Value};
use rayon::prelude::*;
use std::marker::PhantomData;

/// A dynamic hash table of `K -> V` by slab-list chaining, on the CPU or a GPU (see the module documentation).
pub struct ChainedTable<K: Key, V: Value> {
    store: Store,
    /// The CubeCL stream every call runs on, whichever thread calls (`dispatch::table_stream`, D38).
    stream: TableStream,
    family: HashFamily,
    _types: PhantomData<(K, V)>,
}

/// Where a chained table's slabs live.
enum Store {
    Cpu(CpuChained),
    Device(Backend, Gpu),
}

/// A GPU store: 32-bit keys and values packed in the slab words, or (a 64-bit key or value type) both widened
/// to 64 bits, keys in the slabs and values beside them.
enum Gpu {
    Packed(Box<dyn DeviceChained<u32>>),
    Wide(Box<dyn DeviceChained<u64>>),
}

/// A GPU store's optional values (finds) as the table's: the same vector when the widths match (no copy), else
/// narrowed.
fn narrowed_options<W: Element, V: Element>(v: Vec<Option<W>>) -> Vec<Option<V>> {
    match same_options_vec(v) {
        Ok(same) => same,
        Err(v) => v
            .into_par_iter()
            .map(|w| w.map(|w| V::narrow(w.widen())))
            .collect(),
    }
}

/// `$body` with `$d` bound to the GPU store, whichever its word type (the body is compiled for each; keys
/// and values go in through `words_of`, which borrows them when the widths match and widens them otherwise).
macro_rules! on_gpu {
    ($g:expr, $d:ident => $body:expr) => {
        match $g {
            Gpu::Packed($d) => $body,
            Gpu::Wide($d) => $body,
        }
    };
}

/// The first key of `keys` that a chained table reserves (`reserved_keys`), as a typed error (a host scan with all cores: the
/// CPU store's calls and mixed batches, and a sharded table's batches before any shard changes; a GPU store
/// checks its calls' keys on the device as they land).
pub(crate) fn check_keys<K: Key>(keys: &[K]) -> Result<()> {
    match first_reserved(&reserved_keys::<K>(), keys) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

impl<K: Key, V: Value> ChainedTable<K, V> {
    /// An empty table.
    pub fn new(cfg: ChainedConfig) -> Result<Self> {
        if cfg.buckets == 0 {
            return Err(Error::InvalidConfig(
                "a chained table needs at least one bucket".into(),
            ));
        }
        let narrow = K::BITS == 32 && V::BITS == 32;
        let backend = match cfg.backend {
            BackendChoice::Auto => crate::runtime::select::resolve(BackendChoice::Auto),
            BackendChoice::Exactly(Backend::Cpu) => Backend::Cpu,
            BackendChoice::Exactly(b) => {
                if !crate::runtime::select::is_available(b) {
                    return Err(crate::runtime::select::unavailable(b));
                }
                b
            }
        };
        if cfg.batch_keys == Some(0) {
            return Err(Error::InvalidConfig("batch_keys must be at least 1".into()));
        }
        let family = HashFamily::new(cfg.seed);
        // The store's words: the table's keys as they are, or widened (so are their reserved keys).
        fn spec<K: Key, W: Element>(cfg: &ChainedConfig, family: HashFamily) -> StoreSpec<W> {
            StoreSpec {
                family,
                buckets: cfg.buckets,
                pool: cfg.pool_slabs,
                reserved: reserved_keys::<K>().map(|k| W::narrow(k.widen())),
                sizes: BatchSizes::from_keys(cfg.batch_keys),
            }
        }
        let stream = table_stream();
        let store = stream.id().executes(|| -> Result<Store> {
            Ok(match backend {
                Backend::Cpu => Store::Cpu(CpuChained::new(family, cfg.buckets, cfg.pool_slabs)?),
                b if narrow => Store::Device(
                    b,
                    Gpu::Packed(device_chained::<u32, Packed>(
                        b,
                        cfg.device,
                        spec::<K, u32>(&cfg, family),
                    )?),
                ),
                b => Store::Device(
                    b,
                    Gpu::Wide(device_chained::<u64, Wide>(
                        b,
                        cfg.device,
                        spec::<K, u64>(&cfg, family),
                    )?),
                ),
            })
        })?;
        Ok(Self {
            store,
            stream,
            family,
            _types: PhantomData,
        })
    }

    /// Where the table lives.
    pub fn backend(&self) -> Backend {
        match &self.store {
            Store::Cpu(_) => Backend::Cpu,
            Store::Device(b, _) => *b,
        }
    }

    /// Live pairs stored.
    pub fn len(&self) -> usize {
        let stream = self.stream.id();
        stream.executes(|| match &self.store {
            Store::Cpu(c) => c.len(),
            Store::Device(_, g) => on_gpu!(g, d => d.len()),
        })
    }

    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The CPU store, mutably (the operations below run on it when the table lives on the CPU).
    fn cpu(&mut self) -> Option<&mut CpuChained> {
        match &mut self.store {
            Store::Cpu(c) => Some(c),
            Store::Device(..) => None,
        }
    }

    /// Runs `op` on every index of `0..n` in parallel on the CPU store. Operations that found the pool empty
    /// are run again, in order, after the pool has grown (by at least as many slabs as it had, and as
    /// operations waited), until none is left: nothing is dropped, and only memory exhaustion is an error (the
    /// table stays valid). The GPU store does the same on the device.
    fn batch<T: Send>(
        store: &mut CpuChained,
        n: usize,
        op: impl Fn(&CpuChained, usize) -> std::result::Result<T, NeedSlab> + Sync,
    ) -> Result<Vec<T>> {
        let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
        let mut pending: Vec<usize> = (0..n).collect();
        while !pending.is_empty() {
            let s = &*store;
            let done: Vec<(usize, std::result::Result<T, NeedSlab>)> =
                pending.par_iter().map(|&i| (i, op(s, i))).collect();
            pending.clear();
            for (i, r) in done {
                match r {
                    Ok(t) => out[i] = Some(t),
                    Err(NeedSlab) => pending.push(i),
                }
            }
            if !pending.is_empty() {
                let (pool, _) = store.pool();
                store.grow(pool.max(pending.len() as u32).max(32))?;
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
        check_keys(keys)
    }

    /// Inserts every pair as a further copy (multimap: duplicates are kept).
    pub fn insert(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            match &mut self.store {
                Store::Cpu(c) => {
                    Self::pairs_checked(keys, values)?;
                    Self::batch(c, keys.len(), |s, i| {
                        s.insert(keys[i].widen(), values[i].widen(), false)
                    })?;
                }
                Store::Device(_, g) => {
                    on_gpu!(g, d => d.insert(&words_of(keys), &words_of(values), false))?;
                }
            }
            Ok(())
        })
    }

    /// Inserts every pair with unique keys: a stored key's first copy gets the new value. Of one key's pairs in
    /// a batch, one (unspecified) value wins. Returns how many keys were new.
    pub fn replace(&mut self, keys: &[K], values: &[V]) -> Result<usize> {
        let stream = self.stream.id();
        stream.executes(|| match &mut self.store {
            Store::Cpu(c) => {
                Self::pairs_checked(keys, values)?;
                let placed = Self::batch(c, keys.len(), |s, i| {
                    s.insert(keys[i].widen(), values[i].widen(), true)
                })?;
                Ok(placed.iter().filter(|&&p| p == Placed::Inserted).count())
            }
            Store::Device(_, g) => {
                on_gpu!(g, d => d.insert(&words_of(keys), &words_of(values), true))
            }
        })
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
        let stream = self.stream.id();
        stream.executes(|| match &mut self.store {
            Store::Cpu(c) => {
                check_keys(keys)?;
                Ok(keys.par_iter().map(|k| c.erase(k.widen(), all)).sum())
            }
            Store::Device(_, g) => on_gpu!(g, d => d.erase(&words_of(keys), all)),
        })
    }

    /// The value of each key's first copy.
    pub fn find(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        let stream = self.stream.id();
        stream.executes(|| match &self.store {
            Store::Cpu(c) => {
                check_keys(keys)?;
                Ok(keys
                    .par_iter()
                    .map(|k| c.find(k.widen()).map(V::narrow))
                    .collect())
            }
            Store::Device(_, g) => on_gpu!(g, d => Ok(narrowed_options(d.find(&words_of(keys))?))),
        })
    }

    /// The value of each key's first copy into `out` (as long as `keys`), or [`Value::ABSENT`] (all ones) for an
    /// absent key. On GPUs the values are copied straight into `out` (directly when it is pinned memory), as
    /// `HashTable::find_into` does.
    pub fn find_into(&self, keys: &[K], out: &mut [V]) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            check_out_len(keys.len(), out.len())?;
            match &self.store {
                Store::Cpu(c) => {
                    check_keys(keys)?;
                    out.par_iter_mut().zip(keys).for_each(|(o, k)| {
                        *o = c.find(k.widen()).map_or(V::ABSENT, V::narrow);
                    });
                    Ok(())
                }
                Store::Device(_, g) => on_gpu!(g, d => {
                    let keys = words_of(keys);
                    with_words_mut(out, |o| d.find_into(&keys, o))
                }),
            }
        })
    }

    /// [`ChainedTable::find_into`] with presence bits: bit `i % 32` of `found[i / 32]` set for present keys
    /// (`keys.len().div_ceil(32)` words), so that a stored all-ones value reads as present (the sharded table's
    /// `find`, whose `Option`s are made from its shards' values and bits).
    pub(crate) fn find_bits_into(
        &self,
        keys: &[K],
        out: &mut [V],
        found: &mut [u32],
    ) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            check_out_len(keys.len(), out.len())?;
            check_out_len(keys.len().div_ceil(32), found.len())?;
            match &self.store {
                Store::Cpu(c) => {
                    check_keys(keys)?;
                    (out.par_chunks_mut(32).zip(found.par_iter_mut()))
                        .zip(keys.par_chunks(32))
                        .for_each(|((out, word), keys)| {
                            *word = 0;
                            for (i, (o, k)) in out.iter_mut().zip(keys).enumerate() {
                                let v = c.find(k.widen());
                                *word |= u32::from(v.is_some()) << i;
                                *o = v.map_or(V::ABSENT, V::narrow);
                            }
                        });
                    Ok(())
                }
                Store::Device(_, g) => on_gpu!(g, d => {
                    let keys = words_of(keys);
                    with_words_mut(out, |o| d.find_bits_into(&keys, o, found))
                }),
            }
        })
    }

    /// A host buffer of `n` elements in page-locked memory on the table's device when its backend has it
    /// (CUDA), else ordinary memory: the table's host calls move it at the full bus rate, as
    /// [`HashTable::pinned_buffer`](crate::HashTable::pinned_buffer)'s.
    ///
    /// ```
    /// use hashtile_backends::chained::{ChainedConfig, ChainedTable};
    /// use hashtile_backends::{Backend, BackendChoice};
    /// let cfg = ChainedConfig::for_keys(100, 0.6).backend(BackendChoice::Exactly(Backend::Cpu));
    /// let mut t: ChainedTable<u32, u32> = ChainedTable::new(cfg)?;
    /// let mut keys = t.pinned_buffer::<u32>(2);
    /// keys.copy_from_slice(&[4, 5]);
    /// t.insert(&keys, &[40, 50])?;
    /// let mut out = t.pinned_buffer::<u32>(2);
    /// t.find_into(&keys, &mut out)?;
    /// assert_eq!(&out[..], &[40, 50]);
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    pub fn pinned_buffer<E: Element>(&self, n: usize) -> PinnedBuffer<E> {
        let alloc = match &self.store {
            Store::Cpu(_) => None,
            Store::Device(_, g) => on_gpu!(g, d => d.alloc_pinned(n * size_of::<E>())),
        };
        PinnedBuffer::from_alloc(alloc, n)
    }

    /// How many copies of each key are stored.
    pub fn count(&self, keys: &[K]) -> Result<Vec<u32>> {
        let mut counts = zeroed_answers(keys.len());
        self.count_into(keys, &mut counts)?;
        Ok(counts)
    }

    /// How many copies of each key are stored, into `out` (as long as `keys`; on GPUs copied straight there).
    pub fn count_into(&self, keys: &[K], out: &mut [u32]) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            check_out_len(keys.len(), out.len())?;
            match &self.store {
                Store::Cpu(c) => {
                    check_keys(keys)?;
                    out.par_iter_mut()
                        .zip(keys)
                        .for_each(|(o, k)| *o = c.count(k.widen()));
                    Ok(())
                }
                Store::Device(_, g) => on_gpu!(g, d => d.count_into(&words_of(keys), out)),
            }
        })
    }

    /// Every value of each key: `values[offsets[i]..offsets[i + 1]]` are key `i`'s, in list order
    /// ([`ChainedTable::find_all_into`] into a fresh answer).
    pub fn find_all(&self, keys: &[K]) -> Result<FindAll<V>> {
        let mut out = FindAll::default();
        self.find_all_into(keys, &mut out)?;
        Ok(out)
    }

    /// Every value of each key into `out`, reusing its allocations (its previous contents are replaced):
    /// `out.values[out.offsets[i]..out.offsets[i + 1]]` are key `i`'s, in list order. Keep one `out` for batch
    /// after batch: on GPUs the offsets and values are copied straight into its vectors, whose memory a
    /// previous call has touched already (the first touch of fresh memory costs most of a large
    /// [`ChainedTable::find_all`]). On an error, `out`'s contents are unspecified.
    pub fn find_all_into(&self, keys: &[K], out: &mut FindAll<V>) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            let c = match &self.store {
                Store::Cpu(c) => {
                    check_keys(keys)?;
                    c
                }
                Store::Device(_, g) => {
                    return on_gpu!(g, d => {
                        let keys = words_of(keys);
                        with_find_all_words(out, |o| d.find_all_into(&keys, o))
                    });
                }
            };
            let per: Vec<Vec<u64>> = keys
                .par_iter()
                .map(|k| {
                    let mut v = Vec::new();
                    c.find_all(k.widen(), &mut v);
                    v
                })
                .collect();
            let sum = offsets_from_counts(&mut out.offsets, per.iter().map(Vec::len))?;
            out.values.clear();
            answer_room(&mut out.values, sum);
            out.values.par_extend(
                per.par_iter()
                    .flat_map_iter(|v| v.iter().map(|&w| V::narrow(w))),
            );
            Ok(())
        })
    }

    /// Runs a mixed batch (on a GPU: one launch, so one warp may mix inserts, erases and finds): operations on
    /// distinct keys commute; operations on one key run in an unspecified order, each seeing the table as some
    /// order of them leaves it, and never corrupt it.
    pub fn apply(&mut self, ops: &[Op<K, V>]) -> Result<Vec<Outcome<V>>> {
        let stream = self.stream.id();
        stream.executes(|| {
            check_keys(&ops.iter().map(|o| o.key()).collect::<Vec<_>>())?;
            if let Store::Device(_, g) = &mut self.store {
                let mut codes = Vec::with_capacity(ops.len());
                let mut keys = Vec::with_capacity(ops.len());
                let mut values = Vec::with_capacity(ops.len());
                for o in ops {
                    let (c, k, v) = match *o {
                        Op::Insert(k, v) => (op::INSERT, k, v),
                        Op::Replace(k, v) => (op::REPLACE, k, v),
                        Op::Erase(k) => (op::ERASE, k, V::default()),
                        Op::Find(k) => (op::FIND, k, V::default()),
                    };
                    codes.push(c);
                    keys.push(k);
                    values.push(v);
                }
                let answers: Vec<(u64, u32)> = on_gpu!(g, d => d
                    .apply(&codes, &words_of(&keys), &words_of(&values))?
                    .into_iter()
                    .map(|(v, s)| (v.widen(), s))
                    .collect());
                return answers
                    .into_iter()
                    .map(|(v, s)| match s {
                        status::INSERTED => Ok(Outcome::Inserted),
                        status::UPDATED => Ok(Outcome::Updated),
                        status::ERASED => Ok(Outcome::Erased),
                        status::FOUND => Ok(Outcome::Found(V::narrow(v))),
                        status::NOT_FOUND => Ok(Outcome::NotFound),
                        s => Err(Error::Device(format!("a mixed batch reported status {s}"))),
                    })
                    .collect();
            }
            let c = self.cpu().expect("the CPU store");
            Self::batch(c, ops.len(), |s, i| {
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
        })
    }

    /// Compacts every list into its fewest slabs (dropping tombstones) and returns the freed slabs to the
    /// allocator; returns how many were freed.
    pub fn flush(&mut self) -> Result<usize> {
        let stream = self.stream.id();
        stream.executes(|| match &mut self.store {
            Store::Cpu(c) => Ok(c.flush()),
            Store::Device(_, g) => on_gpu!(g, d => d.flush()),
        })
    }

    /// A GPU store read back as a CPU store (the same slabs, links and pool bitmap).
    fn read_back(g: &Gpu, family: HashFamily) -> Result<CpuChained> {
        let ((words, values, bits), (buckets, pool)) =
            on_gpu!(g, d => (d.download()?, d.shape_of()));
        CpuChained::from_slabs(family, buckets, pool, &words, values.as_deref(), &bits)
    }

    /// Every stored pair (list by list).
    pub fn pairs(&self) -> Result<Vec<(K, V)>> {
        let stream = self.stream.id();
        stream.executes(|| {
            let pairs = match &self.store {
                Store::Cpu(c) => c.pairs(),
                Store::Device(_, g) => Self::read_back(g, self.family)?.pairs(),
            };
            Ok(pairs
                .into_iter()
                .map(|(k, v)| (K::narrow(k), V::narrow(v)))
                .collect())
        })
    }

    /// Checks the table's invariants (see [`cpu::CpuChained::check`]; a GPU table is read back first) and
    /// returns what it holds; `Err` says which invariant broke. For tests and debugging: it reads every slab.
    pub fn check(&mut self) -> std::result::Result<ChainStats, String> {
        let stream = self.stream.id();
        stream.executes(|| {
            let family = self.family;
            match &mut self.store {
                Store::Cpu(c) => c.check(),
                Store::Device(_, g) => {
                    let mut c = Self::read_back(g, family).map_err(|e| e.to_string())?;
                    let stats = c.check()?;
                    let len = on_gpu!(g, d => d.len());
                    if stats.live != len {
                        return Err(format!(
                            "the GPU store counts {len} pairs, its slabs hold {}",
                            stats.live
                        ));
                    }
                    Ok(stats)
                }
            }
        })
    }

    /// Live pairs over the slots of every slab in use (base slabs and pool slabs in lists): SlabHash's memory
    /// utilisation up to its constant 15/16 (a slab's link word holds no pair).
    pub fn slot_utilisation(&mut self) -> Result<f64> {
        let stats = self.check().map_err(Error::Device)?;
        let slabs = stats.buckets + stats.list_slabs;
        Ok(stats.live as f64 / (slabs * SLAB_SLOTS) as f64)
    }
}
