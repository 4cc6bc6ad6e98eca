//! Routing a host batch to a paged table's children on the device (hash-routed [`crate::paged`] tables): the
//! batch crosses the bus once, is partitioned by child on the device, and each child's kernels run on its part
//! (a sub-range of the routed buffers); finds' answers are put back in input order on the device and copied
//! out once. The host never touches the keys (partitioning, gathering and scattering them on the host cost
//! 2-4x a plain table's whole call on the H100, `docs/PERFORMANCE.md`).
//!
//! An upsert batch's keys are copied in while the duplicate pass's claims run on each landed chunk (the host
//! path's `Dedup`, over the whole batch: a key's occurrences may route to one child but sit in different
//! copy chunks), so only each key's last occurrence is routed: the parts hold distinct keys and the partition
//! need not be stable. The keys are routed while the values are still being copied:
//!
//! 1. when the first values chunk lands (every key is claimed), the mark pass and [`route_count_kernel()`] are
//!    queued: each cube counts its tile's kept keys per child in shared memory and adds its counts to the
//!    global ones (one atomic per cube and child, not per key: a few hot counters would serialise);
//! 2. when the next one lands, the counts come back (one small read, with the claims' sentinel guard; the
//!    kernels are done by then, so the copy hardly waits) and each child's part starts at a multiple of 2048
//!    keys (`CHUNK_ALIGN`: every part is then a valid buffer binding, Vulkan's offset alignment);
//! 3. [`route_scatter_kernel()`]: each cube ranks its tile's keys per child in shared memory, claims one range
//!    per child from the global cursors, and writes its keys there and their routed positions;
//! 4. [`route_values_kernel()`] writes each values chunk to those positions as it lands.
//!
//! Only the children's own kernels run after the copy (H100, 16 resident children: 0.89x of a plain table's
//! upsert with all of this after the copy, 0.96x with it inside, `docs/PERFORMANCE.md`).
//!
//! With every child resident in slot frames (`crate::paged::gpu::frames`) the caller offers a [`FramedUpsert`](crate::paged::protocol::FramedUpsert): when the
//! counts of step 2 fit every child's room, nothing is scattered; each values chunk (every one landed so far,
//! then each as it lands) is classified and inserted over the frames in one launch each, every key in its
//! child's frame, and the new keys per child, each child's failures and the failed pairs come back in one read
//! after the copy ([`Upserted::Framed`](crate::paged::protocol::Upserted::Framed)). At 64 children that saves two launches per child per batch
//! (H100, 64 children of 16 MiB: 0.81-0.86x of a plain table's upsert partitioned, 0.95-1.08x framed).
//!
//! A find batch is scattered chunk by chunk as it lands (remembering each key's routed position), into parts
//! sized from each child's share of the directory before any count (`estimated_parts`; a batch that
//! overflows one is counted and scattered again), looked up child by child, and gathered back by
//! [`route_gather_kernel()`]. (Counting first and scattering after the copy ran at 0.77-0.93x of a plain table,
//! scattering as the keys land at 0.94-1.01x: H100, 16 resident children.)

use crate::device::find::found_mode;
use crate::device::layout::KeyLayout;
pub use crate::device::route::{
    ByRoute, carry, route_count_kernel, route_gather_kernel, route_scatter_kernel,
    route_values_kernel,
};
use crate::device::route::{CUBE, TILE};
use crate::paged::protocol::{ROUTED_COUNTERS, RouteMap, RoutedBatch};
use crate::runtime::host_io::{BatchSizes, CHUNK_ALIGN, DeviceCache, HostLink};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::trace::Trace;
use crate::runtime::transfer::HostTransfer;
use crate::runtime::words::bytes_of;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::Result;
use hashtile_core::scheme::ProbingScheme;
use std::marker::PhantomData;
use std::sync::Arc;

/// The most children a table can route on the device (the shared-memory counters of one cube: 16 KB, twice in
/// the scatter kernel). Larger tables partition on the host.
pub const MAX_ROUTED_CHILDREN: usize = 4096;

/// The [`Router`](crate::paged::protocol::Router) of GPU tables of runtime `R`, scheme `S` and layout `L` (see the module docs). It keeps its batch buffers
/// between calls, like a table's host path.
pub struct DeviceRouter<R: HostTransfer, S: ProbingScheme, L: KeyLayout> {
    pub(super) client: ComputeClient<R>,
    pub(super) stager: Arc<R::Stager>,
    pub(super) cache: DeviceCache,
    pub(super) sizes: BatchSizes,
    /// Distinct one-word buffers for unused kernel arguments (wgpu mis-binds a buffer bound twice).
    pub(super) dummies: [Handle; 6],
    /// The children's insert options (framed upserts launch their insert kernel).
    pub(super) options: crate::table::gpu::GpuOptions,
    pub(super) _layout: PhantomData<(S, L)>,
}

/// Phase timings of the router as `tracing` events (target `hashtile`, level TRACE; each mark waits for
/// the device, so it marks only while a subscriber listens).
pub(super) fn trace() -> Trace {
    Trace::new("routing")
}

/// The counters of one cube hold at most [`MAX_ROUTED_CHILDREN`] children.
pub(super) fn check_children(route: RouteMap<'_>) -> Result<()> {
    if route.children > MAX_ROUTED_CHILDREN {
        return Err(hashtile_core::Error::InvalidConfig(format!(
            "{} children: the device routes at most {MAX_ROUTED_CHILDREN}",
            route.children
        )));
    }
    Ok(())
}

/// A routed batch's buffers before its keys are scattered ([`DeviceRouter::parts`]).
pub(super) struct Parts {
    pub(super) keys: Handle,
    pub(super) values: Handle,
    pub(super) aux: Handle,
    pub(super) positions: Handle,
    /// Input keys.
    pub(super) n: usize,
    /// Routed positions (the parts and the gaps between them).
    pub(super) total: usize,
}

/// Parts sized from each child's share of the route directory for a find of `n` keys, before its keys are
/// counted: the share's mean plus eight standard deviations plus one `CHUNK_ALIGN`, each part starting on a
/// multiple of `CHUNK_ALIGN`. Returns the starts, the ends and the routed length (the caller counts first
/// instead when that length passes 1.25 times the keys: a small batch over many children). Uniform route
/// hashes overflow such a part with negligible probability; a batch that does (keys chosen to collide) is
/// counted and scattered again.
pub(super) fn estimated_parts(route: RouteMap<'_>, n: usize) -> (Vec<usize>, Vec<usize>, usize) {
    let mut entries = vec![0usize; route.children];
    for &c in route.entries {
        entries[c as usize] += 1;
    }
    let (mut starts, mut ends, mut at) = (Vec::new(), Vec::new(), 0usize);
    for e in entries {
        let mean = n as f64 * e as f64 / route.entries.len() as f64;
        let cap = if e == 0 {
            0
        } else {
            ((mean + 8.0 * mean.sqrt()) as usize + CHUNK_ALIGN).next_multiple_of(CHUNK_ALIGN)
        };
        starts.push(at);
        ends.push(at + cap);
        at += cap;
    }
    (starts, ends, at)
}

/// Bytes of a key and of a value of layout `L` on the device.
pub(super) fn widths<L: KeyLayout>() -> (usize, usize) {
    (size_of::<L::Key>(), size_of::<L::Value>())
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> DeviceRouter<R, S, L> {
    /// A router on `client`'s device, copying through `stager` in `sizes`' chunks, for tables with insert
    /// `options`.
    pub fn new(
        client: ComputeClient<R>,
        stager: Arc<R::Stager>,
        sizes: BatchSizes,
        options: crate::table::gpu::GpuOptions,
    ) -> Self {
        let dummies = std::array::from_fn(|_| client.empty(8));
        Self {
            client,
            stager,
            cache: DeviceCache::default(),
            sizes,
            dummies,
            options,
            _layout: PhantomData,
        }
    }

    /// What the host-I/O layer needs of this router for one call.
    pub(super) fn link(&self) -> HostLink<'_, R> {
        HostLink {
            client: &self.client,
            stager: &self.stager,
            cache: &self.cache,
            sizes: self.sizes,
        }
    }

    /// The counters' width for `children` children (a power of two, at least a cube: one pass of its units
    /// clears them).
    pub(super) fn width(children: usize) -> u32 {
        children.next_power_of_two().max(CUBE) as u32
    }

    /// Zeroed counters of one part.
    pub(super) fn zeroed_counts(&self, route: RouteMap<'_>) -> Handle {
        let w = Self::width(route.children) as usize;
        let counts = self.client.empty(w * 4);
        fill_u32(&self.client, &counts, w, 0);
        counts
    }

    /// Queues the count of `n` keys (with `mask`: those marked [`MASK_NEW`]).
    pub(super) fn count(
        &self,
        keys: &Handle,
        mask: Option<&Handle>,
        n: usize,
        (entries, counts): (&Handle, &Handle),
        route: RouteMap<'_>,
    ) {
        let w = Self::width(route.children);
        let (mh, ml) = mask.map_or((self.dummies[0].clone(), 1), |m| (m.clone(), n));
        // SAFETY: positions are bounded by `n`, children by the directory's entries (all below `children`,
        // within the `w` counters), directory indices by its `2^depth` entries.
        unsafe {
            route_count_kernel::launch_unchecked::<L, ByRoute, R>(
                &self.client,
                cube_count(n.div_ceil(TILE) * CUBE),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(mh, ml),
                ArrayArg::from_raw_parts(entries.clone(), route.entries.len()),
                ArrayArg::from_raw_parts(counts.clone(), w as usize),
                route.seed,
                route.depth,
                mask.is_some(),
                w,
            )
        }
    }

    /// Reads the counts back (waiting for the counts) and lays the parts out.
    pub(super) fn layout(&self, counts: Handle, children: usize) -> Layout {
        layout_of(&self.client.read_one_unchecked(counts), children)
    }
}

/// A routed batch's parts: their starts and lengths, and the routed length.
pub(super) type Layout = (Vec<usize>, Vec<usize>, usize);

/// Lays the parts out from the counts read back (`bytes`, one `u32` per child).
pub(super) fn layout_of(bytes: &[u8], children: usize) -> Layout {
    {
        let counts: Vec<usize> = u32::from_bytes(bytes)[..children]
            .iter()
            .map(|&c| c as usize)
            .collect();
        let mut starts = Vec::with_capacity(children);
        let mut at = 0usize;
        for &c in &counts {
            starts.push(at);
            at += c.next_multiple_of(CHUNK_ALIGN);
        }
        (starts, counts, at)
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> DeviceRouter<R, S, L> {
    /// `u32` words of `values` per child, padded to the counters' width for `children` children.
    pub(super) fn per_child(&self, values: impl Iterator<Item = usize>, children: usize) -> Handle {
        let mut v: Vec<u32> = values.map(|s| s as u32).collect();
        v.resize(Self::width(children) as usize, 0);
        self.client.create_from_slice(bytes_of(&v))
    }

    /// Queues the scatter of `n` keys into parts handed out by `cursor` (each child's next routed position),
    /// with their routed positions into `positions` (upserts: the keys the dedup `mask` keeps, and a mask
    /// into `routed.1`); with `bounds` (`ends`, `overflow`), parts sized ahead (see `route_scatter_kernel`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scatter(
        &self,
        (keys, mask): (&Handle, Option<&Handle>),
        n: usize,
        (entries, cursor): (&Handle, &Handle),
        routed: (&Handle, Option<&Handle>),
        positions: &Handle,
        (total, bounds): (usize, Option<(&Handle, &Handle)>),
        route: RouteMap<'_>,
    ) {
        let w = Self::width(route.children);
        let upsert = mask.is_some();
        let arg = |h: Option<&Handle>, len: usize, d: usize| {
            let (h, len) = h.map_or((self.dummies[d].clone(), 1), |h| (h.clone(), len));
            // SAFETY: the kernel reads an argument only in its mode, within the length given here.
            unsafe { ArrayArg::from_raw_parts(h, len) }
        };
        // SAFETY: positions are bounded by `n`; routed positions by the parts' layout (each cube's range is
        // claimed from its child's cursor, and a part holds exactly its child's count) or, bounded, by `ends`
        // (a key past its part's end is not written); children and directory indices as in `count`.
        unsafe {
            route_scatter_kernel::launch_unchecked::<L, ByRoute, R>(
                &self.client,
                cube_count(n.div_ceil(TILE) * CUBE),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                arg(None, 0, 4),
                arg(mask, n, 0),
                ArrayArg::from_raw_parts(entries.clone(), route.entries.len()),
                ArrayArg::from_raw_parts(cursor.clone(), w as usize),
                ArrayArg::from_raw_parts(routed.0.clone(), total),
                arg(None, 0, 5),
                arg(routed.1, total, 1),
                ArrayArg::from_raw_parts(positions.clone(), n),
                arg(bounds.map(|b| b.0), w as usize, 2),
                arg(bounds.map(|b| b.1), 1, 3),
                route.seed,
                route.depth,
                upsert,
                bounds.is_some(),
                carry::POSITIONS,
                w,
                false,
            )
        }
    }

    /// Queues [`route_values_kernel`] for the values chunk `values` of `m` values from batch position `base`.
    pub(super) fn scatter_values(
        &self,
        batch: &RoutedBatch,
        (values, base, m): (&Handle, usize, usize),
        mask: &Handle,
    ) {
        if m == 0 {
            return;
        }
        let positions = &batch.positions;
        let at = |h: &Handle| h.clone().offset_start((base * 4) as u64);
        // SAFETY: positions are bounded by `m` (the chunk's slices); routed positions by the parts' layout (the
        // scatter wrote one for every kept key).
        unsafe {
            route_values_kernel::launch_unchecked::<L, R>(
                &self.client,
                cube_count(m),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(values.clone(), m),
                ArrayArg::from_raw_parts(at(mask), m),
                ArrayArg::from_raw_parts(at(positions), m),
                ArrayArg::from_raw_parts(batch.values.clone(), batch.len.max(1)),
                true,
            )
        }
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> DeviceRouter<R, S, L> {
    /// Partitions the `n` keys of `keys` (upserts: those the duplicate pass's `mask` keeps; finds: all of them)
    /// by child: scatters them into parts laid out from their counts (`layout`, read back), recording each
    /// key's routed position. Upserts get zeroed insert counters for every child; their values follow
    /// ([`DeviceRouter::scatter_values`]).
    pub(super) fn route_part(
        &self,
        (keys, mask): (&Handle, Option<&Handle>),
        n: usize,
        entries: &Handle,
        (starts, counts, total): Layout,
        with_bits: bool,
        route: RouteMap<'_>,
    ) -> RoutedBatch {
        let mut trace = trace();
        let upsert = mask.is_some();
        let parts = self.parts(n, total, upsert, with_bits);
        let cursor = self.per_child(starts.iter().copied(), route.children);
        self.scatter(
            (keys, mask),
            n,
            (entries, &cursor),
            (&parts.keys, upsert.then_some(&parts.aux)),
            &parts.positions,
            (total, None),
            route,
        );
        trace.mark(&self.client, "route: scattered");
        self.routed(parts, (starts, counts), upsert, with_bits, route)
    }

    /// The buffers of a routed batch of `n` keys and `total` routed positions (finds: values all ones, as
    /// absent keys read, and presence bits zeroed).
    pub(super) fn parts(&self, n: usize, total: usize, upsert: bool, with_bits: bool) -> Parts {
        let (client, cache) = (&self.client, &self.cache);
        let (kb, vb) = widths::<L>();
        let parts = Parts {
            keys: cache.take(client, "routed keys", total.max(1) * kb),
            values: cache.take(client, "routed values", total.max(1) * vb),
            aux: cache.take(client, "routed aux", total.max(1) * 4),
            positions: cache.take(client, "route positions", n.max(1) * 4),
            n,
            total,
        };
        if !upsert {
            // The parts of empty children are never looked up.
            fill_u32(client, &parts.values, total * vb / 4, u32::MAX);
            if with_bits {
                fill_u32(client, &parts.aux, total / 32, 0);
            }
        }
        parts
    }

    /// The routed batch of scattered `parts` (upserts get zeroed insert counters for every child).
    pub(super) fn routed(
        &self,
        parts: Parts,
        (starts, counts): (Vec<usize>, Vec<usize>),
        upsert: bool,
        with_bits: bool,
        route: RouteMap<'_>,
    ) -> RoutedBatch {
        let counters = upsert.then(|| {
            let words = route.children * ROUTED_COUNTERS;
            let h = self.cache.take(&self.client, "routed counters", words * 4);
            fill_u32(&self.client, &h, words, 0);
            h
        });
        RoutedBatch {
            n: parts.n,
            starts,
            counts,
            len: parts.total,
            widths: widths::<L>(),
            keys: parts.keys,
            values: parts.values,
            aux: parts.aux,
            positions: parts.positions,
            with_bits,
            counters,
        }
    }

    /// Every child's insert counters of a routed upsert batch (one read, after the queued kernels).
    pub(super) fn read_counters(&self, batch: &RoutedBatch) -> Vec<u32> {
        let words = batch.starts.len() * ROUTED_COUNTERS;
        let h = batch.counters.clone().expect("an upsert batch");
        let bytes = self.client.read_one_unchecked(h);
        u32::from_bytes(&bytes)[..words].to_vec()
    }

    /// Queues the gather of a routed find's answers into `out` and `bits` (zeroed) from position `at` of the
    /// call's batch (a multiple of 2048, so on a whole word of `bits`).
    pub(super) fn gather(
        &self,
        batch: &RoutedBatch,
        (out, bits): (&Handle, Option<&Handle>),
        at: usize,
    ) {
        let (_, vb) = widths::<L>();
        let n = batch.n;
        let total = batch.len;
        let positions = batch.positions.clone();
        let out = out.clone().offset_start((at * vb) as u64);
        let (bits, bits_len) = match bits {
            Some(b) => (b.clone().offset_start((at / 8) as u64), n.div_ceil(32)),
            None => (self.dummies[0].clone(), 1),
        };
        // SAFETY: positions are bounded by `n`; routed positions by the layout (`total`); bit words by `n`.
        unsafe {
            route_gather_kernel::launch_unchecked::<L, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(positions, n),
                ArrayArg::from_raw_parts(batch.values.clone(), total.max(1)),
                ArrayArg::from_raw_parts(batch.aux.clone(), (total / 32).max(1)),
                ArrayArg::from_raw_parts(out, n),
                ArrayArg::from_raw_parts(bits, bits_len),
                false,
                if batch.with_bits {
                    found_mode::BITS
                } else {
                    found_mode::NONE
                },
            )
        }
    }

    /// Gives a batch's buffers taken by [`DeviceRouter::parts`] back to the cache.
    pub(super) fn give_parts(&self, parts: Parts) {
        let total = parts.total.max(1);
        let (kb, vb) = widths::<L>();
        let cache = &self.cache;
        cache.give("routed keys", parts.keys, total * kb);
        cache.give("routed values", parts.values, total * vb);
        cache.give("routed aux", parts.aux, total * 4);
        cache.give("route positions", parts.positions, parts.n.max(1) * 4);
    }

    /// Gives a routed batch's buffers back to the cache.
    pub(super) fn give_back(&self, batch: RoutedBatch) {
        self.give_parts(Parts {
            keys: batch.keys,
            values: batch.values,
            aux: batch.aux,
            positions: batch.positions,
            n: batch.n,
            total: batch.len,
        });
        let cache = &self.cache;
        if let Some(h) = batch.counters {
            cache.give(
                "routed counters",
                h,
                batch.starts.len() * ROUTED_COUNTERS * 4,
            );
        }
    }
}
