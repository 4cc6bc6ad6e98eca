//! Tombstone erase on the device ([`crate::table::engine::Engine::erase_stored`] of a [`super::GpuTable`]):
//! each stored key's slot gets a key word that is neither empty nor any key's ([`erased_word`]), so lookups
//! probe past it and inserts do not reuse it until the table is rebuilt.

use crate::device::find::tile_find_at;
use crate::device::layout::KeyLayout;
use crate::device::shape::{ShapeScalars, meta_of};
use cubecl::prelude::*;
use hashtile_core::scheme::ProbingScheme;

/// The key word an erase writes into a slot of layout `L`: neither empty nor a match for any key it can
/// hold. Packed pairs: the sentinel key with value 0 (only a lookup of the sentinel key
/// itself could match it, and tables answer those as absent); wide slots of 32-bit keys: all ones
/// minus one, which no 32-bit key widens to.
pub fn erased_word<L: KeyLayout>() -> u64 {
    if L::MOVES_PAIRS {
        0xffff_ffff_0000_0000
    } else {
        u64::MAX - 1
    }
}

/// Tombstone erase: the slot of each stored key of `keys` gets the key word `erased` ([`erased_word`]), and
/// `count[0]` counts them. All lanes of every plane run the cooperative find; the mark is a compare-and-swap
/// from the word the find read (`table_atomic`: the same buffer as `table`), so that of two lanes erasing the
/// same key (a batch with repeats) one counts. Safe beside concurrent lookups of other keys: for them the slot
/// goes from one word that does not match to another.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn erase_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    table: &Array<u64>,
    table_atomic: &Array<Atomic<u64>>,
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
        let seen = L::slot_word(key, r.value);
        if table_atomic[r.slot as usize].compare_exchange_weak(seen, erased) == seen {
            count[0].fetch_add(1u32);
        }
    }
}
