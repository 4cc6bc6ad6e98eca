//! The partition of a device batch by the table range of its keys' first buckets (`ByFirstBucket` parts of
//! `2^shift` buckets, `crate::device::route`): a count per part and a scatter into the parts, which the binned
//! build (`binned`) and batches in table order (`ordered`) run before their kernels.

use super::GpuTable;
use crate::device::layout::KeyLayout;
use crate::device::route::{
    ByFirstBucket, CUBE, TILE, carry, route_count_kernel, route_scatter_kernel,
};
use crate::device::shape::SHAPE_WORDS;
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::scan::exclusive_scan;
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Queues the partition of `n` keys (with `with_values`, and their `values`) into their bins of `2^shift`
    /// buckets (`width` counters): the count, its exclusive scan (each bin's first position, a cursor from which
    /// each cube takes its run) and the scatter (`staged` as [`Self::scatter_into_bins`] says). Returns the
    /// binned keys, and the binned values when asked for.
    pub(super) fn partition(
        &self,
        (keys, values, n): (&Handle, &Handle, usize),
        (shift, width): (u32, u32),
        with_values: bool,
        staged: bool,
    ) -> (Handle, Option<Handle>) {
        let client = &self.client;
        let counts = self.count_bins(keys, n, shift, width);
        let cursor = exclusive_scan(client, &counts, width as usize);
        let to_keys = client.empty(n * std::mem::size_of::<L::Key>());
        let to_values = with_values.then(|| client.empty(n * std::mem::size_of::<L::Value>()));
        self.scatter_into_bins(
            (keys, values, n),
            (shift, width, cursor),
            (&to_keys, to_values.as_ref()),
            staged,
        );
        (to_keys, to_values)
    }

    /// Queues the count of `n` keys per bin of `2^shift` buckets into `width` new counters, and returns them.
    pub(super) fn count_bins(&self, keys: &Handle, n: usize, shift: u32, width: u32) -> Handle {
        let client = &self.client;
        let counts = client.empty(width as usize * 4);
        fill_u32(client, &counts, width as usize, 0);
        // SAFETY: positions are bounded by `n`; a key's bin is its first bucket (below the bucket count, the
        // shape buffer's) shifted by `shift`, below `width` counters (`bins_of`); the mask (a stand-in of its
        // own) is not read unmasked.
        unsafe {
            route_count_kernel::launch_unchecked::<L, ByFirstBucket<S>, R>(
                client,
                cube_count(n.div_ceil(TILE) * CUBE),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(client.empty(8), 1),
                ArrayArg::from_raw_parts(self.shape.clone(), SHAPE_WORDS),
                ArrayArg::from_raw_parts(counts.clone(), width as usize),
                0u64,
                shift,
                false,
                width,
            )
        }
        counts
    }

    /// Queues the scatter of `n` keys (and `values`, where `to_values` is given) into their bins of `2^shift`
    /// buckets (`width` cursors, each at its bin's first position) in `to_keys` (and `to_values`), `staged`
    /// through shared memory when `width` is `CUBE` (`route_scatter_kernel`'s `staged`).
    pub(super) fn scatter_into_bins(
        &self,
        (keys, values, n): (&Handle, &Handle, usize),
        (shift, width, cursor): (u32, u32, Handle),
        (to_keys, to_values): (&Handle, Option<&Handle>),
        staged: bool,
    ) {
        let client = &self.client;
        // SAFETY (the closure): a one-word stand-in of its own for an array the launch does not touch (never one
        // buffer bound twice: wgpu).
        let one = || unsafe { ArrayArg::from_raw_parts(client.empty(8), 1) };
        // SAFETY: positions are bounded by `n`; routed positions by the bins' layout (each cube's range is
        // claimed from its bin's cursor, and a bin's range holds exactly its count); bins as in `count_bins`. The
        // mask, positions, ends and overflow are not used (unmasked, carrying values, unbounded).
        unsafe {
            route_scatter_kernel::launch_unchecked::<L, ByFirstBucket<S>, R>(
                client,
                cube_count(n.div_ceil(TILE) * CUBE),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(values.clone(), n),
                one(),
                ArrayArg::from_raw_parts(self.shape.clone(), SHAPE_WORDS),
                ArrayArg::from_raw_parts(cursor, width as usize),
                ArrayArg::from_raw_parts(to_keys.clone(), n),
                match to_values {
                    Some(v) => ArrayArg::from_raw_parts(v.clone(), n),
                    None => one(),
                },
                one(),
                one(),
                one(),
                one(),
                0u64,
                shift,
                false,
                false,
                if to_values.is_some() {
                    carry::VALUES
                } else {
                    carry::NOTHING
                },
                width,
                staged && width as usize == CUBE,
            )
        }
    }
}
