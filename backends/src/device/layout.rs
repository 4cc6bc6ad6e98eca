//! Key layouts: how a GPU table's slots hold its pairs. The insert kernel, the find kernel, the device API's
//! [`super::find::tile_find()`], the duplicate passes and `GpuTable` are each written once,
//! generic over a [`KeyLayout`]; a layout only answers the few questions in which the two differ:
//!
//! - [`Packed`]: a 32-bit key and a 32-bit value in one `u64` slot word `key << 32 | value`. One
//!   compare-and-swap claims a pair and one exchange moves it, so every scheme runs on it, cuckoo evictions
//!   included.
//! - [`Wide`]: keys and values widened to `u64`, in parallel arrays (the BGHT paper's structure of arrays): a
//!   slot's key word is claimed with a compare-and-swap, then the claiming lane stores the value. A pair cannot
//!   move atomically, so the layout serves only stable schemes (`ProbingScheme::STABLE`); an eviction a scheme
//!   asks for becomes a failure, handed back like any other (docs/ARCHITECTURE.md has the plan for moving
//!   wide pairs).
//!
//! Either way the slot's **key word** lives in a `u64` array whose all-ones word marks an empty slot, so the
//! tile's bucket reads and views (`hashtile_core::tile`) serve both unchanged; the key's position in the word
//! is [`KeyLayout::KEY_SHIFT`].

use super::shape::{TableMeta, bucket_of, bucket_of_wide};
use cubecl::prelude::*;
use hashtile_core::hash::key_mix;
use hashtile_core::scheme::BucketView;
use hashtile_core::tile::{
    LaneSlots, TileLane, pack_word, slot_address, slot_word, tile_shuffle, tile_shuffle_u64,
    view_of, word_key, word_value,
};

/// How pairs sit in a table's slots (see the module docs). Implemented by [`Packed`] and [`Wide`].
#[cube]
pub trait KeyLayout: Send + Sync + 'static {
    /// A slot's key word in the table's memory (`u64`, or `u32` for sets of 32-bit keys); kernels hold it widened
    /// in `u64` registers (`hashtile_core::tile::widen_word`).
    type Word: Int;
    /// A key as kernels carry it (and as the host path copies it to the device).
    type Key: Int + hashtile_core::Key;
    /// A value as kernels carry it.
    type Value: Int + hashtile_core::Value;
    /// Bit position of the key in a key word.
    const KEY_SHIFT: u32;
    /// A key word holds the whole pair, so an exchange moves it (cuckoo evictions are possible).
    const MOVES_PAIRS: bool;
    /// Human-readable name (error messages, benchmark labels).
    const NAME: &'static str;
    /// Slots hold values (maps); `false` for the keys-only layouts of sets ([`super::set_layout`]), whose finds
    /// answer presence and value 0.
    const HAS_VALUES: bool;
    /// Bytes of a [`KeyLayout::Word`] (host-side sizes of the slot arrays).
    const WORD_BYTES: usize;
    /// Stash words per pair an insert gives up on (see [`KeyLayout::stash`]).
    const STASH_WORDS: usize;
    /// The key word a static table's erase leaves in a slot: neither empty nor a match for any key the layout
    /// holds (packed pairs: the sentinel key with value 0, which finds never look up; wide slots of 32-bit
    /// keys: all ones minus one, which no 32-bit key widens to).
    const ERASED_WORD: u64;

    /// `false` for the keys no table of the layout stores, which finds therefore never look for: the empty key,
    /// and for layouts whose erased word is a key word of its own (sets), the erased key.
    fn findable(key: Self::Key) -> bool;
    /// The key's mix that seeds its eviction randomness (the CPU backend's `key_mix`, for every width).
    fn key_mix(key: Self::Key) -> u32;
    /// The key's bucket under hash function `i`.
    fn bucket(meta: TableMeta, key: Self::Key, i: u32) -> u32;
    /// The key as the `u64` a view compares with each word's key part.
    fn key_bits(key: Self::Key) -> u64;
    /// The word an insert writes into the key array.
    fn slot_word(key: Self::Key, value: Self::Value) -> u64;
    /// The key of a key word (only for layouts that move pairs: the pair an eviction displaced).
    fn key_of(word: u64) -> Self::Key;
    /// The value of a key word (only for layouts that move pairs).
    fn value_of(word: u64) -> Self::Value;
    /// Lane `src` of this tile's `key` (all lanes must call).
    fn shuffle_key(
        key: Self::Key,
        src: u32,
        tl: TileLane,
        #[comptime] tile_width: u32,
    ) -> Self::Key;
    /// Lane `src` of this tile's `value` (all lanes must call).
    fn shuffle_value(
        value: Self::Value,
        src: u32,
        tl: TileLane,
        #[comptime] tile_width: u32,
    ) -> Self::Value;
    /// Called by the lane whose claim of slot `addr` just succeeded: stores the value where the layout keeps it.
    fn store_value(values: &mut Array<u64>, addr: usize, value: Self::Value);
    /// The value of slot `slot` of `bucket` (just read into `slots`), broadcast to the whole tile; `found` is
    /// true when the tile's key was found there. All lanes must call.
    #[allow(clippy::too_many_arguments)]
    fn tile_value(
        slots: LaneSlots,
        slot: u32,
        bucket: u32,
        found: bool,
        values: &Array<u64>,
        tl: TileLane,
        #[comptime] bucket_size: u32,
        #[comptime] tile_width: u32,
    ) -> Self::Value;
    /// Records the `at`-th pair an insert gave up on in the stash `failed` (dropped when it does not fit:
    /// the count of failures still includes it). `word` is the pair's slot word.
    fn stash(failed: &mut Array<u64>, at: usize, word: u64, key: Self::Key, value: Self::Value);
    /// The key word of an erased slot (tables that delete: the chained store): the all-ones key minus one,
    /// which is never a key.
    fn tomb_word() -> u64;
    /// `true` when a stored key word is a tombstone.
    fn is_tomb(word: u64) -> bool;
    /// The value of a slot whose key word `word` this lane holds, at index `addr` of the key array.
    fn own_value(word: u64, values: &Array<u64>, addr: usize) -> Self::Value;
}

/// 32-bit keys and values packed into one `u64` word per slot (see the module docs).
pub struct Packed;

/// Keys and values widened to `u64` in parallel arrays, for stable schemes (see the module docs).
pub struct Wide;

#[cube]
impl KeyLayout for Packed {
    type Word = u64;
    type Key = u32;
    type Value = u32;
    const KEY_SHIFT: u32 = 32;
    const MOVES_PAIRS: bool = true;
    const NAME: &'static str = "packed 32-bit pairs";
    const WORD_BYTES: usize = 8;
    const HAS_VALUES: bool = true;
    const STASH_WORDS: usize = 1;
    const ERASED_WORD: u64 = 0xffff_ffff_0000_0000;

    fn findable(key: u32) -> bool {
        key != u32::MAX
    }
    fn key_mix(key: u32) -> u32 {
        key_mix(key, 0u32)
    }
    fn bucket(meta: TableMeta, key: u32, i: u32) -> u32 {
        bucket_of(meta, key, i)
    }
    fn key_bits(key: u32) -> u64 {
        key as u64
    }
    fn slot_word(key: u32, value: u32) -> u64 {
        pack_word(key, value)
    }
    fn key_of(word: u64) -> u32 {
        word_key(word)
    }
    fn value_of(word: u64) -> u32 {
        word_value(word)
    }
    fn shuffle_key(key: u32, src: u32, tl: TileLane, #[comptime] tile_width: u32) -> u32 {
        tile_shuffle(key, src, tl, tile_width)
    }
    fn shuffle_value(value: u32, src: u32, tl: TileLane, #[comptime] tile_width: u32) -> u32 {
        tile_shuffle(value, src, tl, tile_width)
    }
    #[allow(unused_variables)]
    fn store_value(values: &mut Array<u64>, addr: usize, value: u32) {
        // The value went in with the key word.
    }
    #[allow(unused_variables)]
    fn tile_value(
        slots: LaneSlots,
        slot: u32,
        bucket: u32,
        found: bool,
        values: &Array<u64>,
        tl: TileLane,
        #[comptime] bucket_size: u32,
        #[comptime] tile_width: u32,
    ) -> u32 {
        // The value is in the slot word the owner lane already holds.
        word_value(slot_word(slots, slot, tl, bucket_size, tile_width))
    }
    // A mutable binding makes the literal a runtime value (what a cube function returns).
    #[allow(unused_mut, clippy::let_and_return)]
    fn tomb_word() -> u64 {
        let mut t = 0xffff_fffe_0000_0000u64;
        t
    }
    fn is_tomb(word: u64) -> bool {
        (word >> 32u64) as u32 == 4294967294u32
    }
    #[allow(unused_variables)]
    fn own_value(word: u64, values: &Array<u64>, addr: usize) -> u32 {
        word_value(word)
    }
    #[allow(unused_variables)]
    fn stash(failed: &mut Array<u64>, at: usize, word: u64, key: u32, value: u32) {
        // One word per pair: the slot word itself.
        if at < failed.len() {
            failed[at] = word;
        }
    }
}

#[cube]
impl KeyLayout for Wide {
    type Word = u64;
    type Key = u64;
    type Value = u64;
    const KEY_SHIFT: u32 = 0;
    const MOVES_PAIRS: bool = false;
    const NAME: &'static str = "wide pairs (parallel u64 arrays)";
    const WORD_BYTES: usize = 8;
    const HAS_VALUES: bool = true;
    const STASH_WORDS: usize = 2;
    const ERASED_WORD: u64 = u64::MAX - 1;

    fn findable(key: u64) -> bool {
        key != u64::MAX
    }
    fn key_mix(key: u64) -> u32 {
        key_mix((key & 0xffff_ffffu64) as u32, (key >> 32u64) as u32)
    }
    fn bucket(meta: TableMeta, key: u64, i: u32) -> u32 {
        bucket_of_wide(meta, key, i)
    }
    fn key_bits(key: u64) -> u64 {
        key
    }
    #[allow(unused_variables)]
    fn slot_word(key: u64, value: u64) -> u64 {
        key
    }
    fn key_of(word: u64) -> u64 {
        word
    }
    #[allow(unused_variables)]
    fn value_of(word: u64) -> u64 {
        // Never called: the layout does not move pairs.
        u64::new(0)
    }
    fn shuffle_key(key: u64, src: u32, tl: TileLane, #[comptime] tile_width: u32) -> u64 {
        tile_shuffle_u64(key, src, tl, tile_width)
    }
    fn shuffle_value(value: u64, src: u32, tl: TileLane, #[comptime] tile_width: u32) -> u64 {
        tile_shuffle_u64(value, src, tl, tile_width)
    }
    fn store_value(values: &mut Array<u64>, addr: usize, value: u64) {
        values[addr] = value;
    }
    #[allow(unused_variables)]
    fn tile_value(
        slots: LaneSlots,
        slot: u32,
        bucket: u32,
        found: bool,
        values: &Array<u64>,
        tl: TileLane,
        #[comptime] bucket_size: u32,
        #[comptime] tile_width: u32,
    ) -> u64 {
        // The owner lane of the slot reads the value array; one shuffle hands it to the tile.
        let owner = slot % tile_width;
        let mut v = u64::new(0);
        if found && tl.lane == owner {
            v = values[slot_address(bucket, slot, bucket_size)];
        }
        tile_shuffle_u64(v, owner, tl, tile_width)
    }
    // A mutable binding makes the literal a runtime value (what a cube function returns).
    #[allow(unused_mut, clippy::let_and_return)]
    fn tomb_word() -> u64 {
        let mut t = 0xffff_ffff_ffff_fffeu64;
        t
    }
    fn is_tomb(word: u64) -> bool {
        word == 0xffff_ffff_ffff_fffeu64
    }
    #[allow(unused_variables)]
    fn own_value(word: u64, values: &Array<u64>, addr: usize) -> u64 {
        values[addr]
    }
    #[allow(unused_variables)]
    fn stash(failed: &mut Array<u64>, at: usize, word: u64, key: u64, value: u64) {
        // Two words per pair: the key and the value.
        if 2 * at + 1 < failed.len() {
            failed[2 * at] = key;
            failed[2 * at + 1] = value;
        }
    }
}

/// The [`BucketView`] of the slots just read for `key`, wherever layout `L` keeps the key in its words.
#[cube]
pub fn key_view<L: KeyLayout>(
    slots: LaneSlots,
    key: L::Key,
    tl: TileLane,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) -> BucketView {
    view_of(
        slots,
        L::key_bits(key),
        L::KEY_SHIFT,
        tl,
        bucket_size,
        tile_width,
    )
}

/// A stored slot's pair, widened: from its key word alone when the layout packs the value in (`value` is then
/// `None`), else from the key word and the value word.
pub(crate) fn decode_slot<L: KeyLayout>(word: u64, value: Option<u64>) -> (u64, u64) {
    if !L::HAS_VALUES {
        (word, 0)
    } else if L::MOVES_PAIRS {
        (word >> L::KEY_SHIFT, word & 0xffff_ffff)
    } else {
        (word, value.expect("the value array was read"))
    }
}

/// The pairs of a stash read back (`words`, [`KeyLayout::STASH_WORDS`] per pair), widened.
pub(crate) fn decode_stash<L: KeyLayout>(words: &[u64], pairs: usize) -> Vec<(u64, u64)> {
    if L::STASH_WORDS == 1 {
        words[..pairs]
            .iter()
            .map(|&w| decode_slot::<L>(w, None))
            .collect()
    } else {
        words[..2 * pairs].chunks(2).map(|w| (w[0], w[1])).collect()
    }
}
