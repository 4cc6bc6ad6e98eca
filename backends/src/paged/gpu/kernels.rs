//! The paging kernels: [`route_child()`] is the route directory's lookup, on the device. (Children rebuild and
//! split from their own slots through the static table's device rebuild, `table::gpu::rebuild`.)

use crate::device::layout::KeyLayout;
use cubecl::prelude::*;
use hashtile_core::hash::route_hash;

/// The child of a key under the route directory (`paged::route::Directory::child_of`, on the device).
#[cube]
pub fn route_child<L: KeyLayout>(key: L::Key, entries: &Array<u32>, seed: u64, depth: u32) -> u32 {
    let h = route_hash(L::key_bits(key), seed);
    let mut e = 0u64;
    if depth > 0u32 {
        e = h >> u64::cast_from(64u32 - depth);
    }
    entries[e as usize]
}
