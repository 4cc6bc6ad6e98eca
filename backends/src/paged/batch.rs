//! Batches of pairs as the paged table's paths pass them: the `Batch` and `Pairs` shapes, a split by
//! presence bits and the last occurrence of each key.

use hashtile_core::{Key, Value};
use std::collections::HashMap;

/// Pairs split into keys and values.
pub(super) type Batch<K, V> = (Vec<K>, Vec<V>);
/// Pairs.
pub(super) type Pairs<K, V> = Vec<(K, V)>;

/// A batch split by presence bits (bit `i % 32` of `bits[i / 32]` for pair `i`): the pairs whose bit is set
/// (the keys a presence check found), then the others, each in batch order.
#[allow(clippy::type_complexity)]
pub(super) fn split_by_bits<K, V>(
    keys: Vec<K>,
    values: Vec<V>,
    bits: &[u32],
) -> ((Vec<K>, Vec<V>), (Vec<K>, Vec<V>)) {
    let (set, clear): (Vec<_>, Vec<_>) = keys
        .into_iter()
        .zip(values)
        .enumerate()
        .partition(|(i, _)| crate::results::present(bits, *i));
    let unzip = |v: Vec<(usize, (K, V))>| v.into_iter().map(|(_, p)| p).unzip();
    (unzip(set), unzip(clear))
}

/// The last occurrence of each key, in first-occurrence order.
pub(super) fn last_occurrences<K: Key, V: Value>(keys: Vec<K>, values: Vec<V>) -> Vec<(K, V)> {
    let mut at: HashMap<K, usize> = HashMap::new();
    let mut out: Vec<(K, V)> = Vec::new();
    for (k, v) in keys.into_iter().zip(values) {
        match at.get(&k) {
            Some(&i) => out[i].1 = v,
            None => {
                at.insert(k, out.len());
                out.push((k, v));
            }
        }
    }
    out
}
