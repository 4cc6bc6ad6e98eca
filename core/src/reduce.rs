//! Reductions for `insert_or_apply` (counting tables, group-by): how a batch's value for a key is combined
//! with the value already stored, and with the batch's other values for the same key.
//!
//! A reduction is a type with two functions of `(stored, incoming) -> new`: [`Reduce::reduce`], which kernels
//! call, and [`HostReduce::reduce_host`], the same function for the CPU backend (CubeCL cannot run a `#[cube]`
//! function on the host). [`Reduction`] is both, implemented for every type that has them. Built in: [`Add`]
//! (wrapping), [`Min`], [`Max`] and [`Assign`] (the incoming value replaces the stored one: `insert`'s rule).
//!
//! **Laws.** Apart from [`Assign`], a reduction must be commutative and associative: a batch's values for one key
//! are combined in whatever order the device's atomics meet (on GPUs, several threads combine into one slot at
//! once), and the result must not depend on it. [`Assign`] is the exception the tables know: the batch's last
//! occurrence wins, as in `insert`.
//!
//! **Speed.** [`Reduce::KIND`] names the built-ins ([`kind`]): GPU kernels then combine a batch's duplicates
//! with one atomic add / min / max each. A user reduction ([`kind::CUSTOM`]) combines them by a
//! compare-and-swap loop, which is as fast when keys repeat little and slower under heavy contention (many
//! copies of one key in one batch).
//!
//! A reduction of your own:
//! ```
//! use cubecl::prelude::*;
//! use hashtile_core::reduce::{HostReduce, Reduce};
//! use hashtile_core::Value;
//!
//! /// Bitwise or: a set of flags per key.
//! pub struct Or;
//!
//! #[cube]
//! impl Reduce for Or {
//!     fn reduce<V: Int>(stored: V, incoming: V) -> V {
//!         stored | incoming
//!     }
//! }
//!
//! impl HostReduce for Or {
//!     fn reduce_host<V: Value>(stored: V, incoming: V) -> V {
//!         V::narrow(stored.widen() | incoming.widen())
//!     }
//! }
//! ```

use crate::element::Value;
use cubecl::prelude::*;

/// What a reduction is, for the kernels' fast paths ([`Reduce::KIND`]).
pub mod kind {
    /// The incoming value replaces the stored one; a batch's last occurrence wins.
    pub const ASSIGN: u32 = 0;
    /// Wrapping addition (one atomic add per duplicate).
    pub const ADD: u32 = 1;
    /// The smaller value (one atomic min per duplicate).
    pub const MIN: u32 = 2;
    /// The larger value (one atomic max per duplicate).
    pub const MAX: u32 = 3;
    /// A user function: duplicates combine by compare-and-swap loops.
    pub const CUSTOM: u32 = 4;
}

/// The device half of a reduction: `new = reduce(stored, incoming)` (see the module docs for the laws).
#[cube]
pub trait Reduce: Send + Sync + 'static {
    /// Which [`kind`] this is; user reductions keep the default, [`kind::CUSTOM`].
    const KIND: u32 = kind::CUSTOM;
    /// The stored value combined with an incoming one.
    fn reduce<V: Int>(stored: V, incoming: V) -> V;
}

/// The host half of a reduction: the same function as [`Reduce::reduce`], for the CPU backend. Values are
/// `u32` or `u64`; [`Element::widen`](crate::Element::widen) and [`Element::narrow`](crate::Element::narrow) reach their bits.
pub trait HostReduce: Send + Sync + 'static {
    /// The stored value combined with an incoming one.
    fn reduce_host<V: Value>(stored: V, incoming: V) -> V;
}

/// A reduction: both halves (implemented for every type that has them).
pub trait Reduction: Reduce + HostReduce {}
impl<T: Reduce + HostReduce> Reduction for T {}

/// The incoming value replaces the stored one (insert-or-assign); a batch's last occurrence wins.
pub struct Assign;
/// Wrapping addition: counts, sums.
pub struct Add;
/// The smaller value.
pub struct Min;
/// The larger value.
pub struct Max;
/// The smaller value, the bits read as a two's complement signed integer: what `HashTable::insert_or_apply`
/// runs for [`Min`] over signed value types (`i32`, `i64` and their newtypes), whose device words are unsigned.
/// A user kernel with signed values uses it directly.
pub struct SignedMin;
/// The larger value, the bits read as signed: [`SignedMin`]'s twin for [`Max`].
pub struct SignedMax;

#[cube]
impl Reduce for Assign {
    const KIND: u32 = kind::ASSIGN;
    fn reduce<V: Int>(_stored: V, incoming: V) -> V {
        incoming
    }
}

#[cube]
impl Reduce for Add {
    const KIND: u32 = kind::ADD;
    fn reduce<V: Int>(stored: V, incoming: V) -> V {
        stored + incoming
    }
}

#[cube]
impl Reduce for Min {
    const KIND: u32 = kind::MIN;
    fn reduce<V: Int>(stored: V, incoming: V) -> V {
        select(incoming < stored, incoming, stored)
    }
}

#[cube]
impl Reduce for Max {
    const KIND: u32 = kind::MAX;
    fn reduce<V: Int>(stored: V, incoming: V) -> V {
        select(incoming > stored, incoming, stored)
    }
}

/// `v` with its sign bit flipped: signed order becomes unsigned order (`V`'s top bit is the sign bit).
#[cube]
fn biased<V: Int>(v: V) -> V {
    let all = V::max_value();
    v ^ (all - (all >> V::new(1)))
}

#[cube]
impl Reduce for SignedMin {
    fn reduce<V: Int>(stored: V, incoming: V) -> V {
        select(
            biased::<V>(incoming) < biased::<V>(stored),
            incoming,
            stored,
        )
    }
}

#[cube]
impl Reduce for SignedMax {
    fn reduce<V: Int>(stored: V, incoming: V) -> V {
        select(
            biased::<V>(incoming) > biased::<V>(stored),
            incoming,
            stored,
        )
    }
}

/// The bits of `v` with the sign bit of its width flipped (host twin of `biased`).
fn biased_host<V: Value>(v: V) -> u64 {
    v.widen() ^ (1u64 << (V::BITS - 1))
}

impl HostReduce for SignedMin {
    fn reduce_host<V: Value>(stored: V, incoming: V) -> V {
        if biased_host(incoming) < biased_host(stored) {
            incoming
        } else {
            stored
        }
    }
}

impl HostReduce for SignedMax {
    fn reduce_host<V: Value>(stored: V, incoming: V) -> V {
        if biased_host(incoming) > biased_host(stored) {
            incoming
        } else {
            stored
        }
    }
}

impl HostReduce for Assign {
    fn reduce_host<V: Value>(_stored: V, incoming: V) -> V {
        incoming
    }
}

impl HostReduce for Add {
    fn reduce_host<V: Value>(stored: V, incoming: V) -> V {
        // Narrowing keeps the low bits: the sum wraps at the value's width, as on the device.
        V::narrow(stored.widen().wrapping_add(incoming.widen()))
    }
}

impl HostReduce for Min {
    fn reduce_host<V: Value>(stored: V, incoming: V) -> V {
        if incoming.widen() < stored.widen() {
            incoming
        } else {
            stored
        }
    }
}

impl HostReduce for Max {
    fn reduce_host<V: Value>(stored: V, incoming: V) -> V {
        if incoming.widen() > stored.widen() {
            incoming
        } else {
            stored
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_halves() {
        assert_eq!(Add::reduce_host(u32::MAX, 2u32), 1);
        assert_eq!(Add::reduce_host(u64::MAX, 2u64), 1);
        assert_eq!(Min::reduce_host(3u32, 2), 2);
        assert_eq!(Max::reduce_host(3u64, 2), 3);
        assert_eq!(Assign::reduce_host(3u32, 2), 2);
        assert_eq!(<Add as Reduce>::KIND, kind::ADD);
        assert_eq!(SignedMin::reduce_host(3i32, -2), -2);
        assert_eq!(SignedMax::reduce_host(-3i64, -2), -2);
        assert_eq!(SignedMin::reduce_host(u32::MAX, 1), u32::MAX);
    }
}
