//! 1CHT: cuckoo hashing with buckets of one slot and four hash functions (Alcantara et al.'s CUDPP design, the
//! BGHT paper's baseline). The placement rules are BCHT's with `B = 1`, `h = 4`; this type fixes those values.

use crate::bcht::Bcht;
use cubecl::prelude::*;
use hashtile_core::scheme::{
    BucketView, ProbeState, ProbingScheme, SchemeInfo, SchemeParams, Step, no_more_matches,
};

/// 1-slot cuckoo hashing (`B = 1`, `h = 4`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cht1;

#[cube]
impl ProbingScheme for Cht1 {
    const STABLE: bool = false;
    const FILLS_FIRST: bool = true;
    const FIRST_FIT: bool = true;
    fn insert_start(state: &mut ProbeState, key_mix: u32) {
        Bcht::insert_start(state, key_mix);
    }

    fn insert_step(
        state: &mut ProbeState,
        view: BucketView,
        params: SchemeParams,
        #[comptime] bucket_size: u32,
    ) -> Step {
        Bcht::insert_step(state, view, params, bucket_size)
    }

    fn after_evict(state: &mut ProbeState, from_hash: u32, params: SchemeParams) {
        Bcht::after_evict(state, from_hash, params);
    }

    fn find_more(state: &mut ProbeState, _view: BucketView, _params: SchemeParams) -> Step {
        no_more_matches(state)
    }

    fn copies_may_split(_params: SchemeParams) -> bool {
        false.runtime()
    }

    fn find_start(state: &mut ProbeState) {
        Bcht::find_start(state);
    }

    fn find_step(
        state: &mut ProbeState,
        view: BucketView,
        params: SchemeParams,
        #[comptime] bucket_size: u32,
    ) -> Step {
        Bcht::find_step(state, view, params, bucket_size)
    }
}

impl SchemeInfo for Cht1 {
    const NAME: &'static str = "1cht";
    const BUCKET_SIZES: &'static [u32] = &[1];

    fn default_params(_bucket_size: u32) -> SchemeParams {
        SchemeParams {
            num_hashes: 4,
            max_chain: 100,
            threshold: 0,
            upsert: 1,
        }
    }

    fn validate(bucket_size: u32, params: &SchemeParams) -> Result<(), String> {
        if bucket_size != 1 {
            return Err(format!(
                "1CHT has buckets of exactly one slot, got bucket size {bucket_size}"
            ));
        }
        if !(2..=4).contains(&params.num_hashes) {
            return Err(format!(
                "1CHT needs 2..=4 hash functions, got {}",
                params.num_hashes
            ));
        }
        Ok(())
    }
}
