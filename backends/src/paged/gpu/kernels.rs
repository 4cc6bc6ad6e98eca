//! The paging kernels. [`unpack_slots_kernel()`] rebuilds a child from its own slots on the device (paged tables'
//! confined rebuilds and splits): the slots are unpacked into key and value arrays with a mask, the table is
//! emptied and re-seeded, and the insert kernel re-inserts the masked pairs; no pair crosses the bus.
//! [`route_child()`] is the route directory's lookup, on the device.

use crate::device::layout::KeyLayout;
use cubecl::prelude::*;
use hashtile_core::hash::route_hash;
use hashtile_core::tile::EMPTY_WORD;

/// Unpacks slot `i` of a table into `keys[i]`, `values[i]` and `mask[i]`: 0 for an empty or erased slot (key
/// word `erased`; `EMPTY_WORD` when the table has no erased slots), else 1, or 2 when `split` is on and the
/// key's route bit `63 - depth` is set (it moves to the split's new table).
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn unpack_slots_kernel<L: KeyLayout>(
    slots: &Array<u64>,
    slot_values: &Array<u64>,
    keys: &mut Array<L::Key>,
    values: &mut Array<L::Value>,
    mask: &mut Array<u32>,
    seed: u64,
    depth: u32,
    erased: u64,
    #[comptime] split: bool,
) {
    let i = ABSOLUTE_POS;
    if i < slots.len() {
        let w = slots[i];
        let mut m = 0u32;
        if w != EMPTY_WORD && w != erased {
            let k = L::key_of(w);
            keys[i] = k;
            values[i] = L::own_value(w, slot_values, i);
            m = 1u32;
            if comptime!(split) {
                let shift = u64::cast_from(63u32 - depth);
                let bit = (route_hash(L::key_bits(k), seed) >> shift) & 1u64;
                m += u32::cast_from(bit);
            }
        }
        mask[i] = m;
    }
}

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
