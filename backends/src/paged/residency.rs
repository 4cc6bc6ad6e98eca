//! The residency manager of a paged table: which children hold device memory, within a budget, and which
//! one to page out when another must come in.

use super::config::{DeviceBudget, Replacement};
use crate::paged::protocol::{PagedChild, SlotFrames};
use hashtile_core::{Error, Key, Result, Value};
use std::collections::VecDeque;

/// What the manager has done so far (cumulative over the table's life).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PagingStats {
    /// Children paged in (swapped from host memory to the device).
    pub swaps_in: u64,
    /// Of the page-ins, those issued while another child worked ([`super::PagedConfig::prefetch`]).
    pub prefetched: u64,
    /// Children paged out (their device memory freed).
    pub swaps_out: u64,
    /// Bytes copied by swaps, both directions (a clean child pages out without a copy).
    pub bytes_moved: u64,
    /// Confined rebuilds: one child re-seeded and rebuilt.
    pub rebuilds: u64,
    /// Children split in two (hash-routed growth) or appended (arrival-order growth).
    pub grown: u64,
    /// Upsert device batches that went in over the slot frames, every child resident (one classify and one
    /// insert launch per copy chunk, no partition: `gpu::frames`).
    pub framed_upserts: u64,
}

/// Resident children, in the order the policy evicts them (front first).
pub(crate) struct Residency {
    budget: DeviceBudget,
    policy: Replacement,
    order: VecDeque<usize>,
    bytes: u64,
    pub stats: PagingStats,
}

impl Residency {
    pub fn new(budget: DeviceBudget, policy: Replacement) -> Self {
        Self {
            budget,
            policy,
            order: VecDeque::new(),
            bytes: 0,
            stats: PagingStats::default(),
        }
    }

    /// Resident children, in eviction order.
    pub fn resident(&self) -> Vec<usize> {
        self.order.iter().copied().collect()
    }

    /// Device bytes of the resident children.
    pub fn resident_bytes(&self) -> u64 {
        self.bytes
    }

    /// `true` when the budget can hold `children` children of `bytes` bytes in all at once.
    pub fn holds(&self, children: usize, bytes: u64) -> bool {
        match self.budget {
            DeviceBudget::Unlimited => true,
            DeviceBudget::Children(n) => children <= n,
            DeviceBudget::Bytes(b) => bytes <= b,
        }
    }

    /// Children of `bytes` bytes the budget holds at once (`None`: no limit).
    pub fn frames_for(&self, bytes: u64) -> Option<usize> {
        match self.budget {
            DeviceBudget::Unlimited => None,
            DeviceBudget::Children(n) => Some(n),
            DeviceBudget::Bytes(b) => Some((b / bytes.max(1)) as usize),
        }
    }

    /// Pages children out (in policy order, never one in `keep`) until one more child of `need` bytes fits.
    pub fn make_room<K: Key, V: Value>(
        &mut self,
        children: &mut [Box<dyn PagedChild<K, V>>],
        need: u64,
        keep: &[usize],
    ) -> Result<()> {
        while !self.holds(self.order.len() + 1, self.bytes + need) {
            let Some(at) = self.order.iter().position(|c| !keep.contains(c)) else {
                return Err(Error::InvalidConfig(format!(
                    "the device budget ({:?}) cannot hold {} children of {need} bytes at once",
                    self.budget,
                    keep.len() + 1
                )));
            };
            let victim = self.order[at];
            // Only a child that did page out leaves the resident list (a failed copy leaves it tracked).
            let copied = children[victim].page_out()?;
            self.order.remove(at);
            self.bytes -= children[victim].device_bytes();
            self.stats.swaps_out += 1;
            self.stats.bytes_moved += copied;
        }
        Ok(())
    }

    /// Records a child that became resident without a swap (a new child).
    pub fn admitted_new(&mut self, c: usize, bytes: u64) {
        self.order.push_back(c);
        self.bytes += bytes;
    }

    /// Makes child `c` resident (paging others out first as the budget needs), keeping `keep` resident too,
    /// and marks it used (LRU).
    /// `frame` names the slot frame to page it into (the caller makes room first, so that it is free).
    pub fn admit<K: Key, V: Value>(
        &mut self,
        children: &mut [Box<dyn PagedChild<K, V>>],
        c: usize,
        keep: &[usize],
        frame: Option<(&SlotFrames, usize)>,
    ) -> Result<()> {
        if children[c].is_resident() {
            self.touch(|x| x == c);
            return Ok(());
        }
        let need = children[c].device_bytes();
        self.make_room(children, need, keep)?;
        let copied = match frame {
            Some((frames, at)) => children[c].page_in_frame(frames, at)?,
            None => children[c].page_in()?,
        };
        self.order.push_back(c);
        self.bytes += need;
        self.stats.swaps_in += 1;
        self.stats.bytes_moved += copied;
        Ok(())
    }

    /// Marks the resident children that `used` names as used (LRU: they move to the back, in their order), in
    /// one pass over the resident list (a framed upsert uses many children at once).
    pub fn touch(&mut self, used: impl Fn(usize) -> bool) {
        if self.policy != Replacement::Lru {
            return;
        }
        let (back, front): (Vec<usize>, Vec<usize>) = self.order.iter().partition(|&&c| used(c));
        self.order = front.into_iter().chain(back).collect();
    }

    /// Forgets every child (the table was cleared; their memory is gone with them).
    pub fn forget_all(&mut self) {
        self.order.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_moves_the_used_children_to_the_back_in_their_order() {
        let mut lru = Residency::new(DeviceBudget::Unlimited, Replacement::Lru);
        for c in 0..6 {
            lru.admitted_new(c, 1);
        }
        lru.touch(|c| c % 2 == 0);
        assert_eq!(lru.resident(), vec![1, 3, 5, 0, 2, 4]);
        assert_eq!(lru.resident_bytes(), 6);
        // FIFO keeps the order children came in.
        let mut fifo = Residency::new(DeviceBudget::Unlimited, Replacement::Fifo);
        for c in 0..4 {
            fifo.admitted_new(c, 1);
        }
        fifo.touch(|c| c == 0);
        assert_eq!(fifo.resident(), vec![0, 1, 2, 3]);
    }
}
