//! Hash-routed calls through the device router (`gpu::routing`): taking and giving back the router, the
//! insert on the device (parts queued child by child, or one framed upsert) with the settling of its
//! children, and the find on the device.

use super::PagedTable;
use super::batch::{Batch, Pairs};
use super::config::Placement;
use super::frames;
use crate::paged::gpu::routing::MAX_ROUTED_CHILDREN;
use crate::paged::protocol::{FramedCounts, ROUTED_COUNTERS, RoutedBatch, Router, Upserted};
use crate::runtime::select::Backend;
use crate::runtime::trace::Trace;
use crate::table::engine::Inserted;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, Result, Value};

impl<S: SchemeInfo, K: Key, V: Value> PagedTable<S, K, V> {
    /// The device router, when this table routes on the device (hash-routed GPU children, device routing
    /// on, at most [`MAX_ROUTED_CHILDREN`] children, and no call using it already); give it back to
    /// `self.router` when done.
    pub(super) fn take_router(&mut self) -> Option<Box<dyn Router<K, V>>> {
        if !self.config.device_routing
            || self.backend == Backend::Cpu
            || self.directory.is_none()
            || self.children.len() > MAX_ROUTED_CHILDREN
        {
            return None;
        }
        if self.routing {
            return None;
        }
        if self.router.is_none() {
            self.router = self.children[0].router();
        }
        let router = self.router.take();
        self.routing = router.is_some();
        router
    }

    /// `true` when an insert of `n` keys goes to the device router in one call that checks the sentinel.
    pub(super) fn router_checks(&mut self, n: usize) -> bool {
        if self.config.placement != Placement::HashRouted {
            return false;
        }
        match self.take_router() {
            Some(r) => {
                let checks = r.checks_sentinel() && n <= r.batch_keys();
                self.give_router(r);
                checks
            }
            None => false,
        }
    }

    /// Gives the router back after a call.
    pub(super) fn give_router(&mut self, router: Box<dyn Router<K, V>>) {
        self.router = Some(router);
        self.routing = false;
    }

    /// Hash-routed insert on the device: each device batch is copied in and partitioned by child there
    /// (keeping each key's last occurrence), and each child upserts its part in place: the resident children's
    /// upserts queue back to back and settle once; a child that must be paged in first settles the queued ones
    /// (paging may page one of them out). A child
    /// whose part could pass its load, or whose stash holds pairs, gets that part and its later ones copied
    /// out, and they are routed and inserted on the host after the batch (`insert_into`: a split, the stash's
    /// updates).
    pub(super) fn insert_on_device(
        &mut self,
        router: &dyn Router<K, V>,
        keys: &[K],
        values: &[V],
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        let mut trace = Trace::new("paged");
        let step = router.batch_keys();
        for start in (0..keys.len()).step_by(step) {
            if self.children.len() > MAX_ROUTED_CHILDREN {
                // The table grew past what the device routes during this call: the rest on the host.
                return self.insert_routed(&keys[start..], &values[start..], failed);
            }
            let end = (start + step).min(keys.len());
            let dir = self.directory.clone().expect("hash-routed");
            let children = self.children.len();
            let limit = self.limit();
            // Per child: keys queued since it last settled, and whether its parts go through the host in this
            // call; the queued children; the parts that go through the host, in order.
            let mut pending = vec![0usize; children];
            let mut later = vec![false; children];
            let mut queued: Vec<usize> = Vec::new();
            let mut on_host: Vec<Batch<K, V>> = Vec::new();
            let route = dir.route_map(children);
            // Every child resident in the frames: a batch that fits goes in without a partition.
            let framed = self.framed_upsert()?;
            // Diagnosis (a TRACE subscriber): when the partition reached the children, and when they were queued.
            let mut part_at: Vec<std::time::Instant> = Vec::new();
            let mut on_part = |batch: &RoutedBatch| -> Result<()> {
                part_at.push(std::time::Instant::now());
                let mut queue = || -> Result<()> {
                    let wanted = (0..children).filter(|&c| batch.counts[c] > 0);
                    let order = self.visit_order(wanted);
                    let ahead = self.prefetching();
                    // Children whose part goes through the host (after the batch) need no page-in now.
                    let on_host_now = |t: &Self, c: usize, pending: &[usize], later: &[bool]| {
                        later[c]
                            || !t.meta[c].stash.is_empty()
                            || t.load(c) + pending[c] + batch.counts[c] > limit
                    };
                    for (j, &c) in order.iter().enumerate() {
                        if on_host_now(self, c, &pending, &later) {
                            later[c] = true;
                            let (k, v) = router.download(batch, c)?;
                            on_host.push((k, v));
                            continue;
                        }
                        // The next child that needs a page-in is paged in before this one's kernels are
                        // queued, so that its copy runs beside them.
                        let next = if ahead {
                            order[j + 1..]
                                .iter()
                                .copied()
                                .find(|&n| !on_host_now(self, n, &pending, &later))
                                .filter(|&n| !self.children[n].is_resident())
                        } else {
                            None
                        };
                        if (!self.children[c].is_resident() || next.is_some()) && !queued.is_empty()
                        {
                            // Paging may page a queued child out: the queued ones settle first (before this
                            // child is admitted: settling may page children in).
                            let counters = router.counters(batch)?;
                            self.settle_queued(&mut queued, &mut pending, failed, &counters)?;
                        }
                        self.admit(c, &[])?;
                        if let Some(n) = next {
                            self.prefetch(n, c)?;
                        }
                        self.children[c].upsert_routed(batch, c)?;
                        queued.push(c);
                        pending[c] += batch.counts[c];
                    }
                    Ok(())
                };
                let done = queue();
                if done.is_err() && !queued.is_empty() {
                    // What was queued settles even when a part failed (the children's counts stay right).
                    let counters = router.counters(batch)?;
                    self.settle_queued(&mut queued, &mut pending, failed, &counters)?;
                }
                part_at.push(std::time::Instant::now());
                done
            };
            let plan = framed.as_ref().map(frames::FramedPlan::upsert);
            let routed = router.upsert(
                &keys[start..end],
                &values[start..end],
                route,
                plan,
                &mut on_part,
            );
            trace.laps_ending_at(&part_at, &["copied and routed", "children queued"]);
            if routed.is_err() && framed.is_some() {
                // A framed batch may have written chunks into the frames before it failed: no child may page
                // out with its old host image.
                for c in &mut self.children {
                    let _ = c.note_framed(0);
                }
            }
            let counters = match routed? {
                Upserted::Routed(counters) => counters,
                Upserted::Framed(counts) => {
                    trace.lap("framed upsert");
                    self.residency.stats.framed_upserts += 1;
                    self.settle_framed(counts, failed)?;
                    trace.lap("framed upsert settled");
                    continue;
                }
            };
            trace.lap("counters read");
            self.settle_queued(&mut queued, &mut pending, failed, &counters)?;
            trace.lap("children settled");
            if !on_host.is_empty() {
                // Routed again on the host, in part order: a split of one child while inserting its first
                // part would move keys of its later parts to the new child.
                let (k, v): Batch<K, V> = on_host
                    .into_iter()
                    .flat_map(|(k, v)| k.into_iter().zip(v))
                    .unzip();
                self.insert_routed(&k, &v, failed)?;
            }
            trace.lap("children through the host");
        }
        trace.report("insert (device routing)", keys.len());
        Ok(())
    }

    /// Settles the routed upserts queued on `queued` (emptied; `pending` zeroed for them) from the batch's
    /// `counters` as read back ([`ROUTED_COUNTERS`] words per child), then keeps what each could not place.
    fn settle_queued(
        &mut self,
        queued: &mut Vec<usize>,
        pending: &mut [usize],
        failed: &mut Vec<(K, V)>,
        counters: &[u32],
    ) -> Result<()> {
        // Every queued child settles, even after one fails, so that none is left with work in flight.
        let mut settled = Vec::with_capacity(queued.len());
        let mut first_error = None;
        for c in queued.drain(..) {
            pending[c] = 0;
            let words = &counters[c * ROUTED_COUNTERS..(c + 1) * ROUTED_COUNTERS];
            match self.children[c].settle_routed(words) {
                Ok(inserted) => settled.push((c, inserted)),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for (c, Inserted { unplaced, .. }) in settled {
            self.place_unplaced(c, unplaced, failed)?;
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Settles a framed upsert batch: each child written holds its new keys less those it gave up on, which
    /// it then keeps like any child's (stash, confined rebuild, growth: [`Self::place_unplaced`]).
    fn settle_framed(
        &mut self,
        counts: FramedCounts<K, V>,
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        let n = self.children.len();
        self.residency.touch(|c| counts.kept[c] > 0);
        // Every written child records its writes, even after one fails.
        let mut first_error = None;
        for c in (0..n).filter(|&c| counts.kept[c] > 0) {
            if let Err(e) = self.children[c].note_framed(counts.stored[c]) {
                first_error.get_or_insert(e);
            }
        }
        let mut lost: Vec<Pairs<K, V>> = (0..n).map(|_| Vec::new()).collect();
        for (k, v) in counts.unplaced {
            let c = self.child_of(k).expect("a hash-routed table");
            lost[c].push((k, v));
        }
        if counts.untracked > 0 {
            return Err(Error::StashOverflow {
                untracked: counts.untracked,
                unplaced: lost
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.widen(), v.widen()))
                    .collect(),
            });
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        for (c, pairs) in lost.into_iter().enumerate() {
            self.place_unplaced(c, pairs, failed)?;
        }
        Ok(())
    }

    /// Hash-routed find on the device: each device batch is copied in and partitioned there, each child
    /// looks its part up (resident children first), and the answers come back in input order. Keys that the children lack are then looked up in their child's
    /// stash (only when some stash holds pairs).
    pub(super) fn find_on_device(
        &mut self,
        router: &dyn Router<K, V>,
        keys: &[K],
        out: &mut [V],
        bits: &mut [u32],
        need_bits: bool,
    ) -> Result<()> {
        let mut trace = Trace::new("paged");
        // Presence bits come back when the caller or the stashes' lookup needs them; otherwise the children
        // look values up only (absent keys read all ones).
        let with_bits = need_bits || self.stash_len() > 0;
        // Device batches are multiples of 2048 keys, so each starts on a whole word of `bits`.
        let step = router.batch_keys();
        // Every child resident: one launch per copy chunk over the shared slot frames.
        let framed = self.framed()?;
        for start in (0..keys.len()).step_by(step) {
            let end = (start + step).min(keys.len());
            let dir = self.directory.clone().expect("hash-routed");
            let children = self.children.len();
            let route = dir.route_map(children);
            let words = start / 32..end.div_ceil(32);
            if let Some((frames, descs)) = &framed {
                router.find_framed(
                    &keys[start..end],
                    route,
                    frames,
                    descs,
                    &mut out[start..end],
                    with_bits.then(|| &mut bits[words]),
                )?;
                trace.lap("framed find");
                continue;
            }
            let mut on_part = |batch: &RoutedBatch| -> Result<()> {
                let wanted =
                    (0..children).filter(|&c| batch.counts[c] > 0 && !self.children[c].is_empty());
                let order = self.visit_order(wanted);
                self.visit_paging(&order, |t, c| t.children[c].find_routed(batch, c))
            };
            router.find(
                &keys[start..end],
                route,
                &mut on_part,
                &mut out[start..end],
                with_bits.then(|| &mut bits[words]),
            )?;
            trace.lap("routed, looked up, answers back");
        }
        if self.stash_len() > 0 {
            for (i, k) in keys.iter().enumerate() {
                if !crate::results::present(bits, i)
                    && let Some(c) = self.child_of(*k)
                    && let Some(v) = self.meta[c].stash.get(k)
                {
                    out[i] = *v;
                    bits[i / 32] |= 1 << (i % 32);
                }
            }
        }
        trace.report("find (device routing)", keys.len());
        Ok(())
    }
}
