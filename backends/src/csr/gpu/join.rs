//! Hash joins on the device (issue 11): every `(i, j)` with `left[i] == right[j]`, sized before they are
//! written, as `CsrJoin` does on the CPU.
//!
//! - **Probe**: a CSR table of the left keys whose values are their positions; each right key runs the lookup
//!   kernel ([`super::lookup`]) twice: count, then (after a scan of the counts) write `(left position, right
//!   index)` pairs.
//! - **Intersect** (the paper's probe): a table of each side with the same hash function and range; tiles of
//!   vertices intersect the vertex's two ranges (a nested loop over two short, contiguous ranges: only keys of one
//!   vertex can match), counting first, then writing from the scan of the per-tile counts. A tile of the
//!   tables' lookup width takes as many consecutive vertices and works through those with keys on both sides:
//!   a vertex whose two ranges each hold one key (the common case with duplicates) is a cross product, counted
//!   by a multiplication and written without reading keys; any other, one ballot per window of the right range.

use super::lookup::LookupMode;
use super::{CsrKey, GpuCsr, checked_total, words};
use crate::csr::config::{DeviceCsrParams, JoinMethod};
use crate::runtime::dispatch::{OnRuntime, on_device, shared_stager};
use crate::runtime::host_io::upload;
use crate::runtime::launch::{CUBE_SIZE, cube_count};
use crate::runtime::scan::{exclusive_scan, squared_steps_u64};
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::tile::{tile_ballot, tile_lane, tile_loop_any, tile_shuffle};
use hashtile_core::{Error, Key, Result};

/// `out[i] = i`: the positions a join's tables store as values.
#[cube(launch_unchecked)]
pub fn iota_kernel(out: &mut Array<u32>) {
    let pos = ABSOLUTE_POS;
    if pos < out.len() {
        out[pos] = pos as u32;
    }
}

/// The intersect kernel's tile phases (see [`csr_intersect_kernel`]).
const PHASE_IDLE: u32 = 0;
const PHASE_CHECK: u32 = 1;
const PHASE_NESTED: u32 = 2;
const PHASE_CROSS: u32 = 3;
/// Windows of a cross product written per step of the intersect kernel's loop.
const CROSS_UNROLL: u32 = 4;

/// The vertices of two tables with one hash range, `tile` consecutive vertices per tile of `tile` lanes: each
/// lane reads its own vertex's two ranges (one coalesced read of the offsets per tile), the tile ballots which
/// vertices have keys on both sides, and then works through those vertices in order, in three phases (a vertex
/// whose nested loop costs at most twice the check goes straight to the third):
///
/// 1. **Check**: one ballot per window of the two ranges asks whether each range holds a single key. With many
///    duplicates per key and few hash collisions, almost every vertex does.
/// 2. **Cross** (single-key ranges with equal keys): the pairs are the ranges' cross product, `left * right` of
///    them, counted with one multiplication and written `CROSS_UNROLL * tile` at a time without reading a key.
/// 3. **Nested** (anything else): for each left key, the right range in windows of the tile's width, one ballot
///    per window (the lookup kernel's range read), so that the pairs of one window are written side by side.
///
/// A vertex per tile instead would launch `vertices * tile` units, most of them on empty vertices (at 32
/// duplicates per key, 31 of 32 vertices are empty at range factor 1). Counts are per tile (`out_counts[t]` for
/// the tile of vertices `t * tile ..`), so the scan between the passes runs over `tile` times fewer words; they
/// saturate at `u32::MAX` (the caller's check then refuses the join) rather than wrap. With `write` on, a tile
/// writes its pairs to `out_left` / `out_right` from `starts[t]`, vertex after vertex, the same order in which
/// they were counted. Launch `vertices` units in whole cubes.
#[cube(launch_unchecked)]
// Compile-time branches stay apart from the runtime conditions they guard.
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
pub fn csr_intersect_kernel<K: CsrKey>(
    left_offsets: &Array<u32>,
    left_keys: &Array<K::Word>,
    left_pos: &Array<u32>,
    right_offsets: &Array<u32>,
    right_keys: &Array<K::Word>,
    right_pos: &Array<u32>,
    out_counts: &mut Array<u32>,
    starts: &Array<u32>,
    out_left: &mut Array<u32>,
    out_right: &mut Array<u32>,
    #[comptime] tile: u32,
    #[comptime] write: bool,
) {
    let tl = tile_lane(tile);
    let vertices = left_offsets.len() - 1;
    let group = ABSOLUTE_POS - tl.lane as usize;
    let mine = ABSOLUTE_POS;
    let own = mine < vertices;
    // Lanes past the last vertex read vertex 0 and take no part.
    let mut at = 0usize;
    if own {
        at = mine;
    }
    let (ls, le) = (left_offsets[at], left_offsets[at + 1]);
    let (rs, re) = (right_offsets[at], right_offsets[at + 1]);
    let busy = own && ls < le && rs < re;
    let mut todo = tile_ballot(busy, tl, tile);
    let tile_index = group / tile as usize;
    // The tile's running count (the same in every lane), and in the write pass its next output position.
    let mut c = u32::new(0);
    let mut w = 0usize;
    if comptime!(write) {
        if group < vertices {
            w = starts[tile_index] as usize;
        }
    }
    // The vertex the tile is on: its ranges `[l0, l1)` and `[r0, r1)` and first keys, the phase, and a cursor.
    let mut phase = 0u32; // PHASE_IDLE (a literal: a const would make it comptime)
    let mut l0 = 0u32;
    let mut ll = 0u32;
    let mut r0 = 0u32;
    let mut rl = 0u32;
    let mut i = 0u32;
    let mut k = 0u32;
    loop {
        // A tile without a vertex takes its next busy one (shuffles: in every lane of the plane, or none).
        let pick = phase == PHASE_IDLE && todo != 0u32;
        if tile_loop_any(pick, tile) {
            let mut b = 0u32;
            if pick {
                b = todo.trailing_zeros();
            }
            let nls = tile_shuffle(ls, b, tl, tile);
            let nle = tile_shuffle(le, b, tl, tile);
            let nrs = tile_shuffle(rs, b, tl, tile);
            let nre = tile_shuffle(re, b, tl, tile);
            if pick {
                l0 = nls;
                ll = nle - nls;
                r0 = nrs;
                rl = nre - nrs;
                k = 0u32;
                // The check costs a window per `tile` keys of both ranges; it pays when the nested loop (a window
                // per `tile` right keys, per left key) would cost more than twice that. A vertex of two unlike keys
                // or of one left key (most of them, with unique keys) goes straight to the nested loop. Ranges
                // whose summed length overflows 32 bits are never checked.
                phase = PHASE_NESTED;
                i = l0;
                if ll <= u32::MAX - rl {
                    let nested = (ll as u64) * (((rl - 1u32) / tile + 1u32) as u64);
                    let check = ((ll + rl - 1u32) / tile + 1u32) as u64;
                    if nested > 2u64 * check {
                        phase = PHASE_CHECK;
                    }
                }
                todo &= todo - 1u32;
            }
        }
        if !tile_loop_any(phase != PHASE_IDLE, tile) {
            break;
        }
        // Each phase sets this lane's predicate; one ballot serves them all, so that the plane runs it together.
        let idx = k + tl.lane;
        let mut pred = false;
        if phase == PHASE_CHECK {
            // Window `k` of the left range followed by the right range: a key unlike its range's first.
            if idx < ll {
                pred = left_keys[(l0 + idx) as usize] != left_keys[l0 as usize];
            } else if idx < ll + rl {
                pred = right_keys[(r0 + idx - ll) as usize] != right_keys[r0 as usize];
            }
        } else if phase == PHASE_NESTED {
            if idx < rl {
                pred = right_keys[(r0 + idx) as usize] == left_keys[i as usize];
            }
        }
        let ballot = tile_ballot(pred, tl, tile);
        if phase == PHASE_CHECK {
            if ballot != 0u32 {
                phase = PHASE_NESTED;
                i = l0;
                k = 0u32;
            } else {
                k += tile;
                if k >= ll + rl {
                    phase = PHASE_IDLE;
                    if left_keys[l0 as usize] == right_keys[r0 as usize] {
                        if comptime!(write) {
                            phase = PHASE_CROSS;
                            k = 0u32;
                        } else {
                            // Saturating `c + ll * rl`.
                            let mut add = 4294967295u32; // u32::MAX, as a literal: a runtime variable
                            if ll <= u32::MAX / rl {
                                add = ll * rl;
                            }
                            if c > u32::MAX - add {
                                c = u32::MAX;
                            } else {
                                c += add;
                            }
                        }
                    }
                }
            }
        } else if phase == PHASE_NESTED {
            if comptime!(write) {
                if pred {
                    let below = (1u32 << tl.lane) - 1u32;
                    let o = w + (ballot & below).count_ones() as usize;
                    out_left[o] = left_pos[i as usize];
                    out_right[o] = right_pos[(r0 + idx) as usize];
                }
            }
            let n = ballot.count_ones();
            if c > u32::MAX - n {
                c = u32::MAX;
            } else {
                c += n;
            }
            w += n as usize;
            // The next window of the right range; past its end, the next left key; past the last, done.
            k += tile;
            if k >= rl {
                k = 0u32;
                i += 1u32;
                if i >= l0 + ll {
                    phase = PHASE_IDLE;
                }
            }
        } else if phase == PHASE_CROSS {
            // Pair `idx` of the cross product, left-major as the nested phase writes them (the write pass only:
            // the count pass checked that the join's total, hence `ll * rl`, fits 32 bits).
            // `CROSS_UNROLL` windows per step: fewer plane-wide loop conditions per pair written.
            let pairs = ll * rl;
            if comptime!(write) {
                #[unroll]
                for u in 0..CROSS_UNROLL {
                    let p = idx + u * tile;
                    if p < pairs {
                        let o = w + p as usize;
                        out_left[o] = left_pos[(l0 + p / rl) as usize];
                        out_right[o] = right_pos[(r0 + p % rl) as usize];
                    }
                }
            }
            k += tile * CROSS_UNROLL;
            if k >= pairs {
                w += pairs as usize;
                phase = PHASE_IDLE;
            }
        }
    }
    if comptime!(!write) {
        if tl.lane == 0 && group < vertices {
            out_counts[tile_index] = c;
        }
    }
}

/// A planned join on the device: the tables are built and the pairs counted ([`GpuJoin::len`]); the pairs are
/// written by [`GpuJoin::write_device`] (device buffers) or [`GpuJoin::write_into`] (host slices).
pub struct GpuJoin<R: HostTransfer, K: CsrKey> {
    client: ComputeClient<R>,
    /// The left keys' table (values: left positions).
    left: GpuCsr<R, K, u32>,
    side: Side<R, K>,
    /// Exclusive scan of the per-right-key (`Probe`) or per-tile (`Intersect`) counts.
    starts: Handle,
    total: usize,
}

/// What a join probes the left table with.
enum Side<R: HostTransfer, K: CsrKey> {
    Probe { right: Handle, m: usize },
    Intersect { right: Box<GpuCsr<R, K, u32>> },
}

/// `n` positions `0..n` on the device.
fn positions<R: Runtime>(client: &ComputeClient<R>, n: usize) -> Handle {
    let h = client.empty(n.max(1) * 4);
    // SAFETY: bounded by the array length.
    unsafe {
        iota_kernel::launch_unchecked::<R>(
            client,
            cube_count(n.max(1)),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(h.clone(), n.max(1)),
        )
    }
    h
}

impl<R: HostTransfer, K: CsrKey> GpuJoin<R, K> {
    /// Plans the join of host columns: uploads them and calls [`GpuJoin::plan_device`].
    pub fn plan(
        client: &ComputeClient<R>,
        p: &DeviceCsrParams,
        left: &[K::Word],
        right: &[K::Word],
        method: JoinMethod,
    ) -> Result<Self> {
        let stager = shared_stager(client)?;
        let (lh, rh) = (
            upload(client, &stager, left)?,
            upload(client, &stager, right)?,
        );
        Self::plan_device(client, p, &lh, left.len(), &rh, right.len(), method)
    }

    /// Plans the join of `n` left and `m` right keys already on the device (buffers of at least one word):
    /// builds the tables `method` needs and counts the pairs (waits for the device: the size is read back).
    pub fn plan_device(
        client: &ComputeClient<R>,
        p: &DeviceCsrParams,
        left: &Handle,
        n: usize,
        right: &Handle,
        m: usize,
        method: JoinMethod,
    ) -> Result<Self> {
        let table = |keys: &Handle, n: usize| {
            GpuCsr::<R, K, u32>::build_device(
                client,
                &p.family,
                p.vertices,
                keys,
                &positions(client, n),
                n,
                p.build,
            )
        };
        let left_table = table(left, n)?;
        let tile = join_tile(&left_table, p.lookup_tile)?;
        let left_table = left_table.with_lookup_tile(tile)?;
        let table = |keys: &Handle, n: usize| table(keys, n)?.with_lookup_tile(tile);
        let (side, counts, len) = match method {
            JoinMethod::Probe => {
                let counts = left_table.counts_of(right, m);
                let side = Side::Probe {
                    right: right.clone(),
                    m,
                };
                (side, counts, m)
            }
            JoinMethod::Intersect => {
                let right = table(right, m)?;
                let tiles = intersect_tiles(p.vertices as usize, left_table.tile());
                let counts = client.empty(tiles * 4);
                let (no_starts, no_l, no_r) = (client.empty(4), client.empty(4), client.empty(4));
                intersect::<R, K>(
                    &left_table,
                    &right,
                    &counts,
                    &no_starts,
                    &no_l,
                    &no_r,
                    1,
                    false,
                );
                (
                    Side::Intersect {
                        right: Box::new(right),
                    },
                    counts,
                    tiles,
                )
            }
        };
        let total = checked_total(client, &counts, len, "the join")?;
        if total == u32::MAX as usize {
            // The intersect kernel's counts saturate at u32::MAX: the true total is that or more.
            return Err(Error::InvalidConfig(format!(
                "the join yields at least {total} results; device CSR offsets are 32-bit (at most 2^32 - 2 \
                 pairs per join): split the queries"
            )));
        }
        let starts = exclusive_scan(client, &counts, len);
        Ok(Self {
            client: client.clone(),
            left: left_table,
            side,
            starts,
            total,
        })
    }

    /// Number of matching pairs.
    pub fn len(&self) -> usize {
        self.total
    }

    /// `true` when nothing matches.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Lanes per vertex (`Intersect`) or per right key (`Probe`) of the join's kernels.
    pub fn tile(&self) -> u32 {
        self.left.tile()
    }

    /// Queues the write of the pairs into two new device buffers of [`GpuJoin::len`] words (at least one):
    /// left positions, right positions.
    pub fn write_device(&self) -> (Handle, Handle) {
        let (lo, ro) = (
            self.client.empty(self.total.max(1) * 4),
            self.client.empty(self.total.max(1) * 4),
        );
        if self.total == 0 {
            return (lo, ro);
        }
        match &self.side {
            Side::Probe { right, m } => {
                let no_counts = self.client.empty(4);
                self.left.lookup(
                    right,
                    *m,
                    LookupMode::Pairs,
                    &no_counts,
                    &self.starts,
                    &lo,
                    &ro,
                    self.total,
                );
            }
            Side::Intersect { right } => {
                let no_counts = self.client.empty(4);
                intersect::<R, K>(
                    &self.left,
                    right,
                    &no_counts,
                    &self.starts,
                    &lo,
                    &ro,
                    self.total,
                    true,
                );
            }
        }
        (lo, ro)
    }

    /// Writes the pairs into host slices of exactly [`GpuJoin::len`] entries each.
    pub fn write_into(&self, left_out: &mut [u32], right_out: &mut [u32]) -> Result<()> {
        for (what, got) in [("left_out", left_out.len()), ("right_out", right_out.len())] {
            if got != self.total {
                return Err(Error::LengthMismatch {
                    what,
                    got,
                    expected: self.total,
                });
            }
        }
        if self.total == 0 {
            return Ok(());
        }
        let (lo, ro) = self.write_device();
        self.left.download(&lo, left_out)?;
        self.left.download(&ro, right_out)
    }
}

/// The join's lanes per vertex or right key: `requested`, or with 0 (automatic) 32 when a left key's range holds
/// 8 keys or more on average (many pairs per key: a tile's window then carries a full run of pairs, written
/// side by side), else 4. Measured on the H100 at 2^25 keys (docs/PERFORMANCE.md): intersect at 32 duplicates
/// per key 2.12x the time of two builds with 32 lanes, 5.95x with 4; at 1 per key 1.42x with 4, 2.08x with 32.
fn join_tile<R: HostTransfer, K: CsrKey>(left: &GpuCsr<R, K, u32>, requested: u32) -> Result<u32> {
    if requested != 0 || left.n == 0 {
        return Ok(requested);
    }
    let squares = squared_steps_u64(&left.client, &left.offsets, left.vertices as usize);
    Ok(if squares >= 8 * left.n as u64 { 32 } else { 4 })
}

/// The intersect kernel's tiles (and counts) over `vertices` vertices, `tile` per tile.
fn intersect_tiles(vertices: usize, tile: u32) -> usize {
    vertices.div_ceil(tile as usize)
}

/// Queues the intersect kernel over the vertices of two tables with one hash range.
#[allow(clippy::too_many_arguments)]
fn intersect<R: HostTransfer, K: CsrKey>(
    left: &GpuCsr<R, K, u32>,
    right: &GpuCsr<R, K, u32>,
    counts: &Handle,
    starts: &Handle,
    out_left: &Handle,
    out_right: &Handle,
    out_len: usize,
    write: bool,
) {
    let vn = left.vertices as usize;
    let tile = left.tile;
    let tiles = intersect_tiles(vn, tile);
    let nl = |t: &GpuCsr<R, K, u32>| t.n.max(1);
    // SAFETY: vertex `v < vn` reads offsets `v, v + 1` of both tables (each `vn + 1` words, entries at most the
    // table's length); tile `t < tiles` writes `counts[t]` or reads `starts[t]`, and its pairs go to
    // `starts[t] + k` for `k` below the tile's count: below `out_len`.
    unsafe {
        csr_intersect_kernel::launch_unchecked::<K, R>(
            &left.client,
            cube_count(vn),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(left.offsets.clone(), vn + 1),
            ArrayArg::from_raw_parts(left.keys.clone(), nl(left)),
            ArrayArg::from_raw_parts(left.values.clone(), nl(left)),
            ArrayArg::from_raw_parts(right.offsets.clone(), vn + 1),
            ArrayArg::from_raw_parts(right.keys.clone(), nl(right)),
            ArrayArg::from_raw_parts(right.values.clone(), nl(right)),
            ArrayArg::from_raw_parts(counts.clone(), if write { 1 } else { tiles }),
            ArrayArg::from_raw_parts(starts.clone(), if write { tiles + 1 } else { 1 }),
            ArrayArg::from_raw_parts(out_left.clone(), out_len.max(1)),
            ArrayArg::from_raw_parts(out_right.clone(), out_len.max(1)),
            tile,
            write,
        )
    }
}

/// A planned device join behind a runtime-free interface: what `CsrJoin` holds for a GPU backend.
pub trait DeviceJoin: Send + Sync {
    /// [`GpuJoin::len`].
    fn len(&self) -> usize;
    /// [`GpuJoin::is_empty`].
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// [`GpuJoin::write_into`].
    fn write_into(&self, left_out: &mut [u32], right_out: &mut [u32]) -> Result<()>;
}

impl<R: HostTransfer, K: CsrKey> DeviceJoin for GpuJoin<R, K> {
    fn len(&self) -> usize {
        self.total
    }
    fn write_into(&self, left_out: &mut [u32], right_out: &mut [u32]) -> Result<()> {
        GpuJoin::write_into(self, left_out, right_out)
    }
}

/// Plans a join of the caller's key columns on `backend` (checked available and not the CPU by the caller).
pub(crate) fn device_join<K: Key>(
    backend: crate::runtime::select::Backend,
    p: DeviceCsrParams,
    left: &[K],
    right: &[K],
    method: JoinMethod,
) -> Result<std::sync::Arc<dyn DeviceJoin>> {
    struct Plan<'a, K> {
        p: DeviceCsrParams,
        left: &'a [K],
        right: &'a [K],
        method: JoinMethod,
    }
    impl<K: Key> OnRuntime for Plan<'_, K> {
        type Out = std::sync::Arc<dyn DeviceJoin>;
        fn run<R: HostTransfer>(self, client: ComputeClient<R>) -> Result<Self::Out> {
            fn plan<R: HostTransfer, CK: CsrKey, K: Key>(
                c: &ComputeClient<R>,
                w: Plan<'_, K>,
            ) -> Result<std::sync::Arc<dyn DeviceJoin>> {
                let j = GpuJoin::<R, CK>::plan(c, &w.p, words(w.left), words(w.right), w.method)?;
                Ok(std::sync::Arc::new(j))
            }
            if K::BITS == 32 {
                plan::<R, super::Key32, K>(&client, self)
            } else {
                plan::<R, super::Key64, K>(&client, self)
            }
        }
    }
    on_device(
        backend,
        p.device,
        Plan {
            p,
            left,
            right,
            method,
        },
    )
}
