//! Tiles of one lane: where a tile is a single thread, it has no work to share, and the tile driver's
//! work-sharing loop ([`super::driver::tile_drive()`]) is overhead. Launches of inserts whose tiles are one lane
//! wide, on stable schemes that read one bucket per step (linear probing and double hashing with `B = 1`,
//! cuCollections' cooperative groups of one), run each lane's walk here instead: read a bucket, let the scheme
//! decide, compare-and-swap the slot, re-read coherently after a lost race. The scheme's step is the same
//! [`ProbingScheme::insert_step`] the driver calls, and the reads, views, slot words and atomics are the
//! driver's own helpers, so a table's placement is the same whichever way a launch runs. Nothing here touches a
//! plane operation: lanes loop on their own and finish apart.
//!
//! H200, 2^26 keys, against the driver in the same call: linear probing `B = 1` inserts 1.06x / 1.18x (loads
//! 0.8 / 0.9), double hashing `B = 1` 1.00x. Erases walked the same way ran at 1.00x (a lookup's step is already
//! lean on the driver), so they stay there. The driver keeps every other launch: wider tiles, schemes that
//! evict or read bucket pairs, framed tables, inserts that take erased slots (`reclaim`), insert-or-apply, and
//! the device API's writes (whose lanes want answers). See [`lane_walks`] for the exact rule.

use super::driver::FAILED_COUNTER;
use super::layout::{KeyLayout, key_view};
use super::operation::{TileAnswer, blank_answer, read_bucket};
use super::probe::{frame_bucket, no_walk, walk_bucket};
use super::shape::TableMeta;
use cubecl::prelude::*;
use hashtile_core::scheme::{NO_PAIR, ProbingScheme, action, blank_state};
use hashtile_core::tile::{EMPTY_WORD, cas_slot, slot_address, slot_word, tile_lane};

/// Whether a launch of inserts with tiles `tile_width` lanes wide runs its lanes' walks as plain per-thread
/// loops ([`lane_insert()`]) rather than on the tile driver: one-lane tiles of a stable
/// scheme without chains or paired reads, packed pairs, claims by compare-and-swap, one table (not framed).
pub const fn lane_walks<S: ProbingScheme, L: KeyLayout>(
    tile_width: u32,
    use_cas: bool,
    framed: bool,
) -> bool {
    tile_width == 1
        && S::STABLE
        && !S::CHAINS
        && S::PAIR_AT == NO_PAIR
        && L::MOVES_PAIRS
        && use_cas
        && !framed
}

/// The insert of `key` and `value` by the table's rule (`meta.params.upsert`), one lane alone: claims an empty
/// slot or updates the key's pair by compare-and-swap; a pair the scheme gives up on goes to the stash
/// (`failed`, counted at `counters[FAILED_COUNTER]`), as on the driver. Answers the driver's tile counts:
/// `tile_added` (0 or 1), and with `count_probes` the buckets read and the compare-and-swaps lost. Lanes
/// without an operation (`active == false`) return at once.
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn lane_insert<S: ProbingScheme, L: KeyLayout>(
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    failed: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    meta: TableMeta,
    frames: &Array<u32>,
    active: bool,
    key: L::Key,
    value: L::Value,
    #[comptime] bucket_size: u32,
    #[comptime] read_mode: u32,
    #[comptime] count_probes: bool,
) -> TileAnswer<L::Value> {
    let tl = tile_lane(1u32);
    let mut answer = blank_answer::<L::Value>();
    let mine = L::slot_word(key, value);
    let mut state = blank_state();
    S::insert_start(&mut state, L::key_mix(key));
    let mut walk = no_walk();
    let mut coherent = false;
    let mut going = active;
    let mut probes = 0u32;
    let mut retries = 0u32;
    while going {
        let read_index = state.hash_index;
        let b = walk_bucket::<S, L>(meta, frames, 0u32, key, read_index, &mut walk, false, true);
        let slots = read_bucket::<L::Word>(
            table,
            table_plain,
            b,
            true,
            coherent,
            tl,
            bucket_size,
            1u32,
            read_mode,
        );
        let view = key_view::<L>(slots, key, tl, bucket_size, 1u32);
        let st = S::insert_step(&mut state, view, meta.params, bucket_size);
        if comptime!(count_probes) {
            probes += 1u32;
        }
        if st.action == action::CLAIM || st.action == action::UPDATE {
            // A claim expects an empty slot, an update the word read.
            let mut expected = EMPTY_WORD.runtime();
            if st.action == action::UPDATE {
                expected = slot_word(slots, st.slot, tl, bucket_size, 1u32);
            }
            let mut tb = b;
            if st.target != read_index {
                tb = frame_bucket::<S, L>(meta, frames, 0u32, key, st.target, false);
            }
            let old = cas_slot::<L::Word>(
                table,
                slot_address(tb, st.slot, bucket_size),
                expected,
                mine,
            );
            if old == expected {
                going = false;
                if st.action == action::CLAIM {
                    answer.tile_added = 1u32;
                }
            } else {
                // Lost the race: read the bucket again coherently (a racing copy of the key then matches).
                coherent = true;
                if comptime!(count_probes) {
                    retries += 1u32;
                }
            }
        } else if st.action == action::FAIL {
            going = false;
            let at = counters[FAILED_COUNTER as usize].fetch_add(1u32);
            L::stash(failed, at as usize, mine, key, value);
        }
    }
    answer.tile_probes = probes;
    answer.tile_retries = retries;
    answer
}
