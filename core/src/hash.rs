//! The seeded hash family.
//!
//! Every function here is a `#[cube]` function written in plain integer arithmetic, so the **same source** is
//! compiled into kernels and called on the host (CPU backend, placement checks, probe model). Two rules keep
//! the host build identical to the device build and free of debug-mode overflow panics:
//! multiplications go through [`mul_lo32()`] (a 32x32 multiply done in 64 bits), and casts are `as` casts.
//!
//! A key is hashed as two 32-bit words `(lo, hi)` (`hi = 0` for 32-bit keys), so one family serves both widths.
//! Bucket indices use Lemire's multiply-shift range reduction ([`bucket_index()`]) instead of `%`: one multiply
//! instead of an integer division, and any number of buckets (not only powers of two).

use cubecl::prelude::*;

/// Most hash functions any scheme uses (1CHT uses 4).
pub const MAX_HASHES: usize = 4;

/// The default master seed of every table's hash family (`HashFamily::new(DEFAULT_SEED)`).
pub const DEFAULT_SEED: u64 = 0x5eed_0f4a_5117_e000;

/// Low 32 bits of `a * b`, computed in 64 bits so that it never overflows on the host.
#[cube]
pub fn mul_lo32(a: u32, b: u32) -> u32 {
    ((a as u64 * b as u64) & 0xffff_ffffu64) as u32
}

/// Low 64 bits of `a * b` from 32-bit pieces, so that it never overflows on the host (a wrapping multiply in
/// the arithmetic kernels and host code share).
#[cube]
pub fn mul_lo64(a: u64, b: u64) -> u64 {
    let a_lo = (a & 0xffff_ffffu64) as u32;
    let a_hi = (a >> 32u64) as u32;
    let b_lo = (b & 0xffff_ffffu64) as u32;
    let b_hi = (b >> 32u64) as u32;
    let low = a_lo as u64 * b_lo as u64;
    let high = ((low >> 32u64) + mul_lo32(a_lo, b_hi) as u64 + mul_lo32(a_hi, b_lo) as u64)
        & 0xffff_ffffu64;
    (high << 32u64) | (low & 0xffff_ffffu64)
}

/// The route hash of a 64-bit key under `seed` (the splitmix64 finaliser of `key ^ seed`): which child of a
/// paged table a key goes to (its high bits, `paged::route`). One function on the host and in kernels.
#[cube]
pub fn route_hash(key: u64, seed: u64) -> u64 {
    let mut z = key ^ seed;
    z = mul_lo64(z ^ (z >> 30u64), 0xbf58_476d_1ce4_e5b9u64);
    z = mul_lo64(z ^ (z >> 27u64), 0x94d0_49bb_1331_11ebu64);
    z ^ (z >> 31u64)
}

/// MurmurHash3's 32-bit finaliser: a bijection with full avalanche.
#[cube]
pub fn fmix32(x: u32) -> u32 {
    let mut h = x;
    h ^= h >> 16;
    h = mul_lo32(h, 0x85eb_ca6bu32);
    h ^= h >> 13;
    h = mul_lo32(h, 0xc2b2_ae35u32);
    h ^ (h >> 16)
}

/// Hash of the key `(lo, hi)` under one function of the family, selected by `seed`.
#[cube]
pub fn hash_key(lo: u32, hi: u32, seed: u32) -> u32 {
    let folded = lo ^ fmix32(hi ^ seed);
    fmix32(mul_lo32(folded, 0x9e37_79b1u32) ^ seed)
}

/// [`hash_key()`] of a 32-bit key (`hi = 0`) with the seed's fold precomputed: `seed_mix` must be
/// [`seed_mix()`]`(seed)`. Same value, two multiplies fewer: kernels take the mixes with the table's shape.
#[cube]
pub fn hash_key32(key: u32, seed: u32, seed_mix: u32) -> u32 {
    fmix32(mul_lo32(key ^ seed_mix, 0x9e37_79b1u32) ^ seed)
}

/// The part of [`hash_key()`] that depends on the seed alone when `hi = 0` (see [`hash_key32()`]).
#[cube]
pub fn seed_mix(seed: u32) -> u32 {
    fmix32(seed)
}

/// A key's mix `(lo, hi)`: seeds its eviction randomness (every backend) and its overflow sequence
/// ([`overflow_bucket()`]). `hi = 0` for 32-bit keys.
#[cube]
pub fn key_mix(lo: u32, hi: u32) -> u32 {
    fmix32(lo ^ fmix32(hi))
}

/// Maps a 32-bit hash onto `0..num_buckets` (multiply-shift; uniform for uniform hashes).
#[cube]
pub fn bucket_index(hash: u32, num_buckets: u32) -> u32 {
    ((hash as u64 * num_buckets as u64) >> 32u64) as u32
}

/// Bucket `j >= 1` of the overflow sequence that continues a key's candidate buckets past the family's
/// [`MAX_HASHES`] functions (hash index `MAX_HASHES - 1 + j`): random probing over buckets, each step a fresh
/// hash of the key's bucket `b3` under its last function, of `key_mix` (the key's own mix, so that keys sharing
/// `b3` part ways) and of `j`. Used by schemes that overflow into more buckets (IHT's backyard, after BGHT's
/// code, which walks a double-hashing sequence). No `%`: a 64-bit remainder in the probe loop cost the GPU kernels
/// registers and 13-17% of IHT's rates on the H100.
#[cube]
pub fn overflow_bucket(b3: u32, key_mix: u32, j: u32, num_buckets: u32) -> u32 {
    let h = fmix32(mul_lo32(b3, 0x9e37_79b1u32) ^ key_mix ^ mul_lo32(j, 0x85eb_ca6bu32));
    bucket_index(h, num_buckets)
}

/// One step of xorshift32; used for the random slot a cuckoo eviction picks. `x` must be non-zero.
#[cube]
pub fn xorshift32(x: u32) -> u32 {
    let mut s = x;
    s ^= s << 13;
    s ^= s >> 17;
    s ^ (s << 5)
}

/// The seeds of a table's hash functions. Re-seeding derives fresh, deterministic seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HashFamily {
    /// The seed everything else derives from.
    pub master: u64,
    /// One seed per hash function.
    pub seeds: [u32; MAX_HASHES],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl HashFamily {
    /// The family derived from `master`.
    pub fn new(master: u64) -> Self {
        let mut s = master;
        let mut seeds = [0u32; MAX_HASHES];
        for seed in &mut seeds {
            *seed = splitmix64(&mut s) as u32;
        }
        Self { master, seeds }
    }

    /// The next family in this family's deterministic re-seed sequence (used after a failed build).
    pub fn reseeded(&self) -> Self {
        let mut s = self.master;
        Self::new(splitmix64(&mut s))
    }

    /// Hash of `key` (widened to u64) under function `i`.
    pub fn hash(&self, key: u64, i: usize) -> u32 {
        hash_key(key as u32, (key >> 32) as u32, self.seeds[i])
    }

    /// Bucket of `key` under function `i` in a table of `num_buckets` buckets; from `i = MAX_HASHES` on, the
    /// key's overflow sequence ([`overflow_bucket()`]).
    pub fn bucket(&self, key: u64, i: usize, num_buckets: u32) -> u32 {
        if i < MAX_HASHES {
            bucket_index(self.hash(key, i), num_buckets)
        } else {
            let last = MAX_HASHES - 1;
            overflow_bucket(
                self.bucket(key, last, num_buckets),
                key_mix(key as u32, (key >> 32) as u32),
                (i - last) as u32,
                num_buckets,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmix32_matches_reference_values() {
        // Reference: MurmurHash3 fmix32 with wrapping arithmetic.
        fn reference(mut h: u32) -> u32 {
            h ^= h >> 16;
            h = h.wrapping_mul(0x85eb_ca6b);
            h ^= h >> 13;
            h = h.wrapping_mul(0xc2b2_ae35);
            h ^ (h >> 16)
        }
        for x in [0u32, 1, 2, 0xdead_beef, u32::MAX, 0x8000_0000] {
            assert_eq!(fmix32(x), reference(x));
        }
    }

    #[test]
    fn bucket_index_stays_in_range_and_spreads() {
        let fam = HashFamily::new(7);
        let nb = 1000u32;
        let mut counts = vec![0u32; nb as usize];
        for k in 0..100_000u64 {
            let b = fam.bucket(k, 0, nb);
            assert!(b < nb);
            counts[b as usize] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min > 50 && *max < 160, "poor spread: min {min} max {max}");
    }

    #[test]
    fn reseeding_changes_every_seed_and_is_deterministic() {
        let a = HashFamily::new(1);
        let b = a.reseeded();
        assert_eq!(b, HashFamily::new(1).reseeded());
        for i in 0..MAX_HASHES {
            assert_ne!(a.seeds[i], b.seeds[i]);
        }
    }

    #[test]
    fn hash_key32_is_hash_key_of_a_32_bit_key() {
        for seed in [0u32, 1, 0x1234_5678, u32::MAX] {
            for key in [0u32, 7, 0xdead_beef, u32::MAX - 1] {
                assert_eq!(
                    hash_key32(key, seed, seed_mix(seed)),
                    hash_key(key, 0, seed)
                );
            }
        }
    }

    #[test]
    fn wide_keys_use_the_high_word() {
        let fam = HashFamily::new(3);
        assert_ne!(fam.hash(5, 0), fam.hash(5 | (1 << 40), 0));
    }

    #[test]
    fn mul_lo64_is_the_wrapping_multiply() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let y = x.rotate_left(29) ^ 0xdead_beef;
            assert_eq!(mul_lo64(x, y), x.wrapping_mul(y));
        }
        assert_eq!(mul_lo64(u64::MAX, u64::MAX), 1);
    }

    #[test]
    fn route_hash_is_the_splitmix64_finaliser() {
        fn reference(key: u64, seed: u64) -> u64 {
            let mut z = key ^ seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        for key in [0u64, 1, 7, u64::MAX, 0x1234_5678_9abc_def0] {
            for seed in [0u64, 42, DEFAULT_SEED] {
                assert_eq!(route_hash(key, seed), reference(key, seed));
            }
        }
    }
}
