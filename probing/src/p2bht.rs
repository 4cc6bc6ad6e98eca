//! Power-of-two-choices bucketed hashing (P2BHT), BGHT paper §3.1 ("load-balancing") and §4.3.
//!
//! **Insert.** Read both candidate buckets `H0`, `H1` and claim the first empty slot of the less loaded one
//! (ties go to `H0`); fail if both are full. Stable: pairs never move. With upsert on, a key found in either
//! bucket is updated instead. A claim that loses a race restarts from `H0`. GPU drivers read the two buckets
//! together (`PAIR_AT = 0`), as BGHT's `p2bht` does; the steps are the same.
//!
//! **Find.** `H0`, then `H1` (a key may be in either, so there is no early exit on a non-full bucket).

use cubecl::prelude::*;
use hashtile_core::scheme::{
    BucketView, ProbeState, ProbingScheme, SchemeInfo, SchemeParams, Step, action,
    find_in_candidates, make_step, no_more_matches, reset_state,
};

/// Power-of-two-choices scheme (`h = 2`, default `B = 16`).
#[derive(Debug, Clone, Copy, Default)]
pub struct P2bht;

#[cube]
impl ProbingScheme for P2bht {
    const STABLE: bool = true;
    // Both candidates are read before any decision: the drivers load them together.
    const PAIR_AT: u32 = 0;

    fn insert_start(state: &mut ProbeState, key_mix: u32) {
        reset_state(state, key_mix);
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
        } else if state.hash_index == 0 {
            state.aux = view.empty;
            state.hash_index = 1u32;
        } else {
            let load0 = bucket_size - state.aux.count_ones();
            let load1 = bucket_size - view.empty.count_ones();
            if load0 == bucket_size && load1 == bucket_size {
                act = action::FAIL;
            } else if load0 <= load1 {
                act = action::CLAIM;
                slot = state.aux.trailing_zeros();
            } else {
                act = action::CLAIM;
                target = 1u32;
                slot = view.empty.trailing_zeros();
            }
            state.hash_index = 0u32;
        }
        make_step(act, target, slot)
    }

    fn after_evict(state: &mut ProbeState, _from_hash: u32, _params: SchemeParams) {
        state.hash_index = 0u32;
    }

    fn find_more(state: &mut ProbeState, _view: BucketView, _params: SchemeParams) -> Step {
        no_more_matches(state)
    }

    fn copies_may_split(_params: SchemeParams) -> bool {
        // Copies that read different loads take different buckets.
        true.runtime()
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

impl SchemeInfo for P2bht {
    const NAME: &'static str = "p2bht";

    fn default_params(_bucket_size: u32) -> SchemeParams {
        SchemeParams {
            num_hashes: 2,
            max_chain: 0,
            threshold: 0,
            upsert: 1,
        }
    }

    fn validate(bucket_size: u32, params: &SchemeParams) -> Result<(), String> {
        if params.num_hashes != 2 {
            return Err(format!(
                "P2BHT uses exactly 2 hash functions, got {}",
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
