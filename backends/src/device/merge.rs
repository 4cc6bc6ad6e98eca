//! Racing copies of one key merged after the device API's inserts, on the stable schemes whose copies can each
//! claim a slot of their own ([`ProbingScheme::copies_may_split`]: P2BHT, IHT's two-choice rule): two lanes of a
//! launch inserting one new key may read different bucket loads and choose different buckets.
//!
//! After a lane's insert claimed a new slot, its tile walks the key's find sequence again, reading every bucket
//! coherently (atomic loads), and merges each other copy it meets: **of two copies, the one at the higher slot
//! address goes**, swapped for the erase mark ([`KeyLayout::ERASED_WORD`]) by compare-and-swap, by whichever of
//! the two lanes sees the other (the other's copy when it is higher, its own when the other is lower). The lowest
//! copy is never taken, so every other copy goes as long as, of each pair, at least one lane sees the other:
//! each lane's walk starts after its own compare-and-swap came back (it needs the claim's answer) and reads by
//! atomics, so the walk that starts last sees the other's claim. A copy's value goes with it, or (a reduction
//! other than `Assign`) is handed back to the caller ([`Merged::carry`]) to fold into the copy that stays, by
//! inserting it again. A merged copy counts as an erased slot (`len` stays exact after `GpuTable::settle`), and
//! its mark stays until a rebuild (these schemes' inserts do not take marks again).
//!
//! Layouts whose key word holds the whole pair only ([`KeyLayout::MOVES_PAIRS`]): a wide table's value in its
//! own array could not go with the key in one compare-and-swap.

use super::layout::{KeyLayout, key_view};
use super::probe::frame_bucket;
use super::shape::TableMeta;
use cubecl::prelude::*;
use hashtile_core::reduce::{Reduce, kind};
use hashtile_core::scheme::{BucketView, ProbingScheme, action, blank_state};
use hashtile_core::tile::{
    EMPTY_WORD, cas_slot, read_slots_atomic, slot_address, slot_word, tile_ballot, tile_lane,
    tile_loop_any, tile_shuffle, widen_word,
};

/// What [`merge_copies()`] did for one lane.
#[derive(CubeType, Clone, Copy)]
pub struct Merged<V: Int> {
    /// The lane's own copy went (another copy sat lower): its insert answers as an update.
    pub mine_gone: bool,
    /// Copies of this lane's key swapped for the mark by its merge (for the erase counters).
    pub erased: u32,
    /// With a reduction other than `Assign`: the values of the copies that went, combined, are to be folded
    /// into the key's copy that stays (the caller inserts `value` again).
    pub carry: bool,
    /// The carried value (see `carry`).
    pub value: V,
}

/// Swaps slot `addr` for the mark while it holds `key`, starting from the word `first` read there, and returns
/// the word this lane's compare-and-swap took ([`EMPTY_WORD`]: none, the slot no longer holds the key: another
/// lane took it). A lost compare-and-swap re-tries with the word it found, which may carry a value another lane
/// folded in meanwhile.
#[cube]
fn take_copy<L: KeyLayout>(
    table: &Array<Atomic<L::Word>>,
    addr: usize,
    key: L::Key,
    first: u64,
) -> u64 {
    let mut w = first;
    let mut taken = EMPTY_WORD.runtime();
    let mut going = L::key_of(w) == key;
    while going {
        let old = cas_slot::<L::Word>(table, addr, w, L::ERASED_WORD);
        if old == w {
            taken = w;
            going = false;
        } else {
            w = old;
            going = L::key_of(w) == key;
        }
    }
    taken
}

/// Merges the other copies of each lane's `key` whose insert just claimed the slot at address `slot`
/// (`inserted`; see the module docs), under `meta`'s parameters (nothing unless
/// [`ProbingScheme::copies_may_split`]). **Every lane of the plane calls it.**
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn merge_copies<S: ProbingScheme, L: KeyLayout, F: Reduce>(
    table: &Array<Atomic<L::Word>>,
    meta: TableMeta,
    key: L::Key,
    slot: u32,
    inserted: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tw: u32,
) -> Merged<L::Value> {
    let tl = tile_lane(tw);
    // One table: no frame descriptors (a one-word stand-in, never read).
    let frames = Array::<u32>::new(1usize);
    let mut out = Merged::<L::Value> {
        mine_gone: false,
        erased: 0u32,
        carry: false,
        value: L::Value::new(0),
    };
    let mut pending = inserted && S::copies_may_split(meta.params);
    let mut has_op = false;
    let mut serving = 0u32;
    let mut cur_key = L::Key::new(0);
    let mut cur_slot = 0u32;
    let mut state = blank_state();
    loop {
        if !tile_loop_any(pending || has_op, tw) {
            break;
        }
        // An idle tile takes its next pending lane's key and slot.
        let queue = tile_ballot(pending, tl, tw);
        let next = queue.trailing_zeros() % tw;
        let next_key = L::shuffle_key(key, next, tl, tw);
        let next_slot = tile_shuffle(slot, next, tl, tw);
        if !has_op && queue != 0u32 {
            has_op = true;
            serving = next;
            cur_key = next_key;
            cur_slot = next_slot;
            S::find_start(&mut state);
            if tl.lane == next {
                pending = false;
            }
        }
        let b = frame_bucket::<S, L>(meta, &frames, 0u32, cur_key, state.hash_index, false);
        let slots = read_slots_atomic::<L::Word>(table, b, has_op, tl, bucket_size, tw);
        let view = key_view::<L>(slots, cur_key, tl, bucket_size, tw);
        let mut others = 0u32;
        if has_op {
            others = view.matched;
            if b == cur_slot / bucket_size {
                others &= !(1u32 << (cur_slot % bucket_size));
            }
        }
        // Each other copy in the bucket (nearly always none), one at a time (tile-uniform).
        loop {
            if !tile_loop_any(others != 0u32, tw) {
                break;
            }
            let live = others != 0u32;
            let mut s = 0u32;
            if live {
                s = others.trailing_zeros();
            }
            let seen = slot_word(slots, s, tl, bucket_size, tw);
            let x = slot_address(b, s, bucket_size) as u32;
            let lower = live && x < cur_slot;
            // The other copy goes: its slot's owner lane swaps it from the word the tile read.
            let mut took = 0u32;
            let mut taken = L::Value::new(0);
            if live && !lower && tl.lane == s % tw {
                let w = take_copy::<L>(table, x as usize, cur_key, seen);
                if w != EMPTY_WORD {
                    took = 1u32;
                    taken = L::value_of(w);
                }
            }
            let took_any = tile_shuffle(took, s % tw, tl, tw) != 0u32;
            let taken_value = L::shuffle_value(taken, s % tw, tl, tw);
            if tl.lane == serving && took_any {
                out.erased += 1u32;
                fold_carry::<L, F>(&mut out, taken_value);
            }
            if lower {
                // This lane's copy goes (the serving lane swaps it), and its walk is over: the lower copy's
                // lane or walk takes care of the rest.
                if tl.lane == serving {
                    out.mine_gone = true;
                    let first = widen_word::<L::Word>(table[cur_slot as usize].load());
                    let w = take_copy::<L>(table, cur_slot as usize, cur_key, first);
                    if w != EMPTY_WORD {
                        out.erased += 1u32;
                        fold_carry::<L, F>(&mut out, L::value_of(w));
                    }
                }
                has_op = false;
                others = 0u32;
            }
            others &= others - u32::cast_from(others != 0u32);
        }
        if has_op {
            // On along the key's find sequence, as if this bucket held no copy.
            let rest = BucketView {
                empty: view.empty,
                matched: 0u32,
                next: view.next,
            };
            let st = S::find_step(&mut state, rest, meta.params, bucket_size);
            if st.action != action::NEXT {
                has_op = false;
            }
        }
    }
    out
}

/// Adds a taken copy's value to what the lane hands back (reductions other than `Assign`, which drops it).
#[cube]
fn fold_carry<L: KeyLayout, F: Reduce>(out: &mut Merged<L::Value>, value: L::Value) {
    if comptime!(F::KIND != kind::ASSIGN) {
        if out.carry {
            out.value = F::reduce::<L::Value>(out.value, value);
        } else {
            out.carry = true;
            out.value = value;
        }
    }
}
