//! # hashtile-macros
//!
//! Instantiation macros for hashtile's matrix: probing scheme x bucket size x key width x value width.
//!
//! - [`for_each_instance!`] calls a macro of yours once per valid `(Scheme, B, K, V)`, so tests, benches and
//!   sweeps cover every combination without hand-written lists. **Adding a scheme is one line here.**
//! - [`for_each_bucket_size!`] calls a macro once per supported bucket size.
//! - [`assert_instance!`] rejects an invalid combination (e.g. 1CHT with `B = 16`) at compile time, with a
//!   message naming the scheme's allowed sizes.
//!
//! The macros name schemes as `::hashtile::Scheme`, so they are meant for crates that depend on `hashtile`
//! (which re-exports them).

/// Calls `$m!(Scheme, B, K, V)` for every valid instance: each scheme with each of its bucket sizes, and each
/// key / value width in {u32, u64}.
///
/// ```ignore
/// macro_rules! show { ($s:ident, $b:literal, $k:ty, $v:ty) => { println!("{} B={} {}->{}", stringify!($s), $b, stringify!($k), stringify!($v)); } }
/// hashtile::for_each_instance!(show);
/// ```
#[macro_export]
macro_rules! for_each_instance {
    ($m:ident) => {
        $crate::__for_each_scheme_size!($m;
            Bcht: 1 2 4 8 16 32;
            Iht: 1 2 4 8 16 32;
            P2bht: 1 2 4 8 16 32;
            LinearProbing: 1 2 4 8 16 32;
            DoubleHashing: 1 2 4 8 16 32;
            Cht1: 1
        );
    };
}

/// Calls `$m!(Scheme, B)` for every valid scheme / bucket size pair (the same list as [`for_each_instance!`]).
#[macro_export]
macro_rules! for_each_scheme_and_size {
    ($m:ident) => {
        $crate::__for_each_scheme_size!(@pairs $m;
            Bcht: 1 2 4 8 16 32;
            Iht: 1 2 4 8 16 32;
            P2bht: 1 2 4 8 16 32;
            LinearProbing: 1 2 4 8 16 32;
            DoubleHashing: 1 2 4 8 16 32;
            Cht1: 1
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __for_each_scheme_size {
    (@pairs $m:ident; $($s:ident : $($b:literal)+);+) => {
        $( $( $crate::assert_instance!(::hashtile::$s, $b); $m!($s, $b); )+ )+
    };
    ($m:ident; $($s:ident : $($b:literal)+);+) => {
        $( $( $crate::assert_instance!(::hashtile::$s, $b); $crate::__for_each_width!($m, $s, $b); )+ )+
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __for_each_width {
    ($m:ident, $s:ident, $b:literal) => {
        $m!($s, $b, u32, u32);
        $m!($s, $b, u32, u64);
        $m!($s, $b, u64, u32);
        $m!($s, $b, u64, u64);
    };
}

/// Fails to compile unless `$scheme` supports bucket size `$b` (its `SchemeInfo::BUCKET_SIZES`).
#[macro_export]
macro_rules! assert_instance {
    ($scheme:ty, $b:literal) => {
        const _: () = assert!(
            ::hashtile::scheme::bucket_size_supported(
                <$scheme as ::hashtile::SchemeInfo>::BUCKET_SIZES,
                $b
            ),
            concat!(
                "invalid hashtile instance: ",
                stringify!($scheme),
                " does not support bucket size ",
                stringify!($b),
                " (see its SchemeInfo::BUCKET_SIZES)"
            )
        );
    };
}

/// Calls `$m!(B)` for every bucket size hashtile supports (1, 2, 4, 8, 16, 32).
///
/// ```
/// macro_rules! check { ($b:literal) => { assert!(($b as u32).is_power_of_two() && $b <= 32); } }
/// hashtile_macros::for_each_bucket_size!(check);
/// ```
#[macro_export]
macro_rules! for_each_bucket_size {
    ($m:ident) => {
        $m!(1);
        $m!(2);
        $m!(4);
        $m!(8);
        $m!(16);
        $m!(32);
    };
}
