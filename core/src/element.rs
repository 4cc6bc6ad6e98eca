//! Key and value element types.
//!
//! Keys and values are unsigned integers of 32 or 64 bits. The all-ones key is the **empty sentinel**: it marks
//! a free slot, so it can never be stored; inserting it is rejected with [`crate::Error::SentinelKey`].
//! Values have no reserved bit pattern (a slot is empty iff its key is the sentinel), but bulk `find` calls that
//! write into a plain value buffer use [`Value::ABSENT`] (all ones) for keys that are not present.
//!
//! Internally every key and value travels as a `u64` (the CPU backend's storage, the probe model) or as two
//! `u32` words (`lo`, `hi`) in kernels, so schemes and hash functions are written once for both widths.

use num_traits::{PrimInt, Unsigned};
use std::fmt::{Debug, Display};
use std::hash::Hash;

mod private {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// Common bound of keys and values: a 32- or 64-bit unsigned integer.
pub trait Element:
    PrimInt + Unsigned + Hash + Debug + Display + Default + Send + Sync + 'static + private::Sealed
{
    /// Width in bits (32 or 64).
    const BITS: u32;
    /// All ones.
    const ALL_ONES: Self;
    /// Widens to `u64`.
    fn widen(self) -> u64;
    /// Narrows from `u64` (the caller guarantees the value fits).
    fn narrow(v: u64) -> Self;
    /// Low 32 bits.
    fn lo(self) -> u32 {
        self.widen() as u32
    }
    /// High 32 bits (0 for 32-bit elements).
    fn hi(self) -> u32 {
        (self.widen() >> 32) as u32
    }
    /// The slice as `u32`s when `Self` is `u32` (no copy): how typed engines hand 32-bit data to kernels as is.
    fn as_u32s(s: &[Self]) -> Option<&[u32]>;
    /// The slice as `u64`s when `Self` is `u64` (no copy).
    fn as_u64s(s: &[Self]) -> Option<&[u64]>;
    /// Mutable [`Element::as_u32s`].
    fn as_u32s_mut(s: &mut [Self]) -> Option<&mut [u32]>;
    /// Mutable [`Element::as_u64s`].
    fn as_u64s_mut(s: &mut [Self]) -> Option<&mut [u64]>;
}

impl Element for u32 {
    const BITS: u32 = 32;
    const ALL_ONES: Self = u32::MAX;
    fn widen(self) -> u64 {
        self as u64
    }
    fn narrow(v: u64) -> Self {
        v as u32
    }
    fn as_u32s(s: &[Self]) -> Option<&[u32]> {
        Some(s)
    }
    fn as_u64s(_: &[Self]) -> Option<&[u64]> {
        None
    }
    fn as_u32s_mut(s: &mut [Self]) -> Option<&mut [u32]> {
        Some(s)
    }
    fn as_u64s_mut(_: &mut [Self]) -> Option<&mut [u64]> {
        None
    }
}

impl Element for u64 {
    const BITS: u32 = 64;
    const ALL_ONES: Self = u64::MAX;
    fn widen(self) -> u64 {
        self
    }
    fn narrow(v: u64) -> Self {
        v
    }
    fn as_u32s(_: &[Self]) -> Option<&[u32]> {
        None
    }
    fn as_u64s(s: &[Self]) -> Option<&[u64]> {
        Some(s)
    }
    fn as_u32s_mut(_: &mut [Self]) -> Option<&mut [u32]> {
        None
    }
    fn as_u64s_mut(s: &mut [Self]) -> Option<&mut [u64]> {
        Some(s)
    }
}

/// A hash-table key. The all-ones value is reserved as the empty-slot sentinel ([`Key::EMPTY`]).
pub trait Key: Element {
    /// The empty-slot sentinel; never a valid key.
    const EMPTY: Self;
    /// `true` if this key is the reserved sentinel and therefore cannot be inserted.
    fn is_sentinel(self) -> bool {
        self == Self::EMPTY
    }
}
impl Key for u32 {
    const EMPTY: Self = u32::MAX;
}
impl Key for u64 {
    const EMPTY: Self = u64::MAX;
}

/// A hash-table value. Any bit pattern may be stored.
pub trait Value: Element {
    /// Written by sentinel-output finds (`find_into`, device finds) for absent keys. It is a legal value too:
    /// when you store all-ones values, use `find` (returns `Option`) or `contains` to tell them apart.
    const ABSENT: Self;
}
impl Value for u32 {
    const ABSENT: Self = u32::MAX;
}
impl Value for u64 {
    const ABSENT: Self = u64::MAX;
}

/// Returns the index of the first sentinel key in `keys`, if any. It runs on every insert, so it is a parallel
/// scan of large blocks with a plain (vectorised) test per block: rayon's `position_first` over single
/// elements took 60 ms for 2^26 keys on a 16-core host, twice the GPU insert it guards.
pub fn first_sentinel<K: Key>(keys: &[K]) -> Option<usize> {
    use rayon::prelude::*;
    const BLOCK: usize = 1 << 16;
    let any = |c: &[K]| c.iter().fold(false, |acc, k| acc | k.is_sentinel());
    if keys.len() <= BLOCK {
        return keys.iter().position(|k| k.is_sentinel());
    }
    let block = keys
        .par_chunks(BLOCK)
        .enumerate()
        .filter(|(_, c)| any(c))
        .map(|(i, _)| i)
        .min()?;
    let start = block * BLOCK;
    keys[start..]
        .iter()
        .position(|k| k.is_sentinel())
        .map(|p| start + p)
}

/// `keys` without the sentinel key (calls that skip it, such as erases): `keys` itself when it holds none (one
/// [`first_sentinel`] scan), else a copy without it.
pub fn without_sentinel<K: Key>(keys: &[K]) -> std::borrow::Cow<'_, [K]> {
    match first_sentinel(keys) {
        None => std::borrow::Cow::Borrowed(keys),
        Some(_) => keys.iter().copied().filter(|k| !k.is_sentinel()).collect(),
    }
}
