//! Mixed batches of device data in one launch ([`GpuTable::apply_device`]): inserts, replaces, erases and finds,
//! each lane its own operation on the tile driver ([`op::MIXED`]), one status and value per operation.
//!
//! Only for schemes whose racing upserts converge (linear probing and double hashing) with packed pairs or
//! keys alone: there two operations of one launch on the same key never corrupt the table. A claim takes an
//! empty slot, which no operation of a mixed launch makes (an erase leaves the erased word), so of two copies
//! of one key the one whose walk reaches further read the other's slot as another key's, which it can never
//! become; updates and erases of one slot race by compare-and-swap on the word read. Operations on one key
//! take effect in an unspecified order. Other schemes resolve mixed batches on the host (`HashTable::apply`,
//! NOTES.md D34): an eviction carries a key where an erase or a find misses it, and a choice of bucket by load
//! may store one key twice.

use super::GpuTable;
use super::kernels::INSERT_COUNTERS;
use crate::device::counters::{ADDED_AT, ERASED_AT, count_spread};
use crate::device::driver::{LaneOp, op, reads, status, store_inserted_value, tile_drive};
use crate::device::layout::KeyLayout;
use crate::device::shape::{ShapeScalars, meta_of};
use crate::runtime::launch::{CUBE_SIZE, cube_count};
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::reduce::Assign;
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::tile::tile_lane;
use hashtile_core::{Error, Result};

/// One mixed operation per position: `ops[i]` ([`op::INSERT`] to [`op::FIND`]) of `keys[i]` (and `values[i]`,
/// read by inserts and replaces). `out[i]` receives a find's value (0 otherwise) and `done[i]` the operation's
/// [`status`]: `FAILED` for an unknown operation code, an insert or replace of the empty key (never stored),
/// and an insert the table has no room for (the pair goes to the stash, counted at `counters[0]`). New keys
/// count at `ADDED_AT`, erased pairs at `ERASED_AT` of the table's counters.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn mixed_kernel<S: ProbingScheme, L: KeyLayout>(
    ops: &Array<u32>,
    keys: &Array<L::Key>,
    values: &Array<L::Value>,
    table: &Array<Atomic<L::Word>>,
    table_plain: &Array<L::Word>,
    table_values: &mut Array<u64>,
    failed: &mut Array<u64>,
    counters: &Array<Atomic<u32>>,
    shape: &ShapeScalars,
    out: &mut Array<L::Value>,
    done: &mut Array<u32>,
    #[comptime] bucket_size: u32,
    #[comptime] tile_width: u32,
    #[comptime] plain_reads: bool,
) {
    let pos = ABSOLUTE_POS;
    let active = pos < keys.len();
    let mut code = op::FIND.runtime();
    let mut key = L::Key::new(0);
    let mut value = L::Value::new(0);
    if active {
        code = ops[pos];
        key = keys[pos];
        if comptime!(L::HAS_VALUES) {
            value = values[pos];
        }
    }
    let known = code <= op::FIND;
    // The empty key (and a set's erased key) is never stored: finds and erases of it answer NOT_FOUND.
    let runs = active && known && L::findable(key);
    let frames = Array::<u32>::new(1usize);
    let no_halves = Array::<Atomic<u32>>::new(1usize);
    let mut no_out = Array::<L::Value>::new(1usize);
    let lane = LaneOp::<L::Key, L::Value> {
        mine: runs,
        op: code,
        key,
        value,
        child: 0u32,
        at: 0u32,
    };
    let a = tile_drive::<S, L, Assign>(
        table,
        table_plain,
        table_values,
        &no_halves,
        counters,
        0u32,
        failed,
        counters,
        comptime!(INSERT_COUNTERS as u32),
        &mut no_out,
        meta_of(shape),
        &frames,
        lane,
        op::MIXED,
        bucket_size,
        tile_width,
        comptime!(reads::for_writes(plain_reads)),
        true,
        false,
        false,
        false,
        false,
        false,
        false,
    );
    store_inserted_value::<L>(table_values, a, runs, value);
    let mut answer = a.status;
    if active && !runs && (!known || code <= op::REPLACE) {
        answer = status::FAILED;
    }
    if active {
        done[pos] = answer;
        out[pos] = a.value;
    }
    let tl = tile_lane(tile_width);
    let mut added = 0u32;
    if tl.lane == 0u32 {
        added = a.tile_added;
    }
    count_spread(counters, ADDED_AT, added);
    count_spread(
        counters,
        ERASED_AT,
        u32::cast_from(runs && answer == status::ERASED),
    );
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// A mixed batch of `n` operations already on the device, in one launch: operation `ops[i]` (`u32`:
    /// [`op::INSERT`], [`op::REPLACE`], [`op::ERASE`] or [`op::FIND`]) of `keys[i]`, with `values[i]` for
    /// inserts and replaces (a set's `values` are not read). Returns `(out, done)`: per operation the value a
    /// find found (the layout's value type; 0 elsewhere) and its [`status`] (`u32`): `INSERTED` / `UPDATED`
    /// for inserts and replaces (a static table's insert updates a stored key), `ERASED` / `NOT_FOUND` for
    /// erases, `FOUND` / `NOT_FOUND` for finds, `FAILED` for an unknown code, an insert of the empty key, or an
    /// insert the table has no room for (not stored). Waits for the device and brings `len()` up to date.
    ///
    /// Operations on distinct keys commute; operations on one key take effect in an unspecified order and
    /// never corrupt the table (each key stored at most once, `len()` exact). Linear probing and double
    /// hashing, with packed pairs or keys alone, claiming by compare-and-swap: elsewhere
    /// [`Error::InvalidConfig`] (`HashTable::apply` resolves mixed batches of every scheme, in batch order per
    /// key). Erased slots are marked as [`GpuTable::erase_device`] marks them.
    pub fn apply_device(
        &mut self,
        ops: &Handle,
        keys: &Handle,
        values: &Handle,
        n: usize,
    ) -> Result<(Handle, Handle)> {
        if !S::UPSERTS_CONVERGE || !L::MOVES_PAIRS || !self.options.use_cas {
            return Err(Error::InvalidConfig(
                "apply_device: linear probing or double hashing, packed pairs or keys alone, claims by \
                 compare-and-swap (use HashTable::apply)"
                    .into(),
            ));
        }
        let out = self.client.empty(n.max(1) * size_of::<L::Value>());
        let done = self.client.empty(n.max(1) * 4);
        if n == 0 {
            return Ok((out, done));
        }
        // Lanes that write first settle what is queued, so that the counters read below are this launch's.
        self.settle()?;
        let (values, values_len) = if L::HAS_VALUES {
            (values.clone(), n)
        } else {
            (self.client.empty(8), 1)
        };
        // SAFETY: positions are bounded by `n`, slots by the table's shape, which matches its allocation.
        unsafe {
            mixed_kernel::launch_unchecked::<S, L, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(ops.clone(), n),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(values, values_len),
                ArrayArg::from_raw_parts(self.keys.clone(), self.capacity()),
                self.plain_slots_arg(),
                ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                ArrayArg::from_raw_parts(self.stash.clone(), L::STASH_WORDS * self.stash_len),
                ArrayArg::from_raw_parts(self.counters.clone(), INSERT_COUNTERS),
                self.shape_arg(),
                ArrayArg::from_raw_parts(out.clone(), n),
                ArrayArg::from_raw_parts(done.clone(), n),
                self.bucket_size,
                self.tile_width,
                self.options.plain_reads,
            )
        };
        self.erased = L::ERASED_WORD;
        self.note_queued(n);
        // Inserts the table had no room for answered FAILED; their stashed pairs are not kept.
        self.settle()?;
        Ok((out, done))
    }
}
