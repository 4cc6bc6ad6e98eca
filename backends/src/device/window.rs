//! One-lane finds that read a window of consecutive probes at once: the find of schemes whose probes are
//! consecutive buckets of one slot (linear probing, `B = 1`, read by one-lane tiles), taken out of the tile
//! driver's probe-by-probe loop at compile time.
//!
//! **Why.** A one-lane tile of linear probing reads one 8-byte slot a probe: a long walk (absent keys at a high
//! load: about 50 probes at 0.9) pays the driver's whole step per slot, and a plane of 32 such tiles runs as long
//! as its longest walk. The slots `4w .. 4w + 3` share one 32-byte sector, which the first of their loads brings
//! in anyway: a lane that loads the aligned window holding its probe, and the windows after it, examines up to four
//! probes a step with four independent loads in flight (cuCollections' CG 1 reads one slot an iteration).
//!
//! **Why it answers what the walk answers.** [`hashtile_core::scheme::ProbingScheme::FIND_WALKS`] promises the walk's find
//! (`hashtile_probing::linear::walk_find_step`): probe `i` answers FOUND when its bucket holds the key, ABSENT when it
//! has an empty slot, else probe `i + 1` follows, for at most `max_chain` probes. With one slot a bucket and the
//! linear sequence, probe `i` is slot `h + i` (modulo the slot count): the window's slots at or past the walk's
//! position, in order, are the walk's next probes. The window answers at its first match, else at its first
//! empty slot. A match past an empty slot of the walk cannot exist (a key is never stored past a bucket that had
//! room when it was placed, and slots never empty again: erases leave marks), so the first match is the walk's
//! FOUND and the first empty its ABSENT. Probe counts are the walk's: the probes up to the answer's slot.
//!
//! Only launches of finds with plain reads (nothing writes while they run) and unframed tables take this path;
//! erases, the device API's coherent finds and the paged tables' framed finds stay on the driver.

use super::layout::{KeyLayout, key_view};
use super::operation::{TileAnswer, blank_answer, status};
use super::shape::TableMeta;
use cubecl::prelude::*;
use hashtile_core::scheme::sequence;
use hashtile_core::tile::{EMPTY_WORD, LaneSlots, TileLane, slot_word, widen_word};

/// Probes a window holds: the slots of one 32-byte sector of 8-byte words (half a sector of sets' 4-byte words).
pub const WINDOW: u32 = 4;

/// Whether a launch's finds take [`window_find`]: one-slot buckets read by one-lane tiles of a scheme whose
/// probes are consecutive buckets and whose find is the walk's, with plain reads and no frames.
pub const fn windowed(
    walks: bool,
    sequence_kind: u32,
    bucket_size: u32,
    tile_width: u32,
    plain_reads: bool,
    framed: bool,
) -> bool {
    walks
        && sequence_kind == sequence::LINEAR
        && bucket_size == 1
        && tile_width == 1
        && plain_reads
        && !framed
}

/// Word `j` of the window starting at slot `base`, or the empty word past the table's last slot (`n`).
#[cube]
fn window_word<W: Int>(table: &Array<W>, base: u32, n: u32, #[comptime] j: u32) -> u64 {
    let mut w = EMPTY_WORD.runtime();
    if base + j < n {
        w = widen_word::<W>(table[(base + j) as usize]);
    }
    w
}

/// The lane's own find (`mine`: it has a key to look up), by windows of [`WINDOW`] probes (see the module docs).
/// Needs no other lane: a lane without a key returns at once.
#[allow(clippy::too_many_arguments)]
#[cube]
pub(crate) fn window_find<L: KeyLayout>(
    table: &Array<L::Word>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    mine: bool,
    #[comptime] count_probes: bool,
    #[comptime] want_slot: bool,
) -> TileAnswer<L::Value> {
    let mut answer = blank_answer::<L::Value>();
    let n = meta.num_buckets;
    // The walk reads at most `max_chain` probes, and never a slot twice.
    let limit = meta.params.max_chain.min(n);
    // A one-lane tile: the window is a bucket of four slots this lane holds alone, viewed as the driver views one.
    let lane = TileLane {
        lane: 0u32,
        base: 0u32,
    };
    let first = L::bucket(meta, key, 0u32);
    let mut base = first - first % WINDOW;
    let mut skip = first - base; // the window's slots before the walk's position
    let mut walked = 0u32; // probes of the windows before this one
    let mut going = mine;
    while going {
        let slots = LaneSlots {
            w0: window_word::<L::Word>(table, base, n, 0u32),
            w1: window_word::<L::Word>(table, base, n, 1u32),
            w2: window_word::<L::Word>(table, base, n, 2u32),
            w3: window_word::<L::Word>(table, base, n, 3u32),
        };
        let stored = (n - base).min(WINDOW);
        // The walk's probes in this window: from its position to the window's (or the table's) end.
        let probes_here = (((1u32 << stored) - 1u32) >> skip) << skip;
        let view = key_view::<L>(slots, key, lane, WINDOW, 1u32);
        let empty = view.empty & probes_here;
        let matched = view.matched & probes_here;
        if matched != 0u32 {
            let j = matched.trailing_zeros();
            let word = slot_word(slots, j, lane, WINDOW, 1u32);
            let addr = base + j;
            answer.status = status::FOUND;
            answer.value = L::own_value(word, table_values, addr as usize);
            if comptime!(want_slot) {
                answer.slot = addr;
            }
            if comptime!(count_probes) {
                answer.probes = (walked + j - skip + 1u32).min(limit);
            }
            going = false;
        } else if empty != 0u32 {
            if comptime!(count_probes) {
                answer.probes = (walked + empty.trailing_zeros() - skip + 1u32).min(limit);
            }
            going = false;
        } else {
            walked += stored - skip;
            if walked >= limit {
                if comptime!(count_probes) {
                    answer.probes = limit;
                }
                going = false;
            }
            base += WINDOW;
            if base >= n {
                base = 0u32;
            }
            skip = 0u32;
        }
    }
    answer
}
