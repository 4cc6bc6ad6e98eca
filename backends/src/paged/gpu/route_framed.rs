//! The router's framed launches (every child resident in the slot frames, `super::frames`): a framed upsert's
//! buffers ([`FramedRun`]), the classify and insert launches of each landed chunk and the read of its outcome,
//! and the framed find of each landed chunk.

use super::routing::{DeviceRouter, widths};
use crate::device::layout::KeyLayout;
use crate::paged::protocol::{FRAME_DESC_WORDS, FramedCounts, FramedUpsert, RouteMap, SlotFrames};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::transfer::HostTransfer;
use crate::table::gpu::kernels::INSERT_COUNTERS;
use crate::table::gpu::upsert::MASK_NEW;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::{Key, Result, Value};

/// The device state of a framed upsert batch.
pub(super) struct FramedRun {
    /// Kept keys per child (the counts the batch was planned with).
    kept: Vec<usize>,
    /// The children's descriptors.
    descs: Handle,
    /// The insert launches' counters ([`INSERT_COUNTERS`] words, all children together, then each child's
    /// failures).
    counters: Handle,
    /// Pairs the inserts give up on.
    stash: Handle,
    /// Pairs `stash` holds.
    stash_len: usize,
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> DeviceRouter<R, S, L> {
    /// The buffers of a framed upsert of `n` keys whose kept keys per child are `kept`: zeroed counters, and a
    /// stash as large as a plain table's of the frames' slots (at most a pair per key: a key's insert gives up
    /// at most once).
    pub(super) fn framed_run(&self, f: FramedUpsert<'_>, kept: Vec<usize>, n: usize) -> FramedRun {
        let (client, cache) = (&self.client, &self.cache);
        let words = INSERT_COUNTERS + kept.len();
        let counters = cache.take(client, "framed counters", words * 4);
        fill_u32(client, &counters, words, 0);
        let stash_len = crate::table::gpu::stash_len_for(f.frames.stride * kept.len())
            .min(n)
            .max(1);
        FramedRun {
            kept,
            descs: client.create_from_slice(u32::as_bytes(f.descs)),
            counters,
            stash: cache.take(client, "framed stash", stash_len * L::STASH_WORDS * 8),
            stash_len,
        }
    }

    /// Queues the framed upsert of the `m` kept pairs from position `base` of the batch's `(keys, values,
    /// mask)`: the classify pass (stored keys marked and updated in place; skipped when no child holds pairs),
    /// then the new keys' insert. Chunks go in batch order on one stream; their kept keys are distinct across
    /// the batch, so no chunk's classify races another's evictions.
    pub(super) fn upsert_chunk(
        &self,
        (keys, values, mask): (&Handle, &Handle, &Handle),
        (base, m): (usize, usize),
        f: FramedUpsert<'_>,
        run: &FramedRun,
        (entries, route): (&Handle, RouteMap<'_>),
    ) {
        if m == 0 {
            return;
        }
        let (kb, vb) = widths::<L>();
        let kh = keys.clone().offset_start((base * kb) as u64);
        let vh = values.clone().offset_start((base * vb) as u64);
        let mk = mask.clone().offset_start((base * 4) as u64);
        let frames = f.frames;
        let slots = frames.count * frames.stride;
        let descs = route.children * FRAME_DESC_WORDS;
        let cubes = cube_count(m);
        if f.stored {
            // SAFETY: positions are bounded by `m`; children by the directory's entries (every child has a
            // descriptor); slot addresses by each descriptor's base plus the shared bucket count.
            unsafe {
                crate::paged::gpu::frames::framed_classify_kernel::launch_unchecked::<S, L, R>(
                    &self.client,
                    cubes.clone(),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(kh.clone(), m),
                    ArrayArg::from_raw_parts(vh.clone(), m),
                    ArrayArg::from_raw_parts(frames.keys.clone(), slots),
                    ArrayArg::from_raw_parts(frames.values.clone(), frames.values_len),
                    ArrayArg::from_raw_parts(mk.clone(), m),
                    ArrayArg::from_raw_parts(run.descs.clone(), descs),
                    ArrayArg::from_raw_parts(entries.clone(), route.entries.len()),
                    crate::device::shape::shape_scalars(frames.shape),
                    route.seed,
                    route.depth,
                    frames.bucket_size,
                    frames.tile_width,
                )
            }
        }
        let plain = if self.options.plain_reads {
            (frames.keys.clone(), slots)
        } else {
            // Never bind a buffer twice in one launch: wgpu mis-binds the second use.
            (self.dummies[0].clone(), 1)
        };
        // The new keys go in without the duplicate check (distinct, and absent after the classify pass), each
        // in its child's frame, as a routed child's insert does in its own slots.
        let mut shape = frames.shape;
        shape[8] = 0;
        // SAFETY: as above; failures are bounded by the stash's length (the kernel counts past it).
        unsafe {
            crate::paged::gpu::frames::framed_insert_kernel::launch_unchecked::<S, L, R>(
                &self.client,
                cubes,
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(kh, m),
                ArrayArg::from_raw_parts(vh, m),
                ArrayArg::from_raw_parts(mk, m),
                MASK_NEW,
                ArrayArg::from_raw_parts(frames.keys.clone(), slots),
                ArrayArg::from_raw_parts(plain.0, plain.1),
                ArrayArg::from_raw_parts(frames.values.clone(), frames.values_len),
                ArrayArg::from_raw_parts(run.stash.clone(), run.stash_len * L::STASH_WORDS),
                ArrayArg::from_raw_parts(run.counters.clone(), INSERT_COUNTERS + route.children),
                ArrayArg::from_raw_parts(run.descs.clone(), descs),
                ArrayArg::from_raw_parts(entries.clone(), route.entries.len()),
                crate::device::shape::shape_scalars(shape),
                route.seed,
                route.depth,
                frames.bucket_size,
                frames.tile_width,
                self.options.use_cas,
                self.options.plain_reads,
            )
        }
    }

    /// Reads a framed upsert's outcome (one read, after its inserts): the new keys per child (the kept keys
    /// the classify pass left [`MASK_NEW`], counted per child), each child's failures, and the pairs given up
    /// on. The new keys stored, counted apart by the insert kernel, must agree.
    pub(super) fn settle_framed<K: Key, V: Value>(
        &self,
        run: FramedRun,
        (keys, mask, n): (&Handle, &Handle, usize),
        (entries, route): (&Handle, RouteMap<'_>),
    ) -> Result<FramedCounts<K, V>> {
        let (client, cache) = (&self.client, &self.cache);
        let children = route.children;
        let new_counts = self.zeroed_counts(route);
        self.count(keys, Some(mask), n, (entries, &new_counts), route);
        let read = client.read(vec![run.counters.clone(), new_counts]);
        let c = u32::from_bytes(&read[0]);
        let to_usize = |w: &[u32]| w.iter().map(|&x| x as usize).collect::<Vec<usize>>();
        let new = to_usize(&u32::from_bytes(&read[1])[..children]);
        let failed = to_usize(&c[INSERT_COUNTERS..INSERT_COUNTERS + children]);
        let ops: usize = run.kept.iter().sum();
        let counts = crate::device::counters::decode_counters(c, ops as u64);
        let (all_failed, added) = (counts.failed, counts.added);
        let stored: Vec<usize> = new.iter().zip(&failed).map(|(n, f)| n - f.min(n)).collect();
        let held = all_failed.min(run.stash_len);
        let unplaced = if held > 0 {
            let words = u64::from_bytes(&client.read_one_unchecked(run.stash.clone())).to_vec();
            crate::device::layout::decode_stash::<L>(&words, held)
                .into_iter()
                .map(|(k, v)| (K::narrow(k), V::narrow(v)))
                .collect()
        } else {
            Vec::new()
        };
        cache.give(
            "framed counters",
            run.counters,
            (INSERT_COUNTERS + children) * 4,
        );
        cache.give(
            "framed stash",
            run.stash,
            run.stash_len * L::STASH_WORDS * 8,
        );
        let total: usize = stored.iter().sum();
        if total != added || failed.iter().sum::<usize>() != all_failed {
            return Err(hashtile_core::Error::Device(format!(
                "a framed upsert's counts disagree: {total} new keys stored by the children's counts, \
                 {added} by the insert's; {all_failed} failures"
            )));
        }
        Ok(FramedCounts {
            kept: run.kept,
            stored,
            unplaced,
            untracked: all_failed - held,
        })
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> DeviceRouter<R, S, L> {
    /// Queues the framed find of one landed chunk of `n` keys ([`Router::find_framed`]).
    pub(super) fn find_chunk(
        &self,
        (keys, n): (&Handle, usize),
        frames: &SlotFrames,
        (descs, entries): (&Handle, &Handle),
        (out, bits): (&Handle, Option<&Handle>),
        route: RouteMap<'_>,
    ) {
        if n == 0 {
            return;
        }
        let (bh, bl) = bits.map_or((self.dummies[0].clone(), 1), |b| {
            (b.clone(), n.div_ceil(32))
        });
        // SAFETY: positions are bounded by `n` (keys, out, bits); children by the directory's entries (every
        // child has a descriptor); buckets by each descriptor's base plus the shared bucket count (the frames
        // hold `count * stride` slots and every base is a frame's start).
        unsafe {
            crate::paged::gpu::frames::framed_find_kernel::launch_unchecked::<S, L, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(frames.keys.clone(), frames.count * frames.stride),
                ArrayArg::from_raw_parts(frames.values.clone(), frames.values_len),
                ArrayArg::from_raw_parts(out.clone(), n),
                ArrayArg::from_raw_parts(bh, bl),
                ArrayArg::from_raw_parts(descs.clone(), route.children * FRAME_DESC_WORDS),
                ArrayArg::from_raw_parts(entries.clone(), route.entries.len()),
                crate::device::shape::shape_scalars(frames.shape),
                route.seed,
                route.depth,
                frames.bucket_size,
                frames.tile_width,
                bits.is_some(),
            )
        }
    }
}
