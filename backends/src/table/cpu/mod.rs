//! The CPU backend: plain Rust, multi-threaded with rayon, always available.
//!
//! It runs the very same scheme step functions as the GPU tile driver (they are `#[cube]` functions written in
//! plain integer arithmetic, so they are ordinary Rust functions on the host) with the same hash family and
//! the same bucket layout, so a table built here places keys by the same rules as on a GPU.
//!
//! Storage is widened: keys and values are `u64` words in two arrays (`u64::MAX` = empty key), which serves
//! 32- and 64-bit elements alike. Each bucket has a spin lock; a step's memory action (claim, evict, update)
//! runs under the lock of the bucket it touches, and a claim re-checks that its slot is still empty, which gives
//! it compare-and-swap semantics. (Passes of a parallel upsert in which each bucket has a single writer skip
//! the locks: see [`CpuTable::upsert`].) In **deterministic** mode operations run one at a time, in input order, on
//! the calling thread: the placement and the probe counts are then exactly reproducible.
//!
//! The parallel paths were bound by cache misses: a random key cost a bucket of keys, a value and a lock word,
//! each in a different array, one miss after another. Parallel upserts therefore sort the batch by bucket range
//! first ([`CpuTable::upsert`]) so that each thread works inside a slice of the table that its L2 holds (and
//! claims the slots of that slice without locks), and finds run a software pipeline that prefetches the
//! buckets of the keys a few positions ahead (`CpuTable::lookups`), reading buckets with AVX2 / AVX-512
//! compares where the CPU has them. Large arrays sit on transparent huge pages (`Buffer`).

mod engine;
mod find;
mod memory;
mod table;
mod upsert;

pub(crate) use engine::CpuEngine;
pub use memory::{EMPTY_KEY, ERASED_KEY};
pub use table::{CpuTable, key_mix};
