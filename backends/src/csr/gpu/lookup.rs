//! CSR lookups (issue 11): the query's vertex range `[offsets[v], offsets[v + 1])` read by a **tile** of
//! `tile` lanes, in windows of `tile` consecutive slots, the matches of each window found by one tile ballot:
//! the tile-cooperative bucket read of `hashtile_core::tile` with a runtime length (the range) instead of a
//! bucket's fixed one. A one-lane tile is a thread per query and runs no plane operation.
//!
//! One kernel serves three uses ([`LookupMode`]): the matches' **count** per query; **values**, the matching
//! values written from `starts[i]` (an exclusive scan of the counts); and **pairs**, as values plus the query's
//! index beside each (a probe join: the table's values are the build side's positions).

use super::CsrKey;
use cubecl::prelude::*;
use hashtile_core::tile::{tile_ballot, tile_lane, tile_loop_any};

/// What [`csr_lookup_kernel()`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LookupMode {
    /// `out_counts[i]` = the matches of query `i`.
    Count,
    /// The matching values of query `i` go to `out_values[starts[i]..]`.
    Values,
    /// As `Values`, and `out_index[starts[i]..]` gets `i` beside each value.
    Pairs,
}

/// The mode as the kernel's compile-time word.
pub(crate) const fn mode_word(m: LookupMode) -> u32 {
    match m {
        LookupMode::Count => 0,
        LookupMode::Values => 1,
        LookupMode::Pairs => 2,
    }
}

/// One query per tile of `tile` lanes (a power of two up to the plane size; 1: a thread per query). Launch
/// `queries * tile` units rounded up to whole cubes: every lane of a plane runs the window loop until all of
/// the plane's tiles are done (plane-uniform control flow for the ballots).
#[cube(launch_unchecked)]
// Compile-time branches stay apart from the runtime conditions they guard.
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
pub fn csr_lookup_kernel<K: CsrKey, V: CubePrimitive>(
    queries: &Array<K::Word>,
    offsets: &Array<u32>,
    keys: &Array<K::Word>,
    values: &Array<V>,
    out_counts: &mut Array<u32>,
    starts: &Array<u32>,
    out_values: &mut Array<V>,
    out_index: &mut Array<u32>,
    vertices: u32,
    seed: u32,
    mix: u32,
    #[comptime] tile: u32,
    #[comptime] mode: u32,
) {
    let tl = tile_lane(tile);
    let qi = ABSOLUTE_POS / tile as usize;
    let active = qi < queries.len();
    // Inactive tiles read query 0 and an empty range.
    let mut at = 0usize;
    if active {
        at = qi;
    }
    let q = queries[at];
    let v = K::vertex(q, vertices, seed, mix) as usize;
    let mut j = offsets[v];
    let mut end = offsets[v + 1];
    if !active {
        end = j;
    }
    let mut found = u32::new(0);
    let mut out = 0usize;
    if comptime!(mode != 0) {
        if active {
            out = starts[qi] as usize;
        }
    }
    loop {
        if !tile_loop_any(j < end, tile) {
            break;
        }
        let idx = j + tl.lane;
        let mut hit = false;
        if idx < end {
            hit = keys[idx as usize] == q;
        }
        let ballot = tile_ballot(hit, tl, tile);
        if comptime!(mode != 0) {
            if hit {
                let below = (1u32 << tl.lane) - 1u32;
                let w = out + (ballot & below).count_ones() as usize;
                out_values[w] = values[idx as usize];
                if comptime!(mode == 2) {
                    out_index[w] = qi as u32;
                }
            }
        }
        let c = ballot.count_ones();
        found += c;
        out += c as usize;
        j += tile;
    }
    if comptime!(mode == 0) {
        if active && tl.lane == 0 {
            out_counts[qi] = found;
        }
    }
}
