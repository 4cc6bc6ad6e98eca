//! The chained store's calls on host data, through the host-I/O layer ([`crate::runtime::host_io`]), as the
//! static tables' calls go: per device batch, the keys (and values) are copied in chunks through the pinned
//! staging ring and each chunk's launch is queued as soon as it lands; answers come back straight into the
//! caller's memory (a find's values become `Option`s as they leave the staging buffers, with one presence bit
//! per key instead of a status word); an erase reads back only its counters.
//!
//! Reserved keys (the front end's empty sentinel and tombstone, [`GpuChained::reserved`]) are checked on the
//! device as the keys land ([`KeyGuard`]), so no host pass reads the keys: a lookup reports them after its
//! launches (it changes nothing), and the launches that change the table are gated on the check, queued only
//! after every key of the batch was checked. An insert's keys all land before its values, so its launches
//! still run chunk by chunk as the values land; an erase runs once all its keys have landed. A call of more
//! than one device batch is checked on the host first (a reserved key in a later device batch must leave the
//! table unchanged).

use super::kernel::*;
use super::store::*;
use crate::device::layout::KeyLayout;
use crate::results::FindAll;
use crate::runtime::host_io::{
    Chunk, HostLink, KeyGuard, check_device_memory, check_out_len, device_batches, first_reserved,
};
use crate::runtime::host_memory::zeroed_answers;
use crate::runtime::transfer::HostTransfer;
use crate::runtime::words::{bytes_of, bytes_of_mut};
use cubecl::server::Handle;
use hashtile_core::{Error, Result};

impl<R: HostTransfer, L: KeyLayout> GpuChained<R, L> {
    /// What the host-I/O layer needs of this table for one call.
    pub(crate) fn link(&self) -> HostLink<'_, R> {
        HostLink {
            client: &self.client,
            stager: &self.stager,
            cache: &self.cache,
            sizes: self.sizes,
        }
    }

    /// A guard for a batch of `n` keys cut into device batches of `per`, where the keys are checked on the
    /// device; `Err` where a batch of several device batches holds a reserved key (checked on the host first).
    fn guard(&self, keys: &[L::Key], per: usize) -> Result<Option<KeyGuard<L::Key>>> {
        let Some(reserved) = self.reserved else {
            return Ok(None);
        };
        if keys.len() > per {
            return match first_reserved(&reserved, keys) {
                Some(e) => Err(e),
                None => Ok(None),
            };
        }
        Ok(Some(KeyGuard::new(&self.client, reserved)))
    }

    /// The error a guard found, if any (waits for the device; `None` without a guard).
    fn guarded(&self, guard: &Option<KeyGuard<L::Key>>, keys: &[L::Key]) -> Result<()> {
        match guard {
            Some(g) => g.read(&self.client, keys)?.map_or(Ok(()), Err),
            None => Ok(()),
        }
    }

    /// Finds each key of a landed chunk (after checking its keys against the reserved ones): the first copy's
    /// value, all ones when absent, and a presence bit where the chunk has bits (`find`'s `Option`s).
    fn find_chunk(&self, guard: &Option<KeyGuard<L::Key>>, c: &Chunk) {
        if let Some(g) = guard {
            g.check(&self.client, c.keys, c.n, c.at);
        }
        self.launch(Launch {
            out: Some((c.out, c.n)),
            compact: true,
            bits: c.bits,
            ..Self::over(op::FIND, c.keys, None, c.n, 0)
        });
    }

    /// Counts the copies of each key of a landed chunk into the chunk's answers (after checking its keys
    /// against the reserved ones): `count`'s launch, and `find_all`'s first pass.
    fn count_chunk(&self, guard: &Option<KeyGuard<L::Key>>, c: &Chunk) {
        if let Some(g) = guard {
            g.check(&self.client, c.keys, c.n, c.at);
        }
        self.launch(Launch {
            aux: Some((c.out, c.n)),
            ..Self::over(op::COUNT, c.keys, None, c.n, 0)
        });
    }

    /// The launch of `mode` over `n` keys of `keys` (and `values`), the first at position `base` of the batch.
    fn over<'a>(
        mode: u32,
        keys: &'a Handle,
        values: Option<&'a Handle>,
        n: usize,
        base: usize,
    ) -> Launch<'a> {
        let arrays = Arrays {
            ops: None,
            keys,
            values,
            n,
        };
        Launch {
            base,
            ..Launch::new::<L>(mode, arrays, n)
        }
    }

    /// Inserts the pairs (a further copy, or with `unique` insert-or-overwrite); returns how many were new.
    pub fn insert(&mut self, keys: &[L::Key], values: &[L::Value], unique: bool) -> Result<usize> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: keys.len(),
            });
        }
        if keys.is_empty() {
            return Ok(0);
        }
        let per = self.sizes.insert;
        let guard = self.guard(keys, per)?;
        let (kb, vb) = (size_of::<L::Key>(), size_of::<L::Value>());
        let mut added = 0;
        for (start, m) in device_batches(keys.len(), per) {
            // The batch's keys, values and retry list.
            let bytes = (m * (kb + vb + 4)) as u64;
            check_device_memory::<R>(&self.stager, "a chained insert batch", bytes)?;
            let range = start..start + m;
            added += self.insert_batch(&keys[range.clone()], &values[range], unique, &guard)?;
        }
        Ok(added)
    }

    /// One device batch of [`GpuChained::insert`]: the keys land first, each chunk checked as it lands, then
    /// each chunk of the values gets its (gated) insert launch as it lands, every launch recording the
    /// inserts that found the pool empty in one retry list over the batch; those run again after the pool has
    /// grown ([`GpuChained::run_placing`]).
    fn insert_batch(
        &mut self,
        keys: &[L::Key],
        values: &[L::Value],
        unique: bool,
        guard: &Option<KeyGuard<L::Key>>,
    ) -> Result<usize> {
        let m = keys.len();
        let (kb, vb) = (size_of::<L::Key>(), size_of::<L::Value>());
        let mode = if unique { op::REPLACE } else { op::INSERT };
        self.free_floor = None;
        let retry = self.cache.take(&self.client, "chained retry", m * 4);
        let counters = self.fresh_counters();
        let srcs = [
            ("chained keys", bytes_of(keys)),
            ("chained values", bytes_of(values)),
        ];
        let link = self.link();
        // The buffer the keys landed in (on Vulkan the upload allocates its own).
        let mut landed_keys: Option<Handle> = None;
        let handles =
            link.upload_chunks(&srcs, self.sizes.chunk * kb, &mut |src, off, len, h| {
                if src == 0 {
                    if off == 0 {
                        landed_keys = Some(h.clone());
                    }
                    if let Some(g) = guard {
                        let kh = h.clone().offset_start(off as u64);
                        g.check(&self.client, &kh, len / kb, off / kb);
                    }
                    return;
                }
                let (first, n) = (off / vb, len / vb);
                let kh = landed_keys.as_ref().expect("the keys land first");
                let kh = kh.clone().offset_start((first * kb) as u64);
                let vh = h.clone().offset_start(off as u64);
                self.launch(Launch {
                    retry: Some((&retry, m)),
                    counters: Some(&counters),
                    gate: guard.as_ref().map(|g| g.word()),
                    ..Self::over(mode, &kh, Some(&vh), n, first)
                });
            })?;
        let (kh, vh) = (handles[0].clone(), handles[1].clone());
        let placed = self.guarded(guard, keys).and_then(|()| {
            let queued = Some((retry.clone(), counters));
            self.run_placing(mode, (None, &kh, Some(&vh)), m, None, queued)
        });
        // Every launch that reads them has finished (the counters were read after them).
        self.link().give_back(&srcs, handles);
        self.cache.give("chained retry", retry, m * 4);
        Ok(placed?.0)
    }

    /// Erases the first copy of each key (`all == false`) or every copy; returns how many. The keys land in
    /// chunks (each checked as it lands, or erased as it lands where nothing is checked); the counts are added
    /// up on the device.
    pub fn erase(&mut self, keys: &[L::Key], all: bool) -> Result<usize> {
        if keys.is_empty() {
            return Ok(0);
        }
        let per = self.sizes.find;
        let guard = self.guard(keys, per)?;
        let kb = size_of::<L::Key>();
        let mode = if all { op::ERASE_ALL } else { op::ERASE };
        let mut erased = 0;
        for (start, m) in device_batches(keys.len(), per) {
            check_device_memory::<R>(&self.stager, "a chained erase batch", (m * kb) as u64)?;
            let part = &keys[start..start + m];
            let counters = self.fresh_counters();
            let erase = |kh: &Handle, n: usize, first: usize| {
                self.launch(Launch {
                    compact: true,
                    counters: Some(&counters),
                    gate: guard.as_ref().map(|g| g.word()),
                    ..Self::over(mode, kh, None, n, first)
                })
            };
            let srcs = [("chained keys", bytes_of(part))];
            let link = self.link();
            let handles =
                link.upload_chunks(&srcs, self.sizes.chunk * kb, &mut |_, off, len, h| {
                    let kh = h.clone().offset_start(off as u64);
                    match &guard {
                        Some(g) => g.check(&self.client, &kh, len / kb, off / kb),
                        None => erase(&kh, len / kb, off / kb),
                    }
                })?;
            if guard.is_some() {
                // Once every key is checked: a reserved key anywhere leaves the table unchanged.
                erase(&handles[0], m, 0);
            }
            let counted = self
                .guarded(&guard, part)
                .and_then(|()| self.read::<u32>(counters.clone(), COUNTER_WORDS));
            self.link().give_back(&srcs, handles);
            let e = counter_lines(&counted?, 1 + NEW_COUNTERS);
            self.len -= e;
            erased += e;
        }
        Ok(erased)
    }

    /// The first copy's value of each key: the values and one presence bit per key come back, the values
    /// becoming `Option`s as they leave the staging buffers.
    pub fn find(&self, keys: &[L::Key]) -> Result<Vec<Option<L::Value>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let guard = self.guard(keys, self.sizes.find)?;
        let found = self
            .link()
            .find_options(bytes_of(keys), size_of::<L::Key>(), |c| {
                self.find_chunk(&guard, &c)
            })?;
        self.guarded(&guard, keys)?;
        Ok(found)
    }

    /// The value of each key's first copy into `out` (as long as `keys`), or the all-ones value for an absent
    /// key: the values are copied straight into `out` (directly when it is pinned memory).
    pub fn find_into(&self, keys: &[L::Key], out: &mut [L::Value]) -> Result<()> {
        check_out_len(keys.len(), out.len())?;
        self.map_guarded(keys, bytes_of_mut(out), None, |g, c| self.find_chunk(g, c))
    }

    /// [`GpuChained::find_into`] with presence bits: bit `i % 32` of `found[i / 32]` set for present keys
    /// (`keys.len().div_ceil(32)` words, cleared first), so that a stored all-ones value reads as present (a
    /// sharded table's `find`, whose `Option`s are made from both).
    pub fn find_bits_into(
        &self,
        keys: &[L::Key],
        out: &mut [L::Value],
        found: &mut [u32],
    ) -> Result<()> {
        check_out_len(keys.len(), out.len())?;
        check_out_len(keys.len().div_ceil(32), found.len())?;
        found.fill(0);
        self.map_guarded(keys, bytes_of_mut(out), Some(found), |g, c| {
            self.find_chunk(g, c)
        })
    }

    /// How many copies of each key are stored.
    pub fn count(&self, keys: &[L::Key]) -> Result<Vec<u32>> {
        let mut counts = zeroed_answers(keys.len());
        self.count_into(keys, &mut counts)?;
        Ok(counts)
    }

    /// How many copies of each key are stored, into `out` (as long as `keys`), copied straight there.
    pub fn count_into(&self, keys: &[L::Key], out: &mut [u32]) -> Result<()> {
        check_out_len(keys.len(), out.len())?;
        self.map_guarded(keys, bytes_of_mut(out), None, |g, c| self.count_chunk(g, c))
    }

    /// The layer's keyed pass over `keys` into `out` (one answer per key), with the keys checked against the
    /// reserved ones as they land: `launch(guard, chunk)` queues a chunk's kernel (`find_into`, `count_into`).
    fn map_guarded(
        &self,
        keys: &[L::Key],
        out: &mut [u8],
        found: Option<&mut [u32]>,
        launch: impl Fn(&Option<KeyGuard<L::Key>>, &Chunk),
    ) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let guard = self.guard(keys, self.sizes.find)?;
        self.link()
            .map_keys(bytes_of(keys), size_of::<L::Key>(), out, found, |c| {
                launch(&guard, &c)
            })?;
        self.guarded(&guard, keys)
    }

    /// Every value of each key: offsets (`keys + 1`) and values, in list order ([`GpuChained::find_all_into`]
    /// into fresh vectors).
    pub fn find_all(&self, keys: &[L::Key]) -> Result<(Vec<u32>, Vec<L::Value>)> {
        let mut out = FindAll::default();
        self.find_all_into(keys, &mut out)?;
        Ok((out.offsets, out.values))
    }

    /// Every value of each key into `out`, reusing its allocations (its previous contents are replaced):
    /// offsets (`keys + 1`) and values, in list order, counted as the keys land, scanned and gathered on the
    /// device, and copied straight into `out`'s vectors. On an error, `out`'s contents are unspecified.
    pub fn find_all_into(&self, keys: &[L::Key], out: &mut FindAll<L::Value>) -> Result<()> {
        // No keys, nothing to check: the layer answers the one offset without the device.
        let guard = if keys.is_empty() {
            None
        } else {
            self.guard(keys, self.sizes.find)?
        };
        self.link().find_all_into(
            bytes_of(keys),
            size_of::<L::Key>(),
            |c| self.count_chunk(&guard, &c),
            |kh, n, starts, values, total| {
                self.launch(Launch {
                    out: Some((values, total)),
                    aux: Some((starts, n + 1)),
                    ..Self::over(op::GATHER, kh, None, n, 0)
                })
            },
            out,
        )?;
        self.guarded(&guard, keys)
    }

    /// [`GpuChained::apply_device`] from host data: `(value, status)` of each operation.
    pub fn apply(
        &mut self,
        ops: &[u32],
        keys: &[L::Key],
        values: &[L::Value],
    ) -> Result<Vec<(L::Value, u32)>> {
        for (what, got) in [("ops", ops.len()), ("values", values.len())] {
            if got != keys.len() {
                return Err(Error::LengthMismatch {
                    what,
                    got,
                    expected: keys.len(),
                });
            }
        }
        if let Some(index) = ops.iter().position(|&o| o > op::FIND) {
            return Err(Error::InvalidConfig(format!(
                "operation {index} has code {}: a mixed batch holds codes 0 (insert) to 3 (find)",
                ops[index]
            )));
        }
        let n = keys.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let link = self.link();
        let (oh, kh, vh) = (link.upload(ops)?, link.upload(keys)?, link.upload(values)?);
        let (out, aux) = self.apply_device(&oh, &kh, &vh, n)?;
        let mut found = vec![L::Value::default(); n];
        let mut statuses = vec![0u32; n];
        self.link().download(&out, &mut found)?;
        self.link().download(&aux, &mut statuses)?;
        Ok(found.into_iter().zip(statuses).collect())
    }
}
