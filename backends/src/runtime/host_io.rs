//! The one host-I/O layer: how every family's calls on host data (static tables, chained tables, CSR tables
//! and joins, paged tables' children) move that data through the device, over [`HostTransfer`] (CUDA: pinned
//! staging on a stream of its own; Vulkan: CubeCL's copies).
//!
//! - **Device batches** ([`BatchSizes`]): a host batch larger than one device batch runs as consecutive
//!   device batches, which bounds the device memory of one call (`check_device_memory` refuses one the
//!   device cannot hold, as a typed error).
//! - **Chunked uploads with a kernel per chunk** (`HostLink::upload_chunks`): a batch's keys are copied in
//!   chunks, and the family's kernel over each chunk is queued as soon as the chunk has landed, so that it runs
//!   while the next chunks are copied.
//! - **Answers straight into the caller's memory** (`HostLink::map_keys`): values, counts and presence bits
//!   are copied into the caller's slices (directly when they are pinned); `Option` answers
//!   (`HostLink::find_options`) and multimap answers (`HostLink::find_all_into`, into the caller's reused
//!   vectors) are written in the same pass that takes each downloaded piece out of its staging buffer, with no
//!   intermediate host buffer.
//! - **Buffers kept between calls** ([`DeviceCache`]): grow-only, per name, so that a call does not allocate
//!   its batch-sized buffers.
//! - **Reserved keys checked on the device** (`KeyGuard`): as the keys land, a kernel finds the first
//!   reserved key, and the kernels that change a table are gated on that answer.

use super::host_memory::{Prefault, answer_room, answer_vec, refuse_beyond};
use super::launch::{CUBE_SIZE, cube_count, fill_u32};
use super::scan::{exclusive_scan_into, total_u64};
use super::trace::Trace;
use super::transfer::{HostTransfer, par_copy_uninit, sync_device};
use super::words::{bytes_of, bytes_of_mut, uninit_bytes_of_mut};
use crate::results::{FindAll, past_32_bit_offsets};
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::element::first_position;
use hashtile_core::{Element, Error, Result};
use rayon::prelude::*;

/// How a host batch is cut for the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSizes {
    /// Keys per device batch of an insert: larger host batches run as consecutive batches, which bounds the
    /// device memory of one call (about 32 bytes per key with the static table's duplicate passes) and keeps
    /// the semantics (a later batch's keys that an earlier one stored are updates).
    pub insert: usize,
    /// Keys per device batch of a lookup (finds, counts, erases, `find_all`).
    pub find: usize,
    /// Keys per copy chunk: a batch's keys are copied in chunks, and each chunk's kernel is queued as soon as
    /// the chunk has landed, so the copy of the next chunk overlaps it. A multiple of [`CHUNK_ALIGN`].
    pub chunk: usize,
    /// The fewest chunks a device batch is copied in ([`BatchSizes::chunk_for`]; 1: chunks of `chunk` keys
    /// whatever the batch). A batch smaller than `chunk` keys is otherwise one chunk, whose copy, transfer and
    /// kernels run in turn (NOTES.md open problem 17).
    pub pieces: usize,
}

/// The smallest chunk [`BatchSizes::chunk_for`] cuts a batch into (a chunk's launches cost about as much as
/// copying this many keys).
pub const MIN_PIECE: usize = 1 << 16;

/// Chunks are whole multiples of this many keys: a chunk's presence bits then start on a 256-byte boundary,
/// the strictest offset alignment of a buffer binding (Vulkan's `minStorageBufferOffsetAlignment`).
pub const CHUNK_ALIGN: usize = 2048;

impl BatchSizes {
    /// The defaults: device batches of 2^26 keys (one batch for the sweeps' sizes), copy chunks of 2^22.
    pub const DEFAULT: Self = Self {
        insert: 1 << 26,
        find: 1 << 26,
        chunk: 1 << 22,
        pieces: 1,
    };
    /// Device batches of `keys` keys (rounded up to a multiple of [`CHUNK_ALIGN`]) copied in chunks of half
    /// that (for tests of both boundaries), or the defaults.
    pub fn from_keys(keys: Option<usize>) -> Self {
        match keys {
            Some(k) => {
                // Copy chunks of half a batch, so that tests cross both kinds of boundary.
                let k = k.max(1).next_multiple_of(CHUNK_ALIGN);
                Self {
                    insert: k,
                    find: k,
                    chunk: (k / 2 / CHUNK_ALIGN).max(1) * CHUNK_ALIGN,
                    pieces: 1,
                }
            }
            None => Self::DEFAULT,
        }
    }

    /// These sizes with each device batch copied in at least `pieces` chunks (see [`BatchSizes::pieces`]).
    pub fn with_pieces(self, pieces: usize) -> Self {
        Self {
            pieces: pieces.max(1),
            ..self
        }
    }

    /// Keys per copy chunk of a device batch of `n` keys: `chunk`, or with [`BatchSizes::pieces`] above 1 a
    /// `pieces`-th of the batch when that is smaller, but at least [`MIN_PIECE`] keys (and a multiple of
    /// [`CHUNK_ALIGN`]).
    pub fn chunk_for(&self, n: usize) -> usize {
        if self.pieces <= 1 {
            return self.chunk;
        }
        let piece = n.div_ceil(self.pieces).next_multiple_of(CHUNK_ALIGN);
        piece.max(MIN_PIECE).min(self.chunk)
    }
}

/// `(start, len)` of each device batch of `per` keys over `n` keys (none for `n == 0`).
pub(crate) fn device_batches(n: usize, per: usize) -> impl Iterator<Item = (usize, usize)> {
    let per = per.max(1);
    (0..n).step_by(per).map(move |s| (s, (n - s).min(per)))
}

/// Device buffers the host calls keep between calls (grow-only), so that a call does not allocate and free its
/// batch-sized buffers (on CUDA a fresh gigabyte-sized buffer per insert cost milliseconds). A call takes the
/// buffers it needs out of the cache and gives them back when done, so concurrent calls on one table (finds
/// through `&self`) never share one; a static table keeps at most about 40 bytes per key of its largest batch.
#[derive(Default)]
pub struct DeviceCache(std::sync::Mutex<Vec<(&'static str, Handle, usize)>>);

impl DeviceCache {
    /// A buffer of at least `bytes` bytes for `name`: the cached one when it is large enough, else a new one.
    pub(crate) fn take<R: Runtime>(
        &self,
        client: &ComputeClient<R>,
        name: &'static str,
        bytes: usize,
    ) -> Handle {
        let bytes = bytes.max(4);
        let mut v = self.0.lock().expect("cache poisoned");
        if let Some(i) = v.iter().position(|e| e.0 == name && e.2 >= bytes) {
            return v.swap_remove(i).1;
        }
        // A smaller cached buffer of this name is freed before the larger one is allocated.
        v.retain(|e| e.0 != name);
        drop(v);
        client.empty(bytes)
    }
    /// Frees every cached buffer (a table whose slots are stood in keeps no device memory:
    /// `GpuTable::stand_in_slots`).
    pub(crate) fn clear(&self) {
        self.0.lock().expect("cache poisoned").clear();
    }
    /// Returns a buffer taken for `name` (of `bytes` bytes) to the cache.
    pub(crate) fn give(&self, name: &'static str, h: Handle, bytes: usize) {
        let mut v = self.0.lock().expect("cache poisoned");
        v.retain(|e| e.0 != name);
        v.push((name, h, bytes.max(4)));
    }
}

/// Refuses an allocation of `needed` bytes that the device cannot hold (when the runtime can tell).
pub(crate) fn check_device_memory<R: HostTransfer>(
    stager: &R::Stager,
    what: &'static str,
    needed: u64,
) -> Result<()> {
    refuse_beyond(what, "device", needed, R::free_device_memory(stager))
}

/// Refuses an answer slice whose length is not the number of keys (`find_into`, `count_into`), as a typed error.
pub(crate) fn check_out_len(keys: usize, out: usize) -> Result<()> {
    check_len("out", out, keys)
}

/// Refuses an argument `what` of `got` elements where `expected` are needed, as a typed error.
pub(crate) fn check_len(what: &'static str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
        return Ok(());
    }
    Err(Error::LengthMismatch {
        what,
        got,
        expected,
    })
}

/// Phase timings of the host calls as `tracing` events (target `hashtile`, level TRACE): marks only while a
/// subscriber listens at that level (each mark waits for the device).
pub(crate) fn trace() -> Trace {
    Trace::new("host_io")
}

/// One landed chunk of a keyed pass (`HostLink::map_keys`): sub-buffers of the device batch's buffers.
pub(crate) struct Chunk<'h> {
    /// The chunk's keys.
    pub(crate) keys: &'h Handle,
    /// The chunk's answers (one per key).
    pub(crate) out: &'h Handle,
    /// The chunk's presence bits (bit `i % 32` of word `i / 32`, zeroed), where asked for.
    pub(crate) bits: Option<&'h Handle>,
    /// Keys in the chunk.
    pub(crate) n: usize,
    /// Position of the chunk's first key in the whole host batch.
    pub(crate) at: usize,
}

/// Takes a device batch's answers off the device: `(start, m, keys, answers, bits)`.
type Finish<'f> = dyn FnMut(usize, usize, &Handle, &Handle, Option<&Handle>) -> Result<()> + 'f;

/// What a table hands the layer for one call: its client, its transfers, its cached buffers and how it cuts
/// batches.
#[derive(Clone, Copy)]
pub(crate) struct HostLink<'a, R: HostTransfer> {
    pub(crate) client: &'a ComputeClient<R>,
    pub(crate) stager: &'a R::Stager,
    pub(crate) cache: &'a DeviceCache,
    pub(crate) sizes: BatchSizes,
}

impl<R: HostTransfer> HostLink<'_, R> {
    /// A new device buffer holding `src` (one word for an empty slice: kernels take buffers of at least one).
    pub(crate) fn upload<E: Element>(&self, src: &[E]) -> Result<Handle> {
        upload(self.client, self.stager, src)
    }

    /// Copies the first `dst.len()` elements of `src` into `dst`, after the queued kernels.
    pub(crate) fn download<E: Element>(&self, src: &Handle, dst: &mut [E]) -> Result<()> {
        download(self.client, self.stager, src, dst)
    }

    /// Copies `srcs` (`(name, bytes)`) one after the other into the cached buffers of those names, in chunks
    /// of `chunk` bytes, calling `landed(source, offset, len, buffer)` as each chunk lands (see
    /// [`HostTransfer::upload_chunked`]); returns the buffers holding the sources (give them back with
    /// [`HostLink::give_back`]).
    pub(crate) fn upload_chunks(
        &self,
        srcs: &[(&'static str, &[u8])],
        chunk: usize,
        landed: &mut dyn FnMut(usize, usize, usize, &Handle),
    ) -> Result<Vec<Handle>> {
        let bytes: Vec<&[u8]> = srcs.iter().map(|s| s.1).collect();
        let dsts: Vec<Handle> = srcs
            .iter()
            .map(|&(name, b)| self.cache.take(self.client, name, b.len()))
            .collect();
        R::upload_chunked(self.client, self.stager, &bytes, &dsts, chunk, landed)
    }

    /// Returns buffers of [`HostLink::upload_chunks`] (`(name, bytes)` as given there) to the cache, once the
    /// kernels that read them are queued.
    pub(crate) fn give_back(&self, srcs: &[(&'static str, &[u8])], handles: Vec<Handle>) {
        for (&(name, b), h) in srcs.iter().zip(handles) {
            self.cache.give(name, h, b.len());
        }
    }

    /// The keyed pass every lookup shares: per device batch, the keys are copied in chunks and `launch` queues
    /// the family's kernel on each chunk as it lands ([`Chunk`]: sub-buffers of the batch's keys, answers of
    /// `ob` bytes per key and, with `bits`, zeroed presence bits), overlapping the next chunk's copy; then
    /// `finish(start, m, keys, answers, bits)` takes the device batch's answers off the device (the batch's keys
    /// are still on it, for a second pass).
    fn keyed(
        &self,
        keys: &[u8],
        kb: usize,
        ob: usize,
        bits: bool,
        launch: &dyn Fn(Chunk<'_>),
        finish: &mut Finish<'_>,
    ) -> Result<()> {
        let (client, cache) = (self.client, self.cache);
        let n = keys.len() / kb;
        let batch = self.sizes.find.next_multiple_of(CHUNK_ALIGN);
        let mut trace = trace();
        for (start, m) in device_batches(n, batch) {
            let oh = cache.take(client, "keyed out", m * ob);
            let words = m.div_ceil(32);
            let bh = bits.then(|| {
                let h = cache.take(client, "keyed bits", words * 4);
                fill_u32(client, &h, words, 0);
                h
            });
            let dst = cache.take(client, "keyed keys", m * kb);
            let kh = R::upload_chunked(
                client,
                self.stager,
                &[&keys[start * kb..(start + m) * kb]],
                &[dst],
                self.sizes.chunk_for(m) * kb,
                &mut |_, off, len, kh| {
                    let first = off / kb;
                    // Chunks start on multiples of CHUNK_ALIGN keys: whole words of bits, aligned bindings.
                    let o = oh.clone().offset_start((first * ob) as u64);
                    let b = bh
                        .as_ref()
                        .map(|b| b.clone().offset_start((first / 32 * 4) as u64));
                    launch(Chunk {
                        keys: &kh.clone().offset_start(off as u64),
                        out: &o,
                        bits: b.as_ref(),
                        n: len / kb,
                        at: start + first,
                    });
                },
            )?;
            trace.mark(client, "keyed: keys copied, kernels run");
            finish(start, m, &kh[0], &oh, bh.as_ref())?;
            trace.mark(client, "keyed: answers copied back");
            // Every kernel of this batch is done (the downloads waited for them): the buffers can serve again.
            cache.give("keyed out", oh, m * ob);
            if let Some(b) = bh {
                cache.give("keyed bits", b, words * 4);
            }
            for h in kh {
                cache.give("keyed keys", h, m * kb);
            }
        }
        Ok(())
    }

    /// Runs a keyed pass over host keys (`kb` bytes each; see [`Chunk`]), then copies the answers straight
    /// into `out` (`out.len() / keys` bytes per key) and, if given, the presence bits into `found`.
    pub(crate) fn map_keys(
        &self,
        keys: &[u8],
        kb: usize,
        out: &mut [u8],
        mut found: Option<&mut [u32]>,
        launch: impl Fn(Chunk<'_>),
    ) -> Result<()> {
        let n = keys.len() / kb;
        if n == 0 {
            return Ok(());
        }
        let ob = out.len() / n;
        self.keyed(
            keys,
            kb,
            ob,
            found.is_some(),
            &launch,
            &mut |start, m, _, oh, bh| {
                R::download(
                    self.client,
                    self.stager,
                    oh,
                    &mut out[start * ob..(start + m) * ob],
                )?;
                if let (Some(f), Some(bh)) = (found.as_deref_mut(), bh) {
                    let w0 = start / 32;
                    self.download(bh, &mut f[w0..w0 + m.div_ceil(32)])?;
                }
                Ok(())
            },
        )
    }

    /// Runs a keyed pass over host keys whose kernel writes a presence bit per key and no answer (`out` of the
    /// launch's [`Chunk`] is a one-word stand-in), and copies the bits into `found` (`n.div_ceil(32)` words):
    /// a set's `contains`, whose answers are the bits alone.
    pub(crate) fn map_bits(
        &self,
        keys: &[u8],
        kb: usize,
        found: &mut [u32],
        launch: impl Fn(Chunk<'_>),
    ) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        self.keyed(keys, kb, 0, true, &launch, &mut |start, m, _, _, bh| {
            let w0 = start / 32;
            self.download(
                bh.expect("bits asked for"),
                &mut found[w0..w0 + m.div_ceil(32)],
            )
        })
    }

    /// Runs a keyed pass over host keys whose kernel writes a value of `V` and a presence bit per key, and
    /// answers `Some(value)` / `None`: each downloaded piece of values becomes its `Option`s as it leaves its
    /// staging buffer (the values are never stored on the host on their own).
    pub(crate) fn find_options<V: Element>(
        &self,
        keys: &[u8],
        kb: usize,
        launch: impl Fn(Chunk<'_>),
    ) -> Result<Vec<Option<V>>> {
        let n = keys.len() / kb;
        let vb = size_of::<V>();
        let mut answers: Vec<Option<V>> = answer_vec(n);
        // The fresh answers are faulted in while the keys travel.
        // SAFETY: `answers` is not touched until the prefault is dropped, before the first answers are written.
        let mut faulting = Some(unsafe { Prefault::start(&mut answers, n) });
        self.keyed(keys, kb, vb, true, &launch, &mut |start, m, _, oh, bh| {
            let mut bits = vec![0u32; m.div_ceil(32)];
            self.download(bh.expect("bits asked for"), &mut bits)?;
            drop(faulting.take());
            let dst = &mut answers.spare_capacity_mut()[start..start + m];
            R::download_with(self.client, self.stager, oh, m * vb, &mut |off, piece| {
                let first = off / vb;
                let slots = &mut dst[first..first + piece.len() / vb];
                convert(slots, first, piece, vb, |i, b| {
                    crate::results::present(&bits, i).then(|| element::<V>(b))
                });
            })
        })?;
        drop(faulting);
        // SAFETY: every device batch wrote its `m` answers (the downloads cover `m * vb` bytes in pieces of
        // whole values), so the first `n` elements are initialised; an error returned above before this.
        unsafe { answers.set_len(n) };
        Ok(answers)
    }

    /// Every value of each host key (multimap lookups; `kb` bytes per key) into `out`, reusing its allocations
    /// (its previous contents are replaced; see [`answer_room`]): per device batch, the keys are copied in
    /// chunks with `count` queued on each as it lands ([`Chunk`]: its `out` is the chunk's `u32` counts); the
    /// counts' sum (with the earlier batches' values) is checked to fit 32-bit offsets and their exclusive scan
    /// made on the device; `gather(keys, n, starts, values, total)` writes each key's values from its start; the
    /// offsets (shifted by the earlier batches' values as they leave the staging buffers) and the values (copied
    /// byte for byte as they leave them)
    /// are written straight into `out`'s room, with no zero-fill before: the download is their one write.
    /// Leaves `keys + 1` offsets and the values; on an error, `out`'s contents are unspecified.
    pub(crate) fn find_all_into<V: Element>(
        &self,
        keys: &[u8],
        kb: usize,
        count: impl Fn(Chunk<'_>),
        gather: impl Fn(&Handle, usize, &Handle, &Handle, usize),
        out: &mut FindAll<V>,
    ) -> Result<()> {
        let (client, cache) = (self.client, self.cache);
        let n = keys.len() / kb;
        let vb = size_of::<V>();
        out.offsets.clear();
        out.values.clear();
        // Fresh offsets are faulted in while the keys travel (the offsets are written after the counting pass).
        let fresh = answer_room(&mut out.offsets, n + 1);
        // SAFETY: `out.offsets` is not touched until the prefault is dropped, before the first batch's offsets.
        let mut faulting = fresh.then(|| unsafe { Prefault::start(&mut out.offsets, n + 1) });
        // Room for one value per key (every key present once, the common lookup) is made and faulted in beside
        // the offsets' while the keys travel, where the values' total is not known yet: faulted in after the
        // count, it held up the values' download (a fresh answer's pages cost more than their bytes). A batch
        // that yields more values grows the room below.
        let fresh = answer_room(&mut out.values, n);
        // SAFETY: `out.values` is not touched until the prefault is dropped, before the first batch's values.
        let mut early_values = fresh.then(|| unsafe { Prefault::start(&mut out.values, n) });
        let mut base = 0usize;
        let mut trace = trace();
        // The counting pass is the keyed pass with `count` per chunk; the rest of each device batch is its finish.
        // Host time per phase (laps: nothing waits for them; the total and the syncs wait for the device).
        self.keyed(
            keys,
            kb,
            4,
            false,
            &count,
            &mut |start, m, kh, counts, _| {
                trace.lap("keys copied, counts queued");
                let total = total_u64(client, counts, m);
                trace.lap("counts done, total read");
                // The batch's values go after the earlier batches': the answer's offsets are 32-bit too.
                if base as u64 + total > u32::MAX as u64 {
                    return Err(past_32_bit_offsets(base as u64 + total));
                }
                let total = total as usize;
                let starts = cache.take(client, "find_all starts", (m + 1) * 4);
                exclusive_scan_into(client, counts, m, &starts);
                let vh = cache.take(client, "find_all values", total * vb);
                // This batch's values go after the previous batches' (the first batch finds `out.values` empty, with
                // the early room); fresh room beyond it is faulted in while the offsets are scanned and copied out.
                drop(early_values.take());
                let fresh = answer_room(&mut out.values, total);
                // SAFETY: `out.values` is not touched until the prefault is dropped, before the values' download.
                let values_faulting =
                    fresh.then(|| unsafe { Prefault::start(&mut out.values, total) });
                // The offsets are final once the scan is done: they are copied out while the gather runs (which
                // only reads them).
                sync_device(client)?;
                trace.lap("offsets scanned");
                if total > 0 {
                    gather(kh, m, &starts, &vh, total);
                }
                // The offsets of this batch, shifted by the values of the batches before it (its first offset is
                // the previous batch's last, written again with the same value; the first batch's is 0).
                drop(faulting.take());
                let dst = &mut out.offsets.spare_capacity_mut()[start..start + m + 1];
                R::download_ready_with(
                    client,
                    self.stager,
                    &starts,
                    (m + 1) * 4,
                    &mut |off, piece| {
                        let first = off / 4;
                        let slots = &mut dst[first..first + piece.len() / 4];
                        convert_offsets(slots, piece, base as u32);
                    },
                )?;
                trace.lap("offsets copied out, beside the gather");
                drop(values_faulting);
                let dst = &mut out.values.spare_capacity_mut()[..total];
                R::download_with(client, self.stager, &vh, total * vb, &mut |off, piece| {
                    // Pieces start at multiples of 8 bytes and end at one or at the end: whole values.
                    let first = off / vb;
                    let slots = &mut dst[first..first + piece.len() / vb];
                    par_copy_uninit(uninit_bytes_of_mut(slots), piece);
                })?;
                // SAFETY: the download above wrote all `total * vb` bytes of the `total` values after the first
                // `base` (the device's bytes of a `V` are the host's: `Element` is sealed to `u32` and `u64`,
                // little-endian on both sides); an error returned before this.
                unsafe { out.values.set_len(base + total) };
                trace.lap("values copied out");
                base += total;
                cache.give("find_all starts", starts, (m + 1) * 4);
                cache.give("find_all values", vh, total * vb);
                Ok(())
            },
        )?;
        trace.report("find_all_into", n);
        drop(faulting);
        drop(early_values);
        if n == 0 {
            out.offsets.push(0);
            return Ok(());
        }
        // SAFETY: every device batch wrote its `m + 1` offsets from `start` (the first one's from 0), so all
        // `n + 1` are initialised; an error returned above before this.
        unsafe { out.offsets.set_len(n + 1) };
        Ok(())
    }
}

/// A new device buffer holding `src` (one word for an empty slice: kernels take buffers of at least one
/// word), through the host transfers of `stager`.
pub(crate) fn upload<R: HostTransfer, E: Element>(
    client: &ComputeClient<R>,
    stager: &R::Stager,
    src: &[E],
) -> Result<Handle> {
    if src.is_empty() {
        return Ok(client.empty(8));
    }
    R::upload(client, stager, bytes_of(src))
}

/// Copies the first `dst.len()` elements of `src` into `dst` through `stager`, after the queued kernels.
pub(crate) fn download<R: HostTransfer, E: Element>(
    client: &ComputeClient<R>,
    stager: &R::Stager,
    src: &Handle,
    dst: &mut [E],
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    R::download(client, stager, src, bytes_of_mut(dst))
}

/// Elements a task of [`convert`] handles: a task per element costs about as much again as the conversion.
const CONVERT_TASK: usize = 1 << 14;

/// Writes `f(first + j, bytes of element j)` into `slots[j]` for every element of a downloaded `piece`
/// (`width` bytes each), in parallel: a host call's answer made from a piece as it leaves its staging buffer.
fn convert<T: Send>(
    slots: &mut [std::mem::MaybeUninit<T>],
    first: usize,
    piece: &[u8],
    width: usize,
    f: impl Fn(usize, &[u8]) -> T + Sync,
) {
    slots
        .par_chunks_mut(CONVERT_TASK)
        .zip(piece.par_chunks(width * CONVERT_TASK))
        .enumerate()
        .for_each(|(c, (slots, bytes))| {
            let base = first + c * CONVERT_TASK;
            for (j, (slot, b)) in slots.iter_mut().zip(bytes.chunks_exact(width)).enumerate() {
                slot.write(f(base + j, b));
            }
        });
}

/// 32-bit device offsets (little-endian bytes of a downloaded piece) shifted by `base` (the values of the earlier
/// device batches), in parallel: a plain copy for the first batch, else [`convert`] with the width fixed at 4
/// bytes, an add the compiler vectorizes.
fn convert_offsets(slots: &mut [std::mem::MaybeUninit<u32>], piece: &[u8], base: u32) {
    if base == 0 {
        // The first device batch's offsets are the device's words as they are.
        par_copy_uninit(uninit_bytes_of_mut(slots), piece);
        return;
    }
    slots
        .par_chunks_mut(CONVERT_TASK)
        .zip(piece.par_chunks(4 * CONVERT_TASK))
        .for_each(|(slots, bytes)| {
            for (slot, b) in slots.iter_mut().zip(bytes.chunks_exact(4)) {
                slot.write(base + u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            }
        });
}

/// One element from its little-endian bytes (a downloaded piece need not be aligned for `E`).
pub(crate) fn element<E: Element>(b: &[u8]) -> E {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    E::narrow(u64::from_le_bytes(w))
}

/// The device side of `Option` answers: sets bit `pos % 32` of `bits[pos / 32]` for every lane of the plane whose `present` is true: one atomic OR
/// per plane (planes of 8..=32 lanes cover consecutive positions inside one 32-bit word). All lanes must call.
#[cube]
pub fn store_found_bits(bits: &Array<Atomic<u32>>, present: bool, pos: usize) {
    let ballot = plane_ballot(present)[0];
    if UNIT_POS_PLANE == 0u32 && ballot != 0u32 {
        let word = pos / 32;
        let shift = (pos % 32) as u32;
        if word < bits.len() {
            bits[word].fetch_or(ballot << shift);
        }
    }
}

/// The position of the first key of a batch that is one of two reserved words, found on the device as the
/// keys land, so that no host pass reads the keys: `guard[0]` is lowered to `at + i` for each key `i` of this
/// chunk (whose first key is at position `at` of the batch) equal to `empty` or `tomb` (as `u64`s).
#[cube(launch_unchecked)]
pub fn first_reserved_kernel<K: Int>(
    keys: &Array<K>,
    guard: &Array<Atomic<u32>>,
    empty: u64,
    tomb: u64,
    at: u32,
) {
    let i = ABSOLUTE_POS;
    if i < keys.len() {
        let k = u64::cast_from(keys[i]);
        if k == empty || k == tomb {
            guard[0].fetch_min(at + i as u32);
        }
    }
}

/// A batch's reserved-key check on the device ([`first_reserved_kernel`]): the keys reserved by a table (the
/// empty sentinel and the tombstone, as the table's key words), and the one guard word (`u32::MAX`: no reserved
/// key seen). Kernels that change a table read the word and do nothing when it is set, so a batch holding a
/// reserved key leaves the table unchanged once every key of it was checked before the first such kernel.
pub(crate) struct KeyGuard<K> {
    word: Handle,
    reserved: [K; 2],
}

impl<K: Element + Int> KeyGuard<K> {
    /// A clear guard for keys whose reserved words are `reserved` (the empty sentinel, then the tombstone).
    pub(crate) fn new<R: Runtime>(client: &ComputeClient<R>, reserved: [K; 2]) -> Self {
        let word = client.empty(4);
        fill_u32(client, &word, 1, u32::MAX);
        Self { word, reserved }
    }
    /// Queues the check of the `n` keys of `keys`, the first at position `at` of the batch.
    pub(crate) fn check<R: Runtime>(
        &self,
        client: &ComputeClient<R>,
        keys: &Handle,
        n: usize,
        at: usize,
    ) {
        if n == 0 {
            return;
        }
        // SAFETY: reads are bounded by `n`, the one write by the guard's length.
        unsafe {
            first_reserved_kernel::launch_unchecked::<K, R>(
                client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(self.word.clone(), 1),
                self.reserved[0].widen(),
                self.reserved[1].widen(),
                at as u32,
            )
        }
    }
    /// The guard word (bind it as the gate of kernels that change the table; read it with other words).
    pub(crate) fn word(&self) -> &Handle {
        &self.word
    }
    /// The error for the guard word as read back (`None`: no reserved key), naming the first reserved key of
    /// `keys` (the batch as checked).
    fn error(&self, bytes: &[u8], keys: &[K]) -> Option<Error> {
        let at = u32::from_bytes(bytes)[0];
        (at != u32::MAX).then(|| reserved_error(&self.reserved, keys, at as usize))
    }
    /// Reads the guard word (waits for the device) and returns [`KeyGuard::error`].
    pub(crate) fn read<R: Runtime>(
        &self,
        client: &ComputeClient<R>,
        keys: &[K],
    ) -> Result<Option<Error>> {
        let bytes = client
            .read_one(self.word.clone())
            .map_err(|e| Error::Device(format!("reading the reserved-key guard: {e:?}")))?;
        Ok(self.error(&bytes, keys))
    }
}

/// The typed error for the reserved key at `index` of `keys`: the empty sentinel (`reserved[0]`) or the
/// tombstone.
pub(crate) fn reserved_error<K: Element>(reserved: &[K; 2], keys: &[K], index: usize) -> Error {
    if keys[index] == reserved[0] {
        Error::SentinelKey { index }
    } else {
        Error::TombstoneKey { index }
    }
}

/// The keys a table with tombstone keys reserves (chained tables, sets): the empty sentinel (all ones) and the
/// tombstone (all ones minus one).
pub(crate) fn reserved_keys<K: hashtile_core::Key>() -> [K; 2] {
    [K::EMPTY, K::narrow(K::EMPTY.widen() - 1)]
}

/// The first of `keys` that is reserved (a host scan with all cores, for batches larger than one device
/// batch: a reserved key in a later device batch must leave the table unchanged), as the typed error.
pub(crate) fn first_reserved<K: Element>(reserved: &[K; 2], keys: &[K]) -> Option<Error> {
    first_position(keys, |k| reserved.contains(k)).map(|i| reserved_error(reserved, keys, i))
}

#[cfg(test)]
mod tests {
    use super::{BatchSizes, CHUNK_ALIGN, MIN_PIECE};

    #[test]
    fn chunks_of_a_batch() {
        let d = BatchSizes::DEFAULT;
        // One piece: the default chunk whatever the batch.
        assert_eq!(d.chunk_for(1 << 20), 1 << 22);
        assert_eq!(d.chunk_for(1), 1 << 22);
        let four = d.with_pieces(4);
        assert_eq!(four.chunk_for(1 << 20), 1 << 18);
        // Never below MIN_PIECE, never above the default chunk, always a multiple of CHUNK_ALIGN.
        assert_eq!(four.chunk_for(1 << 12), MIN_PIECE);
        assert_eq!(four.chunk_for(1 << 26), 1 << 22);
        let odd = four.chunk_for((1 << 18) + 7);
        assert_eq!(odd % CHUNK_ALIGN, 0);
        assert!(odd > 1 << 16 && (1 << 18) + 7 <= 4 * odd);
        assert_eq!(d.with_pieces(0).pieces, 1);
        // Small device batches of tests keep their half-batch chunks.
        let small = BatchSizes::from_keys(Some(4096)).with_pieces(8);
        assert_eq!(small.chunk_for(4096), 2048);
    }
}
