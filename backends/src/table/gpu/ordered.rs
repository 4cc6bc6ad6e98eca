//! Device inserts and erases in table order: a large batch of device keys is first partitioned by the table
//! range its keys' first probes read (the binned build's partition, `ByFirstBucket` parts of `2^shift` buckets,
//! one scatter pass into a few ranges), and the ordinary kernel then runs over the partitioned keys. Cubes are
//! scheduled in order, so the tiles running at any moment write one range of the table: their compare-and-swaps
//! meet lines that recent ones brought into the L2 cache, where a random batch's wait on DRAM each. The table
//! holds the same pairs as after the callers' order, placed as a concurrent insert of them may place them: where
//! keys sit differs (as between two runs of the same insert), and finds of present keys in a linear probing B = 1
//! table built in table order ran at 0.98x (load 0.8) and 0.92x (load 0.9) of one built in the callers' order
//! (H200, 2^26 keys; absent keys alike), for its inserts' 1.33-1.45x.
//!
//! Finds stay in the callers' order: measured (H200, 2^26 keys, BCHT B = 8 and linear probing B = 1), the
//! partition and the gather of the answers back cost more than the reads gain (0.72-0.84x).

use super::GpuTable;
use crate::device::layout::KeyLayout;
use crate::device::route::CUBE;
use crate::runtime::transfer::HostTransfer;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;

/// Whether a static GPU table runs large device batches of inserts and erases in table order
/// ([`GpuTable::set_range_order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RangeOrder {
    /// Every kernel runs over the batch in the callers' order.
    Off,
    /// The default: erases, and inserts where measured faster (see `GpuTable::would_order_insert`), of
    /// batches of at least [`MIN_ORDERED`] keys and of at least a key per four cache lines of the table, into
    /// tables of at least [`AUTO_TABLE_BYTES`] of slots, are partitioned into ranges of about [`RANGE_BYTES`]
    /// of the table ([`auto_range_bits`]); others run in the callers' order.
    #[default]
    Auto,
    /// Batches of at least [`MIN_ORDERED`] keys are partitioned into `2^bits` ranges of the table (`bits` at
    /// most 8; larger values count as 8).
    Ranges(u32),
}

/// The smallest batch that is put in table order: below it, the partition's launches cost more than the cache
/// saves.
pub const MIN_ORDERED: usize = 1 << 16;

/// The smallest table (bytes of slots) that [`RangeOrder::Auto`] orders batches for: a smaller one stays in the
/// L2 cache of the GPUs measured (H100 and H200: 50 MB) in any order.
pub const AUTO_TABLE_BYTES: usize = 64 << 20;

/// The bytes of the table a range of [`RangeOrder::Auto`] covers: below the L2 cache, so that the lines of the
/// range the running cubes write stay in it (measured on an H200, 640 MB tables: 16 ranges ran 0.89-1.10x of
/// 32, and 8 or 64 slower).
pub const RANGE_BYTES: usize = 20 << 20;

/// The most ranges (as a power of two): one counter per unit of the partition's cubes.
const MAX_RANGE_BITS: u32 = 8;

/// The ranges (as a power of two) [`RangeOrder::Auto`] orders a batch of `n` keys into, for a table of
/// `slot_bytes` bytes of slots, or `None` when the batch runs in the callers' order: a small table, a small
/// batch, or a batch too sparse over the table for neighbouring keys to share its lines.
pub fn auto_range_bits(slot_bytes: usize, n: usize) -> Option<u32> {
    let dense = n.saturating_mul(4 * 64) >= slot_bytes;
    (slot_bytes >= AUTO_TABLE_BYTES && n >= MIN_ORDERED && dense).then(|| {
        slot_bytes
            .div_ceil(RANGE_BYTES)
            .next_power_of_two()
            .trailing_zeros()
            .clamp(1, MAX_RANGE_BITS)
    })
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

    /// Whether a device batch of `n` keys inserted now (`insert_device_async` and the calls built on it) would
    /// run in table order (under [`RangeOrder::Auto`]: large dense batches of schemes that fill first buckets
    /// first, in tiles of one lane or into sets).
    pub fn would_order_insert(&self, n: usize) -> bool {
        self.ranges_for(n, true).is_some() && self.bins_for(n).is_none()
    }

    /// Whether a device erase of `n` keys ([`GpuTable::erase_device`]) would run in table order.
    pub fn would_order_erase(&self, n: usize) -> bool {
        self.ranges_for(n, false).is_some()
    }

    /// The ranges a batch of `n` keys is ordered into (an insert with `insert`, else an erase), as the bucket
    /// shift of a range, or `None` when it runs in the callers' order.
    ///
    /// [`RangeOrder::Auto`] orders every large erase, but only the inserts of schemes that fill first buckets
    /// first (`ProbingScheme::FILLS_FIRST`) in tiles of one lane, or into sets (keys alone): measured on an H200
    /// (2^26 keys, loads 0.8 / 0.9), ordered inserts ran 1.33-1.51x (linear probing B = 1), 1.14-1.19x (1CHT) and
    /// 1.08-1.47x (sets of BCHT B = 8 and linear probing B = 1), but for maps in wider tiles 0.95-0.97x (BCHT
    /// B = 16, IHT B = 16), 1.04-1.14x with finds after them at 0.92-0.98x (double hashing B = 4), 1.02-1.11x
    /// (BCHT B = 8; NOTES.md open problem 25), and 0.23x for P2BHT, whose choice of the emptier bucket then sees
    /// its neighbours' keys land at once.
    pub(super) fn ranges_for(&self, n: usize, insert: bool) -> Option<u32> {
        let slot_bytes = self.capacity() * L::WORD_BYTES;
        let inserts_gain = S::FILLS_FIRST && (self.tile_width == 1 || !L::HAS_VALUES);
        let bits = match self.range_order {
            RangeOrder::Off => None,
            RangeOrder::Auto if insert && !inserts_gain => None,
            RangeOrder::Auto => auto_range_bits(slot_bytes, n),
            RangeOrder::Ranges(bits) => (n >= MIN_ORDERED && bits > 0).then_some(bits),
        }?;
        if self.count_probes {
            return None;
        }
        let bucket_bits = u32::BITS - (self.num_buckets.max(2) - 1).leading_zeros();
        Some(bucket_bits.saturating_sub(bits.min(MAX_RANGE_BITS)))
    }

    /// Queues the partition of `n` device keys (and, with `with_values`, their `values`) into the table ranges
    /// of `2^shift` buckets (`ranges_for`), and returns the ordered keys (and values). The scatter is staged
    /// through shared memory when values come along (an insert's; in two calls of one H200, the ordered insert
    /// of linear probing B = 1 ran 1.04-1.12x with it), direct for keys alone (an erase's: the staged scatter of
    /// 2^25 keys took 0.35 ms against 0.18).
    pub(super) fn order_batch(
        &self,
        batch: (&Handle, &Handle, usize),
        shift: u32,
        with_values: bool,
    ) -> (Handle, Option<Handle>) {
        self.partition(batch, (shift, CUBE as u32), with_values, with_values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_orders_dense_batches_into_large_tables() {
        // 2^26 pairs at load 0.8 in 8-byte slots (640 MiB): 32 ranges of 20 MiB, for a full build and for an
        // erase of half of them; a set's 4-byte slots, 16 ranges.
        let map = (1usize << 26) * 10 / 8 * 8;
        assert_eq!(auto_range_bits(map, 1 << 26), Some(5));
        assert_eq!(auto_range_bits(map, 1 << 25), Some(5));
        assert_eq!(auto_range_bits(map / 2, 1 << 26), Some(4));
        // A batch of 2^20 keys into that table: a key per ten lines, in the callers' order.
        assert_eq!(auto_range_bits(map, 1 << 20), None);
        // Small tables and small batches: the callers' order.
        assert_eq!(auto_range_bits(AUTO_TABLE_BYTES - 1, 1 << 26), None);
        assert_eq!(auto_range_bits(AUTO_TABLE_BYTES, MIN_ORDERED - 1), None);
        assert_eq!(auto_range_bits(AUTO_TABLE_BYTES, 1 << 20), Some(2));
        // At most 2^8 ranges.
        assert_eq!(auto_range_bits(1 << 40, 1 << 40), Some(MAX_RANGE_BITS));
    }
}
