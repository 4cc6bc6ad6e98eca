//! The chained tables' kernels: the device function every chained operation runs ([`chained_tile_op`], the
//! tile driver `crate::device::driver` on `Chain` over slab lists), the batch, flush and census kernels, and
//! the counter layout of batch launches. The operation and status codes are the driver's.

use crate::device::driver::{LaneOp, reads, store_inserted_value, tile_drive};
pub use crate::device::driver::{op, status};
use crate::device::layout::KeyLayout;
use crate::device::shape::{ShapeScalars, TableMeta, meta_of};
pub use crate::device::slab::SLAB_WORDS;
use crate::device::slab::{LINK_SLOT, free_slab};
use crate::runtime::host_io::store_found_bits;
use cubecl::prelude::*;
use hashtile_core::reduce::Assign;
use hashtile_core::tile::{EMPTY_WORD, tile_ballot, tile_lane};
use hashtile_probing::Chain;

/// Counters of new pairs, spread out: tiles add their counts to one of these, each on its own 128-byte line.
pub(crate) const NEW_COUNTERS: u32 = 64;
/// Words between counters (a 128-byte line each: same-line atomics queue in one L2 slice).
pub(crate) const COUNTER_STRIDE: u32 = 32;
/// Words of the counter array: the retry count's line, the new-pair counters' lines, then as many lines that
/// count the erases of mixed batches.
pub(crate) const COUNTER_WORDS: usize = ((1 + 2 * NEW_COUNTERS) * COUNTER_STRIDE) as usize;
/// The sum of the [`NEW_COUNTERS`] spread-out counters from line `from` of a counter array read back (line 1:
/// new pairs; line `1 + NEW_COUNTERS`: a mixed batch's erases).
pub(crate) fn counter_lines(c: &[u32], from: u32) -> usize {
    (from..from + NEW_COUNTERS)
        .map(|i| c[(i * COUNTER_STRIDE) as usize] as usize)
        .sum()
}

/// Lanes per tile unless chosen (`GpuChained::with_tile_width`).
pub const DEFAULT_TILE: u32 = 8;

/// What [`chained_tile_op()`] did for one lane's operation (`V`: the layout's value type).
#[derive(CubeType, Clone, Copy)]
pub struct ChainedAnswer<V: CubePrimitive> {
    /// A find's value (its key's first copy).
    pub value: V,
    /// An erase's count (0 or 1), a count's or `erase_all`'s.
    pub count: u32,
    /// A [`status`]: [`status::NO_SLAB`] when an insert found the pool empty (not done; run it again after
    /// the pool has grown).
    pub status: u32,
}

/// One operation per lane on a chained table, **called by every lane of the plane together** (cooperative:
/// each tile of `tw` lanes serves its lanes' operations one after another, reading a slab per step as one
/// bucket, so a plane's lanes may hold different kinds of operation). Lane `i`'s operation: `my_op` on
/// `my_key` (and `my_value` for inserts) where `mine`; lanes without one (`mine == false`) still take part.
/// `mode` is a single [`op`] for every lane or [`op::MIXED`] (then `my_op` is [`op::INSERT`] to
/// [`op::FIND`]); [`op::GATHER`] writes a key's values to `out[my_at..]` (`out` is unused otherwise).
///
/// `L` is the table's key layout: `Packed` (32-bit keys and values in one slab word) or [`Wide`](crate::device::layout::Wide) (64-bit key
/// words in the slabs, the values in `slab_values` at the same index). The table comes from
/// `GpuChained::device_ref`: `slabs` (atomic) and `slabs_plain` (the same array without atomics where
/// `plain`, which only CUDA can bind twice; else a dummy), `slab_values` (wide tables; a dummy otherwise), the
/// allocator's `bitmap` and `pool`, and `meta` (from [`crate::device::shape::load_meta()`] of the shape). Launches
/// that only walk (finds, counts, gathers) may bind a dummy as `slabs` and must set `plain`.
///
/// **Wide tables and mixed operations:** a wide insert claims the key word, then stores the value; with no
/// device-wide fence in CubeCL, a find of the same key in the same kernel may see the key before its value.
/// The batch calls therefore run a wide mixed batch as two launches (finds and erases, then inserts); a kernel
/// of yours should not find keys it inserts in the same launch of a wide table.
#[allow(clippy::too_many_arguments)]
#[cube]
pub fn chained_tile_op<L: KeyLayout>(
    slabs: &Array<Atomic<L::Word>>,
    slabs_plain: &Array<L::Word>,
    slab_values: &mut Array<u64>,
    bitmap: &Array<Atomic<u32>>,
    pool: u32,
    meta: TableMeta,
    mine: bool,
    my_op: u32,
    my_key: L::Key,
    my_value: L::Value,
    my_at: u32,
    out: &mut Array<L::Value>,
    #[comptime] mode: u32,
    #[comptime] plain: bool,
    #[comptime] resident: bool,
    #[comptime] tw: u32,
) -> ChainedAnswer<L::Value> {
    // Chains never stash a pair (an insert without a slab answers `NO_SLAB`) and are never framed.
    let mut no_stash = Array::<u64>::new(1usize);
    let no_frames = Array::<u32>::new(1usize);
    let lane = LaneOp::<L::Key, L::Value> {
        mine,
        op: my_op,
        key: my_key,
        value: my_value,
        child: 0u32,
        at: my_at,
    };
    let read_mode = if comptime!(plain) {
        reads::EITHER
    } else {
        reads::ATOMIC
    };
    let a = tile_drive::<Chain, L, Assign>(
        slabs,
        slabs_plain,
        slab_values,
        bitmap,
        bitmap,
        pool,
        &mut no_stash,
        bitmap,
        0u32,
        out,
        meta,
        &no_frames,
        lane,
        mode,
        SLAB_WORDS,
        tw,
        read_mode,
        true,
        false,
        false,
        false,
        resident,
        false,
        false,
    );
    store_inserted_value::<L>(slab_values, a, mine, my_value);
    ChainedAnswer::<L::Value> {
        value: a.value,
        count: a.count,
        status: a.status,
    }
}

/// The launch entries of [`chained_batch`], written once: the CUDA compiler reads a bound from an entry's name
/// (`vendor/cubecl-cpp`, PATCH.md), so entries differ in their names alone.
macro_rules! chained_entry {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        #[cube(launch_unchecked)]
        pub fn $name<L: KeyLayout>(
            ops: &Array<u32>,
            keys: &Array<L::Key>,
            values: &Array<L::Value>,
            sel: &Array<u32>,
            n: u32,
            slabs: &Array<Atomic<L::Word>>,
            slabs_plain: &Array<L::Word>,
            slab_values: &mut Array<u64>,
            bitmap: &Array<Atomic<u32>>,
            pool: u32,
            out: &mut Array<L::Value>,
            aux: &mut Array<u32>,
            retry: &mut Array<u32>,
            counters: &Array<Atomic<u32>>,
            found_bits: &Array<Atomic<u32>>,
            gate: &Array<u32>,
            base: u32,
            shape: &ShapeScalars,
            #[comptime] mode: u32,
            #[comptime] indexed: bool,
            #[comptime] plain: bool,
            #[comptime] phase: u32,
            #[comptime] resident: bool,
            #[comptime] tw: u32,
            #[comptime] compact: bool,
            #[comptime] gated: bool,
        ) {
            chained_batch::<L>(
                ops,
                keys,
                values,
                sel,
                n,
                slabs,
                slabs_plain,
                slab_values,
                bitmap,
                pool,
                out,
                aux,
                retry,
                counters,
                found_bits,
                gate,
                base,
                shape,
                mode,
                indexed,
                plain,
                phase,
                resident,
                tw,
                compact,
                gated,
            );
        }
    };
}

chained_entry!(
    /// Runs operation `q` for `q < n` (with `indexed`: for `q = sel[0..n]`, the inserts of an earlier launch that
    /// found the pool empty), a thread per operation: each tile serves its lanes' operations one after another
    /// (warp-cooperative work sharing), so a launch has as many threads as operations, as the static kernels do.
    ///
    /// `mode` ([`op`]) is what every thread does, or [`op::MIXED`]: thread `q` does `ops[q]`, so one warp may mix
    /// inserts, erases and finds. Outputs by mode:
    /// - inserts: `counters[0]` counts the operations recorded in `retry` (the pool ran out);
    ///   `counters[COUNTER_STRIDE * (1 + i)]` for `i < NEW_COUNTERS` count new pairs, and (mixed batches)
    ///   `counters[COUNTER_STRIDE * (1 + NEW_COUNTERS + i)]` erases, each tile adding its counts once, at its end
    ///   (an atomic per stored pair on few lines took most of the time: 1.40 against 7.2 G keys/s on the H100);
    /// - [`op::FIND`] and mixed batches: `out[q]`, a found value, and `aux[q]`, a [`status`];
    /// - [`op::ERASE`], [`op::COUNT`], [`op::ERASE_ALL`]: `aux[q]`, how many; [`op::GATHER`]: see [`op`].
    ///
    /// With `compact` (the host calls' answers, [`op::FIND`], [`op::ERASE`] and [`op::ERASE_ALL`] only), a find
    /// sets bit `t % 32` of `found_bits[t / 32]` for a present key instead of writing a status word (1/32 of the
    /// read-back, as the static tables' finds), and erases add their counts to the counters' erase lines (one
    /// read of the counters instead of a word per key). With `gated`, the launch does nothing once `gate[0]` is
    /// set (a reserved key found in the batch by `first_reserved_kernel`, queued before this launch over every
    /// key). `base` is the position of `keys[0]` in the host batch: inserts that found the pool empty record
    /// `base + q`, so that the launches over a batch's chunks share one retry list over the whole batch.
    ///
    /// `phase` splits a mixed batch of a wide table into two launches (see [`chained_tile_op()`]): 1 runs only
    /// its erases and finds, 2 only its inserts; 0 runs everything.
    ///
    /// **Reads.** Finds and counts read `slabs_plain` (the slab array bound without atomics: CubeCL lowers an
    /// atomic load to an atomic add of zero on CUDA, 16 per slab read). Inserts read it too where `plain` (CUDA
    /// binds the array twice; Vulkan binds a buffer once): a stale view only costs a failed compare-and-swap, as
    /// claims take the first empty slot and links are set once. After a lost compare-and-swap, and for every
    /// erase, reads are coherent (`slabs`). Launches that change nothing bind a dummy as `slabs`; launches on
    /// Vulkan that change the table bind a dummy as `slabs_plain` (`plain == false`).
    chained_kernel
);

chained_entry!(
    /// [`chained_kernel()`] for launches of multimap inserts ([`op::INSERT`]; `mode` must be that) with more
    /// threads than the device holds at once, compiled for 8 resident cubes of
    /// [`CUBE_SIZE`](crate::runtime::launch::CUBE_SIZE) threads per multiprocessor: the name's `_min_blocks_8`
    /// asks ptxas for it (the CUDA compiler of `vendor/cubecl-cpp`, PATCH.md), which holds the kernel to 32
    /// registers a thread. Left to itself ptxas gives it 35, and the register file then holds 6 cubes per
    /// multiprocessor (NVIDIA allocates registers 8 a thread at a time), three quarters of the threads.
    chained_insert_kernel_min_blocks_8
);

/// The body of both launch entries ([`chained_kernel`] documents it).
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
#[cube]
fn chained_batch<L: KeyLayout>(
    ops: &Array<u32>,
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    sel: &Array<u32>,
    n: u32,
    slabs: &Array<Atomic<L::Word>>,
    slabs_plain: &Array<L::Word>,
    slab_values: &mut Array<u64>,
    bitmap: &Array<Atomic<u32>>,
    pool: u32,
    out: &mut Array<L::Value>,
    aux: &mut Array<u32>,
    retry: &mut Array<u32>,
    counters: &Array<Atomic<u32>>,
    found_bits: &Array<Atomic<u32>>,
    gate: &Array<u32>,
    base: u32,
    shape: &ShapeScalars,
    #[comptime] mode: u32,
    #[comptime] indexed: bool,
    #[comptime] plain: bool,
    #[comptime] phase: u32,
    #[comptime] resident: bool,
    #[comptime] tw: u32,
    #[comptime] compact: bool,
    #[comptime] gated: bool,
) {
    let inserts = comptime!(mode == op::INSERT || mode == op::REPLACE || mode == op::MIXED);
    let reports = comptime!(mode == op::FIND || mode == op::MIXED);
    let erases = comptime!(mode == op::ERASE || mode == op::ERASE_ALL);
    let tl = tile_lane(tw);
    let t = ABSOLUTE_POS;
    // This thread's operation.
    let mut mine = t < n as usize;
    let mut q = t;
    let mut key = L::Key::new(0);
    let mut value = L::Value::new(0);
    let mut kind = u32::new(mode as i64);
    let mut at = 0u32;
    if mine {
        if comptime!(indexed) {
            q = sel[t] as usize;
        }
        key = keys[q];
        if comptime!(inserts) {
            value = values[q];
        }
        if comptime!(mode == op::MIXED) {
            kind = ops[q];
        }
        if comptime!(mode == op::GATHER) {
            at = aux[q];
        }
    }
    if comptime!(phase == 1) {
        mine = mine && kind >= op::ERASE;
    }
    if comptime!(phase == 2) {
        mine = mine && kind <= op::REPLACE;
    }
    if comptime!(gated) {
        mine = mine && gate[0] == u32::MAX;
    }
    let a = chained_tile_op::<L>(
        slabs,
        slabs_plain,
        slab_values,
        bitmap,
        pool,
        meta_of(shape),
        mine,
        kind,
        key,
        value,
        at,
        out,
        mode,
        plain,
        resident,
        tw,
    );
    if mine {
        if comptime!(reports) {
            let mut v = a.value;
            if comptime!(mode == op::FIND) {
                // A find's answer for an absent key is the all-ones value (`find_into`'s convention).
                if a.status != status::FOUND {
                    v = L::Value::max_value();
                }
            }
            out[q] = v;
            if comptime!(!compact) {
                aux[q] = a.status;
            }
        } else if comptime!(!inserts && mode != op::GATHER && !(compact && erases)) {
            aux[q] = a.count;
        }
        if comptime!(inserts) {
            if a.status == status::NO_SLAB {
                // Recorded for the next launch, after the pool has grown. Always in bounds where the host
                // sized `retry` for the launch; a queued launch (`insert_queued`) has a one-word list and a
                // pool that provably suffices, and its count is checked when it settles.
                let at_retry = counters[0].fetch_add(1u32);
                if at_retry < retry.len() as u32 {
                    retry[at_retry as usize] = base + q as u32;
                }
            }
        }
    }
    if comptime!(compact && mode == op::FIND) {
        store_found_bits(found_bits, mine && a.status == status::FOUND, t);
    }
    if comptime!(compact && erases) {
        // A plane's erases, added once to one of the spread-out erase lines.
        let mut c = 0u32;
        if mine {
            c = a.count;
        }
        let all = plane_sum(c);
        let k = (t as u32 / tw) % NEW_COUNTERS;
        if UNIT_POS_PLANE == 0u32 && all > 0u32 {
            counters[((1u32 + NEW_COUNTERS + k) * COUNTER_STRIDE) as usize].fetch_add(all);
        }
    }
    if comptime!(inserts) {
        // New pairs (and a mixed batch's erases), counted once per tile on one of the spread-out lines.
        let k = (t as u32 / tw) % NEW_COUNTERS;
        let stored = tile_ballot(mine && a.status == status::INSERTED, tl, tw).count_ones();
        if tl.lane == 0u32 && stored > 0u32 {
            counters[((1u32 + k) * COUNTER_STRIDE) as usize].fetch_add(stored);
        }
        if comptime!(mode == op::MIXED) {
            let erased = tile_ballot(mine && a.status == status::ERASED, tl, tw).count_ones();
            if tl.lane == 0u32 && erased > 0u32 {
                counters[((1u32 + NEW_COUNTERS + k) * COUNTER_STRIDE) as usize].fetch_add(erased);
            }
        }
    }
}

/// Compacts bucket `b`'s list (a thread per bucket; nothing else runs meanwhile): its live pairs move to the
/// front in list order, the slabs left over are emptied and freed (`freed[0]` counts them). Wide tables move
/// each pair's value in `slab_values` with its key word.
#[cube(launch_unchecked)]
pub fn chained_flush_kernel<L: KeyLayout>(
    slabs: &mut Array<u64>,
    slab_values: &mut Array<u64>,
    bitmap: &Array<Atomic<u32>>,
    freed: &Array<Atomic<u32>>,
    buckets: u32,
) {
    let b = ABSOLUTE_POS as u32;
    if b < buckets {
        let mut ws = b;
        let mut wi = 0u32;
        let mut rs = b;
        loop {
            for i in 0..15u32 {
                let from = (rs * SLAB_WORDS + i) as usize;
                let word = slabs[from];
                // Live: neither empty nor a tombstone.
                if word != EMPTY_WORD && !L::is_tomb(word) {
                    if wi == 15u32 {
                        // The write cursor trails the read cursor: its slab's link is still intact.
                        ws =
                            (slabs[(ws * SLAB_WORDS + LINK_SLOT) as usize] & 0xffff_ffffu64) as u32;
                        wi = 0u32;
                    }
                    let to = (ws * SLAB_WORDS + wi) as usize;
                    slabs[to] = word;
                    if comptime!(!L::MOVES_PAIRS) {
                        slab_values[to] = slab_values[from];
                    }
                    wi += 1u32;
                }
            }
            let link = slabs[(rs * SLAB_WORDS + LINK_SLOT) as usize];
            if link == EMPTY_WORD {
                break;
            }
            rs = (link & 0xffff_ffffu64) as u32;
        }
        while wi < 15u32 {
            slabs[(ws * SLAB_WORDS + wi) as usize] = EMPTY_WORD;
            wi += 1u32;
        }
        let mut link = slabs[(ws * SLAB_WORDS + LINK_SLOT) as usize];
        slabs[(ws * SLAB_WORDS + LINK_SLOT) as usize] = EMPTY_WORD;
        let mut n_freed = 0u32;
        while link != EMPTY_WORD {
            let s = (link & 0xffff_ffffu64) as u32;
            link = slabs[(s * SLAB_WORDS + LINK_SLOT) as usize];
            for i in 0..16u32 {
                slabs[(s * SLAB_WORDS + i) as usize] = EMPTY_WORD;
            }
            free_slab(bitmap, s - buckets);
            n_freed += 1u32;
        }
        if n_freed > 0u32 {
            freed[0].fetch_add(n_freed);
        }
    }
}

/// Adds the live pairs among slab words `t < slabs.len()` to `count[0]` (neither empty nor a tombstone, and
/// not a link: word 15 of each slab) and the occupied slots (live pairs and tombstones) to `count[1]`, one
/// atomic each per tile.
#[cube(launch_unchecked)]
pub fn chained_live_kernel<L: KeyLayout>(
    slabs: &Array<u64>,
    count: &Array<Atomic<u32>>,
    #[comptime] tw: u32,
) {
    let t = ABSOLUTE_POS;
    let tl = tile_lane(tw);
    let mut live = false;
    let mut occupied = false;
    if t < slabs.len() {
        let w = slabs[t];
        occupied = (t as u32) % SLAB_WORDS != LINK_SLOT && w != EMPTY_WORD;
        live = occupied && !L::is_tomb(w);
    }
    let c = tile_ballot(live, tl, tw).count_ones();
    let o = tile_ballot(occupied, tl, tw).count_ones();
    if tl.lane == 0u32 && c > 0u32 {
        count[0].fetch_add(c);
    }
    if tl.lane == 0u32 && o > 0u32 {
        count[1].fetch_add(o);
    }
}
