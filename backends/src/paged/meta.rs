//! The per-child state a paged table keeps on the host beside each child's table.

use std::collections::HashMap;

/// Per-child state the host keeps beside the child's table.
pub(super) struct ChildMeta<K, V> {
    /// Pairs the child's build gave up on (at most `stash_pairs`).
    pub(super) stash: HashMap<K, V>,
    /// Local depth in the route directory (hash-routed).
    pub(super) depth: u32,
}
