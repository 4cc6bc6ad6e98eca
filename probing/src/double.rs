//! Double hashing (cuCollections' `double_hashing`): a key's probes are the buckets `H0 + i * step` (modulo the
//! bucket count), the step odd and taken from a second hash function ([`sequence::DOUBLE`]), so that keys
//! whose first buckets collide part ways at once instead of forming linear probing's clusters. The insert and
//! find walks are linear probing's ([`crate::linear`]); only the sequence differs.

use crate::linear::walk_scheme;
use cubecl::prelude::*;
use hashtile_core::scheme::{
    BucketView, ProbeState, ProbingScheme, SchemeInfo, SchemeParams, Step, no_more_matches,
    reset_state, sequence,
};

/// Double hashing over buckets of `B` slots.
#[derive(Debug, Clone, Copy, Default)]
pub struct DoubleHashing;

walk_scheme!(
    DoubleHashing,
    sequence::DOUBLE,
    "double",
    "double hashing",
    2
);
