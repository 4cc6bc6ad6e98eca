//! What chained tables are built with and speak in: [`ChainedConfig`], the slab's size, the operations of a
//! mixed batch ([`Op`](crate::results::Op), [`Outcome`](crate::results::Outcome)) and what a table holds ([`ChainStats`]).

use crate::runtime::select::BackendChoice;

/// Slots per slab: a slab is read as 16 words, 15 pairs and the link (SlabHash's 128-byte slab of 32-bit pairs).
pub const SLAB_SLOTS: usize = 15;

/// An insert found the pool empty: the batch grows the pool and runs it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedSlab;

/// What a chained table holds, from `ChainedTable::check`.
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

/// How to build a `ChainedTable`.
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
    /// Which device of the backend (ordinal; default 0, ignored on the CPU): a sharded table's shards each take
    /// their own.
    pub device: usize,
    /// Keys per device batch of a GPU store's host calls (`None`: the default, 2^26; larger calls run as
    /// consecutive device batches, bounding the device memory of one call), copied in chunks of half that.
    /// Small values are for tests of the batch and chunk boundaries. The CPU store ignores it.
    pub batch_keys: Option<usize>,
}

impl ChainedConfig {
    /// Lists for `n` keys at `load` keys per base-slab slot (SlabHash's knob: 0.6 leaves most lists one slab
    /// long), and a pool of a quarter of the buckets.
    pub fn for_keys(n: usize, load: f64) -> Self {
        let buckets = ((n as f64 / (load.max(1e-3) * SLAB_SLOTS as f64)).ceil() as u32).max(1);
        Self {
            buckets,
            pool_slabs: buckets.div_ceil(4).max(32),
            seed: hashtile_core::hash::DEFAULT_SEED,
            backend: BackendChoice::Auto,
            device: 0,
            batch_keys: None,
        }
    }

    /// The same configuration on `backend`.
    pub fn backend(mut self, backend: BackendChoice) -> Self {
        self.backend = backend;
        self
    }

    /// The same configuration on device `ordinal` of its backend ([`ChainedConfig::device`]).
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = ordinal;
        self
    }

    /// The same configuration with device batches of `keys` keys (see [`ChainedConfig::batch_keys`]).
    pub fn batch_keys(mut self, keys: usize) -> Self {
        self.batch_keys = Some(keys);
        self
    }

    /// The same configuration with `pool_slabs` free slabs at the start.
    pub fn pool_slabs(mut self, pool_slabs: u32) -> Self {
        self.pool_slabs = pool_slabs;
        self
    }
}
