//! Key and value element types.
//!
//! Keys and values are 32- or 64-bit plain integers: `u32`, `u64`, `i32`, `i64`, and your own newtypes of them
//! ([`element_newtype!`](crate::element_newtype)). A table sees only their bits: keys hash and compare by their
//! bits, values travel as bits, so a type's order or sign matters only where a reduction compares values
//! (`reduce::Min` / `reduce::Max` compare signed elements as signed). The all-ones key (`u32::MAX`, `-1i32`, ...)
//! is the **empty sentinel**: it marks a free slot, so it can never be stored; inserting it is rejected with
//! [`crate::Error::SentinelKey`]. Values have no reserved bit pattern (a slot is empty iff its key is the
//! sentinel), but bulk `find` calls that write into a plain value buffer use [`Value::ABSENT`] (all ones) for
//! keys that are not present.
//!
//! Internally every key and value travels as its bits: a `u64` (the CPU backend's storage, the probe model, zero
//! extended from 32 bits) or the device's `u32` / `u64` words, so schemes and hash functions are written once for
//! every type.

use std::fmt::{Debug, Display};
use std::hash::Hash;

#[doc(hidden)]
pub mod private {
    /// Seals [`super::Element`]: the primitive types here, and newtypes made by `element_newtype!`, which
    /// guarantees the layout the casts rely on (`#[repr(transparent)]` over a primitive element).
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

/// Common bound of keys and values: a 32- or 64-bit integer, or a newtype of one (see the module docs).
///
/// Every implementor has the size of its width and accepts every bit pattern (the primitive integers and
/// `#[repr(transparent)]` newtypes of them), so that slices of one reinterpret as the device's words.
pub trait Element:
    Copy + Eq + Ord + Hash + Debug + Display + Default + Send + Sync + 'static + private::Sealed
{
    /// Width in bits (32 or 64).
    const BITS: u32;
    /// All ones.
    const ALL_ONES: Self;
    /// Whether [`Element::widen`]'s bits are a two's complement signed integer (orders `Min` and `Max`).
    const SIGNED: bool;
    /// The bits, zero-extended to `u64`.
    fn widen(self) -> u64;
    /// From bits (the low [`Element::BITS`] of `v`).
    fn narrow(v: u64) -> Self;
    /// Low 32 bits.
    fn lo(self) -> u32 {
        self.widen() as u32
    }
    /// High 32 bits (0 for 32-bit elements).
    fn hi(self) -> u32 {
        (self.widen() >> 32) as u32
    }
    /// The slice as `u32`s when `Self` is 32 bits wide (no copy): how typed engines hand 32-bit data to kernels
    /// as is.
    fn as_u32s(s: &[Self]) -> Option<&[u32]> {
        // SAFETY: every implementor is 4 bytes wide when `BITS == 32`, aligned as `u32`, with every bit pattern
        // valid (see the trait docs; the seal keeps it so).
        (Self::BITS == 32)
            .then(|| unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) })
    }
    /// The slice as `u64`s when `Self` is 64 bits wide (no copy).
    fn as_u64s(s: &[Self]) -> Option<&[u64]> {
        // SAFETY: as in `as_u32s`, for 8 bytes.
        (Self::BITS == 64)
            .then(|| unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) })
    }
    /// Mutable [`Element::as_u32s`].
    fn as_u32s_mut(s: &mut [Self]) -> Option<&mut [u32]> {
        // SAFETY: as in `as_u32s`; the borrow is unique, and every `u32` written is a valid `Self`.
        (Self::BITS == 32)
            .then(|| unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len()) })
    }
    /// Mutable [`Element::as_u64s`].
    fn as_u64s_mut(s: &mut [Self]) -> Option<&mut [u64]> {
        // SAFETY: as in `as_u32s_mut`, for 8 bytes.
        (Self::BITS == 64)
            .then(|| unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len()) })
    }
}

macro_rules! primitive_element {
    ($t:ty, $bits:expr, $signed:expr, $unsigned:ty) => {
        impl Element for $t {
            const BITS: u32 = $bits;
            const ALL_ONES: Self = !0;
            const SIGNED: bool = $signed;
            fn widen(self) -> u64 {
                self as $unsigned as u64
            }
            fn narrow(v: u64) -> Self {
                v as $unsigned as $t
            }
        }
        impl Key for $t {
            const EMPTY: Self = !0;
        }
        impl Value for $t {
            const ABSENT: Self = !0;
        }
    };
}
primitive_element!(u32, 32, false, u32);
primitive_element!(u64, 64, false, u64);
primitive_element!(i32, 32, true, u32);
primitive_element!(i64, 64, true, u64);

/// A hash-table key. The all-ones value is reserved as the empty-slot sentinel ([`Key::EMPTY`]).
pub trait Key: Element {
    /// The empty-slot sentinel; never a valid key.
    const EMPTY: Self;
    /// `true` if this key is the reserved sentinel and therefore cannot be inserted.
    fn is_sentinel(self) -> bool {
        self == Self::EMPTY
    }
}

/// A hash-table value. Any bit pattern may be stored.
pub trait Value: Element {
    /// Written by sentinel-output finds (`find_into`, device finds) for absent keys. It is a legal value too:
    /// when you store all-ones values, use `find` (returns `Option`) or `contains` to tell them apart.
    const ABSENT: Self;
}

/// Makes a newtype of a primitive element a key and value type of hashtile's tables: one line declares it
/// (`#[repr(transparent)]`, with `Clone`, `Copy`, `PartialEq`, `Eq`, `PartialOrd`, `Ord`, `Hash`, `Debug` and
/// `Default` derived, and `Display` as the inner value's) and implements [`Element`], [`Key`] and [`Value`] by
/// its inner type: the same bits, the same sentinel, the same order for reductions.
///
/// ```
/// hashtile_core::element_newtype!(
///     /// A user id.
///     pub struct UserId(u32);
/// );
/// use hashtile_core::{Element, Key};
/// assert_eq!(UserId(7).widen(), 7);
/// assert!(UserId(u32::MAX).is_sentinel());
/// assert_eq!(UserId::as_u32s(&[UserId(1), UserId(2)]), Some(&[1u32, 2][..]));
/// ```
#[macro_export]
macro_rules! element_newtype {
    ($(#[$meta:meta])* $vis:vis struct $name:ident($inner_vis:vis $inner:ty);) => {
        $(#[$meta])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
        $vis struct $name($inner_vis $inner);
        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Display::fmt(&self.0, f)
            }
        }
        impl $crate::element::private::Sealed for $name {}
        impl $crate::Element for $name {
            const BITS: u32 = <$inner as $crate::Element>::BITS;
            const ALL_ONES: Self = $name(<$inner as $crate::Element>::ALL_ONES);
            const SIGNED: bool = <$inner as $crate::Element>::SIGNED;
            fn widen(self) -> u64 {
                <$inner as $crate::Element>::widen(self.0)
            }
            fn narrow(v: u64) -> Self {
                $name(<$inner as $crate::Element>::narrow(v))
            }
        }
        impl $crate::Key for $name {
            const EMPTY: Self = $name(<$inner as $crate::Key>::EMPTY);
        }
        impl $crate::Value for $name {
            const ABSENT: Self = $name(<$inner as $crate::Value>::ABSENT);
        }
    };
}

/// Returns the index of the first sentinel key in `keys`, if any ([`first_position`]: it runs on every insert).
pub fn first_sentinel<K: Key>(keys: &[K]) -> Option<usize> {
    first_position(keys, |k| k.is_sentinel())
}

/// Returns the index of the first of `items` that `pred` accepts, if any: a parallel scan of large blocks with a
/// plain (vectorised) test per block, then the first matching block in order. Rayon's `position_first` over
/// single elements took 60 ms for 2^26 keys on a 16-core host, twice the GPU insert such a check guards (1.2 s
/// for 2^27 on two cores, against 40 ms here).
pub fn first_position<T: Sync>(items: &[T], pred: impl Fn(&T) -> bool + Sync) -> Option<usize> {
    use rayon::prelude::*;
    const BLOCK: usize = 1 << 16;
    let any = |c: &[T]| c.iter().fold(false, |acc, k| acc | pred(k));
    if items.len() <= BLOCK {
        return items.iter().position(&pred);
    }
    let block = items
        .par_chunks(BLOCK)
        .enumerate()
        .filter(|(_, c)| any(c))
        .map(|(i, _)| i)
        .min()?;
    let start = block * BLOCK;
    items[start..].iter().position(&pred).map(|p| start + p)
}

/// `keys` without the sentinel key (calls that skip it, such as erases): `keys` itself when it holds none (one
/// [`first_sentinel`] scan), else a copy without it.
pub fn without_sentinel<K: Key>(keys: &[K]) -> std::borrow::Cow<'_, [K]> {
    match first_sentinel(keys) {
        None => std::borrow::Cow::Borrowed(keys),
        Some(_) => keys.iter().copied().filter(|k| !k.is_sentinel()).collect(),
    }
}
