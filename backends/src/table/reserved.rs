//! A user-chosen reserved key ([`TableConfig::reserved_key`](super::TableConfig::reserved_key)): the table
//! keeps its all-ones empty word, and [`HashTable`](super::HashTable) swaps the user's reserved key with the
//! all-ones key on the way in and out. The swap is its own inverse and a bijection on keys, so the table stores
//! exactly the user's keys (renamed), finds answer for the right key, and the user's reserved key lands on the
//! all-ones key, which every engine already refuses and never finds.

use hashtile_core::{Error, Key, Result};
use rayon::prelude::*;
use std::borrow::Cow;

/// The swap of one reserved key with the all-ones key (none: the table reserves the all-ones key itself).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeySwap<K: Key> {
    reserved: Option<K>,
}

impl<K: Key> KeySwap<K> {
    /// The swap for a configured reserved key (widened), checked to be a `K`.
    pub(crate) fn new(reserved: Option<u64>) -> Result<Self> {
        let reserved = match reserved {
            None => None,
            Some(w) if K::narrow(w).widen() != w => {
                return Err(Error::InvalidConfig(format!(
                    "reserved key {w:#x} is not a {}-bit key",
                    K::BITS
                )));
            }
            Some(w) => Some(K::narrow(w)).filter(|k| !k.is_sentinel()),
        };
        Ok(Self { reserved })
    }

    /// `true` when a key is swapped (a reserved key is configured).
    pub(crate) fn swaps(&self) -> bool {
        self.reserved.is_some()
    }

    /// The table's key for the user's `k` (and the user's for the table's: the swap is its own inverse).
    #[inline]
    pub(crate) fn key(&self, k: K) -> K {
        match self.reserved {
            Some(r) if k == r => K::EMPTY,
            Some(r) if k.is_sentinel() => r,
            _ => k,
        }
    }

    /// The table's keys for the user's `keys`: borrowed when nothing is swapped, else one parallel pass.
    pub(crate) fn keys<'a>(&self, keys: &'a [K]) -> Cow<'a, [K]> {
        match self.reserved {
            None => Cow::Borrowed(keys),
            Some(_) => Cow::Owned(keys.par_iter().map(|&k| self.key(k)).collect()),
        }
    }

    /// Swaps the keys of pairs in place (pairs read back from the table, or handed to it).
    pub(crate) fn pairs<V: Send>(&self, pairs: &mut [(K, V)]) {
        if self.reserved.is_some() {
            pairs.par_iter_mut().for_each(|p| p.0 = self.key(p.0));
        }
    }

    /// The error with the user's keys where it names keys (the pairs a failed build hands back).
    pub(crate) fn error(&self, e: Error) -> Error {
        match e {
            Error::BuildFailed {
                attempts,
                mut unplaced,
            } if self.reserved.is_some() => {
                for p in &mut unplaced {
                    p.0 = self.key(K::narrow(p.0)).widen();
                }
                Error::BuildFailed { attempts, unplaced }
            }
            e => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashtile_core::Element;

    #[test]
    fn swaps_the_reserved_key_with_all_ones_and_nothing_else() {
        let s = KeySwap::<u32>::new(Some(0)).unwrap();
        assert_eq!(s.key(0), u32::MAX);
        assert_eq!(s.key(u32::MAX), 0);
        assert_eq!(s.key(5), 5);
        assert_eq!(s.keys(&[0, 1, u32::MAX]).into_owned(), vec![u32::MAX, 1, 0]);
        let none = KeySwap::<u32>::new(Some(u32::MAX as u64)).unwrap();
        assert!(matches!(none.keys(&[1, 2]), Cow::Borrowed(_)));
        let signed = KeySwap::<i32>::new(Some((-7i32).widen())).unwrap();
        assert_eq!(signed.key(-7), -1);
        assert_eq!(signed.key(-1), -7);
        assert!(KeySwap::<u32>::new(Some(1 << 40)).is_err());
    }
}
