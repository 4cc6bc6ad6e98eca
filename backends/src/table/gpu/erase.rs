//! Tombstone erase on the device ([`crate::table::engine::Engine::erase_stored`] of a [`super::GpuTable`], and
//! [`GpuTable::erase_device`] for device data):
//! each stored key's slot gets a key word that is neither empty nor any key's ([`KeyLayout::ERASED_WORD`]), so
//! lookups probe past it; inserts take it again where [`GpuTable::takes_marks`], or a rebuild reclaims it.

use super::GpuTable;
use crate::device::counters::{ADDED_COUNTERS, count_spread};
use crate::device::find::drive_lookup;
use crate::device::layout::KeyLayout;
use crate::device::operation::{op, reads, status};
use crate::device::shape::{ShapeScalars, meta_of};
use crate::device::write::erase_slot;
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::tile::{EMPTY_WORD, narrow_word, widen_word};
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

/// Bulk erase by plain stores: each lane finds its key (the driver's find, answering the slot) and stores the
/// mark `erased` there with an ordinary write, no compare-and-swap. Only erases run in the launch, so every
/// write to a slot is the same mark (two lanes erasing one key write it twice); the count of pairs erased comes
/// from [`live_kernel`] after it, not from the lanes.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn erase_plain_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    table: &mut Array<L::Word>,
    table_atomic: &Array<Atomic<L::Word>>,
    table_values: &Array<u64>,
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
    let frames = Array::<u32>::new(1usize);
    let a = drive_lookup::<S, L>(
        table_atomic,
        table,
        table_values,
        meta_of(shape),
        key,
        active,
        &frames,
        0u32,
        op::FIND,
        bucket_size,
        tile_width,
        reads::PLAIN,
        false,
        true,
        false,
    );
    if active && a.status == status::FOUND {
        table[a.slot as usize] = narrow_word::<L::Word>(L::ERASED_WORD);
    }
}

/// Counts the slots of `table` that hold a pair (neither empty nor erased) into `count` (the sum of its
/// [`ADDED_COUNTERS`] words): a table's `len` after [`erase_plain_kernel`].
#[cube(launch_unchecked)]
pub fn live_kernel<L: KeyLayout>(table: &Array<L::Word>, count: &Array<Atomic<u32>>) {
    let pos = ABSOLUTE_POS;
    let mut live = 0u32;
    if pos < table.len() {
        let w = widen_word::<L::Word>(table[pos]);
        live = u32::cast_from(w != EMPTY_WORD.runtime() && w != L::ERASED_WORD.runtime());
    }
    count_spread(count, 0u32, live);
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
        Ok(self.erase_marks(keys, n))
    }

    /// Marks the slots of the stored keys among the `n` device keys `keys` erased and returns how many were;
    /// `len()` drops by as many. A batch of at least [`PLAIN_ERASE_SHARE`]-th of the slots stores its marks
    /// plainly ([`erase_plain_kernel()`]) and counts the table's pairs after ([`live_kernel()`]); smaller ones
    /// mark by compare-and-swap and count as they go ([`erase_kernel()`]), where the count over every slot would
    /// cost more than the atomics it saves.
    pub(crate) fn erase_marks(&mut self, keys: &Handle, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let words = ADDED_COUNTERS as usize;
        let count = self.client.empty(words * 4);
        fill_u32(&self.client, &count, words, 0);
        let slots = self.capacity();
        // The count of pairs left is the table's `len` only once every queued insert has been settled.
        let plain = !self.unsettled && n.saturating_mul(PLAIN_ERASE_SHARE) >= slots;
        // SAFETY: indices are bounded by `n` and by the table's shape.
        unsafe {
            if plain {
                // The kernel reads and writes through its plain binding alone: the atomic one is a stand-in
                // where a buffer must not be bound twice (Vulkan).
                let atomic = if self.options.plain_reads {
                    ArrayArg::from_raw_parts(self.keys.clone(), slots)
                } else {
                    ArrayArg::from_raw_parts(self.dummy.clone(), 1)
                };
                erase_plain_kernel::launch_unchecked::<S, L, R>(
                    &self.client,
                    cube_count(n),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(keys.clone(), n),
                    ArrayArg::from_raw_parts(self.keys.clone(), slots),
                    atomic,
                    ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                    self.shape_arg(),
                    self.bucket_size,
                    self.tile_width,
                );
                live_kernel::launch_unchecked::<L, R>(
                    &self.client,
                    cube_count(slots),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(self.keys.clone(), slots),
                    ArrayArg::from_raw_parts(count.clone(), words),
                );
            } else {
                erase_kernel::launch_unchecked::<S, L, R>(
                    &self.client,
                    cube_count(n),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(keys.clone(), n),
                    ArrayArg::from_raw_parts(self.keys.clone(), slots),
                    ArrayArg::from_raw_parts(self.keys.clone(), slots),
                    ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                    ArrayArg::from_raw_parts(count.clone(), words),
                    self.shape_arg(),
                    self.bucket_size,
                    self.tile_width,
                )
            }
        }
        let counted = u32::from_bytes(&self.client.read_one_unchecked(count))
            .iter()
            .map(|&c| c as usize)
            .sum::<usize>();
        // The plain path counted the pairs left, the other the pairs erased.
        let erased_now = if plain {
            self.len.saturating_sub(counted)
        } else {
            counted
        };
        self.len = if plain {
            counted
        } else {
            self.len - erased_now
        };
        self.marks += erased_now;
        self.erased = L::ERASED_WORD;
        erased_now
    }
}

/// A bulk erase of at least `1 / PLAIN_ERASE_SHARE` of a table's slots stores its marks plainly and counts the
/// pairs left after (one read of every slot, about as long as the compare-and-swaps of a quarter of the slots'
/// worth of keys save: random compare-and-swaps run at about two-thirds of a find's rate).
pub const PLAIN_ERASE_SHARE: usize = 4;
