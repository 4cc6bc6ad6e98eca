//! Slot frames: the slots of many tables of one shape in one device allocation, so that one kernel launch
//! serves them all. A paged table's children live in frames while resident (`crate::paged`), and a find over
//! every child is then one launch per copy chunk, as a plain table's is ([`framed_find_kernel()`]): each key's
//! child comes from the route directory, and the child's seeds and first bucket from its descriptor
//! ([`crate::device::probe::FRAME_DESC_WORDS`] words). An upsert is one classify and one insert launch per copy chunk
//! ([`framed_classify_kernel()`], [`framed_insert_kernel()`]: the plain kernels' bodies with the child carried per
//! key). Without frames a routed find partitions the batch, launches each child's find on its part after the
//! copy and gathers the answers, and an upsert launches each child's classify and insert on its part
//! (`crate::paged::gpu::routing`).
//!
//! The children make, fill and describe the frames (`super::child::GpuChild`, through the frame calls of
//! [`crate::paged::protocol::PagedChild`]); this module holds the framed kernels and the frame geometry. A
//! frame is `stride` slots: a table's slots rounded up to 256 bytes (a child's sub-range must be a valid
//! buffer binding: Vulkan's offset alignment) and to a whole bucket. Tables hold sub-ranges of the frames'
//! buffers (`Handle::offset_start`), so their own kernels run on them unchanged, and the buffers live while
//! any table holds a frame.

use crate::device::find::tile_find_core;
use crate::device::layout::KeyLayout;
use crate::device::route::route_child;
use crate::device::shape::{ShapeScalars, meta_of};
use crate::table::gpu::kernels::{insert_core, select, store_found_bits};
use crate::table::gpu::upsert::classify_core;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;

/// Finds `keys` in the tables of a frame allocation (`table`, `table_values`): each key in its child's table
/// (`route_child` of the directory `entries`, `seed`, `depth`), whose descriptor is that child's in `frames`;
/// `shape` gives the bucket count and scheme parameters all children share. `out[i]` = the value or all ones;
/// with `with_bits`, presence bits as the find kernel's `found_mode::BITS`.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn framed_find_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    table: &Array<L::Word>,
    table_values: &Array<u64>,
    out: &mut Array<L::Value>,
    found_bits: &Array<Atomic<u32>>,
    frames: &Array<u32>,
    entries: &Array<u32>,
    shape: &ShapeScalars,
    seed: u64,
    depth: u32,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] with_bits: bool,
) {
    let meta = meta_of(shape);
    let pos = ABSOLUTE_POS;
    let active = pos < keys.len();
    let mut key = L::Key::new(0);
    let mut child = 0u32;
    if active {
        key = keys[pos];
        child = route_child::<L>(key, entries, seed, depth);
    }
    let r = tile_find_core::<S, L>(
        table,
        table_values,
        meta,
        key,
        active,
        frames,
        child,
        bucket_size,
        tile_width,
        false,
        false,
        true,
    );
    if active {
        let mut v = L::Value::max_value();
        if r.found == 1u32 {
            v = r.value;
        }
        out[pos] = v;
    }
    if comptime!(with_bits) {
        store_found_bits(found_bits, active && r.found == 1u32, pos);
    }
}

/// The child of the key at `pos` under the route directory (0 past the keys: such a lane is idle).
#[cube]
fn child_at<L: KeyLayout>(
    keys: &Array<L::Key>,
    entries: &Array<u32>,
    seed: u64,
    depth: u32,
) -> u32 {
    let mut child = 0u32;
    if ABSOLUTE_POS < keys.len() {
        child = route_child::<L>(keys[ABSOLUTE_POS], entries, seed, depth);
    }
    child
}

/// The classify pass of a framed upsert (`crate::table::gpu::upsert::classify_kernel` over the tables of a frame
/// allocation): each kept key (`mask` [`crate::table::gpu::upsert::MASK_NEW`]) already stored in its child's table is
/// marked [`crate::table::gpu::upsert::MASK_UPDATE`] and its value written in place. Children and descriptors as in
/// [`framed_find_kernel()`].
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn framed_classify_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    table: &mut Array<L::Word>,
    table_values: &mut Array<u64>,
    mask: &mut Array<u32>,
    frames: &Array<u32>,
    entries: &Array<u32>,
    shape: &ShapeScalars,
    seed: u64,
    depth: u32,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
) {
    let child = child_at::<L>(keys, entries, seed, depth);
    classify_core::<S, L, hashtile_core::reduce::Assign>(
        keys,
        values,
        table,
        table_values,
        mask,
        meta_of(shape),
        frames,
        child,
        bucket_size,
        tile_width,
        true,
        true,
    );
}

/// The new-key pass of a framed upsert (`crate::table::gpu::kernels::insert_kernel`, mask mode, over the tables of a frame
/// allocation): each key whose `mask` is `mode` goes into its child's table without the duplicate check.
/// Counters and failures are the launch's, not a child's: `failed` receives the pairs given up on (their child
/// is the route's), `counters` the new keys of every child together.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn framed_insert_kernel<S: ProbingScheme, L: KeyLayout>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    mask: &Array<u32>,
    mode: u32,
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &mut Array<u64>,
    failed: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    frames: &Array<u32>,
    entries: &Array<u32>,
    shape: &ShapeScalars,
    seed: u64,
    depth: u32,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] use_cas: bool,
    #[comptime] plain_reads: bool,
) {
    let child = child_at::<L>(keys, entries, seed, depth);
    // `Assign` never folds into a value's half: a stand-in for the table's 32-bit view.
    let no_halves = Array::<Atomic<u32>>::new(1usize);
    insert_core::<S, L, hashtile_core::reduce::Assign>(
        keys,
        values,
        mask,
        mode,
        table,
        table_plain,
        &no_halves,
        table_values,
        failed,
        counters,
        meta_of(shape),
        frames,
        child,
        bucket_size,
        tile_width,
        use_cas,
        plain_reads,
        false,
        select::MASK,
        true,
        false,
        false,
    );
}

/// Slots per frame for tables of `slots` slots in buckets of `bucket_size`.
pub(crate) fn stride_of(slots: usize, bucket_size: u32) -> usize {
    let b = bucket_size as usize;
    let align = 32 * b / gcd(32, b);
    slots.max(1).next_multiple_of(align)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Frame `index` of `all` (words of `stride` slots each), bounded at both ends.
pub(crate) fn frame_of(all: &Handle, stride: usize, count: usize, index: usize) -> Handle {
    let bytes = (stride * 8) as u64;
    all.clone()
        .offset_start(index as u64 * bytes)
        .offset_end((count - index - 1) as u64 * bytes)
}
