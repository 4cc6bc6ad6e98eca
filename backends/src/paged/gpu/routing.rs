//! Routing a host batch to a paged table's children on the device (hash-routed [`crate::paged`] tables): the
//! batch crosses the bus once, is partitioned by child on the device, and each child's kernels run on its part
//! (a sub-range of the routed buffers); finds' answers are put back in input order on the device and copied
//! out once. The host never touches the keys (partitioning, gathering and scattering them on the host cost
//! 2-4x a plain table's whole call on the H100, `docs/PERFORMANCE.md`).
//!
//! An upsert batch's keys are copied in while the duplicate pass's claims run on each landed chunk (the host
//! path's [`Dedup`], over the whole batch: a key's occurrences may route to one child but sit in different
//! copy chunks), so only each key's last occurrence is routed: the parts hold distinct keys and the partition
//! need not be stable. The keys are routed while the values are still being copied:
//!
//! 1. when the first values chunk lands (every key is claimed), the mark pass and [`route_count_kernel`] are
//!    queued: each cube counts its tile's kept keys per child in shared memory and adds its counts to the
//!    global ones (one atomic per cube and child, not per key: a few hot counters would serialise);
//! 2. when the next one lands, the counts come back (one small read, with the claims' sentinel guard; the
//!    kernels are done by then, so the copy hardly waits) and each child's part starts at a multiple of 2048
//!    keys (`CHUNK_ALIGN`: every part is then a valid buffer binding, Vulkan's offset alignment);
//! 3. [`route_scatter_kernel`]: each cube ranks its tile's keys per child in shared memory, claims one range
//!    per child from the global cursors, and writes its keys there and their routed positions;
//! 4. [`route_values_kernel`] writes each values chunk to those positions as it lands.
//!
//! Only the children's own kernels run after the copy (H100, 16 resident children: 0.89x of a plain table's
//! upsert with all of this after the copy, 0.96x with it inside, `docs/PERFORMANCE.md`).
//!
//! With every child resident in slot frames (`crate::paged::gpu::frames`) the caller offers a [`FramedUpsert`]: when the
//! counts of step 2 fit every child's room, nothing is scattered; each values chunk (every one landed so far,
//! then each as it lands) is classified and inserted over the frames in one launch each, every key in its
//! child's frame, and the new keys per child, each child's failures and the failed pairs come back in one read
//! after the copy ([`Upserted::Framed`]). At 64 children that saves two launches per child per batch
//! (H100, 64 children of 16 MiB: 0.81-0.86x of a plain table's upsert partitioned, 0.95-1.08x framed).
//!
//! A find batch is scattered chunk by chunk as it lands (remembering each key's routed position), into parts
//! sized from each child's share of the directory before any count ([`estimated_parts`]; a batch that
//! overflows one is counted and scattered again), looked up child by child, and gathered back by
//! [`route_gather_kernel`]. (Counting first and scattering after the copy ran at 0.77-0.93x of a plain table,
//! scattering as the keys land at 0.94-1.01x: H100, 16 resident children.)

use crate::device::layout::KeyLayout;
use crate::paged::gpu::kernels::route_child;
use crate::paged::protocol::{
    FRAME_DESC_WORDS, FramedCounts, FramedUpsert, ROUTED_COUNTERS, RouteMap, RoutedBatch, Router,
    SlotFrames, Upserted,
};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::trace::Trace;
use crate::runtime::transfer::HostTransfer;
use crate::runtime::words::{bytes_of, bytes_of_mut, with_words_mut, words_of};
use crate::table::gpu::host_path::{BatchSizes, CHUNK_ALIGN, Dedup, DeviceCache};
use crate::table::gpu::kernels::INSERT_COUNTERS;
use crate::table::gpu::upsert::MASK_NEW;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::{Element, Key, Result, Value};
use std::marker::PhantomData;
use std::sync::Arc;

/// Units per cube, as a compile-time constant.
const CUBE: usize = CUBE_SIZE as usize;
/// Keys each unit of the count and scatter kernels routes (positions `CUBE` apart, so loads coalesce).
const PER_UNIT: usize = 8;
/// Keys per cube of the count and scatter kernels.
const TILE: usize = CUBE * PER_UNIT;
/// The most children a table can route on the device (the shared-memory counters of one cube: 16 KB, twice in
/// the scatter kernel). Larger tables partition on the host.
pub const MAX_ROUTED_CHILDREN: usize = 4096;

/// No child: a position past the keys, or (masked) a key that is not its key's last occurrence.
const NO_CHILD: u32 = u32::MAX;

/// The child of the key at `pos`, or [`NO_CHILD`] when `pos` is past the keys or, with `masked`, the key's
/// `mask` entry is not [`MASK_NEW`] (an upsert routes only each key's last occurrence).
#[cube]
fn routed_child<L: KeyLayout>(
    keys: &Array<L::Key>,
    mask: &Array<u32>,
    entries: &Array<u32>,
    pos: usize,
    seed: u64,
    depth: u32,
    #[comptime] masked: bool,
) -> u32 {
    let mut c = NO_CHILD.runtime();
    if pos < keys.len() {
        let mut take = true;
        if comptime!(masked) {
            take = mask[pos] == MASK_NEW;
        }
        if take {
            c = route_child::<L>(keys[pos], entries, seed, depth);
        }
    }
    c
}

/// Zeroes a cube's `w` shared counters (unit `t` of the cube clears every `CUBE`-th from `t`), then waits for
/// the whole cube.
#[cube]
fn zero_counters(hist: &SharedMemory<Atomic<u32>>, t: usize, w: usize) {
    let mut i = t;
    while i < w {
        hist[i].store(0u32);
        i += CUBE;
    }
    sync_cube();
}

/// Counts keys per child into `counts` (`width` counters, zeroed before the first launch; launches over
/// several chunks add up). With `masked`, only keys whose `mask` is [`MASK_NEW`] count (an upsert's last
/// occurrences).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn route_count_kernel<L: KeyLayout>(
    keys: &Array<L::Key>,
    mask: &Array<u32>,
    entries: &Array<u32>,
    counts: &Array<Atomic<u32>>,
    seed: u64,
    depth: u32,
    #[comptime] masked: bool,
    #[comptime] width: u32,
) {
    let t = UNIT_POS as usize;
    let w = comptime!(width as usize);
    let hist = SharedMemory::<Atomic<u32>>::new(w);
    zero_counters(&hist, t, w);
    let first = CUBE_POS * TILE + t;
    #[unroll]
    for k in 0..PER_UNIT {
        let c = routed_child::<L>(keys, mask, entries, first + k * CUBE, seed, depth, masked);
        if c != NO_CHILD {
            hist[c as usize].fetch_add(1u32);
        }
    }
    sync_cube();
    let mut i = t;
    while i < w {
        let v = hist[i].load();
        if v > 0u32 {
            counts[i].fetch_add(v);
        }
        i += CUBE;
    }
}

/// Writes each routed key (with `upsert`: each key whose `mask` is [`MASK_NEW`], with a [`MASK_NEW`] mask
/// entry; else every key) into its child's part, and its routed position into `positions` (an upsert's values
/// follow by [`route_values_kernel`] as they land; a find's answers go back by [`route_gather_kernel`]):
/// `cursor[c]` starts at the part's first position and hands out ranges to cubes. The order within a part is
/// the atomics' (an upsert's routed keys are distinct). With `bounded` (parts sized before the counts are
/// known, the cursors carried over several launches), a key past its part's end `ends[c]` is not written and
/// sets `overflow[0]`.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn route_scatter_kernel<L: KeyLayout>(
    keys: &Array<L::Key>,
    mask: &Array<u32>,
    entries: &Array<u32>,
    cursor: &Array<Atomic<u32>>,
    routed_keys: &mut Array<L::Key>,
    routed_mask: &mut Array<u32>,
    positions: &mut Array<u32>,
    ends: &Array<u32>,
    overflow: &Array<Atomic<u32>>,
    seed: u64,
    depth: u32,
    #[comptime] upsert: bool,
    #[comptime] bounded: bool,
    #[comptime] width: u32,
) {
    let t = UNIT_POS as usize;
    let w = comptime!(width as usize);
    let hist = SharedMemory::<Atomic<u32>>::new(w);
    let mut base = SharedMemory::<u32>::new(w);
    zero_counters(&hist, t, w);
    let first = CUBE_POS * TILE + t;
    let mut child = Array::<u32>::new(PER_UNIT);
    let mut rank = Array::<u32>::new(PER_UNIT);
    #[unroll]
    for k in 0..PER_UNIT {
        let c = routed_child::<L>(keys, mask, entries, first + k * CUBE, seed, depth, upsert);
        child[k] = c;
        if c != NO_CHILD {
            rank[k] = hist[c as usize].fetch_add(1u32);
        }
    }
    sync_cube();
    let mut i = t;
    while i < w {
        let v = hist[i].load();
        if v > 0u32 {
            base[i] = cursor[i].fetch_add(v);
        }
        i += CUBE;
    }
    sync_cube();
    #[unroll]
    for k in 0..PER_UNIT {
        let pos = first + k * CUBE;
        let c = child[k];
        if c != NO_CHILD {
            let to = base[c as usize] + rank[k];
            let mut fits = true;
            if comptime!(bounded) {
                fits = to < ends[c as usize];
            }
            if fits {
                routed_keys[to as usize] = keys[pos];
                positions[pos] = to;
                if comptime!(upsert) {
                    routed_mask[to as usize] = MASK_NEW;
                }
            } else {
                overflow[0].store(1u32);
            }
        }
    }
}

/// Writes the values of a routed upsert, one values chunk as it lands: for each position `i` of the chunk
/// whose key was kept (`mask[i]` is [`MASK_NEW`]), `routed_values`
/// at its routed position `positions[i]` (the chunk's slices of the batch's mask and positions).
#[cube(launch_unchecked)]
pub fn route_values_kernel<L: KeyLayout>(
    values: &Array<L::Value>,
    mask: &Array<u32>,
    positions: &Array<u32>,
    routed_values: &mut Array<L::Value>,
) {
    let i = ABSOLUTE_POS;
    if i < values.len() && mask[i] == MASK_NEW {
        let to = positions[i] as usize;
        routed_values[to] = values[i];
    }
}

/// Puts a routed find's answers back in input order: `out[i]` = the routed value of key `i`, and with
/// `with_bits`, bit `i % 32` of `bits[i / 32]` (zeroed first) set where its routed presence bit is. Each plane ORs its bits together
/// (distinct bits: their sum) and sets them with one atomic (planes of 8 or 32 lanes never straddle a word).
#[cube(launch_unchecked)]
pub fn route_gather_kernel<L: KeyLayout>(
    positions: &Array<u32>,
    routed_out: &Array<L::Value>,
    routed_bits: &Array<u32>,
    out: &mut Array<L::Value>,
    bits: &Array<Atomic<u32>>,
    #[comptime] with_bits: bool,
) {
    let i = ABSOLUTE_POS;
    let mut hit = 0u32;
    if i < positions.len() {
        let p = positions[i];
        out[i] = routed_out[p as usize];
        if comptime!(with_bits) {
            let f = (routed_bits[(p / 32u32) as usize] >> (p % 32u32)) & 1u32;
            hit = f << ((i % 32) as u32);
        }
    }
    if comptime!(with_bits) {
        let word = plane_sum(hit);
        if UNIT_POS_PLANE == 0u32 && word != 0u32 {
            bits[i / 32].fetch_or(word);
        }
    }
}

/// The [`Router`] of GPU tables of runtime `R`, scheme `S` and layout `L` (see the module docs). It keeps its batch buffers
/// between calls, like a table's host path.
pub struct DeviceRouter<R: HostTransfer, S: ProbingScheme, L: KeyLayout> {
    client: ComputeClient<R>,
    stager: Arc<R::Stager>,
    cache: DeviceCache,
    sizes: BatchSizes,
    /// Distinct one-word buffers for unused kernel arguments (wgpu mis-binds a buffer bound twice).
    dummies: [Handle; 4],
    /// The children's insert options (framed upserts launch their insert kernel).
    options: crate::table::gpu::GpuOptions,
    _layout: PhantomData<(S, L)>,
}

/// Phase timings of the router as `tracing` events (target `hashtile::routing`, level TRACE; each mark waits for
/// the device, so it marks only while a subscriber listens).
fn trace() -> Trace {
    Trace::for_target(
        tracing::enabled!(target: "hashtile::routing", tracing::Level::TRACE),
        "routing",
    )
}

/// The counters of one cube hold at most [`MAX_ROUTED_CHILDREN`] children.
fn check_children(route: RouteMap<'_>) -> Result<()> {
    if route.children > MAX_ROUTED_CHILDREN {
        return Err(hashtile_core::Error::InvalidConfig(format!(
            "{} children: the device routes at most {MAX_ROUTED_CHILDREN}",
            route.children
        )));
    }
    Ok(())
}

/// A routed batch's buffers before its keys are scattered ([`DeviceRouter::parts`]).
struct Parts {
    keys: Handle,
    values: Handle,
    aux: Handle,
    positions: Handle,
    /// Input keys.
    n: usize,
    /// Routed positions (the parts and the gaps between them).
    total: usize,
}

/// Parts sized from each child's share of the route directory for a find of `n` keys, before its keys are
/// counted: the share's mean plus eight standard deviations plus one `CHUNK_ALIGN`, each part starting on a
/// multiple of `CHUNK_ALIGN`. Returns the starts, the ends and the routed length (the caller counts first
/// instead when that length passes 1.25 times the keys: a small batch over many children). Uniform route
/// hashes overflow such a part with negligible probability; a batch that does (keys chosen to collide) is
/// counted and scattered again.
fn estimated_parts(route: RouteMap<'_>, n: usize) -> (Vec<usize>, Vec<usize>, usize) {
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
fn widths<L: KeyLayout>() -> (usize, usize) {
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

    /// The counters' width for `children` children (a power of two, at least a cube: one pass of its units
    /// clears them).
    fn width(children: usize) -> u32 {
        children.next_power_of_two().max(CUBE) as u32
    }

    /// Zeroed counters of one part.
    fn zeroed_counts(&self, route: RouteMap<'_>) -> Handle {
        let w = Self::width(route.children) as usize;
        let counts = self.client.empty(w * 4);
        fill_u32(&self.client, &counts, w, 0);
        counts
    }

    /// Queues the count of `n` keys (with `mask`: those marked [`MASK_NEW`]).
    fn count(
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
            route_count_kernel::launch_unchecked::<L, R>(
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
    fn layout(&self, counts: Handle, children: usize) -> Layout {
        layout_of(&self.client.read_one_unchecked(counts), children)
    }
}

/// A routed batch's parts: their starts and lengths, and the routed length.
type Layout = (Vec<usize>, Vec<usize>, usize);

/// Lays the parts out from the counts read back (`bytes`, one `u32` per child).
fn layout_of(bytes: &[u8], children: usize) -> Layout {
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
    fn per_child(&self, values: impl Iterator<Item = usize>, children: usize) -> Handle {
        let mut v: Vec<u32> = values.map(|s| s as u32).collect();
        v.resize(Self::width(children) as usize, 0);
        self.client.create_from_slice(bytes_of(&v))
    }

    /// Queues the scatter of `n` keys into parts handed out by `cursor` (each child's next routed position),
    /// with their routed positions into `positions` (upserts: the keys the dedup `mask` keeps, and a mask
    /// into `routed.1`); with `bounds` (`ends`, `overflow`), parts sized ahead (see `route_scatter_kernel`).
    #[allow(clippy::too_many_arguments)]
    fn scatter(
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
            route_scatter_kernel::launch_unchecked::<L, R>(
                &self.client,
                cube_count(n.div_ceil(TILE) * CUBE),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                arg(mask, n, 0),
                ArrayArg::from_raw_parts(entries.clone(), route.entries.len()),
                ArrayArg::from_raw_parts(cursor.clone(), w as usize),
                ArrayArg::from_raw_parts(routed.0.clone(), total),
                arg(routed.1, total, 1),
                ArrayArg::from_raw_parts(positions.clone(), n),
                arg(bounds.map(|b| b.0), w as usize, 2),
                arg(bounds.map(|b| b.1), 1, 3),
                route.seed,
                route.depth,
                upsert,
                bounds.is_some(),
                w,
            )
        }
    }

    /// Queues [`route_values_kernel`] for the values chunk `values` of `m` values from batch position `base`.
    fn scatter_values(
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
            )
        }
    }
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> DeviceRouter<R, S, L> {
    /// Partitions the `n` keys of `keys` (upserts: those the duplicate pass's `mask` keeps; finds: all of them)
    /// by child: scatters them into parts laid out from their counts (`layout`, read back), recording each
    /// key's routed position. Upserts get zeroed insert counters for every child; their values follow
    /// ([`DeviceRouter::scatter_values`]).
    fn route_part(
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
    fn parts(&self, n: usize, total: usize, upsert: bool, with_bits: bool) -> Parts {
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
    fn routed(
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
    fn read_counters(&self, batch: &RoutedBatch) -> Vec<u32> {
        let words = batch.starts.len() * ROUTED_COUNTERS;
        let h = batch.counters.clone().expect("an upsert batch");
        let bytes = self.client.read_one_unchecked(h);
        u32::from_bytes(&bytes)[..words].to_vec()
    }

    /// Queues the gather of a routed find's answers into `out` and `bits` (zeroed) from position `at` of the
    /// call's batch (a multiple of 2048, so on a whole word of `bits`).
    fn gather(&self, batch: &RoutedBatch, (out, bits): (&Handle, Option<&Handle>), at: usize) {
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
                batch.with_bits,
            )
        }
    }

    /// Gives a batch's buffers taken by [`DeviceRouter::parts`] back to the cache.
    fn give_parts(&self, parts: Parts) {
        let total = parts.total.max(1);
        let (kb, vb) = widths::<L>();
        let cache = &self.cache;
        cache.give("routed keys", parts.keys, total * kb);
        cache.give("routed values", parts.values, total * vb);
        cache.give("routed aux", parts.aux, total * 4);
        cache.give("route positions", parts.positions, parts.n.max(1) * 4);
    }

    /// Gives a routed batch's buffers back to the cache.
    fn give_back(&self, batch: RoutedBatch) {
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

/// How an upsert batch goes in once its kept keys are counted.
enum Mode {
    /// Partitioned by child (each child's part queued by the caller).
    Parts(RoutedBatch),
    /// In the frames, chunk by chunk.
    Framed(FramedRun),
}

/// The device state of a framed upsert batch.
struct FramedRun {
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
    fn framed_run(&self, f: FramedUpsert<'_>, kept: Vec<usize>, n: usize) -> FramedRun {
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
    fn upsert_chunk(
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
    fn settle_framed<K: Key, V: Value>(
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
        let (all_failed, added, _) =
            crate::table::gpu::kernels::decode_insert_counters(c, ops as u64);
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
    fn find_chunk(
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

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout, K: Key, V: Value> Router<K, V>
    for DeviceRouter<R, S, L>
{
    fn batch_keys(&self) -> usize {
        self.sizes.insert
    }

    fn checks_sentinel(&self) -> bool {
        size_of::<K>() == size_of::<L::Key>()
    }

    fn upsert(
        &self,
        keys: &[K],
        values: &[V],
        route: RouteMap<'_>,
        framed: Option<FramedUpsert<'_>>,
        on_part: &mut dyn FnMut(&RoutedBatch) -> Result<()>,
    ) -> Result<Upserted<K, V>> {
        check_children(route)?;
        let (client, cache) = (&self.client, &self.cache);
        let mut trace = trace();
        let (kb, vb) = widths::<L>();
        let n = keys.len();
        let k = words_of::<K, L::Key>(keys);
        let v = words_of::<V, L::Value>(values);
        let entries = self.client.create_from_slice(bytes_of(route.entries));
        let dsts = [
            cache.take(client, "route keys in", n * kb),
            cache.take(client, "route values in", n * vb),
        ];
        // The duplicate pass runs over the whole batch (a key's occurrences may sit in different copy chunks),
        // its claims on each key chunk as it lands; the keys are routed while the values are still being copied
        // (steps 1-4 of the module docs).
        let dedup = Dedup::new(client, cache, n, kb == 8);
        // Queues the mark pass and the count of the kept keys per child: (the mask, the counts).
        let plan = |kh: &Handle| {
            let mask = dedup.mark(client, cache);
            let counts = self.zeroed_counts(route);
            self.count(kh, Some(&mask), n, (&entries, &counts), route);
            (mask, counts)
        };
        // Reads the counts and upserts in the frames (when every child's kept keys fit its room) or scatters
        // the keys; or finds the sentinel (its batch position).
        let lay_out = |kh: &Handle, (mask, counts): (&Handle, Handle)| {
            let read = client.read(vec![counts, dedup.guard()]);
            if let Some(index) =
                Dedup::sentinel_of(&read[1]).filter(|_| Router::<K, V>::checks_sentinel(self))
            {
                return Err(index);
            }
            let layout = layout_of(&read[0], route.children);
            if let Some(f) =
                framed.filter(|f| (0..route.children).all(|c| layout.1[c] <= f.room[c]))
            {
                return Ok(Mode::Framed(self.framed_run(f, layout.1, n)));
            }
            Ok(Mode::Parts(self.route_part(
                (kh, Some(mask)),
                n,
                &entries,
                layout,
                false,
                route,
            )))
        };
        // Scatters the values chunks that have landed (`(buffer, first position, values)`), or upserts their
        // pairs in the frames.
        let flush = |mode: &Mode,
                     kh: &Handle,
                     mask: &Handle,
                     waiting: &mut Vec<(Handle, usize, usize)>| {
            for (vh, base, m) in waiting.drain(..) {
                match mode {
                    Mode::Parts(b) => {
                        let chunk = vh.offset_start((base * vb) as u64);
                        self.scatter_values(b, (&chunk, base, m), mask);
                    }
                    Mode::Framed(run) => {
                        let f = framed.expect("framed");
                        self.upsert_chunk((kh, &vh, mask), (base, m), f, run, (&entries, route));
                    }
                }
            }
        };
        let mut keys_in: Option<Handle> = None;
        let mut planned: Option<(Handle, Handle)> = None;
        let mut routed: Option<std::result::Result<Mode, usize>> = None;
        let mut waiting: Vec<(Handle, usize, usize)> = Vec::new();
        let mut uploaded = R::upload_chunked(
            client,
            &self.stager,
            &[bytes_of(&k), bytes_of(&v)],
            &dsts,
            self.sizes.chunk * kb,
            &mut |src, off, len, h| {
                if src == 0 {
                    if off == 0 {
                        keys_in = Some(h.clone());
                        dedup.clear(client, dedup.slots);
                    }
                    dedup.claim(client, h, off / kb, len / kb);
                    return;
                }
                waiting.push((h.clone(), off / vb, len / vb));
                let kh = keys_in.as_ref().expect("the keys land first");
                // The first values chunk: every key has landed and been claimed.
                let Some((mask, counts)) = &planned else {
                    planned = Some(plan(kh));
                    return;
                };
                let r = routed.get_or_insert_with(|| lay_out(kh, (mask, counts.clone())));
                if let Ok(mode) = r {
                    flush(mode, kh, mask, &mut waiting);
                }
            },
        )?;
        let (kh, vh) = (uploaded.remove(0), uploaded.remove(0));
        // A batch of one values chunk is planned and routed here, after its copy.
        let (mask, counts) = planned.unwrap_or_else(|| plan(&kh));
        let routed = routed.unwrap_or_else(|| lay_out(&kh, (&mask, counts)));
        dedup.release(cache);
        let give_inputs = |kh, vh, mask| {
            cache.give("route keys in", kh, n * kb);
            cache.give("route values in", vh, n * vb);
            cache.give("dedup mask", mask, n * 4);
        };
        let mode = match routed {
            Ok(mode) => mode,
            Err(index) => {
                // The claims met the sentinel: nothing is routed or inserted.
                give_inputs(kh, vh, mask);
                return Err(hashtile_core::Error::SentinelKey { index });
            }
        };
        flush(&mode, &kh, &mask, &mut waiting);
        let batch = match mode {
            Mode::Framed(run) => {
                trace.mark(client, "framed upsert: copied, classified, inserted");
                let counts = self.settle_framed(run, (&kh, &mask, n), (&entries, route));
                give_inputs(kh, vh, mask);
                return counts.map(Upserted::Framed);
            }
            Mode::Parts(b) => b,
        };
        trace.mark(client, "route upsert: copied, routed, values scattered");
        let done = on_part(&batch);
        // One read settles every child the batch queued.
        let counters = done
            .as_ref()
            .map_or_else(|_| Vec::new(), |_| self.read_counters(&batch));
        self.give_back(batch);
        give_inputs(kh, vh, mask);
        done.map(|_| Upserted::Routed(counters))
    }

    fn counters(&self, batch: &RoutedBatch) -> Result<Vec<u32>> {
        Ok(self.read_counters(batch))
    }

    fn find(
        &self,
        keys: &[K],
        route: RouteMap<'_>,
        on_part: &mut dyn FnMut(&RoutedBatch) -> Result<()>,
        out: &mut [V],
        bits: Option<&mut [u32]>,
    ) -> Result<()> {
        check_children(route)?;
        let (client, cache) = (&self.client, &self.cache);
        let mut trace = trace();
        let (kb, vb) = widths::<L>();
        let n = keys.len();
        let words = n.div_ceil(32);
        let k = words_of::<K, L::Key>(keys);
        let entries = self.client.create_from_slice(bytes_of(route.entries));
        // Each chunk is scattered as it lands, into parts sized from each child's share of the directory
        // (their cursors carry over from chunk to chunk), so that only the children's finds and the gather
        // run after the copy; the cursors, read back once, give the parts' lengths.
        let with_bits = bits.is_some();
        let (starts, ends, total) = estimated_parts(route, n);
        // Each part sized ahead has slack (at least `CHUNK_ALIGN` keys): a batch that is small for its
        // children counts its keys first instead.
        let ahead = (total <= n + n / 4).then(|| {
            let parts = self.parts(n, total, false, with_bits);
            let cursor = self.per_child(starts.iter().copied(), route.children);
            let ends = self.per_child(ends.iter().copied(), route.children);
            let overflow = self.client.create_from_slice(bytes_of(&[0u32]));
            (parts, cursor, ends, overflow)
        });
        let counts = ahead.is_none().then(|| self.zeroed_counts(route));
        let mut uploaded = R::upload_chunked(
            client,
            &self.stager,
            &[bytes_of(&k)],
            &[cache.take(client, "route keys in", n * kb)],
            self.sizes.chunk * kb,
            &mut |_, off, len, h| {
                let chunk = h.clone().offset_start(off as u64);
                match (&ahead, &counts) {
                    (Some((parts, cursor, ends, overflow)), _) => {
                        let at = parts.positions.clone().offset_start((off / kb * 4) as u64);
                        self.scatter(
                            (&chunk, None),
                            len / kb,
                            (&entries, cursor),
                            (&parts.keys, None),
                            &at,
                            (total, Some((ends, overflow))),
                            route,
                        );
                    }
                    (None, Some(counts)) => {
                        self.count(&chunk, None, len / kb, (&entries, counts), route)
                    }
                    (None, None) => unreachable!("either parts sized ahead or counts"),
                }
            },
        )?;
        let kh = uploaded.remove(0);
        trace.mark(client, "route find: keys copied and scattered or counted");
        let scattered = ahead.and_then(|(parts, cursor, _, overflow)| {
            let read = client.read(vec![cursor, overflow]);
            if u32::from_bytes(&read[1])[0] == 0 {
                let ends = u32::from_bytes(&read[0]);
                let counts = (0..route.children)
                    .map(|c| ends[c] as usize - starts[c])
                    .collect();
                Some(self.routed(parts, (starts, counts), false, with_bits, route))
            } else {
                // A part overflowed (keys that collide in the route hash): counted and scattered again.
                self.give_parts(parts);
                None
            }
        });
        let batch = match scattered {
            Some(b) => b,
            None => {
                let counts = counts.unwrap_or_else(|| {
                    let counts = self.zeroed_counts(route);
                    self.count(&kh, None, n, (&entries, &counts), route);
                    counts
                });
                let layout = self.layout(counts, route.children);
                self.route_part((&kh, None), n, &entries, layout, with_bits, route)
            }
        };
        trace.mark(client, "route: parts read");
        cache.give("route keys in", kh, n * kb);
        let looked_up = on_part(&batch);
        trace.mark(client, "route find: copied, routed, children's finds");
        let oh = cache.take(client, "route out", n.max(1) * vb);
        let bh = bits
            .is_some()
            .then(|| cache.take(client, "route bits", words.max(1) * 4));
        if looked_up.is_ok() {
            if let Some(bh) = &bh {
                fill_u32(client, bh, words, 0);
            }
            self.gather(&batch, (&oh, bh.as_ref()), 0);
        }
        self.give_back(batch);
        looked_up?;
        trace.mark(client, "route find: gathered");
        with_words_mut::<V, L::Value, _>(out, |o| {
            R::download(client, &self.stager, &oh, bytes_of_mut(o))
        })?;
        if let (Some(bits), Some(bh)) = (bits, bh) {
            R::download(client, &self.stager, &bh, bytes_of_mut(&mut bits[..words]))?;
            cache.give("route bits", bh, words * 4);
        }
        trace.mark(client, "route find: answers copied out");
        cache.give("route out", oh, n * vb);
        Ok(())
    }

    fn find_framed(
        &self,
        keys: &[K],
        route: RouteMap<'_>,
        frames: &SlotFrames,
        descs: &[u32],
        out: &mut [V],
        bits: Option<&mut [u32]>,
    ) -> Result<()> {
        let client = &self.client;
        let mut trace = trace();
        let (kb, vb) = widths::<L>();
        let k = words_of::<K, L::Key>(keys);
        let entries = client.create_from_slice(bytes_of(route.entries));
        let descs = client.create_from_slice(u32::as_bytes(descs));
        // The plain table's find: each chunk looked up as it lands, straight into the answers.
        with_words_mut::<V, L::Value, _>(out, |o| {
            crate::table::gpu::host_path::find::<R>(
                client,
                &self.stager,
                &self.cache,
                bytes_of(&k),
                kb,
                bytes_of_mut(o),
                vb,
                bits,
                self.sizes,
                |kh, oh, bh, n| {
                    self.find_chunk((kh, n), frames, (&descs, &entries), (oh, bh), route)
                },
            )
        })?;
        trace.mark(client, "framed find: copied, looked up, answers copied out");
        Ok(())
    }

    fn download(&self, batch: &RoutedBatch, c: usize) -> Result<(Vec<K>, Vec<V>)> {
        let n = batch.counts[c];
        if n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        // Only the part's bytes: the handle is bounded at both ends.
        let read = |h: Handle, out: &mut [u8]| {
            let end = h.size_in_used() - out.len() as u64;
            let all = self.client.read_one_unchecked(h.offset_end(end));
            out.copy_from_slice(&all[..out.len()]);
        };
        let mut k = vec![L::Key::default(); n];
        let mut v = vec![L::Value::default(); n];
        read(batch.keys_of(c), bytes_of_mut(&mut k));
        read(batch.values_of(c), bytes_of_mut(&mut v));
        let k: Vec<K> = k.iter().map(|w| K::narrow(w.widen())).collect();
        let v: Vec<V> = v.iter().map(|w| V::narrow(w.widen())).collect();
        Ok((k, v))
    }
}
