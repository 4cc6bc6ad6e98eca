//! The keys-only layouts of sets: a slot is a key word and nothing else, so a set's table takes half the bytes
//! of a packed map's (32-bit keys: one `u32` word per slot) and a 64-bit set keeps its keys in one array.
//!
//! The word is the whole element, so an exchange moves it: every scheme runs on both, cuckoo evictions
//! included. Finds answer presence (value 0). An erased slot holds the **erased key** (all ones minus one), a
//! key word of its own: a set reserves it beside the empty key (all ones), as cuCollections' sets take an
//! erased sentinel, and finds never look it up ([`KeyLayout::findable`]).

use super::layout::{KeyLayout, Packed, Wide};
use super::shape::TableMeta;
use cubecl::prelude::*;
use hashtile_core::tile::{LaneSlots, TileLane};

/// 32-bit keys alone, one `u32` word per slot (see the module docs).
pub struct Keys32;

/// 64-bit keys alone, one `u64` word per slot (see the module docs).
pub struct Keys64;

/// The erased key of a [`Keys32`] set.
pub const ERASED_KEY32: u32 = u32::MAX - 1;
/// The erased key of a [`Keys64`] set.
pub const ERASED_KEY64: u64 = u64::MAX - 1;

#[cube]
impl KeyLayout for Keys32 {
    type Word = u32;
    type Key = u32;
    type Value = u32;
    const KEY_SHIFT: u32 = 0;
    const MOVES_PAIRS: bool = true;
    const NAME: &'static str = "32-bit keys (sets)";
    const WORD_BYTES: usize = 4;
    const HAS_VALUES: bool = false;
    const STASH_WORDS: usize = 1;
    const ERASED_WORD: u64 = ERASED_KEY32 as u64;

    fn findable(key: u32) -> bool {
        key < 4294967294u32
    }
    // Keys hash, place and move as a packed map's keys do.
    fn key_mix(key: u32) -> u32 {
        Packed::key_mix(key)
    }
    fn bucket(meta: TableMeta, key: u32, i: u32) -> u32 {
        Packed::bucket(meta, key, i)
    }
    fn key_bits(key: u32) -> u64 {
        key as u64
    }
    #[allow(unused_variables)]
    fn slot_word(key: u32, value: u32) -> u64 {
        key as u64
    }
    fn key_of(word: u64) -> u32 {
        word as u32
    }
    #[allow(unused_variables)]
    fn value_of(word: u64) -> u32 {
        u32::new(0)
    }
    fn shuffle_key(key: u32, src: u32, tl: TileLane, #[comptime] tile_width: u32) -> u32 {
        Packed::shuffle_key(key, src, tl, tile_width)
    }
    #[allow(unused_variables)]
    fn shuffle_value(value: u32, src: u32, tl: TileLane, #[comptime] tile_width: u32) -> u32 {
        // Sets carry no values.
        u32::new(0)
    }
    #[allow(unused_variables)]
    fn store_value(values: &mut Array<u64>, addr: usize, value: u32) {}
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
        u32::new(0)
    }
    // A mutable binding makes the literal a runtime value (what a cube function returns).
    #[allow(unused_mut, clippy::let_and_return)]
    fn tomb_word() -> u64 {
        let mut t = 4294967294u64;
        t
    }
    fn is_tomb(word: u64) -> bool {
        word == 4294967294u64
    }
    #[allow(unused_variables)]
    fn own_value(word: u64, values: &Array<u64>, addr: usize) -> u32 {
        u32::new(0)
    }
    #[allow(unused_variables)]
    fn stash(failed: &mut Array<u64>, at: usize, word: u64, key: u32, value: u32) {
        if at < failed.len() {
            failed[at] = word;
        }
    }
}

#[cube]
impl KeyLayout for Keys64 {
    type Word = u64;
    type Key = u64;
    type Value = u32;
    const KEY_SHIFT: u32 = 0;
    const MOVES_PAIRS: bool = true;
    const NAME: &'static str = "64-bit keys (sets)";
    const WORD_BYTES: usize = 8;
    const HAS_VALUES: bool = false;
    const STASH_WORDS: usize = 1;
    const ERASED_WORD: u64 = ERASED_KEY64;

    fn findable(key: u64) -> bool {
        key < 18446744073709551614u64
    }
    // Keys hash, place and move as a wide map's keys do.
    fn key_mix(key: u64) -> u32 {
        Wide::key_mix(key)
    }
    fn bucket(meta: TableMeta, key: u64, i: u32) -> u32 {
        Wide::bucket(meta, key, i)
    }
    fn key_bits(key: u64) -> u64 {
        key
    }
    #[allow(unused_variables)]
    fn slot_word(key: u64, value: u32) -> u64 {
        key
    }
    fn key_of(word: u64) -> u64 {
        word
    }
    #[allow(unused_variables)]
    fn value_of(word: u64) -> u32 {
        u32::new(0)
    }
    fn shuffle_key(key: u64, src: u32, tl: TileLane, #[comptime] tile_width: u32) -> u64 {
        Wide::shuffle_key(key, src, tl, tile_width)
    }
    #[allow(unused_variables)]
    fn shuffle_value(value: u32, src: u32, tl: TileLane, #[comptime] tile_width: u32) -> u32 {
        u32::new(0)
    }
    #[allow(unused_variables)]
    fn store_value(values: &mut Array<u64>, addr: usize, value: u32) {}
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
        u32::new(0)
    }
    #[allow(unused_mut, clippy::let_and_return)]
    fn tomb_word() -> u64 {
        let mut t = 18446744073709551614u64;
        t
    }
    fn is_tomb(word: u64) -> bool {
        word == 18446744073709551614u64
    }
    #[allow(unused_variables)]
    fn own_value(word: u64, values: &Array<u64>, addr: usize) -> u32 {
        u32::new(0)
    }
    #[allow(unused_variables)]
    fn stash(failed: &mut Array<u64>, at: usize, word: u64, key: u64, value: u32) {
        if at < failed.len() {
            failed[at] = word;
        }
    }
}
