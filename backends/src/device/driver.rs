//! The tile driver: the one work-sharing loop that runs a probing scheme's steps against memory, under every
//! GPU table. Static inserts and finds, the host path's classify pass, the paged tables' framed operations, the
//! device API and every chained operation call [`tile_drive()`]; what differs between them is compile-time:
//!
//! - the operation ([`op`]): one kind for the whole launch, or [`op::MIXED`] (each lane its own);
//! - the scheme `S`: [`ProbingScheme::CHAINS`] compiles in the list steps (follow, append, slab views, the
//!   slab allocator, walks over every match), [`ProbingScheme::PAIR_AT`] the paired bucket read,
//!   [`ProbingScheme::SEQUENCE`] which hashes a probe computes (in `super::probe`);
//! - the bucket addressing: plain (a key's bucket from its hash), framed (many tables of one shape in shared
//!   slot arrays, `framed`: the paged tables' children) or slab lists (schemes that chain: the first bucket
//!   from the hash, then the links);
//! - how buckets are read ([`reads`]) and whether claims use compare-and-swap (`use_cas`).
//!
//! **The loop.** Every lane of the plane calls the driver with its own operation ([`LaneOp`]). A tile of `tw`
//! lanes serves its lanes' operations one after another: an idle tile takes its next pending lane's operation
//! (a ballot and shuffles), reads one bucket per step cooperatively (`hashtile_core::tile`), lets the scheme
//! decide ([`ProbingScheme::insert_step`] / [`ProbingScheme::find_step`]), runs the memory action on the
//! owner lane of the slot (claim, eviction, update, tombstone, link) and broadcasts what it saw. The serving
//! lane gets its answer ([`TileAnswer`]) when the tile finishes its operation. Control flow stays uniform over
//! the plane (every tile ballot and shuffle is executed by every lane), so the loop runs while any lane of the
//! plane has work ([`tile_loop_any()`]).
//!
//! **Arrays a launch does not have.** The driver takes every array an operation may touch; a caller without
//! one (a find has no slab allocator, no stash, no atomic view of the table) passes a one-element local array,
//! which the compile-time flags never let the driver read or write.

use super::layout::{KeyLayout, key_view};
use super::operation::read_bucket;
pub use super::operation::{LaneOp, TileAnswer, op, reads, status, store_inserted_value};
use super::operation::{blank_answer, owner_write, settle};
use super::probe::{evicted_from, frame_bucket, no_walk, walk_bucket};
use super::shape::TableMeta;
use super::slab::{
    OUT_OF_SLABS, ResidentBlock, alloc_slab, link_slab, resident_block, slab_view, tile_alloc_slab,
    walk_matches,
};
use cubecl::prelude::*;
use hashtile_core::reduce::{Reduce, kind};
use hashtile_core::scheme::{
    BucketView, NO_PAIR, ProbingScheme, SchemeParams, action, blank_state, make_step, no_mark,
    reclaim_step,
};
use hashtile_core::tile::{
    EMPTY_WORD, pick_slots, slot_address, slot_word, slots_holding, tile_ballot, tile_lane,
    tile_loop_any, tile_shuffle, tile_shuffle_u64,
};

/// The insert counter array's word counting pairs an insert gave up on (`counters[0]`); a framed launch counts
/// each table's too, at `FAILED_PER_TABLE + child`.
pub const FAILED_COUNTER: u32 = 0;

/// Runs one operation per lane on a table (see the module docs); **every lane of the plane calls it together**.
///
/// Arrays: `table` (the key words, atomically) and `table_plain` (the same without atomics), per [`reads`];
/// `table_values`, a table's values where the layout keeps them apart (read by finds; inserts leave the
/// value to the caller, [`store_inserted_value()`]); `halves`, the packed table seen as 32-bit words when
/// `halves_bound` (a slot's value is its low half, at `2 * slot`: where `F` adds, it folds there); `bitmap` and `pool`, the slab allocator (chains);
/// `failed` and `counters`, where static inserts stash the pairs they give up on (`counters[0]` counts them,
/// and with `framed` also `counters[failed_per_table + child]`); `out`, a gather's output; `frames`, the frame
/// descriptors of a framed launch.
///
/// Flags: `mode` ([`op`]); `bucket_size` and `tw` (the tile's width); `reads`; `use_cas` (claims by
/// compare-and-swap; off: by exchange, carrying on whatever was displaced); `count_probes`; `want_slot`
/// (a found key's slot address in the answer; launches of packed inserts, which otherwise answer nothing per
/// lane, then answer each lane's status); `framed`; `resident` (chains: the tile keeps a resident block
/// of the slab allocator, SlabAlloc's; else the hashed bitmap); `halves_bound` (`halves` is the table, not a
/// stand-in: launches that may bind a buffer twice, CUDA); `reclaim` (a launch of inserts into a table that may
/// hold erased slots: the key takes the first erased slot on its walk once the walk proves it absent,
/// `hashtile_core::scheme::reclaim_step`; schemes with paired reads ignore it). `F`: how a static insert of
/// packed pairs updates a stored key's value (`Assign`: replaced; any other reduction: combined,
/// insert-or-apply in the table; see `folds` below for the built-in reductions).
#[allow(
    clippy::too_many_arguments,
    clippy::collapsible_if,
    clippy::collapsible_else_if,
    unused_assignments,
    arithmetic_overflow
)]
#[cube]
pub fn tile_drive<S: ProbingScheme, L: KeyLayout, F: Reduce>(
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &Array<u64>,
    halves: &Array<Atomic<u32>>,
    bitmap: &Array<Atomic<u32>>,
    pool: u32,
    failed: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    failed_per_table: u32,
    out: &mut Array<L::Value>,
    meta: TableMeta,
    frames: &Array<u32>,
    lane: LaneOp<L::Key, L::Value>,
    #[comptime] mode: u32,
    #[comptime] bucket_size: u32,
    #[comptime] tw: u32,
    #[comptime] read_mode: u32,
    #[comptime] use_cas: bool,
    #[comptime] count_probes: bool,
    #[comptime] want_slot: bool,
    #[comptime] framed: bool,
    #[comptime] resident: bool,
    #[comptime] halves_bound: bool,
    #[comptime] reclaim: bool,
) -> TileAnswer<L::Value> {
    let chains = comptime!(S::CHAINS);
    // Which kinds of operation this launch can hold (the rest compiles away).
    let inserts = comptime!(mode == op::INSERT || mode == op::REPLACE || mode == op::MIXED);
    let only_inserts = comptime!(mode == op::INSERT || mode == op::REPLACE);
    let finds = comptime!(mode == op::FIND || mode == op::MIXED);
    let erases = comptime!(mode == op::ERASE || mode == op::MIXED);
    let walks =
        comptime!(chains && (mode == op::COUNT || mode == op::GATHER || mode == op::ERASE_ALL));
    // Multimap inserts of a chained table never look for their key.
    let matching = comptime!(!(chains && mode == op::INSERT));
    // The word of the slot acted on: an update's or erase's expected word (and a packed find's value).
    let needs_seen = comptime!(
        (inserts && (L::MOVES_PAIRS || chains) && matching) || erases || (chains && finds)
    );
    // Static bulk inserts of packed pairs answer nothing per lane: their outcomes are the tile's counts and the
    // stash (a lane's answer costs the insert kernel registers, and registers limit its occupancy).
    // `want_slot` asks for answers all the same (the device API's writes: each lane learns what its insert did).
    let answers = comptime!(chains || !only_inserts || !L::MOVES_PAIRS || want_slot);
    // Launches of static finds finish an operation in one branch (see the bookkeeping below).
    let lean_finds = comptime!(mode == op::FIND && !chains);
    // Walks that step along strided sequences (`walk_bucket`): finds, and every launch of one-lane tiles.
    let stepping = comptime!(lean_finds || tw == 1);
    // Cuckoo evictions (an exchange, then the displaced pair carried on), for the schemes that move pairs and
    // the layouts that can; a tile carries a displaced pair on after an eviction, or after a claim by exchange
    // (`!use_cas`) that took a pair stored concurrently. Stable schemes with compare-and-swap claims compile
    // all of it out (fewer instructions and live registers in their insert loop).
    let evicts = comptime!(inserts && !chains && L::MOVES_PAIRS && !S::STABLE);
    let carries = comptime!(inserts && !chains && L::MOVES_PAIRS && (!S::STABLE || !use_cas));
    // Insert-or-apply of a built-in reduction folds into a stored pair with one atomic that nothing waits for,
    // where a claimed slot keeps its key for the whole launch (a launch of inserts only, stable schemes whose
    // racing upserts meet in one slot, claims by compare-and-swap): min and max on the whole word (both sides
    // hold the key in the high half, so the order is the values'), add on the value's 32-bit half where the
    // launch binds it (`halves_bound`; elsewhere an add takes the compare-and-swap loop). cuCollections' way; the
    // loop waited for each update's atomic and retried it under contention (a counting table's many copies).
    let folds = comptime!(
        mode == op::INSERT
            && !chains
            && L::MOVES_PAIRS
            && L::HAS_VALUES
            && S::STABLE
            && S::UPSERTS_CONVERGE
            && use_cas
            && (F::KIND == kind::MIN
                || F::KIND == kind::MAX
                || (F::KIND == kind::ADD && halves_bound))
    );

    // Inserts that take erased slots on their walk (`reclaim_step`; cuckoo schemes and P2BHT: launches of
    // distinct keys), compiled in only for launches into tables that hold marks.
    let reclaims = comptime!(reclaim && only_inserts && !chains && use_cas);

    let tl = tile_lane(tw);
    let mut pending = lane.mine;
    let mut has_op = false;
    let mut cur = u32::new(mode as i64);
    let mut cur_key = L::Key::new(0);
    let mut cur_val = L::Value::new(0);
    let mut cur_child = u32::new(0);
    // The lane whose operation the tile serves.
    let mut serving = 0u32;
    let mut coherent = false;
    let mut state = blank_state();
    // The bucket being read: hashed from the state each step, or (chains) the link a step followed.
    let mut bucket = 0u32;
    let mut walk = no_walk(); // where a stepping walk stands (`stepping`)
    // Steps of the operation served (finds' probe counts).
    let mut steps = 0u32;
    let mut added = 0u32;
    let mut probes = 0u32;
    let mut retries = 0u32;
    let mut reclaimed = 0u32;
    // The first erased slot the insert served has passed (`reclaims`); keys promised absent (`upsert == 0`, a
    // launch of inserts only) take a mark at once.
    let mut mark = no_mark();
    let mut absent = false;
    if comptime!(mode == op::INSERT) {
        absent = meta.params.upsert == 0u32;
    }
    // Chains: a claim lost to another key goes on from the same view with that slot marked taken (`reuse`: no
    // read; the view's masks and link are kept field by field, as cube code cannot reassign a struct).
    let mut reuse = false;
    let mut kept_empty = 0u32;
    let mut kept_matched = 0u32;
    let mut kept_next = 0u32;
    // Walks: matches counted, the gather cursor.
    let mut walked = 0u32;
    let mut cursor = 0usize;
    // The tile's resident allocator block (chains with `resident`).
    let mut res = if comptime!(chains && inserts && resident) {
        resident_block(pool, tw)
    } else {
        ResidentBlock {
            block: 0u32,
            word: 0u32,
            loaded: false,
        }
    };
    let mut answer = blank_answer::<L::Value>();

    // Chains: each lane hashes its own key once, before the loop and in parallel (the tile takes the bucket with
    // the key), and the tile's lanes still to serve are one tile-uniform mask. Static schemes rehash per probe.
    let mut todo = 0u32;
    let mut my_bucket = 0u32;
    if comptime!(chains) {
        todo = tile_ballot(lane.mine, tl, tw);
        my_bucket = frame_bucket::<S, L>(meta, frames, lane.child, lane.key, 0u32, framed);
    }

    loop {
        // An idle tile takes the next pending lane's operation: its key (and value, table, operation, gather
        // cursor) move by shuffles, which every lane of the plane runs together.
        let mut take = false;
        let mut next = 0u32;
        let mut next_key = L::Key::new(0);
        let mut next_val = L::Value::new(0);
        let mut next_child = 0u32;
        let mut next_op = 0u32;
        let mut next_at = 0u32;
        let mut next_bucket = 0u32;
        if comptime!(chains) {
            // Shuffles only in steps where some tile of the plane is idle with work left (most steps of a
            // long list walk have none), and the loop ends when no tile holds an operation.
            take = !has_op && todo != 0u32;
            if tile_loop_any(take, tw) {
                if take {
                    next = todo.trailing_zeros();
                }
                next_key = L::shuffle_key(lane.key, next, tl, tw);
                next_bucket = tile_shuffle(my_bucket, next, tl, tw);
                if comptime!(inserts) {
                    next_val = L::shuffle_value(lane.value, next, tl, tw);
                }
                if comptime!(mode == op::MIXED) {
                    next_op = tile_shuffle(lane.op, next, tl, tw);
                }
                if comptime!(mode == op::GATHER) {
                    next_at = tile_shuffle(lane.at, next, tl, tw);
                }
                if take {
                    todo &= todo - 1u32;
                }
            }
            if !tile_loop_any(take || has_op, tw) {
                break;
            }
        } else {
            if !tile_loop_any(pending || has_op, tw) {
                break;
            }
            let queue = tile_ballot(pending, tl, tw);
            next = queue.trailing_zeros() % tw;
            next_key = L::shuffle_key(lane.key, next, tl, tw);
            if comptime!(inserts) {
                next_val = L::shuffle_value(lane.value, next, tl, tw);
            }
            if comptime!(framed) {
                next_child = tile_shuffle(lane.child, next, tl, tw);
            }
            if comptime!(mode == op::MIXED) {
                next_op = tile_shuffle(lane.op, next, tl, tw);
            }
            take = !has_op && queue != 0;
        }
        if take {
            has_op = true;
            serving = next;
            cur_key = next_key;
            cur_val = next_val;
            if comptime!(framed && !chains) {
                cur_child = next_child;
            }
            if comptime!(mode == op::MIXED) {
                cur = next_op;
            }
            steps = 0u32;
            walked = 0u32;
            if comptime!(inserts) {
                S::insert_start(&mut state, L::key_mix(cur_key));
            }
            if comptime!(reclaims) {
                mark.at = 0u32;
            }
            if comptime!(!only_inserts) {
                if cur > op::REPLACE {
                    S::find_start(&mut state);
                }
            }
            // Erases read coherently (their compare-and-swap expects the word read); so does everything
            // where no plain binding exists.
            coherent = false;
            if comptime!(chains) {
                coherent = cur == op::ERASE || cur == op::ERASE_ALL;
                bucket = next_bucket;
                reuse = false;
                if comptime!(mode == op::GATHER) {
                    cursor = next_at as usize;
                }
            } else if tl.lane == next {
                pending = false;
            }
        }

        // One probe: read the bucket and let the scheme decide.
        let read_index = state.hash_index;
        if comptime!(!chains) {
            bucket = walk_bucket::<S, L>(
                meta, frames, cur_child, cur_key, read_index, &mut walk, framed, stepping,
            );
        }
        let b = bucket;
        let slots = read_bucket::<L::Word>(
            table,
            table_plain,
            b,
            has_op && !reuse,
            coherent,
            tl,
            bucket_size,
            tw,
            read_mode,
        );
        // A scheme that reads two buckets before deciding (`S::PAIR_AT`) gets the second one loaded together
        // with the first, so that both loads are in flight at once; everything here compiles out for the others.
        let mut pair = false;
        let mut b2 = b;
        let mut slots2 = slots;
        if comptime!(inserts && S::PAIR_AT != NO_PAIR) {
            pair = has_op && read_index == S::PAIR_AT;
            if pair {
                b2 = frame_bucket::<S, L>(
                    meta,
                    frames,
                    cur_child,
                    cur_key,
                    read_index + 1u32,
                    framed,
                );
            }
            let second = read_bucket::<L::Word>(
                table,
                table_plain,
                b2,
                pair,
                coherent,
                tl,
                bucket_size,
                tw,
                read_mode,
            );
            slots2.w0 = second.w0;
            slots2.w1 = second.w1;
            slots2.w2 = second.w2;
            slots2.w3 = second.w3;
        }
        let view = if comptime!(chains) {
            let read = slab_view::<L>(slots, cur_key, tl, matching, tw);
            let mut empty = read.empty;
            let mut matched = read.matched;
            let mut link = read.next;
            if reuse {
                empty = kept_empty;
                matched = kept_matched;
                link = kept_next;
            }
            BucketView {
                empty,
                matched,
                next: link,
            }
        } else {
            key_view::<L>(slots, cur_key, tl, bucket_size, tw)
        };

        // The erased slots of the bucket read (a ballot: every lane of the plane takes part).
        let mut marked = 0u32;
        if comptime!(reclaims) {
            marked = slots_holding(slots, L::ERASED_WORD.runtime(), tl, bucket_size, tw);
        }

        // The scheme's step: an insert's or a find's (erases, counts and walks look the key up as finds do).
        let mut act = u32::new(action::NEXT as i64);
        let mut target = 0u32;
        let mut slot = 0u32;
        let mut is_insert = false;
        if comptime!(only_inserts) {
            is_insert = true;
        }
        if comptime!(mode == op::MIXED) {
            is_insert = cur <= op::REPLACE;
        }
        if has_op {
            if comptime!(count_probes) {
                steps += 1u32;
                probes += 1u32;
            }
            if comptime!(inserts) {
                if is_insert {
                    if comptime!(mode == op::INSERT) {
                        let st = S::insert_step(&mut state, view, meta.params, bucket_size);
                        act = st.action;
                        target = st.target;
                        slot = st.slot;
                    } else {
                        // A replace is an upsert whatever the table's rule.
                        let mut upsert = meta.params.upsert;
                        if cur == op::REPLACE {
                            upsert = 1u32;
                        }
                        let params = SchemeParams {
                            num_hashes: meta.params.num_hashes,
                            max_chain: meta.params.max_chain,
                            threshold: meta.params.threshold,
                            upsert,
                        };
                        let st = S::insert_step(&mut state, view, params, bucket_size);
                        act = st.action;
                        target = st.target;
                        slot = st.slot;
                    }
                    if comptime!(reclaims) {
                        let st = make_step(act, target, slot);
                        let st = reclaim_step(st, marked, read_index, absent, &mut mark);
                        act = st.action;
                        target = st.target;
                        slot = st.slot;
                    }
                }
            }
            if comptime!(!only_inserts) {
                if !is_insert {
                    let st = S::find_step(&mut state, view, meta.params, bucket_size);
                    act = st.action;
                    target = st.target;
                    slot = st.slot;
                }
            }
        }
        // The action is on the pair's second bucket (whose slots are then the ones to act on).
        let mut on_second = false;
        if comptime!(inserts && S::PAIR_AT != NO_PAIR) {
            // The view's ballots only when some tile of the plane read a pair (uniform across the plane).
            if tile_loop_any(pair, tw) {
                let view2 = key_view::<L>(slots2, cur_key, tl, bucket_size, tw);
                let mut marked2 = 0u32;
                if comptime!(reclaims) {
                    marked2 = slots_holding(slots2, L::ERASED_WORD.runtime(), tl, bucket_size, tw);
                }
                if pair && act == action::NEXT && state.hash_index == read_index + 1u32 {
                    let st = S::insert_step(&mut state, view2, meta.params, bucket_size);
                    if comptime!(count_probes) {
                        probes += 1u32;
                    }
                    act = st.action;
                    target = st.target;
                    slot = st.slot;
                    if comptime!(reclaims) {
                        let st = make_step(act, target, slot);
                        let st = reclaim_step(st, marked2, read_index + 1u32, absent, &mut mark);
                        act = st.action;
                        target = st.target;
                        slot = st.slot;
                    }
                    on_second = target == read_index + 1u32;
                }
            }
        }
        if comptime!(!L::MOVES_PAIRS && !chains) {
            // A layout whose pairs cannot move atomically hands an eviction back as a failure (stable schemes,
            // the only ones such tables run, never ask for one).
            if act == action::EVICT {
                act = action::FAIL;
            }
        }

        // The slot's word as its owner lane read it, broadcast to the tile.
        let mut seen = EMPTY_WORD.runtime();
        if comptime!(needs_seen) {
            if comptime!(inserts && S::PAIR_AT != NO_PAIR) {
                seen = slot_word(
                    pick_slots(slots, slots2, on_second),
                    slot,
                    tl,
                    bucket_size,
                    tw,
                );
            } else {
                seen = slot_word(slots, slot, tl, bucket_size, tw);
            }
        }
        // A find's value: in the slot word (packed), or read by the slot's owner lane from the value array and
        // shuffled to the tile (every lane of the plane takes part).
        let mut found_value = L::Value::new(0);
        if comptime!(finds) {
            if comptime!(needs_seen && L::MOVES_PAIRS) {
                found_value = L::value_of(seen);
            } else {
                let mut finding = has_op && act == action::FOUND;
                if comptime!(mode == op::MIXED) {
                    finding = finding && cur == op::FIND;
                }
                found_value =
                    L::tile_value(slots, slot, b, finding, table_values, tl, bucket_size, tw);
            }
        }
        // The action's bucket is nearly always the one just read; hashing again costs ~10% of the instructions.
        // A step that moves on acts on nothing (a walk's target is then the next probe: no hash for it here).
        let mut tb = b;
        if comptime!(inserts && !chains) {
            if on_second {
                tb = b2;
            } else if target != read_index && act != action::NEXT {
                tb = frame_bucket::<S, L>(meta, frames, cur_child, cur_key, target, framed);
            }
        }

        // The memory action, on the owner lane of the slot (lane 0 for a link).
        let owner = slot % tw;
        let addr = slot_address(tb, slot, bucket_size);
        let mut mine = L::slot_word(cur_key, cur_val);
        if comptime!(inserts && L::MOVES_PAIRS && F::KIND != kind::ASSIGN && !folds) {
            // Insert-or-apply in the table (`F`): an update combines the stored value with the carried one; a
            // lost compare-and-swap re-reads the slot and combines again.
            if act == action::UPDATE {
                mine = L::slot_word(cur_key, F::reduce::<L::Value>(L::value_of(seen), cur_val));
            }
        }
        let mut old = EMPTY_WORD.runtime();
        // An append's outcome, from lane 0: the slab linked, `u32::MAX` (another tile linked first) or
        // OUT_OF_SLABS.
        let mut linked = 4294967295u32;
        // A new slab for a full list: from the tile's resident block (the whole plane takes part), or from
        // the hashed bitmap by lane 0 below.
        let mut fresh = 4294967295u32;
        if comptime!(chains && inserts && resident) {
            let wants = has_op && is_insert && act == action::APPEND;
            fresh = tile_alloc_slab(bitmap, pool, wants, &mut res, tl, tw);
        }
        // `ok`: the owner's atomic found the word it expected (an empty slot for a claim or an eviction, the word
        // the tile read for an update or an erase; an exchange-update, its own key's pair).
        let mut ok = false;
        if has_op && tl.lane == owner {
            let w = owner_write::<L, F>(
                table, halves, addr, act, cur, mine, seen, cur_key, inserts, erases, chains,
                use_cas, evicts, folds, reclaims,
            );
            old = w.old;
            ok = w.ok;
        }
        if comptime!(chains && inserts) {
            if has_op && is_insert && act == action::APPEND && tl.lane == 0u32 {
                if comptime!(!resident) {
                    fresh = alloc_slab(
                        bitmap,
                        pool,
                        (L::key_mix(cur_key) ^ serving) * 2654435761u32,
                    );
                }
                linked = link_slab::<L>(table, bitmap, fresh, b, meta.num_buckets);
            }
        }
        // Walks over every match of a slab: erase them all, or gather their values.
        let mut multi = 0u32;
        if comptime!(walks) {
            multi = walk_matches::<L>(
                table,
                table_values,
                out,
                slots,
                view.matched,
                b,
                cursor,
                has_op,
                tl,
                comptime!(mode == op::ERASE_ALL),
                comptime!(mode == op::GATHER),
                tw,
            );
        }
        // What the owner's atomic saw, broadcast only where a tile uses it: a displaced pair to carry on, and a
        // chained replace asking whose key took a slot it lost.
        let mut old_all = EMPTY_WORD.runtime();
        if comptime!(carries || (chains && (mode == op::REPLACE || mode == op::MIXED))) {
            old_all = tile_shuffle_u64(old, owner, tl, tw);
        }
        // The tile's write succeeded: the owner's `ok` by one shuffle (a ballot costs more instructions; a tile-wide
        // test of the expected word, selects and flag copies in every step: 2.5% of an IHT insert's rate). Tiles
        // that carry displaced pairs hold the owner's word already and test it below instead (the shuffle of `ok`
        // on top cost BCHT inserts 3-9%).
        let mut won = false;
        if comptime!(!carries && (inserts || erases)) {
            won = tile_shuffle(u32::cast_from(ok), owner, tl, tw) != 0u32;
        }
        let mut link_now = 4294967295u32;
        if comptime!(chains && inserts) {
            link_now = tile_shuffle(linked, 0u32, tl, tw);
        }
        reuse = false;

        // Tile-uniform bookkeeping: what the tile does next, and the serving lane's answer when it is done.
        // A finished operation clears `has_op` where it finishes and answers its lane there (no flag carried
        // to the end of the step: booleans kept across branches cost the loop instructions).
        if has_op {
            if comptime!(inserts) {
                if is_insert {
                    // The three actions that write a slot in one branch (CLAIM or UPDATE is one test; apart, the
                    // compiler dispatches every step of a static insert through a jump table, 3% of an IHT insert's
                    // instructions).
                    let mut writes = act == action::CLAIM || act == action::UPDATE;
                    if comptime!(evicts) {
                        writes = writes || act == action::EVICT;
                    }
                    if comptime!(reclaims) {
                        writes = writes || act == action::RECLAIM;
                    }
                    if writes {
                        if comptime!(carries) {
                            // Claims and evictions expected an empty slot, reclaims a mark, updates the word read.
                            let mut expected = seen;
                            if act != action::UPDATE {
                                expected = EMPTY_WORD.runtime();
                            }
                            if comptime!(reclaims) {
                                if act == action::RECLAIM {
                                    expected = L::ERASED_WORD.runtime();
                                }
                            }
                            won = old_all == expected;
                            if comptime!(!use_cas) {
                                if act == action::UPDATE {
                                    // An exchange took back whatever pair was there: its own key's, or a stranger's.
                                    won = L::key_of(old_all) == cur_key;
                                }
                            }
                        }
                        if won {
                            has_op = false;
                            // A runtime variable (a bare constant would be a compile-time one, which the branch below cannot set).
                            let mut done = status::UPDATED.runtime();
                            if act != action::UPDATE {
                                added += 1u32;
                                done = status::INSERTED;
                            }
                            if comptime!(reclaims) {
                                reclaimed += u32::cast_from(act == action::RECLAIM);
                            }
                            if comptime!(answers) {
                                if tl.lane == serving {
                                    settle::<L::Value>(
                                        &mut answer,
                                        done,
                                        walked,
                                        steps,
                                        L::Value::new(0),
                                        addr as u32,
                                        false,
                                        comptime!(!L::MOVES_PAIRS || want_slot),
                                    );
                                }
                            }
                        } else {
                            // A write that did not succeed: a claim or update that lost its race, or an exchange that
                            // displaced a pair.
                            if comptime!(use_cas) && (comptime!(!evicts) || act != action::EVICT) {
                                if comptime!(chains) {
                                    if act == action::UPDATE {
                                        coherent = true;
                                    } else if cur == op::INSERT || L::key_of(old_all) != cur_key {
                                        // Another key took the slot: the next empty slot of the same view.
                                        kept_empty = view.empty & !(1u32 << slot);
                                        kept_matched = view.matched;
                                        kept_next = view.next;
                                        reuse = true;
                                    } else {
                                        // A racing replace of our key: read again, where it is a match.
                                        coherent = true;
                                    }
                                } else {
                                    coherent = true; // lost the race: re-read this bucket coherently
                                    if comptime!(count_probes) {
                                        retries += 1u32;
                                    }
                                    if comptime!(reclaims) {
                                        if act == action::RECLAIM {
                                            // Another insert took the mark: walk again from the start, where
                                            // the copy of the key that won (if it was one) is matched.
                                            S::insert_start(&mut state, L::key_mix(cur_key));
                                            mark.at = 0u32;
                                        }
                                    }
                                }
                            } else if comptime!(carries) {
                                // We hold the displaced pair now and must place it.
                                cur_key = L::key_of(old_all);
                                cur_val = L::value_of(old_all);
                                coherent = false;
                                if act == action::EVICT {
                                    let from = evicted_from::<S, L>(
                                        meta, frames, cur_child, cur_key, tb, framed,
                                    );
                                    S::after_evict(&mut state, from, meta.params);
                                } else {
                                    // An exchange displaced a pair stored concurrently: insert it afresh.
                                    S::insert_start(&mut state, L::key_mix(cur_key));
                                }
                            }
                        }
                    } else if act == action::FAIL {
                        has_op = false;
                        if comptime!(answers) {
                            if tl.lane == serving {
                                settle::<L::Value>(
                                    &mut answer,
                                    status::FAILED,
                                    walked,
                                    steps,
                                    L::Value::new(0),
                                    addr as u32,
                                    false,
                                    false,
                                );
                            }
                        }
                        if comptime!(!chains) {
                            if tl.lane == 0u32 {
                                let at = counters[FAILED_COUNTER as usize].fetch_add(1u32);
                                L::stash(failed, at as usize, mine, cur_key, cur_val);
                                if comptime!(framed) {
                                    // Each table's failures too (rare: one atomic each), so that each table's
                                    // count of stored pairs stays exact even when the launch's stash overflows.
                                    counters[(failed_per_table + cur_child) as usize]
                                        .fetch_add(1u32);
                                }
                            }
                        }
                    }
                    if comptime!(chains) {
                        if act == action::FOLLOW {
                            bucket = view.next;
                        } else if act == action::APPEND {
                            if link_now == OUT_OF_SLABS {
                                // Not done: to run again after the pool has grown.
                                has_op = false;
                                if comptime!(answers) {
                                    if tl.lane == serving {
                                        settle::<L::Value>(
                                            &mut answer,
                                            status::NO_SLAB,
                                            walked,
                                            steps,
                                            L::Value::new(0),
                                            addr as u32,
                                            false,
                                            false,
                                        );
                                    }
                                }
                            } else if link_now != 4294967295u32 {
                                bucket = link_now;
                            } else {
                                // Another tile linked a slab first: re-read this one (its link is set now).
                                coherent = true;
                            }
                        }
                    }
                }
            }
            if comptime!(lean_finds) {
                // A launch of static finds: one finishing branch, as lean as the find loop can be (the find
                // kernels issue an instruction nearly every cycle, so each instruction of this per-step block
                // costs about its share of the rate). The answer's status starts as NOT_FOUND.
                if act != action::NEXT {
                    has_op = false;
                    if tl.lane == serving {
                        answer.probes = steps;
                        if act == action::FOUND {
                            answer.status = status::FOUND;
                            answer.value = found_value;
                            if comptime!(want_slot) {
                                answer.slot = addr as u32;
                            }
                        }
                    }
                }
            }
            if comptime!(!only_inserts && !lean_finds) {
                if !is_insert {
                    if act == action::FOUND {
                        if comptime!(finds) {
                            if cur == op::FIND {
                                has_op = false;
                                if comptime!(answers) {
                                    if tl.lane == serving {
                                        settle::<L::Value>(
                                            &mut answer,
                                            status::FOUND,
                                            walked,
                                            steps,
                                            found_value,
                                            addr as u32,
                                            true,
                                            want_slot,
                                        );
                                    }
                                }
                            }
                        }
                        if comptime!(erases) {
                            if cur == op::ERASE {
                                if comptime!(carries) {
                                    // The tile holds the owner's word (see `won`): the erase expected the word read.
                                    won = old_all == seen;
                                }
                                if won {
                                    has_op = false;
                                    if comptime!(answers) {
                                        if tl.lane == serving {
                                            settle::<L::Value>(
                                                &mut answer,
                                                status::ERASED,
                                                1u32,
                                                steps,
                                                L::Value::new(0),
                                                addr as u32,
                                                false,
                                                false,
                                            );
                                        }
                                    }
                                } else {
                                    // The slot changed under us: read the bucket again.
                                    coherent = true;
                                }
                            }
                        }
                        if comptime!(walks) {
                            if comptime!(mode == op::ERASE_ALL) {
                                walked += multi;
                            } else {
                                walked += view.matched.count_ones();
                            }
                            cursor += view.matched.count_ones() as usize;
                            let more = S::find_more(&mut state, view, meta.params).action;
                            if more == action::FOLLOW {
                                bucket = view.next;
                            } else if more == action::ABSENT {
                                has_op = false;
                                if comptime!(answers) {
                                    if tl.lane == serving {
                                        settle::<L::Value>(
                                            &mut answer,
                                            status::NOT_FOUND,
                                            walked,
                                            steps,
                                            L::Value::new(0),
                                            addr as u32,
                                            false,
                                            false,
                                        );
                                    }
                                }
                            }
                        }
                    } else if act == action::ABSENT {
                        has_op = false;
                        if comptime!(answers) {
                            if tl.lane == serving {
                                settle::<L::Value>(
                                    &mut answer,
                                    status::NOT_FOUND,
                                    walked,
                                    steps,
                                    L::Value::new(0),
                                    addr as u32,
                                    false,
                                    false,
                                );
                            }
                        }
                    }
                    if comptime!(chains) {
                        if act == action::FOLLOW {
                            bucket = view.next;
                        }
                    }
                }
            }
        }
    }
    answer.tile_added = added;
    answer.tile_probes = probes;
    answer.tile_retries = retries;
    answer.tile_reclaimed = reclaimed;
    answer
}
