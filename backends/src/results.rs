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

/// Every value of each query key: the values of query `i` are `values[offsets[i]..offsets[i + 1]]`
/// ([`FindAll::get`]).
///
/// The offsets are 32-bit, as Arrow's lists and the device's own offsets are: one answer holds at most
/// `u32::MAX` values (16 GiB of `u32` values), and a call that would yield more is a typed error (split its
/// queries). Half the bytes of `usize` offsets is what a host call writes and the kernel zeroes for a fresh
/// answer: `find_all` from host data is bound by the host's memory bandwidth (NOTES.md D44).
///
/// ```
/// use hashtile_backends::results::FindAll;
/// let all = FindAll { offsets: vec![0, 2, 2, 3], values: vec![10u32, 11, 30] };
/// assert_eq!(all.len(), 3);
/// assert_eq!(all.get(0), Some(&[10, 11][..]));
/// assert_eq!(all.get(1), Some(&[][..]));
/// assert_eq!(all.iter().map(<[u32]>::len).collect::<Vec<_>>(), [2, 0, 1]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FindAll<V> {
    /// `queries + 1` offsets into `values` (the first one 0).
    pub offsets: Vec<u32>,
    /// The values, query by query.
    pub values: Vec<V>,
}

impl<V> FindAll<V> {
    /// The number of queries answered.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// `true` when no query is answered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values of query `i` (`None` past the last query).
    pub fn get(&self, i: usize) -> Option<&[V]> {
        let (&from, &to) = (self.offsets.get(i)?, self.offsets.get(i + 1)?);
        self.values.get(from as usize..to as usize)
    }

    /// The values of each query, in query order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[V]> + '_ {
        self.offsets
            .windows(2)
            .map(|w| &self.values[w[0] as usize..w[1] as usize])
    }
}

/// The error of a `find_all` whose answer would hold `at_least` values, more than its 32-bit offsets address.
pub(crate) fn past_32_bit_offsets(at_least: u64) -> hashtile_core::Error {
    hashtile_core::Error::InvalidConfig(format!(
        "find_all yields more than 2^32 - 1 values (at least {at_least}); offsets are 32-bit: split the keys"
    ))
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
