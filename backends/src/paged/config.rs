//! How to build a paged table: [`PagedConfig`] (its defaults and builder methods), the placement and
//! replacement policies and the device budget.

use crate::runtime::select::BackendChoice;
use crate::table::TableConfig;
use hashtile_core::scheme::SchemeParams;

/// Bytes of one child by default: the paper's page size.
pub const DEFAULT_PAGE_BYTES: u64 = 64 << 20;
/// Stash pairs per child by default: the paper's.
pub const DEFAULT_STASH_PAIRS: usize = 108;

/// Where a key's child is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Children fill in arrival order (the paper's policy); finds consult the resident children first.
    ArrivalOrder,
    /// A key's child comes from route bits of its own hash; a batch is partitioned by child.
    HashRouted,
}

/// Which resident child pages out when another must come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replacement {
    /// The one resident longest (the paper's).
    Fifo,
    /// The one used least recently.
    Lru,
}

/// How much device memory the children may hold at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceBudget {
    /// Every child stays resident.
    Unlimited,
    /// At most this many bytes of children's slots.
    Bytes(u64),
    /// At most this many children.
    Children(usize),
}

/// How to build a `PagedTable`. Start from [`PagedConfig::with_child_slots`] or [`PagedConfig::default`].
#[derive(Debug, Clone, PartialEq)]
pub struct PagedConfig {
    /// Every child's table settings: backend, bucket size, scheme parameters, master seed, rebuild attempts,
    /// deterministic CPU mode, probe counting, batch sizes. Its `capacity` is the slots per child (0: one
    /// [`DEFAULT_PAGE_BYTES`] page).
    pub child: TableConfig,
    /// Placement policy (default: hash-routed).
    pub placement: Placement,
    /// Load at which a child counts as full (a new child opens, or the child splits), in `(0, 1]`.
    pub max_load: f64,
    /// Device memory for resident children (default: unlimited).
    pub budget: DeviceBudget,
    /// Replacement policy (default: LRU).
    pub replacement: Replacement,
    /// Pairs a child may keep in its stash before it is rebuilt.
    pub stash_pairs: usize,
    /// Children of the empty table (hash-routed: rounded up to a power of two).
    pub initial_children: usize,
    /// At most this many children (`None`: as many as the host holds); an insert that could need more is
    /// refused with [`Error::CapacityExceeded`](hashtile_core::Error::CapacityExceeded).
    pub max_children: Option<usize>,
    /// Hash-routed tables on a GPU partition their batches on the device (default: on; off partitions on
    /// the host, as the CPU backend always does: the A/B of the device routing).
    pub device_routing: bool,
    /// Resident GPU children share one slot allocation (`gpu::frames`), so that a hash-routed find over
    /// every resident child is one kernel launch per copy chunk (default: on; off: each child has its own
    /// allocation and finds partition the batch by child, the A/B).
    pub shared_frames: bool,
    /// While one child works on a batch, the next child the batch needs is paged in (its copy queued on the
    /// swap stream, beside the working child's kernels and the page-outs' copies), when the budget holds two
    /// children (default: on; off pages each child in when its turn comes, the A/B).
    pub prefetch: bool,
    /// With every child resident in the shared frames, a hash-routed upsert batch whose kept keys fit each
    /// child's room goes in with one classify and one insert launch per copy chunk over the frames (default: on;
    /// off: every batch is partitioned by child, the A/B).
    pub framed_upserts: bool,
}

impl Default for PagedConfig {
    fn default() -> Self {
        Self::with_child_slots(0)
    }
}

impl PagedConfig {
    /// Children of at least `slots` slots each (0: one [`DEFAULT_PAGE_BYTES`] page of the layout's slots).
    pub fn with_child_slots(slots: usize) -> Self {
        Self {
            child: TableConfig::with_capacity(slots),
            placement: Placement::HashRouted,
            max_load: 0.8,
            budget: DeviceBudget::Unlimited,
            replacement: Replacement::Lru,
            stash_pairs: DEFAULT_STASH_PAIRS,
            initial_children: 1,
            max_children: None,
            device_routing: true,
            shared_frames: true,
            prefetch: true,
            framed_upserts: true,
        }
    }
    /// Pages the next child a batch needs in while the current one works (default on; see
    /// [`PagedConfig::prefetch`]).
    pub fn framed_upserts(mut self, on: bool) -> Self {
        self.framed_upserts = on;
        self
    }
    /// The same configuration with [`PagedConfig::prefetch`] on or off.
    pub fn prefetch(mut self, on: bool) -> Self {
        self.prefetch = on;
        self
    }
    /// Resident GPU children share one slot allocation (default on; see [`PagedConfig::shared_frames`]).
    pub fn shared_frames(mut self, on: bool) -> Self {
        self.shared_frames = on;
        self
    }
    /// Partitions hash-routed batches on the device (GPU children; default on).
    pub fn device_routing(mut self, on: bool) -> Self {
        self.device_routing = on;
        self
    }
    /// Sets the backend.
    pub fn backend(mut self, backend: BackendChoice) -> Self {
        self.child.backend = backend;
        self
    }
    /// Sets the placement policy.
    pub fn placement(mut self, p: Placement) -> Self {
        self.placement = p;
        self
    }
    /// Sets the load at which a child is full.
    pub fn max_load(mut self, load: f64) -> Self {
        self.max_load = load;
        self
    }
    /// Sets the device budget.
    pub fn budget(mut self, b: DeviceBudget) -> Self {
        self.budget = b;
        self
    }
    /// Sets the replacement policy.
    pub fn replacement(mut self, r: Replacement) -> Self {
        self.replacement = r;
        self
    }
    /// Sets the stash size per child.
    pub fn stash_pairs(mut self, n: usize) -> Self {
        self.stash_pairs = n;
        self
    }
    /// Sets the children of the empty table.
    pub fn initial_children(mut self, n: usize) -> Self {
        self.initial_children = n;
        self
    }
    /// Sets the most children the table may grow to.
    pub fn max_children(mut self, n: usize) -> Self {
        self.max_children = Some(n);
        self
    }
    /// Sets the children's bucket size.
    pub fn bucket_size(mut self, b: u32) -> Self {
        self.child.bucket_size = Some(b);
        self
    }
    /// Sets the children's scheme parameters.
    pub fn params(mut self, p: SchemeParams) -> Self {
        self.child.params = Some(p);
        self
    }
    /// Sets the master seed (children's families and the route hash derive from it).
    pub fn seed(mut self, seed: u64) -> Self {
        self.child.seed = seed;
        self
    }
    /// Sets the re-seeded rebuilds a failing child tries before it grows.
    pub fn max_rebuilds(mut self, n: u32) -> Self {
        self.child.max_rebuilds = n;
        self
    }
    /// CPU backend: sequential, reproducible children.
    pub fn deterministic(mut self, on: bool) -> Self {
        self.child.deterministic = on;
        self
    }
    /// GPU backends: keys per device batch of a child's calls.
    pub fn batch_keys(mut self, keys: usize) -> Self {
        self.child.batch_keys = Some(keys);
        self
    }
}
