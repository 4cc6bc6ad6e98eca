//! Device inserts and erases in table order: a large batch of device keys is first partitioned by the table
//! range its keys' first probes read (the binned build's partition, `ByFirstBucket` parts of `2^shift` buckets,
//! one scatter pass into a few ranges), and the ordinary kernel then runs over the partitioned keys. Cubes are
//! scheduled in order, so the tiles running at any moment write one range of the table: their compare-and-swaps
//! meet lines that recent ones brought into the L2 cache, where a random batch's wait on DRAM each. The table is
//! the one the callers' order leaves (another order of keys within buckets).
//!
//! Finds stay in the callers' order: measured (H200, 2^26 keys, BCHT B = 8 and linear probing B = 1), the
//! partition and the gather of the answers back cost more than the reads gain (0.72-0.84x).

use super::GpuTable;
use super::binned::Carried;
use crate::device::layout::KeyLayout;
use crate::device::route::CUBE;
use crate::runtime::scan::exclusive_scan;
use crate::runtime::transfer::HostTransfer;
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
}

/// What [`GpuTable::order_batch`] carries beside the keys.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Carry {
    Values,
    Nothing,
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Chooses whether large device batches of inserts and erases run in table order ([`RangeOrder`]).
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

    /// Queues the partition of `n` device keys (and `values`) into the table ranges of
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
        let carried = match &ordered_values {
            Some(v) => Carried::Values(v),
            None => Carried::Nothing,
        };
        self.scatter_into_bins(
            (keys, values, n),
            (shift, width, cursor),
            &ordered_keys,
            carried,
            true,
        );
        Ordered {
            keys: ordered_keys,
            values: ordered_values,
        }
    }
}
