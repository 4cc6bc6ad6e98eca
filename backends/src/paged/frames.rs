//! Slot frames of a paged table (`gpu::frames`): its resident GPU children share one device allocation, so that
//! a hash-routed find over every child is one kernel launch per copy chunk, as a plain table's find is
//! (`Router::find_framed`), instead of a partition, a launch per child after the copy and a gather; and an
//! upsert batch whose keys fit every child's room is one classify and one insert launch per copy chunk
//! (`Router::upsert` with a [`crate::paged::protocol::FramedUpsert`]: `PagedTable::framed_upsert`), instead of a
//! partition and two launches per child.
//!
//! Which child holds which frame is asked of the children ([`Engine::frame`]), never kept here, so no path
//! that pages, splits or rebuilds a child can leave a stale map behind:
//! - a find with every child resident places the children that are not in the frames yet (a new child, a
//!   split's half, one paged in while the frames were full) into free frames, or moves every child into a
//!   larger allocation when there are too few ([`PagedTable::framed`]);
//! - a child paged out frees its frame; a child paged in takes a free frame ([`PagedTable::free_frame`]), and
//!   a new child takes one at once when one is free, so that the frames and the children's own allocations
//!   together stay within the budget's frames plus the children made since the last find.
//!
//! The frames are sized to the children with a quarter to spare (splits add children one at a time), never
//! past the budget's children; a table made larger than its budget gets the budget's frames at once
//! ([`PagedTable::budget_frames`]). Where the device lacks the memory for them, the table goes on without
//! frames.

use super::PagedTable;
use crate::paged::protocol::{FRAME_DESC_WORDS, FramedUpsert, SlotFrames};
use crate::runtime::select::Backend;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Key, Result, Value};

/// A framed upsert's plan for one device batch ([`PagedTable::framed_upsert`]), which the router borrows as a
/// [`FramedUpsert`].
pub(super) struct FramedPlan {
    frames: SlotFrames,
    descs: Vec<u32>,
    room: Vec<usize>,
    stored: bool,
}

impl FramedPlan {
    /// The plan as [`crate::paged::protocol::Router::upsert`] takes it.
    pub(super) fn upsert(&self) -> FramedUpsert<'_> {
        FramedUpsert {
            frames: &self.frames,
            descs: &self.descs,
            room: &self.room,
            stored: self.stored,
        }
    }
}

impl<S: SchemeInfo, K: Key, V: Value> PagedTable<S, K, V> {
    /// Each child's frame descriptor, in child order, with every child placed in the frames first; `None`
    /// when a child is not resident, on the CPU, with [`super::PagedConfig::shared_frames`] off, or when the
    /// device cannot hold the frames.
    pub(super) fn framed(&mut self) -> Result<Option<(SlotFrames, Vec<u32>)>> {
        let n = self.children.len();
        if !self.frames_on() || n == 0 || self.children.iter().any(|c| !c.is_resident()) {
            return Ok(None);
        }
        let mut used = self.frames_used();
        let homeless: Vec<usize> = (0..n).filter(|&c| !self.in_frames(c)).collect();
        let free = used.iter().filter(|u| !**u).count();
        if self.frames.is_none() || homeless.len() > free {
            let bytes = self.children[0].device_bytes();
            let most = self
                .residency
                .frames_for(bytes)
                .unwrap_or(usize::MAX)
                .max(n);
            let count = (n + n / 4).clamp(n, most);
            let Some(frames) = self.children[0].new_frames(count)?.filter(|f| f.count >= n) else {
                return Ok(None);
            };
            // Every child moves (the old frames are freed once the last one has left them).
            for c in 0..n {
                self.children[c].move_to_frame(&frames, c)?;
            }
            self.frames = Some(frames);
        } else {
            let frames = self.frames.clone().expect("checked above");
            for c in homeless {
                let at = used.iter().position(|u| !*u).expect("counted above");
                self.children[c].move_to_frame(&frames, at)?;
                used[at] = true;
            }
        }
        let frames = self.frames.clone().expect("placed above");
        let mut descs = Vec::with_capacity(n * FRAME_DESC_WORDS);
        for c in &self.children {
            // Every child is in the frames; `None` here is a child whose page-in failed: the partitioned find
            // reports the error from that child.
            let Some(d) = c.frame_desc(&frames) else {
                return Ok(None);
            };
            descs.extend(d);
        }
        Ok(Some((frames, descs)))
    }

    /// A framed upsert's plan ([`crate::paged::protocol::FramedUpsert`]: the frames, the descriptors, each child's room
    /// and whether any child holds pairs) when every child is resident in the frames ([`Self::framed`]). A
    /// child's room is what it takes before its load passes the limit, and none while its stash holds pairs
    /// (an update of a stashed key must reach the stash: such a batch is partitioned). With
    /// [`super::PagedConfig::framed_upserts`] off, every batch is partitioned.
    pub(super) fn framed_upsert(&mut self) -> Result<Option<FramedPlan>> {
        if !self.config.framed_upserts {
            return Ok(None);
        }
        let Some((frames, descs)) = self.framed()? else {
            return Ok(None);
        };
        let limit = self.limit();
        let room = (0..self.children.len())
            .map(|c| {
                if self.meta[c].stash.is_empty() {
                    limit.saturating_sub(self.load(c))
                } else {
                    0
                }
            })
            .collect();
        let stored = self.children.iter().any(|c| !c.is_empty());
        Ok(Some(FramedPlan {
            frames,
            descs,
            room,
            stored,
        }))
    }

    /// Frames are wanted: a GPU table with [`super::PagedConfig::shared_frames`] on.
    fn frames_on(&self) -> bool {
        self.config.shared_frames && self.backend != Backend::Cpu
    }

    /// A table made with more children than its budget holds (`initial`) gets the budget's frames at once,
    /// after its first child: every child is made into a frame and swaps page into frames, so that no swap
    /// allocates or frees device memory. (A table that outgrows its budget later keeps the frames its last
    /// find with every child resident made.)
    pub(super) fn budget_frames(&mut self, initial: usize) -> Result<()> {
        if !self.frames_on() || self.frames.is_some() || self.children.is_empty() {
            return Ok(());
        }
        let bytes = self.children[0].device_bytes();
        let Some(count) = self.residency.frames_for(bytes) else {
            return Ok(());
        };
        if initial <= count {
            return Ok(());
        }
        if let Some(frames) = self.children[0].new_frames(count.max(1))? {
            self.frames = Some(frames);
            for c in 0..self.children.len() {
                self.house(c)?;
            }
        }
        Ok(())
    }

    /// Children whose slots are in the shared slot frames now (GPU, hash-routed: see the module docs; 0 on
    /// the CPU, with [`super::PagedConfig::shared_frames`] off, or before the first find with every child
    /// resident).
    pub fn framed_children(&self) -> usize {
        (0..self.children.len())
            .filter(|&c| self.in_frames(c))
            .count()
    }

    /// Frames the shared slot allocation holds (0 without one).
    pub fn frame_count(&self) -> usize {
        self.frames.as_ref().map_or(0, |f| f.count)
    }

    /// `true` when child `c` is in the table's current frames.
    fn in_frames(&self, c: usize) -> bool {
        let id = self.frames.as_ref().map(|f| f.id);
        self.children[c].frame().is_some_and(|(f, _)| Some(f) == id)
    }

    /// Which of the current frames a resident child holds (empty without frames).
    fn frames_used(&self) -> Vec<bool> {
        let Some(frames) = &self.frames else {
            return Vec::new();
        };
        let mut used = vec![false; frames.count];
        for c in &self.children {
            if let Some((id, i)) = c.frame()
                && id == frames.id
            {
                used[i] = true;
            }
        }
        used
    }

    /// A frame no resident child holds, for a child paging in or a new one.
    pub(super) fn free_frame(&self) -> Option<(SlotFrames, usize)> {
        let at = self.frames_used().iter().position(|u| !*u)?;
        Some((self.frames.clone()?, at))
    }

    /// Moves resident child `c` (new, or just split) into a free frame when there is one.
    pub(super) fn house(&mut self, c: usize) -> Result<()> {
        if self.children[c].is_resident()
            && !self.in_frames(c)
            && let Some((frames, at)) = self.free_frame()
        {
            self.children[c].move_to_frame(&frames, at)?;
        }
        Ok(())
    }
}
