//! The untyped engine interface every backend implements; the typed [`crate::HashTable`] sits on top.
//!
//! Pairs cross this boundary widened to `(u64, u64)`; the typed layer guarantees they fit the backend's
//! storage (the GPU engines store 32-bit keys and values).

use hashtile_core::{HashFamily, ProbeStats, Result};

/// One backend's table.
pub trait Engine: Send + Sync {
    /// Inserts distinct, validated pairs. Returns probe statistics and the pairs that could not be placed.
    fn insert_pairs(&mut self, pairs: &[(u64, u64)]) -> Result<(ProbeStats, Vec<(u64, u64)>)>;
    /// Looks up keys.
    fn find_keys(&self, keys: &[u64], out: &mut [Option<u64>]) -> Result<ProbeStats>;
    /// Every stored pair.
    fn pairs(&self) -> Result<Vec<(u64, u64)>>;
    /// Empties the table and switches to `family` (used by rebuilds).
    fn reset(&mut self, family: HashFamily) -> Result<()>;
    /// Stored pairs.
    fn len(&self) -> usize;
    /// `true` when no pair is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Slots.
    fn capacity(&self) -> usize;
    /// The hash family in use.
    fn family(&self) -> HashFamily;
    /// For placement checks: `(key, bucket index)` of every stored pair.
    fn placement(&self) -> Result<Vec<(u64, u32)>>;
}
