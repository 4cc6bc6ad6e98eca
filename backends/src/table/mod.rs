//! [`HashTable`]: the typed host API over any backend, its engines ([`engine::Engine`]: `cpu::CpuEngine`,
//! [`gpu::GpuTable`]) and their construction (`make_engine`).

mod apply;
mod carried;
mod config;
pub mod cpu;
pub mod engine;
pub mod gpu;
mod mixed;
mod reserved;
mod room;
mod set;

use crate::runtime::dispatch::{TableStream, table_stream};
use crate::runtime::host_io::{check_out_len, first_reserved, reserved_keys};
use crate::runtime::host_memory::check_host_memory;
use crate::runtime::select::{Backend, BackendChoice, is_available, resolve, unavailable};
use crate::runtime::transfer::PinnedBuffer;
use crate::table::cpu::CpuTable;
use crate::table::engine::Engine;
pub(crate) use cpu::CpuEngine;
use cubecl::stream_id::StreamId;
use hashtile_core::reduce::Reduction;
use hashtile_core::scheme::{SchemeInfo, SchemeParams};
use hashtile_core::{Element, Error, HashFamily, Key, ProbeStats, Result, Value};
use reserved::KeySwap;
use std::marker::PhantomData;

pub use config::{DEFAULT_SEED, TableConfig, default_bucket_size_of};
pub use set::HashSet;

/// A static GPU-style hash table of `K -> V` using probing scheme `S`, on the backend chosen at construction.
///
/// ```
/// use hashtile_backends::{Backend, BackendChoice, HashTable, TableConfig};
/// use hashtile_probing::Bcht;
/// let cfg = TableConfig::for_keys(1000, 0.8).backend(BackendChoice::Exactly(Backend::Cpu));
/// let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg)?;
/// t.insert(&[1, 2, 3], &[10, 20, 30])?;
/// assert_eq!(t.find(&[2, 9])?, vec![Some(20), None]);
/// # Ok::<(), hashtile_core::Error>(())
/// ```
pub struct HashTable<S: SchemeInfo, K: Key, V: Value> {
    engine: Box<dyn Engine<K, V>>,
    backend: Backend,
    config: TableConfig,
    bucket_size: u32,
    params: SchemeParams,
    last_insert: ProbeStats,
    last_find: std::sync::Mutex<ProbeStats>,
    /// The user's reserved key swapped with the all-ones key (`TableConfig::reserved_key`).
    swap: KeySwap<K>,
    /// The CubeCL stream every call of this table runs on, whichever thread makes it
    /// (`runtime::dispatch::table_stream`), leased until the table drops (declared after the engine, so the
    /// table's buffers are freed before another table can take the stream).
    stream: TableStream,
    _types: PhantomData<S>,
}

impl<S: SchemeInfo, K: Key, V: Value> HashTable<S, K, V> {
    /// Builds an empty table. Bad settings (a load factor outside `(0, 1]`, a bucket size that is not a power
    /// of two up to 32, zero capacity, parameters the scheme rejects) are [`Error::InvalidConfig`]; a table
    /// larger than the device's free memory is [`Error::OutOfMemory`], checked before allocating.
    pub fn new(config: TableConfig) -> Result<Self> {
        Self::build(config, false)
    }

    /// [`HashTable::new`], or with `keys_only` the table under a [`HashSet`] (GPUs: keys alone in each slot).
    pub(crate) fn build(config: TableConfig, keys_only: bool) -> Result<Self> {
        // GPU tables pack 32-bit pairs into one word; wider pairs live in parallel key and value arrays, which
        // only stable schemes can fill with one compare-and-swap per pair (`gpu::wide`). A set's key word is
        // its whole element, which every scheme moves.
        let wide = K::BITS > 32 || V::BITS > 32;
        let gpu_ok = keys_only || !wide || S::STABLE;
        let backend = match config.backend {
            BackendChoice::Auto if !gpu_ok => Backend::Cpu,
            choice => resolve(choice),
        };
        let bucket_size = config
            .bucket_size
            .unwrap_or_else(|| default_bucket_size_of::<S>(backend));
        config.validate(bucket_size)?;
        let swap = KeySwap::new(config.reserved_key)?;
        let params = config
            .params
            .unwrap_or_else(|| S::default_params(bucket_size));
        S::validate(bucket_size, &params).map_err(Error::InvalidConfig)?;
        if !is_available(backend) {
            return Err(unavailable(backend));
        }
        if backend != Backend::Cpu && !gpu_ok {
            return Err(Error::InvalidConfig(format!(
                "{} moves pairs (cuckoo eviction), which the {backend} backend does for pairs of up to 64 bits; \
                 {}-bit keys with {}-bit values need a stable scheme (Iht, P2bht) on GPUs, or Backend::Cpu",
                S::NAME,
                K::BITS,
                V::BITS
            )));
        }
        let num_buckets = config.num_buckets(bucket_size, S::SEQUENCE)?;
        let params = S::bounded(params, num_buckets);
        let family = HashFamily::new(config.seed);
        let shape = EngineShape {
            backend,
            num_buckets,
            bucket_size,
            params,
            share_stager: false,
            keys_only,
        };
        let stream = table_stream();
        let engine = stream
            .id()
            .executes(|| make_engine::<S, K, V>(&config, shape, family))?;
        Ok(Self {
            engine,
            backend,
            config,
            bucket_size,
            params,
            last_insert: ProbeStats::default(),
            last_find: std::sync::Mutex::new(ProbeStats::default()),
            swap,
            stream,
            _types: PhantomData,
        })
    }

    /// The backend this table runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }
    /// Slots per bucket (the configured one, or the backend's default).
    pub fn bucket_size(&self) -> u32 {
        self.bucket_size
    }
    /// Stored pairs.
    pub fn len(&self) -> usize {
        self.engine.len()
    }
    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Slots (buckets x bucket size).
    pub fn capacity(&self) -> usize {
        self.engine.capacity()
    }
    /// `len / capacity`.
    pub fn load_factor(&self) -> f64 {
        self.len() as f64 / self.capacity() as f64
    }
    /// The scheme parameters in use.
    pub fn params(&self) -> SchemeParams {
        self.params
    }
    /// The hash family in use (changes when a failed insert re-seeds).
    pub fn family(&self) -> HashFamily {
        self.engine.family()
    }
    /// Probe statistics of the last insert: exact on the CPU backend; on GPUs when `count_probes` is on (else 0
    /// probes).
    pub fn last_insert_probes(&self) -> ProbeStats {
        self.last_insert
    }
    /// Probe statistics of the last find/contains (CPU backend; GPUs with `count_probes`).
    pub fn last_find_probes(&self) -> ProbeStats {
        *self.last_find.lock().expect("poisoned")
    }

    /// Inserts (upserts) pairs. If a key occurs several times in the batch, its **last** value is stored; a
    /// key already in the table gets the new value.
    ///
    /// On GPUs the batch is copied in through pinned staging buffers (directly, when `keys` and `values` are
    /// in pinned memory such as a [`HashTable::pinned_buffer`]), and duplicates and updates are settled by
    /// device passes: the host never looks at the keys beyond the sentinel check.
    ///
    /// Errors: [`Error::LengthMismatch`], [`Error::SentinelKey`] and [`Error::CapacityExceeded`] leave the table
    /// unchanged. [`Error::BuildFailed`] is returned when, after `max_rebuilds` re-seeded rebuilds, some pairs
    /// still cannot be placed: they are returned in the error and every other pair is in the table.
    pub fn insert(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            let keys = self.swap.keys(keys);
            self.insert_keys(&keys, values)
                .map_err(|e| self.swap.error(e))
        })
    }

    /// [`HashTable::insert`] of the table's keys (the reserved key swapped).
    fn insert_keys(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        // GPU engines check the sentinel during the copy and the capacity from their duplicate pass; otherwise
        // the host scans, and only a batch that could overflow pays for an exact count of its new keys.
        let in_pipeline = self.engine.checks_in_pipeline(keys.len());
        let Some(carried) = self.admit(keys, values, in_pipeline)? else {
            return Ok(());
        };
        let (keys, values) = carried.before(keys, values);
        let t0 = std::time::Instant::now();
        let inserted = self.engine.upsert(&keys, &values)?;
        tracing::trace!(
            target: "hashtile",
            phase = "insert: engine",
            ms = t0.elapsed().as_secs_f64() * 1e3,
            unplaced = inserted.unplaced.len()
        );
        self.settle_insert(inserted)
    }

    /// Inserts pairs, combining values by the reduction `F` (`hashtile_core::reduce`: [`Add`], `Min`, `Max`,
    /// `Assign` or your own): a stored key's value becomes `F(stored, v)`, and a key repeated in the batch is
    /// combined once with the reduction of all its values (duplicates are reduced, not last-wins; `Assign`
    /// alone keeps the last). A counting table is `insert_or_apply::<Add>` of ones; a group-by sum of
    /// `(group, amount)` pairs is `insert_or_apply::<Add>` of the amounts. Reductions other than `Assign` must be
    /// commutative and associative: on GPUs duplicates meet in whatever order the device's atomics do.
    ///
    /// On GPUs the batch goes to the device in batches of `batch_keys`. Linear probing and double hashing with
    /// 32-bit pairs combine in the table, one insert pass; the other schemes (and 64-bit pairs) run the
    /// insert's duplicate pass, a reduce pass over the duplicates, a pass that combines stored keys in place and
    /// the bulk insert of the new keys. Errors are [`HashTable::insert`]'s, with the same guarantees.
    ///
    /// ```
    /// # use hashtile_backends::{Backend, BackendChoice, HashTable, TableConfig};
    /// # use hashtile_probing::Bcht;
    /// use hashtile_core::reduce::Add;
    /// let cfg = TableConfig::for_keys(1000, 0.8).backend(BackendChoice::Exactly(Backend::Cpu));
    /// let mut counts: HashTable<Bcht, u32, u32> = HashTable::new(cfg)?;
    /// counts.insert_or_apply::<Add>(&[7, 8, 7, 7], &[1, 1, 1, 1])?;
    /// counts.insert_or_apply::<Add>(&[8], &[5])?;
    /// assert_eq!(counts.find(&[7, 8, 9])?, vec![Some(3), Some(6), None]);
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    ///
    /// [`Add`]: hashtile_core::reduce::Add
    pub fn insert_or_apply<F: Reduction>(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            let keys = self.swap.keys(keys);
            self.insert_or_apply_keys::<F>(&keys, values)
                .map_err(|e| self.swap.error(e))
        })
    }

    /// [`HashTable::insert_or_apply`] of the table's keys.
    fn insert_or_apply_keys<F: Reduction>(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        let Some(carried) = self.admit(keys, values, false)? else {
            return Ok(());
        };
        let (keys, values) = carried.before(keys, values);
        let t0 = std::time::Instant::now();
        let inserted = apply::insert_or_apply::<F, S, K, V>(self.engine.as_mut(), &keys, &values)?;
        tracing::trace!(
            target: "hashtile",
            phase = "insert_or_apply: engine",
            ms = t0.elapsed().as_secs_f64() * 1e3,
            unplaced = inserted.unplaced.len()
        );
        self.settle_insert(inserted)
    }

    /// Removes `keys` and returns how many pairs went (absent keys, repeats and the sentinel key erase
    /// nothing more). With 32-bit keys the slots are marked erased in place (tombstones: lookups probe past them,
    /// [`HashTable::tombstones`] counts them). Inserts of every scheme take marks again: a new key goes into
    /// the first mark its walk passed once the walk proves it absent. They keep marks until pairs and marks
    /// fill 15/16 of the slots, or until
    /// [`HashTable::compact`]: the table is then rebuilt without them (under the next family of its
    /// deterministic sequence) where the pairs live (on GPUs, on the device). 64-bit keys (no key word to
    /// spare for a mark) rebuild without the erased pairs through the host, at the cost of the table's size. A
    /// rebuild can fail where the table's own build could (a stable scheme with tiny buckets near its load
    /// limit): then the call returns [`Error::BuildFailed`] with the pairs that are no longer stored, as an
    /// insert does.
    ///
    /// ```
    /// # use hashtile_backends::{Backend, BackendChoice, HashTable, TableConfig};
    /// # use hashtile_probing::Iht;
    /// let cfg = TableConfig::for_keys(1000, 0.8).backend(BackendChoice::Exactly(Backend::Cpu));
    /// let mut t: HashTable<Iht, u32, u32> = HashTable::new(cfg)?;
    /// t.insert(&[1, 2, 3], &[10, 20, 30])?;
    /// assert_eq!(t.erase(&[2, 2, 9])?, 1);
    /// assert_eq!(t.find(&[1, 2])?, vec![Some(10), None]);
    /// assert_eq!(t.len(), 2);
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    pub fn erase(&mut self, keys: &[K]) -> Result<usize> {
        let stream = self.stream.id();
        stream.executes(|| {
            let keys = self.swap.keys(keys);
            self.erase_keys(&keys).map_err(|e| self.swap.error(e))
        })
    }

    /// [`HashTable::erase`] of the table's keys.
    fn erase_keys(&mut self, keys: &[K]) -> Result<usize> {
        // A sentinel key among `keys` erases nothing: it is never stored, and no engine's find looks it up (an
        // erased packed slot carries its bits: `device::find::tile_find_core`).
        if keys.is_empty() || self.is_empty() {
            return Ok(0);
        }
        if let Some(n) = self.engine.erase_stored(keys)? {
            if !S::STABLE && !self.engine.takes_marks() {
                // A cuckoo eviction could carry a mark on as if it were a pair: the marks are reclaimed at once,
                // by a rebuild where the pairs live (on GPUs, on the device).
                self.compact_table()?;
            }
            return Ok(n);
        }
        let gone: std::collections::HashSet<K> = keys.iter().copied().collect();
        let stored = self.engine.pairs()?;
        let before = stored.len();
        let kept: Vec<(K, V)> = stored
            .into_iter()
            .filter(|(k, _)| !gone.contains(k))
            .collect();
        let erased = before - kept.len();
        if erased > 0 {
            self.refill(kept)?;
        }
        Ok(erased)
    }

    /// Slots marked erased and not yet reclaimed by a rebuild ([`HashTable::erase`]).
    pub fn tombstones(&self) -> usize {
        self.engine.marks()
    }

    /// Looks keys up: `Some(value)` if present, `None` if absent (the sentinel key is always absent).
    pub fn find(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        let stream = self.stream.id();
        stream.executes(|| {
            let (answers, stats) = self.engine.find_options(&self.swap.keys(keys))?;
            *self.last_find.lock().expect("poisoned") = stats;
            Ok(answers)
        })
    }

    /// Looks keys up into `out`: the value, or [`Value::ABSENT`] (all ones) for absent keys. On GPUs the values
    /// are copied straight into `out` (directly when it is pinned memory).
    pub fn find_into(&self, keys: &[K], out: &mut [V]) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            check_out_len(keys.len(), out.len())?;
            let stats = self.engine.find_into(&self.swap.keys(keys), out, None)?;
            *self.last_find.lock().expect("poisoned") = stats;
            Ok(())
        })
    }

    /// [`HashTable::find_into`] with presence bits: bit `i % 32` of `found[i / 32]` set for present keys (the
    /// sharded table's finds, whose answers are `Option`s and `bool`s built from both).
    pub(crate) fn find_bits_into(
        &self,
        keys: &[K],
        out: &mut [V],
        found: &mut [u32],
    ) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            check_out_len(keys.len(), out.len())?;
            found.fill(0);
            let stats = self
                .engine
                .find_into(&self.swap.keys(keys), out, Some(found))?;
            *self.last_find.lock().expect("poisoned") = stats;
            Ok(())
        })
    }

    /// The CubeCL stream every call of this table runs on (a sharded table's device calls run their own
    /// kernels for the shard there too).
    pub(crate) fn stream(&self) -> StreamId {
        self.stream.id()
    }

    /// The engine as `Any` (a sharded table's device calls downcast it to the GPU table).
    pub(crate) fn engine_any(&self) -> &dyn std::any::Any {
        self.engine.as_any()
    }

    /// [`HashTable::engine_any`], mutable.
    pub(crate) fn engine_any_mut(&mut self) -> &mut dyn std::any::Any {
        self.engine.as_any_mut()
    }

    /// `true` when the table swaps a user's reserved key with the all-ones key on the way in and out (device
    /// calls, which see the table's own keys, then differ from host calls).
    pub(crate) fn swaps_keys(&self) -> bool {
        self.swap.swaps()
    }

    /// `true` for the one key the table refuses ([`Error::SentinelKey`]): the all-ones key, or the configured
    /// reserved key.
    pub(crate) fn refuses(&self, key: K) -> bool {
        self.swap.key(key).is_sentinel()
    }

    /// For a keys-only table (a set): the first key a set refuses, the empty or the erased key after the
    /// reserved-key swap, as its typed error.
    pub(crate) fn set_refuses(&self, keys: &[K]) -> Option<Error> {
        first_reserved(&reserved_keys::<K>(), &self.swap.keys(keys))
    }

    /// [`Error::CapacityExceeded`] if inserting `keys` would overflow a table without growth (the new keys
    /// counted exactly only when the batch could), changing nothing.
    pub(crate) fn check_room(&self, keys: &[K]) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            if self.config.growth.is_some() || self.len() + keys.len() <= self.capacity() {
                return Ok(());
            }
            let incoming = self.engine.count_new(&self.swap.keys(keys))?;
            if self.len() + incoming > self.capacity() {
                return Err(Error::CapacityExceeded {
                    len: self.len(),
                    incoming,
                    capacity: self.capacity(),
                });
            }
            Ok(())
        })
    }

    /// Compiles the GPU kernels that `insert` (new keys and updates), `find`, `find_into` and `contains` launch,
    /// on a small throwaway table of this one's configuration (this table is left unchanged), so that the first
    /// real call does not wait for the compiler (a fresh process's first insert: 0.4 s on CUDA). With the kernel
    /// cache (the default: [`crate::KernelCache`]) later processes of the same build load them instead. Does
    /// nothing on the CPU backend.
    ///
    /// ```
    /// # use hashtile_backends::{HashTable, TableConfig};
    /// # use hashtile_probing::Bcht;
    /// let table: HashTable<Bcht, u32, u32> = HashTable::new(TableConfig::for_keys(1 << 20, 0.8))?;
    /// table.warm_up()?; // before the timed part of a program
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    pub fn warm_up(&self) -> Result<()> {
        if self.backend == Backend::Cpu {
            return Ok(());
        }
        let n = 64 * self.bucket_size as usize;
        let config = TableConfig {
            backend: BackendChoice::Exactly(self.backend),
            capacity: 4 * n,
            load_factor: None,
            bucket_size: Some(self.bucket_size),
            params: Some(self.params),
            ..self.config.clone()
        };
        let mut scratch = Self::new(config)?;
        let keys: Vec<K> = (0..n as u64).map(K::narrow).collect();
        let values: Vec<V> = (0..n as u64).map(V::narrow).collect();
        // Twice: the second insert updates stored keys, which a first insert into an empty table never does.
        scratch.insert(&keys, &values)?;
        scratch.insert(&keys, &values)?;
        let mut out = vec![V::default(); n];
        scratch.find_into(&keys, &mut out)?;
        scratch.find(&keys)?;
        Ok(())
    }

    /// `true` for each key that is present. (Through presence bits alone, `Engine::contains_into`: a GPU table
    /// copies no values back; the answers are made from the bits with all cores.)
    pub fn contains(&self, keys: &[K]) -> Result<Vec<bool>> {
        use rayon::prelude::*;
        let mut bits = vec![0u32; keys.len().div_ceil(32)];
        let stream = self.stream.id();
        stream.executes(|| {
            let stats = self
                .engine
                .contains_into(&self.swap.keys(keys), &mut bits)?;
            *self.last_find.lock().expect("poisoned") = stats;
            Ok::<(), Error>(())
        })?;
        Ok((0..keys.len())
            .into_par_iter()
            .map(|i| crate::results::present(&bits, i))
            .collect())
    }

    /// Every stored pair (order unspecified).
    pub fn pairs(&self) -> Result<Vec<(K, V)>> {
        let stream = self.stream.id();
        stream.executes(|| {
            let mut pairs = self.engine.pairs()?;
            self.swap.pairs(&mut pairs);
            Ok(pairs)
        })
    }

    /// For placement checks: `(key, bucket)` of every stored pair.
    pub fn placement(&self) -> Result<Vec<(K, u32)>> {
        let stream = self.stream.id();
        stream.executes(|| {
            let mut placed = self.engine.placement()?;
            self.swap.pairs(&mut placed);
            Ok(placed)
        })
    }

    /// The buckets `key` may live in under the current hash family, along the scheme's probe sequence
    /// (`ProbingScheme::SEQUENCE`): the first `SchemeInfo::candidates` probes, at most one per bucket.
    pub fn candidate_buckets(&self, key: K) -> Vec<u32> {
        let nb = (self.capacity() / self.bucket_size as usize) as u32;
        let probes = S::candidates(&self.params).min(nb);
        (0..probes)
            .map(|i| {
                self.family()
                    .probe_bucket::<S>(self.swap.key(key).widen(), i, nb)
            })
            .collect()
    }

    /// Removes every pair (keeps the hash family).
    pub fn clear(&mut self) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| {
            let fam = self.engine.family();
            self.engine.reset(fam)
        })
    }

    /// A host buffer of `n` elements that this table's backend copies at the full bus rate: page-locked memory
    /// on CUDA (about 55 GB/s on an H100 against 8.5 GB/s from a `Vec`), ordinary memory elsewhere
    /// ([`PinnedBuffer::is_pinned`] tells). Fill it and pass it as a slice to [`HashTable::insert`],
    /// [`HashTable::find_into`] and the rest: pinned memory is detected by itself.
    ///
    /// ```
    /// use hashtile_backends::{Backend, BackendChoice, HashTable, TableConfig};
    /// use hashtile_probing::Bcht;
    /// let cfg = TableConfig::for_keys(1000, 0.8).backend(BackendChoice::Exactly(Backend::Cpu));
    /// let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg)?;
    /// let mut keys = t.pinned_buffer::<u32>(3);
    /// keys.copy_from_slice(&[1, 2, 3]);
    /// let mut values = t.pinned_buffer::<u32>(3);
    /// values.copy_from_slice(&[10, 20, 30]);
    /// t.insert(&keys, &values)?;
    /// let mut out = t.pinned_buffer::<u32>(3);
    /// t.find_into(&keys, &mut out)?;
    /// assert_eq!(&out[..], &[10, 20, 30]);
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    pub fn pinned_buffer<E: Element>(&self, n: usize) -> PinnedBuffer<E> {
        PinnedBuffer::from_alloc(self.engine.alloc_pinned(n * size_of::<E>()), n)
    }
}

/// What [`make_engine`] builds: where, and how large.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EngineShape {
    /// The resolved, available backend.
    pub backend: Backend,
    pub num_buckets: u32,
    pub bucket_size: u32,
    /// Checked by the scheme already.
    pub params: SchemeParams,
    /// GPUs: copy through the process's shared stager (tables that come in numbers).
    pub share_stager: bool,
    /// A set's table: keys alone (GPUs: the keys-only layouts, half the bytes of packed pairs).
    pub keys_only: bool,
}

/// An empty engine of `shape` under `family`, with `config`'s per-backend settings (deterministic CPU mode,
/// probe counting, batch sizes). Wide pairs need a stable scheme on GPUs (checked by the caller).
pub(crate) fn make_engine<S: SchemeInfo, K: Key, V: Value>(
    config: &TableConfig,
    shape: EngineShape,
    family: HashFamily,
) -> Result<Box<dyn Engine<K, V>>> {
    Ok(match shape.backend {
        Backend::Cpu => Box::new(cpu_engine::<S>(config, shape, family)?),
        backend => {
            let spec = gpu_spec::<S, K, V>(config, shape, family);
            crate::table::gpu::build::build::<S, _>(
                backend,
                spec,
                crate::table::gpu::build::AsEngine::<K, V>::default(),
            )?
        }
    })
}

/// The CPU engine of `shape` under `family` ([`make_engine`]'s, for owners that wrap it).
pub(crate) fn cpu_engine<S: SchemeInfo>(
    config: &TableConfig,
    shape: EngineShape,
    family: HashFamily,
) -> Result<CpuEngine<S>> {
    let slots = shape.num_buckets as u64 * shape.bucket_size as u64;
    // A key and a value per slot (a set's table: the key alone), and a lock per bucket.
    let per_slot = if shape.keys_only { 9 } else { 17 };
    check_host_memory("the table", slots * per_slot)?;
    Ok(CpuEngine::new(
        CpuTable::with_values(
            shape.num_buckets,
            shape.bucket_size,
            family,
            shape.params,
            !shape.keys_only,
        ),
        config.deterministic,
    ))
}

/// What a GPU table of `shape` under `family` is built from, with `config`'s settings for `K -> V`.
pub(crate) fn gpu_spec<S: SchemeInfo, K: Key, V: Value>(
    config: &TableConfig,
    shape: EngineShape,
    family: HashFamily,
) -> crate::table::gpu::build::GpuSpec {
    crate::table::gpu::build::GpuSpec {
        num_buckets: shape.num_buckets,
        bucket_size: shape.bucket_size,
        family,
        params: shape.params,
        count_probes: config.count_probes,
        wide: K::BITS > 32 || V::BITS > 32,
        keys_only: shape.keys_only,
        batch_keys: config.batch_keys,
        copy_chunks: config.copy_chunks,
        share_stager: shape.share_stager,
        device: config.device,
        upserts_converge: S::upserts_converge(&shape.params),
    }
}
