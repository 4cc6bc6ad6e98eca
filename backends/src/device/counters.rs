//! A static table's write counters on the device: the words inserts and erases count into, whoever runs them
//! (the table's own kernels, or a kernel of yours through the device API's writes, [`super::write`]), and the
//! one way every kernel adds to them ([`count_spread()`]).
//!
//! Layout of a table's counter array ([`INSERT_COUNTERS`] words): `[failures, added x 64, probes x 64,
//! retries x 64, erased x 64, reclaimed x 64]`. Statistics are spread over [`ADDED_COUNTERS`] words by cube,
//! each plane adding its sum with one atomic: one shared counter would serialise millions of atomics (one
//! counter per erased key held a batch of 2^25 erases at 6 G keys/s on the H200).

use cubecl::prelude::*;

/// Number of spread-out counters per statistic.
pub const ADDED_COUNTERS: u32 = 64;
/// The failure counter (pairs an insert gave up on, in the stash): word 0.
pub const FAILED_AT: u32 = 0;
/// First word of the new-key counters.
pub const ADDED_AT: u32 = 1;
/// First word of the probe counters.
pub const PROBES_AT: u32 = 1 + ADDED_COUNTERS;
/// First word of the lost compare-and-swap counters.
pub const RETRIES_AT: u32 = 1 + 2 * ADDED_COUNTERS;
/// First word of the erase counters (slots the device API's erases marked).
pub const ERASED_AT: u32 = 1 + 3 * ADDED_COUNTERS;
/// First word of the reclaim counters (erased slots inserts took again).
pub const RECLAIMED_AT: u32 = 1 + 4 * ADDED_COUNTERS;
/// Words of a table's counter array.
pub const INSERT_COUNTERS: usize = 1 + 5 * ADDED_COUNTERS as usize;

/// A table's counters read back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteCounts {
    /// Pairs inserts gave up on (in the stash, as far as it holds them).
    pub failed: usize,
    /// Keys inserts added.
    pub added: usize,
    /// Slots erases marked.
    pub erased: usize,
    /// Erased slots inserts took again (counted in `added` too).
    pub reclaimed: usize,
    /// Probe statistics (when the kernels counted them) of `ops` operations.
    pub stats: hashtile_core::ProbeStats,
}

/// Decodes a counter array of [`INSERT_COUNTERS`] words (or more: a framed launch's per-table failures follow)
/// for `ops` operations.
pub fn decode_counters(c: &[u32], ops: u64) -> WriteCounts {
    let sum = |at: u32| {
        c[at as usize..(at + ADDED_COUNTERS) as usize]
            .iter()
            .map(|&x| x as u64)
            .sum::<u64>()
    };
    WriteCounts {
        failed: c[FAILED_AT as usize] as usize,
        added: sum(ADDED_AT) as usize,
        erased: sum(ERASED_AT) as usize,
        reclaimed: sum(RECLAIMED_AT) as usize,
        stats: hashtile_core::ProbeStats {
            probes: sum(PROBES_AT),
            ops,
            retries: sum(RETRIES_AT),
        },
    }
}

/// Adds `value` of every lane of the plane to the spread-out counter of statistic `at` (one of the `*_AT`
/// words, or 0 for an array of [`ADDED_COUNTERS`] words of its own): one atomic per plane, by its first lane.
/// **All lanes of the plane must call it.**
#[cube]
pub fn count_spread(counters: &Array<Atomic<u32>>, at: u32, value: u32) {
    let total = plane_sum(value);
    if UNIT_POS_PLANE == 0u32 && total > 0u32 {
        counters[(at + CUBE_POS_X % ADDED_COUNTERS) as usize].fetch_add(total);
    }
}
