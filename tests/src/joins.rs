//! The oracle of the hash joins (`CsrJoin`, `ShardedCsrJoin`): a nested-loop join.

/// Every `(i, j)` with `left[i] == right[j]`, sorted.
pub fn nested_loop_join<K: PartialEq>(left: &[K], right: &[K]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for (i, l) in left.iter().enumerate() {
        for (j, r) in right.iter().enumerate() {
            if l == r {
                out.push((i as u32, j as u32));
            }
        }
    }
    out.sort_unstable();
    out
}
