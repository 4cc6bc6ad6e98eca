//! Paging a paged table's children in for a call's work: admitting a child (into a free slot frame when the
//! table has frames), visiting children in turn with the next one prefetched, and the order of the visit
//! (resident children first).

use super::PagedTable;
use crate::runtime::trace::Trace;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Key, Result, Value};

impl<S: SchemeInfo, K: Key, V: Value> PagedTable<S, K, V> {
    pub(super) fn admit(&mut self, c: usize, keep: &[usize]) -> Result<()> {
        if self.frames.is_some() && !self.children[c].is_resident() {
            // Room first, so that a frame is free for the child.
            let need = self.children[c].device_bytes();
            self.residency.make_room(&mut self.children, need, keep)?;
            if let Some((frames, at)) = self.free_frame() {
                return self
                    .residency
                    .admit(&mut self.children, c, keep, Some((&frames, at)));
            }
        }
        self.residency.admit(&mut self.children, c, keep, None)
    }

    /// Runs `work` on each child of `order` in turn, each made resident first. With prefetching on (and a
    /// budget that holds two children), the next child is paged in before `work` runs on the current one: a
    /// GPU child's page-in only queues its copy, and its first kernel waits for it, so the copy runs while
    /// the current child's kernels do (and beside the page-outs' copies, on a stream of their own).
    pub(super) fn visit_paging(
        &mut self,
        order: &[usize],
        mut work: impl FnMut(&mut Self, usize) -> Result<()>,
    ) -> Result<()> {
        let ahead = self.prefetching();
        // Diagnosis (a TRACE subscriber): where the host's time goes while children swap.
        let mut trace = Trace::new("paged");
        for (j, &c) in order.iter().enumerate() {
            self.admit(c, &[])?;
            trace.lap("paged in at its turn");
            if ahead
                && let Some(&next) = order.get(j + 1)
                && !self.children[next].is_resident()
            {
                let need = self.children[next].device_bytes();
                self.residency.make_room(&mut self.children, need, &[c])?;
                trace.lap("paged out");
                self.prefetch(next, c)?;
                trace.lap("page-in queued");
            }
            work(self, c)?;
            trace.lap("child's work (waits for its page-in)");
        }
        trace.report("visit of children", order.len());
        Ok(())
    }

    /// Pages child `n` in ahead of its turn, keeping the working child `c` resident.
    pub(super) fn prefetch(&mut self, n: usize, c: usize) -> Result<()> {
        self.admit(n, &[c])?;
        self.residency.stats.prefetched += 1;
        Ok(())
    }

    /// Whether a child is paged in while another works ([`PagedConfig::prefetch`], and a budget that holds two
    /// children).
    pub(super) fn prefetching(&self) -> bool {
        self.config.prefetch
            && !self.children.is_empty()
            && self.residency.holds(2, 2 * self.child_bytes())
    }

    /// `wanted` children, the resident ones first (they cost no swap), then the others in index order.
    pub(super) fn visit_order(&self, wanted: impl Iterator<Item = usize>) -> Vec<usize> {
        let (mut now, later): (Vec<usize>, Vec<usize>) =
            wanted.partition(|&c| self.children[c].is_resident());
        now.extend(later);
        now
    }

    /// Children that hold anything.
    pub(super) fn occupied(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.children.len()).filter(|&c| self.children[c].len() + self.meta[c].stash.len() > 0)
    }
}
