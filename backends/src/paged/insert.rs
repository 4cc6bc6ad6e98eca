//! The paged table's inserts (upserts): the public `insert`, the hash-routed insert partitioned on the host
//! (each child's part, `insert_into`), the stash's updates, and the arrival-order insert (updates of the
//! stored keys, then the open child).

use super::PagedTable;
use super::batch::{Batch, last_occurrences, split_by_bits};
use super::config::Placement;
use crate::runtime::trace::Trace;
use crate::table::engine::Inserted;
use hashtile_core::element::first_sentinel;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, Result, Value};
use std::collections::HashMap;

impl<S: SchemeInfo, K: Key, V: Value> PagedTable<S, K, V> {
    /// Inserts (upserts) pairs: the **last** occurrence of a key in the batch wins, and a stored key gets the
    /// new value. Full children grow the table (a split, or a new child) and failing children are rebuilt
    /// alone; the other children are untouched.
    ///
    /// Errors: [`Error::LengthMismatch`], [`Error::SentinelKey`] and [`Error::CapacityExceeded`] (with
    /// `max_children`, checked conservatively: every key of the batch counts as new) leave the table
    /// unchanged. [`Error::BuildFailed`] returns the pairs that no rebuild or growth could place; every other
    /// pair is stored.
    pub fn insert(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        // On the table's own stream, whichever thread calls (NOTES.md D38).
        let stream = self.stream.id();
        stream.executes(|| {
            if keys.len() != values.len() {
                return Err(Error::LengthMismatch {
                    what: "values",
                    got: values.len(),
                    expected: keys.len(),
                });
            }
            // A batch that one device-routed call takes is checked for the sentinel by the device during its copy
            // (`Router::checks_sentinel`); any other batch is scanned here first, so that a refused batch leaves
            // the table unchanged.
            if !self.router_checks(keys.len())
                && let Some(index) = first_sentinel(keys)
            {
                return Err(Error::SentinelKey { index });
            }
            if let Some(m) = self.config.max_children {
                let most = m * self.limit();
                if self.len() + keys.len() > most {
                    return Err(Error::CapacityExceeded {
                        len: self.len(),
                        incoming: keys.len(),
                        capacity: most,
                    });
                }
            }
            if keys.is_empty() {
                return Ok(());
            }
            let mut failed = Vec::new();
            match self.config.placement {
                Placement::HashRouted => self.insert_routed(keys, values, &mut failed)?,
                Placement::ArrivalOrder => {
                    self.insert_arrival(keys.to_vec(), values.to_vec(), &mut failed)?
                }
            }
            if !failed.is_empty() {
                // A pair given up on may have a later occurrence that was stored after all (in a child with room):
                // report each key once, and only keys the table does not hold.
                let (k, v): Batch<K, V> = failed.into_iter().unzip();
                let mut out = vec![V::default(); k.len()];
                let mut bits = vec![0u32; k.len().div_ceil(32)];
                self.lookup(&k, &mut out, &mut bits, true)?;
                let (_, (k, v)) = split_by_bits(k, v, &bits);
                failed = last_occurrences(k, v);
            }
            self.settled((), failed)
        })
    }

    /// Hash-routed insert: partition by child, then each child's part (resident children first).
    pub(super) fn insert_routed(
        &mut self,
        keys: &[K],
        values: &[V],
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        if let Some(router) = self.take_router() {
            let done = self.insert_on_device(&*router, keys, values, failed);
            self.give_router(router);
            return done;
        }
        let mut trace = Trace::new("paged");
        let part = self.route(keys, values, false);
        trace.lap("partition");
        let parts = self.children.len();
        for c in self.visit_order((0..parts).filter(|&c| !part.range(c).is_empty())) {
            let r = part.range(c);
            self.insert_into(c, &part.keys[r.clone()], &part.values[r], failed)?;
            trace.lap("children");
        }
        self.scratch = Some(part);
        trace.report("insert", keys.len());
        Ok(())
    }

    /// Upserts pairs that all route to child `c`, splitting it first when they would pass its load.
    fn insert_into(
        &mut self,
        c: usize,
        keys: &[K],
        values: &[V],
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        self.admit(c, &[])?;
        if self.children[c].marks() > 0 && self.load(c) + keys.len() > self.limit() {
            // Its erased slots go first: the child is rebuilt in place (which may move pairs into its stash,
            // or grow the table), then the batch is routed again.
            self.purge(c, failed)?;
            return self.insert_routed(keys, values, failed);
        }
        let rest = self.stash_updates(&[c], keys, values);
        let (keys, values) = match &rest {
            Some((k, v)) => (&k[..], &v[..]),
            None => (keys, values),
        };
        if keys.is_empty() {
            return Ok(());
        }
        let limit = self.limit();
        let len = self.children[c].len();
        if len + keys.len() > limit {
            let new = self.children[c].count_new(keys)?;
            if len + new > limit {
                if self.split(c, failed)? {
                    return self.insert_routed(keys, values, failed);
                }
                // The table may not grow: the child takes what its slots hold, the rest is returned.
                let room = self.child_capacity().saturating_sub(len);
                if new > room {
                    return self.insert_up_to(c, keys, values, room, failed);
                }
            }
        }
        let Inserted { unplaced, .. } = self.children[c].upsert(keys, values)?;
        self.place_unplaced(c, unplaced, failed)
    }

    /// Upserts into child `c` the batch's updates of stored keys and its first `room` new keys (their last
    /// occurrences); the other new keys go to `failed`.
    fn insert_up_to(
        &mut self,
        c: usize,
        keys: &[K],
        values: &[V],
        room: usize,
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        let (_, bits) = self.presence(c, keys)?;
        let ((mut uk, mut uv), (nk, nv)) = split_by_bits(keys.to_vec(), values.to_vec(), &bits);
        let mut fresh = last_occurrences(nk, nv);
        failed.extend(fresh.split_off(room.min(fresh.len())));
        for (k, v) in fresh {
            uk.push(k);
            uv.push(v);
        }
        let Inserted { unplaced, .. } = self.children[c].upsert(&uk, &uv)?;
        self.place_unplaced(c, unplaced, failed)
    }

    /// Applies the batch's updates of keys held in the stashes of `among` (in batch order, so the last
    /// occurrence wins) and returns the rest of the batch.
    fn take_stash_updates(&mut self, among: &[usize], keys: Vec<K>, values: Vec<V>) -> Batch<K, V> {
        match self.stash_updates(among, &keys, &values) {
            Some(rest) => rest,
            None => (keys, values),
        }
    }

    /// [`Self::take_stash_updates`] on borrowed pairs: `None` when no stash of `among` holds anything (the
    /// batch is unchanged; nothing is copied).
    fn stash_updates(&mut self, among: &[usize], keys: &[K], values: &[V]) -> Option<Batch<K, V>> {
        if among.iter().all(|&c| self.meta[c].stash.is_empty()) {
            return None;
        }
        let owner: HashMap<K, usize> = among
            .iter()
            .flat_map(|&c| self.meta[c].stash.keys().map(move |&k| (k, c)))
            .collect();
        let mut rest = (
            Vec::with_capacity(keys.len()),
            Vec::with_capacity(keys.len()),
        );
        for (&k, &v) in keys.iter().zip(values) {
            match owner.get(&k) {
                Some(&c) => {
                    self.meta[c].stash.insert(k, v);
                }
                None => {
                    rest.0.push(k);
                    rest.1.push(v);
                }
            }
        }
        Some(rest)
    }

    /// Updates the keys of the batch that children `among` (or their stashes) hold, in those children, and
    /// returns the rest of the batch (arrival order: a key is stored in at most one child).
    fn update_held(
        &mut self,
        among: &[usize],
        keys: Vec<K>,
        values: Vec<V>,
        failed: &mut Vec<(K, V)>,
    ) -> Result<Batch<K, V>> {
        let (mut keys, mut values) = self.take_stash_updates(among, keys, values);
        let wanted: Vec<usize> = among
            .iter()
            .copied()
            .filter(|&c| !self.children[c].is_empty())
            .collect();
        for c in self.visit_order(wanted.into_iter()) {
            if keys.is_empty() {
                break;
            }
            self.admit(c, &[])?;
            let (_, bits) = self.presence(c, &keys)?;
            if bits.iter().all(|&w| w == 0) {
                continue;
            }
            let ((hk, hv), (rk, rv)) = split_by_bits(keys, values, &bits);
            // Every key is stored: the child's load does not change.
            let Inserted { unplaced, .. } = self.children[c].upsert(&hk, &hv)?;
            self.place_unplaced(c, unplaced, failed)?;
            keys = rk;
            values = rv;
        }
        Ok((keys, values))
    }

    /// Arrival-order insert: update what is stored, then fill the open (last) child, opening new ones.
    fn insert_arrival(
        &mut self,
        keys: Vec<K>,
        values: Vec<V>,
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        let all: Vec<usize> = (0..self.children.len()).collect();
        let (mut keys, mut values) = self.update_held(&all, keys, values, failed)?;
        let limit = self.limit();
        while !keys.is_empty() {
            let mut open = self.children.len() - 1;
            if self.load(open) >= limit && self.children[open].marks() > 0 {
                // The open child's erased slots go first (the purge may append a child for what it cannot place).
                self.purge(open, failed)?;
                open = self.children.len() - 1;
            }
            if self.load(open) >= limit {
                if !self.can_grow() {
                    failed.extend(last_occurrences(keys, values));
                    return Ok(());
                }
                self.residency.stats.grown += 1;
                open = self.new_child(0, &[])?;
            }
            self.admit(open, &[])?;
            let room = limit.saturating_sub(self.load(open));
            let take = room.clamp(1, keys.len());
            let first_new = self.children.len();
            let rest_k = keys.split_off(take);
            let rest_v = values.split_off(take);
            let Inserted { unplaced, .. } = self.children[open].upsert(&keys, &values)?;
            self.place_unplaced(open, unplaced, failed)?;
            if rest_k.is_empty() {
                break;
            }
            // Later occurrences of keys just stored are updates now: in the open child, or in children its
            // growth made.
            let touched: Vec<usize> = std::iter::once(open)
                .chain(first_new..self.children.len())
                .collect();
            (keys, values) = self.update_held(&touched, rest_k, rest_v, failed)?;
        }
        Ok(())
    }
}
