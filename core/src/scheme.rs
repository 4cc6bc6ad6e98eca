//! The probing-scheme trait.
//!
//! A probing scheme decides **where** a key may live and **what to do** after each bucket read; it never touches
//! memory, lanes or atomics. It is a pair of step functions over a [`BucketView`] (two bitmasks describing the
//! bucket just read) that return a [`Step`] (what the driver must do next). The functions are `#[cube]` and use
//! plain integer arithmetic only, so one source is compiled into the GPU tile driver and called by the CPU
//! backend: both backends place keys by the same rules, and the CPU's deterministic mode counts exactly the
//! probes the model predicts.
//!
//! The driver loop (GPU: the one tile driver, `hashtile-backends/src/device/driver.rs`; CPU:
//! `hashtile-backends/src/table/cpu/` and the CPU chained store):
//!
//! ```text
//! S::insert_start(&mut state, key_mix)              // or find_start
//! loop {
//!     view = read bucket H[state.hash_index](key)     // one probe
//!     step = S::insert_step(&mut state, view, params) // pure logic, no GPU code
//!     match step.action {
//!         NEXT   => continue,                         // state now names the next bucket
//!         CLAIM  => CAS empty slot `step.slot` of bucket H[step.target](key); on failure retry
//!         EVICT  => exchange slot with our pair; carry the evicted pair on:
//!                   S::after_evict(&mut state, hash index the evicted key used there)
//!         UPDATE => replace the value of slot `step.slot` (key present)
//!         FOUND / ABSENT / FAIL => done
//!         FOLLOW => read the bucket `view.next` names     // chaining schemes only
//!         APPEND => link a new bucket after this one, read it (or, if another tile linked first, re-read)
//!         RECLAIM => CAS erased slot `step.slot` of bucket H[step.target](key) to our pair; on failure start
//!                    again (`reclaim_step`: inserts over erased slots)
//!     }
//! }
//! ```
//!
//! **Chaining** (issue 10, `hashtile_probing::Chain`): a bucket may have a successor (a slab list, SlabHash). The
//! view then carries the successor's index ([`BucketView::next`]), and the scheme may answer [`action::FOLLOW`]
//! or [`action::APPEND`]; the GPU driver compiles those branches (and the slab views and allocator) in only for
//! schemes whose [`ProbingScheme::CHAINS`] is set (`false` for every static scheme). A
//! multi-value lookup (`find_all`, `count`, `erase_all`) takes every match of a `FOUND` view and asks
//! [`ProbingScheme::find_more`] where further matches can be. A static scheme stores a key once: nowhere.

use cubecl::prelude::*;

/// What a step asks the driver to do. Plain `u32` codes so that the step functions stay kernel-compatible.
pub mod action {
    /// Read the bucket of `state.hash_index` next (no memory write).
    pub const NEXT: u32 = 0;
    /// Atomically claim empty slot `slot` of bucket `target` (compare-and-swap from empty).
    pub const CLAIM: u32 = 1;
    /// Exchange slot `slot` of bucket `target` with the pair in hand (cuckoo eviction).
    pub const EVICT: u32 = 2;
    /// The key is in slot `slot` of the bucket just read: overwrite its value (upsert).
    pub const UPDATE: u32 = 3;
    /// Find: the key is in slot `slot` of the bucket just read.
    pub const FOUND: u32 = 4;
    /// Find: the key is not in the table.
    pub const ABSENT: u32 = 5;
    /// Insert: the scheme gives up (full buckets, eviction chain too long). The pair in hand is handed back.
    pub const FAIL: u32 = 6;
    /// Chaining: read the bucket the view's `next` names (same key, same state).
    pub const FOLLOW: u32 = 7;
    /// Chaining: the list ends in the full bucket just read; link a new bucket after it and read that one (if
    /// another thread linked one first, re-read this bucket: its `next` is now set).
    pub const APPEND: u32 = 8;
    /// Insert over erased slots ([`super::reclaim_step()`]): compare-and-swap erased slot `slot` of bucket `target`
    /// from the erased word to the pair in hand; on failure start the insert again.
    pub const RECLAIM: u32 = 9;
}

/// [`BucketView::next`] of a bucket without a successor (every static bucket; the last slab of a list).
pub const NO_NEXT: u32 = u32::MAX;

/// A bucket as the scheme sees it after one read: bit `s` describes slot `s` (`s < B <= 32`).
#[derive(CubeType, Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketView {
    /// Slots holding the empty sentinel.
    pub empty: u32,
    /// Slots holding the key being looked for.
    pub matched: u32,
    /// The bucket's successor in its list ([`NO_NEXT`]: none; always none in a static table).
    pub next: u32,
}

/// Per-operation state a scheme carries from step to step.
#[derive(CubeType, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeState {
    /// Which hash function's bucket the next read targets.
    pub hash_index: u32,
    /// Scheme-defined phase (e.g. duplicate check, then placement).
    pub phase: u32,
    /// Cuckoo evictions performed so far.
    pub evictions: u32,
    /// Random state for eviction slots (xorshift32, never zero).
    pub rng: u32,
    /// Scheme-defined scratch (e.g. IHT remembers a load; P2BHT a bucket choice).
    pub aux: u32,
    /// Scheme-defined scratch.
    pub aux2: u32,
}

/// The driver's next move.
#[derive(CubeType, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// One of the [`action`] codes.
    pub action: u32,
    /// Hash index of the bucket the action applies to (CLAIM / EVICT).
    pub target: u32,
    /// Slot within that bucket.
    pub slot: u32,
}

/// Runtime parameters of a scheme (kernel scalars; also used by the CPU backend).
#[derive(CubeType, Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchemeParams {
    /// Number of hash functions in use (`h`).
    pub num_hashes: u32,
    /// Longest cuckoo eviction chain before an insert fails.
    pub max_chain: u32,
    /// Scheme-specific threshold (IHT: primary-bucket load threshold).
    pub threshold: u32,
    /// 1: check whether the key is already present and update it (upsert); 0: the caller promises the keys are
    /// new and distinct (the paper's bulk build; fewer probes).
    pub upsert: u32,
}

/// A probing scheme: the placement rules of a static hash table, with no GPU-specific code.
///
/// `bucket_size` is a compile-time constant of the kernel (`B`, a power of two in `1..=32`).
#[cube]
pub trait ProbingScheme: Send + Sync + 'static {
    /// How a probe index (`ProbeState::hash_index`) names a bucket: one of [`sequence`]'s kinds (the family's
    /// hash functions by default). Every driver and the host's placement checks map indices to buckets through
    /// [`sequence_bucket()`], so a scheme's sequence is this one constant.
    const SEQUENCE: u32 = sequence::HASHES;
    /// Racing upserts of one key in one launch end in one slot: the scheme never moves a pair and places by
    /// first fit along one probe sequence, so a tile that loses a claim re-reads the bucket and finds the key
    /// there (claims by compare-and-swap). Drivers may then combine values in the table itself
    /// (`insert_or_apply` with packed pairs) instead of settling a batch's duplicates first. Schemes that evict,
    /// or that choose between buckets by their loads (racing copies can choose differently), leave it `false`.
    const UPSERTS_CONVERGE: bool = false;
    /// An upsert looks for its key along one probe sequence and takes the first slot with room on it (first
    /// fit), and only evictions move a stored pair: racing upserts of one key then meet in one slot in any launch
    /// that evicts nothing. Stable first-fit schemes are [`ProbingScheme::UPSERTS_CONVERGE`]; a cuckoo scheme
    /// with this set converges in a launch that turns its evictions into failures (`hashtile_probing`'s
    /// `NoEvictions`: the GPU table's insert-or-apply of BCHT and 1CHT). Schemes that choose between buckets by
    /// their loads leave it `false`.
    const FIRST_FIT: bool = false;
    /// A new key takes an empty slot of its first probe's bucket whenever that bucket has one, whatever the rest
    /// of the table holds (first fit from probe 0, with or without the upsert check): a key stored past its first
    /// bucket found that bucket full, and a bucket that was full stays full. A bulk build into an empty table may
    /// then fill each first bucket with its keys on its own (the GPU's binned build, in any order) and send only
    /// a full bucket's surplus through the steps. Schemes that choose between buckets by their loads (P2BHT) or
    /// cap their first bucket below its size (IHT's threshold) leave it `false`.
    const FILLS_FIRST: bool = false;
    /// The find is the walk's (`hashtile_probing::linear::walk_find_step`): probe `i` answers FOUND when its
    /// bucket holds the key, ABSENT when the bucket has an empty slot, else probe `i + 1` follows, for at most
    /// `max_chain` probes; a key is never stored past a bucket that had room when it was placed. A driver may
    /// then examine several probes of one read in order (the GPU's one-lane finds of linear probing read
    /// windows of consecutive slots). Schemes whose finds read every candidate, or stop on another rule, leave it
    /// `false`.
    const FIND_WALKS: bool = false;
    /// When an insert's state reaches hash index `PAIR_AT`, the drivers read buckets `PAIR_AT` and `PAIR_AT + 1`
    /// together (both loads in flight at once) and call `insert_step` on the second right after the first, in
    /// the same iteration, if the first returned `NEXT` with `hash_index` moved on to `PAIR_AT + 1`. The steps
    /// and their outcomes are exactly those of two iterations: only the memory latency and one round of the
    /// work-sharing loop are saved. For schemes that always read two buckets before deciding (P2BHT, as BGHT's
    /// `p2bht` does). [`NO_PAIR`]: never (the default; drivers then compile the second read out).
    const PAIR_AT: u32 = NO_PAIR;
    /// Buckets form lists: steps may return [`action::FOLLOW`] and [`action::APPEND`]. Drivers compile those
    /// branches in only when this is set.
    const CHAINS: bool = false;
    /// `true` if a stored pair never moves: the scheme never returns [`action::EVICT`]. Drivers compile the
    /// eviction branches (the exchange, carrying the displaced pair on) only for the others. GPU tables of pairs
    /// wider than 64 bits keep keys and values in parallel arrays, which only stable schemes can update with
    /// one compare-and-swap per pair; wide pairs of other schemes run on the CPU backend.
    const STABLE: bool;
    /// Initialises `state` for inserting a key (`key_mix` is a hash of the key, seeding eviction randomness).
    fn insert_start(state: &mut ProbeState, key_mix: u32);
    /// Decide what to do after reading bucket `state.hash_index` while inserting.
    fn insert_step(
        state: &mut ProbeState,
        view: BucketView,
        params: SchemeParams,
        #[comptime] bucket_size: u32,
    ) -> Step;
    /// An EVICT handed us the pair that lived in bucket `from_hash` of its own hash functions.
    fn after_evict(state: &mut ProbeState, from_hash: u32, params: SchemeParams);
    /// Initialises `state` for finding a key.
    fn find_start(state: &mut ProbeState);
    /// Decide what to do after reading bucket `state.hash_index` while finding.
    fn find_step(
        state: &mut ProbeState,
        view: BucketView,
        params: SchemeParams,
        #[comptime] bucket_size: u32,
    ) -> Step;
    /// After a `FOUND` view whose matches the driver has all taken (a multi-value lookup): where more matches
    /// of the key can be. `ABSENT`: nowhere ([`no_more_matches()`], every static scheme); `FOLLOW`: the next
    /// bucket of the list; `NEXT`: the bucket of `state.hash_index`.
    fn find_more(state: &mut ProbeState, view: BucketView, params: SchemeParams) -> Step;
    /// Racing inserts of one new key in one launch may each claim a slot of its own under `params`: a stable
    /// scheme that chooses between candidate buckets by their loads (P2BHT; IHT's two-choice rule), where copies
    /// that read different loads choose different buckets. The device API's writes then merge the copies after
    /// each claim (`hashtile_backends`' `device::merge`). `false` for schemes whose copies meet in
    /// one slot ([`ProbingScheme::UPSERTS_CONVERGE`]) and for those that evict (their racing copies are the
    /// caller's to keep apart, or written under `NoEvictions`).
    fn copies_may_split(params: SchemeParams) -> bool;
}

/// [`ProbingScheme::find_more`] of a scheme that stores each key once: no more matches anywhere.
#[cube]
pub fn no_more_matches(state: &ProbeState) -> Step {
    make_step(action::ABSENT, state.hash_index, 0u32)
}

/// [`ProbingScheme::PAIR_AT`] of a scheme that reads one bucket per step.
pub const NO_PAIR: u32 = u32::MAX;

/// How a scheme's probe index `i` maps to a bucket ([`ProbingScheme::SEQUENCE`]). Each kind names which of the
/// family's hash functions a probe hashes with ([`sequence_function()`]); [`sequence_bucket()`] turns that
/// bucket into the probe's.
pub mod sequence {
    /// Probe `i` is the key's bucket under the family's hash function `i` (cuckoo schemes, P2BHT).
    pub const HASHES: u32 = 0;
    /// Probe `i < MAX_HASHES` as [`HASHES`]; past the family's functions, the key's overflow sequence
    /// (`hash::overflow_bucket`: random probing from the last function's bucket; IHT's backyard).
    pub const OVERFLOW: u32 = 1;
    /// Probe `i` is bucket `H0 + i` (modulo the bucket count): linear probing.
    pub const LINEAR: u32 = 2;
    /// Probe `i` is bucket `H0 + i * step` (modulo the bucket count), the step odd and taken from `H1`:
    /// double hashing.
    pub const DOUBLE: u32 = 3;
}

/// The bucket count a table of `num_buckets` buckets (at least) takes under a sequence of `kind`. Double hashing
/// visits every bucket only when its step is coprime with the count: a power of two (the step is odd) keeps it,
/// any other count becomes the next prime (cuCollections sizes its double-hashing tables so too). With another
/// count, a key whose step shares a factor with it cycles through `count / gcd` buckets, and at a high load a
/// short cycle can be full: its insert fails and its find walks until `max_chain`. Other sequences take any
/// count.
pub fn sequence_buckets(kind: u32, num_buckets: u32) -> u32 {
    if kind != sequence::DOUBLE || num_buckets.is_power_of_two() || num_buckets < 2 {
        return num_buckets;
    }
    (num_buckets..=u32::MAX)
        .find(|&n| is_prime(n))
        .unwrap_or(num_buckets)
}

/// `true` when `n` is prime (trial division by odd numbers: about 33 000 divisions at most for a `u32`).
fn is_prime(n: u32) -> bool {
    if n < 4 {
        return n >= 2;
    }
    if n.is_multiple_of(2) {
        return false;
    }
    let mut d = 3u32;
    while (d as u64) * (d as u64) <= n as u64 {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 2;
    }
    true
}

/// The family hash function whose bucket probe `i` of a sequence of `kind` starts from.
#[cube]
pub fn sequence_function(#[comptime] kind: u32, i: u32) -> u32 {
    let mut f = i;
    if comptime!(kind == sequence::OVERFLOW) {
        f = i.min(comptime!(crate::hash::MAX_HASHES as u32 - 1));
    } else if comptime!(kind == sequence::LINEAR || kind == sequence::DOUBLE) {
        f = 0u32;
    }
    f
}

/// The bucket of probe `i` of a key in a table of `num_buckets` buckets under a sequence of `kind`: `base` is
/// the key's bucket under function [`sequence_function()`]`(kind, i)`, `second` its bucket under function 1
/// (read only by [`sequence::DOUBLE`]) and `key_mix` its mix (read only by [`sequence::OVERFLOW`]).
/// Plain integer arithmetic, so that the GPU drivers, the CPU table and the host's placement checks share it.
#[cube]
pub fn sequence_bucket(
    #[comptime] kind: u32,
    base: u32,
    second: u32,
    key_mix: u32,
    i: u32,
    num_buckets: u32,
) -> u32 {
    let mut b = base;
    if comptime!(kind == sequence::OVERFLOW) {
        let last = comptime!(crate::hash::MAX_HASHES as u32 - 1);
        if i > last {
            b = crate::hash::overflow_bucket(base, key_mix, i - last, num_buckets);
        }
    } else if comptime!(kind == sequence::LINEAR) {
        // A 32-bit remainder of the index only (cheap); the sum then wraps once at most.
        b = sequence_advance(base, i % num_buckets, num_buckets);
    } else if comptime!(kind == sequence::DOUBLE) {
        let step = sequence_stride(kind, second, num_buckets);
        b = ((base as u64 + i as u64 * step as u64) % num_buckets as u64) as u32;
    }
    b
}

/// The distance between consecutive probes of a strided sequence ([`sequence::LINEAR`]: 1;
/// [`sequence::DOUBLE`]: an odd step below the bucket count, from `second`, the key's bucket under function 1;
/// coprime with a power-of-two count, so the sequence visits every bucket; with other counts it visits
/// `num_buckets / gcd` of them before repeating). 0 for sequences whose probes each hash.
#[cube]
pub fn sequence_stride(#[comptime] kind: u32, second: u32, num_buckets: u32) -> u32 {
    let mut step = 0u32;
    if comptime!(kind == sequence::LINEAR) {
        step = 1u32;
    } else if comptime!(kind == sequence::DOUBLE) {
        step = second | 1u32;
        if step >= num_buckets {
            step = 1u32;
        }
    }
    step
}

/// Probe `i + 1`'s bucket of a strided sequence from probe `i`'s `bucket` ([`sequence_stride()`]): what
/// [`sequence_bucket()`] gives for `i + 1`, without its remainder (a walk's drivers step along the sequence
/// with an add and a compare instead of hashing and dividing at every probe). `bucket < num_buckets` and
/// `stride <= num_buckets` (a one-bucket table's stride is 1); no intermediate passes `u32::MAX`.
#[allow(unused_assignments)]
#[cube]
pub fn sequence_advance(bucket: u32, stride: u32, num_buckets: u32) -> u32 {
    let back = num_buckets - stride;
    let mut b = 0u32;
    if bucket >= back {
        b = bucket - back;
    } else {
        b = bucket + stride;
    }
    b
}

// The family's walk under a scheme's sequence lives with the sequences: the hash module knows no scheme.
impl crate::hash::HashFamily {
    /// Bucket of `key` under probe `i` of scheme `S`'s sequence (`ProbingScheme::SEQUENCE`) in a table of
    /// `num_buckets` buckets: what the drivers read.
    pub fn probe_bucket<S: ProbingScheme>(&self, key: u64, i: u32, num_buckets: u32) -> u32 {
        let kind = S::SEQUENCE;
        let f = sequence_function(kind, i) as usize;
        let second = if kind == sequence::DOUBLE {
            self.bucket(key, 1, num_buckets)
        } else {
            0
        };
        let mix = crate::hash::key_mix(key as u32, (key >> 32) as u32);
        sequence_bucket(
            kind,
            self.bucket(key, f, num_buckets),
            second,
            mix,
            i,
            num_buckets,
        )
    }
}

/// A `Step` with the given action, target and slot.
#[cube]
pub fn make_step(action: u32, target: u32, slot: u32) -> Step {
    Step {
        action,
        target,
        slot,
    }
}

/// A state with every field zero (kernels declare one, then schemes initialise it in place).
#[cube]
pub fn blank_state() -> ProbeState {
    ProbeState {
        hash_index: 0u32,
        phase: 0u32,
        evictions: 0u32,
        rng: 1u32,
        aux: 0u32,
        aux2: 0u32,
    }
}

/// Resets `state` to hash function 0, phase 0, with eviction randomness seeded from `key_mix`.
#[cube]
pub fn reset_state(state: &mut ProbeState, key_mix: u32) {
    state.hash_index = 0u32;
    state.phase = 0u32;
    state.evictions = 0u32;
    state.rng = key_mix | 1u32;
    state.aux = 0u32;
    state.aux2 = 0u32;
}

/// The find step shared by every bucketed scheme: stop at a match; otherwise move on to the next candidate
/// bucket until all `num_hashes` are read. With `early_exit` (cuckoo schemes, which fill `H0, H1, ...` in order
/// and never empty a bucket) a bucket with a free slot also proves the key absent; schemes that may store a key
/// in any candidate (IHT, P2BHT) pass `false`.
#[cube]
pub fn find_in_candidates(
    state: &mut ProbeState,
    view: BucketView,
    params: SchemeParams,
    #[comptime] early_exit: bool,
) -> Step {
    let mut act = u32::new(action::ABSENT as i64);
    let mut slot = u32::new(0);
    let target = state.hash_index;
    let mut may_continue = state.hash_index + 1 < params.num_hashes;
    if comptime!(early_exit) {
        may_continue = may_continue && view.empty == 0;
    }
    if view.matched != 0 {
        act = action::FOUND;
        slot = view.matched.trailing_zeros();
    } else if may_continue {
        state.hash_index += 1;
        act = action::NEXT;
    }
    make_step(act, target, slot)
}

/// The first erased slot an insert's walk passed (its hash index plus one, 0: none yet, and its slot), for
/// [`reclaim_step()`].
#[derive(CubeType, Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkSeen {
    /// Hash index of the bucket holding the mark, plus one (0: no mark seen).
    pub at: u32,
    /// The mark's slot in that bucket.
    pub slot: u32,
}

/// A [`MarkSeen`] with no mark.
#[cube]
pub fn no_mark() -> MarkSeen {
    MarkSeen {
        at: 0u32,
        slot: 0u32,
    }
}

/// Inserts that reuse erased slots. `step` is the scheme's insert step after reading the bucket of hash index
/// `read_index`, whose erased slots are `marked`; `mark` remembers the first erased slot the walk passed. The
/// scheme's `CLAIM` (the key is proven absent: its walk reached a bucket with room, or it promised new keys),
/// its `FAIL` (the walk ran out) and a cuckoo scheme's `EVICT` become an [`action::RECLAIM`] of that first mark
/// when there is one; with `absent` (the caller promises the key is not stored: `SchemeParams::upsert == 0`)
/// the first mark is taken as soon as it is read. A key stored there sits on its own find path, before the
/// bucket where a find of it stops, so every find still sees it.
///
/// For schemes whose racing upserts converge ([`ProbingScheme::UPSERTS_CONVERGE`]: one probe sequence, first
/// fit, nothing moves) copies of one key in one launch still meet: a copy that takes an available slot read
/// every earlier slot of the sequence as another key's, and slots only fill within an insert launch, so no
/// earlier slot can take the key after it; a lost reclaim starts the insert again (the drivers' rule), where
/// the copy that won is then matched. Other schemes (IHT, P2BHT, the cuckoo schemes) reclaim in launches of
/// distinct keys (a table's inserts settle duplicates first). A scheme that reads two buckets a step (P2BHT)
/// passes each bucket's marks after its own step, so the first mark of the pair is the one taken; its finds read
/// both buckets, so a key in either mark is found.
/// Cuckoo schemes evict from the bucket just read, so with every `EVICT` turned into a reclaim where a mark was
/// seen, an eviction never exchanges a mark away (a mark carried on as a pair would corrupt the table).
#[cube]
pub fn reclaim_step(
    step: Step,
    marked: u32,
    read_index: u32,
    absent: bool,
    mark: &mut MarkSeen,
) -> Step {
    if mark.at == 0u32 && marked != 0u32 {
        mark.at = read_index + 1u32;
        mark.slot = marked.trailing_zeros();
    }
    // Field by field: cube code cannot reassign a struct.
    let mut act = step.action;
    let mut target = step.target;
    let mut slot = step.slot;
    let placing = act == action::CLAIM || act == action::FAIL || act == action::EVICT;
    if (placing || absent) && mark.at != 0u32 {
        act = action::RECLAIM;
        target = mark.at - 1u32;
        slot = mark.slot;
    }
    make_step(act, target, slot)
}

/// Host-side description of a scheme: its name, defaults and validity rules.
pub trait SchemeInfo: ProbingScheme {
    /// Short name (`"bcht"`).
    const NAME: &'static str;
    /// Bucket sizes this scheme is defined for (checked at compile time by `hashtile::assert_instance!`).
    const BUCKET_SIZES: &'static [u32] = &[1, 2, 4, 8, 16, 32];
    /// Default parameters for bucket size `b`: what a table gets unless its config says otherwise.
    fn default_params(bucket_size: u32) -> SchemeParams;
    /// The parameters of the scheme's paper for bucket size `b`, where the default departs from it for speed
    /// (IHT: the paper's two secondaries; the default walks one sequence as BGHT's code does): what the paper
    /// comparisons (the sweep, the probe-count snapshots) run. The default parameters otherwise.
    fn paper_params(bucket_size: u32) -> SchemeParams {
        Self::default_params(bucket_size)
    }
    /// How many hash indices (`0..n`) a key may be stored under with `params` (placement checks).
    fn candidates(params: &SchemeParams) -> u32 {
        params.num_hashes
    }
    /// Checks a configuration; `Err` explains what is wrong.
    fn validate(bucket_size: u32, params: &SchemeParams) -> Result<(), String>;
    /// Whether racing upserts of one key converge on one slot under `params`: [`ProbingScheme::UPSERTS_CONVERGE`]
    /// (which holds for every parameter set) unless the scheme's rule depends on its parameters. IHT's default
    /// walk converges and its two-choice rule does not. Host calls choose by this (a GPU table's insert-or-apply
    /// then combines a batch's copies in the table itself); kernels' compile-time paths by the constant.
    fn upserts_converge(_params: &SchemeParams) -> bool {
        Self::UPSERTS_CONVERGE
    }
    /// The parameters a table of `num_buckets` buckets runs with: `params` as given, unless the scheme bounds
    /// them by the table (a walk along a probe sequence reads each bucket at most once, so that an absent key
    /// of a table filled to its last slot ends instead of circling).
    fn bounded(params: SchemeParams, _num_buckets: u32) -> SchemeParams {
        params
    }
}

/// `true` if `b` is in `sizes` (usable in constant evaluation, for compile-time instance checks).
pub const fn bucket_size_supported(sizes: &[u32], b: u32) -> bool {
    let mut i = 0;
    while i < sizes.len() {
        if sizes[i] == b {
            return true;
        }
        i += 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reclaim_takes_the_first_mark_once_the_key_is_placed() {
        let step = |a, t, s| make_step(a, t, s);
        // A walk over bucket 0 (no mark), bucket 1 (marks in slots 2 and 5), bucket 2 (a claim).
        let mut mark = no_mark();
        let s0 = reclaim_step(step(action::NEXT, 0, 0), 0, 0, false, &mut mark);
        assert_eq!((s0, mark), (step(action::NEXT, 0, 0), no_mark()));
        let s1 = reclaim_step(step(action::NEXT, 1, 0), 0b100100, 1, false, &mut mark);
        assert_eq!(s1.action, action::NEXT, "the key is not proven absent yet");
        assert_eq!(mark, MarkSeen { at: 2, slot: 2 });
        // A later bucket's marks do not replace the first.
        reclaim_step(step(action::NEXT, 2, 0), 0b1, 2, false, &mut mark);
        for placing in [action::CLAIM, action::FAIL, action::EVICT] {
            let s = reclaim_step(step(placing, 3, 7), 0, 3, false, &mut { mark });
            assert_eq!(s, step(action::RECLAIM, 1, 2), "action {placing}");
        }
        // Updates and finds are left alone.
        let s = reclaim_step(step(action::UPDATE, 3, 4), 0, 3, false, &mut { mark });
        assert_eq!(s, step(action::UPDATE, 3, 4));
        // Without a mark, a claim stays a claim.
        let s = reclaim_step(step(action::CLAIM, 0, 1), 0, 0, false, &mut no_mark());
        assert_eq!(s, step(action::CLAIM, 0, 1));
        // A key promised absent takes the first mark as soon as it is read.
        let s = reclaim_step(step(action::NEXT, 0, 0), 0b1000, 0, true, &mut no_mark());
        assert_eq!(s, step(action::RECLAIM, 0, 3));
    }

    #[test]
    fn a_strided_walk_advances_to_every_probes_bucket() {
        // Small counts, counts near the top of `u32` (no intermediate may pass it) and every start bucket's
        // walk against the remainder formula.
        for n in [1u32, 2, 3, 7, 64, 1000, 18_641_357, u32::MAX - 4, u32::MAX] {
            for second in [0u32, 1, 2, n / 2, n.saturating_sub(1), u32::MAX] {
                for kind in [sequence::LINEAR, sequence::DOUBLE] {
                    let stride = sequence_stride(kind, second, n);
                    assert!(stride >= 1 && (stride < n || n == 1), "{kind} {n} {second}");
                    for base in [0u32, 1, n / 3, n - 1].into_iter().filter(|&b| b < n) {
                        let mut b = sequence_bucket(kind, base, second, 0, 0, n);
                        for i in 1..40u32 {
                            b = sequence_advance(b, stride, n);
                            assert_eq!(b, sequence_bucket(kind, base, second, 0, i, n));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn double_hashing_takes_a_count_it_can_walk() {
        // 2^26 keys at load 0.9 in buckets of 4: 8 * 3 * 103 * 7541, where a step of 2 330 169 (odd) cycles
        // through 8 buckets. It becomes the next prime; powers of two stay.
        let composite = 18_641_352;
        let n = sequence_buckets(sequence::DOUBLE, composite);
        assert!(n >= composite && n - composite < 1000 && is_prime(n), "{n}");
        assert_eq!(sequence_buckets(sequence::DOUBLE, 1 << 20), 1 << 20);
        assert_eq!(sequence_buckets(sequence::LINEAR, composite), composite);
        assert_eq!(sequence_buckets(sequence::HASHES, 6), 6);
        assert_eq!(sequence_buckets(sequence::DOUBLE, 1), 1);
        assert_eq!(
            (0..30).filter(|&n| is_prime(n)).collect::<Vec<_>>(),
            [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
        );
        assert!(is_prime(4_294_967_291));
    }
}
