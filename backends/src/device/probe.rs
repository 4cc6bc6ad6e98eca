//! A key's bucket under probe `i` for a scheme and a layout ([`probe_bucket()`]: the hash functions, then the
//! overflow sequence of schemes that have one), and the same in slot frames that hold many tables of one shape
//! (`frame_bucket`, a paged table's children).

use super::layout::KeyLayout;
use super::shape::TableMeta;
use cubecl::prelude::*;
use hashtile_core::hash::{MAX_HASHES, overflow_bucket};
use hashtile_core::scheme::ProbingScheme;

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

/// Words per frame descriptor of a framed find (`tile_find_core` with `framed`): `[base bucket, seed0, mix0,
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
