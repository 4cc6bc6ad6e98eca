//! Keeping what a child cannot place: its stash, confined rebuilds (re-seeded, alone), the in-place purge of
//! erased slots, and growth (a hash-routed split, or a new child in arrival order); and the public
//! `rebuild_child`.

use super::PagedTable;
use super::batch::{Batch, Pairs, last_occurrences, split_by_bits};
use super::config::Placement;
use super::meta::ChildMeta;
use crate::paged::protocol::{Rebuilt, SplitSpec};
use crate::table::engine::Inserted;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, HashFamily, Key, Result, Value};
use std::collections::HashMap;

impl<S: SchemeInfo, K: Key, V: Value> PagedTable<S, K, V> {
    /// Rebuilds child `c` in place under its own family, dropping its erased slots.
    pub(super) fn purge(&mut self, c: usize, failed: &mut Vec<(K, V)>) -> Result<()> {
        self.admit(c, &[])?;
        let family = self.children[c].family();
        let Rebuilt { lost, .. } = self.children[c].rebuild_split(family, None)?;
        self.place_unplaced(c, lost, failed)
    }

    /// Splits hash-routed child `c` in two: its pairs whose next route bit is set move to a new child.
    /// `false` when the table may not grow.
    pub(super) fn split(&mut self, c: usize, failed: &mut Vec<(K, V)>) -> Result<bool> {
        let d = self.meta[c].depth;
        if !self.can_grow() || !self.directory.as_ref().expect("hash-routed").can_split(d) {
            return Ok(false);
        }
        self.admit(c, &[])?;
        let bytes = self.children[c].device_bytes();
        if self.residency.holds(2, 2 * bytes) {
            // Both halves fit the budget at once: the child splits where it lives (on a device: no pair
            // crosses the bus). The directory changes only once the new child exists, then the stash and
            // whatever the two builds could not place are routed again.
            self.residency.make_room(&mut self.children, bytes, &[c])?;
            let split = SplitSpec {
                seed: self.directory.as_ref().expect("hash-routed").seed,
                depth: d,
                family: self.next_family(),
            };
            let family = self.children[c].family();
            let Rebuilt { lost, split } = self.children[c].rebuild_split(family, Some(split))?;
            let (engine, lost_new) = split.expect("asked for a split");
            let c2 = self.children.len();
            self.residency.admitted_new(c2, engine.device_bytes());
            self.children.push(engine);
            self.meta.push(ChildMeta {
                stash: HashMap::new(),
                depth: d + 1,
            });
            self.link_split(c, d, c2);
            self.house(c2)?;
            let mut pending: Pairs<K, V> = self.meta[c].stash.drain().collect();
            pending.extend(lost);
            pending.extend(lost_new);
            if !pending.is_empty() {
                let (k, v): Batch<K, V> = pending.into_iter().unzip();
                self.insert_routed(&k, &v, failed)?;
            }
            return Ok(true);
        }
        // Through the host: the pairs are read back and split there; the new child exists and the directory
        // names it before either half is inserted, so a nested split of either half sees a consistent table.
        let mut all = self.children[c].pairs()?;
        all.extend(self.meta[c].stash.drain());
        let dir = self.directory.as_ref().expect("hash-routed");
        let (high, low): (Pairs<K, V>, Pairs<K, V>) = all
            .into_iter()
            .partition(|(k, _)| dir.goes_high(k.widen(), d));
        let c2 = self.new_child(d + 1, &[])?;
        self.link_split(c, d, c2);
        let family = self.children[c].family();
        self.refill(c, family, low, failed)?;
        let family = self.children[c2].family();
        self.refill(c2, family, high, failed).map(|()| true)
    }

    /// Points the upper half of child `c`'s directory entries (depth `d`) at new child `c2`.
    fn link_split(&mut self, c: usize, d: u32, c2: usize) {
        let dir = self.directory.as_mut().expect("hash-routed");
        let linked = dir.split(c as u32, d, c2 as u32);
        debug_assert!(linked, "can_split was checked");
        self.meta[c].depth = d + 1;
        self.residency.stats.grown += 1;
    }

    /// Empties child `c` under `family` and inserts `pairs` (distinct keys, none stored elsewhere).
    pub(super) fn refill(
        &mut self,
        c: usize,
        family: HashFamily,
        pairs: Vec<(K, V)>,
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        self.admit(c, &[])?;
        self.children[c].reset(family)?;
        if pairs.is_empty() {
            return Ok(());
        }
        let (k, v): Batch<K, V> = pairs.into_iter().unzip();
        let Inserted { unplaced, .. } = self.children[c].insert_distinct(&k, &v)?;
        self.place_unplaced(c, unplaced, failed)
    }

    /// Keeps pairs child `c` could not place: in its stash while it has room, else by a confined rebuild
    /// (re-seeded, up to `max_rebuilds` times), else by growing the table; what nothing places goes to
    /// `failed`.
    pub(super) fn place_unplaced(
        &mut self,
        c: usize,
        unplaced: Vec<(K, V)>,
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        if unplaced.is_empty() {
            return Ok(());
        }
        // Engines hand back distinct keys that are not stored; a sequential (deterministic) CPU build may hand
        // back an early occurrence of a key whose later occurrence it stored: keep each key's last pair, and
        // none that the child holds.
        self.admit(c, &[])?;
        let (k, v): Batch<K, V> = unplaced.into_iter().unzip();
        let (_, bits) = self.presence(c, &k)?;
        let (_, (k, v)) = split_by_bits(k, v, &bits);
        let unplaced = last_occurrences(k, v);
        if unplaced.is_empty() {
            return Ok(());
        }
        let cap = self.config.stash_pairs;
        if self.meta[c].stash.len() + unplaced.len() <= cap {
            self.meta[c].stash.extend(unplaced);
            return Ok(());
        }
        self.admit(c, &[])?;
        let mut last: Pairs<K, V> = self.meta[c].stash.drain().collect();
        last.extend(unplaced);
        let mut family = self.children[c].family();
        for _ in 0..self.config.child.max_rebuilds.max(1) {
            // Re-seeded where the pairs live (on a device: no pair crosses the bus), then the pairs it did
            // not hold are inserted again.
            family = family.reseeded();
            self.residency.stats.rebuilds += 1;
            let Rebuilt { mut lost, .. } = self.children[c].rebuild_split(family, None)?;
            if !last.is_empty() {
                let (k, v): Batch<K, V> = last.into_iter().unzip();
                lost.extend(self.children[c].insert_distinct(&k, &v)?.unplaced);
            }
            last = lost;
            if last.len() <= cap {
                self.meta[c].stash.extend(last);
                return Ok(());
            }
        }
        // The rebuild budget is spent: the child keeps what it placed, and the rest goes to more children.
        match self.config.placement {
            Placement::HashRouted => {
                if self.split(c, failed)? {
                    let (k, v): Batch<K, V> = last.into_iter().unzip();
                    self.insert_routed(&k, &v, failed)
                } else {
                    failed.extend(last);
                    Ok(())
                }
            }
            Placement::ArrivalOrder => {
                if self.can_grow() {
                    self.residency.stats.grown += 1;
                    let n = self.new_child(0, &[])?;
                    let family = self.children[n].family();
                    self.refill(n, family, last, failed)
                } else {
                    failed.extend(last);
                    Ok(())
                }
            }
        }
    }

    /// Re-seeds child `c` and rebuilds it alone from its pairs and stash (what a failing child does by itself;
    /// exposed to refresh a child and to measure a confined rebuild). Out-of-range `c` is
    /// [`Error::InvalidConfig`]; pairs the rebuild cannot place are returned in [`Error::BuildFailed`].
    pub fn rebuild_child(&mut self, c: usize) -> Result<()> {
        // On the table's own stream, whichever thread calls (NOTES.md D38).
        let stream = self.stream.id();
        stream.executes(|| {
            if c >= self.children.len() {
                return Err(Error::InvalidConfig(format!(
                    "child {c} does not exist (the table has {})",
                    self.children.len()
                )));
            }
            self.admit(c, &[])?;
            let family = self.children[c].family().reseeded();
            self.residency.stats.rebuilds += 1;
            let Rebuilt { lost, .. } = self.children[c].rebuild_split(family, None)?;
            let mut pending: Pairs<K, V> = self.meta[c].stash.drain().collect();
            pending.extend(lost);
            let mut failed = Vec::new();
            self.place_unplaced(c, pending, &mut failed)?;
            self.settled((), failed)
        })
    }
}
