//! [`GpuChild`]: a paged table's child on a GPU, a static [`GpuTable`] and its residency. The child owns what
//! paging needs beside the table: the slots' host copy ([`HostImage`], pinned where the runtime has it), a
//! page-in's copy still in flight (waited for before any kernel or copy touches the slots), the slot frame
//! it is in ([`SlotFrames`], `super::frames`), and its share of a routed upsert batch (`super::routing`). Its
//! [`Engine`] calls check residency, then run the table's own.

use crate::device::layout::KeyLayout;
use crate::paged::gpu::frames::{frame_of, stride_of};
use crate::paged::gpu::routing::DeviceRouter;
use crate::paged::protocol::{
    FRAME_DESC_WORDS, PagedChild, Rebuilt, RoutedBatch, Router, SlotFrames, SplitSpec, paged_out,
};
use crate::runtime::host_io::check_device_memory;
use crate::runtime::launch::copy;
use crate::runtime::transfer::{self, HostTransfer, PinnedAlloc};
use crate::runtime::words::{bytes_of, bytes_of_mut};
use crate::table::engine::{Engine, Inserted};
use crate::table::gpu::GpuTable;
use crate::table::gpu::build::WrapTable;
use crate::table::gpu::kernels::{INSERT_COUNTERS, found_mode};
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::{Error, HashFamily, Key, ProbeStats, Result, Value};
use std::marker::PhantomData;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The host copy of a paged-out table's slots: its key words, and its value words where the layout keeps
/// them apart (pinned memory where the runtime has it, so that swaps run at the full bus rate).
pub(crate) struct HostImage {
    keys: transfer::PinnedBuffer<u64>,
    values: Option<transfer::PinnedBuffer<u64>>,
}

/// A paged table's child on runtime `R`: a [`GpuTable`] of scheme `S` and layout `L`, and its residency.
pub(crate) struct GpuChild<R: HostTransfer, S: ProbingScheme, L: KeyLayout> {
    /// A page-in's copy still in flight (`upload_image`): waited for before any kernel or copy touches the
    /// slots (`check_resident`, `frame_desc`, `page_out`). Declared first so that a dropped child waits for
    /// it before its image and its slots are freed.
    swap_in: Mutex<Option<R::Fence>>,
    /// The slots' host copy (made by the first page-out, kept for the next).
    image: Option<HostImage>,
    table: GpuTable<R, S, L>,
    /// The slots are in device memory.
    resident: bool,
    /// The host copy matches the slots: paging out copies nothing.
    image_current: bool,
    /// The slot frame holding the slots (`(SlotFrames::id, index)`), while resident there.
    frame: Option<(u64, usize)>,
    /// Keys queued by a routed upsert (`PagedChild::upsert_routed`, counted in the batch's counters) since the
    /// last `PagedChild::settle_routed`.
    routed_ops: u64,
}

/// Wraps the tables [`crate::table::gpu::build::build`] makes as boxed children of `K -> V`.
pub(crate) struct AsChild<K, V>(PhantomData<fn() -> (K, V)>);

impl<K, V> Default for AsChild<K, V> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<S: ProbingScheme, K: Key, V: Value> WrapTable<S> for AsChild<K, V> {
    type Out = Box<dyn PagedChild<K, V>>;
    fn wrap<R: HostTransfer, L: KeyLayout>(self, table: GpuTable<R, S, L>) -> Self::Out {
        Box::new(GpuChild::new(table))
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuChild<R, S, L> {
    /// A resident child over `table`.
    pub(crate) fn new(table: GpuTable<R, S, L>) -> Self {
        Self {
            swap_in: Default::default(),
            image: None,
            table,
            resident: true,
            image_current: false,
            frame: None,
            routed_ops: 0,
        }
    }

    /// `Ok` when the slots are in device memory and any page-in's copy into them has landed.
    fn check_resident(&self) -> Result<()> {
        if self.resident {
            self.swap_landed()
        } else {
            Err(paged_out())
        }
    }

    /// Checks residency and marks the host copy stale, before a call that changes the slots.
    fn changing(&mut self) -> Result<&mut GpuTable<R, S, L>> {
        self.check_resident()?;
        self.image_current = false;
        Ok(&mut self.table)
    }

    /// Waits for a page-in's copy still in flight, if any. A failed copy keeps its fence, so that every later
    /// use of the slots fails too instead of reading half-copied words.
    fn swap_landed(&self) -> Result<()> {
        let mut fence = self.swap_in.lock().expect("swap fence poisoned");
        if let Some(f) = fence.as_mut() {
            R::wait(f)?;
            *fence = None;
        }
        Ok(())
    }

    /// See [`PagedChild::page_out`]: the slot words go to the host image (unless it is current) and the slot,
    /// stash and host-path buffers are freed (one-word stand-ins keep the handles valid).
    fn page_out_slots(&mut self) -> Result<u64> {
        if !self.resident {
            return Ok(0);
        }
        // A page-in still copying into the slots finishes before they are read or handed on.
        self.swap_landed()?;
        let mut copied = 0;
        if !self.image_current {
            let t = &self.table;
            let slots = t.capacity();
            let pinned = |n: usize| {
                transfer::PinnedBuffer::<u64>::from_alloc(R::alloc_pinned(&t.stager, n * 8), n)
            };
            let mut image = self.image.take().unwrap_or_else(|| HostImage {
                keys: pinned(slots),
                values: (!L::MOVES_PAIRS).then(|| pinned(t.values_len)),
            });
            R::download(&t.client, &t.stager, &t.keys, bytes_of_mut(&mut image.keys))?;
            if let Some(v) = image.values.as_mut() {
                R::download(&t.client, &t.stager, &t.values, bytes_of_mut(v))?;
            }
            copied = t.slot_bytes();
            self.image = Some(image);
            self.image_current = true;
        }
        self.table.stand_in_slots();
        self.resident = false;
        self.frame = None;
        Ok(copied)
    }

    /// See [`PagedChild::page_in`].
    fn page_in_slots(&mut self) -> Result<u64> {
        if self.resident {
            return Ok(0);
        }
        let t = &self.table;
        check_device_memory::<R>(&t.stager, "a paged-in table", t.slot_bytes())?;
        let keys = t.client.empty(t.capacity() * 8);
        let values = (!L::MOVES_PAIRS).then(|| t.client.empty(t.values_len * 8));
        let mut up = self.upload_image(keys, values)?;
        let values = (!L::MOVES_PAIRS).then(|| up.remove(1));
        self.table.install_slots(up.remove(0), values);
        self.resident = true;
        Ok(self.table.slot_bytes())
    }

    /// Copies the host image up into `keys` (and `values` for layouts that keep them apart); returns the
    /// buffers that hold it: the given ones where the runtime copies into them
    /// ([`HostTransfer::UPLOADS_INTO_DSTS`]), else buffers of the runtime's own. Where the runtime can, the
    /// copy is only queued (`swap_in`): the caller goes on (a paged table pages the next child in while this
    /// one works), and the child's first use waits for it.
    fn upload_image(&self, keys: Handle, values: Option<Handle>) -> Result<Vec<Handle>> {
        let image = self
            .image
            .as_ref()
            .expect("a paged-out table has a host image");
        let mut srcs: Vec<&[u8]> = vec![bytes_of(&image.keys[..])];
        let mut dsts = vec![keys];
        if let (Some(v), Some(vh)) = (image.values.as_ref(), values) {
            srcs.push(bytes_of(&v[..]));
            dsts.push(vh);
        }
        let t = &self.table;
        let (handles, fence) = R::upload_queued(&t.client, &t.stager, &srcs, &dsts)?;
        let old = std::mem::replace(
            &mut *self.swap_in.lock().expect("swap fence poisoned"),
            fence,
        );
        debug_assert!(old.is_none(), "a page-in over one in flight");
        Ok(handles)
    }

    /// See [`PagedChild::rebuild_split`]: unpacks the slots on the device, empties the table under `family`,
    /// and re-inserts the pairs (mask 1) into it and, with a split, the moving ones (mask 2) into a new table.
    #[allow(clippy::type_complexity)]
    fn rebuild_split_device(
        &mut self,
        family: HashFamily,
        split: Option<SplitSpec>,
    ) -> Result<(Vec<(u64, u64)>, Option<(Self, Vec<(u64, u64)>)>)> {
        let t = self.changing()?;
        let unpacked = t.unpack(split.map(|s| (s.seed, s.depth)));
        let lost = t.insert_unpacked(&unpacked, 1, Some(family))?;
        let other = match split {
            Some(sp) => {
                let mut o = t.empty_like(sp.family)?;
                let lost = o.insert_unpacked(&unpacked, 2, None)?;
                Some((Self::new(o), lost))
            }
            None => None,
        };
        Ok((lost, other))
    }
}

/// Slot frames: the child's place in them.
impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuChild<R, S, L> {
    /// See [`PagedChild::new_frames`].
    fn new_frames_of(&self, count: usize) -> Option<SlotFrames> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let t = &self.table;
        let stride = stride_of(t.capacity(), t.bucket_size);
        // One buffer holds at most the runtime's largest allocation (CUDA: a quarter of the device's memory;
        // a larger request panics inside CubeCL): fewer frames then, which the caller checks.
        let largest = t.client.properties().memory.max_page_size as usize;
        let count = count.max(1).min(largest / (stride * 8));
        if count == 0 {
            return None;
        }
        let words = stride * count;
        let values_len = if L::MOVES_PAIRS { 1 } else { words };
        let bytes = (words + if L::MOVES_PAIRS { 0 } else { words }) as u64 * 8;
        if check_device_memory::<R>(&t.stager, "slot frames", bytes).is_err() {
            return None;
        }
        Some(SlotFrames {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            keys: t.client.empty(words * 8),
            values: t.client.empty(values_len * 8),
            values_len,
            count,
            stride,
            shape: t.shape_words(),
            bucket_size: t.bucket_size,
            tile_width: t.tile_width,
        })
    }

    /// See [`PagedChild::move_to_frame`].
    fn move_into_frame(&mut self, frames: &SlotFrames, index: usize) -> Result<()> {
        self.check_resident()?;
        self.check_frame(frames, index);
        let (keys, values) = Self::frame_handles(frames, index);
        let t = &mut self.table;
        copy::<R, u64>(&t.client, &t.keys, &keys, t.capacity());
        if let Some(values) = &values {
            copy::<R, u64>(&t.client, &t.values, values, t.values_len);
        }
        t.set_slots(keys, values);
        self.frame = Some((frames.id, index));
        Ok(())
    }

    /// See [`PagedChild::page_in_frame`].
    fn page_into_frame(&mut self, frames: &SlotFrames, index: usize) -> Result<u64> {
        if self.resident {
            return Ok(0);
        }
        self.check_frame(frames, index);
        let (keys, values) = Self::frame_handles(frames, index);
        let up = self.upload_image(keys.clone(), values.clone())?;
        let t = &self.table;
        if !R::UPLOADS_INTO_DSTS {
            // The runtime uploaded into buffers of its own: move them into the frame.
            copy::<R, u64>(&t.client, &up[0], &keys, t.capacity());
            if let Some(vh) = &values {
                copy::<R, u64>(&t.client, &up[1], vh, t.values_len);
            }
        }
        self.table.install_slots(keys, values);
        self.resident = true;
        self.frame = Some((frames.id, index));
        Ok(self.table.slot_bytes())
    }

    /// See [`PagedChild::frame_desc`].
    fn desc_in(&self, frames: &SlotFrames) -> Option<[u32; FRAME_DESC_WORDS]> {
        let (id, index) = self.frame?;
        // A framed launch reads the slots: a page-in's copy lands first (a failed one leaves the child out of
        // the frames, and its own find reports the error).
        if id != frames.id || !self.resident || self.swap_landed().is_err() {
            return None;
        }
        let w = self.table.shape_words();
        let base = (index * frames.stride / self.table.bucket_size as usize) as u32;
        Some([base, w[1], w[9], w[2], w[10], w[3], w[11], w[4], w[12]])
    }

    /// Frame `index`'s key words and, where the layout keeps values apart, its value words.
    fn frame_handles(frames: &SlotFrames, index: usize) -> (Handle, Option<Handle>) {
        let of = |all| frame_of(all, frames.stride, frames.count, index);
        (
            of(&frames.keys),
            (!L::MOVES_PAIRS).then(|| of(&frames.values)),
        )
    }

    /// A frame of `frames` fits this table (same shape; the paged table's invariant).
    fn check_frame(&self, frames: &SlotFrames, index: usize) {
        let t = &self.table;
        assert!(
            index < frames.count
                && frames.stride == stride_of(t.capacity(), t.bucket_size)
                && frames.bucket_size == t.bucket_size
                && frames.shape[0] == t.num_buckets,
            "a frame of another shape"
        );
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout, K: Key, V: Value> Engine<K, V>
    for GpuChild<R, S, L>
{
    fn upsert(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        self.changing()?.upsert(keys, values)
    }

    fn checks_in_pipeline(&self, n: usize) -> bool {
        Engine::<K, V>::checks_in_pipeline(&self.table, n)
    }

    fn count_new(&self, keys: &[K]) -> Result<usize> {
        self.check_resident()?;
        Engine::<K, V>::count_new(&self.table, keys)
    }

    fn insert_distinct(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        self.changing()?.insert_distinct(keys, values)
    }

    fn find_into(
        &self,
        keys: &[K],
        out: &mut [V],
        found: Option<&mut [u32]>,
    ) -> Result<ProbeStats> {
        self.check_resident()?;
        self.table.find_into(keys, out, found)
    }

    fn pairs(&self) -> Result<Vec<(K, V)>> {
        self.check_resident()?;
        Engine::<K, V>::pairs(&self.table)
    }

    fn reset(&mut self, family: HashFamily) -> Result<()> {
        Engine::<K, V>::reset(self.changing()?, family)
    }

    fn len(&self) -> usize {
        self.table.len()
    }

    fn capacity(&self) -> usize {
        self.table.capacity()
    }

    fn family(&self) -> HashFamily {
        Engine::<K, V>::family(&self.table)
    }

    fn placement(&self) -> Result<Vec<(K, u32)>> {
        self.check_resident()?;
        Engine::<K, V>::placement(&self.table)
    }

    fn alloc_pinned(&self, bytes: usize) -> Option<PinnedAlloc> {
        Engine::<K, V>::alloc_pinned(&self.table, bytes)
    }

    fn erase_stored(&mut self, keys: &[K]) -> Result<Option<usize>> {
        // Packed pairs, and wide slots of 32-bit keys, have a key word to spare for the mark.
        if size_of::<K>() > 4 {
            return Ok(None);
        }
        self.check_resident()?;
        if keys.is_empty() {
            return Ok(Some(0));
        }
        Engine::<K, V>::erase_stored(self.changing()?, keys)
    }
    fn marks(&self) -> usize {
        Engine::<K, V>::marks(&self.table)
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout, K: Key, V: Value> PagedChild<K, V>
    for GpuChild<R, S, L>
{
    fn rebuild_split(
        &mut self,
        family: HashFamily,
        split: Option<SplitSpec>,
    ) -> Result<Rebuilt<K, V>> {
        let narrow = |v: Vec<(u64, u64)>| -> Vec<(K, V)> {
            v.into_iter()
                .map(|(k, v)| (K::narrow(k), V::narrow(v)))
                .collect()
        };
        let (lost, other) = self.rebuild_split_device(family, split)?;
        Ok(Rebuilt {
            lost: narrow(lost),
            split: other.map(|(t, l)| (Box::new(t) as Box<dyn PagedChild<K, V>>, narrow(l))),
        })
    }

    fn page_out(&mut self) -> Result<u64> {
        self.page_out_slots()
    }

    fn page_in(&mut self) -> Result<u64> {
        self.page_in_slots()
    }

    fn is_resident(&self) -> bool {
        self.resident
    }

    fn device_bytes(&self) -> u64 {
        self.table.slot_bytes()
    }

    fn new_frames(&self, count: usize) -> Result<Option<SlotFrames>> {
        Ok(self.new_frames_of(count))
    }

    fn move_to_frame(&mut self, frames: &SlotFrames, index: usize) -> Result<()> {
        self.move_into_frame(frames, index)
    }

    fn page_in_frame(&mut self, frames: &SlotFrames, index: usize) -> Result<u64> {
        self.page_into_frame(frames, index)
    }

    fn frame(&self) -> Option<(u64, usize)> {
        self.frame.filter(|_| self.resident)
    }

    fn frame_desc(&self, frames: &SlotFrames) -> Option<[u32; FRAME_DESC_WORDS]> {
        self.desc_in(frames)
    }

    fn router(&self) -> Option<Box<dyn Router<K, V>>> {
        let t = &self.table;
        Some(Box::new(DeviceRouter::<R, S, L>::new(
            t.client.clone(),
            t.stager.clone(),
            t.batch,
            t.options,
        )))
    }

    fn upsert_routed(&mut self, batch: &RoutedBatch, c: usize) -> Result<()> {
        self.check_resident()?;
        let n = batch.counts[c];
        if n == 0 {
            return Ok(());
        }
        let t = &self.table;
        // The keys are distinct: at most `n` of them are new.
        if t.len() + n > t.capacity() {
            return Err(Error::CapacityExceeded {
                len: t.len(),
                incoming: n,
                capacity: t.capacity(),
            });
        }
        if t.unsettled || self.routed_ops > 0 {
            return Err(Error::InvalidConfig(
                "a routed upsert needs its table settled".into(),
            ));
        }
        self.image_current = false;
        let (kh, vh, mask) = (batch.keys_of(c), batch.values_of(c), batch.aux_of(c, false));
        self.table
            .queue_upsert_distinct(&kh, &vh, &mask, n, &batch.counters_of(c));
        self.routed_ops = n as u64;
        Ok(())
    }

    fn settle_routed(&mut self, counters: &[u32]) -> Result<Inserted<K, V>> {
        if self.routed_ops == 0 {
            return Ok(Inserted::default());
        }
        let ops = std::mem::take(&mut self.routed_ops);
        let lost = self
            .table
            .settle_counters(&counters[..INSERT_COUNTERS], ops);
        if lost.untracked > 0 {
            return Err(Error::StashOverflow {
                untracked: lost.untracked,
                unplaced: lost.pairs,
            });
        }
        let (stats, lost) = (self.table.last_insert_probes(), lost.pairs);
        Ok(Inserted::from_words(stats, lost))
    }

    fn note_framed(&mut self, stored: usize) -> Result<()> {
        self.check_resident()?;
        if self.table.unsettled || self.routed_ops > 0 || self.frame.is_none() {
            return Err(Error::InvalidConfig(
                "a framed upsert needs its table settled and in frames".into(),
            ));
        }
        self.image_current = false;
        self.table.len += stored;
        Ok(())
    }

    fn find_routed(&self, batch: &RoutedBatch, c: usize) -> Result<()> {
        self.check_resident()?;
        let n = batch.counts[c];
        let (kh, out) = (batch.keys_of(c), batch.values_of(c));
        if batch.with_bits {
            let bits = batch.aux_of(c, true);
            self.table
                .launch_find(&kh, &out, Some(&bits), found_mode::BITS, n);
        } else {
            self.table.launch_find(&kh, &out, None, found_mode::NONE, n);
        }
        Ok(())
    }
}
