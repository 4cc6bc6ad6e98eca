//! Device batches in table order: a large batch of device keys is first partitioned by the table range its
//! keys' first probes read (the binned build's partition, [`ByFirstBucket`] parts of `2^shift` buckets, one
//! scatter pass into a few dozen ranges), and the ordinary kernel then runs over the partitioned keys. Cubes
//! are scheduled in order, so the tiles running at any moment probe one range of the table, a slice that fits
//! the L2 cache: each bucket line comes from DRAM once per batch instead of once per key. The table and the
//! answers are the same as the random order's (a find's answers go back to the callers' order through the
//! positions the partition wrote).

use super::GpuTable;
use super::binned::Carried;
use super::kernels::found_mode;
use crate::device::layout::KeyLayout;
use crate::device::route::{CUBE, route_gather_kernel};
use crate::runtime::launch::{CUBE_SIZE, cube_count};
use crate::runtime::scan::exclusive_scan;
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;

/// Whether a static GPU table runs large device batches in table order ([`GpuTable::set_range_order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RangeOrder {
    /// Every kernel runs over the batch in the callers' order.
    #[default]
    Off,
    /// Batches of at least [`MIN_ORDERED`] keys are partitioned into `2^bits` ranges of the table first.
    Ranges(u32),
}

/// The smallest batch that is put in table order: below it, the partition's three launches cost more than
/// the cache saves.
pub const MIN_ORDERED: usize = 1 << 16;

/// A batch in table order: its keys by range, and what was carried beside them.
pub(super) struct Ordered {
    pub keys: Handle,
    /// The values in the keys' order (when asked for).
    pub values: Option<Handle>,
    /// Each input position's place in the ordered batch (when asked for).
    pub positions: Option<Handle>,
}

/// What [`GpuTable::order_batch`] carries beside the keys.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Carry {
    Values,
    Positions,
    Nothing,
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Chooses whether large device batches (inserts, finds, erases) run in table order ([`RangeOrder`]).
    pub fn set_range_order(&mut self, order: RangeOrder) {
        self.range_order = order;
    }

    /// The table's range order.
    pub fn range_order(&self) -> RangeOrder {
        self.range_order
    }

    /// The ranges a batch of `n` keys is ordered into, as (bucket shift, counters), or `None` when it runs in
    /// the callers' order.
    pub(super) fn ranges_for(&self, n: usize) -> Option<(u32, u32)> {
        let RangeOrder::Ranges(bits) = self.range_order else {
            return None;
        };
        if n < MIN_ORDERED || self.count_probes || bits == 0 {
            return None;
        }
        let bucket_bits = u32::BITS - (self.num_buckets.max(2) - 1).leading_zeros();
        let shift = bucket_bits.saturating_sub(bits.min(13));
        let ranges = self.num_buckets.div_ceil(1 << shift);
        Some((shift, ranges.next_power_of_two().max(CUBE as u32)))
    }

    /// Queues the partition of `n` device keys (and `values`, or their positions) into the table ranges of
    /// `ranges_for` (`shift`, `width`).
    pub(super) fn order_batch(
        &self,
        (keys, values, n): (&Handle, &Handle, usize),
        (shift, width): (u32, u32),
        carry: Carry,
    ) -> Ordered {
        let client = &self.client;
        let counts = self.count_bins(keys, n, shift, width);
        let cursor = exclusive_scan(client, &counts, width as usize);
        let ordered_keys = client.empty(n * std::mem::size_of::<L::Key>());
        let ordered_values =
            (carry == Carry::Values).then(|| client.empty(n * std::mem::size_of::<L::Value>()));
        let positions = (carry == Carry::Positions).then(|| client.empty(n * 4));
        let carried = match (&ordered_values, &positions) {
            (Some(v), _) => Carried::Values(v),
            (_, Some(p)) => Carried::Positions(p),
            _ => Carried::Nothing,
        };
        self.scatter_into_bins(
            (keys, values, n),
            (shift, width, cursor),
            &ordered_keys,
            carried,
        );
        Ordered {
            keys: ordered_keys,
            values: ordered_values,
            positions,
        }
    }

    /// Queues a find of `n` device keys in table order (`ranges`): the partition with positions, the find
    /// into answers in the ordered batch's order, and the gather of the answers (values into `out`, presence
    /// per `mode`: [`found_mode::NONE`], `FLAGS` or `BITS`, into `found`) back to the callers' order.
    pub(super) fn launch_find_ordered(
        &self,
        (keys, out, found): (&Handle, &Handle, Option<&Handle>),
        mode: u32,
        n: usize,
        ranges: (u32, u32),
    ) {
        let client = &self.client;
        let ordered = self.order_batch((keys, keys, n), ranges, Carry::Positions);
        let positions = ordered.positions.expect("positions carried");
        let answers = client.empty(n * std::mem::size_of::<L::Value>());
        let flags = (mode != found_mode::NONE).then(|| client.empty(n * 4));
        let inner = if flags.is_some() {
            found_mode::FLAGS
        } else {
            found_mode::NONE
        };
        self.launch_find(&ordered.keys, &answers, flags.as_ref(), inner, n);
        let bits_len = if mode == found_mode::BITS {
            n.div_ceil(32)
        } else {
            n
        };
        if mode == found_mode::BITS {
            crate::runtime::launch::fill_u32(client, found.expect("bits asked for"), bits_len, 0);
        }
        // SAFETY: `positions[i] < n` for each of the `n` keys (the partition's), answers and flags hold `n`
        // words, `out` `n` values, and `found` `n` flags or `n / 32` bit words where asked for (else stand-ins
        // the gather does not touch: `found_mode::NONE`).
        unsafe {
            route_gather_kernel::launch_unchecked::<L, R>(
                client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(positions, n),
                ArrayArg::from_raw_parts(answers, n),
                match flags {
                    Some(f) => ArrayArg::from_raw_parts(f, n),
                    None => ArrayArg::from_raw_parts(self.dummy.clone(), 1),
                },
                ArrayArg::from_raw_parts(out.clone(), n),
                ArrayArg::from_raw_parts(
                    found.cloned().unwrap_or_else(|| client.empty(4)),
                    if mode == found_mode::NONE {
                        1
                    } else {
                        bits_len
                    },
                ),
                true,
                mode,
            )
        }
    }
}
