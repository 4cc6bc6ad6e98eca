//! Partitioning a batch on the device into parts, written once over how a key's part is named ([`PartOf`]):
//! by the route hash (`hashtile_core::hash::route_hash`) and a directory ([`ByRoute`]: a paged table's children,
//! `paged::gpu::routing`, and a sharded table's shards, `sharded::device`), or by the table range a key's first
//! probe reads ([`ByFirstBucket`]: a static table's binned inserts, `table::gpu::binned`).
//! [`route_count_kernel()`] counts a batch's keys per part, [`route_scatter_kernel()`] scatters them into the
//! parts (with their routed positions, or with their values), [`route_values_kernel()`] writes the values to
//! routed positions, and [`route_gather_kernel()`] puts answers that come back in routed order into input order.
//! Each cube counts in shared memory and takes one range per part from the global cursors, so no global counter
//! sees more than one atomic per cube.

use crate::device::find::found_mode;
use crate::device::layout::KeyLayout;
use crate::device::shape::{TableMeta, blank_meta, load_meta};
use crate::runtime::launch::CUBE_SIZE;
use crate::runtime::scan::cube_inclusive_scan;
use cubecl::prelude::*;
use hashtile_core::hash::route_hash;
use hashtile_core::scheme::ProbingScheme;
use std::marker::PhantomData;

/// The duplicate pass's mark of a key's last occurrence in a batch (`table::gpu::upsert`), which a masked
/// route keeps.
pub const MASK_NEW: u32 = 1;

/// The part of a key under the route directory `entries` (`2^depth` entries indexed by the top `depth` bits of
/// the key's route hash under `seed`; `paged::route::Directory::child_of` and `sharded::route` on the host).
#[cube]
pub fn route_child<L: KeyLayout>(key: L::Key, entries: &Array<u32>, seed: u64, depth: u32) -> u32 {
    let h = route_hash(L::key_bits(key), seed);
    let mut e = 0u64;
    if depth > 0u32 {
        e = h >> u64::cast_from(64u32 - depth);
    }
    entries[e as usize]
}

/// How a partition names a key's part; the count and scatter kernels are written once over it. `entries`,
/// `seed` and `depth` are the partition's arguments, read as each implementation says.
#[cube]
pub trait PartOf<L: KeyLayout>: Send + Sync + 'static {
    /// What every key's part reads of `entries` alike, loaded once by each unit before its keys (the kernels
    /// write other buffers, so the compiler cannot keep loads of `entries` across a unit's keys by itself).
    fn shape(entries: &Array<u32>) -> TableMeta;
    /// The part of `key` (`shape`: [`PartOf::shape`] of the same `entries`).
    fn part(key: L::Key, entries: &Array<u32>, shape: TableMeta, seed: u64, depth: u32) -> u32;
}

/// Parts by the route hash and a directory ([`route_child()`]: `entries` is the directory of `2^depth` entries,
/// `seed` the route seed): paged tables' children and sharded tables' shards.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByRoute;

#[cube]
impl<L: KeyLayout> PartOf<L> for ByRoute {
    fn shape(_entries: &Array<u32>) -> TableMeta {
        // The directory is indexed per key: nothing is shared.
        blank_meta()
    }
    fn part(key: L::Key, entries: &Array<u32>, _shape: TableMeta, seed: u64, depth: u32) -> u32 {
        route_child::<L>(key, entries, seed, depth)
    }
}

/// Parts by the table range of a key's first probe under scheme `S` (its probe-0 bucket, `probe_bucket`): part
/// `p` holds the keys whose first bucket lies in `[p * 2^depth, (p + 1) * 2^depth)`; `entries` is the table's
/// shape buffer (`load_meta`); `seed` is unused. A static table's binned inserts.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByFirstBucket<S: ProbingScheme> {
    _scheme: PhantomData<S>,
}

#[cube]
impl<S: ProbingScheme, L: KeyLayout> PartOf<L> for ByFirstBucket<S> {
    fn shape(entries: &Array<u32>) -> TableMeta {
        load_meta(entries)
    }
    fn part(key: L::Key, _entries: &Array<u32>, shape: TableMeta, _seed: u64, depth: u32) -> u32 {
        // Probe 0 of every sequence is the first function's bucket (`probe_bucket` at 0, without expanding
        // the overflow sequence's later probes on a constant index).
        L::bucket(shape, key, 0u32) >> depth
    }
}

/// Units per cube, as a compile-time constant.
pub const CUBE: usize = CUBE_SIZE as usize;
/// Keys each unit of the count and scatter kernels routes (positions `CUBE` apart, so loads coalesce).
const PER_UNIT: usize = 8;
/// Keys per cube of the count and scatter kernels.
pub const TILE: usize = CUBE * PER_UNIT;
/// The most parts whose first positions a direct scatter keeps in a plain shared array beside its counters
/// (two arrays of 4096 words fill CUDA's 48 KB of static shared memory).
const MAX_PLAIN_PARTS: usize = 4096;

/// No child: a position past the keys, or (masked) a key that is not its key's last occurrence.
const NO_CHILD: u32 = u32::MAX;

/// Loads a unit's keys (positions `first + k * CUBE`) into `held`, with their values into `held_values` when
/// `with_values`, and names each one's part in `child`: [`NO_CHILD`] for a position past the keys or, with
/// `masked`, a key whose `mask` entry is not [`MASK_NEW`] (an upsert routes only each key's last occurrence).
/// Every load is issued before any key is hashed, so that a unit's loads are in flight together: loads inside
/// each key's branch went out one after another, each waiting for the last (H200: the count ran at a third of
/// the bandwidth its loads need).
#[cube]
#[allow(clippy::too_many_arguments)]
fn load_and_name<L: KeyLayout, P: PartOf<L>>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    mask: &Array<u32>,
    entries: &Array<u32>,
    first: usize,
    seed: u64,
    depth: u32,
    held: &mut Array<L::Key>,
    held_values: &mut Array<L::Value>,
    child: &mut Array<u32>,
    #[comptime] masked: bool,
    #[comptime] with_values: bool,
) {
    let shape = P::shape(entries);
    #[unroll]
    for k in 0..PER_UNIT {
        let pos = first + k * CUBE;
        let mut take = 0u32;
        let mut key = L::Key::new(0);
        if pos < keys.len() {
            key = keys[pos];
            take = 1u32;
            if comptime!(masked) {
                take = u32::cast_from(mask[pos] == MASK_NEW);
            }
            if comptime!(with_values) {
                held_values[k] = values[pos];
            }
        }
        held[k] = key;
        child[k] = take;
    }
    #[unroll]
    for k in 0..PER_UNIT {
        let mut c = NO_CHILD.runtime();
        if child[k] == 1u32 {
            c = P::part(held[k], entries, shape, seed, depth);
        }
        child[k] = c;
    }
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
pub fn route_count_kernel<L: KeyLayout, P: PartOf<L>>(
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
    let mut held = Array::<L::Key>::new(PER_UNIT);
    // Stand-ins for the values, which a count does not load.
    let values = Array::<L::Value>::new(1usize);
    let mut no_values = Array::<L::Value>::new(1usize);
    let mut child = Array::<u32>::new(PER_UNIT);
    load_and_name::<L, P>(
        keys,
        &values,
        mask,
        entries,
        first,
        seed,
        depth,
        &mut held,
        &mut no_values,
        &mut child,
        masked,
        false,
    );
    #[unroll]
    for k in 0..PER_UNIT {
        let c = child[k];
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

/// What [`route_scatter_kernel()`] writes beside each routed key.
pub mod carry {
    /// Its routed position, into `positions` at its input position.
    pub const POSITIONS: u32 = 0;
    /// Its value, into `routed_values` at its routed position (no positions).
    pub const VALUES: u32 = 1;
    /// Nothing (keys-only batches whose order is not needed back).
    pub const NOTHING: u32 = 2;
}

/// Writes each routed key (with `upsert`: each key whose `mask` is [`MASK_NEW`], with a [`MASK_NEW`] mask
/// entry; else every key) into its child's part, with what `carried` ([`carry`]) names: its routed position
/// into `positions` (an upsert's values follow by [`route_values_kernel()`] as they land; a find's answers go
/// back by [`route_gather_kernel()`]), or its value into `routed_values` (a batch whose values are on the device
/// already: one pass, no positions), or nothing: `cursor[c]` starts at the part's first position and hands out
/// ranges to cubes. The order within a part is the atomics' (an upsert's routed keys are distinct). With
/// `bounded` (parts sized before the counts are known, the cursors carried over several launches), a key past
/// its part's end `ends[c]` is not written and sets `overflow[0]`.
///
/// With `staged` (one counter per unit, `width == CUBE`, and not `bounded`), a cube first puts its keys (and
/// values) in shared memory in part order, then writes each part's run with consecutive units: a cube's keys
/// spread over a few dozen parts otherwise go out as stores of a word per part per plane (`table::gpu::ordered`).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn route_scatter_kernel<L: KeyLayout, P: PartOf<L>>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    mask: &Array<u32>,
    entries: &Array<u32>,
    cursor: &Array<Atomic<u32>>,
    routed_keys: &mut Array<L::Key>,
    routed_values: &mut Array<L::Value>,
    routed_mask: &mut Array<u32>,
    positions: &mut Array<u32>,
    ends: &Array<u32>,
    overflow: &Array<Atomic<u32>>,
    seed: u64,
    depth: u32,
    #[comptime] upsert: bool,
    #[comptime] bounded: bool,
    #[comptime] carried: u32,
    #[comptime] width: u32,
    #[comptime] staged: bool,
) {
    let t = UNIT_POS as usize;
    let w = comptime!(width as usize);
    // The counters, then (from the second barrier on) each part's first routed position for this cube: one
    // shared array, so that 8192 parts fit CUDA's 48 KB of static shared memory.
    let hist = SharedMemory::<Atomic<u32>>::new(w);
    zero_counters(&hist, t, w);
    let first = CUBE_POS * TILE + t;
    let mut child = Array::<u32>::new(PER_UNIT);
    let mut rank = Array::<u32>::new(PER_UNIT);
    let mut held = Array::<L::Key>::new(PER_UNIT);
    let vals = comptime!(if carried == carry::VALUES {
        PER_UNIT
    } else {
        1
    });
    let mut held_values = Array::<L::Value>::new(vals);
    load_and_name::<L, P>(
        keys,
        values,
        mask,
        entries,
        first,
        seed,
        depth,
        &mut held,
        &mut held_values,
        &mut child,
        upsert,
        comptime!(carried == carry::VALUES),
    );
    #[unroll]
    for k in 0..PER_UNIT {
        let c = child[k];
        if c != NO_CHILD {
            rank[k] = hist[c as usize].fetch_add(1u32);
        }
    }
    sync_cube();
    if comptime!(staged) {
        scatter_staged::<L>(
            &held,
            &held_values,
            &child,
            &rank,
            first,
            &hist,
            cursor,
            routed_keys,
            routed_values,
            routed_mask,
            positions,
            upsert,
            carried,
        );
    } else {
        // Each part's first position for the cube, in plain shared memory where both arrays fit CUDA's 48 KB
        // (an atomic load is an atomic add of zero on CUDA: every key's read of its part's position then
        // waits in line with the other keys of its part); else in the counters themselves.
        let plain = comptime!(w <= MAX_PLAIN_PARTS);
        let mut first_at = SharedMemory::<u32>::new(comptime!(if plain { w } else { 1 }));
        let mut i = t;
        while i < w {
            let v = hist[i].load();
            let mut at = 0u32;
            if v > 0u32 {
                at = cursor[i].fetch_add(v);
            }
            if comptime!(plain) {
                first_at[i] = at;
            } else if v > 0u32 {
                hist[i].store(at);
            }
            i += CUBE;
        }
        sync_cube();
        scatter_direct::<L>(
            &held,
            &held_values,
            &child,
            &rank,
            first,
            &hist,
            &first_at,
            routed_keys,
            routed_values,
            routed_mask,
            positions,
            ends,
            overflow,
            plain,
            upsert,
            bounded,
            carried,
        );
    }
}

/// The unstaged writes of [`route_scatter_kernel()`]: each unit writes its own keys, part `c`'s first position
/// for the cube in `first_at[c]` (`plain`) or else in `hist[c]`.
#[cube]
#[allow(clippy::too_many_arguments)]
fn scatter_direct<L: KeyLayout>(
    held: &Array<L::Key>,
    held_values: &Array<L::Value>,
    child: &Array<u32>,
    rank: &Array<u32>,
    first: usize,
    hist: &SharedMemory<Atomic<u32>>,
    first_at: &SharedMemory<u32>,
    routed_keys: &mut Array<L::Key>,
    routed_values: &mut Array<L::Value>,
    routed_mask: &mut Array<u32>,
    positions: &mut Array<u32>,
    ends: &Array<u32>,
    overflow: &Array<Atomic<u32>>,
    #[comptime] plain: bool,
    #[comptime] upsert: bool,
    #[comptime] bounded: bool,
    #[comptime] carried: u32,
) {
    #[unroll]
    for k in 0..PER_UNIT {
        let pos = first + k * CUBE;
        let c = child[k];
        if c != NO_CHILD {
            let mut to = rank[k];
            if comptime!(plain) {
                to += first_at[c as usize];
            } else {
                to += hist[c as usize].load();
            }
            let mut fits = true;
            if comptime!(bounded) {
                fits = to < ends[c as usize];
            }
            if fits {
                routed_keys[to as usize] = held[k];
                if comptime!(carried == carry::VALUES) {
                    routed_values[to as usize] = held_values[k];
                } else if comptime!(carried == carry::POSITIONS) {
                    positions[pos] = to;
                }
                if comptime!(upsert) {
                    routed_mask[to as usize] = MASK_NEW;
                }
            } else {
                overflow[0].store(1u32);
            }
        }
    }
}

/// The staged writes of [`route_scatter_kernel()`] (`width == CUBE`, unbounded): the cube's keys (values) go
/// to shared memory in part order (part `c`'s at its offset within the cube, `local[c]`, plus each key's rank),
/// then each unit writes every `CUBE`-th staged key to its part's run, so consecutive units write consecutive
/// words of a run.
#[cube]
#[allow(clippy::too_many_arguments)]
fn scatter_staged<L: KeyLayout>(
    held: &Array<L::Key>,
    held_values: &Array<L::Value>,
    child: &Array<u32>,
    rank: &Array<u32>,
    first: usize,
    hist: &SharedMemory<Atomic<u32>>,
    cursor: &Array<Atomic<u32>>,
    routed_keys: &mut Array<L::Key>,
    routed_values: &mut Array<L::Value>,
    routed_mask: &mut Array<u32>,
    positions: &mut Array<u32>,
    #[comptime] upsert: bool,
    #[comptime] carried: u32,
) {
    let t = UNIT_POS as usize;
    let vals_len = comptime!(if carried == carry::VALUES { TILE } else { 1 });
    // Each part's first routed position for the cube, and its offset within the cube (the cube-wide scan over
    // the units, one part each: inclusive, then exclusive).
    let mut base = SharedMemory::<u32>::new(CUBE);
    let mut local = SharedMemory::<u32>::new(CUBE);
    let mut staged_keys = SharedMemory::<L::Key>::new(TILE);
    let mut staged_values = SharedMemory::<L::Value>::new(vals_len);
    let mut staged_part = SharedMemory::<u32>::new(TILE);
    let count = hist[t].load();
    let mut at = 0u32;
    if count > 0u32 {
        at = cursor[t].fetch_add(count);
    }
    base[t] = at;
    local[t] = count;
    sync_cube();
    cube_inclusive_scan(&mut local, t);
    let total = local[CUBE - 1] as usize;
    sync_cube();
    // From here on each part's first staged slot (the exclusive offset), read by plain loads: a part's keys
    // read it together, where the counters' atomic loads (atomic adds of zero on CUDA) went one at a time.
    local[t] -= count;
    sync_cube();
    #[unroll]
    for k in 0..PER_UNIT {
        let c = child[k];
        if c != NO_CHILD {
            let pos = first + k * CUBE;
            let slot = (local[c as usize] + rank[k]) as usize;
            staged_keys[slot] = held[k];
            staged_part[slot] = c;
            if comptime!(carried == carry::VALUES) {
                staged_values[slot] = held_values[k];
            } else if comptime!(carried == carry::POSITIONS) {
                positions[pos] = base[c as usize] + rank[k];
            }
        }
    }
    sync_cube();
    #[unroll]
    for k in 0..PER_UNIT {
        let j = t + k * CUBE;
        if j < total {
            let c = staged_part[j] as usize;
            let to = (base[c] + (j as u32 - local[c])) as usize;
            routed_keys[to] = staged_keys[j];
            if comptime!(carried == carry::VALUES) {
                routed_values[to] = staged_values[j];
            }
            if comptime!(upsert) {
                routed_mask[to] = MASK_NEW;
            }
        }
    }
}

/// Writes the values of a routed batch, one values chunk as it lands: for each position `i` of the chunk
/// whose key was kept (with `masked`, `mask[i]` is [`MASK_NEW`]; else every key), `routed_values`
/// at its routed position `positions[i]` (the chunk's slices of the batch's mask and positions).
#[cube(launch_unchecked)]
pub fn route_values_kernel<L: KeyLayout>(
    values: &Array<L::Value>,
    mask: &Array<u32>,
    positions: &Array<u32>,
    routed_values: &mut Array<L::Value>,
    #[comptime] masked: bool,
) {
    let i = ABSOLUTE_POS;
    let mut kept = i < values.len();
    if comptime!(masked) {
        kept = kept && mask[i] == MASK_NEW;
    }
    if kept {
        let to = positions[i] as usize;
        routed_values[to] = values[i];
    }
}

/// Pads each part of a routed buffer, whose parts start on multiples of `align` words, up to the next multiple
/// with copies of its last word: `ends[p]` is where part `p`'s words end (the scatter's cursors once it has run),
/// and the words from there on become `buf[ends[p] - 1]` (a part ending on a multiple, an empty one included,
/// gets none). A sharded exchange moves whole padded parts, so that every part starts aligned on both sides
/// (NCCL's copies of unaligned parts ran at 0.43x); the copies repeat a pair the receiver then sees twice, which
/// an insert, an erase, a find or an idempotent reduction tolerates. One thread per (part, padding word).
#[cube(launch_unchecked)]
pub fn route_pad_kernel(buf: &mut Array<u32>, ends: &Array<u32>, #[comptime] align: u32) {
    let t = ABSOLUTE_POS as u32;
    let part = t / align;
    if part < ends.len() as u32 {
        let end = ends[part as usize];
        let at = end + t % align;
        if at < end.div_ceil(align) * align {
            buf[at as usize] = buf[(end - 1) as usize];
        }
    }
}

/// Puts a routed find's answers back in input order: `out[i]` = the routed value of key `i`, and its routed
/// presence at its routed position `p` (with `flags_in`, `routed_found[p]` = 1 or 0; else bit `p % 32` of
/// `routed_found[p / 32]`) reported per `found_mode` ([`found_mode`]): as bit `i % 32` of `found[i / 32]` (zeroed
/// first; each plane ORs its bits together, distinct bits: their sum, and sets them with one atomic; planes of 8
/// or 32 lanes never straddle a word), or as `found[i]` = 1 or 0.
#[cube(launch_unchecked)]
pub fn route_gather_kernel<L: KeyLayout>(
    positions: &Array<u32>,
    routed_out: &Array<L::Value>,
    routed_found: &Array<u32>,
    out: &mut Array<L::Value>,
    found: &Array<Atomic<u32>>,
    #[comptime] flags_in: bool,
    #[comptime] found_mode: u32,
) {
    let i = ABSOLUTE_POS;
    let mut hit = 0u32;
    if i < positions.len() {
        let p = positions[i];
        out[i] = routed_out[p as usize];
        if comptime!(found_mode != found_mode::NONE) {
            let f = if comptime!(flags_in) {
                routed_found[p as usize]
            } else {
                (routed_found[(p / 32u32) as usize] >> (p % 32u32)) & 1u32
            };
            if comptime!(found_mode == found_mode::FLAGS) {
                found[i].store(f);
            } else {
                hit = f << ((i % 32) as u32);
            }
        }
    }
    if comptime!(found_mode == found_mode::BITS) {
        let word = plane_sum(hit);
        if UNIT_POS_PLANE == 0u32 && word != 0u32 {
            found[i / 32].fetch_or(word);
        }
    }
}
