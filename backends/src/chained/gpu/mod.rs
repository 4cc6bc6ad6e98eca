//! The GPU store of chained (SlabHash) tables (issue 10), behind `ChainedTable` for every key and value width:
//! one device function ([`chained_tile_op()`]) serves every operation, a thread per operation, each tile serving
//! its lanes' operations one after another (warp-cooperative work sharing); the batch kernel
//! ([`chained_kernel()`]) and users' kernels call it. Tested against the CPU store (`tests/tests/chained.rs`).
//!
//! **Layout.** One slab array of `u64` words, 16 per slab: slots 0..15 hold key words and word 15 the link
//! (`NO_NEXT` in its low half: none; all ones until linked). Slab `b < buckets` is bucket `b`'s head; pool slab
//! `p` is slab `buckets + p`. The key layout `L` says what a key word is: `Packed`, a 32-bit pair
//! `key << 32 | value` (all ones: empty, key `u32::MAX - 1`: tombstone); `Wide`, a 64-bit key (all ones minus
//! one: tombstone) whose value sits in a second array at the same index. A tile of 8 lanes (two slab words
//! each; 16 by choice) reads a slab as one bucket (`read_slots` at bucket size 16) and the chaining scheme
//! (`hashtile_probing::Chain`) decides each step from the view, as the static drivers do.
//!
//! **Allocation** ([`SlabAllocator`]). By default a bitmap of pool slabs: a tile's lane 0 reads one word
//! (chosen by a hash of the operation), takes a clear bit with one atomic OR, and moves to the next word only
//! when its word is full; or SlabAlloc's resident blocks, a block of the bitmap held in the tile's lanes. The
//! tile links the slab with one compare-and-swap on the tail's link word, and frees the slab again if another
//! tile linked first. An operation that finds no free slab is recorded in a retry list. The host grows the
//! pool (a larger array, the old slabs copied; indices stay valid) and runs the recorded operations again.

mod alloc;
mod front;
mod host;
mod kernel;
mod ops;
mod store;

pub use crate::device::slab::{ResidentBlock, resident_block};
pub use alloc::SlabAllocator;
pub(crate) use front::{DeviceChained, StoreSpec, device_chained};
pub use kernel::*;
pub use ops::ChainedDeviceRef;
pub use store::{GpuChained, QueueStats};
