//! Slab-list chaining (SlabHash, Ashkiani et al. 2018): a bucket is the head of a list of slabs, each slab a
//! bucket read by the same tile code as a static table's bucket, with a successor ([`BucketView::next`]).
//!
//! The lists keep one invariant that every step below relies on: **in list order, every empty slot comes after
//! every filled one.** Inserts claim the first empty slot of the first slab that has one and append a slab only
//! to a list whose slabs are all full; erase writes a tombstone (a reserved key that is neither empty nor a
//! match), never an empty slot; only `flush`, which runs alone, rewrites a list (compacted, so the invariant
//! holds again). So an empty slot ends every search: the key is in no later slab.
//!
//! - **Insert** (multimap, `params.upsert == 0`): claim the first empty slot; a full slab with a successor:
//!   follow it; the last slab full: append a slab.
//! - **Replace** (unique keys, `params.upsert == 1`): a match is updated in place; otherwise as insert. A lost
//!   claim re-reads the slab, where a racing replace of the same key is then seen as a match (both chose the same
//!   first empty slot), so a key is never stored twice by replaces.
//! - **Find**: a match is found; an empty slot or the end of the list proves the key absent; else follow.
//! - **More matches** (`find_all`, `count`, `erase_all`): after the driver took a view's matches, follow the
//!   list unless the view had an empty slot or no successor.
//!
//! Tombstones are never reused by inserts: in unique mode a claim in front of a live copy further down the list
//! would store the key twice. `flush` reclaims them.

use cubecl::prelude::*;
use hashtile_core::scheme::{
    BucketView, NO_NEXT, ProbeState, ProbingScheme, SchemeInfo, SchemeParams, Step, action,
    make_step, reset_state,
};

/// Slab-list chaining (one hash function; lists of slabs grow by appending).
#[derive(Debug, Clone, Copy, Default)]
pub struct Chain;

/// Where the list goes after a view without a usable slot: the successor, or (none) `at_end`.
#[cube]
fn onward(view: BucketView, at_end: u32) -> u32 {
    let mut act = at_end;
    if view.next != NO_NEXT {
        act = action::FOLLOW;
    }
    act
}

#[cube]
impl ProbingScheme for Chain {
    const STABLE: bool = true;
    const CHAINS: bool = true;

    fn insert_start(state: &mut ProbeState, key_mix: u32) {
        reset_state(state, key_mix);
    }

    fn insert_step(
        _state: &mut ProbeState,
        view: BucketView,
        params: SchemeParams,
        #[comptime] _bucket_size: u32,
    ) -> Step {
        let mut act = u32::new(action::CLAIM as i64);
        let mut slot = 0u32;
        if params.upsert == 1 && view.matched != 0 {
            act = action::UPDATE;
            slot = view.matched.trailing_zeros();
        } else if view.empty != 0 {
            slot = view.empty.trailing_zeros();
        } else {
            act = onward(view, action::APPEND);
        }
        make_step(act, 0u32, slot)
    }

    fn after_evict(_state: &mut ProbeState, _from_hash: u32, _params: SchemeParams) {
        // Chaining never evicts.
    }

    fn copies_may_split(_params: SchemeParams) -> bool {
        false.runtime()
    }

    fn find_start(state: &mut ProbeState) {
        reset_state(state, 1u32);
    }

    fn find_step(
        _state: &mut ProbeState,
        view: BucketView,
        _params: SchemeParams,
        #[comptime] _bucket_size: u32,
    ) -> Step {
        let mut act = u32::new(action::ABSENT as i64);
        let mut slot = 0u32;
        if view.matched != 0 {
            act = action::FOUND;
            slot = view.matched.trailing_zeros();
        } else if view.empty == 0 {
            act = onward(view, action::ABSENT);
        }
        make_step(act, 0u32, slot)
    }

    fn find_more(_state: &mut ProbeState, view: BucketView, _params: SchemeParams) -> Step {
        let mut act = u32::new(action::ABSENT as i64);
        if view.empty == 0 {
            act = onward(view, action::ABSENT);
        }
        make_step(act, 0u32, 0u32)
    }
}

impl SchemeInfo for Chain {
    const NAME: &'static str = "chain";
    /// Pairs never move (no eviction); `flush` compacts lists while nothing else runs.
    /// A slab is read as one bucket of 16 words: 15 slots and the link word.
    const BUCKET_SIZES: &'static [u32] = &[16];

    fn default_params(_bucket_size: u32) -> SchemeParams {
        SchemeParams {
            num_hashes: 1,
            max_chain: 0,
            threshold: 0,
            upsert: 1,
        }
    }

    fn validate(bucket_size: u32, params: &SchemeParams) -> Result<(), String> {
        if bucket_size != 16 {
            return Err(format!(
                "chaining reads slabs of 16 words (15 slots and a link), got bucket size {bucket_size}"
            ));
        }
        if params.num_hashes != 1 {
            return Err(format!(
                "chaining hashes a key to one list, got {} hash functions",
                params.num_hashes
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashtile_core::scheme::blank_state;

    fn view(empty: u32, matched: u32, next: u32) -> BucketView {
        BucketView {
            empty,
            matched,
            next,
        }
    }

    fn params(upsert: u32) -> SchemeParams {
        SchemeParams {
            upsert,
            ..Chain::default_params(16)
        }
    }

    #[test]
    fn insert_claims_follows_appends() {
        let mut s = blank_state();
        for upsert in [0, 1] {
            Chain::insert_start(&mut s, 7);
            let p = params(upsert);
            let st = Chain::insert_step(&mut s, view(0b1100, 0, NO_NEXT), p, 16);
            assert_eq!((st.action, st.slot), (action::CLAIM, 2));
            let st = Chain::insert_step(&mut s, view(0, 0, 5), p, 16);
            assert_eq!(st.action, action::FOLLOW);
            let st = Chain::insert_step(&mut s, view(0, 0, NO_NEXT), p, 16);
            assert_eq!(st.action, action::APPEND);
        }
        // A match: updated in unique mode, a further copy in multimap mode.
        let st = Chain::insert_step(&mut s, view(0b1000, 0b10, NO_NEXT), params(1), 16);
        assert_eq!((st.action, st.slot), (action::UPDATE, 1));
        let st = Chain::insert_step(&mut s, view(0b1000, 0b10, NO_NEXT), params(0), 16);
        assert_eq!((st.action, st.slot), (action::CLAIM, 3));
    }

    #[test]
    fn find_stops_at_empty_slots_and_list_ends() {
        let mut s = blank_state();
        Chain::find_start(&mut s);
        let p = params(1);
        let st = Chain::find_step(&mut s, view(0, 0b100, 3), p, 16);
        assert_eq!((st.action, st.slot), (action::FOUND, 2));
        assert_eq!(
            Chain::find_step(&mut s, view(0, 0, 3), p, 16).action,
            action::FOLLOW
        );
        assert_eq!(
            Chain::find_step(&mut s, view(1 << 14, 0, 3), p, 16).action,
            action::ABSENT
        );
        assert_eq!(
            Chain::find_step(&mut s, view(0, 0, NO_NEXT), p, 16).action,
            action::ABSENT
        );
        assert_eq!(
            Chain::find_more(&mut s, view(0, 0b1, 9), p).action,
            action::FOLLOW
        );
        assert_eq!(
            Chain::find_more(&mut s, view(0b10, 0b1, 9), p).action,
            action::ABSENT
        );
    }
}
