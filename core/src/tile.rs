//! The tile-cooperative bucket: the only code in hashtile that uses plane (warp) operations or atomics.
//!
//! A bucket of `B` slots (`B` a power of two, `1..=32`) is served by a **tile** of `T = min(B, plane size)`
//! consecutive lanes of a plane; each lane holds `S = B / T` slots (`S <= 4`: plane sizes are >= 8). Slot `s`
//! lives in lane `s % T`, register `s / T`, so that each of the `S` loads is one coalesced read of `T`
//! consecutive words. A plane holds `plane_size / T` tiles that work independently.
//!
//! Every function here is called by **all lanes of the plane, every time** (plane-uniform control flow): CubeCL
//! lowers plane operations to `__activemask()`-based intrinsics on CUDA, which are only correct while the whole
//! plane is converged. Per-tile work is masked with predicates instead of branches around plane operations.
//!
//! Slots are words of a table's word type `W`: `u64` (packed pairs `key << 32 | value`, or whole 64-bit keys)
//! or `u32` (sets of 32-bit keys, half the bytes); either way the all-ones word is empty. A tile reads every
//! width into `u64` registers ([`LaneSlots`], [`widen_word()`]: the empty word stays all ones), so that views,
//! shuffles and the schemes' steps are written once; writes narrow back ([`narrow_word()`]). How a table lays
//! its pairs out is its key layout (`hashtile_backends::gpu::layout`); the bucket verbs here serve every layout.

use crate::scheme::{BucketView, NO_NEXT};
use cubecl::prelude::*;

/// The empty slot (key = all ones).
pub const EMPTY_WORD: u64 = u64::MAX;

/// A slot word of type `W` in a tile's `u64` registers: the same value, except that the empty word (all ones
/// of `W`) stays the all-ones `u64` ([`EMPTY_WORD`]). Free for `u64` words.
#[cube]
pub fn widen_word<W: Int>(w: W) -> u64 {
    if comptime!(W::size_bits_unchecked() == 64) {
        u64::cast_from(w)
    } else {
        select(w == W::max_value(), EMPTY_WORD, u64::cast_from(w))
    }
}

/// A register word as a slot word of type `W` (the inverse of [`widen_word()`] on every word a table of `W`
/// holds: the empty word and words below `W`'s all ones).
#[cube]
pub fn narrow_word<W: Int>(w: u64) -> W {
    W::cast_from(w)
}

/// Compare-and-swap of slot `addr` of a table of `W` words, in register words: the word found (widened).
#[cube]
pub fn cas_slot<W: Int>(table: &Array<Atomic<W>>, addr: usize, expected: u64, new: u64) -> u64 {
    widen_word::<W>(
        table[addr].compare_exchange_weak(narrow_word::<W>(expected), narrow_word::<W>(new)),
    )
}

/// Exchange of slot `addr` of a table of `W` words, in register words: the word found (widened).
#[cube]
pub fn swap_slot<W: Int>(table: &Array<Atomic<W>>, addr: usize, new: u64) -> u64 {
    widen_word::<W>(table[addr].swap(narrow_word::<W>(new)))
}

/// Where this lane sits in its tile.
#[derive(CubeType, Clone, Copy)]
pub struct TileLane {
    /// Lane index within the tile (`0..T`).
    pub lane: u32,
    /// Plane lane of the tile's lane 0.
    pub base: u32,
}

/// The up to four slots of a bucket that one lane holds after a read.
#[derive(CubeType, Clone, Copy)]
pub struct LaneSlots {
    /// Slot `lane`.
    pub w0: u64,
    /// Slot `lane + T` (when `S >= 2`).
    pub w1: u64,
    /// Slot `lane + 2T` (when `S >= 4`).
    pub w2: u64,
    /// Slot `lane + 3T` (when `S >= 4`).
    pub w3: u64,
}

/// This lane's position in a tile of `tile_width` lanes.
#[cube]
pub fn tile_lane(#[comptime] tile_width: u32) -> TileLane {
    let lane = UNIT_POS_PLANE % tile_width;
    TileLane {
        lane,
        base: UNIT_POS_PLANE - lane,
    }
}

/// The tile's bits of a plane ballot: bit `i` is lane `i` of this tile. A one-lane tile (`B = 1`) is a thread:
/// its ballot is its own predicate, with no plane operation (BGHT's 1CHT runs one thread per key; the plane
/// ballots and shuffles a one-lane tile would otherwise pay per probe cost hashtile's 1CHT its insert rate).
#[cube]
pub fn tile_ballot(pred: bool, tl: TileLane, #[comptime] tile_width: u32) -> u32 {
    if comptime!(tile_width == 1) {
        u32::cast_from(pred)
    } else {
        let mask = comptime!(if tile_width >= 32 {
            u32::MAX
        } else {
            (1u32 << tile_width) - 1
        });
        (plane_ballot(pred)[0] >> tl.base) & mask
    }
}

/// Whether any lane of the plane has `pred` set: the condition of a loop whose body runs tile ballots or
/// shuffles, so that whole planes stay in it until every tile is done. A one-lane tile runs no plane operation:
/// its own predicate decides.
#[cube]
pub fn tile_loop_any(pred: bool, #[comptime] tile_width: u32) -> bool {
    if comptime!(tile_width == 1) {
        pred
    } else {
        plane_any(pred)
    }
}

/// Lane `src` of this tile's value of `v` (all lanes must call; a one-lane tile's own value).
#[cube]
pub fn tile_shuffle(v: u32, src: u32, tl: TileLane, #[comptime] tile_width: u32) -> u32 {
    if comptime!(tile_width == 1) {
        v
    } else {
        plane_shuffle(v, tl.base + src)
    }
}

/// Lane `src` of this tile's 64-bit `v`, moved as two 32-bit shuffles (portable across compilers).
#[cube]
pub fn tile_shuffle_u64(v: u64, src: u32, tl: TileLane, #[comptime] tile_width: u32) -> u64 {
    if comptime!(tile_width == 1) {
        v
    } else {
        let lo = tile_shuffle((v & 0xffff_ffffu64) as u32, src, tl, tile_width);
        let hi = tile_shuffle((v >> 32u64) as u32, src, tl, tile_width);
        ((hi as u64) << 32u64) | (lo as u64)
    }
}

/// Plain (non-atomic) read of this lane's slots of `bucket`; lanes with `active == false` read nothing and
/// see an empty bucket. Plain loads are what make finds fast: CubeCL lowers `Atomic::load` to an atomic add of
/// zero on CUDA.
#[cube]
pub fn read_slots<W: Int>(
    table: &Array<W>,
    bucket: u32,
    active: bool,
    tl: TileLane,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) -> LaneSlots {
    let per_lane = comptime!(bucket_size / tile_width);
    let mut out = LaneSlots {
        w0: EMPTY_WORD,
        w1: EMPTY_WORD,
        w2: EMPTY_WORD,
        w3: EMPTY_WORD,
    };
    if active {
        let start = bucket as usize * bucket_size as usize + tl.lane as usize;
        out.w0 = widen_word::<W>(table[start]);
        if comptime!(per_lane >= 2) {
            out.w1 = widen_word::<W>(table[start + tile_width as usize]);
        }
        if comptime!(per_lane >= 4) {
            out.w2 = widen_word::<W>(table[start + 2 * tile_width as usize]);
            out.w3 = widen_word::<W>(table[start + 3 * tile_width as usize]);
        }
    }
    out
}

/// Coherent (atomic) read of this lane's slots, used to re-read a bucket after a lost compare-and-swap: a plain
/// load may be served from a stale L1 line that another SM has since changed.
#[cube]
pub fn read_slots_atomic<W: Int>(
    table: &Array<Atomic<W>>,
    bucket: u32,
    active: bool,
    tl: TileLane,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) -> LaneSlots {
    let per_lane = comptime!(bucket_size / tile_width);
    let mut out = LaneSlots {
        w0: EMPTY_WORD,
        w1: EMPTY_WORD,
        w2: EMPTY_WORD,
        w3: EMPTY_WORD,
    };
    if active {
        let start = bucket as usize * bucket_size as usize + tl.lane as usize;
        out.w0 = widen_word::<W>(table[start].load());
        if comptime!(per_lane >= 2) {
            out.w1 = widen_word::<W>(table[start + tile_width as usize].load());
        }
        if comptime!(per_lane >= 4) {
            out.w2 = widen_word::<W>(table[start + 2 * tile_width as usize].load());
            out.w3 = widen_word::<W>(table[start + 3 * tile_width as usize].load());
        }
    }
    out
}

/// One read of this lane's slots through either view of the same table: coherent (atomic) loads when
/// `coherent`, else plain loads of `table_plain`. One set of registers serves both (reading both ways and
/// merging cost the insert kernel registers, and registers limit its occupancy).
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn read_slots_either<W: Int>(
    table: &Array<Atomic<W>>,
    table_plain: &Array<W>,
    bucket: u32,
    active: bool,
    coherent: bool,
    tl: TileLane,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) -> LaneSlots {
    let per_lane = comptime!(bucket_size / tile_width);
    let mut out = LaneSlots {
        w0: EMPTY_WORD,
        w1: EMPTY_WORD,
        w2: EMPTY_WORD,
        w3: EMPTY_WORD,
    };
    if active {
        let start = bucket as usize * bucket_size as usize + tl.lane as usize;
        if coherent {
            out.w0 = widen_word::<W>(table[start].load());
            if comptime!(per_lane >= 2) {
                out.w1 = widen_word::<W>(table[start + tile_width as usize].load());
            }
            if comptime!(per_lane >= 4) {
                out.w2 = widen_word::<W>(table[start + 2 * tile_width as usize].load());
                out.w3 = widen_word::<W>(table[start + 3 * tile_width as usize].load());
            }
        } else {
            out.w0 = widen_word::<W>(table_plain[start]);
            if comptime!(per_lane >= 2) {
                out.w1 = widen_word::<W>(table_plain[start + tile_width as usize]);
            }
            if comptime!(per_lane >= 4) {
                out.w2 = widen_word::<W>(table_plain[start + 2 * tile_width as usize]);
                out.w3 = widen_word::<W>(table_plain[start + 3 * tile_width as usize]);
            }
        }
    }
    out
}

/// `b` when `second`, else `a` (a lane's slots of one of two buckets read together; field by field, as cube code
/// cannot reassign a whole struct).
#[cube]
pub fn pick_slots(a: LaneSlots, b: LaneSlots, second: bool) -> LaneSlots {
    let mut out = LaneSlots {
        w0: a.w0,
        w1: a.w1,
        w2: a.w2,
        w3: a.w3,
    };
    if second {
        out.w0 = b.w0;
        out.w1 = b.w1;
        out.w2 = b.w2;
        out.w3 = b.w3;
    }
    out
}

/// The key half of a packed slot word.
#[cube]
pub fn word_key(w: u64) -> u32 {
    (w >> 32u64) as u32
}

/// The value half of a packed slot word.
#[cube]
pub fn word_value(w: u64) -> u32 {
    (w & 0xffff_ffffu64) as u32
}

/// Packs a 32-bit key and value into a slot word.
#[cube]
pub fn pack_word(key: u32, value: u32) -> u64 {
    ((key as u64) << 32u64) | (value as u64)
}

/// Count load / find key in one pass: the [`BucketView`] of the slots just read, for `key` stored in each
/// word at bit `key_shift` (32: packed pairs `key << 32 | value`; 0: key arrays, where the word is the key; see
/// the key layouts in `hashtile_backends::gpu::layout`).
#[cube]
pub fn view_of(
    slots: LaneSlots,
    key: u64,
    #[comptime] key_shift: u32,
    tl: TileLane,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) -> BucketView {
    let per_lane = comptime!(bucket_size / tile_width);
    let sh = comptime!(key_shift as u64);
    let mut empty = tile_ballot(slots.w0 == EMPTY_WORD, tl, tile_width);
    let mut matched = tile_ballot(
        slots.w0 != EMPTY_WORD && (slots.w0 >> sh) == key,
        tl,
        tile_width,
    );
    if comptime!(per_lane >= 2) {
        empty |= tile_ballot(slots.w1 == EMPTY_WORD, tl, tile_width) << tile_width;
        matched |= tile_ballot(
            slots.w1 != EMPTY_WORD && (slots.w1 >> sh) == key,
            tl,
            tile_width,
        ) << tile_width;
    }
    if comptime!(per_lane >= 4) {
        empty |= tile_ballot(slots.w2 == EMPTY_WORD, tl, tile_width) << (2 * tile_width);
        matched |= tile_ballot(
            slots.w2 != EMPTY_WORD && (slots.w2 >> sh) == key,
            tl,
            tile_width,
        ) << (2 * tile_width);
        empty |= tile_ballot(slots.w3 == EMPTY_WORD, tl, tile_width) << (3 * tile_width);
        matched |= tile_ballot(
            slots.w3 != EMPTY_WORD && (slots.w3 >> sh) == key,
            tl,
            tile_width,
        ) << (3 * tile_width);
    }
    BucketView {
        empty,
        matched,
        next: NO_NEXT,
    }
}

/// The slots of the bucket just read that hold `word` (an erased slot's mark), as a mask in [`view_of()`]'s
/// slot order (all lanes must call).
#[cube]
pub fn slots_holding(
    slots: LaneSlots,
    word: u64,
    tl: TileLane,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) -> u32 {
    let per_lane = comptime!(bucket_size / tile_width);
    let mut mask = tile_ballot(slots.w0 == word, tl, tile_width);
    if comptime!(per_lane >= 2) {
        mask |= tile_ballot(slots.w1 == word, tl, tile_width) << tile_width;
    }
    if comptime!(per_lane >= 4) {
        mask |= tile_ballot(slots.w2 == word, tl, tile_width) << (2 * tile_width);
        mask |= tile_ballot(slots.w3 == word, tl, tile_width) << (3 * tile_width);
    }
    mask
}

/// The word of slot `slot` as held by its owner lane, broadcast to the whole tile (all lanes must call).
// The compile-time `if` selects code to emit; merging it with the run-time `if` would change that.
#[allow(clippy::collapsible_if)]
#[cube]
pub fn slot_word(
    slots: LaneSlots,
    slot: u32,
    tl: TileLane,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) -> u64 {
    let per_lane = comptime!(bucket_size / tile_width);
    let reg = slot / tile_width;
    let mut mine = slots.w0;
    if comptime!(per_lane >= 2) {
        if reg == 1 {
            mine = slots.w1;
        }
    }
    if comptime!(per_lane >= 4) {
        if reg == 2 {
            mine = slots.w2;
        }
        if reg == 3 {
            mine = slots.w3;
        }
    }
    tile_shuffle_u64(mine, slot % tile_width, tl, tile_width)
}

/// Index of slot `slot` of `bucket` in the table array.
#[cube]
pub fn slot_address(bucket: u32, slot: u32, #[comptime] bucket_size: u32) -> usize {
    bucket as usize * bucket_size as usize + slot as usize
}
