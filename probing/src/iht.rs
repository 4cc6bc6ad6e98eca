//! Iceberg hashing (IHT), BGHT paper §3.2 and Listing 5.
//!
//! Three hash functions: `H0` picks the **primary** bucket, `H1` and `H2` two **secondary** buckets.
//!
//! **Insert.** Read the primary. If its load is below the threshold `t`, claim its first empty slot (the common
//! case, one probe). Otherwise read both secondaries and claim a slot in the less loaded one; if both are full,
//! fall back to the primary if it still has room, else fail. The table is **stable**: a stored pair never moves.
//! With upsert on, a key found in any bucket read on the way is updated instead. A claim that loses a race
//! restarts from the primary (the paper's "repeat the process upon failure").
//!
//! Why the early claim is safe with upsert: a key only goes to a secondary when its primary's load was `>= t`,
//! and loads never decrease, so a primary that is below `t` now never held the key in a secondary.
//!
//! **Find.** Primary, then both secondaries; no early exit on a non-full bucket (paper §5.3). (The argument
//! above would allow stopping after a primary below `t`; kept paper-faithful so probe counts compare.)

use cubecl::prelude::*;
use hashtile_core::scheme::{
    BucketView, ProbeState, ProbingScheme, SchemeInfo, SchemeParams, Step, action,
    find_in_candidates, make_step, reset_state,
};

/// Iceberg hash table scheme (default `B = 16`, threshold `t = 13`, i.e. about 80% of `B`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Iht;

/// Reading the primary.
const PHASE_PRIMARY: u32 = 0;
/// Reading the first secondary.
const PHASE_SEC0: u32 = 1;
/// Reading the second secondary.
const PHASE_SEC1: u32 = 2;

/// Occupied slots of a bucket.
#[cube]
fn load_of(view: BucketView, #[comptime] bucket_size: u32) -> u32 {
    bucket_size - view.empty.count_ones()
}

#[cube]
impl ProbingScheme for Iht {
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
                // Remember the primary's free slots for the fallback; go to the secondaries.
                state.aux = view.empty;
                state.phase = PHASE_SEC0;
                state.hash_index = 1u32;
            }
        } else if state.phase == PHASE_SEC0 {
            state.aux2 = view.empty;
            state.phase = PHASE_SEC1;
            state.hash_index = 2u32;
        } else {
            let load0 = bucket_size - state.aux2.count_ones();
            let load1 = load_of(view, bucket_size);
            if load0 == bucket_size && load1 == bucket_size {
                if state.aux != 0 {
                    act = action::CLAIM;
                    slot = state.aux.trailing_zeros();
                } else {
                    act = action::FAIL;
                }
            } else if load0 <= load1 {
                act = action::CLAIM;
                target = 1u32;
                slot = state.aux2.trailing_zeros();
            } else {
                act = action::CLAIM;
                target = 2u32;
                slot = view.empty.trailing_zeros();
            }
            // A lost claim restarts from the primary.
            state.phase = PHASE_PRIMARY;
            state.hash_index = 0u32;
        }
        make_step(act, target, slot)
    }

    fn after_evict(state: &mut ProbeState, _from_hash: u32, _params: SchemeParams) {
        // Iceberg hashing never evicts; restart if a driver ever hands a pair back.
        state.phase = PHASE_PRIMARY;
        state.hash_index = 0u32;
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
        find_in_candidates(state, view, params, false)
    }
}

impl SchemeInfo for Iht {
    const NAME: &'static str = "iht";
    const STABLE: bool = true;

    fn default_params(bucket_size: u32) -> SchemeParams {
        // BGHT: t a little above the average bucket load; about 80% of B.
        let threshold = ((bucket_size as f64) * 0.8).round().max(1.0) as u32;
        SchemeParams {
            num_hashes: 3,
            max_chain: 0,
            threshold,
            upsert: 1,
        }
    }

    fn validate(bucket_size: u32, params: &SchemeParams) -> Result<(), String> {
        if params.num_hashes != 3 {
            return Err(format!(
                "IHT uses exactly 3 hash functions (1 primary, 2 secondary), got {}",
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
