//! [`HashTable`]: the typed host API over any backend.

use crate::cpu::CpuTable;
use crate::engine::Engine;
use crate::select::{Backend, BackendChoice, is_available, resolve};
use hashtile_core::element::first_sentinel;
use hashtile_core::scheme::{SchemeInfo, SchemeParams};
use hashtile_core::{Error, HashFamily, Key, ProbeStats, Result, Value};
use std::collections::HashMap;
use std::marker::PhantomData;

/// How to build a table. Start from [`TableConfig::for_keys`] or [`TableConfig::with_capacity`].
#[derive(Debug, Clone, PartialEq)]
pub struct TableConfig {
    /// Which backend to run on (default: `Auto`).
    pub backend: BackendChoice,
    /// Minimum number of slots; rounded up to whole buckets.
    pub capacity: usize,
    /// Slots per bucket: a power of two in `1..=32` (default 16).
    pub bucket_size: u32,
    /// Scheme parameters; `None` takes the scheme's defaults for the bucket size.
    pub params: Option<SchemeParams>,
    /// Master seed of the hash family.
    pub seed: u64,
    /// Rebuilds with fresh seeds tried after a failed insert before giving up.
    pub max_rebuilds: u32,
    /// CPU backend only: run operations one at a time, in input order, so that placement and probe counts are
    /// exactly reproducible.
    pub deterministic: bool,
    /// GPU backends: count probes on the device (compiled out of the kernels when off). The CPU backend
    /// always counts.
    pub count_probes: bool,
}

impl TableConfig {
    /// A table with at least `capacity` slots.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            backend: BackendChoice::Auto,
            capacity,
            bucket_size: 16,
            params: None,
            seed: DEFAULT_SEED,
            max_rebuilds: 8,
            deterministic: false,
            count_probes: false,
        }
    }
    /// A table sized so that `n` keys fill it to `load_factor`.
    pub fn for_keys(n: usize, load_factor: f64) -> Self {
        Self::with_capacity(((n as f64) / load_factor).ceil() as usize)
    }
    /// Sets the backend.
    pub fn backend(mut self, backend: BackendChoice) -> Self {
        self.backend = backend;
        self
    }
    /// Sets the bucket size.
    pub fn bucket_size(mut self, b: u32) -> Self {
        self.bucket_size = b;
        self
    }
    /// Sets the scheme parameters.
    pub fn params(mut self, p: SchemeParams) -> Self {
        self.params = Some(p);
        self
    }
    /// Sets the master seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Sets deterministic (sequential) mode for the CPU backend.
    pub fn deterministic(mut self, on: bool) -> Self {
        self.deterministic = on;
        self
    }
    /// Turns on device probe counting for GPU backends.
    pub fn count_probes(mut self, on: bool) -> Self {
        self.count_probes = on;
        self
    }
    /// Sets how many re-seeded rebuilds an insert may try.
    pub fn max_rebuilds(mut self, n: u32) -> Self {
        self.max_rebuilds = n;
        self
    }
    fn num_buckets(&self) -> Result<u32> {
        let nb = self
            .capacity
            .div_ceil(self.bucket_size.max(1) as usize)
            .max(1);
        u32::try_from(nb)
            .ok()
            .filter(|&nb| (nb as u64) * (self.bucket_size as u64) < u32::MAX as u64)
            .ok_or_else(|| Error::InvalidConfig(format!("capacity {} is too large", self.capacity)))
    }
}

/// The default master seed of the hash family.
pub const DEFAULT_SEED: u64 = 0x5eed_0f4a_5117_e000;

struct CpuEngine<S: SchemeInfo> {
    table: CpuTable<S>,
    deterministic: bool,
}

impl<S: SchemeInfo> Engine for CpuEngine<S> {
    fn insert_pairs(&mut self, pairs: &[(u64, u64)]) -> Result<(ProbeStats, Vec<(u64, u64)>)> {
        Ok(self.table.insert_pairs(pairs, self.deterministic))
    }
    fn find_keys(&self, keys: &[u64], out: &mut [Option<u64>]) -> Result<ProbeStats> {
        Ok(self.table.find_keys(keys, self.deterministic, out))
    }
    fn pairs(&self) -> Result<Vec<(u64, u64)>> {
        Ok(self.table.pairs())
    }
    fn reset(&mut self, family: HashFamily) -> Result<()> {
        self.table = self.table.emptied(family);
        Ok(())
    }
    fn len(&self) -> usize {
        self.table.len()
    }
    fn capacity(&self) -> usize {
        self.table.capacity()
    }
    fn family(&self) -> HashFamily {
        self.table.family()
    }
    fn placement(&self) -> Result<Vec<(u64, u32)>> {
        Ok(self.table.placement())
    }
}

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
    engine: Box<dyn Engine>,
    backend: Backend,
    config: TableConfig,
    params: SchemeParams,
    last_insert: ProbeStats,
    last_find: std::sync::Mutex<ProbeStats>,
    _types: PhantomData<(S, K, V)>,
}

impl<S: SchemeInfo, K: Key, V: Value> HashTable<S, K, V> {
    /// Builds an empty table.
    pub fn new(config: TableConfig) -> Result<Self> {
        let params = config
            .params
            .unwrap_or_else(|| S::default_params(config.bucket_size));
        S::validate(config.bucket_size, &params).map_err(Error::InvalidConfig)?;
        // GPU tables pack 32-bit pairs into one word; wider pairs live in parallel key and value arrays, which
        // only stable schemes can fill with one compare-and-swap per pair (`gpu::wide`).
        let wide = K::BITS > 32 || V::BITS > 32;
        let gpu_ok = !wide || S::STABLE;
        let backend = match config.backend {
            BackendChoice::Auto if !gpu_ok => Backend::Cpu,
            choice => resolve(choice),
        };
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
        let num_buckets = config.num_buckets()?;
        let family = HashFamily::new(config.seed);
        let gpu_spec = crate::gpu_engine::GpuSpec {
            num_buckets,
            bucket_size: config.bucket_size,
            family,
            params,
            count_probes: config.count_probes,
            wide,
        };
        let engine: Box<dyn Engine> = match backend {
            Backend::Cpu => Box::new(CpuEngine::<S> {
                table: CpuTable::new(num_buckets, config.bucket_size, family, params),
                deterministic: config.deterministic,
            }),
            Backend::Cuda => crate::gpu_engine::cuda::<S>(gpu_spec)?,
            Backend::Vulkan => crate::gpu_engine::vulkan::<S>(gpu_spec)?,
        };
        Ok(Self {
            engine,
            backend,
            config,
            params,
            last_insert: ProbeStats::default(),
            last_find: std::sync::Mutex::new(ProbeStats::default()),
            _types: PhantomData,
        })
    }

    /// The backend this table runs on.
    pub fn backend(&self) -> Backend {
        self.backend
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

    /// Inserts (upserts) pairs. If a key occurs several times in the batch, its **last** value is stored.
    ///
    /// Errors: [`Error::LengthMismatch`], [`Error::SentinelKey`] and [`Error::CapacityExceeded`] leave the table
    /// unchanged. [`Error::BuildFailed`] is returned when, after `max_rebuilds` re-seeded rebuilds, some pairs
    /// still cannot be placed: they are returned in the error and every other pair is in the table.
    pub fn insert(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: keys.len(),
            });
        }
        if let Some(index) = first_sentinel(keys) {
            return Err(Error::SentinelKey { index });
        }
        let pairs = dedup_last_wins(keys, values);
        // Keys already stored are updated first, in a pass of their own, and only then are the new keys inserted.
        // In one concurrent pass an update could search while a cuckoo eviction holds its key in flight, miss
        // it, and store the key a second time (seen: a 20,000-key CPU table at load 0.95 holding 20,001 keys).
        // Updates never evict, so the first pass cannot race that way; the second holds only distinct new keys.
        // An empty table has nothing to update and skips the lookup.
        let (updates, new) = if self.is_empty() {
            (Vec::new(), pairs)
        } else {
            let wide: Vec<u64> = pairs.iter().map(|p| p.0).collect();
            let mut present = vec![None; wide.len()];
            self.engine.find_keys(&wide, &mut present)?;
            let mut found = present.iter().map(Option::is_some);
            pairs
                .into_iter()
                .partition(|_| found.next().expect("one answer per pair"))
        };
        if self.len() + new.len() > self.capacity() {
            return Err(Error::CapacityExceeded {
                len: self.len(),
                incoming: new.len(),
                capacity: self.capacity(),
            });
        }
        let mut stats = ProbeStats::default();
        let mut failed = Vec::new();
        for batch in [&updates, &new] {
            if batch.is_empty() {
                continue;
            }
            let (s, mut f) = self.engine.insert_pairs(batch)?;
            stats.probes += s.probes;
            stats.ops += s.ops;
            stats.retries += s.retries;
            failed.append(&mut f);
        }
        self.last_insert = stats;
        if failed.is_empty() {
            Ok(())
        } else {
            self.rebuild(failed)
        }
    }

    /// Re-seeds and rebuilds from everything stored plus `pending`, up to `max_rebuilds` times.
    fn rebuild(&mut self, mut pending: Vec<(u64, u64)>) -> Result<()> {
        let mut family = self.engine.family();
        for attempt in 1..=self.config.max_rebuilds {
            let mut all = self.engine.pairs()?;
            all.append(&mut pending);
            family = family.reseeded();
            self.engine.reset(family)?;
            let (_, failed) = self.engine.insert_pairs(&all)?;
            if failed.is_empty() {
                return Ok(());
            }
            pending = failed;
            if attempt == self.config.max_rebuilds {
                break;
            }
        }
        Err(Error::BuildFailed {
            attempts: 1 + self.config.max_rebuilds,
            unplaced: pending,
        })
    }

    /// Looks keys up: `Some(value)` if present, `None` if absent (the sentinel key is always absent).
    pub fn find(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        let wide: Vec<u64> = keys.iter().map(|k| k.widen()).collect();
        let mut out = vec![None; keys.len()];
        let stats = self.engine.find_keys(&wide, &mut out)?;
        *self.last_find.lock().expect("poisoned") = stats;
        Ok(out.into_iter().map(|o| o.map(V::narrow)).collect())
    }

    /// Looks keys up into `out`: the value, or [`Value::ABSENT`] (all ones) for absent keys.
    pub fn find_into(&self, keys: &[K], out: &mut [V]) -> Result<()> {
        if out.len() != keys.len() {
            return Err(Error::LengthMismatch {
                what: "out",
                got: out.len(),
                expected: keys.len(),
            });
        }
        for (o, f) in out.iter_mut().zip(self.find(keys)?) {
            *o = f.unwrap_or(V::ABSENT);
        }
        Ok(())
    }

    /// `true` for each key that is present.
    pub fn contains(&self, keys: &[K]) -> Result<Vec<bool>> {
        Ok(self.find(keys)?.into_iter().map(|o| o.is_some()).collect())
    }

    /// Every stored pair (order unspecified).
    pub fn pairs(&self) -> Result<Vec<(K, V)>> {
        Ok(self
            .engine
            .pairs()?
            .into_iter()
            .map(|(k, v)| (K::narrow(k), V::narrow(v)))
            .collect())
    }

    /// For placement checks: `(key, bucket)` of every stored pair.
    pub fn placement(&self) -> Result<Vec<(K, u32)>> {
        Ok(self
            .engine
            .placement()?
            .into_iter()
            .map(|(k, b)| (K::narrow(k), b))
            .collect())
    }

    /// The buckets `key` may live in under the current hash family, one per hash function.
    pub fn candidate_buckets(&self, key: K) -> Vec<u32> {
        let nb = (self.capacity() / self.config.bucket_size as usize) as u32;
        let fam = self.family();
        (0..self.params.num_hashes as usize)
            .map(|i| fam.bucket(key.widen(), i, nb))
            .collect()
    }

    /// Removes every pair (keeps the hash family).
    pub fn clear(&mut self) -> Result<()> {
        let fam = self.engine.family();
        self.engine.reset(fam)
    }
}

/// Keeps the last occurrence of each key, in first-occurrence order.
fn dedup_last_wins<K: Key, V: Value>(keys: &[K], values: &[V]) -> Vec<(u64, u64)> {
    let mut index: HashMap<u64, usize> = HashMap::with_capacity(keys.len());
    let mut pairs: Vec<(u64, u64)> = Vec::with_capacity(keys.len());
    for (k, v) in keys.iter().zip(values) {
        let (k, v) = (k.widen(), v.widen());
        match index.get(&k) {
            Some(&i) => pairs[i].1 = v,
            None => {
                index.insert(k, pairs.len());
                pairs.push((k, v));
            }
        }
    }
    pairs
}

fn unavailable(backend: Backend) -> Error {
    let (reason, how) = match backend {
        Backend::Cuda if !cfg!(feature = "cuda") => (
            "not compiled in".to_string(),
            "Build with the `cuda` feature (on by default).",
        ),
        Backend::Cuda => (
            "no CUDA driver or device answered".to_string(),
            "Install the NVIDIA driver and CUDA runtime and set LD_LIBRARY_PATH=/usr/local/cuda/lib64.",
        ),
        Backend::Vulkan if !cfg!(feature = "vulkan") => (
            "not compiled in".to_string(),
            "Build with the `vulkan` feature (on by default).",
        ),
        Backend::Vulkan => (
            "no Vulkan adapter answered".to_string(),
            "Install a Vulkan driver; on a machine without a GPU: apt-get install mesa-vulkan-drivers (lavapipe).",
        ),
        Backend::Cpu => ("unreachable".to_string(), ""),
    };
    Error::BackendUnavailable {
        backend: backend_name(backend),
        reason,
        how,
    }
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::Cpu => "cpu",
        Backend::Cuda => "cuda",
        Backend::Vulkan => "vulkan",
    }
}
