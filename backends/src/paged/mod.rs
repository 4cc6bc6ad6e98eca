//! Paged tables (Starfish): a table larger than device memory, made of **child tables** of one page each
//! (64 MB by default), of which only a device budget's worth is resident; the others wait in (pinned) host
//! memory and are swapped in when a batch needs them.
//!
//! A [`PagedTable`] is a composition over any static scheme, not a scheme: each child is the static table
//! [`crate::HashTable`] builds (BCHT, IHT, P2BHT or 1CHT, any bucket size, 32- or 64-bit keys and values) on
//! any backend, wrapped with its residency (`protocol::PagedChild`: `cpu::CpuChild`,
//! `gpu::child::GpuChild`, built by `make_child`), with a small host **stash** (108 pairs by default, the
//! paper's) for pairs its build gave up on. Two placement policies:
//!
//! - [`Placement::ArrivalOrder`] (the paper's): children fill in turn, the table grows by appending children,
//!   and a find runs the query batch against the resident children first, carrying the keys not found on to
//!   the others. An insert first updates the keys some child already holds (a find over every child: the
//!   price of upserts in this policy), then fills the open child.
//! - [`Placement::HashRouted`]: a key's child comes from route bits independent of the children's own hash
//!   families (extendible hashing, `route`), so a find, upsert or erase touches exactly one child, and the
//!   table grows by splitting the child that passes its load threshold.
//!
//! A child that cannot place its pairs keeps up to `stash_pairs` of them in its stash; past that it is
//! rebuilt **alone** with a new seed ([`PagingStats::rebuilds`]), then grown (split, or its overflow moved to
//! a new child). Nothing is lost: pairs that no rebuild or growth could place are returned in
//! [`Error::BuildFailed`].
//!
//! Erase marks the keys' slots erased in place (**tombstones**) in stable children (IHT, P2BHT) of 32-bit keys:
//! an erased slot is skipped by lookups and scans and stays taken until its child is rebuilt (a child whose
//! tombstones would push it past `max_load` is rebuilt in place first). Cuckoo children (an eviction could move
//! a key into the marked slot) and 64-bit keys (no key word to spare for the mark) erase by rebuilding the
//! child without the keys under its own hash family: one child's rebuild per touched child.
//!
//! Hash-routed tables on a GPU partition their batches **on the device** (`gpu::routing`): a batch crosses the
//! bus once, is counted and scattered into per-child parts there, and each child's kernels run on its part;
//! finds come back in input order in one copy. CPU children, and tables built with
//! [`PagedConfig::device_routing`] off, partition on the host. While one child works on its part, the next
//! child the batch needs is paged in ([`PagedConfig::prefetch`]): on CUDA its copy runs on the swap stream
//! beside the current child's kernels and beside the page-outs' copies ([`PagingStats::prefetched`]).
//!
//! The CPU backend runs the same manager over CPU children (residency is logical there: a paged-out child
//! refuses work exactly as a device child does); it is the oracle of the GPU tests.
//!
//! ```
//! use hashtile_backends::paged::{DeviceBudget, PagedConfig, PagedTable, Placement};
//! use hashtile_backends::{Backend, BackendChoice};
//! use hashtile_probing::Bcht;
//! // Children of 1024 slots filled to 0.8, at most two resident at a time.
//! let cfg = PagedConfig::with_child_slots(1024)
//!     .backend(BackendChoice::Exactly(Backend::Cpu))
//!     .placement(Placement::HashRouted)
//!     .budget(DeviceBudget::Children(2));
//! let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(cfg)?;
//! let keys: Vec<u32> = (0..10_000).collect();
//! t.insert(&keys, &keys)?;
//! assert_eq!(t.len(), 10_000);
//! assert!(t.children() >= 13);
//! assert_eq!(t.find(&[7, 20_000])?, vec![Some(7), None]);
//! assert_eq!(t.erase(&[7, 8, 20_000])?, 2);
//! assert!(t.resident_children().len() <= 2);
//! # Ok::<(), hashtile_core::Error>(())
//! ```

mod cpu;
mod frames;
pub mod gpu;
#[doc(hidden)]
pub mod protocol;
mod residency;
pub(crate) mod route;
mod trace;

use crate::paged::cpu::CpuChild;
use crate::paged::gpu::child::AsChild;
use crate::paged::gpu::routing::MAX_ROUTED_CHILDREN;
use crate::paged::protocol::{
    FramedCounts, PagedChild, ROUTED_COUNTERS, Rebuilt, RoutedBatch, Router, SlotFrames, SplitSpec,
    Upserted,
};
use crate::results::{bits_from, options_from_bits};
use crate::select::unavailable;
use crate::select::{Backend, BackendChoice, is_available, resolve};
use crate::table::engine::Inserted;
use crate::table::{EngineShape, TableConfig, cpu_engine, default_bucket_size_of, gpu_spec};
use hashtile_core::element::first_sentinel;
use hashtile_core::scheme::{SchemeInfo, SchemeParams};
use hashtile_core::{Error, HashFamily, Key, Result, Value};
use rayon::prelude::*;
pub use residency::PagingStats;
use residency::Residency;
use route::{Directory, partition, route_hash, scatter};
use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use trace::Trace;

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

/// How to build a [`PagedTable`]. Start from [`PagedConfig::with_child_slots`] or [`PagedConfig::default`].
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
    /// refused with [`Error::CapacityExceeded`].
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

/// Per-child state the host keeps beside the child's table.
struct ChildMeta<K, V> {
    /// Pairs the child's build gave up on (at most `stash_pairs`).
    stash: HashMap<K, V>,
    /// Local depth in the route directory (hash-routed).
    depth: u32,
    /// Erased slots (tombstones) since the child's last rebuild: they take slots until it is rebuilt.
    tombstones: usize,
}

/// A table of `K -> V` larger than device memory: children of scheme `S`, paged within a device budget.
/// See the [module docs](self).
pub struct PagedTable<S: SchemeInfo, K: Key, V: Value> {
    children: Vec<Box<dyn PagedChild<K, V>>>,
    meta: Vec<ChildMeta<K, V>>,
    residency: Residency,
    directory: Option<Directory>,
    config: PagedConfig,
    backend: Backend,
    shape: EngineShape,
    /// Children made so far (the seed of the next child's family).
    made: u64,
    /// The last host partition's buffers, filled again by the next (no fresh pages per call).
    scratch: Option<route::Partition<K, V>>,
    /// The device router of hash-routed GPU tables (made on first use; taken out while a call uses it, so
    /// that the calls it makes, splits say, partition on the host).
    router: Option<Box<dyn Router<K, V>>>,
    /// A call holds the router.
    routing: bool,
    /// `find_into`'s presence bits, kept between calls.
    bits: Vec<u32>,
    /// The slot frames the resident children share (GPU, hash-routed: `frames`).
    frames: Option<SlotFrames>,
    _scheme: PhantomData<S>,
}

/// An empty child of `shape` under `family`, with `config`'s per-backend settings: the static table
/// [`crate::HashTable`] would build (the same construction), wrapped with its residency.
pub(crate) fn make_child<S: SchemeInfo, K: Key, V: Value>(
    config: &TableConfig,
    shape: EngineShape,
    family: HashFamily,
) -> Result<Box<dyn PagedChild<K, V>>> {
    Ok(match shape.backend {
        Backend::Cpu => Box::new(CpuChild::new(cpu_engine::<S>(config, shape, family)?)),
        backend => crate::table::gpu::build::build::<S, _>(
            backend,
            gpu_spec::<K, V>(config, shape, family),
            AsChild::<K, V>::default(),
        )?,
    })
}

/// Pairs split into keys and values.
type Batch<K, V> = (Vec<K>, Vec<V>);
/// Pairs.
type Pairs<K, V> = Vec<(K, V)>;

impl<S: SchemeInfo, K: Key, V: Value> PagedTable<S, K, V> {
    /// Builds an empty table. Bad settings (a load outside `(0, 1]`, a budget that cannot hold one child,
    /// no initial children, anything [`crate::HashTable::new`] rejects for the children) are
    /// [`Error::InvalidConfig`].
    pub fn new(config: PagedConfig) -> Result<Self> {
        let wide = K::BITS > 32 || V::BITS > 32;
        let gpu_ok = !wide || S::STABLE;
        let backend = match config.child.backend {
            BackendChoice::Auto if !gpu_ok => Backend::Cpu,
            choice => resolve(choice),
        };
        if !is_available(backend) {
            return Err(unavailable(backend));
        }
        if backend != Backend::Cpu && !gpu_ok {
            return Err(Error::InvalidConfig(format!(
                "{} moves pairs, which GPUs do for pairs of up to 64 bits; use a stable scheme for {}-bit keys \
                 with {}-bit values",
                S::NAME,
                K::BITS,
                V::BITS
            )));
        }
        if !(config.max_load > 0.0 && config.max_load <= 1.0) {
            return Err(Error::InvalidConfig(format!(
                "max_load must be in (0, 1], got {}",
                config.max_load
            )));
        }
        if config.initial_children == 0 || config.max_children.is_some_and(|m| m == 0) {
            return Err(Error::InvalidConfig(
                "a paged table needs at least one child".into(),
            ));
        }
        let bucket_size = config
            .child
            .bucket_size
            .unwrap_or_else(|| default_bucket_size_of::<S>(backend));
        let mut child = config.child.clone();
        if child.capacity == 0 {
            let per_slot = if wide { 16 } else { 8 };
            child.capacity = (DEFAULT_PAGE_BYTES / per_slot) as usize;
        }
        child.validate(bucket_size)?;
        let params = child
            .params
            .unwrap_or_else(|| S::default_params(bucket_size));
        S::validate(bucket_size, &params).map_err(Error::InvalidConfig)?;
        let shape = EngineShape {
            backend,
            num_buckets: child.num_buckets(bucket_size)?,
            bucket_size,
            params,
            share_stager: true,
        };
        let bytes = shape.num_buckets as u64 * bucket_size as u64 * if wide { 16 } else { 8 };
        let residency = Residency::new(config.budget, config.replacement);
        if !residency.holds(1, bytes) {
            return Err(Error::InvalidConfig(format!(
                "the device budget {:?} cannot hold one child of {bytes} bytes",
                config.budget
            )));
        }
        let mut t = Self {
            children: Vec::new(),
            meta: Vec::new(),
            residency,
            directory: None,
            config: PagedConfig { child, ..config },
            backend,
            shape,
            made: 0,
            scratch: None,
            router: None,
            routing: false,
            bits: Vec::new(),
            frames: None,
            _scheme: PhantomData,
        };
        t.start()?;
        Ok(t)
    }

    /// Makes the empty table's children (and the route directory).
    fn start(&mut self) -> Result<()> {
        let most = self.config.max_children.unwrap_or(usize::MAX);
        let n = match self.config.placement {
            Placement::ArrivalOrder => self.config.initial_children.min(most),
            // A power of two (the directory's), at most max_children.
            Placement::HashRouted => self
                .config
                .initial_children
                .next_power_of_two()
                .min(1 << most.ilog2()),
        };
        if self.config.placement == Placement::HashRouted {
            self.directory = Some(Directory::new(
                route_hash(self.config.child.seed, 0x726f_7574_6520_7365),
                n,
            ));
        }
        for c in 0..n {
            self.new_child(n.trailing_zeros(), &[])?;
            if c == 0 {
                self.budget_frames(n)?;
            }
        }
        Ok(())
    }

    /// Appends an empty, resident child of route depth `depth` (paging others out as the budget needs, never
    /// one in `keep`); returns its index.
    fn new_child(&mut self, depth: u32, keep: &[usize]) -> Result<usize> {
        let c = self.children.len();
        if !self.children.is_empty() {
            let need = self.children[0].device_bytes();
            self.residency.make_room(&mut self.children, need, keep)?;
        }
        let family = self.next_family();
        let engine = make_child::<S, K, V>(&self.config.child, self.shape, family)?;
        self.residency.admitted_new(c, engine.device_bytes());
        self.children.push(engine);
        self.meta.push(ChildMeta {
            stash: HashMap::new(),
            depth,
            tombstones: 0,
        });
        self.house(c)?;
        Ok(c)
    }

    /// The hash family of the next child (each child's own, derived from the master seed).
    fn next_family(&mut self) -> HashFamily {
        self.made += 1;
        HashFamily::new(route_hash(self.made - 1, self.config.child.seed))
    }

    fn can_grow(&self) -> bool {
        self.config
            .max_children
            .is_none_or(|m| self.children.len() < m)
    }

    /// Pairs a child holds before it counts as full.
    fn limit(&self) -> usize {
        (self.child_capacity() as f64 * self.config.max_load).floor() as usize
    }

    /// Slots child `c` takes: its pairs, its stash and its erased slots.
    fn load(&self, c: usize) -> usize {
        self.children[c].len() + self.meta[c].stash.len() + self.meta[c].tombstones
    }

    /// Erased slots (tombstones) the children hold until their next rebuild.
    pub fn tombstones(&self) -> usize {
        self.meta.iter().map(|m| m.tombstones).sum()
    }

    /// Slots of one child.
    pub fn child_capacity(&self) -> usize {
        self.shape.num_buckets as usize * self.shape.bucket_size as usize
    }

    /// The backend the children run on.
    pub fn backend(&self) -> Backend {
        self.backend
    }
    /// Children's bucket size.
    pub fn bucket_size(&self) -> u32 {
        self.shape.bucket_size
    }
    /// The placement policy.
    pub fn placement(&self) -> Placement {
        self.config.placement
    }
    /// Stored pairs (children and stashes).
    pub fn len(&self) -> usize {
        self.children.iter().map(|c| c.len()).sum::<usize>() + self.stash_len()
    }
    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Slots of all children.
    pub fn capacity(&self) -> usize {
        self.children.len() * self.child_capacity()
    }
    /// Children.
    pub fn children(&self) -> usize {
        self.children.len()
    }
    /// Pairs in each child (stash included).
    pub fn child_lens(&self) -> Vec<usize> {
        self.children
            .iter()
            .zip(&self.meta)
            .map(|(c, m)| c.len() + m.stash.len())
            .collect()
    }
    /// Pairs held in stashes.
    pub fn stash_len(&self) -> usize {
        self.meta.iter().map(|m| m.stash.len()).sum()
    }
    /// Resident children, in the order the policy would page them out.
    pub fn resident_children(&self) -> Vec<usize> {
        self.residency.resident()
    }
    /// Device bytes the resident children hold.
    pub fn resident_bytes(&self) -> u64 {
        self.residency.resident_bytes()
    }
    /// Device bytes of one child.
    pub fn child_bytes(&self) -> u64 {
        self.children[0].device_bytes()
    }
    /// Swaps, bytes moved, confined rebuilds and growth so far.
    pub fn paging(&self) -> PagingStats {
        self.residency.stats.clone()
    }

    fn admit(&mut self, c: usize, keep: &[usize]) -> Result<()> {
        if self.frames.is_some() && !self.children[c].is_resident() {
            // Room first, so that a frame is free for the child.
            let need = self.children[c].device_bytes();
            self.residency.make_room(&mut self.children, need, keep)?;
            if let Some((frames, at)) = self.free_frame() {
                return self
                    .residency
                    .admit(&mut self.children, c, keep, Some((&frames, at)));
            }
        }
        self.residency.admit(&mut self.children, c, keep, None)
    }

    /// Runs `work` on each child of `order` in turn, each made resident first. With prefetching on (and a
    /// budget that holds two children), the next child is paged in before `work` runs on the current one: a
    /// GPU child's page-in only queues its copy, and its first kernel waits for it, so the copy runs while
    /// the current child's kernels do (and beside the page-outs' copies, on a stream of their own).
    fn visit_paging(
        &mut self,
        order: &[usize],
        mut work: impl FnMut(&mut Self, usize) -> Result<()>,
    ) -> Result<()> {
        let ahead = self.prefetching();
        // Diagnosis (a TRACE subscriber): where the host's time goes while children swap.
        let mut trace = Trace::start();
        for (j, &c) in order.iter().enumerate() {
            self.admit(c, &[])?;
            trace.lap("paged in at its turn");
            if ahead
                && let Some(&next) = order.get(j + 1)
                && !self.children[next].is_resident()
            {
                let need = self.children[next].device_bytes();
                self.residency.make_room(&mut self.children, need, &[c])?;
                trace.lap("paged out");
                self.prefetch(next, c)?;
                trace.lap("page-in queued");
            }
            work(self, c)?;
            trace.lap("child's work (waits for its page-in)");
        }
        trace.report("visit of children", order.len());
        Ok(())
    }

    /// Pages child `n` in ahead of its turn, keeping the working child `c` resident.
    fn prefetch(&mut self, n: usize, c: usize) -> Result<()> {
        self.admit(n, &[c])?;
        self.residency.stats.prefetched += 1;
        Ok(())
    }

    /// Whether a child is paged in while another works ([`PagedConfig::prefetch`], and a budget that holds two
    /// children).
    fn prefetching(&self) -> bool {
        self.config.prefetch
            && !self.children.is_empty()
            && self.residency.holds(2, 2 * self.child_bytes())
    }

    /// `wanted` children, the resident ones first (they cost no swap), then the others in index order.
    fn visit_order(&self, wanted: impl Iterator<Item = usize>) -> Vec<usize> {
        let (mut now, later): (Vec<usize>, Vec<usize>) =
            wanted.partition(|&c| self.children[c].is_resident());
        now.extend(later);
        now
    }

    /// Children that hold anything.
    fn occupied(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.children.len()).filter(|&c| self.children[c].len() + self.meta[c].stash.len() > 0)
    }

    /// Inserts (upserts) pairs: the **last** occurrence of a key in the batch wins, and a stored key gets the
    /// new value. Full children grow the table (a split, or a new child) and failing children are rebuilt
    /// alone; the other children are untouched.
    ///
    /// Errors: [`Error::LengthMismatch`], [`Error::SentinelKey`] and [`Error::CapacityExceeded`] (with
    /// `max_children`, checked conservatively: every key of the batch counts as new) leave the table
    /// unchanged. [`Error::BuildFailed`] returns the pairs that no rebuild or growth could place; every other
    /// pair is stored.
    pub fn insert(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: keys.len(),
            });
        }
        // A batch that one device-routed call takes is checked for the sentinel by the device during its copy
        // (`Router::checks_sentinel`); any other batch is scanned here first, so that a refused batch leaves
        // the table unchanged.
        if !self.router_checks(keys.len())
            && let Some(index) = first_sentinel(keys)
        {
            return Err(Error::SentinelKey { index });
        }
        if let Some(m) = self.config.max_children {
            let most = m * self.limit();
            if self.len() + keys.len() > most {
                return Err(Error::CapacityExceeded {
                    len: self.len(),
                    incoming: keys.len(),
                    capacity: most,
                });
            }
        }
        if keys.is_empty() {
            return Ok(());
        }
        let mut failed = Vec::new();
        match self.config.placement {
            Placement::HashRouted => self.insert_routed(keys, values, &mut failed)?,
            Placement::ArrivalOrder => {
                self.insert_arrival(keys.to_vec(), values.to_vec(), &mut failed)?
            }
        }
        if !failed.is_empty() {
            // A pair given up on may have a later occurrence that was stored after all (in a child with room):
            // report each key once, and only keys the table does not hold.
            let (k, v): Batch<K, V> = failed.into_iter().unzip();
            let mut out = vec![V::zero(); k.len()];
            let mut bits = vec![0u32; k.len().div_ceil(32)];
            self.lookup(&k, &mut out, &mut bits, true)?;
            let (_, (k, v)) = split_by_bits(k, v, &bits);
            failed = last_occurrences(k, v);
        }
        self.settled((), failed)
    }

    /// Hash-routed insert: partition by child, then each child's part (resident children first).
    fn insert_routed(&mut self, keys: &[K], values: &[V], failed: &mut Vec<(K, V)>) -> Result<()> {
        if let Some(router) = self.take_router() {
            let done = self.insert_on_device(&*router, keys, values, failed);
            self.give_router(router);
            return done;
        }
        let mut trace = Trace::start();
        let part = self.route(keys, values, false);
        trace.lap("partition");
        let parts = self.children.len();
        for c in self.visit_order((0..parts).filter(|&c| !part.range(c).is_empty())) {
            let r = part.range(c);
            self.insert_into(c, &part.keys[r.clone()], &part.values[r], failed)?;
            trace.lap("children");
        }
        self.scratch = Some(part);
        trace.report("insert", keys.len());
        Ok(())
    }

    /// The device router, when this table routes on the device (hash-routed GPU children, device routing
    /// on, at most [`MAX_ROUTED_CHILDREN`] children, and no call using it already); give it back to
    /// `self.router` when done.
    fn take_router(&mut self) -> Option<Box<dyn Router<K, V>>> {
        if !self.config.device_routing
            || self.backend == Backend::Cpu
            || self.directory.is_none()
            || self.children.len() > MAX_ROUTED_CHILDREN
        {
            return None;
        }
        if self.routing {
            return None;
        }
        if self.router.is_none() {
            self.router = self.children[0].router();
        }
        let router = self.router.take();
        self.routing = router.is_some();
        router
    }

    /// `true` when an insert of `n` keys goes to the device router in one call that checks the sentinel.
    fn router_checks(&mut self, n: usize) -> bool {
        if self.config.placement != Placement::HashRouted {
            return false;
        }
        match self.take_router() {
            Some(r) => {
                let checks = r.checks_sentinel() && n <= r.batch_keys();
                self.give_router(r);
                checks
            }
            None => false,
        }
    }

    /// Gives the router back after a call.
    fn give_router(&mut self, router: Box<dyn Router<K, V>>) {
        self.router = Some(router);
        self.routing = false;
    }

    /// Hash-routed insert on the device: each device batch is copied in and partitioned by child there
    /// (keeping each key's last occurrence), and each child upserts its part in place: the resident children's
    /// upserts queue back to back and settle once; a child that must be paged in first settles the queued ones
    /// (paging may page one of them out). A child
    /// whose part could pass its load, or whose stash holds pairs, gets that part and its later ones copied
    /// out, and they are routed and inserted on the host after the batch (`insert_into`: a split, the stash's
    /// updates).
    fn insert_on_device(
        &mut self,
        router: &dyn Router<K, V>,
        keys: &[K],
        values: &[V],
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        let mut trace = Trace::start();
        let step = router.batch_keys();
        for start in (0..keys.len()).step_by(step) {
            if self.children.len() > MAX_ROUTED_CHILDREN {
                // The table grew past what the device routes during this call: the rest on the host.
                return self.insert_routed(&keys[start..], &values[start..], failed);
            }
            let end = (start + step).min(keys.len());
            let dir = self.directory.clone().expect("hash-routed");
            let children = self.children.len();
            let limit = self.limit();
            // Per child: keys queued since it last settled, and whether its parts go through the host in this
            // call; the queued children; the parts that go through the host, in order.
            let mut pending = vec![0usize; children];
            let mut later = vec![false; children];
            let mut queued: Vec<usize> = Vec::new();
            let mut on_host: Vec<Batch<K, V>> = Vec::new();
            let route = dir.route_map(children);
            // Every child resident in the frames: a batch that fits goes in without a partition.
            let framed = self.framed_upsert()?;
            // Diagnosis (a TRACE subscriber): when the partition reached the children, and when they were queued.
            let mut part_at: Vec<std::time::Instant> = Vec::new();
            let mut on_part = |batch: &RoutedBatch| -> Result<()> {
                part_at.push(std::time::Instant::now());
                let mut queue = || -> Result<()> {
                    let wanted = (0..children).filter(|&c| batch.counts[c] > 0);
                    let order = self.visit_order(wanted);
                    let ahead = self.prefetching();
                    // Children whose part goes through the host (after the batch) need no page-in now.
                    let on_host_now = |t: &Self, c: usize, pending: &[usize], later: &[bool]| {
                        later[c]
                            || !t.meta[c].stash.is_empty()
                            || t.load(c) + pending[c] + batch.counts[c] > limit
                    };
                    for (j, &c) in order.iter().enumerate() {
                        if on_host_now(self, c, &pending, &later) {
                            later[c] = true;
                            let (k, v) = router.download(batch, c)?;
                            on_host.push((k, v));
                            continue;
                        }
                        // The next child that needs a page-in is paged in before this one's kernels are
                        // queued, so that its copy runs beside them.
                        let next = if ahead {
                            order[j + 1..]
                                .iter()
                                .copied()
                                .find(|&n| !on_host_now(self, n, &pending, &later))
                                .filter(|&n| !self.children[n].is_resident())
                        } else {
                            None
                        };
                        if (!self.children[c].is_resident() || next.is_some()) && !queued.is_empty()
                        {
                            // Paging may page a queued child out: the queued ones settle first (before this
                            // child is admitted: settling may page children in).
                            let counters = router.counters(batch)?;
                            self.settle_queued(&mut queued, &mut pending, failed, &counters)?;
                        }
                        self.admit(c, &[])?;
                        if let Some(n) = next {
                            self.prefetch(n, c)?;
                        }
                        self.children[c].upsert_routed(batch, c)?;
                        queued.push(c);
                        pending[c] += batch.counts[c];
                    }
                    Ok(())
                };
                let done = queue();
                if done.is_err() && !queued.is_empty() {
                    // What was queued settles even when a part failed (the children's counts stay right).
                    let counters = router.counters(batch)?;
                    self.settle_queued(&mut queued, &mut pending, failed, &counters)?;
                }
                part_at.push(std::time::Instant::now());
                done
            };
            let plan = framed.as_ref().map(frames::FramedPlan::upsert);
            let routed = router.upsert(
                &keys[start..end],
                &values[start..end],
                route,
                plan,
                &mut on_part,
            );
            trace.split(&part_at, &["copied and routed", "children queued"]);
            if routed.is_err() && framed.is_some() {
                // A framed batch may have written chunks into the frames before it failed: no child may page
                // out with its old host image.
                for c in &mut self.children {
                    let _ = c.note_framed(0);
                }
            }
            let counters = match routed? {
                Upserted::Routed(counters) => counters,
                Upserted::Framed(counts) => {
                    trace.lap("framed upsert");
                    self.residency.stats.framed_upserts += 1;
                    self.settle_framed(counts, failed)?;
                    trace.lap("framed upsert settled");
                    continue;
                }
            };
            trace.lap("counters read");
            self.settle_queued(&mut queued, &mut pending, failed, &counters)?;
            trace.lap("children settled");
            if !on_host.is_empty() {
                // Routed again on the host, in part order: a split of one child while inserting its first
                // part would move keys of its later parts to the new child.
                let (k, v): Batch<K, V> = on_host
                    .into_iter()
                    .flat_map(|(k, v)| k.into_iter().zip(v))
                    .unzip();
                self.insert_routed(&k, &v, failed)?;
            }
            trace.lap("children through the host");
        }
        trace.report("insert (device routing)", keys.len());
        Ok(())
    }

    /// Settles the routed upserts queued on `queued` (emptied; `pending` zeroed for them) from the batch's
    /// `counters` as read back ([`ROUTED_COUNTERS`] words per child), then keeps what each could not place.
    fn settle_queued(
        &mut self,
        queued: &mut Vec<usize>,
        pending: &mut [usize],
        failed: &mut Vec<(K, V)>,
        counters: &[u32],
    ) -> Result<()> {
        // Every queued child settles, even after one fails, so that none is left with work in flight.
        let mut settled = Vec::with_capacity(queued.len());
        let mut first_error = None;
        for c in queued.drain(..) {
            pending[c] = 0;
            let words = &counters[c * ROUTED_COUNTERS..(c + 1) * ROUTED_COUNTERS];
            match self.children[c].settle_routed(words) {
                Ok(inserted) => settled.push((c, inserted)),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for (c, Inserted { unplaced, .. }) in settled {
            self.place_unplaced(c, unplaced, failed)?;
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Settles a framed upsert batch: each child written holds its new keys less those it gave up on, which
    /// it then keeps like any child's (stash, confined rebuild, growth: [`Self::place_unplaced`]).
    fn settle_framed(
        &mut self,
        counts: FramedCounts<K, V>,
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        let n = self.children.len();
        self.residency.touch(|c| counts.kept[c] > 0);
        // Every written child records its writes, even after one fails.
        let mut first_error = None;
        for c in (0..n).filter(|&c| counts.kept[c] > 0) {
            if let Err(e) = self.children[c].note_framed(counts.stored[c]) {
                first_error.get_or_insert(e);
            }
        }
        let mut lost: Vec<Pairs<K, V>> = (0..n).map(|_| Vec::new()).collect();
        for (k, v) in counts.unplaced {
            let c = self.child_of(k).expect("a hash-routed table");
            lost[c].push((k, v));
        }
        if counts.untracked > 0 {
            return Err(Error::StashOverflow {
                untracked: counts.untracked,
                unplaced: lost
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.widen(), v.widen()))
                    .collect(),
            });
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        for (c, pairs) in lost.into_iter().enumerate() {
            self.place_unplaced(c, pairs, failed)?;
        }
        Ok(())
    }

    /// Hash-routed find on the device: each device batch is copied in and partitioned there, each child
    /// looks its part up (resident children first), and the answers come back in input order. Keys that the children lack are then looked up in their child's
    /// stash (only when some stash holds pairs).
    fn find_on_device(
        &mut self,
        router: &dyn Router<K, V>,
        keys: &[K],
        out: &mut [V],
        bits: &mut [u32],
        need_bits: bool,
    ) -> Result<()> {
        let mut trace = Trace::start();
        // Presence bits come back when the caller or the stashes' lookup needs them; otherwise the children
        // look values up only (absent keys read all ones).
        let with_bits = need_bits || self.stash_len() > 0;
        // Device batches are multiples of 2048 keys, so each starts on a whole word of `bits`.
        let step = router.batch_keys();
        // Every child resident: one launch per copy chunk over the shared slot frames.
        let framed = self.framed()?;
        for start in (0..keys.len()).step_by(step) {
            let end = (start + step).min(keys.len());
            let dir = self.directory.clone().expect("hash-routed");
            let children = self.children.len();
            let route = dir.route_map(children);
            let words = start / 32..end.div_ceil(32);
            if let Some((frames, descs)) = &framed {
                router.find_framed(
                    &keys[start..end],
                    route,
                    frames,
                    descs,
                    &mut out[start..end],
                    with_bits.then(|| &mut bits[words]),
                )?;
                trace.lap("framed find");
                continue;
            }
            let mut on_part = |batch: &RoutedBatch| -> Result<()> {
                let wanted =
                    (0..children).filter(|&c| batch.counts[c] > 0 && !self.children[c].is_empty());
                let order = self.visit_order(wanted);
                self.visit_paging(&order, |t, c| t.children[c].find_routed(batch, c))
            };
            router.find(
                &keys[start..end],
                route,
                &mut on_part,
                &mut out[start..end],
                with_bits.then(|| &mut bits[words]),
            )?;
            trace.lap("routed, looked up, answers back");
        }
        if self.stash_len() > 0 {
            for (i, k) in keys.iter().enumerate() {
                if bits[i / 32] >> (i % 32) & 1 == 0
                    && let Some(c) = self.child_of(*k)
                    && let Some(v) = self.meta[c].stash.get(k)
                {
                    out[i] = *v;
                    bits[i / 32] |= 1 << (i % 32);
                }
            }
        }
        trace.report("find (device routing)", keys.len());
        Ok(())
    }

    /// Partitions a batch by the route directory (hash-routed), refilling the last partition's buffers; give
    /// the result back to `self.scratch` when done.
    fn route(&mut self, keys: &[K], values: &[V], keep_order: bool) -> route::Partition<K, V> {
        let reuse = self.scratch.take().unwrap_or_default();
        let dir = self.directory.as_ref().expect("hash-routed");
        partition(
            keys,
            values,
            keep_order,
            self.children.len(),
            |k| dir.child_of(k.widen()),
            reuse,
        )
    }

    /// Upserts pairs that all route to child `c`, splitting it first when they would pass its load.
    fn insert_into(
        &mut self,
        c: usize,
        keys: &[K],
        values: &[V],
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        self.admit(c, &[])?;
        if self.meta[c].tombstones > 0 && self.load(c) + keys.len() > self.limit() {
            // Its erased slots go first: the child is rebuilt in place (which may move pairs into its stash,
            // or grow the table), then the batch is routed again.
            self.purge(c, failed)?;
            return self.insert_routed(keys, values, failed);
        }
        let rest = self.stash_updates(&[c], keys, values);
        let (keys, values) = match &rest {
            Some((k, v)) => (&k[..], &v[..]),
            None => (keys, values),
        };
        if keys.is_empty() {
            return Ok(());
        }
        let limit = self.limit();
        let len = self.children[c].len();
        if len + keys.len() > limit {
            let new = self.children[c].count_new(keys)?;
            if len + new > limit {
                if self.split(c, failed)? {
                    return self.insert_routed(keys, values, failed);
                }
                // The table may not grow: the child takes what its slots hold, the rest is returned.
                let room = self.child_capacity().saturating_sub(len);
                if new > room {
                    return self.insert_up_to(c, keys, values, room, failed);
                }
            }
        }
        let Inserted { unplaced, .. } = self.children[c].upsert(keys, values)?;
        self.place_unplaced(c, unplaced, failed)
    }

    /// Upserts into child `c` the batch's updates of stored keys and its first `room` new keys (their last
    /// occurrences); the other new keys go to `failed`.
    fn insert_up_to(
        &mut self,
        c: usize,
        keys: &[K],
        values: &[V],
        room: usize,
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        let (_, bits) = self.presence(c, keys)?;
        let ((mut uk, mut uv), (nk, nv)) = split_by_bits(keys.to_vec(), values.to_vec(), &bits);
        let mut fresh = last_occurrences(nk, nv);
        failed.extend(fresh.split_off(room.min(fresh.len())));
        for (k, v) in fresh {
            uk.push(k);
            uv.push(v);
        }
        let Inserted { unplaced, .. } = self.children[c].upsert(&uk, &uv)?;
        self.place_unplaced(c, unplaced, failed)
    }

    /// Rebuilds child `c` in place under its own family, dropping its erased slots.
    fn purge(&mut self, c: usize, failed: &mut Vec<(K, V)>) -> Result<()> {
        self.admit(c, &[])?;
        let family = self.children[c].family();
        let Rebuilt { lost, .. } = self.children[c].rebuild_split(family, None)?;
        self.meta[c].tombstones = 0;
        self.place_unplaced(c, lost, failed)
    }

    /// Splits hash-routed child `c` in two: its pairs whose next route bit is set move to a new child.
    /// `false` when the table may not grow.
    fn split(&mut self, c: usize, failed: &mut Vec<(K, V)>) -> Result<bool> {
        let d = self.meta[c].depth;
        if !self.can_grow() || !self.directory.as_ref().expect("hash-routed").can_split(d) {
            return Ok(false);
        }
        self.admit(c, &[])?;
        let bytes = self.children[c].device_bytes();
        if self.residency.holds(2, 2 * bytes) {
            // Both halves fit the budget at once: the child splits where it lives (on a device: no pair
            // crosses the bus). The directory changes only once the new child exists, then the stash and
            // whatever the two builds could not place are routed again.
            self.residency.make_room(&mut self.children, bytes, &[c])?;
            let split = SplitSpec {
                seed: self.directory.as_ref().expect("hash-routed").seed,
                depth: d,
                family: self.next_family(),
            };
            let family = self.children[c].family();
            let Rebuilt { lost, split } = self.children[c].rebuild_split(family, Some(split))?;
            self.meta[c].tombstones = 0;
            let (engine, lost_new) = split.expect("asked for a split");
            let c2 = self.children.len();
            self.residency.admitted_new(c2, engine.device_bytes());
            self.children.push(engine);
            self.meta.push(ChildMeta {
                stash: HashMap::new(),
                depth: d + 1,
                tombstones: 0,
            });
            self.link_split(c, d, c2);
            self.house(c2)?;
            let mut pending: Pairs<K, V> = self.meta[c].stash.drain().collect();
            pending.extend(lost);
            pending.extend(lost_new);
            if !pending.is_empty() {
                let (k, v): Batch<K, V> = pending.into_iter().unzip();
                self.insert_routed(&k, &v, failed)?;
            }
            return Ok(true);
        }
        // Through the host: the pairs are read back and split there; the new child exists and the directory
        // names it before either half is inserted, so a nested split of either half sees a consistent table.
        let mut all = self.children[c].pairs()?;
        all.extend(self.meta[c].stash.drain());
        let dir = self.directory.as_ref().expect("hash-routed");
        let (high, low): (Pairs<K, V>, Pairs<K, V>) = all
            .into_iter()
            .partition(|(k, _)| dir.goes_high(k.widen(), d));
        let c2 = self.new_child(d + 1, &[])?;
        self.link_split(c, d, c2);
        let family = self.children[c].family();
        self.refill(c, family, low, failed)?;
        let family = self.children[c2].family();
        self.refill(c2, family, high, failed).map(|()| true)
    }

    /// Points the upper half of child `c`'s directory entries (depth `d`) at new child `c2`.
    fn link_split(&mut self, c: usize, d: u32, c2: usize) {
        let dir = self.directory.as_mut().expect("hash-routed");
        let linked = dir.split(c as u32, d, c2 as u32);
        debug_assert!(linked, "can_split was checked");
        self.meta[c].depth = d + 1;
        self.residency.stats.grown += 1;
    }

    /// Empties child `c` under `family` and inserts `pairs` (distinct keys, none stored elsewhere).
    fn refill(
        &mut self,
        c: usize,
        family: HashFamily,
        pairs: Vec<(K, V)>,
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        self.admit(c, &[])?;
        self.children[c].reset(family)?;
        self.meta[c].tombstones = 0;
        if pairs.is_empty() {
            return Ok(());
        }
        let (k, v): Batch<K, V> = pairs.into_iter().unzip();
        let Inserted { unplaced, .. } = self.children[c].insert_distinct(&k, &v)?;
        self.place_unplaced(c, unplaced, failed)
    }

    /// Keeps pairs child `c` could not place: in its stash while it has room, else by a confined rebuild
    /// (re-seeded, up to `max_rebuilds` times), else by growing the table; what nothing places goes to
    /// `failed`.
    fn place_unplaced(
        &mut self,
        c: usize,
        unplaced: Vec<(K, V)>,
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        if unplaced.is_empty() {
            return Ok(());
        }
        // Engines hand back distinct keys that are not stored; a sequential (deterministic) CPU build may hand
        // back an early occurrence of a key whose later occurrence it stored: keep each key's last pair, and
        // none that the child holds.
        self.admit(c, &[])?;
        let (k, v): Batch<K, V> = unplaced.into_iter().unzip();
        let (_, bits) = self.presence(c, &k)?;
        let (_, (k, v)) = split_by_bits(k, v, &bits);
        let unplaced = last_occurrences(k, v);
        if unplaced.is_empty() {
            return Ok(());
        }
        let cap = self.config.stash_pairs;
        if self.meta[c].stash.len() + unplaced.len() <= cap {
            self.meta[c].stash.extend(unplaced);
            return Ok(());
        }
        self.admit(c, &[])?;
        let mut last: Pairs<K, V> = self.meta[c].stash.drain().collect();
        last.extend(unplaced);
        let mut family = self.children[c].family();
        for _ in 0..self.config.child.max_rebuilds.max(1) {
            // Re-seeded where the pairs live (on a device: no pair crosses the bus), then the pairs it did
            // not hold are inserted again.
            family = family.reseeded();
            self.residency.stats.rebuilds += 1;
            let Rebuilt { mut lost, .. } = self.children[c].rebuild_split(family, None)?;
            self.meta[c].tombstones = 0;
            if !last.is_empty() {
                let (k, v): Batch<K, V> = last.into_iter().unzip();
                lost.extend(self.children[c].insert_distinct(&k, &v)?.unplaced);
            }
            last = lost;
            if last.len() <= cap {
                self.meta[c].stash.extend(last);
                return Ok(());
            }
        }
        // The rebuild budget is spent: the child keeps what it placed, and the rest goes to more children.
        match self.config.placement {
            Placement::HashRouted => {
                if self.split(c, failed)? {
                    let (k, v): Batch<K, V> = last.into_iter().unzip();
                    self.insert_routed(&k, &v, failed)
                } else {
                    failed.extend(last);
                    Ok(())
                }
            }
            Placement::ArrivalOrder => {
                if self.can_grow() {
                    self.residency.stats.grown += 1;
                    let n = self.new_child(0, &[])?;
                    let family = self.children[n].family();
                    self.refill(n, family, last, failed)
                } else {
                    failed.extend(last);
                    Ok(())
                }
            }
        }
    }

    /// Applies the batch's updates of keys held in the stashes of `among` (in batch order, so the last
    /// occurrence wins) and returns the rest of the batch.
    fn take_stash_updates(&mut self, among: &[usize], keys: Vec<K>, values: Vec<V>) -> Batch<K, V> {
        match self.stash_updates(among, &keys, &values) {
            Some(rest) => rest,
            None => (keys, values),
        }
    }

    /// [`Self::take_stash_updates`] on borrowed pairs: `None` when no stash of `among` holds anything (the
    /// batch is unchanged; nothing is copied).
    fn stash_updates(&mut self, among: &[usize], keys: &[K], values: &[V]) -> Option<Batch<K, V>> {
        if among.iter().all(|&c| self.meta[c].stash.is_empty()) {
            return None;
        }
        let owner: HashMap<K, usize> = among
            .iter()
            .flat_map(|&c| self.meta[c].stash.keys().map(move |&k| (k, c)))
            .collect();
        let mut rest = (
            Vec::with_capacity(keys.len()),
            Vec::with_capacity(keys.len()),
        );
        for (&k, &v) in keys.iter().zip(values) {
            match owner.get(&k) {
                Some(&c) => {
                    self.meta[c].stash.insert(k, v);
                }
                None => {
                    rest.0.push(k);
                    rest.1.push(v);
                }
            }
        }
        Some(rest)
    }

    /// Presence bits of `keys` in resident child `c`.
    fn presence(&self, c: usize, keys: &[K]) -> Result<(Vec<V>, Vec<u32>)> {
        let mut out = vec![V::zero(); keys.len()];
        let mut bits = vec![0u32; keys.len().div_ceil(32)];
        self.children[c].find_into(keys, &mut out, Some(&mut bits))?;
        Ok((out, bits))
    }

    /// Updates the keys of the batch that children `among` (or their stashes) hold, in those children, and
    /// returns the rest of the batch (arrival order: a key is stored in at most one child).
    fn update_held(
        &mut self,
        among: &[usize],
        keys: Vec<K>,
        values: Vec<V>,
        failed: &mut Vec<(K, V)>,
    ) -> Result<Batch<K, V>> {
        let (mut keys, mut values) = self.take_stash_updates(among, keys, values);
        let wanted: Vec<usize> = among
            .iter()
            .copied()
            .filter(|&c| !self.children[c].is_empty())
            .collect();
        for c in self.visit_order(wanted.into_iter()) {
            if keys.is_empty() {
                break;
            }
            self.admit(c, &[])?;
            let (_, bits) = self.presence(c, &keys)?;
            if bits.iter().all(|&w| w == 0) {
                continue;
            }
            let ((hk, hv), (rk, rv)) = split_by_bits(keys, values, &bits);
            // Every key is stored: the child's load does not change.
            let Inserted { unplaced, .. } = self.children[c].upsert(&hk, &hv)?;
            self.place_unplaced(c, unplaced, failed)?;
            keys = rk;
            values = rv;
        }
        Ok((keys, values))
    }

    /// Arrival-order insert: update what is stored, then fill the open (last) child, opening new ones.
    fn insert_arrival(
        &mut self,
        keys: Vec<K>,
        values: Vec<V>,
        failed: &mut Vec<(K, V)>,
    ) -> Result<()> {
        let all: Vec<usize> = (0..self.children.len()).collect();
        let (mut keys, mut values) = self.update_held(&all, keys, values, failed)?;
        let limit = self.limit();
        while !keys.is_empty() {
            let mut open = self.children.len() - 1;
            if self.load(open) >= limit && self.meta[open].tombstones > 0 {
                // The open child's erased slots go first (the purge may append a child for what it cannot place).
                self.purge(open, failed)?;
                open = self.children.len() - 1;
            }
            if self.load(open) >= limit {
                if !self.can_grow() {
                    failed.extend(last_occurrences(keys, values));
                    return Ok(());
                }
                self.residency.stats.grown += 1;
                open = self.new_child(0, &[])?;
            }
            self.admit(open, &[])?;
            let room = limit.saturating_sub(self.load(open));
            let take = room.clamp(1, keys.len());
            let first_new = self.children.len();
            let rest_k = keys.split_off(take);
            let rest_v = values.split_off(take);
            let Inserted { unplaced, .. } = self.children[open].upsert(&keys, &values)?;
            self.place_unplaced(open, unplaced, failed)?;
            if rest_k.is_empty() {
                break;
            }
            // Later occurrences of keys just stored are updates now: in the open child, or in children its
            // growth made.
            let touched: Vec<usize> = std::iter::once(open)
                .chain(first_new..self.children.len())
                .collect();
            (keys, values) = self.update_held(&touched, rest_k, rest_v, failed)?;
        }
        Ok(())
    }

    /// Looks keys up: `Some(value)` if present, `None` if absent.
    pub fn find(&mut self, keys: &[K]) -> Result<Vec<Option<V>>> {
        let mut out = vec![V::zero(); keys.len()];
        let mut bits = vec![0u32; keys.len().div_ceil(32)];
        self.lookup(keys, &mut out, &mut bits, true)?;
        Ok(options_from_bits(&out, &bits))
    }

    /// Looks keys up into `out`: the value, or [`Value::ABSENT`] (all ones) for absent keys.
    pub fn find_into(&mut self, keys: &[K], out: &mut [V]) -> Result<()> {
        if out.len() != keys.len() {
            return Err(Error::LengthMismatch {
                what: "out",
                got: out.len(),
                expected: keys.len(),
            });
        }
        // The presence bits go to a buffer kept between calls (fresh pages cost a fault each), and are not
        // cleared: every path that uses them writes each word first (the router's copy out, `bits_from`), and
        // `find_into` never reads them (zeroing them cost 1.4 ms, 4%, of a 2^26.8-key find on the H100 host).
        let words = keys.len().div_ceil(32);
        let mut bits = std::mem::take(&mut self.bits);
        if bits.len() < words {
            bits.resize(words, 0);
        }
        let done = self.lookup(keys, out, &mut bits[..words], false);
        self.bits = bits;
        done
    }

    /// `true` for each key that is present.
    pub fn contains(&mut self, keys: &[K]) -> Result<Vec<bool>> {
        Ok(self.find(keys)?.into_iter().map(|o| o.is_some()).collect())
    }

    /// Finds into `out` (ABSENT where absent) and, with `need_bits`, presence bits into `bits` (else `bits`
    /// may be left as it was). Finds page children in, so they take `&mut self`.
    fn lookup(
        &mut self,
        keys: &[K],
        out: &mut [V],
        bits: &mut [u32],
        need_bits: bool,
    ) -> Result<()> {
        self.lookup_bits(keys, out, bits, need_bits)?;
        if self.tombstones() > 0 && first_sentinel(keys).is_some() {
            // A GPU child's erased slot of packed pairs holds the sentinel key (no key word is left to spare), so
            // a lookup of the sentinel itself could match it: the sentinel is never stored, so it is absent.
            let sentinel = K::narrow(u64::MAX);
            for (i, k) in keys.iter().enumerate() {
                if *k == sentinel {
                    out[i] = V::ABSENT;
                    bits[i / 32] &= !(1 << (i % 32));
                }
            }
        }
        Ok(())
    }

    /// [`PagedTable::lookup`] before the sentinel's fix-up.
    fn lookup_bits(
        &mut self,
        keys: &[K],
        out: &mut [V],
        bits: &mut [u32],
        need_bits: bool,
    ) -> Result<()> {
        if self.config.placement == Placement::HashRouted
            && !keys.is_empty()
            && let Some(router) = self.take_router()
        {
            let done = self.find_on_device(&*router, keys, out, bits, need_bits);
            self.give_router(router);
            return done;
        }
        out.fill(V::ABSENT);
        let mut present = vec![0u8; keys.len()];
        match self.config.placement {
            Placement::HashRouted => {
                let mut trace = Trace::start();
                let part = self.route(keys, &[], true);
                trace.lap("partition");
                let n = self.children.len();
                for c in self.visit_order((0..n).filter(|&c| !part.range(c).is_empty())) {
                    let pos = part.of(c);
                    let k = &part.keys[part.range(c)];
                    let (mut vals, mut found) = self.find_in(c, k)?;
                    trace.lap("children");
                    self.stash_lookup(&[c], k, &mut vals, &mut found);
                    scatter(out, pos, &vals);
                    scatter(&mut present, pos, &found);
                    trace.lap("scatter");
                }
                self.scratch = Some(part);
                trace.report("find", keys.len());
            }
            Placement::ArrivalOrder => {
                let mut pos: Vec<u32> = (0..keys.len() as u32).collect();
                let mut k = keys.to_vec();
                let wanted: Vec<usize> = self.occupied().collect();
                for c in self.visit_order(wanted.into_iter()) {
                    if k.is_empty() {
                        break;
                    }
                    let (vals, found) = self.find_in(c, &k)?;
                    let (mut np, mut nk) = (Vec::new(), Vec::new());
                    for j in 0..k.len() {
                        if found[j] == 1 {
                            out[pos[j] as usize] = vals[j];
                            present[pos[j] as usize] = 1;
                        } else {
                            np.push(pos[j]);
                            nk.push(k[j]);
                        }
                    }
                    pos = np;
                    k = nk;
                }
                if !k.is_empty() {
                    let all: Vec<usize> = (0..self.children.len()).collect();
                    let mut vals = vec![V::ABSENT; k.len()];
                    let mut found = vec![0u8; k.len()];
                    self.stash_lookup(&all, &k, &mut vals, &mut found);
                    scatter(out, &pos, &vals);
                    scatter(&mut present, &pos, &found);
                }
            }
        }
        bits_from(bits, keys.len(), |i| present[i] == 1);
        Ok(())
    }

    /// Finds `keys` in child `c` (paged in): values (ABSENT where absent) and presence flags.
    fn find_in(&mut self, c: usize, keys: &[K]) -> Result<(Vec<V>, Vec<u8>)> {
        if self.children[c].is_empty() {
            return Ok((vec![V::ABSENT; keys.len()], vec![0; keys.len()]));
        }
        self.admit(c, &[])?;
        let (vals, bits) = self.presence(c, keys)?;
        let found = (0..keys.len())
            .into_par_iter()
            .map(|i| (bits[i / 32] >> (i % 32) & 1) as u8)
            .collect();
        Ok((vals, found))
    }

    /// Fills in keys not found that the stashes of `among` hold.
    fn stash_lookup(&self, among: &[usize], keys: &[K], vals: &mut [V], found: &mut [u8]) {
        if among.iter().all(|&c| self.meta[c].stash.is_empty()) {
            return;
        }
        for (i, k) in keys.iter().enumerate() {
            if found[i] == 0
                && let Some(v) = among.iter().find_map(|&c| self.meta[c].stash.get(k))
            {
                vals[i] = *v;
                found[i] = 1;
            }
        }
    }

    /// Removes `keys` (absent keys are skipped; repeats count once) and returns how many pairs were removed.
    /// Stable children of 32-bit keys mark the slots erased in place (tombstones); other children that held
    /// some of the keys are rebuilt without them under their own family (confined to them).
    pub fn erase(&mut self, keys: &[K]) -> Result<usize> {
        // The sentinel is never stored (and an erased packed slot holds it): it is skipped.
        let without_sentinel: Vec<K>;
        let keys = if first_sentinel(keys).is_some() {
            let sentinel = K::narrow(u64::MAX);
            without_sentinel = keys.iter().copied().filter(|k| *k != sentinel).collect();
            &without_sentinel[..]
        } else {
            keys
        };
        let mut failed = Vec::new();
        let mut erased = 0;
        match self.config.placement {
            Placement::HashRouted => {
                let part = self.route(keys, &[], false);
                let n = self.children.len();
                for c in self.visit_order((0..n).filter(|&c| !part.range(c).is_empty())) {
                    erased += self
                        .erase_from(c, &part.keys[part.range(c)], &mut failed)?
                        .0;
                }
                self.scratch = Some(part);
            }
            Placement::ArrivalOrder => {
                let mut k: Vec<K> = keys.to_vec();
                let wanted: Vec<usize> = self.occupied().collect();
                for c in self.visit_order(wanted.into_iter()) {
                    if k.is_empty() {
                        break;
                    }
                    let (n, rest) = self.erase_from(c, &k, &mut failed)?;
                    erased += n;
                    k = rest;
                }
            }
        }
        self.settled(erased, failed)
    }

    /// Erases from child `c` the keys it holds; returns how many pairs went and the keys it did not hold.
    fn erase_from(
        &mut self,
        c: usize,
        keys: &[K],
        failed: &mut Vec<(K, V)>,
    ) -> Result<(usize, Vec<K>)> {
        let mut erased = 0;
        let mut keys: Vec<K> = if self.meta[c].stash.is_empty() {
            keys.to_vec()
        } else {
            keys.iter()
                .copied()
                .filter(|k| match self.meta[c].stash.remove(k) {
                    Some(_) => {
                        erased += 1;
                        false
                    }
                    None => true,
                })
                .collect()
        };
        if self.children[c].is_empty() || keys.is_empty() {
            return Ok((erased, keys));
        }
        let (_, found) = self.find_in(c, &keys)?;
        let mut gone = HashSet::new();
        let mut rest = Vec::new();
        for (k, f) in keys.drain(..).zip(found) {
            if f == 1 {
                gone.insert(k);
            } else {
                rest.push(k);
            }
        }
        if !gone.is_empty() && S::STABLE {
            // Stable children mark the slots erased in place (a tombstone each, until the next rebuild).
            let marked: Vec<K> = gone.iter().copied().collect();
            if let Some(n) = self.children[c].erase_stored(&marked)? {
                erased += n;
                self.meta[c].tombstones += n;
                return Ok((erased, rest));
            }
        }
        if !gone.is_empty() {
            let kept: Vec<(K, V)> = self.children[c]
                .pairs()?
                .into_iter()
                .filter(|(k, _)| !gone.contains(k))
                .collect();
            erased += gone.len();
            let family = self.children[c].family();
            self.refill(c, family, kept, failed)?;
        }
        Ok((erased, rest))
    }

    /// `value`, or [`Error::BuildFailed`] with the pairs nothing could place (every other pair is stored).
    fn settled<T>(&self, value: T, failed: Vec<(K, V)>) -> Result<T> {
        if failed.is_empty() {
            return Ok(value);
        }
        Err(Error::BuildFailed {
            attempts: 1 + self.config.child.max_rebuilds,
            unplaced: failed
                .into_iter()
                .map(|(k, v)| (k.widen(), v.widen()))
                .collect(),
        })
    }

    /// The child a key routes to (hash-routed tables; `None` in arrival order, where any child may hold it).
    pub fn child_of(&self, key: K) -> Option<usize> {
        self.directory
            .as_ref()
            .map(|d| d.child_of(key.widen()) as usize)
    }

    /// Re-seeds child `c` and rebuilds it alone from its pairs and stash (what a failing child does by itself;
    /// exposed to refresh a child and to measure a confined rebuild). Out-of-range `c` is
    /// [`Error::InvalidConfig`]; pairs the rebuild cannot place are returned in [`Error::BuildFailed`].
    pub fn rebuild_child(&mut self, c: usize) -> Result<()> {
        if c >= self.children.len() {
            return Err(Error::InvalidConfig(format!(
                "child {c} does not exist (the table has {})",
                self.children.len()
            )));
        }
        self.admit(c, &[])?;
        let family = self.children[c].family().reseeded();
        self.residency.stats.rebuilds += 1;
        let Rebuilt { lost, .. } = self.children[c].rebuild_split(family, None)?;
        self.meta[c].tombstones = 0;
        let mut pending: Pairs<K, V> = self.meta[c].stash.drain().collect();
        pending.extend(lost);
        let mut failed = Vec::new();
        self.place_unplaced(c, pending, &mut failed)?;
        self.settled((), failed)
    }

    /// Every stored pair (order unspecified). Pages every child in, in turn.
    pub fn pairs(&mut self) -> Result<Vec<(K, V)>> {
        let mut all = Vec::with_capacity(self.len());
        let wanted: Vec<usize> = self.occupied().collect();
        for c in self.visit_order(wanted.into_iter()) {
            if !self.children[c].is_empty() {
                self.admit(c, &[])?;
                all.extend(self.children[c].pairs()?);
            }
            all.extend(self.meta[c].stash.iter().map(|(&k, &v)| (k, v)));
        }
        Ok(all)
    }

    /// Removes every pair: the table goes back to its initial children (the paging counters stay).
    pub fn clear(&mut self) -> Result<()> {
        self.children.clear();
        self.meta.clear();
        self.frames = None;
        self.residency.forget_all();
        self.start()
    }
}

/// A batch split by presence bits (bit `i % 32` of `bits[i / 32]` for pair `i`): the pairs whose bit is set
/// (the keys a presence check found), then the others, each in batch order.
#[allow(clippy::type_complexity)]
fn split_by_bits<K, V>(
    keys: Vec<K>,
    values: Vec<V>,
    bits: &[u32],
) -> ((Vec<K>, Vec<V>), (Vec<K>, Vec<V>)) {
    let (set, clear): (Vec<_>, Vec<_>) = keys
        .into_iter()
        .zip(values)
        .enumerate()
        .partition(|(i, _)| bits[i / 32] >> (i % 32) & 1 == 1);
    let unzip = |v: Vec<(usize, (K, V))>| v.into_iter().map(|(_, p)| p).unzip();
    (unzip(set), unzip(clear))
}

/// The last occurrence of each key, in first-occurrence order.
fn last_occurrences<K: Key, V: Value>(keys: Vec<K>, values: Vec<V>) -> Vec<(K, V)> {
    let mut at: HashMap<K, usize> = HashMap::new();
    let mut out: Vec<(K, V)> = Vec::new();
    for (k, v) in keys.into_iter().zip(values) {
        match at.get(&k) {
            Some(&i) => out[i].1 = v,
            None => {
                at.insert(k, out.len());
                out.push((k, v));
            }
        }
    }
    out
}
