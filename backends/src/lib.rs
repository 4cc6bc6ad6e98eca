//! # hashtile-backends
//!
//! Runs the schemes of `hashtile-probing` on a device:
//!
//! - [`cpu`]: plain Rust, multi-threaded (rayon), always available; a deterministic sequential mode gives
//!   exactly reproducible placement and probe counts.
//! - [`gpu`]: CUDA (feature `cuda`) and Vulkan (feature `vulkan`) through CubeCL; [`gpu::GpuTable`] also
//!   takes device-resident buffers and exposes the device API for your own kernels.
//! - [`HashTable`]: the typed host API over any of them, with [`BackendChoice::Auto`] selection.
//! - [`chained`]: dynamic tables by slab-list chaining (SlabHash): multimap and unique inserts, erase,
//!   `find_all`, flush, mixed batches.
//! - [`csr`]: static CSR tables (HashGraph): multimap builds by count / prefix sum / place, `find_all`, joins.
//! - [`paged`]: tables larger than device memory (Starfish): child tables of any static scheme, paged within a
//!   device budget, with confined rebuilds and growth.

pub mod chained;
pub mod cpu;
pub mod csr;
mod engine;
pub mod gpu;
mod gpu_engine;
pub mod paged;
pub mod select;
pub mod table;

pub use engine::{
    Engine, FramedCounts, FramedUpsert, Inserted, Rebuilt, RouteMap, RoutedBatch, Router,
    SplitSpec, Upserted,
};
pub use gpu::transfer::PinnedBuffer;
pub use select::{Backend, BackendChoice, is_available, resolve};
pub use table::{DEFAULT_SEED, HashTable, TableConfig, default_bucket_size_of};
