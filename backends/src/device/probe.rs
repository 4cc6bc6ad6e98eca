//! A key's bucket under probe `i` for a scheme and a layout ([`probe_bucket()`]: the hash functions, then the
//! overflow sequence of schemes that have one), and the same in slot frames that hold many tables of one shape
//! (`frame_bucket`, a paged table's children).

use super::layout::KeyLayout;
use super::shape::TableMeta;
use cubecl::prelude::*;
use hashtile_core::scheme::{
    ProbingScheme, sequence, sequence_advance, sequence_bucket, sequence_function, sequence_stride,
};

/// The bucket of `key` under probe index `i` for scheme `S` in layout `L`, along the scheme's sequence
/// ([`ProbingScheme::SEQUENCE`], [`sequence_bucket()`]). Schemes of the family's hash functions compile to
/// `L::bucket` alone.
#[cube]
pub fn probe_bucket<S: ProbingScheme, L: KeyLayout>(meta: TableMeta, key: L::Key, i: u32) -> u32 {
    let kind = comptime!(S::SEQUENCE);
    if comptime!(kind == sequence::HASHES) {
        L::bucket(meta, key, i)
    } else if comptime!(kind == sequence::LINEAR || kind == sequence::DOUBLE) {
        // Probe 0 of a strided sequence is the first function's bucket: no second hash and no remainder
        // (double hashing's is 64-bit). Most inserts, erases and counts end there.
        let base = L::bucket(meta, key, 0u32);
        let mut b = base;
        if i != 0u32 {
            let mut second = 0u32;
            if comptime!(kind == sequence::DOUBLE) {
                second = L::bucket(meta, key, 1u32);
            }
            b = sequence_bucket(kind, base, second, 0u32, i, meta.num_buckets);
        }
        b
    } else {
        // The overflow sequence: the family's functions, then the backyard from the last one's bucket.
        let base = L::bucket(meta, key, sequence_function(kind, i));
        sequence_bucket(kind, base, 0u32, L::key_mix(key), i, meta.num_buckets)
    }
}

/// Words per frame descriptor of a framed find (`tile_find_core` with `framed`): `[base bucket, seed0, mix0,
/// seed1, mix1, seed2, mix2, seed3, mix3]` of one child whose slots start at bucket `base` of the shared slot
/// arrays (`gpu::frames`).
pub const FRAME_DESC_WORDS: usize = 9;

/// The [`TableMeta`] of probe `i` of frame `f`: `meta`'s bucket count and scheme parameters (every frame has
/// them) with the frame's seed of the function the probe hashes with ([`sequence_function()`]; an overflow probe
/// hashes with the last function) and its mix in every seed field, so that a probe reads two descriptor words,
/// not eight. Double hashing reads functions 0 and 1 (in their own fields).
#[cube]
fn frame_meta<S: ProbingScheme>(
    meta: TableMeta,
    frames: &Array<u32>,
    at: u32,
    i: u32,
) -> TableMeta {
    let kind = comptime!(S::SEQUENCE);
    let h = sequence_function(kind, i);
    let seed = frames[(at + 1u32 + 2u32 * h) as usize];
    let mix = frames[(at + 2u32 + 2u32 * h) as usize];
    let mut seed1 = seed;
    let mut mix1 = mix;
    if comptime!(kind == sequence::DOUBLE) {
        seed1 = frames[(at + 3u32) as usize];
        mix1 = frames[(at + 4u32) as usize];
    }
    TableMeta {
        num_buckets: meta.num_buckets,
        seed0: seed,
        seed1,
        seed2: seed,
        seed3: seed,
        mix0: mix,
        mix1,
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
        let m = frame_meta::<S>(meta, frames, at, i);
        b = probe_bucket::<S, L>(m, key, i) + frames[at as usize];
    } else {
        b = probe_bucket::<S, L>(meta, key, i);
    }
    b
}

/// Where a tile's walk along a strided sequence stands ([`sequence::LINEAR`], [`sequence::DOUBLE`]): the probe
/// index whose bucket it holds, that bucket, and the sequence's stride for its key.
#[derive(CubeType, Clone, Copy)]
pub(crate) struct Walk {
    pub at: u32,
    pub bucket: u32,
    pub stride: u32,
}

/// A walk that holds no bucket yet (every operation starts at probe 0, which hashes).
#[cube]
pub(crate) fn no_walk() -> Walk {
    Walk {
        at: 0u32,
        bucket: 0u32,
        stride: 0u32,
    }
}

/// The bucket of probe `i` as [`frame_bucket`] names it, for a tile that reads probe after probe. With
/// `stepping`, along a strided sequence (unframed) probe 0 hashes the key with function 0 alone, a probe one
/// past the walk's advances from its bucket by an add and a compare ([`sequence_advance`]; double hashing
/// hashes its stride at probe 1), the walk's own probe (a re-read after a lost race) keeps its bucket, and any
/// other index is computed whole. A long walk (linear probing at a high load, absent keys) then pays neither
/// hashes nor remainders per probe. The driver steps in launches of finds (H200, 2^26: linear B = 1 finds
/// 1.14-1.29x, double B = 8 1.10-1.14x) and in every launch of one-lane tiles (linear B = 1 inserts
/// 1.05-1.13x, counts 1.24-1.28x over hashing at every probe); wider tiles' launches that write hash at every
/// probe ([`probe_bucket`]: probe 0 without the second hash or the remainder), because there the walk's three
/// live registers cost their loops more than the hashes (double B = 4 counts 0.89-0.91x). Other sequences,
/// and framed tables, hash at every probe too (`walk` unused).
#[allow(unused_assignments)]
#[cube]
pub(crate) fn walk_bucket<S: ProbingScheme, L: KeyLayout>(
    meta: TableMeta,
    frames: &Array<u32>,
    child: u32,
    key: L::Key,
    i: u32,
    walk: &mut Walk,
    #[comptime] framed: bool,
    #[comptime] stepping: bool,
) -> u32 {
    let kind = comptime!(S::SEQUENCE);
    let mut b = u32::new(0);
    if comptime!(stepping && !framed && (kind == sequence::LINEAR || kind == sequence::DOUBLE)) {
        let n = meta.num_buckets;
        if i == 0u32 {
            walk.bucket = L::bucket(meta, key, 0u32);
        } else if i == walk.at + 1u32 {
            let mut stride = 1u32;
            if comptime!(kind == sequence::DOUBLE) {
                if i == 1u32 {
                    walk.stride = sequence_stride(kind, L::bucket(meta, key, 1u32), n);
                }
                stride = walk.stride;
            }
            walk.bucket = sequence_advance(walk.bucket, stride, n);
        } else if i != walk.at {
            let base = L::bucket(meta, key, 0u32);
            let mut second = 0u32;
            if comptime!(kind == sequence::DOUBLE) {
                second = L::bucket(meta, key, 1u32);
                walk.stride = sequence_stride(kind, second, n);
            }
            walk.bucket = sequence_bucket(kind, base, second, 0u32, i, n);
        }
        walk.at = i;
        b = walk.bucket;
    } else {
        b = frame_bucket::<S, L>(meta, frames, child, key, i, framed);
    }
    b
}

/// The hash index under which a pair an eviction displaced from bucket `from_bucket` lived there (its first
/// such index; 0 if none matches): where [`ProbingScheme::after_evict`] continues its walk.
#[cube]
pub(crate) fn evicted_from<S: ProbingScheme, L: KeyLayout>(
    meta: TableMeta,
    frames: &Array<u32>,
    child: u32,
    key: L::Key,
    from_bucket: u32,
    #[comptime] framed: bool,
) -> u32 {
    let mut from = meta.params.num_hashes;
    let mut j = meta.params.num_hashes;
    while j > 0u32 {
        j -= 1u32;
        if frame_bucket::<S, L>(meta, frames, child, key, j, framed) == from_bucket {
            from = j;
        }
    }
    if from == meta.params.num_hashes {
        from = 0u32;
    }
    from
}
