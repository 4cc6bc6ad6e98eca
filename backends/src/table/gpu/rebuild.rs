//! Rebuilding a table from its own slots on the device: [`unpack_slots_kernel()`] unpacks the slots into key and
//! value arrays with a mask (erased slots left out), the table is emptied under a family, and the insert kernel
//! re-inserts the masked pairs. No pair crosses the bus. Static tables reclaim erased slots this way
//! ([`crate::table::engine::Engine::rebuild_in_place`]); paged tables rebuild and split their children.

use super::{GpuTable, check_bucket_count, slot_bytes_of, stash_len_for};
use crate::device::layout::KeyLayout;
use crate::runtime::host_io::check_device_memory;
use crate::runtime::launch::{CUBE_SIZE, cube_count};
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::hash::route_hash;
use hashtile_core::scheme::{ProbingScheme, SchemeParams};
use hashtile_core::tile::{EMPTY_WORD, widen_word};
use hashtile_core::{HashFamily, Result};

/// Unpacks slot `i` of a table into `keys[i]`, `values[i]` and `mask[i]`: 0 for an empty or erased slot (key
/// word `erased`; `EMPTY_WORD` when the table has no erased slots), else 1, or 2 when `split` is on and the
/// key's route bit `63 - depth` is set (it moves to the split's new table).
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub fn unpack_slots_kernel<L: KeyLayout>(
    slots: &Array<L::Word>,
    slot_values: &Array<u64>,
    keys: &mut Array<L::Key>,
    values: &mut Array<L::Value>,
    mask: &mut Array<u32>,
    seed: u64,
    depth: u32,
    erased: u64,
    #[comptime] split: bool,
) {
    let i = ABSOLUTE_POS;
    if i < slots.len() {
        let w = widen_word::<L::Word>(slots[i]);
        let mut m = 0u32;
        if w != EMPTY_WORD && w != erased {
            let k = L::key_of(w);
            keys[i] = k;
            values[i] = L::own_value(w, slot_values, i);
            m = 1u32;
            if comptime!(split) {
                let shift = u64::cast_from(63u32 - depth);
                let bit = (route_hash(L::key_bits(k), seed) >> shift) & 1u64;
                m += u32::cast_from(bit);
            }
        }
        mask[i] = m;
    }
}

/// A table's pairs unpacked on the device, one entry per slot ([`GpuTable::unpack`]): `mask` 0 (no pair), 1, or
/// 2 (a split's moving pair).
pub(crate) struct Unpacked {
    pub keys: Handle,
    pub values: Handle,
    pub mask: Handle,
    /// Entries (the table's slots).
    pub n: usize,
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Unpacks the stored pairs on the device (see [`unpack_slots_kernel()`]); with `split` (`(seed, depth)`
    /// of a route directory), the pairs whose route bit is set are marked 2.
    pub(crate) fn unpack(&self, split: Option<(u64, u32)>) -> Unpacked {
        let n = self.capacity();
        let keys = self.client.empty(n * size_of::<L::Key>());
        let values = self.client.empty(n * size_of::<L::Value>());
        let mask = self.client.empty(n * 4);
        let (seed, depth) = split.unwrap_or((0, 0));
        // SAFETY: the kernel guards its index against the slot array's length; the outputs have `n` elements.
        unsafe {
            unpack_slots_kernel::launch_unchecked::<L, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.keys.clone(), n),
                ArrayArg::from_raw_parts(self.values.clone(), self.values_len),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(values.clone(), n),
                ArrayArg::from_raw_parts(mask.clone(), n),
                seed,
                depth,
                self.erased,
                split.is_some(),
            )
        };
        Unpacked {
            keys,
            values,
            mask,
            n,
        }
    }

    /// Inserts the unpacked pairs marked `mode` into this table (emptied under `family` first when `family` is
    /// given) and waits: returns the pairs it could not place.
    pub(crate) fn insert_unpacked(
        &mut self,
        u: &Unpacked,
        mode: u32,
        family: Option<HashFamily>,
    ) -> Result<Vec<(u64, u64)>> {
        if let Some(f) = family {
            self.empty_under(f);
        }
        self.insert_masked(&u.keys, &u.values, &u.mask, mode, u.n)
    }

    /// Moves the table's pairs into new slot buffers of `num_buckets` buckets under `params` and `family` on the
    /// device (growth), erased slots dropped: returns the pairs it could not place. The old slots, their
    /// unpacked copy and the new slots live at once; the old ones are freed when the move is done.
    pub(crate) fn regrow_on_device(
        &mut self,
        num_buckets: u32,
        params: SchemeParams,
        family: HashFamily,
    ) -> Result<Vec<(u64, u64)>> {
        check_bucket_count::<S>(num_buckets)?;
        let slots = num_buckets as usize * self.bucket_size as usize;
        let unpacked = self.capacity() * (size_of::<L::Key>() + size_of::<L::Value>() + 4);
        check_device_memory::<R>(
            &self.stager,
            "the grown table",
            slot_bytes_of::<L>(slots) + unpacked as u64,
        )?;
        let u = self.unpack(None);
        self.keys = self.client.empty(slots * L::WORD_BYTES);
        if !L::MOVES_PAIRS {
            self.values = self.client.empty(slots * 8);
            self.values_len = slots;
        }
        self.stash_len = stash_len_for(slots);
        self.stash = self.client.empty(self.stash_len * 8 * L::STASH_WORDS);
        self.num_buckets = num_buckets;
        self.params = params;
        self.insert_unpacked(&u, 1, Some(family))
    }

    /// Rebuilds the table from its own pairs under `family` on the device, erased slots dropped: returns the
    /// pairs it could not place.
    pub(crate) fn rebuild_on_device(&mut self, family: HashFamily) -> Result<Vec<(u64, u64)>> {
        let u = self.unpack(None);
        self.insert_unpacked(&u, 1, Some(family))
    }
}
