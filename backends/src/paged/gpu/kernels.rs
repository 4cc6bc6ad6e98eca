//! Rebuilding a table from its own slots on the device (paged tables' confined rebuilds and splits): the
//! slots are unpacked into key and value arrays with a mask, the table is emptied and re-seeded, and the insert
//! kernel re-inserts the masked pairs. No pair crosses the bus.

use crate::device::find::tile_find_at;
use crate::device::layout::KeyLayout;
use crate::device::shape::{ShapeScalars, meta_of};
use cubecl::prelude::*;
use hashtile_core::hash::route_hash;
use hashtile_core::scheme::ProbingScheme;
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

/// The key word an erase writes into a slot of layout `L` (`GpuTable::erase_stored`): neither empty nor a match
/// for any key it can hold. Packed pairs: the sentinel key with value 0 (only a lookup of the sentinel key
/// itself could match it, and paged tables answer those as absent); wide slots of 32-bit keys: all ones
/// minus one, which no 32-bit key widens to.
pub fn erased_word<L: KeyLayout>() -> u64 {
    if L::MOVES_PAIRS {
        0xffff_ffff_0000_0000
    } else {
        u64::MAX - 1
    }
}

/// Tombstone erase: the slot of each stored key of `keys` (distinct keys) gets the key word `erased`
/// ([`erased_word`]), and `count[0]` counts them. All lanes of every plane run the cooperative find. Safe beside
/// concurrent lookups of other keys: for them the slot goes from one word that does not match to another.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn erase_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    table: &mut Array<u64>,
    table_values: &Array<u64>,
    count: &Array<Atomic<u32>>,
    shape: &ShapeScalars,
    erased: u64,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) {
    let meta = meta_of(shape);
    let pos = ABSOLUTE_POS;
    let mut active = false;
    let mut key = L::Key::new(0);
    if pos < keys.len() {
        key = keys[pos];
        active = true;
    }
    let r = tile_find_at::<S, L>(
        table,
        table_values,
        meta,
        key,
        active,
        bucket_size,
        tile_width,
        false,
        true,
    );
    if active && r.found == 1u32 {
        table[r.slot as usize] = erased;
        count[0].fetch_add(1u32);
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
