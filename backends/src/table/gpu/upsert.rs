//! Device passes that settle a batch's duplicates and updates before it is inserted, so that the host never
//! looks at the keys (no host hash map, no find round trip):
//!
//! 1. [`dedup_claim_kernel()`]: every key claims a slot of a scratch open-addressing table (twice the batch,
//!    linear probing) and raises that slot's "last index" to its own position with an atomic max.
//! 2. [`dedup_mark_kernel()`]: `mask[i] = 1` where position `i` is its key's last occurrence, else 0. The last
//!    occurrence wins, as the host API documents.
//! 3. [`classify_kernel()`] (only when the table already holds pairs): `mask[i] = 2`
//!    where a kept key is already stored.
//!
//! The insert kernels then run twice over the mask: mode 2 (updates, which never evict) and mode 1 (new keys,
//! distinct and absent, so their duplicate check is skipped: the paper's bulk build). An update thus never
//! races a cuckoo eviction that holds its key in flight, which in one mixed pass could store a key twice.
//!
//! Scratch layout for 32-bit keys: one `u64` word per slot, `(key + 1) << 32 | index` (0 = empty; keys are
//! never all ones, so `key + 1` fits), claimed by compare-and-swap and raised by `fetch_max`: one atomic per
//! key. For 64-bit keys: a key word (all ones = empty) and a separate `u32` last-index word.

use crate::device::counters::count_spread;
use crate::device::find::tile_find_core;
use crate::device::layout::KeyLayout;
use crate::device::shape::{ShapeScalars, TableMeta, meta_of};
use cubecl::prelude::*;
use hashtile_core::hash::hash_key;
use hashtile_core::reduce::{Reduce, kind};
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::tile::narrow_word;

/// Mask value of a key that is not its key's last occurrence in the batch (skipped).
pub const MASK_SKIP: u32 = 0;
/// Mask value of a key that is its key's last occurrence (defined with the route kernels that keep it).
pub use crate::device::route::MASK_NEW;
/// Mask value of a key already stored (update its value).
pub const MASK_UPDATE: u32 = 2;

/// Scratch slots for a batch of `n` keys: a power of two of at least `2n` (load <= 0.5 keeps probes short).
pub fn scratch_slots(n: usize) -> usize {
    (2 * n.max(1)).next_power_of_two()
}

/// Phase 1 of the duplicate pass (see the module docs) over one chunk of the batch: `keys` and `slot_of` are the
/// chunk's, whose first key is at position `base` of the scratch table's numbering (the batch's, or the
/// segment's). `slot_of[i]` receives the scratch slot of key `i`. `scratch_last` is unused (length 1) for
/// 32-bit keys. A sentinel key (all ones) lowers `guard[0]` to its batch position (`origin + i`), which
/// [`sentinel_gate_kernel()`] turns into a refusal of the whole batch; it is claimed like any key meanwhile
/// (harmless: its mask is cleared with every other).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn dedup_claim_kernel<K: Int>(
    keys: &Array<K>,
    scratch: &Array<Atomic<u64>>,
    scratch_last: &Array<Atomic<u32>>,
    slot_of: &mut Array<u32>,
    guard: &Array<Atomic<u32>>,
    base: u32,
    origin: u32,
    #[comptime] wide_keys: bool,
) {
    let local = ABSOLUTE_POS;
    if local < keys.len() {
        let pos = local + base as usize;
        let key = u64::cast_from(keys[local]);
        let sentinel = if comptime!(wide_keys) {
            u64::MAX
        } else {
            0xffff_ffffu64
        };
        if key == sentinel {
            guard[0].fetch_min(local as u32 + origin);
        }
        let lo = (key & 0xffff_ffffu64) as u32;
        let hi = (key >> 32u64) as u32;
        let mask = (scratch.len() - 1) as u32;
        let mut h = hash_key(lo, hi, 0x9e37_79b9u32) & mask;
        let mut done = false;
        if comptime!(wide_keys) {
            while !done {
                let old = scratch[h as usize].compare_exchange_weak(u64::MAX, key);
                if old == u64::MAX || old == key {
                    scratch_last[h as usize].fetch_max(pos as u32);
                    done = true;
                } else {
                    h = (h + 1u32) & mask;
                }
            }
        } else {
            let word = ((key + 1u64) << 32u64) | (pos as u64);
            while !done {
                let old = scratch[h as usize].compare_exchange_weak(0u64, word);
                if old == 0u64 {
                    done = true;
                } else if (old >> 32u64) == (word >> 32u64) {
                    scratch[h as usize].fetch_max(word);
                    done = true;
                } else {
                    h = (h + 1u32) & mask;
                }
            }
        }
        slot_of[local] = h;
    }
}

/// Clears the whole mask (every position [`MASK_SKIP`]) when the claims met a sentinel key (`guard[0]` below
/// `u32::MAX`), so that the classify and insert passes queued after it leave the table unchanged. Queued after
/// the last claim of the batch and before its first classify or insert.
#[cube(launch_unchecked)]
pub fn sentinel_gate_kernel(guard: &Array<u32>, mask: &mut Array<u32>) {
    let pos = ABSOLUTE_POS;
    if pos < mask.len() && guard[0] != u32::MAX {
        mask[pos] = MASK_SKIP;
    }
}

/// Lowers `guard[0]` to the position of the first sentinel key (all ones) of `keys`: the check of a batch that
/// skips the duplicate pass (`insert_or_apply` in the table), read before anything is inserted.
#[cube(launch_unchecked)]
pub fn sentinel_scan_kernel<K: Int>(keys: &Array<K>, guard: &Array<Atomic<u32>>) {
    let pos = ABSOLUTE_POS;
    if pos < keys.len() && keys[pos] == K::max_value() {
        guard[0].fetch_min(pos as u32);
    }
}

/// Phase 2 of the duplicate pass: `mask[i]` = [`MASK_NEW`] where `i` is its key's last occurrence, else
/// [`MASK_SKIP`]. `scratch` / `scratch_last` are phase 1's buffers, read plainly (a separate launch).
#[cube(launch_unchecked)]
pub fn dedup_mark_kernel(
    slot_of: &Array<u32>,
    scratch: &Array<u64>,
    scratch_last: &Array<u32>,
    mask: &mut Array<u32>,
    #[comptime] wide_keys: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos < slot_of.len() {
        let last = last_occurrence(slot_of, scratch, scratch_last, pos, wide_keys);
        let mut m = MASK_SKIP.runtime();
        if last == pos as u32 {
            m = MASK_NEW.runtime();
        }
        mask[pos] = m;
    }
}

/// The batch position of the last occurrence of position `pos`'s key, from phase 1's scratch table.
#[cube]
fn last_occurrence(
    slot_of: &Array<u32>,
    scratch: &Array<u64>,
    scratch_last: &Array<u32>,
    pos: usize,
    #[comptime] wide_keys: bool,
) -> u32 {
    let s = slot_of[pos] as usize;
    if comptime!(wide_keys) {
        scratch_last[s]
    } else {
        (scratch[s] & 0xffff_ffffu64) as u32
    }
}

/// Phase 2 of an `insert_or_apply` (beside the mark): every position that is not its key's last occurrence
/// folds its value into the last occurrence's entry of `reduced` (a copy of `values`), so that the kept
/// position carries the reduction of all of the batch's values for its key. Built-in reductions combine with
/// one atomic each; a user reduction by a compare-and-swap loop (`hashtile_core::reduce`: the order in which
/// duplicates meet is the device's, which is why reductions must commute).
#[cube(launch_unchecked)]
pub fn dedup_reduce_kernel<V: Int, F: Reduce>(
    slot_of: &Array<u32>,
    scratch: &Array<u64>,
    scratch_last: &Array<u32>,
    values: &Array<V>,
    reduced: &Array<Atomic<V>>,
    #[comptime] wide_keys: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos < slot_of.len() {
        let last = last_occurrence(slot_of, scratch, scratch_last, pos, wide_keys);
        if last != pos as u32 {
            let v = values[pos];
            let at = last as usize;
            if comptime!(F::KIND == kind::ADD) {
                reduced[at].fetch_add(v);
            } else if comptime!(F::KIND == kind::MIN) {
                reduced[at].fetch_min(v);
            } else if comptime!(F::KIND == kind::MAX) {
                reduced[at].fetch_max(v);
            } else {
                let mut seen = reduced[at].load();
                let mut done = false;
                while !done {
                    let old = reduced[at].compare_exchange_weak(seen, F::reduce::<V>(seen, v));
                    if old == seen {
                        done = true;
                    } else {
                        seen = old;
                    }
                }
            }
        }
    }
}

/// Phase 3: `mask[i]` becomes [`MASK_UPDATE`] where a kept key is already stored in the table (layout `L`).
/// All lanes of every plane run the cooperative find (keys not marked [`MASK_NEW`] ride along inactive).
///
/// With `update`, the stored key's value is also replaced by `F::reduce(stored, values[i])` where it is found
/// (`values[i]` itself for [`Assign`](hashtile_core::reduce::Assign), the upsert's rule), so that no insert
/// pass has to search for it again. That is safe in this launch: it moves no pair (no eviction can hold a key in
/// flight) and its keys are distinct (the duplicate pass kept one occurrence each), so no two lanes write one
/// slot; a packed slot word is rewritten whole (same key, new value), a wide layout's value word alone.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn classify_kernel<S: ProbingScheme, L: KeyLayout, F: Reduce>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    table: &mut Array<L::Word>,
    table_values: &mut Array<u64>,
    mask: &mut Array<u32>,
    shape: &ShapeScalars,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] update: bool,
) {
    // One table: no frame descriptors (a one-word stand-in, never read).
    let frames = Array::<u32>::new(1usize);
    classify_core::<S, L, F>(
        keys,
        values,
        table,
        table_values,
        mask,
        meta_of(shape),
        &frames,
        0u32,
        bucket_size,
        tile_width,
        update,
        false,
    );
}

/// The body of [`classify_kernel`]; with `framed`, each lane's key is looked up in table `child` of slot
/// frames (the slots of many tables of one shape in one allocation) whose descriptors are `frames`, and a
/// found slot's address is one of the frames' shared slot arrays.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn classify_core<S: ProbingScheme, L: KeyLayout, F: Reduce>(
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    table: &mut Array<L::Word>,
    table_values: &mut Array<u64>,
    mask: &mut Array<u32>,
    meta: TableMeta,
    frames: &Array<u32>,
    child: u32,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] update: bool,
    #[comptime] framed: bool,
) {
    let pos = ABSOLUTE_POS;
    let mut active = false;
    let mut key = L::Key::new(0);
    if pos < keys.len() {
        key = keys[pos];
        active = mask[pos] == MASK_NEW;
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
        update,
        framed,
    );
    if active && r.found == 1u32 {
        mask[pos] = MASK_UPDATE;
        // A set's stored key is the whole element: nothing to update.
        if comptime!(update && L::HAS_VALUES) {
            let mut value = values[pos];
            if comptime!(F::KIND != kind::ASSIGN) {
                value = F::reduce::<L::Value>(r.value, value);
            }
            let addr = r.slot as usize;
            if comptime!(L::MOVES_PAIRS) {
                table[addr] = narrow_word::<L::Word>(L::slot_word(key, value));
            } else {
                L::store_value(table_values, addr, value);
            }
        }
    }
}

/// Counts mask entries equal to `value` into spread-out counters (one atomic per plane).
#[cube(launch_unchecked)]
pub fn count_mask_kernel(mask: &Array<u32>, value: u32, counters: &Array<Atomic<u32>>) {
    let pos = ABSOLUTE_POS;
    let mut hit = u32::new(0);
    if pos < mask.len() && mask[pos] == value {
        hit = 1u32;
    }
    count_spread(counters, 0u32, hit);
}

/// Splits the first `keys.len()` pairs a launch stashed (one slot word each: layouts that move pairs) into keys
/// and values, the input of the duplicate pass (the failures of a counting launch that never evicts,
/// `super::apply`).
#[cube(launch_unchecked)]
pub fn split_pairs_kernel<L: KeyLayout>(
    words: &Array<u64>,
    keys: &mut Array<L::Key>,
    values: &mut Array<L::Value>,
) {
    let pos = ABSOLUTE_POS;
    if pos < keys.len() {
        let w = words[pos];
        keys[pos] = L::key_of(w);
        values[pos] = L::value_of(w);
    }
}
