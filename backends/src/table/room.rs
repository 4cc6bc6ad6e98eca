//! Room in a [`HashTable`]: the checks an insert passes before its engine call (lengths, the sentinel, the
//! capacity), growth into a larger table, the reclaiming of erased slots, and the re-seeded rebuilds that place
//! what an insert or a rebuild could not.

use super::carried::Carried;
use super::{HashTable, TableConfig};
use crate::table::engine::{Inserted, refill};
use hashtile_core::element::first_sentinel;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, ProbeStats, Result, Value};

/// The share of a table's slots that pairs and erased slots may fill before an insert reclaims the marks, where
/// inserts take marks again ([`HashTable::erase`]): a walk ends at a bucket with an empty slot, so walks
/// lengthen as the empty slots run out.
const MARKED_OCCUPANCY: f64 = 15.0 / 16.0;

impl<S: SchemeInfo, K: Key, V: Value> HashTable<S, K, V> {
    /// The checks before an insert's engine call, with the table unchanged on an error: equal lengths, no
    /// sentinel key (scanned here unless the engine checks `in_pipeline`), and room for the batch's new keys
    /// (counted exactly only when the batch could overflow; erased slots reclaimed first where their room may
    /// be needed). `None`: an empty batch, nothing to do. Else the pairs that growth or the reclaiming rebuild
    /// could not place again ([`Carried`]): the caller inserts them as the head of its batch.
    pub(super) fn admit(
        &mut self,
        keys: &[K],
        values: &[V],
        in_pipeline: bool,
    ) -> Result<Option<Carried<K, V>>> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: keys.len(),
            });
        }
        // A batch that may grow the table is checked on the host first: a bad batch changes nothing, not even
        // the capacity.
        let may_grow = self.growth_limit(self.capacity()) < self.len() + keys.len();
        let in_pipeline = in_pipeline && !may_grow;
        if !in_pipeline {
            let t0 = std::time::Instant::now();
            if let Some(index) = first_sentinel(keys) {
                return Err(Error::SentinelKey { index });
            }
            tracing::trace!(target: "hashtile", phase = "insert: sentinel scan", ms = t0.elapsed().as_secs_f64() * 1e3);
        }
        if keys.is_empty() {
            self.last_insert = ProbeStats::default();
            return Ok(None);
        }
        let mut carried = Carried(Vec::new());
        if may_grow {
            carried.keep(self.grow_for(keys))?;
        }
        // Growth counted the batch's new keys already, and made room for them. The capacity is checked before
        // erased slots are reclaimed: that rebuild may hand back pairs, which then ride in the batch and must
        // not meet a refusal (the engine's own check, `in_pipeline`, would come after it).
        let compact = self.marks_crowd(keys.len());
        let near_full =
            (!in_pipeline || compact) && !may_grow && self.len() + keys.len() > self.capacity();
        if near_full {
            let incoming = self.engine.count_new(keys)?;
            if self.len() + incoming > self.capacity() {
                return Err(Error::CapacityExceeded {
                    len: self.len(),
                    incoming,
                    capacity: self.capacity(),
                });
            }
        }
        if compact {
            carried.keep(self.compact_table())?;
        }
        Ok(Some(carried))
    }

    /// The most pairs a table of `capacity` slots holds before growth moves it into a larger one (`usize::MAX`
    /// without growth).
    pub(super) fn growth_limit(&self, capacity: usize) -> usize {
        match self.config.growth {
            Some(max_load) => (capacity as f64 * max_load).floor() as usize,
            None => usize::MAX,
        }
    }

    /// Growth ([`TableConfig::growth`]): when the batch's new keys (counted exactly) would take the table past its
    /// maximum load, the capacity doubles until they fit and the stored pairs move into the larger table, under
    /// the next family of the table's sequence (as [`HashTable::compact`]: the pairs of one old bucket would
    /// otherwise be re-inserted side by side into shared candidate buckets). Erased slots are dropped on the way.
    pub(super) fn grow_for(&mut self, keys: &[K]) -> Result<()> {
        let incoming = self.engine.count_new(keys)?;
        let needed = self.len() + incoming;
        let mut capacity = self.capacity();
        while self.growth_limit(capacity) < needed {
            capacity = capacity.checked_mul(2).ok_or(Error::CapacityExceeded {
                len: self.len(),
                incoming,
                capacity: self.capacity(),
            })?;
        }
        if capacity == self.capacity() {
            return Ok(());
        }
        let num_buckets =
            TableConfig::with_capacity(capacity).num_buckets(self.bucket_size, S::SEQUENCE)?;
        let params = S::bounded(
            self.config
                .params
                .unwrap_or_else(|| S::default_params(self.bucket_size)),
            num_buckets,
        );
        S::validate(self.bucket_size, &params).map_err(Error::InvalidConfig)?;
        let t0 = std::time::Instant::now();
        let from = self.capacity();
        let lost = self
            .engine
            .regrow(num_buckets, params, self.engine.family().reseeded())?;
        self.params = params;
        tracing::debug!(
            target: "hashtile",
            phase = "growth",
            from,
            to = self.capacity(),
            pairs = self.len(),
            ms = t0.elapsed().as_secs_f64() * 1e3
        );
        if lost.is_empty() {
            Ok(())
        } else {
            self.rebuild(lost)
        }
    }

    /// After an insert's engine call: its statistics kept, and the pairs it could not place placed by re-seeded
    /// rebuilds.
    pub(super) fn settle_insert(&mut self, inserted: Inserted<K, V>) -> Result<()> {
        self.last_insert = inserted.stats;
        if inserted.unplaced.is_empty() {
            Ok(())
        } else {
            self.rebuild(inserted.unplaced)
        }
    }

    /// Whether erased slots should be reclaimed before an insert of `n` keys. Where inserts take marks again
    /// (every scheme, [`HashTable::erase`]), the batch's new keys are assumed to take the
    /// marks first: the table is rebuilt when what is left would fill more than [`MARKED_OCCUPANCY`] of its
    /// slots with pairs and marks (walks, which end at an empty slot, lengthen as the empty slots run out; a
    /// batch that needs more empty slots than there are still lands, through the insert's failure path and a
    /// rebuild). Elsewhere marks are only reclaimed by rebuilds, so the table is rebuilt when the batch may need
    /// the room they hold.
    pub(super) fn marks_crowd(&self, n: usize) -> bool {
        let marks = self.engine.marks();
        if marks == 0 {
            return false;
        }
        let (len, capacity) = (self.len(), self.capacity());
        if self.engine.takes_marks() {
            let taken = len + marks + n.saturating_sub(marks);
            taken as f64 > MARKED_OCCUPANCY * capacity as f64
        } else {
            len + marks + n > capacity
        }
    }

    /// Reclaims erased slots ([`HashTable::erase`]): rebuilds the table from its pairs, under the next hash
    /// family of its deterministic sequence. Inserts do it by themselves when they may need the room; a table
    /// that will only be read again can do it to shorten lookups that probe past the marks. Nothing to do
    /// without marks.
    pub fn compact(&mut self) -> Result<()> {
        let stream = self.stream.id();
        stream.executes(|| self.compact_table().map_err(|e| self.swap.error(e)))
    }

    /// [`HashTable::compact`], its errors naming the table's keys.
    pub(super) fn compact_table(&mut self) -> Result<()> {
        if self.engine.marks() == 0 {
            return Ok(());
        }
        // Under the next family of the table's sequence: the slots are unpacked in bucket order, and under the
        // same family the keys of one bucket would share a candidate bucket while they are re-inserted side by
        // side (on GPUs, concurrently: P2BHT then loads buckets unevenly and fails sooner).
        let lost = self
            .engine
            .rebuild_in_place(self.engine.family().reseeded())?;
        if lost.is_empty() {
            Ok(())
        } else {
            self.rebuild(lost)
        }
    }

    /// Empties the table and inserts `pairs` (distinct keys) under the same hash family; pairs that do not fit
    /// go through [`HashTable::rebuild`].
    pub(super) fn refill(&mut self, pairs: Vec<(K, V)>) -> Result<()> {
        let family = self.engine.family();
        let unplaced = refill(self.engine.as_mut(), family, pairs)?;
        if unplaced.is_empty() {
            Ok(())
        } else {
            self.rebuild(unplaced)
        }
    }

    /// Re-seeds and rebuilds from everything stored plus `pending`, up to `max_rebuilds` times.
    pub(super) fn rebuild(&mut self, mut pending: Vec<(K, V)>) -> Result<()> {
        // Every rebuild below starts from an empty table: erased slots are reclaimed.
        let mut family = self.engine.family();
        for attempt in 1..=self.config.max_rebuilds {
            let mut all = self.engine.pairs()?;
            all.append(&mut pending);
            family = family.reseeded();
            let unplaced = refill(self.engine.as_mut(), family, all)?;
            if unplaced.is_empty() {
                return Ok(());
            }
            pending = unplaced;
            if attempt == self.config.max_rebuilds {
                break;
            }
        }
        Err(Error::BuildFailed {
            attempts: 1 + self.config.max_rebuilds,
            unplaced: pending
                .into_iter()
                .map(|(k, v)| (k.widen(), v.widen()))
                .collect(),
        })
    }
}
