//! [`NoEvictions`]: a cuckoo scheme in launches that move no pair. Each step is the scheme's own, except that an
//! eviction becomes a failure, so nothing stored moves during the launch. For a first-fit scheme
//! ([`ProbingScheme::FIRST_FIT`]: BCHT, 1CHT) racing upserts of one key then meet in one slot, as a stable
//! scheme's do: a copy that claims a slot read every earlier bucket of the key's sequence full without the key,
//! and a full bucket stays full while nothing moves. The GPU table counts (insert-or-apply) through it in the
//! table itself; the keys it fails (every candidate bucket full, none holding the key, so no copy of the key was
//! stored) go through the scheme's own insert afterwards.

use core::marker::PhantomData;
use cubecl::prelude::*;
use hashtile_core::scheme::{
    BucketView, ProbeState, ProbingScheme, SchemeParams, Step, action, make_step,
};

/// Scheme `S` with its evictions turned into failures (see the module docs).
pub struct NoEvictions<S>(PhantomData<fn() -> S>);

#[cube]
impl<S: ProbingScheme> ProbingScheme for NoEvictions<S> {
    const SEQUENCE: u32 = S::SEQUENCE;
    const UPSERTS_CONVERGE: bool = S::FIRST_FIT;
    const FIRST_FIT: bool = S::FIRST_FIT;
    const FILLS_FIRST: bool = S::FILLS_FIRST;
    const FIND_WALKS: bool = S::FIND_WALKS;
    const PAIR_AT: u32 = S::PAIR_AT;
    const CHAINS: bool = S::CHAINS;
    const STABLE: bool = true;

    fn insert_start(state: &mut ProbeState, key_mix: u32) {
        S::insert_start(state, key_mix);
    }

    fn insert_step(
        state: &mut ProbeState,
        view: BucketView,
        params: SchemeParams,
        #[comptime] bucket_size: u32,
    ) -> Step {
        let st = S::insert_step(state, view, params, bucket_size);
        let mut act = st.action;
        if act == action::EVICT {
            act = action::FAIL;
        }
        make_step(act, st.target, st.slot)
    }

    fn after_evict(state: &mut ProbeState, from_hash: u32, params: SchemeParams) {
        // Never called: no step evicts.
        S::after_evict(state, from_hash, params);
    }

    fn copies_may_split(params: SchemeParams) -> bool {
        S::copies_may_split(params)
    }

    fn find_start(state: &mut ProbeState) {
        S::find_start(state);
    }

    fn find_step(
        state: &mut ProbeState,
        view: BucketView,
        params: SchemeParams,
        #[comptime] bucket_size: u32,
    ) -> Step {
        S::find_step(state, view, params, bucket_size)
    }

    fn find_more(state: &mut ProbeState, view: BucketView, params: SchemeParams) -> Step {
        S::find_more(state, view, params)
    }
}
