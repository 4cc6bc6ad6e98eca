//! The host path of the GPU tables: a batch in host memory is copied in ([`HostTransfer`]), its duplicates
//! and updates are settled by device passes ([`super::upsert`]), and it is inserted by two masked launches of
//! the table's insert kernel; finds copy keys in and values (and presence bits) straight out into the caller's
//! slices. The same driver serves packed and wide tables through [`BatchTable`].

use super::transfer::HostTransfer;
use super::upsert::{
    MASK_NEW, MASK_UPDATE, count_mask_kernel, dedup_claim_kernel, dedup_mark_kernel, scratch_slots,
};
use super::{CUBE_SIZE, cube_count, fill_u32, fill_u64};
use crate::gpu::kernels::ADDED_COUNTERS;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::{Error, ProbeStats, Result};

/// How a host batch is cut for the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSizes {
    /// Keys per device batch of an insert: larger host batches run as consecutive batches, which bounds the
    /// device memory of one call (about 32 bytes per key with the duplicate passes) and keeps the semantics (a
    /// later batch's keys that an earlier one stored are updates).
    pub insert: usize,
    /// Keys per find chunk (a multiple of 32, so a chunk's presence bits start at a word boundary).
    pub find: usize,
}

impl BatchSizes {
    /// The defaults: 2^26-key inserts (one batch for the sweeps' sizes), 2^24-key find chunks.
    pub const DEFAULT: Self = Self {
        insert: 1 << 26,
        find: 1 << 24,
    };
    /// Both sizes set to `keys` (rounded up to a multiple of 32; for tests of chunk boundaries), or the
    /// defaults.
    pub fn from_keys(keys: Option<usize>) -> Self {
        match keys {
            Some(k) => {
                let k = k.max(1).next_multiple_of(32);
                Self { insert: k, find: k }
            }
            None => Self::DEFAULT,
        }
    }
}

/// Device-side steps of a table that the host path chains.
pub(crate) trait BatchTable<R: HostTransfer> {
    /// Bytes per key on the device (4: packed 32-bit pairs; 8: wide).
    const KEY_BYTES: usize;
    /// Bytes per value on the device.
    const VALUE_BYTES: usize;
    /// The compute client.
    fn client(&self) -> &ComputeClient<R>;
    /// The transfer state.
    fn stager(&self) -> &R::Stager;
    /// Pairs stored (settled).
    fn stored(&self) -> usize;
    /// Keys per device batch of an insert and per chunk of a find ([`BatchSizes`]).
    fn batch_sizes(&self) -> BatchSizes;
    /// Marks keys marked [`MASK_NEW`] that are already stored as [`MASK_UPDATE`] (queued).
    fn classify(&self, keys: &Handle, mask: &Handle, n: usize);
    /// Queues an insert of the positions whose mask equals `mode` (all positions when `mask` is `None`);
    /// `upsert` off skips the duplicate check (keys known distinct and absent).
    fn insert_queued(
        &mut self,
        keys: &Handle,
        values: &Handle,
        mask: Option<(&Handle, u32)>,
        n: usize,
        upsert: bool,
    );
    /// Waits for queued inserts and returns their statistics and unplaced pairs (widened).
    fn settle_batch(&mut self) -> Result<(ProbeStats, Vec<(u64, u64)>)>;
}

/// Refuses an allocation of `needed` bytes that the device cannot hold (when the runtime can tell).
pub(crate) fn check_device_memory<R: HostTransfer>(
    stager: &R::Stager,
    what: &'static str,
    needed: u64,
) -> Result<()> {
    match R::free_device_memory(stager) {
        Some(free) if needed > free => Err(Error::OutOfMemory {
            what,
            device: "device",
            needed,
            available: free,
        }),
        _ => Ok(()),
    }
}

fn add(a: &mut ProbeStats, b: ProbeStats) {
    a.probes += b.probes;
    a.ops += b.ops;
    a.retries += b.retries;
}

/// The duplicate mask of a device batch (`super::upsert`): 1 = insert (last occurrence), 0 = skip; with
/// `classify`, 2 = already stored.
fn plan<R: HostTransfer, T: BatchTable<R>>(
    t: &T,
    keys: &Handle,
    n: usize,
    classify: bool,
) -> Handle {
    let client = t.client();
    let wide = T::KEY_BYTES == 8;
    let slots = scratch_slots(n);
    let scratch = client.empty(slots * 8);
    fill_u64(client, &scratch, slots, if wide { u64::MAX } else { 0 });
    let last = if wide {
        let h = client.empty(slots * 4);
        fill_u32(client, &h, slots, 0);
        (h, slots)
    } else {
        (client.empty(4), 1)
    };
    let slot_of = client.empty(n * 4);
    let mask = client.empty(n * 4);
    // SAFETY: every index is bounded by `n` (the batch arrays) or masked into the scratch table.
    unsafe {
        if wide {
            dedup_claim_kernel::launch_unchecked::<u64, R>(
                client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(scratch.clone(), slots),
                ArrayArg::from_raw_parts(last.0.clone(), last.1),
                ArrayArg::from_raw_parts(slot_of.clone(), n),
                true,
            )
        } else {
            dedup_claim_kernel::launch_unchecked::<u32, R>(
                client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(scratch.clone(), slots),
                ArrayArg::from_raw_parts(last.0.clone(), last.1),
                ArrayArg::from_raw_parts(slot_of.clone(), n),
                false,
            )
        }
        dedup_mark_kernel::launch_unchecked::<R>(
            client,
            cube_count(n),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(slot_of.clone(), n),
            ArrayArg::from_raw_parts(scratch.clone(), slots),
            ArrayArg::from_raw_parts(last.0.clone(), last.1),
            ArrayArg::from_raw_parts(mask.clone(), n),
            wide,
        );
    }
    if classify {
        t.classify(keys, &mask, n);
    }
    mask
}

/// Counts the mask entries equal to `value` (one small read-back).
fn count<R: HostTransfer>(client: &ComputeClient<R>, mask: &Handle, n: usize, value: u32) -> usize {
    let counters = client.empty(ADDED_COUNTERS as usize * 4);
    fill_u32(client, &counters, ADDED_COUNTERS as usize, 0);
    // SAFETY: indices bounded by `n` and by the counter array (`CUBE_POS_X % ADDED_COUNTERS`).
    unsafe {
        count_mask_kernel::launch_unchecked::<R>(
            client,
            cube_count(n),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(mask.clone(), n),
            value,
            ArrayArg::from_raw_parts(counters.clone(), ADDED_COUNTERS as usize),
        )
    }
    u32::from_bytes(&client.read_one_unchecked(counters))
        .iter()
        .map(|&c| c as usize)
        .sum()
}

/// Device bytes one device batch of `n` keys needs beyond the table.
fn batch_bytes<R: HostTransfer, T: BatchTable<R>>(n: usize) -> u64 {
    let slots = scratch_slots(n) as u64;
    let per_slot = if T::KEY_BYTES == 8 { 12 } else { 8 };
    (n * (T::KEY_BYTES + T::VALUE_BYTES + 8)) as u64 + slots * per_slot
}

/// Upserts a host batch (`keys`, `values`: the device layout's bytes, `n` pairs). `distinct`: the caller
/// guarantees distinct keys that are not stored (rebuilds), so the duplicate passes are skipped.
pub(crate) fn upsert<R: HostTransfer, T: BatchTable<R>>(
    t: &mut T,
    keys: &[u8],
    values: &[u8],
    distinct: bool,
) -> Result<(ProbeStats, Vec<(u64, u64)>)> {
    let (kb, vb) = (T::KEY_BYTES, T::VALUE_BYTES);
    let n = keys.len() / kb;
    let mut stats = ProbeStats::default();
    let mut lost = Vec::new();
    let batch = t.batch_sizes().insert;
    for start in (0..n).step_by(batch) {
        let m = (n - start).min(batch);
        check_device_memory::<R>(t.stager(), "an insert batch", batch_bytes::<R, T>(m))?;
        let kh = R::upload(t.client(), t.stager(), &keys[start * kb..(start + m) * kb])?;
        let vh = R::upload(
            t.client(),
            t.stager(),
            &values[start * vb..(start + m) * vb],
        )?;
        if distinct {
            t.insert_queued(&kh, &vh, None, m, false);
        } else {
            let had_pairs = t.stored() > 0;
            let mask = plan(t, &kh, m, had_pairs);
            if had_pairs {
                // Updates first, in a launch of their own: they never evict, so no key is in flight while
                // they search; then the new keys, distinct and absent, without the duplicate check.
                t.insert_queued(&kh, &vh, Some((&mask, MASK_UPDATE)), m, true);
            }
            t.insert_queued(&kh, &vh, Some((&mask, MASK_NEW)), m, false);
        }
        let (s, mut l) = t.settle_batch()?;
        add(&mut stats, s);
        lost.append(&mut l);
    }
    Ok((stats, lost))
}

/// Counts the distinct keys of a host batch that are not stored (the capacity check near a full table).
/// Batches larger than one device batch are counted per device batch (a key repeated across them counts more
/// than once: an over-estimate, never an under-estimate).
pub(crate) fn count_new<R: HostTransfer, T: BatchTable<R>>(t: &T, keys: &[u8]) -> Result<usize> {
    let kb = T::KEY_BYTES;
    let n = keys.len() / kb;
    let mut new = 0;
    let batch = t.batch_sizes().insert;
    for start in (0..n).step_by(batch) {
        let m = (n - start).min(batch);
        check_device_memory::<R>(t.stager(), "a capacity check", batch_bytes::<R, T>(m))?;
        let kh = R::upload(t.client(), t.stager(), &keys[start * kb..(start + m) * kb])?;
        let mask = plan(t, &kh, m, t.stored() > 0);
        new += count(t.client(), &mask, m, MASK_NEW);
    }
    Ok(new)
}

/// Runs a bulk find over a host batch in chunks: `launch(keys, out, bits, n)` queues the table's find kernel;
/// values (and presence bits) are copied straight into `out` (and `found`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn find<R: HostTransfer>(
    client: &ComputeClient<R>,
    stager: &R::Stager,
    keys: &[u8],
    key_bytes: usize,
    out: &mut [u8],
    value_bytes: usize,
    mut found: Option<&mut [u32]>,
    chunk: usize,
    launch: impl Fn(&Handle, &Handle, Option<&Handle>, usize),
) -> Result<()> {
    let n = keys.len() / key_bytes;
    for start in (0..n).step_by(chunk) {
        let m = (n - start).min(chunk);
        let kh = R::upload(
            client,
            stager,
            &keys[start * key_bytes..(start + m) * key_bytes],
        )?;
        let oh = client.empty(m * value_bytes);
        let words = m.div_ceil(32);
        let bits = found.as_ref().map(|_| {
            let h = client.empty(words * 4);
            fill_u32(client, &h, words, 0);
            h
        });
        launch(&kh, &oh, bits.as_ref(), m);
        R::download(
            client,
            stager,
            &oh,
            &mut out[start * value_bytes..(start + m) * value_bytes],
        )?;
        if let (Some(f), Some(bh)) = (found.as_deref_mut(), bits.as_ref()) {
            let w0 = start / 32;
            R::download(client, stager, bh, u32_bytes_mut(&mut f[w0..w0 + words]))?;
        }
    }
    Ok(())
}

/// A `u32` slice's bytes, writable.
pub(crate) fn u32_bytes_mut(v: &mut [u32]) -> &mut [u8] {
    // SAFETY: any byte pattern is a valid u32; the length and alignment follow from the slice.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

/// A `u64` slice's bytes, writable.
pub(crate) fn u64_bytes_mut(v: &mut [u64]) -> &mut [u8] {
    // SAFETY: as for `u32_bytes_mut`.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}
