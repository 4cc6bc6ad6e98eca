//! # hashtile-backends
//!
//! Runs the schemes of `hashtile-probing` on a device. Layers point down only:
//!
//! - containers and their families: [`table`] (static open addressing: [`HashTable`] over the CPU engine and
//!   [`gpu::GpuTable`], behind the static table's [`Engine`]), [`paged`] (Starfish: tables larger than device
//!   memory, children of any static scheme, each a static table wrapped with its residency: the paging
//!   protocol is the paged table's own), [`chained`] (SlabHash: slab-list chaining), [`csr`] (HashGraph:
//!   static CSR multimaps and joins), [`sharded`] (one map over shards on several devices, each a static
//!   table);
//! - the shared device layer, [`device`]: the `#[cube]` table shape, key layouts and the device API;
//! - the shared runtime layer, [`runtime`]: launch helpers, host transfers and pinned memory, the one runtime
//!   dispatch, device scans;
//! - [`select`] (backend choice and availability) and [`results`] (shared result shapes).
//!
//! [`gpu`] and [`cpu`] gather the GPU and CPU engines' public names in one place for users.

pub mod chained;
pub mod csr;
pub mod device;
pub mod paged;
pub mod results;
pub mod runtime;
pub use runtime::select;
pub mod sharded;
pub mod table;

/// The GPU engines and the device API, gathered for users: `GpuTable` (device-resident calls), key layouts,
/// pinned transfers, and the functions your own CubeCL kernels call (`device_api`). Nothing here is defined
/// here: each name lives in its layer.
pub mod gpu {
    pub use crate::device::layout::{KeyLayout, Packed, Wide};
    pub use crate::device::set_layout::{Keys32, Keys64};
    pub use crate::runtime::dispatch::measure_copy_ceiling;
    #[doc(hidden)]
    pub use crate::runtime::launch;
    pub use crate::runtime::{scan, transfer};
    pub use crate::select::{cuda_available, vulkan_available, vulkan_hardware_available};
    pub use crate::table::gpu::ordered::{
        AUTO_TABLE_BYTES, MIN_ORDERED, RANGE_BYTES, auto_range_bits,
    };
    pub use crate::table::gpu::{
        Binning, DeviceRef, DeviceWriter, GpuOptions, GpuTable, RangeOrder, Unplaced,
    };

    /// Table operations callable from your own CubeCL kernels.
    pub mod device_api {
        pub use crate::device::driver::{op, status};
        pub use crate::device::find::{FindResult, FoundAt, tile_find, tile_find_at};
        pub use crate::device::merge::{Merged, merge_copies};
        pub use crate::device::probe::{FRAME_DESC_WORDS, probe_bucket};
        pub use crate::device::shape::{
            SHAPE_WORDS, ShapeScalars, TableMeta, bucket_of, bucket_of_wide, load_meta, meta_of,
        };
        pub use crate::device::write::{
            tile_contains, tile_erase, tile_get, tile_insert_or_apply, tile_insert_or_assign,
        };
    }

    #[doc(hidden)]
    pub use crate::chained::gpu as chained;
    #[doc(hidden)]
    pub use crate::csr::gpu as csr;
    #[doc(hidden)]
    pub use crate::table::gpu::{kernels, upsert};
}

/// The CPU engine (plain Rust, multi-threaded), for users who want it without a [`HashTable`].
pub mod cpu {
    pub use crate::table::cpu::*;
}

#[doc(hidden)]
pub use paged::protocol::{
    FramedCounts, FramedUpsert, PagedChild, Rebuilt, RouteMap, RoutedBatch, Router, SplitSpec,
    Upserted,
};
pub use runtime::kernel_cache::{KernelCache, kernel_cache_dir, set_kernel_cache};
pub use runtime::transfer::PinnedBuffer;
pub use select::{Backend, BackendChoice, device_count, is_available, resolve};
pub use sharded::config::{ShardConfig, ShardedConfig, Shards};
pub use sharded::ranks::{Ranks, Rendezvous};
pub use sharded::{
    DevicePhases, ShardedChainedTable, ShardedCsrJoin, ShardedCsrTable, ShardedSet, ShardedTable,
    Transport,
};
pub use table::engine::{Engine, Inserted};
pub use table::{DEFAULT_SEED, HashSet, HashTable, TableConfig, default_bucket_size_of};
