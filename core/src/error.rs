//! The typed error of every hashtile operation.

use thiserror::Error;

/// Result alias used across hashtile.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong, with enough detail to act on it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// An input key equals the empty sentinel (all ones). Nothing was inserted.
    #[error(
        "key at index {index} is the reserved empty sentinel (all ones) and cannot be stored; nothing was inserted"
    )]
    SentinelKey {
        /// Position of the first offending key in the input.
        index: usize,
    },
    /// An input key equals a dynamic table's tombstone (all ones minus one), which marks erased slots. Nothing
    /// was changed.
    #[error(
        "key at index {index} is the reserved tombstone (all ones minus one) of chained tables and sets and cannot be used; nothing was changed"
    )]
    TombstoneKey {
        /// Position of the first offending key in the input.
        index: usize,
    },
    /// `keys` and `values` (or `keys` and an output buffer) have different lengths. Nothing was done.
    #[error("length mismatch: {what} has {got} elements, expected {expected}")]
    LengthMismatch {
        /// Which argument is wrong.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length it must have.
        expected: usize,
    },
    /// The insert could exceed the table's capacity. Nothing was inserted.
    #[error(
        "capacity exceeded: table holds {len} pairs, the batch adds {incoming} new keys, capacity is {capacity}"
    )]
    CapacityExceeded {
        /// Pairs stored before the call.
        len: usize,
        /// Keys in the batch that are not yet in the table.
        incoming: usize,
        /// Slots in the table.
        capacity: usize,
    },
    /// The table could not place every pair even after re-seeding its hash functions and rebuilding.
    /// Every pair that could not be placed is returned here, so nothing is silently lost; all other pairs
    /// (those stored before the call and the rest of the batch) are in the table.
    #[error(
        "build failed after {attempts} attempts (re-seeded each time): {} pairs could not be placed and are returned in this error; use a lower load factor or a larger bucket",
        unplaced.len()
    )]
    BuildFailed {
        /// Number of build attempts made (1 + rebuilds).
        attempts: u32,
        /// `(key, value)` pairs, widened to `u64`, that are not in the table.
        unplaced: Vec<(u64, u64)>,
    },
    /// A GPU insert gave up on more pairs than its stash (1/16 of the table) can hold: `untracked` pairs are
    /// gone and could not be recorded. Only possible far beyond the scheme's achievable load factor; rebuild
    /// the table from your input with a lower load factor.
    #[error(
        "{untracked} pairs could not be placed and overflowed the failure stash (their contents are lost); {} more are returned here. The load factor is far beyond what this scheme can build: rebuild from your input with a lower load factor",
        unplaced.len()
    )]
    StashOverflow {
        /// Pairs lost without a record.
        untracked: usize,
        /// Pairs that could not be placed and are returned.
        unplaced: Vec<(u64, u64)>,
    },
    /// The requested backend is not compiled in or no device was found.
    #[error("backend {backend} is unavailable: {reason}. {how}")]
    BackendUnavailable {
        /// Backend name.
        backend: &'static str,
        /// What went wrong.
        reason: String,
        /// How to get it.
        how: &'static str,
    },
    /// A call needs more memory than the device (or host) has free. Nothing was allocated.
    #[error(
        "{what} needs {needed} bytes but the {device} has {available} bytes free; use smaller batches or a smaller table"
    )]
    OutOfMemory {
        /// What was to be allocated.
        what: &'static str,
        /// Which memory.
        device: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes free.
        available: u64,
    },
    /// Another process of a table spread over ranks (one process per GPU) failed or stopped answering: its
    /// exchange was aborted after `waited_ms` milliseconds. This process's own shards keep every pair they
    /// held; the table's exchange stays closed, so later calls that need the other ranks return this error.
    #[error(
        "a peer rank failed or did not answer within {waited_ms} ms ({detail}); the exchange was aborted and this rank's shards keep their pairs"
    )]
    PeerFailed {
        /// How long this rank waited before giving up.
        waited_ms: u64,
        /// What was seen (NCCL's error, or a time-out).
        detail: String,
    },
    /// The device reported an error (a failed copy, launch or synchronisation).
    #[error("device error: {0}")]
    Device(String),
    /// The configuration is invalid for this scheme or backend (e.g. a bucket size that is not a power of two).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
}
