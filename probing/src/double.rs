//! Double hashing (cuCollections' `double_hashing`): a key's probes are the buckets `H0 + i * step` (modulo the
//! bucket count), the step odd and taken from a second hash function ([`sequence::DOUBLE`]), so that keys
//! whose first buckets collide part ways at once instead of forming linear probing's clusters. The insert and
//! find walks are linear probing's ([`crate::linear`]); only the sequence differs.

use crate::linear::{walk_bounded, walk_params, walk_scheme, walk_validate};
use cubecl::prelude::*;
use hashtile_core::scheme::{
    BucketView, ProbeState, ProbingScheme, SchemeInfo, SchemeParams, Step, no_more_matches,
    reset_state, sequence,
};

/// Double hashing over buckets of `B` slots.
#[derive(Debug, Clone, Copy, Default)]
pub struct DoubleHashing;

walk_scheme!(DoubleHashing, sequence::DOUBLE);

impl SchemeInfo for DoubleHashing {
    const NAME: &'static str = "double";

    fn default_params(_bucket_size: u32) -> SchemeParams {
        walk_params(2)
    }

    fn candidates(params: &SchemeParams) -> u32 {
        params.max_chain
    }

    fn bounded(params: SchemeParams, num_buckets: u32) -> SchemeParams {
        walk_bounded(params, num_buckets)
    }

    fn validate(bucket_size: u32, params: &SchemeParams) -> Result<(), String> {
        walk_validate("double hashing", 2, bucket_size, params)
    }
}
