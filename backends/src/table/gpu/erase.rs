//! Tombstone erase on the device ([`crate::table::engine::Engine::erase_stored`] of a [`super::GpuTable`], and
//! [`GpuTable::erase_device`] for device data):
//! each stored key's slot gets a key word that is neither empty nor any key's ([`erased_word`]), so lookups
//! probe past it and inserts do not reuse it until the table is rebuilt.

use super::GpuTable;
use super::kernels::ADDED_COUNTERS;
use crate::device::find::tile_find_at;
use crate::device::layout::KeyLayout;
use crate::device::shape::{ShapeScalars, meta_of};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::{Error, Result};

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
/// `count` counts them (the sum of its words: one atomic per plane, spread by cube). All lanes of every plane
/// run the cooperative find; the mark is a compare-and-swap from the word the find read (`table_atomic`: the
/// same buffer as `table`), so that of two lanes erasing the same key (a batch with repeats) one counts. Safe beside concurrent lookups of other keys: for them the slot
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
    let mut hit = 0u32;
    if active && r.found == 1u32 {
        let seen = L::slot_word(key, r.value);
        if table_atomic[r.slot as usize].compare_exchange_weak(seen, erased) == seen {
            hit = 1u32;
        }
    }
    // One atomic per plane into spread-out counters: one counter for every erased key serialised a batch of
    // 2^25 erases at 6 G keys/s whatever the scheme (H200).
    let total = plane_sum(hit);
    if UNIT_POS_PLANE == 0u32 && total > 0u32 {
        count[(CUBE_POS_X % count.len() as u32) as usize].fetch_add(total);
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Erases the `n` keys already on the device (`keys`: the layout's key type) and returns how many pairs went
    /// (repeats, absent keys and the sentinel erase nothing more). Slots are marked erased in place: lookups probe
    /// past them and inserts do not reuse them until the table is rebuilt (`HashTable::compact` does that for
    /// its tables). Packed pairs of a stable scheme only ([`Error::InvalidConfig`] otherwise): a cuckoo eviction
    /// would carry a mark on as a pair, and 64-bit key words have no value to spare for one.
    pub fn erase_device(&mut self, keys: &Handle, n: usize) -> Result<usize> {
        if !S::STABLE || !L::MOVES_PAIRS {
            return Err(Error::InvalidConfig(
                "erase_device: packed pairs of a stable scheme only (a cuckoo eviction would carry a mark on; \
                 64-bit keys have no word to spare); use HashTable::erase"
                    .into(),
            ));
        }
        Ok(self.erase_marks(keys, n))
    }

    /// Marks the slots of the stored keys among the `n` device keys `keys` erased (see [`erase_kernel()`]) and
    /// returns how many were; `len()` drops by as many.
    pub(crate) fn erase_marks(&mut self, keys: &Handle, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let words = ADDED_COUNTERS as usize;
        let count = self.client.empty(words * 4);
        fill_u32(&self.client, &count, words, 0);
        let erased = erased_word::<L>();
        // SAFETY: indices are bounded by `n` and by the table's shape.
        unsafe {
            erase_kernel::launch_unchecked::<S, L, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(self.keys.clone(), self.capacity()),
                ArrayArg::from_raw_parts(self.keys.clone(), self.capacity()),
                ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                ArrayArg::from_raw_parts(count.clone(), words),
                self.shape_arg(),
                erased,
                self.bucket_size,
                self.tile_width,
            )
        }
        let erased_now = u32::from_bytes(&self.client.read_one_unchecked(count))
            .iter()
            .map(|&c| c as usize)
            .sum::<usize>();
        self.len -= erased_now;
        self.erased = erased;
        erased_now
    }
}
