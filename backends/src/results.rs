//! Result shapes and helpers every family shares: mixed batches' operations and outcomes ([`Op`], [`Outcome`]),
//! multimap answers ([`FindAll`]) and presence bits.

/// One operation of a mixed batch (`ChainedTable::apply`, `HashTable::apply`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<K, V> {
    /// Insert the pair: a chained multimap stores a further copy of the key; a static table (unique keys)
    /// inserts or overwrites, as `HashTable::insert` does.
    Insert(K, V),
    /// Insert, or overwrite the key's (first copy's) value.
    Replace(K, V),
    /// Erase the key's (first copy's) pair.
    Erase(K),
    /// The value of the key's (first copy's) pair.
    Find(K),
}

impl<K: Copy, V> Op<K, V> {
    /// The operation's key.
    pub fn key(&self) -> K {
        match *self {
            Op::Insert(k, _) | Op::Replace(k, _) | Op::Erase(k) | Op::Find(k) => k,
        }
    }
}

/// What one operation of a mixed batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<V> {
    /// `Insert`, or `Replace` of a new key: a slot now holds the pair.
    Inserted,
    /// `Replace` (or a static table's `Insert`) of a stored key: its value is overwritten.
    Updated,
    /// `Erase`: the (first copy's) pair is erased.
    Erased,
    /// `Find`: the (first copy's) value.
    Found(V),
    /// `Erase` or `Find` of a key not stored.
    NotFound,
}

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
