//! Tombstone erase on the device ([`crate::table::engine::Engine::erase_stored`] of a [`super::GpuTable`], and
//! [`GpuTable::erase_device`] for device data):
//! each stored key's slot gets a key word that is neither empty nor any key's ([`KeyLayout::ERASED_WORD`]), so
//! lookups probe past it; inserts take it again where [`GpuTable::takes_marks`], or a rebuild reclaims it.

use super::GpuTable;
use crate::device::counters::{ADDED_COUNTERS, count_spread};
use crate::device::layout::KeyLayout;
use crate::device::shape::{ShapeScalars, meta_of};
use crate::device::write::erase_slot;
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::{Error, Result};

/// Tombstone erase: the slot of each stored key of `keys` gets the key word `erased` ([`KeyLayout::ERASED_WORD`])
/// by the device API's erase (`device::write::erase_slot`: of two lanes erasing one key, one marks it), and `count` counts
/// them (the sum of its [`ADDED_COUNTERS`] words).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn erase_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    table: &Array<L::Word>,
    table_atomic: &Array<Atomic<L::Word>>,
    table_values: &Array<u64>,
    count: &Array<Atomic<u32>>,
    shape: &ShapeScalars,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) {
    let pos = ABSOLUTE_POS;
    let active = pos < keys.len();
    let mut key = L::Key::new(0);
    if active {
        key = keys[pos];
    }
    let hit = erase_slot::<S, L>(
        table_atomic,
        table,
        table_values,
        meta_of(shape),
        key,
        active,
        bucket_size,
        tile_width,
        true,
    );
    count_spread(count, 0u32, u32::cast_from(hit));
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Erases the `n` keys already on the device (`keys`: the layout's key type) and returns how many pairs went
    /// (repeats, absent keys and the sentinel erase nothing more). Slots are marked erased in place: lookups probe
    /// past them, and inserts take them again where [`GpuTable::takes_marks`] (else a rebuild reclaims them:
    /// `HashTable::compact` does that for its tables). Packed pairs or keys alone, and a scheme that is stable or
    /// whose inserts take marks ([`Error::InvalidConfig`] otherwise): a cuckoo eviction would otherwise carry a
    /// mark on as a pair, and 64-bit key words of wide pairs have no value to spare for one.
    pub fn erase_device(&mut self, keys: &Handle, n: usize) -> Result<usize> {
        if !L::MOVES_PAIRS || !(S::STABLE || self.takes_marks()) {
            return Err(Error::InvalidConfig(
                "erase_device: packed pairs or keys alone (64-bit keys of wide pairs have no word to spare), \
                 and a cuckoo table claiming by compare-and-swap (its inserts then take the marks); use \
                 HashTable::erase"
                    .into(),
            ));
        }
        match self.ranges_for(n, false) {
            Some(ranges) => {
                let (keys, _) = self.order_batch((keys, keys, n), ranges, false);
                Ok(self.erase_marks(&keys, n))
            }
            None => Ok(self.erase_marks(keys, n)),
        }
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
        let erased = L::ERASED_WORD;
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
                self.bucket_size,
                self.tile_width,
            )
        }
        let erased_now = u32::from_bytes(&self.client.read_one_unchecked(count))
            .iter()
            .map(|&c| c as usize)
            .sum::<usize>();
        self.len -= erased_now;
        self.marks += erased_now;
        self.erased = erased;
        erased_now
    }
}
