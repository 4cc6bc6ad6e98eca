//! A table's shape as kernels see it: [`TableMeta`] (bucket count, seeds, scheme parameters), where it comes
//! from (scalar kernel arguments, [`ShapeScalars`], or a user's shape buffer, [`load_meta()`]), the bucket of a key
//! under each hash function ([`bucket_of()`], [`bucket_of_wide()`]), and the host side of the shape words.

use cubecl::prelude::*;
use hashtile_core::hash::{bucket_index, hash_key, hash_key32, seed_mix};
use hashtile_core::scheme::SchemeParams;
use hashtile_core::{Error, HashFamily, Result};

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

/// Reads a [`TableMeta`] from a table's shape buffer (see [`crate::table::gpu::GpuTable::shape_words`]). Kernels
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

/// A meta of zeros, for code that takes a [`TableMeta`] it does not read (a partition by route,
/// `crate::device::route::ByRoute`).
#[cube]
pub fn blank_meta() -> TableMeta {
    TableMeta {
        num_buckets: 0u32,
        seed0: 0u32,
        seed1: 0u32,
        seed2: 0u32,
        seed3: 0u32,
        mix0: 0u32,
        mix1: 0u32,
        mix2: 0u32,
        mix3: 0u32,
        params: SchemeParams {
            num_hashes: 0u32,
            max_chain: 0u32,
            threshold: 0u32,
            upsert: 0u32,
        },
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

/// A table's shape words (`[num_buckets, seed0..seed3, num_hashes, max_chain, threshold, upsert,
/// mix0..mix3]`, see [`load_meta()`]).
pub fn shape_words_of(num_buckets: u32, family: HashFamily, p: SchemeParams) -> [u32; SHAPE_WORDS] {
    let s = family.seeds;
    [
        num_buckets,
        s[0],
        s[1],
        s[2],
        s[3],
        p.num_hashes,
        p.max_chain,
        p.threshold,
        p.upsert,
        seed_mix(s[0]),
        seed_mix(s[1]),
        seed_mix(s[2]),
        seed_mix(s[3]),
    ]
}

/// Shape words as the scalar kernel argument.
pub fn shape_scalars<R: Runtime>(w: [u32; SHAPE_WORDS]) -> ShapeScalarsLaunch<R> {
    ShapeScalarsLaunch::new(
        w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12],
    )
}

/// The tile width for bucket size `bucket_size` of slot words of `word_bytes` bytes on `client`'s device, or why
/// the pair is unsupported (the tile needs 8..=32 lanes per plane and a power-of-two `B <= 32`). `u64` words:
/// `min(B, plane size)`, one 8-byte word per lane and load. 4-byte words (sets): half as many lanes, each
/// loading two slots, where a lane holds at most four (`B >= 4`): a tile then reads the same bytes per lane and
/// load as a map's, and serves a key with half the lanes (H200, 2^26 keys, a set of B = 8 in 8 lanes found
/// keys no faster than the packed map of B = 8 that reads twice the bytes).
pub fn tile_width_for<R: Runtime>(
    client: &ComputeClient<R>,
    bucket_size: u32,
    word_bytes: usize,
) -> Result<u32> {
    let plane = client.properties().hardware.plane_size_max;
    if !(8..=32).contains(&plane) {
        return Err(Error::InvalidConfig(format!(
            "plane size {plane} is not supported (hashtile's tile needs 8..=32 lanes per plane)"
        )));
    }
    if !bucket_size.is_power_of_two() || bucket_size > 32 {
        return Err(Error::InvalidConfig(format!(
            "bucket size must be a power of two in 1..=32, got {bucket_size}"
        )));
    }
    let full = bucket_size.min(plane);
    Ok(
        if word_bytes == 4 && bucket_size >= 4 && bucket_size / (full / 2) <= 4 {
            full / 2
        } else {
            full
        },
    )
}
