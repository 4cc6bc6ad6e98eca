//! Linear probing (cuCollections' `linear_probing`): a key's probes are the buckets `H0, H0 + 1, H0 + 2, ...`
//! (modulo the bucket count; [`sequence::LINEAR`]). A bucket is a window of `B` consecutive slots that a tile
//! of `B` lanes reads at once, so `B` plays the part of cuCollections' cooperative-group size (1, 2, 4, 8).
//!
//! **Insert.** Walk the sequence; with upsert on, a match is updated, and the first bucket with an empty slot
//! both proves the key absent and takes it (first fit, so the invariant below holds). Without upsert (keys the
//! caller knows are new) the first empty slot is taken straight away. Nothing ever moves: the scheme is stable.
//!
//! **Find.** Walk the sequence; stop at a match, or at a bucket with an empty slot (a key is never stored past
//! a bucket that had room when it was placed, and buckets never empty again).
//!
//! Both walks end after `max_chain` buckets (`u32::MAX` by default: the whole table); an insert that reaches
//! the end gives up (`FAIL`), which only a table filled to its last slot can make happen. The walk is shared
//! with [`crate::DoubleHashing`], which differs in its sequence alone.

use cubecl::prelude::*;
use hashtile_core::scheme::{
    BucketView, ProbeState, ProbingScheme, SchemeInfo, SchemeParams, Step, action, make_step,
    no_more_matches, reset_state, sequence,
};

/// Linear probing over buckets of `B` slots.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinearProbing;

/// The insert step of a walk along a probe sequence (linear probing, double hashing; see the module docs).
#[cube]
pub fn walk_insert_step(state: &mut ProbeState, view: BucketView, params: SchemeParams) -> Step {
    let mut act = u32::new(action::NEXT as i64);
    let mut slot = u32::new(0);
    let target = state.hash_index;
    if params.upsert == 1 && view.matched != 0 {
        act = action::UPDATE;
        slot = view.matched.trailing_zeros();
    } else if view.empty != 0 {
        // A lost compare-and-swap reads this bucket again, where a racing duplicate of the key then matches.
        act = action::CLAIM;
        slot = view.empty.trailing_zeros();
    } else if state.hash_index + 1 < params.max_chain {
        state.hash_index += 1;
    } else {
        act = action::FAIL;
    }
    make_step(act, target, slot)
}

/// The find step of a walk along a probe sequence: a match, or a bucket with room, ends it.
#[cube]
pub fn walk_find_step(state: &mut ProbeState, view: BucketView, params: SchemeParams) -> Step {
    let mut act = u32::new(action::ABSENT as i64);
    let mut slot = u32::new(0);
    let target = state.hash_index;
    if view.matched != 0 {
        act = action::FOUND;
        slot = view.matched.trailing_zeros();
    } else if view.empty == 0 && state.hash_index + 1 < params.max_chain {
        state.hash_index += 1;
        act = action::NEXT;
    }
    make_step(act, target, slot)
}

/// The default parameters of a walk: the whole table (`max_chain = u32::MAX`), one hash function (two for
/// double hashing: the start and the step).
pub fn walk_params(num_hashes: u32) -> SchemeParams {
    SchemeParams {
        num_hashes,
        max_chain: u32::MAX,
        threshold: 0,
        upsert: 1,
    }
}

/// A walk's parameters in a table of `num_buckets` buckets: at most one probe per bucket.
pub fn walk_bounded(params: SchemeParams, num_buckets: u32) -> SchemeParams {
    SchemeParams {
        max_chain: params.max_chain.min(num_buckets.max(1)),
        ..params
    }
}

/// Checks a walk's configuration.
pub fn walk_validate(
    name: &str,
    num_hashes: u32,
    bucket_size: u32,
    params: &SchemeParams,
) -> Result<(), String> {
    if params.num_hashes != num_hashes {
        return Err(format!(
            "{name} uses {num_hashes} hash function(s), got {}",
            params.num_hashes
        ));
    }
    if params.max_chain == 0 {
        return Err(format!(
            "{name} needs max_chain >= 1 (buckets a walk may read)"
        ));
    }
    if !bucket_size.is_power_of_two() || bucket_size > 32 {
        return Err(format!(
            "bucket size must be a power of two in 1..=32, got {bucket_size}"
        ));
    }
    Ok(())
}

/// The [`ProbingScheme`] and [`SchemeInfo`] of a walk scheme `$ty` along probe sequence `$sequence`, called
/// `$name` (`$what` in messages), with `$hashes` hash functions: the walk's steps above, stable, one key per
/// slot. Linear probing and double hashing differ in the sequence (and the functions it reads) alone.
macro_rules! walk_scheme {
    ($ty:ident, $sequence:expr, $name:literal, $what:literal, $hashes:literal) => {
        #[cube]
        impl ProbingScheme for $ty {
            const STABLE: bool = true;
            const SEQUENCE: u32 = $sequence;
            const UPSERTS_CONVERGE: bool = true;
            const FILLS_FIRST: bool = true;
            const FIRST_FIT: bool = true;
            const FIND_WALKS: bool = true;

            fn insert_start(state: &mut ProbeState, key_mix: u32) {
                reset_state(state, key_mix);
            }

            fn insert_step(
                state: &mut ProbeState,
                view: BucketView,
                params: SchemeParams,
                #[comptime] _bucket_size: u32,
            ) -> Step {
                $crate::linear::walk_insert_step(state, view, params)
            }

            fn after_evict(_state: &mut ProbeState, _from_hash: u32, _params: SchemeParams) {}

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
                $crate::linear::walk_find_step(state, view, params)
            }

            fn find_more(state: &mut ProbeState, _view: BucketView, _params: SchemeParams) -> Step {
                no_more_matches(state)
            }
        }

        impl SchemeInfo for $ty {
            const NAME: &'static str = $name;

            fn default_params(_bucket_size: u32) -> SchemeParams {
                $crate::linear::walk_params($hashes)
            }

            fn candidates(params: &SchemeParams) -> u32 {
                params.max_chain
            }

            fn bounded(params: SchemeParams, num_buckets: u32) -> SchemeParams {
                $crate::linear::walk_bounded(params, num_buckets)
            }

            fn validate(bucket_size: u32, params: &SchemeParams) -> Result<(), String> {
                $crate::linear::walk_validate($what, $hashes, bucket_size, params)
            }
        }
    };
}
pub(crate) use walk_scheme;

walk_scheme!(
    LinearProbing,
    sequence::LINEAR,
    "linear",
    "linear probing",
    1
);
