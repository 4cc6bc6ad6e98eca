//! # hashtile
//!
//! GPU hash tables for Rust, after the BGHT paper: a **probing scheme** (pure placement rules, no GPU code) is
//! separated from a **tile-cooperative bucket** written once in CubeCL, so any scheme x bucket size runs on
//! CUDA, Vulkan, or the always-available CPU backend.
//!
//! ```
//! use hashtile::{Backend, BackendChoice, Bcht, HashTable, TableConfig};
//!
//! // 10 000 keys at load factor 0.9, buckets of 16 slots, on the CPU backend.
//! let cfg = TableConfig::for_keys(10_000, 0.9).backend(BackendChoice::Exactly(Backend::Cpu));
//! let mut table: HashTable<Bcht, u32, u32> = HashTable::new(cfg)?;
//! let keys: Vec<u32> = (0..10_000).collect();
//! let values: Vec<u32> = keys.iter().map(|k| k * 2).collect();
//! table.insert(&keys, &values)?;
//! assert_eq!(table.find(&[21, 20_000])?, vec![Some(42), None]);
//! assert!(table.load_factor() > 0.89);
//!
//! // The all-ones key is the empty sentinel: rejected, and the table is unchanged (`TableConfig::reserved_key`
//! // reserves another value instead).
//! assert!(matches!(table.insert(&[u32::MAX], &[1]), Err(hashtile::Error::SentinelKey { index: 0 })));
//! # Ok::<(), hashtile::Error>(())
//! ```
//!
//! Crates: `hashtile-core` (traits, hash family, tile bucket), `hashtile-probing` (schemes),
//! `hashtile-backends` (CPU, CUDA, Vulkan). This crate re-exports what a user needs.

pub use hashtile_backends::chained::{ChainedConfig, ChainedTable};
pub use hashtile_backends::csr::{CsrBuild, CsrConfig, CsrJoin, CsrTable, JoinMethod};
pub use hashtile_backends::paged::{
    DeviceBudget, PagedConfig, PagedTable, PagingStats, Placement, Replacement,
};
pub use hashtile_backends::results::{FindAll, Op, Outcome};
pub use hashtile_backends::{
    Backend, BackendChoice, DEFAULT_SEED, DevicePhases, Engine, HashSet, HashTable, KernelCache,
    PinnedBuffer, Ranks, Rendezvous, ShardConfig, ShardedChainedTable, ShardedConfig,
    ShardedCsrJoin, ShardedCsrTable, ShardedSet, ShardedTable, Shards, TableConfig, Transport,
    chained, cpu, csr, default_bucket_size_of, device_count, gpu, is_available, kernel_cache_dir,
    paged, resolve, set_kernel_cache, sharded,
};
pub use hashtile_core::scheme::{ProbingScheme, SchemeInfo, SchemeParams};
pub use hashtile_core::{
    Element, Error, HashFamily, Key, ProbeStats, Result, Value, element, element_newtype, hash,
    reduce, scheme, tile,
};
pub use hashtile_probing::{
    Bcht, Chain, Cht1, DoubleHashing, Iht, LinearProbing, NoEvictions, P2bht,
};

pub use hashtile_macros::{
    assert_instance, for_each_bucket_size, for_each_instance, for_each_scheme_and_size,
};

/// Invalid scheme / bucket-size combinations are rejected at compile time:
///
/// ```compile_fail
/// hashtile::assert_instance!(hashtile::Cht1, 16); // 1CHT has one-slot buckets only
/// ```
///
/// while valid ones compile:
///
/// ```
/// hashtile::assert_instance!(hashtile::Cht1, 1);
/// hashtile::assert_instance!(hashtile::Iht, 32);
/// ```
pub mod instances {}

/// Re-export of the CubeCL version hashtile is built against, for writing kernels that call the device API.
pub use cubecl;
