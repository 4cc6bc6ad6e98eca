//! Keys for the static tables' tests.

/// `n` distinct 32-bit keys, none the sentinel (all ones), from `salt`: the mix of `0, 1, 2, ...` under it.
pub fn distinct_u32(salt: u32, n: usize) -> Vec<u32> {
    let mut seen = std::collections::HashSet::new();
    (0u32..)
        .map(|i| hashtile::hash::fmix32(i ^ salt))
        .filter(|&k| k != u32::MAX && seen.insert(k))
        .take(n)
        .collect()
}
