//! The host-slice API of [`GpuTable`]: [`Engine`] over host keys and values of any width the layout holds
//! (upserts, finds, erasures, reads of the stored pairs), and the hooks ([`BatchTable`]) through which the host
//! path ([`super::host_path`]) copies batches in and queues the table's kernels.

use super::device::Selection;
use super::host_path::{self, BatchTable};
use super::kernels::found_mode;
use super::{GpuTable, upsert};
use crate::device::layout::KeyLayout;
use crate::runtime::host_io::{BatchSizes, DeviceCache};
use crate::runtime::launch::{CUBE_SIZE, cube_count};
use crate::runtime::transfer::{HostTransfer, PinnedAlloc};
use crate::runtime::words::{bytes_of, bytes_of_mut, with_words_mut, words_of};
use crate::table::engine::{Engine, Inserted};
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::reduce::{Assign, Reduce};
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::{HashFamily, Key, ProbeStats, Result, Value};

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    fn upsert_typed<K: Key, V: Value>(
        &mut self,
        keys: &[K],
        values: &[V],
        distinct: bool,
    ) -> Result<Inserted<K, V>> {
        let k = words_of::<K, L::Key>(keys);
        let v = words_of::<V, L::Value>(values);
        let (stats, lost) = host_path::upsert(self, bytes_of(&k), bytes_of(&v), distinct)?;
        Ok(Inserted::from_words(stats, lost))
    }

    /// Finds host keys of the layout's type into `out` (all ones where absent) and, if given, presence bits.
    pub(super) fn find_words(
        &self,
        keys: &[L::Key],
        out: &mut [L::Value],
        found: Option<&mut [u32]>,
    ) -> Result<ProbeStats> {
        let mode = if found.is_some() {
            found_mode::BITS
        } else {
            found_mode::NONE
        };
        self.link().map_keys(
            bytes_of(keys),
            size_of::<L::Key>(),
            bytes_of_mut(out),
            found,
            |c| self.launch_find(c.keys, c.out, c.bits, mode, c.n),
        )?;
        Ok(self.last_find_probes(keys.len()))
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Finds host keys of the layout's type as `Some(value)` / `None`: the layer's keyed pass with presence
    /// bits, the answers made as the values leave the staging buffers.
    pub(super) fn find_options_words(&self, keys: &[L::Key]) -> Result<Vec<Option<L::Value>>> {
        self.link()
            .find_options(bytes_of(keys), size_of::<L::Key>(), |c| {
                self.launch_find(c.keys, c.out, c.bits, found_mode::BITS, c.n)
            })
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// [`BatchTable::classify`] with stored values combined by `F` (`Assign`: replaced) instead of replaced.
    pub(super) fn launch_classify<F: Reduce>(
        &self,
        keys: &Handle,
        values: Option<&Handle>,
        mask: &Handle,
        n: usize,
    ) {
        // Without values the kernel never reads them: any one-element buffer stands in (not the table's own
        // buffers, which are bound already: wgpu mis-binds a buffer bound twice in one launch).
        // A set has no values to update.
        let values = values.filter(|_| L::HAS_VALUES);
        let (vh, vlen) = values.map_or((self.dummy.clone(), 1), |v| (v.clone(), n));
        // SAFETY: indices are bounded by `n` and by the table's shape.
        unsafe {
            upsert::classify_kernel::launch_unchecked::<S, L, F, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(vh, vlen),
                ArrayArg::from_raw_parts(self.keys.clone(), self.capacity()),
                ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                ArrayArg::from_raw_parts(mask.clone(), n),
                self.shape_arg(),
                self.bucket_size,
                self.tile_width,
                values.is_some(),
            )
        }
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> BatchTable<R> for GpuTable<R, S, L> {
    const KEY_BYTES: usize = size_of::<L::Key>();
    const VALUE_BYTES: usize = size_of::<L::Value>();
    const HAS_VALUES: bool = L::HAS_VALUES;
    fn client(&self) -> &ComputeClient<R> {
        &self.client
    }
    fn stager(&self) -> &R::Stager {
        &self.stager
    }
    fn stored(&self) -> usize {
        self.len
    }
    fn slots(&self) -> usize {
        self.capacity()
    }
    fn batch_sizes(&self) -> BatchSizes {
        self.batch
    }
    fn cache(&self) -> &DeviceCache {
        &self.cache
    }
    fn classify(&self, keys: &Handle, values: Option<&Handle>, mask: &Handle, n: usize) {
        self.launch_classify::<Assign>(keys, values, mask, n);
    }
    fn queue_insert(
        &self,
        keys: &Handle,
        values: &Handle,
        mask: Option<(&Handle, u32)>,
        n: usize,
        upsert: bool,
    ) {
        let which = match mask {
            Some((m, mode)) => Selection::Mask(m, mode),
            None => Selection::All,
        };
        self.queue_insert_kernel(keys, values, which, n, Some(upsert), &self.counters);
    }
    fn note_queued(&mut self, ops: usize) {
        GpuTable::note_queued(self, ops);
    }
    fn settle_batch(&mut self) -> Result<(ProbeStats, Vec<(u64, u64)>)> {
        let lost = self.settle_all()?;
        Ok((self.last_insert_probes, lost))
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout, K: Key, V: Value> Engine<K, V>
    for GpuTable<R, S, L>
{
    fn upsert(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        self.upsert_typed(keys, values, false)
    }

    fn checks_in_pipeline(&self, n: usize) -> bool {
        // The device checks the layout's key words, so keys the layout widens (u32 keys of a wide table) are
        // checked by the table on the host: their sentinel is u32::MAX, which widens to a storable word.
        n <= self.batch.insert && size_of::<K>() == size_of::<L::Key>()
    }

    fn count_new(&self, keys: &[K]) -> Result<usize> {
        host_path::count_new(self, bytes_of(&words_of::<K, L::Key>(keys)))
    }

    fn insert_distinct(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        self.upsert_typed(keys, values, true)
    }

    fn find_into(
        &self,
        keys: &[K],
        out: &mut [V],
        found: Option<&mut [u32]>,
    ) -> Result<ProbeStats> {
        let k = words_of::<K, L::Key>(keys);
        // Where the caller's slice is the layout's own type, the values land in it directly.
        with_words_mut::<V, L::Value, _>(out, |o| self.find_words(&k, o, found))
    }

    fn contains_into(&self, keys: &[K], found: &mut [u32]) -> Result<ProbeStats> {
        let k = words_of::<K, L::Key>(keys);
        self.link()
            .map_bits(bytes_of(&k), size_of::<L::Key>(), found, |c| {
                self.launch_find(c.keys, c.out, c.bits, found_mode::BITS_ONLY, c.n)
            })?;
        Ok(self.last_find_probes(keys.len()))
    }

    fn find_options(&self, keys: &[K]) -> Result<(Vec<Option<V>>, ProbeStats)> {
        // The values come back as the layout's words: where those are the caller's type, the answers are built
        // as they leave the staging buffers; another value type (narrower, signed, a newtype) goes through the
        // presence bits and the caller's type.
        if std::any::TypeId::of::<V>() != std::any::TypeId::of::<L::Value>() {
            return crate::table::engine::options_by_bits(self, keys);
        }
        let k = words_of::<K, L::Key>(keys);
        let answers = self.find_options_words(&k)?;
        let answers = crate::runtime::words::same_options_vec::<L::Value, V>(answers)
            .unwrap_or_else(|_| unreachable!("one type"));
        Ok((answers, self.last_find_probes(keys.len())))
    }

    fn pairs(&self) -> Result<Vec<(K, V)>> {
        Ok(self
            .stored_slots()
            .into_iter()
            .map(|(_, k, v)| (K::narrow(k), V::narrow(v)))
            .collect())
    }

    fn reset(&mut self, family: HashFamily) -> Result<()> {
        self.family = family;
        self.upload_shape();
        self.fill_empty();
        Ok(())
    }

    fn rebuild_in_place(&mut self, family: HashFamily) -> Result<Vec<(K, V)>> {
        Ok(self
            .rebuild_on_device(family)?
            .into_iter()
            .map(|(k, v)| (K::narrow(k), V::narrow(v)))
            .collect())
    }

    fn regrow(
        &mut self,
        num_buckets: u32,
        params: hashtile_core::scheme::SchemeParams,
        family: HashFamily,
    ) -> Result<Vec<(K, V)>> {
        Ok(self
            .regrow_on_device(num_buckets, params, family)?
            .into_iter()
            .map(|(k, v)| (K::narrow(k), V::narrow(v)))
            .collect())
    }

    fn len(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.num_buckets as usize * self.bucket_size as usize
    }

    fn family(&self) -> HashFamily {
        self.family
    }

    fn placement(&self) -> Result<Vec<(K, u32)>> {
        Ok(self
            .stored_slots()
            .into_iter()
            .map(|(i, k, _)| (K::narrow(k), (i / self.bucket_size as usize) as u32))
            .collect())
    }

    fn alloc_pinned(&self, bytes: usize) -> Option<PinnedAlloc> {
        R::alloc_pinned(&self.stager, bytes)
    }

    fn erase_stored(&mut self, keys: &[K]) -> Result<Option<usize>> {
        // Packed pairs, and wide slots of 32-bit keys, have a key word to spare for the mark.
        if size_of::<K>() > 4 {
            return Ok(None);
        }
        if keys.is_empty() {
            return Ok(Some(0));
        }
        let k = words_of::<K, L::Key>(keys);
        let kh = R::upload(&self.client, &self.stager, bytes_of(&k))?;
        Ok(Some(self.erase_marks(&kh, keys.len())))
    }
    fn marks(&self) -> usize {
        self.marks
    }
    fn takes_marks(&self) -> bool {
        self.takes_marks()
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
