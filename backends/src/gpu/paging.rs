//! Rebuilding a table from its own slots on the device (paged tables' confined rebuilds and splits): the
//! slots are unpacked into key and value arrays with a mask, the table is emptied and re-seeded, and the insert
//! kernel re-inserts the masked pairs. No pair crosses the bus.

use super::layout::KeyLayout;
use cubecl::prelude::*;
use hashtile_core::tile::EMPTY_WORD;

/// The route hash of a key (`paged::route::route_hash`, the splitmix64 finaliser of `key ^ seed`), on the
/// device.
#[cube]
pub fn route_hash(key: u64, seed: u64) -> u64 {
    let mut z = key ^ seed;
    z = (z ^ (z >> 30u64)) * 0xbf58_476d_1ce4_e5b9u64;
    z = (z ^ (z >> 27u64)) * 0x94d0_49bb_1331_11ebu64;
    z ^ (z >> 31u64)
}

/// Unpacks slot `i` of a table into `keys[i]`, `values[i]` and `mask[i]`: 0 for an empty slot, else 1, or 2
/// when `split` is on and the key's route bit `63 - depth` is set (it moves to the split's new table).
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
    #[comptime] split: bool,
) {
    let i = ABSOLUTE_POS;
    if i < slots.len() {
        let w = slots[i];
        let mut m = 0u32;
        if w != EMPTY_WORD {
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
