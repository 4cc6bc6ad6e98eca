//! The tile driver's vocabulary: operation and status codes ([`op`], [`status`]), how buckets are read
//! ([`reads`]), a lane's operation ([`LaneOp`]) and the answer it gets back ([`TileAnswer`]), with the two
//! answer helpers (the driver's `settle` and the callers' [`store_inserted_value()`]) and the fold of a
//! built-in reduction into a stored pair (`fold_slot`).

use super::layout::KeyLayout;
use cubecl::prelude::*;
use hashtile_core::reduce::Reduce;
use hashtile_core::reduce::kind;
use hashtile_core::scheme::action;
use hashtile_core::tile::{
    EMPTY_WORD, LaneSlots, TileLane, cas_slot, narrow_word, read_slots, read_slots_atomic,
    read_slots_either, swap_slot,
};

/// Operation codes: each operation of a mixed batch ([`op::INSERT`] to [`op::FIND`]), and the driver's `mode`
/// when a launch runs one kind of operation.
pub mod op {
    /// Insert the pair by the table's rule (`SchemeParams::upsert`): a static table with `upsert == 1` and
    /// a chained table in unique mode update a stored key; otherwise a further copy is stored without looking
    /// (a multimap, or a bulk build of keys promised distinct and absent).
    pub const INSERT: u32 = 0;
    /// Insert the pair, or overwrite the key's stored value (insert-or-assign, whatever the table's rule).
    pub const REPLACE: u32 = 1;
    /// Tombstone the key's first copy.
    pub const ERASE: u32 = 2;
    /// The value of the key's first copy.
    pub const FIND: u32 = 3;
    /// How many copies (chains); a whole launch only.
    pub const COUNT: u32 = 4;
    /// Every copy's value, written from the lane's `at` into the driver's `out` (chains); a launch only.
    pub const GATHER: u32 = 5;
    /// Tombstone every copy, counting them (chains); a launch only.
    pub const ERASE_ALL: u32 = 6;
    /// A mode only: each lane's operation is its own ([`super::LaneOp::op`], [`INSERT`] to [`FIND`]).
    pub const MIXED: u32 = 7;
}

/// What one operation did ([`TileAnswer::status`]).
pub mod status {
    /// A find or erase of a key not stored.
    pub const NOT_FOUND: u32 = 0;
    /// A find's key is stored: the answer's value is its (first copy's) value.
    pub const FOUND: u32 = 1;
    /// An insert or a replace stored a new pair.
    pub const INSERTED: u32 = 2;
    /// An insert or a replace overwrote the key's stored value.
    pub const UPDATED: u32 = 3;
    /// An erase tombstoned the key's first copy.
    pub const ERASED: u32 = 4;
    /// A chained insert found the slab pool empty and did nothing: run it again once the pool has grown.
    pub const NO_SLAB: u32 = 5;
    /// A static insert gave a pair up (the scheme's eviction chain or buckets ran out); the pair in hand went
    /// to the stash (after evictions it may be another key than the operation's own).
    pub const FAILED: u32 = 6;
}

/// How the driver reads a bucket.
pub mod reads {
    /// Plain loads of the table bound without atomics (launches that change nothing: finds).
    pub const PLAIN: u32 = 0;
    /// Plain loads, and coherent (atomic) loads after a lost compare-and-swap and for erases (CUDA, which can
    /// bind one buffer twice). A stale plain view only costs a failed compare-and-swap.
    pub const EITHER: u32 = 1;
    /// Atomic loads only (Vulkan launches that change the table: a buffer is bound once).
    pub const ATOMIC: u32 = 2;

    /// How a launch that writes reads, with (`plain_reads`: CUDA) or without a plain binding of the table.
    pub const fn for_writes(plain_reads: bool) -> u32 {
        if plain_reads { EITHER } else { ATOMIC }
    }

    /// How a find inside a launch that writes reads (no retries to make coherent: plain, or atomic where the
    /// table is bound once).
    pub const fn for_finds(plain_reads: bool) -> u32 {
        if plain_reads { PLAIN } else { ATOMIC }
    }
}

/// One lane's operation.
#[derive(CubeType, Clone, Copy)]
pub struct LaneOp<K: Int, V: Int> {
    /// The lane has an operation (lanes without one still call the driver).
    pub mine: bool,
    /// Its [`op`] code (read only in [`op::MIXED`] launches).
    pub op: u32,
    /// The key.
    pub key: K,
    /// The value (inserts).
    pub value: V,
    /// The table of a framed launch (`framed`): the index of the key's frame descriptor.
    pub child: u32,
    /// Where a gather writes the key's values in `out` ([`op::GATHER`]).
    pub at: u32,
}

/// What the driver answers a lane about its operation, and the tile's running counts.
#[derive(CubeType, Clone, Copy)]
pub struct TileAnswer<V: Int> {
    /// A [`status`] code.
    pub status: u32,
    /// A find's value (0 when not found).
    pub value: V,
    /// An erase's count (0 or 1), a count's, or an erase-all's (chains).
    pub count: u32,
    /// Buckets read for the operation (finds, when `count_probes`).
    pub probes: u32,
    /// The address of the operation's slot (`bucket * bucket_size + slot`): a found key's (with `want_slot`),
    /// or where an insert of a layout that keeps values apart stored its key word (the caller stores the value
    /// there: [`store_inserted_value()`]).
    pub slot: u32,
    /// Pairs this tile's inserts added to the table (the same in every lane of the tile).
    pub tile_added: u32,
    /// Buckets this tile's inserts read (when `count_probes`).
    pub tile_probes: u32,
    /// Compare-and-swaps this tile lost (when `count_probes`): each cost one more read of the same bucket.
    pub tile_retries: u32,
    /// Erased slots this tile's inserts took (launches compiled with `reclaim`; the same in every lane).
    pub tile_reclaimed: u32,
}

/// An answer with nothing in it yet: what the driver starts from, and the answer of a lane without an operation.
#[cube]
pub(crate) fn blank_answer<V: Int>() -> TileAnswer<V> {
    TileAnswer::<V> {
        status: 0u32,
        value: V::new(0),
        count: 0u32,
        probes: 0u32,
        slot: 0u32,
        tile_added: 0u32,
        tile_probes: 0u32,
        tile_retries: 0u32,
        tile_reclaimed: 0u32,
    }
}

/// The serving lane's answer to its finished operation (a find's value, or the slot, where the flags ask).
#[allow(clippy::too_many_arguments)]
#[cube]
pub(crate) fn settle<V: Int>(
    answer: &mut TileAnswer<V>,
    status: u32,
    count: u32,
    probes: u32,
    value: V,
    slot: u32,
    #[comptime] with_value: bool,
    #[comptime] with_slot: bool,
) {
    answer.status = status;
    answer.count = count;
    answer.probes = probes;
    if comptime!(with_value) {
        answer.value = value;
    }
    if comptime!(with_slot) {
        answer.slot = slot;
    }
}

/// After [`tile_drive`](super::driver::tile_drive()) returns to a lane whose insert stored or updated a key word of a layout that keeps
/// values apart: its value, at the slot the answer names (packed layouts stored it with the key).
// The compile-time `if` selects code to emit; merging it with the run-time `if` would change that.
#[allow(clippy::collapsible_if)]
#[cube]
pub fn store_inserted_value<L: KeyLayout>(
    values: &mut Array<u64>,
    answer: TileAnswer<L::Value>,
    mine: bool,
    value: L::Value,
) {
    if comptime!(!L::MOVES_PAIRS) {
        if mine && (answer.status == status::INSERTED || answer.status == status::UPDATED) {
            L::store_value(values, answer.slot as usize, value);
        }
    }
}

/// The tile driver's read of `bucket` per [`reads`]: plain loads of `table_plain`, coherent loads of `table` when
/// `coherent` (or always, for `reads::ATOMIC`).
#[allow(clippy::too_many_arguments)]
#[cube]
pub(crate) fn read_bucket<W: Int>(
    table: &Array<Atomic<W>>,
    table_plain: &Array<W>,
    bucket: u32,
    active: bool,
    coherent: bool,
    tl: TileLane,
    #[comptime] bucket_size: u32,
    #[comptime] tw: u32,
    #[comptime] read_mode: u32,
) -> LaneSlots {
    if comptime!(read_mode == reads::PLAIN) {
        read_slots::<W>(table_plain, bucket, active, tl, bucket_size, tw)
    } else if comptime!(read_mode == reads::EITHER) {
        read_slots_either::<W>(
            table,
            table_plain,
            bucket,
            active,
            coherent,
            tl,
            bucket_size,
            tw,
        )
    } else {
        read_slots_atomic::<W>(table, bucket, active, tl, bucket_size, tw)
    }
}

/// Folds the pair `word` (the key's, with the incoming value) into slot `addr`, which holds the same key, by one
/// atomic of the built-in reduction `kind` (see `folds` in the driver, `super::driver::tile_drive`): an add on the value's 32-bit half
/// (`halves`: the table as 32-bit words; every GPU is little-endian, so a slot's low half is at `2 * addr`), or
/// a min / max of the whole word (equal high halves: the values decide). Nothing waits for the atomic's answer.
#[cube]
pub(crate) fn fold_slot<W: Int>(
    table: &Array<Atomic<W>>,
    halves: &Array<Atomic<u32>>,
    addr: usize,
    word: u64,
    #[comptime] reduction: u32,
) {
    if comptime!(reduction == kind::ADD) {
        halves[addr * 2usize].fetch_add((word & 0xffff_ffffu64) as u32);
    } else if comptime!(reduction == kind::MIN) {
        table[addr].fetch_min(narrow_word::<W>(word));
    } else {
        table[addr].fetch_max(narrow_word::<W>(word));
    }
}

/// What the owner lane's atomic on a slot did ([`owner_write()`]).
#[derive(CubeType, Clone, Copy)]
pub(crate) struct OwnerWrite {
    /// The word the atomic found in the slot (the word read, where nothing waits for an answer).
    pub old: u64,
    /// The atomic found the word it expected: an empty slot for a claim or an eviction, the erased word for a
    /// reclaim, the word the tile read for an update or an erase (an exchange-update: its own key's pair).
    pub ok: bool,
}

/// The tile driver's memory action on slot `addr`, run by the slot's owner lane: a claim (compare-and-swap from
/// empty, or an exchange without `use_cas`), a reclaim (from the erased word), an eviction (an exchange), an
/// update of the word read (`seen`: by compare-and-swap, an exchange, a fold of a built-in reduction, or
/// nothing where the layout keeps values apart), or an erase (chains mark a tombstone; a static table its
/// layout's erased word, which its finds never match). `mine` is the word to write; the flags are the driver's
/// compile-time ones, so that each launch keeps only its own branches.
// The compile-time `if`s select code to emit; merging them with the run-time ones would change that.
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
#[cube]
pub(crate) fn owner_write<L: KeyLayout, F: Reduce>(
    table: &Array<Atomic<L::Word>>,
    halves: &Array<Atomic<u32>>,
    addr: usize,
    act: u32,
    cur: u32,
    mine: u64,
    seen: u64,
    cur_key: L::Key,
    #[comptime] inserts: bool,
    #[comptime] erases: bool,
    #[comptime] chains: bool,
    #[comptime] use_cas: bool,
    #[comptime] evicts: bool,
    #[comptime] folds: bool,
    #[comptime] reclaims: bool,
) -> OwnerWrite {
    let mut old = EMPTY_WORD.runtime();
    let mut ok = false;
    if comptime!(inserts) {
        if act == action::CLAIM {
            if comptime!(use_cas) {
                old = cas_slot::<L::Word>(table, addr, EMPTY_WORD, mine);
            } else {
                old = swap_slot::<L::Word>(table, addr, mine);
            }
            ok = old == EMPTY_WORD;
        } else if act == action::RECLAIM {
            if comptime!(reclaims) {
                let erased = L::ERASED_WORD.runtime();
                old = cas_slot::<L::Word>(table, addr, erased, mine);
                ok = old == erased;
            }
        } else if act == action::EVICT {
            if comptime!(evicts) {
                old = swap_slot::<L::Word>(table, addr, mine);
                ok = old == EMPTY_WORD;
            }
        } else if act == action::UPDATE {
            if comptime!(folds) {
                fold_slot::<L::Word>(table, halves, addr, mine, F::KIND);
                old = seen;
                ok = true;
            } else if comptime!(L::MOVES_PAIRS) {
                if comptime!(use_cas) {
                    old = cas_slot::<L::Word>(table, addr, seen, mine);
                    ok = old == seen;
                } else {
                    // An exchange takes back whatever pair was there: its own key's, or a stranger's.
                    old = swap_slot::<L::Word>(table, addr, mine);
                    ok = L::key_of(old) == cur_key;
                }
            } else {
                // The key word stays; the caller stores the value (racing updates: one wins).
                old = seen;
                ok = true;
            }
        }
    }
    if comptime!(erases) {
        if cur == op::ERASE && act == action::FOUND {
            let mark = if comptime!(chains) {
                L::tomb_word()
            } else {
                L::ERASED_WORD.runtime()
            };
            old = cas_slot::<L::Word>(table, addr, seen, mark);
            ok = old == seen;
        }
    }
    OwnerWrite { old, ok }
}
