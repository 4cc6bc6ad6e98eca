//! Pairs carried from a rebuild before an insert into the insert's batch.

use hashtile_core::{Error, Key, Result, Value};
use std::borrow::Cow;

/// Stored pairs that growth or a reclaiming rebuild before an insert could not place again (their
/// [`Error::BuildFailed`] caught by `HashTable::admit`). They go in at the head of the insert's batch:
/// before the batch's own pairs, so that the batch's values win (`insert`) or are combined with the stored
/// ones as if they were still stored (`insert_or_apply`), and whatever still finds no slot comes back in the
/// insert's own error, every other pair stored. Returning the rebuild's error instead would refuse a batch
/// that was never tried and drop the pairs it names from the table.
pub(super) struct Carried<K, V>(pub(super) Vec<(K, V)>);

impl<K: Key, V: Value> Carried<K, V> {
    /// Takes the pairs of a rebuild's [`Error::BuildFailed`]; any other error is returned.
    pub(super) fn keep(&mut self, rebuilt: Result<()>) -> Result<()> {
        match rebuilt {
            Err(Error::BuildFailed { unplaced, .. }) => {
                tracing::debug!(target: "hashtile", pairs = unplaced.len(), "pairs carried into the batch");
                self.0.extend(
                    unplaced
                        .into_iter()
                        .map(|(k, v)| (K::narrow(k), V::narrow(v))),
                );
                Ok(())
            }
            r => r,
        }
    }

    /// The batch with the carried pairs at its head (borrowed as it is when none are).
    pub(super) fn before<'a>(
        &self,
        keys: &'a [K],
        values: &'a [V],
    ) -> (Cow<'a, [K]>, Cow<'a, [V]>) {
        if self.0.is_empty() {
            return (Cow::Borrowed(keys), Cow::Borrowed(values));
        }
        let (mut k, mut v): (Vec<K>, Vec<V>) = self.0.iter().copied().unzip();
        k.extend_from_slice(keys);
        v.extend_from_slice(values);
        (Cow::Owned(k), Cow::Owned(v))
    }
}
