//! The device API: table operations callable from your own CubeCL kernels.
//!
//! A [`TableMeta`] carries a table's shape, seeds and scheme parameters (build it in your kernel from the
//! shape buffer [`crate::gpu::GpuTable::device_ref`] returns, with [`load_meta`]). [`tile_find`] is cooperative: **every lane of the
//! plane must call it**, each with its own key and an `active` flag; lanes of a tile take turns serving each
//! other's keys (warp-cooperative work sharing), and each lane gets its own answer back.

use super::layout::{KeyLayout, key_view};
use cubecl::prelude::*;
use hashtile_core::hash::{MAX_HASHES, bucket_index, hash_key, hash_key32, overflow_bucket};
use hashtile_core::scheme::{ProbingScheme, SchemeParams, action, blank_state};
use hashtile_core::tile::{read_slots, tile_ballot, tile_lane, tile_shuffle};

/// Everything a kernel needs to address a table.
#[derive(CubeType, Clone, Copy)]
pub struct TableMeta {
    /// Number of buckets.
    pub num_buckets: u32,
    /// Seed of hash function 0.
    pub seed0: u32,
    /// Seed of hash function 1.
    pub seed1: u32,
    /// Seed of hash function 2.
    pub seed2: u32,
    /// Seed of hash function 3.
    pub seed3: u32,
    /// `seed_mix(seed0)`: the seed's part of the hash, precomputed on the host.
    pub mix0: u32,
    /// `seed_mix(seed1)`.
    pub mix1: u32,
    /// `seed_mix(seed2)`.
    pub mix2: u32,
    /// `seed_mix(seed3)`.
    pub mix3: u32,
    /// Scheme parameters.
    pub params: SchemeParams,
}

/// A lane's find answer (`V`: the layout's value type).
#[derive(CubeType, Clone, Copy)]
pub struct FindResult<V: Int> {
    /// 1 if the key is present.
    pub found: u32,
    /// Its value (0 when `found == 0`).
    pub value: V,
    /// Buckets read for this key (only counted when `count_probes` is on; else 0).
    pub probes: u32,
}

/// A [`FindResult`] with the address of the slot holding the key (`bucket * bucket_size + slot`, the index
/// into the table's slot arrays; 0 when absent): where the host path's classify pass updates a value in place.
/// Kept apart from [`FindResult`] so that finds which do not need it do not carry it (on the H100 the address
/// cost the wide find kernel 3-4 registers and 6-7% of its absent-key rate).
#[derive(CubeType, Clone, Copy)]
pub struct FoundAt<V: Int> {
    /// As in [`FindResult`].
    pub found: u32,
    /// As in [`FindResult`].
    pub value: V,
    /// As in [`FindResult`].
    pub probes: u32,
    /// The slot address (valid when `found == 1`).
    pub slot: u32,
}

/// Number of `u32` words in a table's shape buffer: `[num_buckets, seed0..seed3, num_hashes, max_chain,
/// threshold, upsert, mix0..mix3]` (`mix_i = hashtile_core::hash::seed_mix(seed_i)`).
pub const SHAPE_WORDS: usize = 13;

/// A table's shape as scalar kernel arguments (the internal kernels take it so; CUDA keeps scalar arguments in
/// constant memory, where a shape read from a buffer costs a register per word and thread). Same words as the
/// shape buffer.
#[derive(CubeLaunch, CubeType, Clone, Copy)]
pub struct ShapeScalars {
    /// Number of buckets.
    pub num_buckets: u32,
    /// Seeds of hash functions 0..3.
    pub seed0: u32,
    /// Seed 1.
    pub seed1: u32,
    /// Seed 2.
    pub seed2: u32,
    /// Seed 3.
    pub seed3: u32,
    /// `num_hashes` of the scheme parameters.
    pub num_hashes: u32,
    /// `max_chain`.
    pub max_chain: u32,
    /// `threshold`.
    pub threshold: u32,
    /// `upsert`.
    pub upsert: u32,
    /// Seed mixes 0..3.
    pub mix0: u32,
    /// Mix 1.
    pub mix1: u32,
    /// Mix 2.
    pub mix2: u32,
    /// Mix 3.
    pub mix3: u32,
}

/// The [`TableMeta`] of scalar shape arguments.
#[cube]
pub fn meta_of(s: &ShapeScalars) -> TableMeta {
    TableMeta {
        num_buckets: s.num_buckets,
        seed0: s.seed0,
        seed1: s.seed1,
        seed2: s.seed2,
        seed3: s.seed3,
        mix0: s.mix0,
        mix1: s.mix1,
        mix2: s.mix2,
        mix3: s.mix3,
        params: SchemeParams {
            num_hashes: s.num_hashes,
            max_chain: s.max_chain,
            threshold: s.threshold,
            upsert: s.upsert,
        },
    }
}

/// Reads a [`TableMeta`] from a table's shape buffer (see [`crate::gpu::GpuTable::shape_words`]). Kernels
/// take the shape as a small array so that a user kernel needs one argument, not nine.
#[cube]
pub fn load_meta(shape: &Array<u32>) -> TableMeta {
    TableMeta {
        num_buckets: shape[0],
        seed0: shape[1],
        seed1: shape[2],
        seed2: shape[3],
        seed3: shape[4],
        mix0: shape[9],
        mix1: shape[10],
        mix2: shape[11],
        mix3: shape[12],
        params: SchemeParams {
            num_hashes: shape[5],
            max_chain: shape[6],
            threshold: shape[7],
            upsert: shape[8],
        },
    }
}

/// The bucket of `key` under hash index `i` for scheme `S` in layout `L`: the family's function `i`, or for a
/// scheme that overflows ([`ProbingScheme::OVERFLOW`]) and `i >= MAX_HASHES`, the key's overflow sequence
/// (`hashtile_core::hash::overflow_bucket`). Other schemes compile to `L::bucket` alone.
// The initial `b` is a CubeCL variable declaration; both branches assign it.
#[allow(unused_assignments)]
#[cube]
pub fn probe_bucket<S: ProbingScheme, L: KeyLayout>(meta: TableMeta, key: L::Key, i: u32) -> u32 {
    if comptime!(S::OVERFLOW) {
        let last = comptime!(MAX_HASHES as u32 - 1);
        let mut b = u32::new(0);
        if i <= last {
            b = L::bucket(meta, key, i);
        } else {
            b = overflow_bucket(
                L::bucket(meta, key, last),
                L::key_mix(key),
                i - last,
                meta.num_buckets,
            );
        }
        b
    } else {
        L::bucket(meta, key, i)
    }
}

/// The bucket of a 32-bit key under hash function `i`.
#[cube]
pub fn bucket_of(meta: TableMeta, key: u32, i: u32) -> u32 {
    let mut seed = meta.seed0;
    let mut mix = meta.mix0;
    if i == 1 {
        seed = meta.seed1;
        mix = meta.mix1;
    } else if i == 2 {
        seed = meta.seed2;
        mix = meta.mix2;
    } else if i == 3 {
        seed = meta.seed3;
        mix = meta.mix3;
    }
    bucket_index(hash_key32(key, seed, mix), meta.num_buckets)
}

/// The bucket of a 64-bit key under hash function `i` (the host's `HashFamily::bucket`; the seed's part cannot
/// be precomputed because it is mixed with the key's high word).
#[cube]
pub fn bucket_of_wide(meta: TableMeta, key: u64, i: u32) -> u32 {
    let mut seed = meta.seed0;
    if i == 1 {
        seed = meta.seed1;
    } else if i == 2 {
        seed = meta.seed2;
    } else if i == 3 {
        seed = meta.seed3;
    }
    let lo = (key & 0xffff_ffffu64) as u32;
    let hi = (key >> 32u64) as u32;
    bucket_index(hash_key(lo, hi, seed), meta.num_buckets)
}

/// Cooperative find in a table of layout `L` ([`super::layout`]): `table_keys` holds the key words,
/// `table_values` the values where the layout keeps them apart ([`super::layout::Wide`]; any one-word array
/// for [`super::layout::Packed`], which never reads it). All lanes of the plane must call it, each with its own
/// key and `active` flag; the lane owning the matching slot reads the value and hands it to the lane that asked.
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn tile_find<S: ProbingScheme, L: KeyLayout>(
    table_keys: &Array<u64>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] count_probes: bool,
) -> FindResult<L::Value> {
    let r = tile_find_at::<S, L>(
        table_keys,
        table_values,
        meta,
        key,
        active,
        bucket_size,
        tile_width,
        count_probes,
        false,
    );
    FindResult::<L::Value> {
        found: r.found,
        value: r.value,
        probes: r.probes,
    }
}

/// [`tile_find`], with the slot's address in the answer when `want_slot` (else the address is left 0 and
/// compiled out).
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn tile_find_at<S: ProbingScheme, L: KeyLayout>(
    table_keys: &Array<u64>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] count_probes: bool,
    #[comptime] want_slot: bool,
) -> FoundAt<L::Value> {
    // One table: no frame descriptors (a one-word stand-in, never read).
    let frames = Array::<u32>::new(1usize);
    tile_find_core::<S, L>(
        table_keys,
        table_values,
        meta,
        key,
        active,
        &frames,
        0u32,
        bucket_size,
        tile_width,
        count_probes,
        want_slot,
        false,
    )
}

/// Words per frame descriptor of a framed find ([`tile_find_core`] with `framed`): `[base bucket, seed0, mix0,
/// seed1, mix1, seed2, mix2, seed3, mix3]` of one child whose slots start at bucket `base` of the shared slot
/// arrays (`gpu::frames`).
pub const FRAME_DESC_WORDS: usize = 9;

/// The [`TableMeta`] of hash function `i` of frame `f`: `meta`'s bucket count and scheme parameters (every
/// frame has them) with the frame's seed of function `min(i, MAX_HASHES - 1)` (and its mix) in every seed
/// field, so that the probe of function `i` (an overflow probe hashes with the last function) reads two
/// descriptor words, not eight.
#[cube]
fn frame_meta(meta: TableMeta, frames: &Array<u32>, at: u32, i: u32) -> TableMeta {
    let h = i.min(comptime!(MAX_HASHES as u32 - 1));
    let seed = frames[(at + 1u32 + 2u32 * h) as usize];
    let mix = frames[(at + 2u32 + 2u32 * h) as usize];
    TableMeta {
        num_buckets: meta.num_buckets,
        seed0: seed,
        seed1: seed,
        seed2: seed,
        seed3: seed,
        mix0: mix,
        mix1: mix,
        mix2: mix,
        mix3: mix,
        params: meta.params,
    }
}

/// The bucket of `key` under hash function `i` ([`probe_bucket`]); with `framed`, in table `child` of slot
/// frames whose descriptors are `frames` (its seeds, and its first bucket added: an index into the shared slot
/// arrays). Without, `frames` and `child` are unused.
// `b` is a CubeCL variable declaration; both branches assign it.
#[allow(unused_assignments)]
#[cube]
pub(crate) fn frame_bucket<S: ProbingScheme, L: KeyLayout>(
    meta: TableMeta,
    frames: &Array<u32>,
    child: u32,
    key: L::Key,
    i: u32,
    #[comptime] framed: bool,
) -> u32 {
    let mut b = u32::new(0);
    if comptime!(framed) {
        let at = child * comptime!(FRAME_DESC_WORDS as u32);
        let m = frame_meta(meta, frames, at, i);
        b = probe_bucket::<S, L>(m, key, i) + frames[at as usize];
    } else {
        b = probe_bucket::<S, L>(meta, key, i);
    }
    b
}

/// The cooperative find loop of [`tile_find_at`]. With `framed`, the slot arrays hold many tables of `meta`'s
/// shape (a paged table's children, `gpu::frames`), each lane's key is looked up in table `child`, whose seeds
/// and first bucket are descriptor `child` of `frames` ([`FRAME_DESC_WORDS`] each): the tile moves the child's
/// index with the key, and each probe reads three words of its descriptor (cached: a few children's words are
/// hot).
#[allow(clippy::too_many_arguments)]
#[cube]
pub(crate) fn tile_find_core<S: ProbingScheme, L: KeyLayout>(
    table_keys: &Array<u64>,
    table_values: &Array<u64>,
    meta: TableMeta,
    key: L::Key,
    active: bool,
    frames: &Array<u32>,
    child: u32,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] count_probes: bool,
    #[comptime] want_slot: bool,
    #[comptime] framed: bool,
) -> FoundAt<L::Value> {
    let tl = tile_lane(tile_width);
    let mut pending = active;
    let mut result = FoundAt::<L::Value> {
        found: 0u32,
        value: L::Value::new(0),
        probes: 0u32,
        slot: 0u32,
    };
    let mut steps = u32::new(0);
    let mut has_op = false;
    let mut cur_key = L::Key::new(0);
    let mut cur_child = u32::new(0);
    let mut src = u32::new(0);
    let mut state = blank_state();
    while plane_any(pending || has_op) {
        // An idle tile takes the next pending lane's key.
        let queue = tile_ballot(pending, tl, tile_width);
        let next = queue.trailing_zeros() % tile_width;
        let next_key = L::shuffle_key(key, next, tl, tile_width);
        let mut next_child = u32::new(0);
        if comptime!(framed) {
            next_child = tile_shuffle(child, next, tl, tile_width);
        }
        if !has_op && queue != 0 {
            has_op = true;
            cur_key = next_key;
            if comptime!(framed) {
                cur_child = next_child;
            }
            src = next;
            S::find_start(&mut state);
            steps = 0u32;
            if tl.lane == next {
                pending = false;
            }
        }
        // One probe.
        let b = frame_bucket::<S, L>(meta, frames, cur_child, cur_key, state.hash_index, framed);
        let slots = read_slots(table_keys, b, has_op, tl, bucket_size, tile_width);
        let view = key_view::<L>(slots, cur_key, tl, bucket_size, tile_width);
        let mut act = u32::new(action::NEXT as i64);
        let mut slot = u32::new(0);
        if has_op {
            let st = S::find_step(&mut state, view, meta.params, bucket_size);
            if comptime!(count_probes) {
                steps += 1u32;
            }
            act = st.action;
            slot = st.slot;
        }
        let value = L::tile_value(
            slots,
            slot,
            b,
            has_op && act == action::FOUND,
            table_values,
            tl,
            bucket_size,
            tile_width,
        );
        if has_op && act != action::NEXT {
            has_op = false;
            if tl.lane == src {
                result.probes = steps;
                if act == action::FOUND {
                    result.found = 1u32;
                    result.value = value;
                    if comptime!(want_slot) {
                        result.slot = b * bucket_size + slot;
                    }
                }
            }
        }
    }
    result
}
