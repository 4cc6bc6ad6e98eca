//! [`ShardedConfig`]: how a sharded table is spread (which devices, how many shards) and what each shard is.

use super::ranks::Ranks;
use super::route::MAX_SHARDS;
use crate::chained::ChainedConfig;
use crate::csr::CsrConfig;
use crate::runtime::select::{Backend, BackendChoice, device_count, resolve};
use crate::table::TableConfig;
use hashtile_core::{Error, Result};

/// Where the shards of a [`ShardedTable`](super::ShardedTable) live.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Shards {
    /// One shard per device of the backend (the CPU backend: one shard).
    #[default]
    AllDevices,
    /// One shard on each listed device ordinal, in this order (a device may be listed more than once).
    Devices(Vec<usize>),
    /// `n` shards over the backend's devices in turn (shard `i` on device `i % devices`): on the CPU backend, or
    /// with one GPU, `n` shards side by side in one memory, with the exchange done there (tests of the sharded
    /// logic without several GPUs).
    Count(usize),
}

/// How to build a sharded table: the whole table's config (a [`TableConfig`]: backend, capacity or keys and load,
/// scheme settings, growth, reserved key; a [`ChainedConfig`] for a
/// [`ShardedChainedTable`](super::ShardedChainedTable)) and where its shards go. Each shard gets the whole table's
/// size divided by the shard count plus room for the keys' uneven spread over shards (four standard deviations,
/// [`ShardConfig`]), so a table made by `TableConfig::for_keys(n, load)` takes `n` random keys at about `load` in
/// every shard.
///
/// ```
/// use hashtile_backends::{Backend, BackendChoice, ShardedConfig, TableConfig};
/// let config = ShardedConfig::new(
///     TableConfig::for_keys(1 << 20, 0.8).backend(BackendChoice::Exactly(Backend::Cpu)),
/// )
/// .shards(4);
/// assert_eq!(config.shard_devices()?, vec![0, 0, 0, 0]);
/// # Ok::<(), hashtile_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ShardedConfig<C = TableConfig> {
    /// The whole table (its `device` is ignored: [`ShardedConfig::shards`] places the shards).
    pub table: C,
    /// Where the shards go (default: one per device).
    pub shards: Shards,
    /// Seed of the route hash that picks a key's shard (independent of the shards' hash families).
    pub route_seed: u64,
    /// About how many keys of each device slice travel per exchange step of a device-data call (a call takes as
    /// many steps as its longest slice needs, at most `1024 / shards`, and a key's step comes from its route
    /// hash): every shard works on one step while the next step's keys and the previous step's answers travel.
    /// Smaller steps overlap more and pay more waits; default [`DEFAULT_EXCHANGE_STEP`].
    pub exchange_step: usize,
    /// One process per GPU: this process's rank among the processes that hold the table together (`None`, the
    /// default: this process holds every shard). With ranks, `shards` is not read: the table has one shard per
    /// rank, and this process holds shard `rank` on its device ([`Ranks`]).
    pub ranks: Option<Ranks>,
}

/// Keys of a slice per exchange step unless the user gives another count (the best of 2^22 to 2^26 measured on
/// two H200s over NVLink for slices of 2^26 keys: docs/PERFORMANCE.md, "Sharded tables").
pub const DEFAULT_EXCHANGE_STEP: usize = 1 << 25;

/// Exchange steps are multiples of this many keys, and every step's region of a buffer starts on a multiple of as
/// many words: storage bindings at an offset must start on an aligned boundary (256 bytes on the GPUs measured).
pub const STEP_ALIGN: usize = 2048;

/// Every part of an exchange step (one source's words for one destination) starts on a multiple of this many
/// words, on both sides: NCCL copies unaligned parts at under half the rate (0.43x measured on two H200s). Parts
/// are padded with copies of their last pair where the call tolerates repeats (finds, inserts, erases, idempotent
/// reductions).
pub const PART_ALIGN: usize = 32;

/// The route seed of a sharded table unless the user gives one.
pub const DEFAULT_ROUTE_SEED: u64 = 0x5348_4152_4445_4421;

/// A family's table config as the shards of a sharded table take it: the whole table's, divided among them.
pub trait ShardConfig: Clone {
    /// The backend the whole table asks for.
    fn backend_choice(&self) -> BackendChoice;
    /// The config of one of `shards` shards, on device `device` of `backend`: the whole table's size divided by
    /// the shard count, plus room for the keys' spread over shards ([`spread_room`]).
    fn shard(&self, shards: usize, device: usize, backend: Backend) -> Self;
}

/// Room a shard of `per` expected keys (or slots) takes beyond them among `shards`: four standard deviations of
/// its share of random keys and 64, none for one shard.
pub fn spread_room(per: usize, shards: usize) -> usize {
    if shards > 1 {
        4 * (per as f64).sqrt().ceil() as usize + 64
    } else {
        0
    }
}

impl ShardConfig for TableConfig {
    fn backend_choice(&self) -> BackendChoice {
        self.backend
    }

    fn shard(&self, shards: usize, device: usize, backend: Backend) -> Self {
        let per = self.capacity.div_ceil(shards);
        TableConfig {
            backend: BackendChoice::Exactly(backend),
            capacity: per + spread_room(per, shards),
            device,
            ..self.clone()
        }
    }
}

impl ShardConfig for ChainedConfig {
    fn backend_choice(&self) -> BackendChoice {
        self.backend
    }

    /// The lists and the pool's first slabs divided (a list's expected length is the whole table's).
    fn shard(&self, shards: usize, device: usize, backend: Backend) -> Self {
        let buckets = (self.buckets as usize).div_ceil(shards);
        let pool = (self.pool_slabs as usize).div_ceil(shards);
        let room = |n: usize| (n + spread_room(n, shards)).min(u32::MAX as usize) as u32;
        ChainedConfig {
            buckets: room(buckets),
            pool_slabs: room(pool),
            backend: BackendChoice::Exactly(backend),
            device,
            ..self.clone()
        }
    }
}

impl ShardConfig for CsrConfig {
    fn backend_choice(&self) -> BackendChoice {
        self.backend
    }

    /// A fixed vertex count divided (a shard's `range_factor` applies to its own part of the keys).
    fn shard(&self, shards: usize, device: usize, backend: Backend) -> Self {
        let vertices = self.vertices.map(|v| {
            let per = (v as usize).div_ceil(shards);
            (per + spread_room(per, shards)).min(u32::MAX as usize) as u32
        });
        CsrConfig {
            vertices,
            backend: BackendChoice::Exactly(backend),
            device,
            ..self.clone()
        }
    }
}

impl<C: ShardConfig> ShardedConfig<C> {
    /// A sharded table of `table`'s size and settings, one shard per device of its backend.
    pub fn new(table: C) -> Self {
        Self {
            table,
            shards: Shards::AllDevices,
            route_seed: DEFAULT_ROUTE_SEED,
            exchange_step: DEFAULT_EXCHANGE_STEP,
            ranks: None,
        }
    }

    /// This process is rank `ranks.rank` of `ranks.world` processes holding the table together, one shard each
    /// ([`ShardedConfig::ranks`]; CUDA with NCCL).
    pub fn ranks(mut self, ranks: Ranks) -> Self {
        self.ranks = Some(ranks);
        self
    }

    /// `n` shards over the backend's devices in turn ([`Shards::Count`]).
    pub fn shards(mut self, n: usize) -> Self {
        self.shards = Shards::Count(n);
        self
    }

    /// One shard on each of `ordinals` ([`Shards::Devices`]).
    pub fn devices(mut self, ordinals: impl Into<Vec<usize>>) -> Self {
        self.shards = Shards::Devices(ordinals.into());
        self
    }

    /// Sets the route seed.
    pub fn route_seed(mut self, seed: u64) -> Self {
        self.route_seed = seed;
        self
    }

    /// Sets the keys of each slice per exchange step ([`ShardedConfig::exchange_step`]).
    pub fn exchange_step(mut self, keys: usize) -> Self {
        self.exchange_step = keys;
        self
    }

    /// The exchange step in keys, checked ([`Error::InvalidConfig`] for 0) and rounded up to [`STEP_ALIGN`].
    pub(crate) fn step_keys(&self) -> Result<usize> {
        if self.exchange_step == 0 {
            return Err(Error::InvalidConfig(
                "an exchange step of 0 keys; at least 1".into(),
            ));
        }
        Ok(self.exchange_step.next_multiple_of(STEP_ALIGN))
    }

    /// The backend the shards run on (`Auto` resolved).
    pub fn backend(&self) -> Backend {
        resolve(self.table.backend_choice())
    }

    /// The device of each shard this process holds (with ranks, its own shard's), checked: at least one shard
    /// and at most 256, device ordinals the backend has (CUDA), and ranks on CUDA, else
    /// [`Error::InvalidConfig`]; [`Error::BackendUnavailable`] for a backend that is not there.
    pub fn shard_devices(&self) -> Result<Vec<usize>> {
        let backend = self.backend();
        let count = device_count(backend);
        if count == 0 {
            return Err(crate::runtime::select::unavailable(backend));
        }
        if let Some(r) = &self.ranks {
            r.check(MAX_SHARDS)?;
            if backend != Backend::Cuda {
                return Err(Error::InvalidConfig(format!(
                    "a table over ranks exchanges through NCCL, on CUDA; not on {backend}"
                )));
            }
            let d = r.device.unwrap_or(r.rank % count);
            if d >= count {
                return Err(Error::InvalidConfig(format!(
                    "rank {} on CUDA device {d}; the driver has {count}",
                    r.rank
                )));
            }
            return Ok(vec![d]);
        }
        let devices = match &self.shards {
            Shards::AllDevices => (0..count).collect(),
            Shards::Devices(d) => d.clone(),
            Shards::Count(n) => (0..*n).map(|i| i % count).collect(),
        };
        if devices.is_empty() || devices.len() > MAX_SHARDS {
            return Err(Error::InvalidConfig(format!(
                "a sharded table has 1..={MAX_SHARDS} shards, not {}",
                devices.len()
            )));
        }
        if backend == Backend::Cuda
            && let Some(&d) = devices.iter().find(|&&d| d >= count)
        {
            return Err(Error::InvalidConfig(format!(
                "shard on CUDA device {d}; the driver has {count}"
            )));
        }
        Ok(devices)
    }

    /// The table config of each of `shards` shards ([`ShardConfig::shard`]).
    pub(crate) fn shard_table(&self, shards: usize, device: usize) -> C {
        self.table.shard(shards, device, self.backend())
    }
}
