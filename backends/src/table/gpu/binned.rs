//! The binned build (issue 32): a large device batch into an **empty** table is first partitioned by the table
//! range its keys' first probes read, into **bins** of `2^shift` consecutive buckets (a slice of the table of
//! [`SLICE_BYTES`]), then [`binned_place_kernel()`] fills each bin's first buckets on chip: a shared-memory
//! counter per bucket hands each key its slot, which it writes with a plain store (no compare-and-swap, no
//! bucket read, one writer per slot), and a few cubes at a time work through the bins in order, so the slices
//! they write stay in the L2 cache and reach DRAM whole. The keys a full first bucket cannot take (a few per
//! cent at the loads users build to) then go through the probing insert (`kernels::select::COUNTED`), which places
//! them by the scheme's own rules.
//!
//! It is valid for schemes whose new keys fill their first bucket first (`ProbingScheme::FILLS_FIRST`: BCHT,
//! 1CHT, linear probing, double hashing): a key stored past its first bucket found that bucket full, as the
//! probing insert would leave it, so every find, erase and device-API call reads the table unchanged. The
//! order of keys in a bucket is the counters', not the batch's.
//!
//! Opt-in ([`Binning::Slices`]; the default is the probing insert): measured side by side on an H200 (2^26
//! keys, BCHT B = 8, load 0.8, Nsight Compute), a build takes 8.8 ms against the probing insert's 5.9: the two
//! partition passes 4.1 ms (each key a 4-byte store to a run of its own: the random writes binning was meant
//! to avoid), the counts 0.95 ms (each cube sweeps all 8192 counters), the placement 2.4 ms (264 cubes, latency
//! bound) and the surplus insert 1.4 ms (launched over the whole batch). NOTES.md (open problems) has the
//! levers. An earlier form, the probing insert run over the binned order, ran at 0.70x: neighbouring keys'
//! tiles raced for the same first empty slot and retried.
//!
//! The partition (`partition`) is the one paged and sharded tables route with (`crate::device::route`, parts
//! named by `ByFirstBucket`): a count per bin, an exclusive scan of the counts, and a scatter of keys and values
//! into their bins, each cube taking one range per bin. The batch is copied once more in device memory, with
//! room for the surplus, while the build runs.

use super::GpuTable;
use super::device::Selection;
use super::kernels::{INSERT_COUNTERS, PLACE_CUBE, binned_place_kernel};
use crate::device::layout::KeyLayout;
use crate::device::route::CUBE;
use crate::device::shape::shape_scalars;
use crate::runtime::launch::fill_u32;
use crate::runtime::scan::exclusive_scan;
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;

/// Whether a static GPU table builds device batches into an empty table by bins ([`GpuTable::set_binning`]).
///
/// The default is `Off`: measured side by side (H200, BCHT B = 8, load 0.8, 2^22 to 2^26 keys), the binned
/// build runs at 0.51-0.69x of the probing insert, its partition's scattered writes and per-cube counter
/// sweeps costing more than the placement saves (NOTES.md, open problems). `Slices` runs it: the same table
/// and answers, another order of keys within buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Binning {
    /// Every key probes the table at random (the probing insert). The default.
    #[default]
    Off,
    /// Bin every device batch into an empty table (of a scheme that fills first buckets first, with packed
    /// pairs, on a device with room for the shared counters), into slices of (at most) this many bytes of the
    /// table ([`SLICE_BYTES`] is the size measured).
    Slices(usize),
}

/// Bytes of the table one bin covers in the measurements (`Binning::Slices(SLICE_BYTES)`): 2048 buckets of
/// eight packed pairs, whose counters take 8 KB of shared memory.
pub const SLICE_BYTES: usize = 128 << 10;

/// The most bins a partition uses: its shared counters (4 bytes each) within CUDA's 48 KB of static shared
/// memory, and within the device's own limit (`bins_of`).
const MAX_BINS: u32 = 8192;

/// Bins per group of the first of two partition passes (`queue_binned_insert`), as a shift.
const COARSE_SHIFT: u32 = 6;

/// Cubes of the placement per multiprocessor: few, so that the slices being written fit the L2 cache.
const PLACE_CUBES_PER_SM: u32 = 2;

/// Cubes of the placement where the runtime does not say how many multiprocessors the device has.
const PLACE_CUBES_DEFAULT: u32 = 128;

/// How a batch is binned: `2^shift` buckets per bin, `bins` bins, `width` partition counters (a power of
/// two, at least `bins` and a cube's worth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bins {
    pub shift: u32,
    pub bins: u32,
    pub width: u32,
}

/// The bins of slices of at most `slice_bytes` over `num_buckets` buckets of `bucket_bytes` each, with at
/// most `shared_bytes` of shared memory per cube for the counters (the partition's, one per bin; the
/// placement's, one per bucket of a bin), or `None` when they do not fit.
pub(crate) fn bins_of(
    num_buckets: u32,
    bucket_bytes: usize,
    slice_bytes: usize,
    shared_bytes: usize,
) -> Option<Bins> {
    let max_bins = MAX_BINS.min((shared_bytes / 4) as u32);
    // A slice larger than the table is one bin of the table's size (rounded up to a power of two).
    let mut shift = (slice_bytes / bucket_bytes.max(1))
        .max(1)
        .ilog2()
        .min(u32::BITS - (num_buckets.max(1) - 1).leading_zeros());
    while num_buckets.div_ceil(1 << shift) > max_bins {
        shift += 1;
    }
    let bins = num_buckets.div_ceil(1 << shift).max(1);
    let width = bins.next_power_of_two().max(CUBE as u32);
    ((4usize << shift) <= shared_bytes && width <= max_bins.max(CUBE as u32)).then_some(Bins {
        shift,
        bins,
        width,
    })
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Chooses whether device batches into an empty table are built by bins ([`Binning`]; default `Off`).
    pub fn set_binning(&mut self, binning: Binning) {
        self.binning = binning;
    }

    /// The table's binning choice.
    pub fn binning(&self) -> Binning {
        self.binning
    }

    /// Whether a device batch of `n` keys inserted now (`insert_device_async` and the calls built on it) would
    /// be built by bins.
    pub fn would_bin(&self, n: usize) -> bool {
        self.bins_for(n).is_some()
    }

    /// The bins a device batch of `n` keys is built through, or `None` when it goes through the probing insert:
    /// binning is off, the table is not empty or has queued inserts, the scheme does not fill first buckets
    /// first, pairs are not packed, probes are being counted, or the device lacks the shared memory.
    pub(super) fn bins_for(&self, n: usize) -> Option<Bins> {
        let Binning::Slices(slice) = self.binning else {
            return None;
        };
        let empty =
            self.len == 0 && !self.unsettled && self.erased == hashtile_core::tile::EMPTY_WORD;
        let packed = L::MOVES_PAIRS && L::HAS_VALUES && L::WORD_BYTES == 8;
        if n == 0 || !empty || !S::FILLS_FIRST || !packed || self.count_probes {
            return None;
        }
        let shared = self.client.properties().hardware.max_shared_memory_size;
        bins_of(
            self.num_buckets,
            self.bucket_size as usize * L::WORD_BYTES,
            slice,
            shared.min(48 << 10),
        )
    }

    /// Queues the binned build of `n` device pairs into the (empty) table: the partition into `bins` (in two
    /// passes when there are many bins), the placement, and the probing insert of the surplus (counted as `n`
    /// queued operations).
    pub(super) fn queue_binned_insert(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
        bins: Bins,
    ) {
        let client = self.client.clone();
        let key_bytes = n * std::mem::size_of::<L::Key>();
        let value_bytes = n * std::mem::size_of::<L::Value>();
        let w = bins.width as usize;
        let counts = self.count_bins(keys, n, bins.shift, bins.width);
        // Each bin's first position: the last pass's cursors (which then end where the next bin starts), and a
        // copy the placement reads the bins' ranges from.
        let cursor = exclusive_scan(&client, &counts, w);
        let starts = exclusive_scan(&client, &counts, w);
        let (binned_keys, binned_values) = (client.empty(key_bytes), client.empty(value_bytes));
        // A pass into thousands of bins scatters each key to a run of its own (the random writes binning is meant
        // to avoid), so many bins are reached in two passes: first into groups of `2^COARSE_SHIFT` bins (runs
        // of tens of keys per cube), then each group into its bins (a cube's keys then span a group or two).
        let (mut from_keys, mut from_values) = (keys.clone(), values.clone());
        let spare = if bins.bins > 1 << COARSE_SHIFT {
            let coarse_width = (bins.width >> COARSE_SHIFT).max(CUBE as u32);
            let coarse_shift = bins.shift + COARSE_SHIFT;
            let (k, v) =
                self.partition((keys, values, n), (coarse_shift, coarse_width), true, false);
            let v = v.expect("values asked for");
            (from_keys, from_values) = (k.clone(), v.clone());
            Some((k, v))
        } else {
            None
        };
        self.scatter_into_bins(
            (&from_keys, &from_values, n),
            (bins.shift, bins.width, cursor),
            (&binned_keys, Some(&binned_values)),
            false,
        );
        // The surplus reuses the first pass's buffers where there are some (stream order: that pass is done).
        let (surplus_keys, surplus_values) =
            spare.unwrap_or_else(|| (client.empty(key_bytes), client.empty(value_bytes)));
        let surplus = client.empty(4);
        fill_u32(&client, &surplus, 1, 0);
        let sms = client.properties().hardware.num_streaming_multiprocessors;
        let place_cubes = sms.map_or(PLACE_CUBES_DEFAULT, |s| s * PLACE_CUBES_PER_SM);
        // SAFETY: bin `b` reads positions `starts[b]..starts[b + 1]` (within `n`: the scan of the counts), its
        // keys' first buckets lie in `[b << shift, (b + 1) << shift)` (shared counters of that width) and below
        // the bucket count, so every slot written is in the table; the surplus takes at most `n` positions.
        unsafe {
            binned_place_kernel::launch_unchecked::<S, L, R>(
                &client,
                CubeCount::Static(place_cubes.min(bins.bins).max(1), 1, 1),
                CubeDim::new_1d(PLACE_CUBE),
                ArrayArg::from_raw_parts(binned_keys.clone(), n),
                ArrayArg::from_raw_parts(binned_values.clone(), n),
                ArrayArg::from_raw_parts(starts, w + 1),
                ArrayArg::from_raw_parts(self.keys.clone(), self.capacity()),
                ArrayArg::from_raw_parts(surplus_keys.clone(), n),
                ArrayArg::from_raw_parts(surplus_values.clone(), n),
                ArrayArg::from_raw_parts(surplus.clone(), 1),
                ArrayArg::from_raw_parts(self.counters.clone(), INSERT_COUNTERS),
                shape_scalars(self.shape_words()),
                bins.bins,
                self.bucket_size,
                bins.shift,
            )
        }
        self.launch_insert(
            &surplus_keys,
            &surplus_values,
            Selection::Counted(&surplus),
            n,
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_cover_the_table_in_slices() {
        // 2^26 keys at load 0.8 in buckets of 8 packed pairs (64 bytes): slices of 2048 buckets.
        let nb = 10_485_760u32;
        let b = bins_of(nb, 64, SLICE_BYTES, 48 << 10).unwrap();
        assert_eq!((b.shift, b.bins, b.width), (11, 5120, 8192));
        assert!((b.bins as u64) << b.shift >= nb as u64);
        // 32 KB of shared memory (lavapipe) still holds 8192 counters; with 16 KB, bins twice as large; with
        // 4 KB, neither the bins' nor a bin's counters fit.
        assert_eq!(bins_of(nb, 64, SLICE_BYTES, 32 << 10), Some(b));
        assert_eq!(
            bins_of(nb, 64, SLICE_BYTES, 16 << 10),
            Some(Bins {
                shift: 12,
                bins: 2560,
                width: 4096
            })
        );
        assert_eq!(bins_of(nb, 64, SLICE_BYTES, 4 << 10), None);
        // A table too large for MAX_BINS slices gets larger slices, until a bin's counters do not fit.
        assert_eq!(bins_of(u32::MAX, 64, SLICE_BYTES, 48 << 10), None);
        let big = bins_of(1 << 24, 64, SLICE_BYTES, 48 << 10).unwrap();
        assert!(big.bins <= MAX_BINS && (big.bins as u64) << big.shift >= 1 << 24);
        // A slice larger than the table: one bin of the table's size.
        assert_eq!(
            bins_of(3000, 64, 64 << 20, 48 << 10).unwrap(),
            Bins {
                shift: 12,
                bins: 1,
                width: 256
            }
        );
        // One bucket, one bin; slices smaller than a bucket, one bucket per bin.
        assert_eq!(bins_of(1, 64, SLICE_BYTES, 48 << 10).unwrap().bins, 1);
        assert_eq!(
            bins_of(100, 64, 1, 48 << 10).unwrap(),
            Bins {
                shift: 0,
                bins: 100,
                width: 256
            }
        );
    }
}
