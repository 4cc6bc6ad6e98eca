//! Tables across devices: [`ShardedTable`] spreads one `K -> V` map over shards, each a [`HashTable`] on its own
//! device (or several side by side on one device or the CPU), a key's shard picked by its route hash
//! (`route`). A host batch is partitioned by shard on the host straight into each shard's page-locked staging
//! buffers, and every shard runs its part on a thread of its own, so each GPU's part travels over its own link
//! while the others' do. Answers come back in the caller's order.
//!
//! The sharded table is a family over the static one, as the paged tables are: every operation is the shards'
//! own (`HashTable`'s insert, find, erase, insert-or-apply, mixed batches), so a shard behaves exactly as a
//! table of its own would, and what this module adds is the partition, the threads and the bookkeeping.

mod chained;
pub mod config;
mod csr;
pub mod device;
mod device_writes;
mod exchange;
#[cfg(feature = "cuda")]
mod nccl;
mod plan;
pub mod ranks;
pub(crate) mod route;
mod set;
mod shard_set;
mod shard_threads;
mod staging;
mod steps;
mod through_devices;

use crate::results::{Op, Outcome, present};
use crate::runtime::host_io::check_len;
use crate::runtime::select::Backend;
use crate::runtime::trace::Trace;
use crate::table::HashTable;
use config::ShardedConfig;
use hashtile_core::element::first_position;
use hashtile_core::reduce::Reduction;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, Result, Value};
use rayon::prelude::*;
use route::{Partition, ShardRoute};
use shard_threads::{merge_failures, run_each};
use staging::{Part, Room, Stages, Staging, on_staged, on_staged_ref};
use std::sync::Mutex;

pub use device::{DevicePhases, Transport};

/// The runtime of a table over ranks (CUDA, for NCCL).
#[cfg(feature = "cuda")]
type Cuda = cubecl::cuda::CudaRuntime;
pub use chained::ShardedChainedTable;
pub use csr::{ShardedCsrJoin, ShardedCsrTable};
pub use route::MAX_SHARDS;
pub use set::ShardedSet;

/// One `K -> V` map over several shards, each a [`HashTable`] of scheme `S` on a device of its own (see
/// [`ShardedConfig`]). Every call takes host data, partitions it by shard, runs each shard's part on its own
/// thread (each GPU over its own link, at the same time) and returns answers in the caller's order.
///
/// ```
/// use hashtile_backends::{Backend, BackendChoice, ShardedConfig, ShardedTable, TableConfig};
/// use hashtile_probing::Bcht;
/// let config = ShardedConfig::new(
///     TableConfig::for_keys(1000, 0.8).backend(BackendChoice::Exactly(Backend::Cpu)),
/// )
/// .shards(3);
/// let mut t: ShardedTable<Bcht, u32, u32> = ShardedTable::new(config)?;
/// t.insert(&[1, 2, 3], &[10, 20, 30])?;
/// assert_eq!(t.find(&[2, 9, 3])?, vec![Some(20), None, Some(30)]);
/// assert_eq!(t.erase(&[1, 9])?, 1);
/// assert_eq!(t.len(), 2);
/// # Ok::<(), hashtile_core::Error>(())
/// ```
///
/// # One process per GPU
/// With [`ShardedConfig::ranks`], the table is held by several processes, one shard each (on one host or many),
/// joined through NCCL at [`ShardedTable::new`], which every rank calls. Every call that moves keys is then
/// collective: each rank calls it with its own batch (host data goes to its GPU and takes the device path,
/// 32-bit keys and values: a key given by several ranks is stored once, with one of its values), and the answers
/// of a rank's keys come back to it. What a rank reads alone is its own shard: [`ShardedTable::len`],
/// [`ShardedTable::pairs`], and an erase's count (the pairs its shard lost, to any rank's keys). A rank that
/// fails or dies yields [`Error::PeerFailed`] on the others within [`Ranks::timeout`](ranks::Ranks::timeout);
/// each survivor's shard keeps its pairs. Mixed batches are not available over ranks yet.
///
/// ```no_run
/// use hashtile_backends::{Ranks, Rendezvous, ShardedConfig, ShardedTable, TableConfig};
/// use hashtile_probing::Bcht;
/// // Run as `prog RANK WORLD` on each GPU's process; rank 0 listens on the address.
/// let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
/// let me = Ranks::new(args[0], args[1], Rendezvous::Tcp("127.0.0.1:29500".parse().unwrap()));
/// let config = ShardedConfig::new(TableConfig::for_keys(1 << 26, 0.8)).ranks(me);
/// let mut t: ShardedTable<Bcht, u32, u32> = ShardedTable::new(config)?;
/// let keys: Vec<u32> = (0..1000).map(|i| i * 2 + args[0] as u32).collect();
/// t.insert(&keys, &keys)?;
/// assert_eq!(t.find(&keys)?[0], Some(keys[0]));
/// # Ok::<(), hashtile_core::Error>(())
/// ```
pub struct ShardedTable<S: SchemeInfo, K: Key, V: Value> {
    /// The shards this process holds: all of them, or with ranks its own (`shards[i]` is shard
    /// [`ShardedTable::base`]` + i`).
    shards: Vec<HashTable<S, K, V>>,
    /// This process's rank, with ranks.
    ranks: Option<ranks::Ranks>,
    /// The shards are sets (keys only: [`ShardedSet`]); device calls take packed pairs and are refused.
    keys_only: bool,
    devices: Vec<usize>,
    route: ShardRoute,
    /// Keys of each device slice per exchange step (`ShardedConfig::exchange_step`, aligned).
    step: usize,
    backend: Backend,
    /// Each shard's staging buffers for its part of a batch (page-locked on CUDA), kept between calls.
    stages: Stages<K, V>,
    /// NCCL between the shards' GPUs, made at the first device-data call (`device`).
    #[cfg(feature = "cuda")]
    nccl: std::sync::OnceLock<Option<std::sync::Arc<nccl::Nccl>>>,
    /// One exchange at a time on the communicators (`&self` calls may come from several threads).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    exchange_lock: Mutex<()>,
    /// Where the last device-data call's time went.
    device_phases: Mutex<device::DevicePhases>,
}

impl<S: SchemeInfo, K: Key, V: Value> ShardedTable<S, K, V> {
    /// Builds an empty table: one [`HashTable`] per shard on its device, each of the whole table's capacity
    /// divided by the shard count (with room for the keys' spread). Errors are [`HashTable::new`]'s and
    /// [`ShardedConfig::shard_devices`]'.
    pub fn new(config: ShardedConfig) -> Result<Self> {
        Self::build(config, false)
    }

    /// [`ShardedTable::new`], the shards keys-only tables when `keys_only` (a [`ShardedSet`]'s).
    pub(crate) fn build(config: ShardedConfig, keys_only: bool) -> Result<Self> {
        let devices = config.shard_devices()?;
        let step = config.step_keys()?;
        let backend = config.backend();
        // With ranks the table has a shard per rank; else those made here are all of them.
        let world = config.ranks.as_ref().map_or(devices.len(), |r| r.world);
        let shards = devices
            .iter()
            .map(|&d| HashTable::build(config.shard_table(world, d), keys_only))
            .collect::<Result<Vec<_>>>()?;
        let stages = Stages::new(&shards);
        let table = Self {
            shards,
            ranks: config.ranks.clone(),
            keys_only,
            devices,
            route: ShardRoute::new(config.route_seed, world),
            step,
            backend,
            stages,
            #[cfg(feature = "cuda")]
            nccl: std::sync::OnceLock::new(),
            exchange_lock: Mutex::new(()),
            device_phases: Mutex::new(Default::default()),
        };
        #[cfg(feature = "cuda")]
        if let Some(r) = &table.ranks {
            // The ranks meet here: every rank makes its table at about the same time.
            let nccl = nccl::Nccl::rank(table.devices[0], r)?;
            let _ = table.nccl.set(Some(std::sync::Arc::new(nccl)));
        }
        Ok(table)
    }

    /// The backend every shard runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }
    /// How many shards the whole table has (with ranks, one per rank).
    pub fn shard_count(&self) -> usize {
        self.ranks.as_ref().map_or(self.shards.len(), |r| r.world)
    }
    /// The shards this process holds: every shard, or with ranks its own (`rank..rank + 1`). Device-data calls
    /// take one slice per shard held here, in this order.
    pub fn local_shards(&self) -> std::ops::Range<usize> {
        self.base()..self.base() + self.shards.len()
    }
    /// The shard index of the first shard held here: the rank, with ranks; else 0.
    pub(super) fn base(&self) -> usize {
        self.ranks.as_ref().map_or(0, |r| r.rank)
    }
    /// This process's place among the ranks, for a table over ranks.
    pub fn ranks(&self) -> Option<&ranks::Ranks> {
        self.ranks.as_ref()
    }
    /// Shard `i`'s table (its pairs are the table's pairs of the keys whose shard is `i`). Panics unless this
    /// process holds shard `i` ([`ShardedTable::local_shards`]).
    pub fn shard(&self, i: usize) -> &HashTable<S, K, V> {
        assert!(
            self.local_shards().contains(&i),
            "shard {i} is not held by this process (it holds {:?})",
            self.local_shards()
        );
        &self.shards[i - self.base()]
    }
    /// The device ordinal of each shard held here.
    pub fn devices(&self) -> &[usize] {
        &self.devices
    }
    /// The shard `key` lives in.
    pub fn shard_of(&self, key: K) -> usize {
        self.route.shard_of(key.widen())
    }
    /// Pairs stored, over the shards held here (with ranks: this rank's shard).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }
    /// `true` when no shard holds a pair.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Slots, over the shards held here.
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.capacity()).sum()
    }
    /// Pairs over slots.
    pub fn load_factor(&self) -> f64 {
        self.len() as f64 / self.capacity() as f64
    }
    /// Erased slots not yet reclaimed, over the shards held here ([`HashTable::tombstones`]).
    pub fn tombstones(&self) -> usize {
        self.shards.iter().map(|s| s.tombstones()).sum()
    }

    /// Inserts pairs ([`HashTable::insert`] on each shard's part: the last occurrence of a key wins). The
    /// batch is checked whole before any shard changes: [`Error::LengthMismatch`], [`Error::SentinelKey`] (the
    /// first refused key's batch index) and [`Error::CapacityExceeded`] (with the figures of the shard that
    /// would overflow; a table with `growth` grows that shard instead) leave every shard unchanged. A shard's
    /// [`Error::BuildFailed`] returns its unplaced pairs with every other shard's, all other pairs stored.
    pub fn insert(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        if self.shard_count() == 1 {
            // One shard: the caller's batch is its part.
            return self.shards[0].insert(keys, values);
        }
        check_len("values", values.len(), keys.len())?;
        self.check_keys(keys)?;
        #[cfg(feature = "cuda")]
        if self.ranks.is_some() {
            return self.insert_host::<Cuda>(keys, values);
        }
        self.insert_parts(keys, values, "insert", |shard, part| {
            shard.insert(part.keys, part.values)
        })
    }

    /// The pairs of an insert call staged by shard (each part checked for room first), then `insert` on every
    /// shard's part at once; the failures of all shards merged, in the batch's positions.
    fn insert_parts(
        &mut self,
        keys: &[K],
        values: &[V],
        call: &'static str,
        insert: impl Fn(&mut HashTable<S, K, V>, Part<'_, K, V>) -> Result<()> + Sync,
    ) -> Result<()> {
        let mut trace = Trace::new("sharded");
        let (p, mut staged) = (self.stages).stage(
            &self.shards,
            &self.route,
            (keys, Some(values)),
            Room::Values,
            &mut trace,
        );
        check_room(&self.shards, &mut staged, &p)?;
        let results = on_staged(&mut self.shards, &mut staged, &p, insert);
        trace.lap("shards");
        trace.report(call, keys.len());
        merge_failures(&p, results).map(|_| ())
    }

    /// Inserts pairs, combining values by `F` ([`HashTable::insert_or_apply`]): a key's copies all go to one
    /// shard, so duplicates are reduced there. Errors and guarantees as [`ShardedTable::insert`].
    pub fn insert_or_apply<F: Reduction>(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        if self.shard_count() == 1 {
            return self.shards[0].insert_or_apply::<F>(keys, values);
        }
        check_len("values", values.len(), keys.len())?;
        self.check_keys(keys)?;
        #[cfg(feature = "cuda")]
        if self.ranks.is_some() {
            return self.insert_or_apply_host::<F, Cuda>(keys, values);
        }
        self.insert_parts(keys, values, "insert_or_apply", |shard, part| {
            shard.insert_or_apply::<F>(part.keys, part.values)
        })
    }

    /// Removes keys; returns how many were present ([`HashTable::erase`]; over ranks, how many pairs this rank's
    /// shard lost).
    pub fn erase(&mut self, keys: &[K]) -> Result<usize> {
        if self.shard_count() == 1 {
            return self.shards[0].erase(keys);
        }
        #[cfg(feature = "cuda")]
        if self.ranks.is_some() {
            self.check_keys(keys)?;
            return self.erase_host::<Cuda>(keys);
        }
        let mut trace = Trace::new("sharded");
        let (p, mut staged) = (self.stages).stage(
            &self.shards,
            &self.route,
            (keys, None),
            Room::Keys,
            &mut trace,
        );
        let results = on_staged(&mut self.shards, &mut staged, &p, |shard, part| {
            shard.erase(part.keys)
        });
        trace.lap("shards");
        trace.report("erase", keys.len());
        Ok(merge_failures(&p, results)?.into_iter().sum())
    }

    /// Looks keys up: `Some(value)` if present. (Through the host partition: on 4 H200s the device path's
    /// values and flags, then the `Option`s built from them, ran at 0.69x of it.)
    pub fn find(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        if self.shard_count() == 1 {
            return self.shards[0].find(keys);
        }
        if self.ranks.is_some() {
            let mut values = vec![V::default(); keys.len()];
            let mut flags = vec![0u32; keys.len()];
            self.find_on_devices(keys, Some(&mut values), Some(&mut flags))?;
            return Ok((values.par_iter().zip(&flags))
                .map(|(&v, &f)| (f != 0).then_some(v))
                .collect());
        }
        let mut out = vec![None; keys.len()];
        self.find_with(keys, &mut out, |v, found| found.then_some(v))?;
        Ok(out)
    }

    /// Looks keys up into `out`: the value, or [`Value::ABSENT`] for absent keys ([`HashTable::find_into`]). On
    /// GPUs (32-bit keys and values) the batch takes the device path: each GPU's equal share crosses its own
    /// link, the shards' exchange partitions it ([`ShardedTable::find_device`]), and the values come back into
    /// `out` over the same links.
    pub fn find_into(&self, keys: &[K], out: &mut [V]) -> Result<()> {
        if self.shard_count() == 1 {
            return self.shards[0].find_into(keys, out);
        }
        check_len("out", out.len(), keys.len())?;
        if self.finds_on_devices(keys) {
            return self.find_on_devices(keys, Some(out), None);
        }
        self.find_with(keys, out, |v, found| if found { v } else { V::ABSENT })
    }

    /// `true` for each key that is present.
    pub fn contains(&self, keys: &[K]) -> Result<Vec<bool>> {
        if self.shard_count() == 1 {
            return self.shards[0].contains(keys);
        }
        if self.finds_on_devices(keys) {
            let mut flags = vec![0u32; keys.len()];
            self.find_on_devices(keys, None, Some(&mut flags))?;
            return Ok(flags.par_iter().map(|&f| f != 0).collect());
        }
        let mut out = vec![false; keys.len()];
        self.find_with(keys, &mut out, |_, found| found)?;
        Ok(out)
    }

    /// A mixed batch ([`HashTable::apply`]): each shard runs its operations in batch order, so the operations
    /// on one key (all in one shard) take effect in batch order; one outcome per operation, in batch order.
    pub fn apply(&mut self, ops: &[Op<K, V>]) -> Result<Vec<Outcome<V>>> {
        if self.shard_count() == 1 {
            return self.shards[0].apply(ops);
        }
        if self.ranks.is_some() {
            return Err(Error::InvalidConfig(
                "mixed batches are not available on a table over ranks yet".into(),
            ));
        }
        let keys: Vec<K> = ops.par_iter().map(|o| o.key()).collect();
        let p = Partition::new(&self.route, &keys);
        let mut bufs: Vec<Vec<Op<K, V>>> = p
            .lens()
            .iter()
            .map(|&n| vec![Op::Find(K::EMPTY); n])
            .collect();
        let mut parts: Vec<&mut [Op<K, V>]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
        p.split(ops, &mut parts);
        let results = run_each(&mut self.shards, |i, shard| shard.apply(&bufs[i]));
        let outs = merge_failures(&p, results)?;
        let mut out = vec![Outcome::NotFound; ops.len()];
        p.join(&mut out, |s, j| outs[s][j]);
        Ok(out)
    }

    /// Every stored pair of the shards held here (order unspecified).
    pub fn pairs(&self) -> Result<Vec<(K, V)>> {
        let mut all = Vec::with_capacity(self.len());
        for s in &self.shards {
            all.extend(s.pairs()?);
        }
        Ok(all)
    }

    /// Removes every pair.
    pub fn clear(&mut self) -> Result<()> {
        run_each(&mut self.shards, |_, s| s.clear())
            .into_iter()
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    }

    /// Rebuilds each shard without its erased slots ([`HashTable::compact`]).
    pub fn compact(&mut self) -> Result<()> {
        run_each(&mut self.shards, |_, s| s.compact())
            .into_iter()
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    }

    /// Compiles every shard's kernels ahead of the first call ([`HashTable::warm_up`]).
    pub fn warm_up(&mut self) -> Result<()> {
        run_each(&mut self.shards, |_, s| s.warm_up())
            .into_iter()
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    }

    /// `true` when a host find takes the device path ([`ShardedTable::find_device`]): always over ranks; else
    /// GPU shards of 32-bit keys and values with no reserved-key swap (device calls see the tables' own keys),
    /// and no sentinel among the keys (the host path answers it as absent without a lookup).
    fn finds_on_devices(&self, keys: &[K]) -> bool {
        self.ranks.is_some()
            || !self.keys_only
                && self.backend != Backend::Cpu
                && K::BITS <= 32
                && V::BITS <= 32
                && !self.shards[0].swaps_keys()
                && !keys.par_iter().any(|k| k.is_sentinel())
    }

    /// [`ShardedTable::find_host`] on the table's runtime.
    fn find_on_devices(
        &self,
        keys: &[K],
        values: Option<&mut [V]>,
        flags: Option<&mut [u32]>,
    ) -> Result<()> {
        match self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda => self.find_host::<cubecl::cuda::CudaRuntime>(keys, values, flags),
            #[cfg(feature = "vulkan")]
            Backend::Vulkan => self.find_host::<cubecl::wgpu::WgpuRuntime>(keys, values, flags),
            b => Err(crate::runtime::select::unavailable(b)),
        }
    }

    /// [`Error::SentinelKey`] for the first key the shards refuse (they all refuse the same one).
    fn check_keys(&self, keys: &[K]) -> Result<()> {
        let shard = &self.shards[0];
        match first_position(keys, |&k| shard.refuses(k)) {
            Some(index) => Err(Error::SentinelKey { index }),
            None => Ok(()),
        }
    }

    /// Looks the batch up on every shard and writes `f(value, found)` of each key in batch order.
    fn find_with<U: Send>(
        &self,
        keys: &[K],
        out: &mut [U],
        f: impl Fn(V, bool) -> U + Sync,
    ) -> Result<()> {
        let mut trace = Trace::new("sharded");
        let (p, mut guards) = (self.stages).stage(
            &self.shards,
            &self.route,
            (keys, None),
            Room::Values,
            &mut trace,
        );
        let results = on_staged_ref(&self.shards, &mut guards, &p, |shard, part| {
            shard.find_bits_into(part.keys, part.values, part.found)
        });
        merge_failures(&p, results)?;
        trace.lap("shards");
        let staged: &[Staging<K, V>] = &guards;
        p.join(out, |s, j| {
            f(staged[s].value(j), present(staged[s].found(), j))
        });
        trace.lap("join");
        trace.report("find", keys.len());
        Ok(())
    }
}

/// [`Error::CapacityExceeded`] when a shard's staged part would overflow it (counted exactly only for a part that
/// could), before any shard changes.
fn check_room<S: SchemeInfo, K: Key, V: Value>(
    shards: &[HashTable<S, K, V>],
    staged: &mut [Staging<K, V>],
    p: &Partition,
) -> Result<()> {
    let results = on_staged_ref(shards, staged, p, |shard, part| shard.check_room(part.keys));
    merge_failures(p, results).map(|_| ())
}
