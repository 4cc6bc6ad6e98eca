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

mod batch;
mod config;
mod cpu;
mod device_routing;
mod erase;
mod find;
mod frames;
pub mod gpu;
mod grow;
mod insert;
mod meta;
mod paging;
#[doc(hidden)]
pub mod protocol;
mod residency;
pub(crate) mod route;

use crate::paged::cpu::CpuChild;
use crate::paged::gpu::child::AsChild;
use crate::paged::protocol::{PagedChild, Router, SlotFrames};
use crate::runtime::dispatch::{TableStream, table_stream};
use crate::runtime::select::unavailable;
use crate::runtime::select::{Backend, BackendChoice, is_available, resolve};
use crate::table::{EngineShape, TableConfig, cpu_engine, default_bucket_size_of, gpu_spec};
pub use config::{
    DEFAULT_PAGE_BYTES, DEFAULT_STASH_PAIRS, DeviceBudget, PagedConfig, Placement, Replacement,
};
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, HashFamily, Key, Result, Value};
use meta::ChildMeta;
pub use residency::PagingStats;
use residency::Residency;
use route::{Directory, partition, route_hash};
use std::collections::HashMap;
use std::marker::PhantomData;

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
    /// The CubeCL stream every call runs on, whichever thread calls (`dispatch::table_stream`, NOTES.md D38):
    /// the children's buffers are made and used there.
    stream: TableStream,
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
            gpu_spec::<S, K, V>(config, shape, family),
            AsChild::<K, V>::default(),
        )?,
    })
}

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
        let num_buckets = child.num_buckets(bucket_size, S::SEQUENCE)?;
        let shape = EngineShape {
            backend,
            num_buckets,
            bucket_size,
            params: S::bounded(params, num_buckets),
            keys_only: false,
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
            stream: table_stream(),
            _scheme: PhantomData,
        };
        let stream = t.stream.id();
        stream.executes(|| t.start())?;
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
        self.children[c].len() + self.meta[c].stash.len() + self.children[c].marks()
    }

    /// Erased slots (tombstones) the children hold until inserts take them again or their next rebuild
    /// (`Engine::marks`).
    pub fn tombstones(&self) -> usize {
        self.children.iter().map(|c| c.marks()).sum()
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

    /// Every stored pair (order unspecified). Pages every child in, in turn.
    pub fn pairs(&mut self) -> Result<Vec<(K, V)>> {
        // On the table's own stream, whichever thread calls (NOTES.md D38).
        let stream = self.stream.id();
        stream.executes(|| {
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
        })
    }

    /// Removes every pair: the table goes back to its initial children (the paging counters stay).
    pub fn clear(&mut self) -> Result<()> {
        // On the table's own stream, whichever thread calls (NOTES.md D38).
        let stream = self.stream.id();
        stream.executes(|| {
            self.children.clear();
            self.meta.clear();
            self.frames = None;
            self.residency.forget_all();
            self.start()
        })
    }
}
