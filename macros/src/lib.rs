//! # hashtile-macros
//!
//! Instantiation macros for hashtile's scheme x bucket size x key width matrix.
//!
//! [`for_each_bucket_size!`] expands a macro once per supported bucket size, so that tests and benches
//! iterate over every size without hand-written lists.

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
