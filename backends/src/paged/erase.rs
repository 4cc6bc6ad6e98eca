//! The paged table's erase: keys leave the stashes, then each child that holds some either marks their slots
//! erased in place (tombstones) or is rebuilt without them.

use super::PagedTable;
use super::config::Placement;
use hashtile_core::element::without_sentinel;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Key, Result, Value};
use std::collections::HashSet;

impl<S: SchemeInfo, K: Key, V: Value> PagedTable<S, K, V> {
    /// Removes `keys` (absent keys are skipped; repeats count once) and returns how many pairs were removed.
    /// Stable children of 32-bit keys mark the slots erased in place (tombstones); other children that held
    /// some of the keys are rebuilt without them under their own family (confined to them).
    pub fn erase(&mut self, keys: &[K]) -> Result<usize> {
        // On the table's own stream, whichever thread calls (NOTES.md D38).
        let stream = self.stream.id();
        stream.executes(|| {
            // The sentinel is never stored (and an erased packed slot holds it): it is skipped.
            let keys = without_sentinel(keys);
            let keys = &keys[..];
            let mut failed = Vec::new();
            let mut erased = 0;
            match self.config.placement {
                Placement::HashRouted => {
                    let part = self.route(keys, &[], false);
                    let n = self.children.len();
                    for c in self.visit_order((0..n).filter(|&c| !part.range(c).is_empty())) {
                        erased += self
                            .erase_from(c, &part.keys[part.range(c)], &mut failed)?
                            .0;
                    }
                    self.scratch = Some(part);
                }
                Placement::ArrivalOrder => {
                    let mut k: Vec<K> = keys.to_vec();
                    let wanted: Vec<usize> = self.occupied().collect();
                    for c in self.visit_order(wanted.into_iter()) {
                        if k.is_empty() {
                            break;
                        }
                        let (n, rest) = self.erase_from(c, &k, &mut failed)?;
                        erased += n;
                        k = rest;
                    }
                }
            }
            self.settled(erased, failed)
        })
    }

    /// Erases from child `c` the keys it holds; returns how many pairs went and the keys it did not hold.
    fn erase_from(
        &mut self,
        c: usize,
        keys: &[K],
        failed: &mut Vec<(K, V)>,
    ) -> Result<(usize, Vec<K>)> {
        let mut erased = 0;
        let mut keys: Vec<K> = if self.meta[c].stash.is_empty() {
            keys.to_vec()
        } else {
            keys.iter()
                .copied()
                .filter(|k| match self.meta[c].stash.remove(k) {
                    Some(_) => {
                        erased += 1;
                        false
                    }
                    None => true,
                })
                .collect()
        };
        if self.children[c].is_empty() || keys.is_empty() {
            return Ok((erased, keys));
        }
        let (_, found) = self.find_in(c, &keys)?;
        let mut gone = HashSet::new();
        let mut rest = Vec::new();
        for (k, f) in keys.drain(..).zip(found) {
            if f == 1 {
                gone.insert(k);
            } else {
                rest.push(k);
            }
        }
        if !gone.is_empty() && S::STABLE {
            // Stable children mark the slots erased in place (a tombstone each, until the next rebuild).
            let marked: Vec<K> = gone.iter().copied().collect();
            if let Some(n) = self.children[c].erase_stored(&marked)? {
                erased += n;
                return Ok((erased, rest));
            }
        }
        if !gone.is_empty() {
            let kept: Vec<(K, V)> = self.children[c]
                .pairs()?
                .into_iter()
                .filter(|(k, _)| !gone.contains(k))
                .collect();
            erased += gone.len();
            let family = self.children[c].family();
            self.refill(c, family, kept, failed)?;
        }
        Ok((erased, rest))
    }
}
