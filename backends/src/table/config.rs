//! [`TableConfig`]: how a static table is built (backend, capacity, bucket size, scheme parameters, seeds,
//! rebuilds, batch sizes), its checks, and the default bucket size of each scheme per backend.

use crate::runtime::select::{Backend, BackendChoice};
use hashtile_core::scheme::{SchemeInfo, SchemeParams};
use hashtile_core::{Error, Result};

/// How to build a table. Start from [`TableConfig::for_keys`] or [`TableConfig::with_capacity`].
#[derive(Debug, Clone, PartialEq)]
pub struct TableConfig {
    /// Which backend to run on (default: `Auto`).
    pub backend: BackendChoice,
    /// Minimum number of slots; rounded up to whole buckets.
    pub capacity: usize,
    /// The load factor [`TableConfig::for_keys`] was given (checked by [`HashTable::new`](super::HashTable::new): it must be in
    /// `(0, 1]`).
    pub load_factor: Option<f64>,
    /// Slots per bucket: a power of two in `1..=32`. `None` takes the backend's default
    /// ([`default_bucket_size_of`]: 8 for BCHT on CUDA, 16 elsewhere).
    pub bucket_size: Option<u32>,
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
    /// GPU backends: keys per device batch of an insert and per batch of a find (`None`: 2^26 keys each, copied in chunks of 2^22).
    /// Smaller batches bound the device memory of a call; tests use them to cross chunk boundaries.
    pub batch_keys: Option<usize>,
    /// GPU backends: the fewest chunks a device batch of a host call is copied in (default 1: chunks of 2^22
    /// keys, so that a smaller batch travels as one chunk, its copy, transfer and kernels in turn). See
    /// [`TableConfig::copy_chunks`].
    pub copy_chunks: usize,
    /// Automatic growth: `Some(max_load)` lets an insert whose new keys would take the load past `max_load` first
    /// move the table into one of twice the capacity (doubling until they fit; on GPUs the pairs move on the
    /// device), as std's `HashMap` does; `None` (the default) keeps the capacity fixed, and an insert that does
    /// not fit is [`Error::CapacityExceeded`]. See [`TableConfig::growth`].
    pub growth: Option<f64>,
    /// The one key value the table cannot store, widened (`None`: the all-ones key, `Key::EMPTY`). See
    /// [`TableConfig::reserved_key`].
    pub reserved_key: Option<u64>,
    /// GPU backends: which of the backend's devices holds the table (default 0: CUDA's first GPU, Vulkan's
    /// preferred adapter). See [`TableConfig::device`].
    pub device: usize,
}

impl TableConfig {
    /// A table with at least `capacity` slots.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            backend: BackendChoice::Auto,
            capacity,
            load_factor: None,
            bucket_size: None,
            params: None,
            seed: DEFAULT_SEED,
            max_rebuilds: 8,
            deterministic: false,
            count_probes: false,
            batch_keys: None,
            copy_chunks: 1,
            growth: None,
            reserved_key: None,
            device: 0,
        }
    }
    /// A table sized so that `n` keys fill it to `load_factor`, which must be in `(0, 1]` (else
    /// [`HashTable::new`](super::HashTable::new) returns [`Error::InvalidConfig`]).
    pub fn for_keys(n: usize, load_factor: f64) -> Self {
        let slots = if load_factor > 0.0 && load_factor <= 1.0 {
            let s = (n as f64 / load_factor).ceil();
            if s < usize::MAX as f64 {
                s as usize
            } else {
                usize::MAX
            }
        } else {
            n
        };
        Self {
            load_factor: Some(load_factor),
            ..Self::with_capacity(slots)
        }
    }
    /// Sets the backend.
    pub fn backend(mut self, backend: BackendChoice) -> Self {
        self.backend = backend;
        self
    }
    /// Sets the bucket size.
    pub fn bucket_size(mut self, b: u32) -> Self {
        self.bucket_size = Some(b);
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
    /// Sets the keys per device batch and find chunk (GPU backends; rounded up to a multiple of 32).
    pub fn batch_keys(mut self, keys: usize) -> Self {
        self.batch_keys = Some(keys);
        self
    }
    /// Copies each device batch of a host call in at least `pieces` chunks of at least 2^16 keys (GPU backends;
    /// default 1). Each chunk's kernels are queued as it lands, so with several chunks a small batch's host
    /// copy, bus transfer and kernels overlap, at the cost of more launches (on an H200, 2^20-key batches from
    /// `Vec`s ran 0.61-0.78x with 4 chunks: the launches cost more than the overlap saves). No chunk is larger
    /// than the default's 2^22 keys (or the smaller ones [`TableConfig::batch_keys`] sets), so a batch of
    /// `pieces` x 2^22 keys or more is cut as by default.
    ///
    /// ```
    /// use hashtile_backends::{HashTable, TableConfig};
    /// use hashtile_probing::Bcht;
    /// let mut t = HashTable::<Bcht, u32, u32>::new(TableConfig::for_keys(1 << 12, 0.8).copy_chunks(4))?;
    /// let keys: Vec<u32> = (0..1 << 12).collect();
    /// t.insert(&keys, &keys)?;
    /// assert_eq!(t.find(&[7])?, vec![Some(7)]);
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    pub fn copy_chunks(mut self, pieces: usize) -> Self {
        self.copy_chunks = pieces;
        self
    }
    /// Turns automatic growth on: an insert whose new keys would take the load past `max_load` (in `(0, 1]`)
    /// first doubles the capacity, as often as needed, moving the stored pairs into the larger table (on GPUs,
    /// on the device). The doublings' total work is at most that of one rebuild of the final table, so a table
    /// grown batch by batch costs a constant factor over one built at its final size.
    ///
    /// ```
    /// # use hashtile_backends::{Backend, BackendChoice, HashTable, TableConfig};
    /// # use hashtile_probing::Bcht;
    /// let cfg = TableConfig::for_keys(64, 0.8)
    ///     .growth(0.8)
    ///     .backend(BackendChoice::Exactly(Backend::Cpu));
    /// let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg)?;
    /// let keys: Vec<u32> = (0..10_000).collect();
    /// t.insert(&keys, &keys)?; // grows from 80 slots to more than 12 500
    /// assert_eq!(t.len(), 10_000);
    /// assert!(t.load_factor() <= 0.8);
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    pub fn growth(mut self, max_load: f64) -> Self {
        self.growth = Some(max_load);
        self
    }
    /// Reserves `key` instead of the all-ones key: the table then stores the all-ones key like any other, and
    /// `key` becomes the one value it refuses ([`Error::SentinelKey`]) and never finds. A table needs no other
    /// reserved value: an erased slot holds the table's own empty key with a marker value (32-bit keys), or
    /// is rebuilt away (64-bit keys). Build the table with the same key type as `key`
    /// ([`HashTable::new`](super::HashTable::new) refuses a value that is not one as [`Error::InvalidConfig`]).
    ///
    /// The table keeps its all-ones word as the empty slot and swaps the two values on the way in and out
    /// (your all-ones key is stored as `key`): one pass over the keys of each call on the host, and nothing
    /// on the device. Only [`HashTable`](super::HashTable) calls swap; a `GpuTable`'s device-resident calls and the device
    /// API see the table's own keys.
    ///
    /// ```
    /// # use hashtile_backends::{Backend, BackendChoice, HashTable, TableConfig};
    /// # use hashtile_probing::Bcht;
    /// let cfg = TableConfig::for_keys(1000, 0.8)
    ///     .reserved_key(0u32)
    ///     .backend(BackendChoice::Exactly(Backend::Cpu));
    /// let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg)?;
    /// t.insert(&[u32::MAX, 7], &[1, 2])?;
    /// assert_eq!(t.find(&[u32::MAX, 7, 0])?, vec![Some(1), Some(2), None]);
    /// assert!(matches!(t.insert(&[5, 0], &[1, 1]), Err(hashtile_core::Error::SentinelKey { index: 1 })));
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    pub fn reserved_key<K: hashtile_core::Key>(mut self, key: K) -> Self {
        self.reserved_key = Some(key.widen());
        self
    }
    /// Puts the table on device `ordinal` of its GPU backend (CUDA: the driver's ordinal, as `CUDA_VISIBLE_DEVICES`
    /// leaves them; Vulkan: discrete GPU `ordinal`, 0 being wgpu's preferred adapter). Each device has its own
    /// CubeCL client, stream and pinned staging buffers, so tables on different devices run their calls at the
    /// same time from different threads (what [`ShardedTable`](crate::ShardedTable) does). The CPU backend
    /// ignores it. A CUDA ordinal past the driver's devices is [`Error::InvalidConfig`] when the table is made.
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = ordinal;
        self
    }
    /// Sets how many re-seeded rebuilds an insert may try.
    pub fn max_rebuilds(mut self, n: u32) -> Self {
        self.max_rebuilds = n;
        self
    }
    /// Checks the settings that do not depend on the scheme; `bucket_size` is the resolved bucket size.
    pub(crate) fn validate(&self, bucket_size: u32) -> Result<()> {
        if let Some(lf) = self.load_factor
            && !(lf > 0.0 && lf <= 1.0)
        {
            return Err(Error::InvalidConfig(format!(
                "load factor must be in (0, 1], got {lf}"
            )));
        }
        if !bucket_size.is_power_of_two() || bucket_size > 32 {
            return Err(Error::InvalidConfig(format!(
                "bucket size must be a power of two in 1..=32, got {bucket_size}"
            )));
        }
        if let Some(g) = self.growth
            && !(g > 0.0 && g <= 1.0)
        {
            return Err(Error::InvalidConfig(format!(
                "growth's maximum load must be in (0, 1], got {g}"
            )));
        }
        if self.batch_keys == Some(0) {
            return Err(Error::InvalidConfig("batch_keys must be at least 1".into()));
        }
        if self.copy_chunks == 0 {
            return Err(Error::InvalidConfig(
                "copy_chunks must be at least 1".into(),
            ));
        }
        if self.capacity == 0 {
            return Err(Error::InvalidConfig(
                "capacity must be at least 1 slot".into(),
            ));
        }
        Ok(())
    }
    /// The bucket count of a table of this capacity with buckets of `bucket_size` slots along a probe sequence of
    /// `sequence` (`hashtile_core::scheme::sequence_buckets`: double hashing takes a prime count).
    pub(crate) fn num_buckets(&self, bucket_size: u32, sequence: u32) -> Result<u32> {
        let nb = self.capacity.div_ceil(bucket_size.max(1) as usize).max(1);
        u32::try_from(nb)
            .ok()
            .map(|nb| hashtile_core::scheme::sequence_buckets(sequence, nb))
            .filter(|&nb| (nb as u64) * (bucket_size as u64) < u32::MAX as u64)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "capacity {} is too large (at most 2^32 - 1 slots)",
                    self.capacity
                ))
            })
    }
}

/// The bucket size scheme `S` uses on `backend` when the configuration does not set one.
///
/// - BCHT on CUDA: 8, from the H100 sweeps of 2026-11-23 (B = 8 beats B = 16 in every cell at loads 0.8 and
///   0.9, finds about 1.5x; docs/PERFORMANCE.md).
/// - Everything else: 16, the BGHT paper's choice (IHT and P2BHT were swept at 16 and 32 only; Vulkan and
///   the CPU backend are not bus- or latency-bound the same way and were not swept).
/// - Clamped to the scheme's sizes (1CHT: 1).
pub fn default_bucket_size_of<S: SchemeInfo>(backend: Backend) -> u32 {
    let wanted = match backend {
        Backend::Cuda if S::NAME == "bcht" => 8,
        _ => 16,
    };
    S::BUCKET_SIZES
        .iter()
        .copied()
        .filter(|&b| b <= wanted)
        .max()
        .unwrap_or(S::BUCKET_SIZES[0])
}

/// The default master seed of the hash family.
pub use hashtile_core::hash::DEFAULT_SEED;
