//! Result shapes and helpers every family shares: multimap answers ([`FindAll`]) and presence bits.

/// Every value of each query key: the values of query `i` are `values[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FindAll<V> {
    /// `queries + 1` offsets into `values`.
    pub offsets: Vec<usize>,
    /// The values, query by query.
    pub values: Vec<V>,
}

/// `Some(values[i])` where bit `i % 32` of `bits[i / 32]` is set, else `None` (the host API's `find`).
pub fn options_from_bits<V: Copy + Send + Sync>(values: &[V], bits: &[u32]) -> Vec<Option<V>> {
    use rayon::prelude::*;
    values
        .par_iter()
        .enumerate()
        .map(|(i, &v)| present(bits, i).then_some(v))
        .collect()
}

/// Whether bit `i % 32` of `bits[i / 32]` is set: key `i` of a find is present.
pub(crate) fn present(bits: &[u32], i: usize) -> bool {
    bits[i / 32] >> (i % 32) & 1 == 1
}

/// Sets bit `i % 32` of `bits[i / 32]` for each `i` where `present(i)`; `bits` is overwritten.
pub fn bits_from(bits: &mut [u32], n: usize, present: impl Fn(usize) -> bool + Sync) {
    use rayon::prelude::*;
    bits.par_iter_mut().enumerate().for_each(|(w, word)| {
        let mut x = 0u32;
        for b in 0..32 {
            let i = w * 32 + b;
            if i < n && present(i) {
                x |= 1 << b;
            }
        }
        *word = x;
    });
}
