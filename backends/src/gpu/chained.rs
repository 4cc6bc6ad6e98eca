//! The GPU store of chained (SlabHash) tables, in progress (issue 10): 32-bit keys and values, a thread per
//! operation, each tile serving its lanes' operations one after another (warp-cooperative work sharing). Not yet behind `ChainedTable` (mixed batches and the wide layouts are still to come); tested
//! against the CPU store (`tests/tests/chained.rs`).
//!
//! **Layout.** One slab array of `u64` words, 16 per slab: slots 0..15 hold packed pairs (`key << 32 | value`,
//! all ones: empty, key `u32::MAX - 1`: tombstone) and word 15 the link (`NO_NEXT` in its low half: none; all
//! ones until linked). Slab `b < buckets` is bucket `b`'s head; pool slab `p` is slab `buckets + p`. A tile of
//! `min(16, plane)` lanes reads a slab as one bucket (`read_slots` at bucket size 16) and the chaining scheme
//! (`hashtile_probing::Chain`) decides each step from the view, as the static drivers do.
//!
//! **Allocation.** A bitmap of pool slabs: a tile's lane 0 reads one word (chosen by a hash of the operation),
//! takes a clear bit with one atomic OR, and moves to the next word only when its word is full. It links the
//! slab with one compare-and-swap on the tail's link word, and frees the slab again if another tile linked
//! first. An operation that finds no free slab is recorded in a retry list. The host grows the pool (a larger
//! array, the old slabs copied; indices stay valid) and runs the recorded operations again.

use super::device_api::{ShapeScalars, bucket_of, meta_of};
use super::{CUBE_SIZE, cube_count, fill_u32, fill_u64, shape_scalars, shape_words_of};
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::{
    BucketView, ProbingScheme, SchemeInfo, SchemeParams, action, blank_state,
};
use hashtile_core::tile::{
    EMPTY_WORD, LaneSlots, TileLane, pack_word, read_slots_either, slot_word, tile_ballot,
    tile_lane, tile_loop_any, tile_shuffle, tile_shuffle_u64, view_of, word_key, word_value,
};
use hashtile_core::{Error, HashFamily, Result};
use hashtile_probing::Chain;

/// Words per slab (15 slots and the link).
pub const SLAB_WORDS: u32 = 16;
/// The link's slot.
const LINK_SLOT: u32 = 15;
/// The view bits of the 15 pair slots.
const PAIR_SLOTS: u32 = 0x7fff;
/// Counters of new pairs, spread out: tiles add their counts to one of these, each on its own 128-byte line.
const NEW_COUNTERS: u32 = 64;
/// Words between counters (a 128-byte line each: same-line atomics queue in one L2 slice).
const COUNTER_STRIDE: u32 = 32;
/// Words of the counter array: the retry count's line, then the new-pair counters' lines.
const COUNTER_WORDS: usize = ((1 + NEW_COUNTERS) * COUNTER_STRIDE) as usize;
/// An erased slot's word: key `u32::MAX - 1` (never a key), value 0.
pub const TOMB_WORD: u64 = 0xffff_fffe_0000_0000;

/// What a walk kernel does with a key's matches.
pub mod walk {
    /// The first match's value (`out[q]`) and whether there is one (`aux[q]`).
    pub const FIND: u32 = 0;
    /// How many matches (`out[q]`).
    pub const COUNT: u32 = 1;
    /// Every match's value, written from `aux[q]` (the exclusive scan of the counts) into `out`.
    pub const GATHER: u32 = 2;
    /// Tombstones the first match; `out[q]`: 1 if one was erased.
    pub const ERASE: u32 = 3;
    /// Tombstones every match; `out[q]`: how many.
    pub const ERASE_ALL: u32 = 4;
}

/// The view of a slab just read: the pair slots' masks and the link.
#[cube]
fn slab_view(slots: LaneSlots, key: u32, tl: TileLane, #[comptime] tw: u32) -> BucketView {
    let v = view_of(slots, key as u64, 32u32, tl, SLAB_WORDS, tw);
    let link = slot_word(slots, LINK_SLOT, tl, SLAB_WORDS, tw);
    BucketView {
        empty: v.empty & PAIR_SLOTS,
        matched: v.matched & PAIR_SLOTS,
        next: (link & 0xffff_ffffu64) as u32,
    }
}

/// Takes a free pool slab (its pool index), starting at word `start` of the bitmap; `u32::MAX` when every word
/// is full. One atomic in the common case.
// `div_ceil` is not a CubeCL operation.
#[allow(clippy::manual_div_ceil)]
#[cube]
fn alloc_slab(bitmap: &Array<Atomic<u32>>, pool: u32, start: u32) -> u32 {
    let words = (pool + 31u32) / 32u32;
    let mut got = 4294967295u32; // u32::MAX, as a literal: a runtime variable
    let mut w = start % words;
    let mut seen = 0u32;
    loop {
        if seen >= words || got != 4294967295u32 {
            break;
        }
        // Bits past the pool's end count as taken.
        let tail = pool - w * 32u32;
        let mut valid = 4294967295u32;
        if tail < 32u32 {
            valid = (1u32 << tail) - 1u32;
        }
        let open = !bitmap[w as usize].load() & valid;
        let b = open.trailing_zeros();
        let bit = 1u32 << (b % 32u32);
        let mut before = bit;
        if open != 0u32 {
            before = bitmap[w as usize].fetch_or(bit);
        }
        if before & bit == 0u32 {
            got = w * 32u32 + b;
        }
        // A full word moves on; a bit another tile took first sends us back to the same word.
        if open == 0u32 {
            w = (w + 1u32) % words;
            seen += 1u32;
        }
    }
    got
}

/// Returns pool slab `p` to the allocator.
#[cube]
fn free_slab(bitmap: &Array<Atomic<u32>>, p: u32) {
    bitmap[(p / 32u32) as usize].fetch_and(!(1u32 << (p % 32u32)));
}

/// Inserts `(keys[q], values[q])` for `q < n` (with `indexed`: for `q = sel[0..n]`), a thread per pair: a
/// further copy (`shape.upsert == 0`) or insert-or-overwrite (`1`). `counters[0]`: operations recorded in
/// `retry` (the pool ran out); `counters[COUNTER_STRIDE * (1 + i)]` for `i < NEW_COUNTERS`: new pairs stored,
/// each tile adding its count once, at its end (an atomic per stored pair, on few lines, took most of the time:
/// 1.40 against 2.09 G keys/s on the H100 once work sharing made the other costs smaller). `pool`: pool
/// slabs (the bitmap's bits).
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn chained_insert_kernel(
    keys: &Array<u32>,
    values: &Array<u32>,
    sel: &Array<u32>,
    n: u32,
    slabs: &Array<Atomic<u64>>,
    slabs_plain: &Array<u64>,
    bitmap: &Array<Atomic<u32>>,
    pool: u32,
    retry: &mut Array<u32>,
    counters: &Array<Atomic<u32>>,
    shape: &ShapeScalars,
    #[comptime] indexed: bool,
    #[comptime] plain_reads: bool,
    #[comptime] tw: u32,
) {
    let tl = tile_lane(tw);
    let t = ABSOLUTE_POS;
    let meta = meta_of(shape);
    // This thread's operation: pair `t`, or with `indexed` the pair `sel[t]` names (a rerun of those that ran
    // out of slabs). The tile serves its lanes' operations one after another (warp-cooperative work sharing):
    // a thread per operation, as the static inserts launch, not a tile per operation.
    let mine = t < n as usize;
    let mut my_q = t;
    let mut my_key = 0u32;
    let mut my_value = 0u32;
    if mine {
        if comptime!(indexed) {
            my_q = sel[t] as usize;
        }
        my_key = keys[my_q];
        my_value = values[my_q];
    }
    let mut todo = tile_ballot(mine, tl, tw);
    // The operation being served (the same in every lane of the tile).
    let mut active = false;
    let mut q = 0usize;
    let mut key = 0u32;
    let mut value = 0u32;
    let mut slab = 0u32;
    let mut state = blank_state();
    // Plain reads first (a stale view only costs a failed compare-and-swap: claims take the first empty slot,
    // and links are set once), coherent re-reads after a lost compare-and-swap, as the static inserts do.
    let mut coherent = true;
    // A claim lost to another key goes on from the same view with that slot marked taken (`reuse`: no read;
    // the view's masks and link are kept field by field, as cube code cannot reassign a struct).
    let mut reuse = false;
    let mut kept_empty = 0u32;
    let mut kept_matched = 0u32;
    let mut kept_next = 0u32;
    // Pairs this tile stored (counted in lane 0).
    let mut stored = 0u32;
    loop {
        // A tile without an operation takes its next lane's (shuffles: in every lane of the plane, or none).
        let pick = !active && todo != 0u32;
        if tile_loop_any(pick, tw) {
            let mut b = 0u32;
            if pick {
                b = todo.trailing_zeros();
            }
            let nk = tile_shuffle(my_key, b, tl, tw);
            let nv = tile_shuffle(my_value, b, tl, tw);
            let nq = tile_shuffle(my_q as u32, b, tl, tw);
            if pick {
                key = nk;
                value = nv;
                q = nq as usize;
                slab = bucket_of(meta, key, 0u32);
                Chain::insert_start(&mut state, 1u32);
                coherent = true;
                if comptime!(plain_reads) {
                    coherent = false;
                }
                reuse = false;
                active = true;
                todo &= todo - 1u32;
            }
        }
        if !tile_loop_any(active, tw) {
            break;
        }
        let slots = read_slots_either(
            slabs,
            slabs_plain,
            slab,
            active && !reuse,
            coherent,
            tl,
            SLAB_WORDS,
            tw,
        );
        let read = slab_view(slots, key, tl, tw);
        let mut empty = read.empty;
        let mut matched = read.matched;
        let mut link = read.next;
        if reuse {
            empty = kept_empty;
            matched = kept_matched;
            link = kept_next;
        }
        let view = BucketView {
            empty,
            matched,
            next: link,
        };
        let step = Chain::insert_step(&mut state, view, meta.params, SLAB_WORDS);
        let seen = slot_word(slots, step.slot, tl, SLAB_WORDS, tw);
        let owner = step.slot % tw == tl.lane;
        let at = (slab * SLAB_WORDS + step.slot) as usize;
        let mut ok = false;
        let mut out_of_slabs = false;
        let mut linked = 4294967295u32;
        let mut taken = 0xffff_ffff_ffff_ffffu64; // EMPTY_WORD, as a literal: a runtime variable
        if active {
            if step.action == action::CLAIM && owner {
                taken = slabs[at].compare_exchange_weak(EMPTY_WORD, pack_word(key, value));
                ok = taken == EMPTY_WORD;
            } else if step.action == action::UPDATE && owner {
                ok = slabs[at].compare_exchange_weak(seen, pack_word(key, value)) == seen;
            } else if step.action == action::APPEND && tl.lane == 0u32 {
                let p = alloc_slab(bitmap, pool, (q as u32) * 2654435761u32);
                if p == 4294967295u32 {
                    out_of_slabs = true;
                } else {
                    let s = meta.num_buckets + p;
                    let link_at = (slab * SLAB_WORDS + LINK_SLOT) as usize;
                    let word = 0xffff_ffff_0000_0000u64 | (s as u64);
                    if slabs[link_at].compare_exchange_weak(EMPTY_WORD, word) == EMPTY_WORD {
                        linked = s;
                    } else {
                        free_slab(bitmap, p);
                    }
                }
            }
        }
        let done = tile_ballot(ok, tl, tw) != 0u32;
        let failed = tile_ballot(out_of_slabs, tl, tw) != 0u32;
        let next = tile_shuffle(linked, 0u32, tl, tw);
        let taken = tile_shuffle_u64(taken, step.slot % tw, tl, tw);
        reuse = false;
        if active {
            if step.action == action::CLAIM || step.action == action::UPDATE {
                // A lost compare-and-swap re-reads the slab (a racing replace of the key is then a match).
                if done {
                    if step.action == action::CLAIM {
                        stored += 1u32;
                    }
                    active = false;
                } else if step.action == action::CLAIM
                    && (meta.params.upsert == 0u32 || word_key(taken) != key)
                {
                    // Another key took the slot: the next empty slot of the same view, no re-read.
                    kept_empty = empty & !(1u32 << step.slot);
                    kept_matched = matched;
                    kept_next = link;
                    reuse = true;
                } else {
                    // A racing replace of our key (then a match), or a lost update: read again, coherently.
                    coherent = true;
                }
            } else if step.action == action::FOLLOW {
                slab = view.next;
            } else if step.action == action::APPEND {
                if failed {
                    if tl.lane == 0u32 {
                        let at = counters[0].fetch_add(1u32);
                        retry[at as usize] = q as u32;
                    }
                    active = false;
                } else if next != 4294967295u32 {
                    slab = next;
                } else {
                    coherent = true;
                }
                // Else another tile linked a slab first: re-read this one (its link is set now).
            }
        }
    }
    if tl.lane == 0u32 && stored > 0u32 {
        let c = (t as u32 / tw) % NEW_COUNTERS;
        counters[((1u32 + c) * COUNTER_STRIDE) as usize].fetch_add(stored);
    }
}

/// Walks the list of `keys[q]` for `q < n`, a thread per key (served by its tile), doing `mode` ([`walk`]) with its matches. Erases
/// read `slabs` (coherent atomic loads, before their compare-and-swaps); the read-only modes read `slabs_plain`,
/// the same buffer bound without atomics (CubeCL lowers an atomic load to an atomic add of zero on CUDA: 16 per
/// slab read). Each launch binds the buffer once, the other argument a dummy (Vulkan binds a buffer once).
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
#[cube(launch_unchecked)]
pub fn chained_walk_kernel(
    keys: &Array<u32>,
    n: u32,
    slabs: &Array<Atomic<u64>>,
    slabs_plain: &Array<u64>,
    out: &mut Array<u32>,
    aux: &mut Array<u32>,
    shape: &ShapeScalars,
    #[comptime] mode: u32,
    #[comptime] tw: u32,
) {
    let tl = tile_lane(tw);
    let meta = meta_of(shape);
    // A thread per key; the tile serves its lanes' keys one after another (work sharing).
    let mine = ABSOLUTE_POS < n as usize;
    let mut my_key = 0u32;
    if mine {
        my_key = keys[ABSOLUTE_POS];
    }
    let mut todo = tile_ballot(mine, tl, tw);
    let group = ABSOLUTE_POS - tl.lane as usize;
    // The key being served (the same in every lane of the tile).
    let mut active = false;
    let mut q = 0usize;
    let mut key = 0u32;
    let mut slab = 0u32;
    let mut w = 0usize;
    let mut state = blank_state();
    let mut c = 0u32;
    let mut value = 0u32;
    let mut found = 0u32;
    loop {
        let pick = !active && todo != 0u32;
        if tile_loop_any(pick, tw) {
            let mut b = 0u32;
            if pick {
                b = todo.trailing_zeros();
            }
            let nk = tile_shuffle(my_key, b, tl, tw);
            if pick {
                key = nk;
                q = group + b as usize;
                slab = bucket_of(meta, key, 0u32);
                if comptime!(mode == walk::GATHER) {
                    w = aux[q] as usize;
                }
                Chain::find_start(&mut state);
                c = 0u32;
                value = 0u32;
                found = 0u32;
                active = true;
                todo &= todo - 1u32;
            }
        }
        if !tile_loop_any(active, tw) {
            break;
        }
        let slots = read_slots_either(
            slabs,
            slabs_plain,
            slab,
            active,
            comptime!(mode == walk::ERASE || mode == walk::ERASE_ALL),
            tl,
            SLAB_WORDS,
            tw,
        );
        let view = slab_view(slots, key, tl, tw);
        let mut act = Chain::find_step(&mut state, view, meta.params, SLAB_WORDS).action;
        let first = view.matched.trailing_zeros();
        let word = slot_word(slots, first % SLAB_WORDS, tl, SLAB_WORDS, tw);
        // This lane's matched slots (slot `lane`, and `lane + tw` when a lane holds two).
        let m0 = active && (view.matched >> tl.lane) & 1u32 == 1u32;
        let mut m1 = false;
        if comptime!(SLAB_WORDS / tw >= 2) {
            m1 = active && (view.matched >> (tl.lane + tw)) & 1u32 == 1u32;
        }
        let mut ok0 = false;
        let mut ok1 = false;
        if comptime!(mode == walk::ERASE) {
            if active && act == action::FOUND && first % tw == tl.lane {
                let at = (slab * SLAB_WORDS + first) as usize;
                ok0 = slabs[at].compare_exchange_weak(word, TOMB_WORD) == word;
            }
        }
        if comptime!(mode == walk::ERASE_ALL) {
            let base = (slab * SLAB_WORDS + tl.lane) as usize;
            if m0 {
                ok0 = slabs[base].compare_exchange_weak(slots.w0, TOMB_WORD) == slots.w0;
            }
            if m1 {
                let at = base + tw as usize;
                ok1 = slabs[at].compare_exchange_weak(slots.w1, TOMB_WORD) == slots.w1;
            }
        }
        if comptime!(mode == walk::GATHER) {
            let below = view.matched & ((1u32 << tl.lane) - 1u32);
            if m0 {
                out[w + below.count_ones() as usize] = word_value(slots.w0);
            }
            if m1 {
                let below1 = view.matched & ((1u32 << (tl.lane + tw)) - 1u32);
                out[w + below1.count_ones() as usize] = word_value(slots.w1);
            }
        }
        let b0 = tile_ballot(ok0, tl, tw);
        let b1 = tile_ballot(ok1, tl, tw);
        if active {
            if act == action::FOUND {
                if comptime!(mode == walk::FIND) {
                    value = word_value(word);
                    found = 1u32;
                    act = action::ABSENT;
                } else if comptime!(mode == walk::ERASE) {
                    if b0 != 0u32 {
                        c = 1u32;
                        act = action::ABSENT;
                    } else {
                        // The slot changed under us: read the slab again.
                        act = action::NEXT;
                    }
                } else {
                    if comptime!(mode == walk::ERASE_ALL) {
                        c += b0.count_ones() + b1.count_ones();
                    } else {
                        c += view.matched.count_ones();
                    }
                    w += view.matched.count_ones() as usize;
                    act = Chain::find_more(&mut state, view, meta.params).action;
                }
            }
            if act == action::FOLLOW {
                slab = view.next;
            } else if act == action::ABSENT {
                active = false;
                if tl.lane == 0u32 {
                    if comptime!(mode == walk::FIND) {
                        out[q] = value;
                        aux[q] = found;
                    } else if comptime!(mode != walk::GATHER) {
                        out[q] = c;
                    }
                }
            }
        }
    }
}

/// Compacts bucket `b`'s list (a thread per bucket; nothing else runs meanwhile): its live pairs move to the
/// front in list order, the slabs left over are emptied and freed (`freed[0]` counts them).
#[cube(launch_unchecked)]
pub fn chained_flush_kernel(
    slabs: &mut Array<u64>,
    bitmap: &Array<Atomic<u32>>,
    freed: &Array<Atomic<u32>>,
    buckets: u32,
) {
    let b = ABSOLUTE_POS as u32;
    if b < buckets {
        let mut ws = b;
        let mut wi = 0u32;
        let mut rs = b;
        loop {
            for i in 0..15u32 {
                let word = slabs[(rs * SLAB_WORDS + i) as usize];
                // Live: neither empty nor a tombstone (key `u32::MAX - 1`).
                if word != EMPTY_WORD && (word >> 32u64) as u32 != 4294967294u32 {
                    if wi == 15u32 {
                        // The write cursor trails the read cursor: its slab's link is still intact.
                        ws =
                            (slabs[(ws * SLAB_WORDS + LINK_SLOT) as usize] & 0xffff_ffffu64) as u32;
                        wi = 0u32;
                    }
                    slabs[(ws * SLAB_WORDS + wi) as usize] = word;
                    wi += 1u32;
                }
            }
            let link = slabs[(rs * SLAB_WORDS + LINK_SLOT) as usize];
            if link == EMPTY_WORD {
                break;
            }
            rs = (link & 0xffff_ffffu64) as u32;
        }
        while wi < 15u32 {
            slabs[(ws * SLAB_WORDS + wi) as usize] = EMPTY_WORD;
            wi += 1u32;
        }
        let mut link = slabs[(ws * SLAB_WORDS + LINK_SLOT) as usize];
        slabs[(ws * SLAB_WORDS + LINK_SLOT) as usize] = EMPTY_WORD;
        let mut n_freed = 0u32;
        while link != EMPTY_WORD {
            let s = (link & 0xffff_ffffu64) as u32;
            link = slabs[(s * SLAB_WORDS + LINK_SLOT) as usize];
            for i in 0..16u32 {
                slabs[(s * SLAB_WORDS + i) as usize] = EMPTY_WORD;
            }
            free_slab(bitmap, s - buckets);
            n_freed += 1u32;
        }
        if n_freed > 0u32 {
            freed[0].fetch_add(n_freed);
        }
    }
}

/// `dst[i] = src[i]` for `i < src.len()`.
#[cube(launch_unchecked)]
pub fn copy_u64_kernel(src: &Array<u64>, dst: &mut Array<u64>) {
    if ABSOLUTE_POS < src.len() {
        dst[ABSOLUTE_POS] = src[ABSOLUTE_POS];
    }
}

/// `dst[i] = src[i]` for `i < src.len()`.
#[cube(launch_unchecked)]
pub fn copy_u32_kernel(src: &Array<u32>, dst: &mut Array<u32>) {
    if ABSOLUTE_POS < src.len() {
        dst[ABSOLUTE_POS] = src[ABSOLUTE_POS];
    }
}

/// A chained table of 32-bit keys and values on a device.
pub struct GpuChained<R: Runtime> {
    client: ComputeClient<R>,
    family: HashFamily,
    buckets: u32,
    pool: u32,
    slabs: Handle,
    bitmap: Handle,
    tile: u32,
    /// Inserts read slabs with plain loads first (CUDA, where the slab array may be bound twice).
    plain_reads: bool,
    len: usize,
}

impl<R: Runtime> GpuChained<R> {
    /// `buckets` empty lists and a pool of `pool` free slabs on `client`'s device.
    pub fn new(
        client: &ComputeClient<R>,
        family: HashFamily,
        buckets: u32,
        pool: u32,
    ) -> Result<Self> {
        let tile = super::tile_width_for(client, SLAB_WORDS)?;
        let mut t = Self {
            client: client.clone(),
            family,
            buckets,
            pool: 0,
            slabs: client.empty(8),
            bitmap: client.empty(4),
            tile,
            plain_reads: R::name(client) == "cuda",
            len: 0,
        };
        t.resize(pool.max(32))?;
        Ok(t)
    }

    fn slab_words(&self, pool: u32) -> usize {
        (self.buckets as usize + pool as usize) * SLAB_WORDS as usize
    }

    fn bitmap_words(pool: u32) -> usize {
        pool.div_ceil(32).max(1) as usize
    }

    /// Grows the pool to `pool` slabs: new arrays, the old contents copied, the rest empty (queued).
    fn resize(&mut self, pool: u32) -> Result<()> {
        if self.buckets as u64 + pool as u64 >= u32::MAX as u64 {
            return Err(Error::InvalidConfig(format!(
                "a chained table addresses at most 2^32 - 1 slabs: {} buckets and a pool of {pool}",
                self.buckets
            )));
        }
        let (old_words, new_words) = (self.slab_words(self.pool), self.slab_words(pool));
        let slabs = self.client.empty(new_words * 8);
        fill_u64(&self.client, &slabs, new_words, EMPTY_WORD);
        let (old_bits, new_bits) = (Self::bitmap_words(self.pool), Self::bitmap_words(pool));
        let bitmap = self.client.empty(new_bits * 4);
        fill_u32(&self.client, &bitmap, new_bits, 0);
        if self.pool > 0 {
            // SAFETY: each copy reads `src.len()` words, at most `dst`'s length.
            unsafe {
                copy_u64_kernel::launch_unchecked::<R>(
                    &self.client,
                    cube_count(old_words),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(self.slabs.clone(), old_words),
                    ArrayArg::from_raw_parts(slabs.clone(), new_words),
                );
                copy_u32_kernel::launch_unchecked::<R>(
                    &self.client,
                    cube_count(old_bits),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(self.bitmap.clone(), old_bits),
                    ArrayArg::from_raw_parts(bitmap.clone(), new_bits),
                );
            }
        }
        self.slabs = slabs;
        self.bitmap = bitmap;
        self.pool = pool;
        Ok(())
    }

    fn shape(&self, unique: bool) -> [u32; super::device_api::SHAPE_WORDS] {
        let p = SchemeParams {
            upsert: unique as u32,
            ..Chain::default_params(SLAB_WORDS)
        };
        shape_words_of(self.buckets, self.family, p)
    }

    /// Inserts the pairs (a further copy, or with `unique` insert-or-overwrite); returns how many were new.
    pub fn insert(&mut self, keys: &[u32], values: &[u32], unique: bool) -> Result<usize> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: keys.len(),
            });
        }
        if keys.is_empty() {
            return Ok(0);
        }
        let kh = self.client.create_from_slice(u32::as_bytes(keys));
        let vh = self.client.create_from_slice(u32::as_bytes(values));
        self.insert_device(&kh, &vh, keys.len(), unique)
    }

    /// [`GpuChained::insert`] of `n` pairs already on the device. Operations that found the pool empty run
    /// again (from the device's list of them) after it grows; waits for the device (one small read per pass).
    pub fn insert_device(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
        unique: bool,
    ) -> Result<usize> {
        let mut added = 0usize;
        let mut sel: Option<(Handle, usize)> = None;
        loop {
            let m = sel.as_ref().map_or(n, |s| s.1);
            if m == 0 {
                break;
            }
            let retry = self.client.empty(m * 4);
            let counters = self
                .client
                .create_from_slice(u32::as_bytes(&[0; COUNTER_WORDS]));
            let sel_h = sel
                .as_ref()
                .map_or_else(|| self.client.empty(4), |s| s.0.clone());
            // CUDA binds the slab array a second time for plain reads; Vulkan binds a buffer once.
            let (plain, plain_len) = if self.plain_reads {
                (self.slabs.clone(), self.slab_words(self.pool))
            } else {
                (self.client.empty(8), 1)
            };
            // SAFETY: thread `t < m` reads pair `t` (or `sel[t] < n`) and writes `retry[< m]`; slabs are
            // addressed by bucket indices below `buckets` and links below `buckets + pool`.
            unsafe {
                chained_insert_kernel::launch_unchecked::<R>(
                    &self.client,
                    cube_count(m),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(keys.clone(), n),
                    ArrayArg::from_raw_parts(values.clone(), n),
                    ArrayArg::from_raw_parts(sel_h, m.max(1)),
                    m as u32,
                    ArrayArg::from_raw_parts(self.slabs.clone(), self.slab_words(self.pool)),
                    ArrayArg::from_raw_parts(plain, plain_len),
                    ArrayArg::from_raw_parts(self.bitmap.clone(), Self::bitmap_words(self.pool)),
                    self.pool,
                    ArrayArg::from_raw_parts(retry.clone(), m),
                    ArrayArg::from_raw_parts(counters.clone(), COUNTER_WORDS),
                    shape_scalars::<R>(self.shape(unique)),
                    sel.is_some(),
                    self.plain_reads,
                    self.tile,
                )
            }
            let c = self.read(counters, COUNTER_WORDS)?;
            added += c[COUNTER_STRIDE as usize..]
                .iter()
                .step_by(COUNTER_STRIDE as usize)
                .map(|&x| x as usize)
                .sum::<usize>();
            if c[0] > 0 {
                self.resize(self.pool.saturating_mul(2).max(self.pool + c[0]))?;
            }
            sel = Some((retry, c[0] as usize));
        }
        self.len += added;
        Ok(added)
    }

    fn walk(
        &self,
        keys: &[u32],
        mode: u32,
        out_len: usize,
        aux: Option<Handle>,
    ) -> (Handle, Handle) {
        let kh = self.client.create_from_slice(u32::as_bytes(keys));
        self.walk_device(&kh, keys.len(), mode, out_len, aux)
    }

    /// Queues `find` of `n` keys already on the device: `(values, found)`, a word each per key (`found`: 1 if
    /// the key is stored; its value is then the first copy's).
    pub fn find_device(&self, keys: &Handle, n: usize) -> (Handle, Handle) {
        self.walk_device(keys, n, walk::FIND, n, None)
    }

    fn walk_device(
        &self,
        kh: &Handle,
        n: usize,
        mode: u32,
        out_len: usize,
        aux: Option<Handle>,
    ) -> (Handle, Handle) {
        let kh = kh.clone();
        let words = self.slab_words(self.pool);
        let dummy = self.client.empty(8);
        let ((atomic, atomic_len), (plain, plain_len)) =
            if mode == walk::ERASE || mode == walk::ERASE_ALL {
                ((self.slabs.clone(), words), (dummy, 1))
            } else {
                ((dummy, 1), (self.slabs.clone(), words))
            };
        let out = self.client.empty(out_len.max(1) * 4);
        let aux_len = if aux.is_some() { n + 1 } else { n.max(1) };
        let aux = aux.unwrap_or_else(|| self.client.empty(n.max(1) * 4));
        // SAFETY: key `q < n` writes `out[q]` / `aux[q]`, or (GATHER) `out[aux[q]..aux[q + 1]]`.
        unsafe {
            chained_walk_kernel::launch_unchecked::<R>(
                &self.client,
                cube_count(n.max(1)),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(kh, n.max(1)),
                n as u32,
                ArrayArg::from_raw_parts(atomic, atomic_len),
                ArrayArg::from_raw_parts(plain, plain_len),
                ArrayArg::from_raw_parts(out.clone(), out_len.max(1)),
                ArrayArg::from_raw_parts(aux.clone(), aux_len),
                shape_scalars::<R>(self.shape(false)),
                mode,
                self.tile,
            )
        }
        (out, aux)
    }

    fn bytes(&self, h: Handle) -> Result<cubecl::bytes::Bytes> {
        self.client
            .read_one(h)
            .map_err(|e| Error::Device(format!("{e:?}")))
    }

    fn read(&self, h: Handle, n: usize) -> Result<Vec<u32>> {
        Ok(u32::from_bytes(&self.bytes(h)?)[..n].to_vec())
    }

    /// The first copy's value of each key.
    pub fn find(&self, keys: &[u32]) -> Result<Vec<Option<u32>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (v, f) = self.walk(keys, walk::FIND, keys.len(), None);
        let (v, f) = (self.read(v, keys.len())?, self.read(f, keys.len())?);
        Ok(v.into_iter()
            .zip(f)
            .map(|(v, f)| (f == 1).then_some(v))
            .collect())
    }

    /// How many copies of each key are stored.
    pub fn count(&self, keys: &[u32]) -> Result<Vec<u32>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (c, _) = self.walk(keys, walk::COUNT, keys.len(), None);
        self.read(c, keys.len())
    }

    /// Every value of each key: offsets (`keys + 1`) and values, in list order.
    pub fn find_all(&self, keys: &[u32]) -> Result<(Vec<usize>, Vec<u32>)> {
        let counts = self.count(keys)?;
        let mut offsets = vec![0usize];
        let mut starts = vec![0u32];
        for &c in &counts {
            offsets.push(offsets.last().unwrap() + c as usize);
            starts.push(*offsets.last().unwrap() as u32);
        }
        let total = *offsets.last().unwrap();
        if total == 0 {
            return Ok((offsets, Vec::new()));
        }
        let sh = self.client.create_from_slice(u32::as_bytes(&starts));
        let (vals, _) = self.walk(keys, walk::GATHER, total, Some(sh));
        Ok((offsets, self.read(vals, total)?))
    }

    /// Erases the first copy of each key (`all == false`) or every copy; returns how many.
    pub fn erase(&mut self, keys: &[u32], all: bool) -> Result<usize> {
        if keys.is_empty() {
            return Ok(0);
        }
        let mode = if all { walk::ERASE_ALL } else { walk::ERASE };
        let (c, _) = self.walk(keys, mode, keys.len(), None);
        let n: usize = self.read(c, keys.len())?.iter().map(|&c| c as usize).sum();
        self.len -= n;
        Ok(n)
    }

    /// Compacts every list and frees the slabs left over; returns how many.
    pub fn flush(&mut self) -> Result<usize> {
        let freed = self.client.create_from_slice(u32::as_bytes(&[0]));
        // SAFETY: thread `b < buckets` walks bucket `b`'s list: links below `buckets + pool`.
        unsafe {
            chained_flush_kernel::launch_unchecked::<R>(
                &self.client,
                cube_count(self.buckets as usize),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.slabs.clone(), self.slab_words(self.pool)),
                ArrayArg::from_raw_parts(self.bitmap.clone(), Self::bitmap_words(self.pool)),
                ArrayArg::from_raw_parts(freed.clone(), 1),
                self.buckets,
            )
        }
        Ok(self.read(freed, 1)?[0] as usize)
    }

    /// Pairs stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole table read back: slab words and the pool bitmap (for the invariant check).
    pub fn download(&self) -> Result<(Vec<u64>, Vec<u32>)> {
        let words = u64::from_bytes(&self.bytes(self.slabs.clone())?)[..self.slab_words(self.pool)]
            .to_vec();
        let bits = self.read(self.bitmap.clone(), Self::bitmap_words(self.pool))?;
        Ok((words, bits))
    }

    /// Lists and pool slabs.
    pub fn shape_of(&self) -> (u32, u32) {
        (self.buckets, self.pool)
    }
}
