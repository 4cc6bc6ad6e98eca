//! Iceberg hashing (IHT), BGHT paper §3.2 and Listing 5.
//!
//! The paper's rule (`num_hashes = 3`, [`SchemeInfo::paper_params`]): three hash functions, `H0` picks the
//! **primary** bucket, `H1` and `H2` two **secondary** buckets. The default walks one secondary sequence instead
//! (`num_hashes = 2`, below).
//!
//! **Insert.** Read the primary. If its load is below the threshold `t`, claim its first empty slot (the common
//! case, one probe). Otherwise read both secondaries and claim a slot in the less loaded one; if both are full,
//! fall back to the primary if it still has room. If that is full too, the paper's scheme fails; with
//! `max_chain > 0` (the default) the key walks on through its **overflow sequence** (`hash::overflow_bucket`,
//! double hashing over buckets) and claims the first slot it finds, reading at most `max_chain` more buckets.
//! That is what BGHT's own `iht` does for every key past the primary (its code, not its paper: a double-hashing
//! backyard, unbounded), and why it builds at load 0.9 where the two-choice rule alone stops near 0.84 for
//! B = 16; here only keys whose three buckets are all full take it, so the probe counts below that point are the
//! paper's. `max_chain = 0` is the paper's scheme exactly. The table is **stable**: a stored pair never moves.
//! With upsert on, a key found in any bucket read on the way is updated instead. A claim in the primary or a
//! secondary that loses a race restarts from the primary (the paper's "repeat the process upon failure"); one in
//! the overflow sequence re-reads its bucket (first fit: a racing duplicate walked the same sequence).
//!
//! Why the early claim is safe with upsert: a key only goes to a secondary when its primary's load was `>= t`,
//! and loads never decrease, so a primary that is below `t` now never held the key in a secondary.
//!
//! **One secondary sequence (`num_hashes = 2`, BGHT's code).** BGHT's `iht` does not read two secondaries: a key
//! whose primary is at or above `t` walks one double-hashing sequence of buckets and claims in the first with
//! room. With `num_hashes = 2` this scheme does the same along `H1, H2, H3`, then the overflow sequence (up to
//! `max_chain` buckets in all): one secondary read in the common case instead of two, and a find of an absent
//! key stops at its primary when that is below `t` (a key only leaves a primary whose load was `>= t`), or at
//! the first secondary with room. A lost claim re-reads the same bucket. This is the default: it inserts and finds
//! absent keys faster than the paper's rule. `num_hashes = 3` ([`SchemeInfo::paper_params`]) is the paper's
//! two-choice rule, whose probe counts the snapshots compare with the paper.
//!
//! **Racing upserts of one key converge under the default walk** (`num_hashes = 2`), as linear probing's do: the
//! primary's slots fill in order (every claim takes its first empty slot, and nothing empties during a launch),
//! so a copy that reads the primary at or above `t` saw every slot a racing copy could have claimed below `t`,
//! and found the key there if one had; past the primary both copies walk one sequence first fit, and a lost
//! claim re-reads its bucket. Kernels of the device API may then write a key from several lanes at once (the
//! device_writes test counts 4 copies a key at load 0.9). The two-choice rule (`num_hashes = 3`) picks the less
//! loaded secondary, and racing copies may pick differently.
//!
//! **Find.** Primary, then both secondaries; no early exit on a non-full bucket (paper §5.3). (The argument
//! above would allow stopping after a primary below `t`; kept paper-faithful so probe counts compare.) A key
//! can only be in its overflow sequence when its three buckets are full (buckets never empty); a find that
//! found the last of them full reads on along the sequence until the key, a bucket with a free slot (first fit
//! would have stopped there), or `max_chain` buckets.

use cubecl::prelude::*;
use hashtile_core::scheme::{
    BucketView, ProbeState, ProbingScheme, SchemeInfo, SchemeParams, Step, action, make_step,
    no_more_matches, reset_state, sequence,
};

/// Iceberg hash table scheme (default `B = 16`, threshold `t = 13`, i.e. about 80% of `B`; one secondary sequence,
/// `num_hashes = 2`, by default; the paper's two secondaries with `num_hashes = 3`, [`SchemeInfo::paper_params`];
/// overflow sequences of up to [`DEFAULT_OVERFLOW`] buckets).
#[derive(Debug, Clone, Copy, Default)]
pub struct Iht;

/// Default `max_chain` of IHT: overflow buckets a key may read once its three buckets are full. Far more than a
/// build below load 0.99 needs (first fit along a double-hashing sequence), and a bound on a hopeless one.
pub const DEFAULT_OVERFLOW: u32 = 128;

/// Reading the primary.
const PHASE_PRIMARY: u32 = 0;
/// Reading the first secondary.
const PHASE_SEC0: u32 = 1;
/// Reading the second secondary.
const PHASE_SEC1: u32 = 2;
/// Reading the overflow sequence (hash indices 3, 4, ...).
const PHASE_OVERFLOW: u32 = 3;
/// The first hash index of the overflow sequence.
const FIRST_OVERFLOW: u32 = 3;

/// Occupied slots of a bucket.
#[cube]
fn load_of(view: BucketView, #[comptime] bucket_size: u32) -> u32 {
    bucket_size - view.empty.count_ones()
}

#[cube]
impl ProbingScheme for Iht {
    const STABLE: bool = true;
    const SEQUENCE: u32 = sequence::OVERFLOW;

    fn insert_start(state: &mut ProbeState, key_mix: u32) {
        reset_state(state, key_mix);
        state.phase = PHASE_PRIMARY;
    }

    fn insert_step(
        state: &mut ProbeState,
        view: BucketView,
        params: SchemeParams,
        #[comptime] bucket_size: u32,
    ) -> Step {
        let mut act = u32::new(action::NEXT as i64);
        let mut target = u32::new(0);
        let mut slot = u32::new(0);
        if view.matched != 0 && params.upsert == 1 {
            act = action::UPDATE;
            target = state.hash_index;
            slot = view.matched.trailing_zeros();
        } else if state.phase == PHASE_PRIMARY {
            if load_of(view, bucket_size) < params.threshold {
                act = action::CLAIM;
                slot = view.empty.trailing_zeros();
            } else {
                // On to the secondaries: with `h = 3` both are read, then the less loaded one is claimed (the
                // primary's free slots are kept for the paper's fallback); with `h = 2` the one sequence is
                // walked from `H1`, first fit. (One branch-free assignment: each extra branch here cost the GPU
                // kernel registers.)
                // (`evictions`, the overflow walk's length, is still 0: IHT never evicts, and a walk never
                // returns to the primary.)
                state.aux = view.empty.trailing_zeros() & 0xffu32; // 32 (CUDA, CPU) or all ones (SPIR-V) when full
                state.hash_index = 1u32;
                state.phase =
                    PHASE_SEC0 + (3u32 - params.num_hashes) * (PHASE_OVERFLOW - PHASE_SEC0);
            }
        } else if state.phase == PHASE_SEC0 {
            // One scratch word for the three facts the second secondary's step needs (a register fewer in the
            // GPU insert loop): the primary's first empty slot (bits 0-7, 32: none), the first secondary's load
            // (bits 16-23) and first empty slot (bits 24-31).
            state.aux |=
                (load_of(view, bucket_size) << 16u32) | (view.empty.trailing_zeros() << 24u32);
            state.phase = PHASE_SEC1;
            state.hash_index = 2u32;
        } else if state.phase == PHASE_OVERFLOW {
            if view.empty != 0 {
                // First fit along the overflow sequence.
                act = action::CLAIM;
                target = state.hash_index;
                slot = view.empty.trailing_zeros();
                // A lost claim re-reads this bucket (the state stays): a racing duplicate of the key walked the
                // same sequence and would show here.
            } else {
                state.evictions += 1u32;
                if state.evictions >= params.max_chain {
                    act = action::FAIL;
                } else {
                    state.hash_index += 1u32;
                }
            }
        } else {
            let load0 = (state.aux >> 16u32) & 0xffu32;
            let primary_slot = state.aux & 0xffu32;
            let load1 = load_of(view, bucket_size);
            let mut overflow = false;
            if load0 == bucket_size && load1 == bucket_size {
                if primary_slot < bucket_size {
                    act = action::CLAIM;
                    slot = primary_slot;
                } else if params.max_chain > 0 {
                    overflow = true;
                } else {
                    act = action::FAIL;
                }
            } else if load0 <= load1 {
                act = action::CLAIM;
                target = 1u32;
                slot = state.aux >> 24u32;
            } else {
                act = action::CLAIM;
                target = 2u32;
                slot = view.empty.trailing_zeros();
            }
            if overflow {
                // All three buckets are full: walk the overflow sequence.
                state.phase = PHASE_OVERFLOW;
                state.hash_index = FIRST_OVERFLOW;
            } else {
                // A lost claim restarts from the primary.
                state.phase = PHASE_PRIMARY;
                state.hash_index = 0u32;
            }
        }
        make_step(act, target, slot)
    }

    fn after_evict(state: &mut ProbeState, _from_hash: u32, _params: SchemeParams) {
        // Iceberg hashing never evicts; restart if a driver ever hands a pair back.
        state.phase = PHASE_PRIMARY;
        state.hash_index = 0u32;
    }

    fn find_more(state: &mut ProbeState, _view: BucketView, _params: SchemeParams) -> Step {
        no_more_matches(state)
    }

    fn copies_may_split(params: SchemeParams) -> bool {
        // The two-choice rule takes the less loaded secondary, and a copy that finds the primary below its
        // threshold stays there while a later one goes on; the one-sequence rule (`num_hashes = 2`) is first fit
        // after a primary that only fills, and its copies meet (`SchemeInfo::upserts_converge`).
        params.num_hashes == 3u32
    }

    fn find_start(state: &mut ProbeState) {
        reset_state(state, 1u32);
    }

    fn find_step(
        state: &mut ProbeState,
        view: BucketView,
        params: SchemeParams,
        #[comptime] bucket_size: u32,
    ) -> Step {
        let mut act = u32::new(action::ABSENT as i64);
        let mut slot = u32::new(0);
        let target = state.hash_index;
        let two_choice = params.num_hashes == 3u32;
        // The last hash index an insert's walk may have read (see `candidates`): `max_chain + 2` for `h = 3`,
        // `max_chain` for `h = 2`.
        let walk_end = params.max_chain + 2u32 * params.num_hashes - 4u32;
        if view.matched != 0 {
            act = action::FOUND;
            slot = view.matched.trailing_zeros();
        } else if state.hash_index == 0u32 {
            // One secondary sequence: a key only left a primary whose load was at least `t`, and loads never
            // drop, so a primary below `t` proves the key absent (one read for most absent keys).
            if two_choice || load_of(view, bucket_size) >= params.threshold {
                state.hash_index = 1u32;
                act = action::NEXT;
            }
        } else if two_choice && state.hash_index == 1u32 {
            state.hash_index = 2u32;
            act = action::NEXT;
        } else if view.empty == 0 && state.hash_index < walk_end {
            // From a full second secondary on, the key may sit further along its overflow sequence: first fit
            // never passes a bucket with room, so the walk stops at one (or after `max_chain` buckets). (Only
            // keys whose three buckets were all full went there; testing the last bucket alone reads a few more
            // buckets for absent keys but carries no state: each value live across the find loop costs GPU
            // registers, and tracking all three cost IHT's finds 8-18% on the H100.)
            state.hash_index += 1u32;
            act = action::NEXT;
        }
        make_step(act, target, slot)
    }
}

impl SchemeInfo for Iht {
    const NAME: &'static str = "iht";

    /// The default walk (`num_hashes = 2`) converges (module docs); the two-choice rule does not.
    fn upserts_converge(params: &SchemeParams) -> bool {
        params.num_hashes == 2
    }

    fn default_params(bucket_size: u32) -> SchemeParams {
        // One secondary sequence (BGHT's code): at or past BGHT's IHT in every measured cell, where the paper's
        // two-choice rule inserts at 0.87-0.89x and finds absent keys at 0.82-0.91x (NOTES.md D11).
        SchemeParams {
            num_hashes: 2,
            ..Self::paper_params(bucket_size)
        }
    }

    fn paper_params(bucket_size: u32) -> SchemeParams {
        // BGHT: t a little above the average bucket load; about 80% of B.
        let threshold = ((bucket_size as f64) * 0.8).round().max(1.0) as u32;
        SchemeParams {
            num_hashes: 3,
            // Overflow buckets a key whose three buckets are full may read (0: the paper's scheme exactly, which
            // fails there).
            max_chain: DEFAULT_OVERFLOW,
            threshold,
            upsert: 1,
        }
    }

    fn candidates(params: &SchemeParams) -> u32 {
        if params.num_hashes == 2 {
            // The primary and the walk's buckets, hash indices 1..=max(max_chain, 1).
            1 + params.max_chain.max(1)
        } else {
            FIRST_OVERFLOW + params.max_chain
        }
    }

    fn validate(bucket_size: u32, params: &SchemeParams) -> Result<(), String> {
        if !(2..=3).contains(&params.num_hashes) {
            return Err(format!(
                "IHT uses 3 hash functions (1 primary, 2 secondary choices: the paper) or 2 (1 primary, one \
                 secondary sequence: BGHT's code), got {}",
                params.num_hashes
            ));
        }
        if !bucket_size.is_power_of_two() || bucket_size > 32 {
            return Err(format!(
                "bucket size must be a power of two in 1..=32, got {bucket_size}"
            ));
        }
        if params.threshold == 0 || params.threshold > bucket_size {
            return Err(format!(
                "IHT threshold must be in 1..={bucket_size}, got {}",
                params.threshold
            ));
        }
        Ok(())
    }
}
