//! The paged table's lookups: `find`, `find_into` and `contains`, the host-partitioned and arrival-order
//! lookups over the children, one child's lookup (`find_in`, `presence`) and the stashes' lookup.

use super::PagedTable;
use super::config::Placement;
use super::route::scatter;
use crate::results::{bits_from, options_from_bits};
use crate::runtime::trace::Trace;
use hashtile_core::element::first_sentinel;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, Result, Value};
use rayon::prelude::*;

impl<S: SchemeInfo, K: Key, V: Value> PagedTable<S, K, V> {
    /// Looks keys up: `Some(value)` if present, `None` if absent.
    pub fn find(&mut self, keys: &[K]) -> Result<Vec<Option<V>>> {
        // On the table's own stream, whichever thread calls (NOTES.md D38).
        let stream = self.stream.id();
        stream.executes(|| {
            let mut out = vec![V::default(); keys.len()];
            let mut bits = vec![0u32; keys.len().div_ceil(32)];
            self.lookup(keys, &mut out, &mut bits, true)?;
            Ok(options_from_bits(&out, &bits))
        })
    }

    /// Looks keys up into `out`: the value, or [`Value::ABSENT`] (all ones) for absent keys.
    pub fn find_into(&mut self, keys: &[K], out: &mut [V]) -> Result<()> {
        // On the table's own stream, whichever thread calls (NOTES.md D38).
        let stream = self.stream.id();
        stream.executes(|| {
            if out.len() != keys.len() {
                return Err(Error::LengthMismatch {
                    what: "out",
                    got: out.len(),
                    expected: keys.len(),
                });
            }
            // The presence bits go to a buffer kept between calls (fresh pages cost a fault each), and are not
            // cleared: every path that uses them writes each word first (the router's copy out, `bits_from`), and
            // `find_into` never reads them (zeroing them cost 1.4 ms, 4%, of a 2^26.8-key find on the H100 host).
            let words = keys.len().div_ceil(32);
            let mut bits = std::mem::take(&mut self.bits);
            if bits.len() < words {
                bits.resize(words, 0);
            }
            let done = self.lookup(keys, out, &mut bits[..words], false);
            self.bits = bits;
            done
        })
    }

    /// `true` for each key that is present.
    pub fn contains(&mut self, keys: &[K]) -> Result<Vec<bool>> {
        // `find` runs on the table's own stream.
        Ok(self.find(keys)?.into_iter().map(|o| o.is_some()).collect())
    }

    /// Finds into `out` (ABSENT where absent) and, with `need_bits`, presence bits into `bits` (else `bits`
    /// may be left as it was). Finds page children in, so they take `&mut self`.
    pub(super) fn lookup(
        &mut self,
        keys: &[K],
        out: &mut [V],
        bits: &mut [u32],
        need_bits: bool,
    ) -> Result<()> {
        self.lookup_bits(keys, out, bits, need_bits)?;
        if self.tombstones() > 0 && first_sentinel(keys).is_some() {
            // A GPU child's erased slot of packed pairs holds the sentinel key (no key word is left to spare), so
            // a lookup of the sentinel itself could match it: the sentinel is never stored, so it is absent.
            let sentinel = K::narrow(u64::MAX);
            for (i, k) in keys.iter().enumerate() {
                if *k == sentinel {
                    out[i] = V::ABSENT;
                    bits[i / 32] &= !(1 << (i % 32));
                }
            }
        }
        Ok(())
    }

    /// [`PagedTable::lookup`] before the sentinel's fix-up.
    fn lookup_bits(
        &mut self,
        keys: &[K],
        out: &mut [V],
        bits: &mut [u32],
        need_bits: bool,
    ) -> Result<()> {
        if self.config.placement == Placement::HashRouted
            && !keys.is_empty()
            && let Some(router) = self.take_router()
        {
            let done = self.find_on_device(&*router, keys, out, bits, need_bits);
            self.give_router(router);
            return done;
        }
        out.fill(V::ABSENT);
        let mut present = vec![0u8; keys.len()];
        match self.config.placement {
            Placement::HashRouted => {
                let mut trace = Trace::new("paged");
                let part = self.route(keys, &[], true);
                trace.lap("partition");
                let n = self.children.len();
                for c in self.visit_order((0..n).filter(|&c| !part.range(c).is_empty())) {
                    let pos = part.of(c);
                    let k = &part.keys[part.range(c)];
                    let (mut vals, mut found) = self.find_in(c, k)?;
                    trace.lap("children");
                    self.stash_lookup(&[c], k, &mut vals, &mut found);
                    scatter(out, pos, &vals);
                    scatter(&mut present, pos, &found);
                    trace.lap("scatter");
                }
                self.scratch = Some(part);
                trace.report("find", keys.len());
            }
            Placement::ArrivalOrder => {
                let mut pos: Vec<u32> = (0..keys.len() as u32).collect();
                let mut k = keys.to_vec();
                let wanted: Vec<usize> = self.occupied().collect();
                for c in self.visit_order(wanted.into_iter()) {
                    if k.is_empty() {
                        break;
                    }
                    let (vals, found) = self.find_in(c, &k)?;
                    let (mut np, mut nk) = (Vec::new(), Vec::new());
                    for j in 0..k.len() {
                        if found[j] == 1 {
                            out[pos[j] as usize] = vals[j];
                            present[pos[j] as usize] = 1;
                        } else {
                            np.push(pos[j]);
                            nk.push(k[j]);
                        }
                    }
                    pos = np;
                    k = nk;
                }
                if !k.is_empty() {
                    let all: Vec<usize> = (0..self.children.len()).collect();
                    let mut vals = vec![V::ABSENT; k.len()];
                    let mut found = vec![0u8; k.len()];
                    self.stash_lookup(&all, &k, &mut vals, &mut found);
                    scatter(out, &pos, &vals);
                    scatter(&mut present, &pos, &found);
                }
            }
        }
        bits_from(bits, keys.len(), |i| present[i] == 1);
        Ok(())
    }

    /// Finds `keys` in child `c` (paged in): values (ABSENT where absent) and presence flags.
    pub(super) fn find_in(&mut self, c: usize, keys: &[K]) -> Result<(Vec<V>, Vec<u8>)> {
        if self.children[c].is_empty() {
            return Ok((vec![V::ABSENT; keys.len()], vec![0; keys.len()]));
        }
        self.admit(c, &[])?;
        let (vals, bits) = self.presence(c, keys)?;
        let found = (0..keys.len())
            .into_par_iter()
            .map(|i| u8::from(crate::results::present(&bits, i)))
            .collect();
        Ok((vals, found))
    }

    /// Fills in keys not found that the stashes of `among` hold.
    fn stash_lookup(&self, among: &[usize], keys: &[K], vals: &mut [V], found: &mut [u8]) {
        if among.iter().all(|&c| self.meta[c].stash.is_empty()) {
            return;
        }
        for (i, k) in keys.iter().enumerate() {
            if found[i] == 0
                && let Some(v) = among.iter().find_map(|&c| self.meta[c].stash.get(k))
            {
                vals[i] = *v;
                found[i] = 1;
            }
        }
    }

    /// Presence bits of `keys` in resident child `c`.
    pub(super) fn presence(&self, c: usize, keys: &[K]) -> Result<(Vec<V>, Vec<u32>)> {
        let mut out = vec![V::default(); keys.len()];
        let mut bits = vec![0u32; keys.len().div_ceil(32)];
        self.children[c].find_into(keys, &mut out, Some(&mut bits))?;
        Ok((out, bits))
    }
}
