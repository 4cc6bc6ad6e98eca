//! The device API's writes: insert-or-assign, insert-or-apply and erase on a static table, with the find and
//! contains of kernels that write (they read as the writes do), callable
//! from your own CubeCL kernels (cuCollections' device "refs"). Each is cooperative like
//! [`super::find::tile_find()`]: **every lane of the plane calls it**, each with its own key and `active` flag,
//! and each lane gets its own [`status`] back. They run on the one tile driver ([`super::driver::tile_drive()`])
//! that the table's own kernels run, and count into the table's counters ([`super::counters`]), so that
//! `GpuTable::settle` afterwards brings `len()` up to date and hands back what an insert could not place.
//!
//! The arrays come from `GpuTable::device_writer` (a `DeviceWriter`): the key words bound twice (`table`
//! atomically, `table_plain` for plain reads: on Vulkan, where a buffer may be bound once per launch, pass any
//! one-word array and `plain_reads = false`), the value words, the stash and the counters.
//!
//! What a launch may do at once:
//! - Keys written concurrently should be distinct, except on schemes whose racing copies converge
//!   (`ProbingScheme::UPSERTS_CONVERGE`: linear probing and double hashing; and IHT with its default
//!   `num_hashes = 2`, whose walk is first fit along one sequence after a primary that only fills: a copy that
//!   finds the primary at its threshold saw every slot a racing copy could have claimed there): there a key
//!   repeated across lanes ends in one slot, its values combined by the reduction (IHT's combine by the
//!   compare-and-swap loop). First-fit cuckoo schemes (BCHT, 1CHT) converge too
//!   when the kernel writes under `hashtile_probing::NoEvictions<S>` (instantiate the writes with it on a table
//!   of `S`): nothing moves, and a key whose candidates are all full fails in every copy ([`status::FAILED`],
//!   stashed; `GpuTable::settle` hands the copies back for the host to apply, for instance by
//!   `GpuTable::insert_or_apply_device`). P2BHT and IHT's two-choice rule (`num_hashes = 3`), whose racing
//!   copies can choose different buckets by their loads, merge them after the claims
//!   ([`super::merge`]: of two copies the higher slot goes, its value folded into the one that stays), with packed
//!   pairs or keys alone: the key ends in one slot with its values combined, and `len` is exact after
//!   `GpuTable::settle`; each merged copy leaves an erase mark (these schemes' inserts do not take marks again;
//!   a rebuild reclaims them), and a lane whose copy the other lane's walk merged may still answer
//!   [`status::INSERTED`]. Elsewhere (cuckoo schemes written as they are, wide pairs) two lanes inserting one new
//!   key can both store it (the promise of `GpuTable::insert_device_distinct`; `GpuTable::insert_device` and
//!   `GpuTable::insert_or_apply_device` settle repeats for every scheme).
//! - Erases are for stable schemes with packed pairs (an erase racing a cuckoo eviction in the same launch
//!   would miss the key the eviction carries); marks are taken again by later inserts of every scheme but
//!   P2BHT's (the cuckoo schemes' inserts here compile that in, so that no eviction exchanges a mark away); a
//!   kernel that erases and inserts one key at once gets either order.
//! - `insert_or_apply` with a reduction other than `Assign` needs packed pairs (the value is combined with the
//!   key word's compare-and-swap); a wide table's values are assigned.

use super::counters::{ADDED_AT, ERASED_AT, RECLAIMED_AT, count_spread};
use super::driver::{LaneOp, op, reads, status, store_inserted_value, tile_drive};
use super::find::{FindResult, FoundAt, drive_lookup, find_reading, without_slot};
use super::layout::KeyLayout;
use super::merge::merge_copies;
use super::shape::TableMeta;
use cubecl::prelude::*;
use hashtile_core::reduce::{Assign, Reduce, kind};
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::tile::tile_lane;

/// Inserts `key -> value`, or assigns `value` to a stored `key`: [`status::INSERTED`], [`status::UPDATED`],
/// [`status::FAILED`] (the scheme gave the pair up: it is in the stash, `GpuTable::settle` hands it back), or
/// [`status::NOT_FOUND`] for an inactive lane or the sentinel key (never stored). All lanes must call.
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn tile_insert_or_assign<S: ProbingScheme, L: KeyLayout>(
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &mut Array<u64>,
    stash: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    meta: TableMeta,
    key: L::Key,
    value: L::Value,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
) -> u32 {
    tile_insert_or_apply::<S, L, Assign>(
        table,
        table_plain,
        table_values,
        stash,
        counters,
        meta,
        key,
        value,
        active,
        bucket_size,
        tile_width,
        plain_reads,
    )
}

/// Inserts `key -> value`, or combines a stored key's value with `value` by the reduction `F`
/// (`hashtile_core::reduce`: `Add` makes a counting table): the answers of [`tile_insert_or_assign()`]. `F`
/// other than `Assign` needs packed pairs (see the module docs). All lanes must call.
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn tile_insert_or_apply<S: ProbingScheme, L: KeyLayout, F: Reduce>(
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &mut Array<u64>,
    stash: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    meta: TableMeta,
    key: L::Key,
    value: L::Value,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
) -> u32 {
    comptime!(assert!(
        L::MOVES_PAIRS || F::KIND == kind::ASSIGN,
        "tile_insert_or_apply: a reduction other than Assign needs packed pairs"
    ));
    let mine = active && key != L::Key::max_value();
    // One table: no frame descriptors, no slab allocator, no gather output (stand-ins never touched).
    let frames = Array::<u32>::new(1usize);
    let no_bitmap = Array::<Atomic<u32>>::new(1usize);
    let mut no_out = Array::<L::Value>::new(1usize);
    let read_mode = comptime!(reads::for_writes(plain_reads));
    // Schemes whose racing copies of a new key can each claim a slot merge them after the claims
    // (`super::merge`); a copy's value that went with it is inserted again, to fold into the copy that stays.
    let merges = comptime!(S::STABLE && L::MOVES_PAIRS && !S::CHAINS && !S::UPSERTS_CONVERGE);
    let tl = tile_lane(tile_width);
    let mut todo = mine;
    let mut carried = value;
    let mut first = true;
    let mut answer = status::NOT_FOUND.runtime();
    loop {
        if comptime!(!merges || F::KIND == kind::ASSIGN) {
            // Nothing is carried: one pass, without a second plane vote. (A `break` at the loop's end instead
            // leaves it no back edge, which cubecl-opt's dominance analysis cannot take.)
            if !first {
                break;
            }
        }
        if !plane_any(todo) {
            break;
        }
        let lane = LaneOp::<L::Key, L::Value> {
            mine: todo,
            op: op::REPLACE,
            key,
            value: carried,
            child: 0u32,
            at: 0u32,
        };
        let a = tile_drive::<S, L, F>(
            table,
            table_plain,
            table_values,
            &no_bitmap,
            &no_bitmap,
            0u32,
            stash,
            counters,
            0u32,
            &mut no_out,
            meta,
            &frames,
            lane,
            op::REPLACE,
            bucket_size,
            tile_width,
            read_mode,
            true,
            false,
            true,
            false,
            false,
            false,
            comptime!(!S::STABLE),
        );
        store_inserted_value::<L>(table_values, a, todo, carried);
        let mut added = 0u32;
        if tl.lane == 0u32 {
            added = a.tile_added;
        }
        count_spread(counters, ADDED_AT, added);
        if comptime!(!S::STABLE) {
            // Cuckoo schemes take erased slots again (an eviction must never exchange a mark away).
            let mut reclaimed = 0u32;
            if tl.lane == 0u32 {
                reclaimed = a.tile_reclaimed;
            }
            count_spread(counters, RECLAIMED_AT, reclaimed);
        }
        if first && mine {
            answer = a.status;
        }
        let claimed = todo && a.status == status::INSERTED;
        todo = false;
        if comptime!(merges) {
            let m =
                merge_copies::<S, L, F>(table, meta, key, a.slot, claimed, bucket_size, tile_width);
            count_spread(counters, ERASED_AT, m.erased);
            if first && mine && m.mine_gone {
                answer = status::UPDATED;
            }
            todo = m.carry;
            carried = m.value;
        }
        first = false;
    }
    answer
}

/// Erases `key`: [`status::ERASED`] when this lane marked its slot, else [`status::NOT_FOUND`] (absent, the
/// sentinel, an inactive lane, or another lane of the launch erased it first). Stable schemes with packed pairs
/// only (see the module docs). All lanes must call.
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn tile_erase<S: ProbingScheme, L: KeyLayout>(
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &Array<u64>,
    counters: &Array<Atomic<u32>>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
) -> u32 {
    comptime!(assert!(
        S::STABLE && L::MOVES_PAIRS,
        "tile_erase: stable schemes with packed pairs only"
    ));
    let hit = erase_slot::<S, L>(
        table,
        table_plain,
        table_values,
        meta,
        key,
        active,
        bucket_size,
        tile_width,
        plain_reads,
    );
    count_spread(counters, ERASED_AT, u32::cast_from(hit));
    let mut answer = status::NOT_FOUND.runtime();
    if hit {
        answer = status::ERASED;
    }
    answer
}

/// The find of kernels that write: `key`'s value, read as the writes read (`plain_reads`: plain loads of
/// `table_plain`; else coherent loads of `table`, the one binding a Vulkan kernel has). All lanes must call.
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn tile_get<S: ProbingScheme, L: KeyLayout>(
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
) -> FindResult<L::Value> {
    let r = find_as_written::<S, L>(
        table,
        table_plain,
        table_values,
        meta,
        key,
        active,
        bucket_size,
        tile_width,
        plain_reads,
        false,
    );
    without_slot::<L::Value>(r)
}

/// `true` when `key` is stored (an inactive lane: `false`), read as [`tile_get()`] reads. All lanes must call.
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn tile_contains<S: ProbingScheme, L: KeyLayout>(
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
) -> bool {
    let r = tile_get::<S, L>(
        table,
        table_plain,
        table_values,
        meta,
        key,
        active,
        bucket_size,
        tile_width,
        plain_reads,
    );
    active && r.found == 1u32
}

/// The cooperative find, reading per `plain_reads` as the writes do.
#[allow(clippy::too_many_arguments)]
#[cube]
fn find_as_written<S: ProbingScheme, L: KeyLayout>(
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
    #[comptime] want_slot: bool,
) -> FoundAt<L::Value> {
    let frames = Array::<u32>::new(1usize);
    let read_mode = comptime!(reads::for_finds(plain_reads));
    find_reading::<S, L>(
        table,
        table_plain,
        table_values,
        meta,
        key,
        active,
        &frames,
        0u32,
        bucket_size,
        tile_width,
        read_mode,
        false,
        want_slot,
        false,
    )
}

/// Marks `key`'s slot erased ([`KeyLayout::ERASED_WORD`]) when it is stored: the tile driver's erase, whose
/// owner lane swaps the slot from the word the tile read to the mark as soon as the find reaches it (while the
/// line is in L2), so that of two lanes erasing one key exactly one marks it (`true` for that lane). Safe
/// beside concurrent lookups of other keys: for them the slot goes from one word that does not match to
/// another. All lanes must call.
#[allow(clippy::too_many_arguments)]
#[cube]
pub(crate) fn erase_slot<S: ProbingScheme, L: KeyLayout>(
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
) -> bool {
    // One table: no frame descriptors (a one-word stand-in, never read).
    let frames = Array::<u32>::new(1usize);
    let a = drive_lookup::<S, L>(
        table,
        table_plain,
        table_values,
        meta,
        key,
        active,
        &frames,
        0u32,
        op::ERASE,
        bucket_size,
        tile_width,
        comptime!(reads::for_writes(plain_reads)),
        false,
        false,
        false,
    );
    active && a.status == status::ERASED
}
