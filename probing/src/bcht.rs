//! Bucketed cuckoo hashing (BCHT), BGHT paper §3.1 and Listings 3–4.
//!
//! **Insert.** With upsert on, the key is first looked for in `H0, H1, …` with early exit (a bucket that is not
//! full ends the search: keys only move on to `H(i+1)` once `H(i)` is full, and buckets never empty again).
//! The first bucket with room proves the key absent, and the pair is claimed straight into that bucket's first
//! empty slot (`H0` in the common case: one probe). Only when all `h` buckets are full does the pair go
//! cuckoo-style: exchanged with a random slot of the last bucket read, the evicted pair continuing at the bucket
//! after the one it was evicted from (`H((j+1) mod h)`), up to `max_chain` evictions.
//!
//! Without upsert (the paper's bulk build, Listing 3) the pair goes to `H0` and is exchanged there when `H0` is
//! full. With upsert the reads of the duplicate check are reused for placement (first fit over `H0..H(h-1)`),
//! which saves the eviction at `H0` and its victim's read: on the H100 this made the upsert insert faster than
//! the bulk build (docs/PERFORMANCE.md). Both keep the invariant the early exit needs: a key stored in `H(i)`
//! found `H0..H(i-1)` full.
//!
//! **Find.** Read `H0, H1, …`; stop at a match, at a bucket that is not full (early exit), or after `h` buckets.

use cubecl::prelude::*;
use hashtile_core::hash::xorshift32;
use hashtile_core::scheme::{
    BucketView, ProbeState, ProbingScheme, SchemeInfo, SchemeParams, Step, action,
    find_in_candidates, make_step, no_more_matches, reset_state,
};

/// Bucketed cuckoo hash table scheme (default `h = 3`, `B = 16`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Bcht;

/// Looking for the key (upsert check).
const PHASE_CHECK: u32 = 0;
/// Placing the pair in hand (cuckoo chain).
const PHASE_PLACE: u32 = 1;

/// The first empty slot of a bucket that has one.
#[cube]
fn first_empty(view: BucketView) -> u32 {
    view.empty.trailing_zeros()
}

/// Place the pair in hand at bucket `target`, whose fullness the caller just observed.
#[cube]
fn place(
    state: &mut ProbeState,
    view: BucketView,
    target: u32,
    params: SchemeParams,
    #[comptime] bucket_size: u32,
) -> Step {
    let mut act = u32::new(action::FAIL as i64);
    let mut slot = u32::new(0);
    if view.empty != 0 {
        act = action::CLAIM;
        slot = first_empty(view);
    } else if state.evictions < params.max_chain {
        state.rng = xorshift32(state.rng);
        act = action::EVICT;
        slot = state.rng % bucket_size;
    }
    make_step(act, target, slot)
}

#[cube]
impl ProbingScheme for Bcht {
    const STABLE: bool = false;
    const FILLS_FIRST: bool = true;
    const FIRST_FIT: bool = true;
    fn insert_start(state: &mut ProbeState, key_mix: u32) {
        reset_state(state, key_mix);
        state.phase = PHASE_CHECK;
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
        if state.phase == PHASE_CHECK && params.upsert == 1 {
            if view.matched != 0 {
                act = action::UPDATE;
                target = state.hash_index;
                slot = view.matched.trailing_zeros();
            } else if view.empty != 0 {
                // Absent (early exit: a bucket with room ends the search) and this bucket has room: claim it,
                // here rather than at H0. Every bucket before it was full when we read it and stays full, so
                // the invariant the early exit rests on holds for this key too, and the pair lands with the
                // reads the check needed anyway: no eviction at H0 whose victim would then read its next
                // bucket. The phase stays CHECK so that a lost compare-and-swap re-reads this bucket and finds a
                // racing duplicate of the key (both would have chosen the same first empty slot).
                act = action::CLAIM;
                target = state.hash_index;
                slot = view.empty.trailing_zeros();
            } else if state.hash_index + 1 >= params.num_hashes {
                // Absent, and every candidate is full (a full bucket stays full): start the cuckoo chain at the
                // bucket just read, whose view is in hand; its victim goes on to its next bucket.
                state.phase = PHASE_PLACE;
                let s = place(state, view, state.hash_index, params, bucket_size);
                act = s.action;
                target = s.target;
                slot = s.slot;
            } else {
                state.hash_index += 1;
            }
        } else {
            state.phase = PHASE_PLACE;
            let s = place(state, view, state.hash_index, params, bucket_size);
            act = s.action;
            target = s.target;
            slot = s.slot;
        }
        make_step(act, target, slot)
    }

    fn after_evict(state: &mut ProbeState, from_hash: u32, params: SchemeParams) {
        state.evictions += 1;
        state.phase = PHASE_PLACE;
        state.hash_index = (from_hash + 1) % params.num_hashes;
    }

    fn find_more(state: &mut ProbeState, _view: BucketView, _params: SchemeParams) -> Step {
        no_more_matches(state)
    }

    fn copies_may_split(_params: SchemeParams) -> bool {
        false.runtime()
    }

    fn find_start(state: &mut ProbeState) {
        reset_state(state, 1u32);
    }

    fn find_step(
        state: &mut ProbeState,
        view: BucketView,
        params: SchemeParams,
        #[comptime] _bucket_size: u32,
    ) -> Step {
        find_in_candidates(state, view, params, true)
    }
}

impl SchemeInfo for Bcht {
    const NAME: &'static str = "bcht";

    fn default_params(_bucket_size: u32) -> SchemeParams {
        SchemeParams {
            num_hashes: 3,
            max_chain: 100,
            threshold: 0,
            upsert: 1,
        }
    }

    fn validate(bucket_size: u32, params: &SchemeParams) -> Result<(), String> {
        if !(2..=4).contains(&params.num_hashes) {
            return Err(format!(
                "BCHT needs 2..=4 hash functions, got {}",
                params.num_hashes
            ));
        }
        if !bucket_size.is_power_of_two() || bucket_size > 32 {
            return Err(format!(
                "bucket size must be a power of two in 1..=32, got {bucket_size}"
            ));
        }
        Ok(())
    }
}
