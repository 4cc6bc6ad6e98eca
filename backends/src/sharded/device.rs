//! Device data spread over the shards' devices, as a multi-GPU program holds it: shard `g`'s device holds slice
//! `g` of a batch. Each slice is routed and laid out by destination shard on its own device, by the kernels
//! that partition a paged table's batches (`device::route`, given the shards' directory), the slices' parts
//! cross in one all-to-all exchange (`sharded::exchange`: NCCL between
//! distinct CUDA devices, else through the host), every shard runs the device-resident call of its
//! [`GpuTable`] on what it received, and a find's answers return by the reverse exchange into the callers'
//! slices, in their order. 32-bit keys and values (the packed layout).
//!
//! Streams: each shard's kernels run on its table's stream. The callers' slices are read there after a wait
//! for the calling thread's stream (where a caller writes them), and answers are written there and waited
//! for before a call returns.

use super::ShardedTable;
use super::exchange::{End, Plan, through_host};
use super::route::ROUTE_BITS;
use crate::device::layout::Packed;
use crate::device::route::{
    CUBE, TILE, route_count_kernel, route_gather_kernel, route_scatter_kernel, route_values_kernel,
};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::transfer::{HostTransfer, sync_device};
use crate::runtime::words::{bytes_of, bytes_of_mut};
use crate::table::gpu::GpuTable;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, Result, Value};

/// How a sharded table's device-data calls move words between devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// NCCL's grouped sends and receives between the GPUs (CUDA, one shard per distinct device, NCCL found).
    Nccl,
    /// Read back to the host and written to the destination (any runtime; shards that share a device).
    Host,
}

/// Where the time of the last device-data call went ([`ShardedTable::last_device_phases`]), host-timed
/// around each step's wait: routing and counting, the layout by destination, the exchange (and, for finds,
/// the exchange back), the shards' own calls, and the answers' gather.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DevicePhases {
    /// Routing each slice and reading the counts back.
    pub route_ms: f64,
    /// Laying the slices out by destination.
    pub scatter_ms: f64,
    /// The exchange of keys (and values).
    pub exchange_ms: f64,
    /// Bytes the exchange moved (each source's whole send buffers, its own part included).
    pub exchange_bytes: usize,
    /// The shards' inserts or finds.
    pub shards_ms: f64,
    /// A find's answers back (the reverse exchange) and their gather.
    pub back_ms: f64,
}

/// A slice laid out by destination on its device: where each key went (`to[i]`), and the send buffers.
struct Routed {
    to: Handle,
    keys: Handle,
    values: Option<Handle>,
}

impl<S: SchemeInfo, K: Key, V: Value> ShardedTable<S, K, V> {
    /// Inserts pairs held on the shards' devices: `keys[g]` and `values[g]` hold `lens[g]` 32-bit words on
    /// shard `g`'s device (buffers of [`ShardedTable::client`]`(g)`, written by the calling thread). A key
    /// repeated in the batch, within a slice or across slices, is stored once, with one of its values (the
    /// slices race, as the copies of a key in one GPU's batch do on cuCollections). Keys must not be the
    /// sentinel (all ones); pairs a shard cannot place come back as [`Error::BuildFailed`], every other pair
    /// stored. 32-bit keys and values on GPU backends only, else [`Error::InvalidConfig`].
    ///
    /// ```no_run
    /// # use hashtile_backends::{ShardedConfig, ShardedTable, TableConfig};
    /// # use hashtile_probing::Bcht;
    /// use cubecl::cuda::CudaRuntime;
    /// use cubecl::prelude::*;
    /// // One shard per GPU; each GPU holds its own slice of the batch.
    /// let mut t: ShardedTable<Bcht, u32, u32> =
    ///     ShardedTable::new(ShardedConfig::new(TableConfig::for_keys(1 << 24, 0.8)))?;
    /// let (mut keys, mut values, mut lens) = (Vec::new(), Vec::new(), Vec::new());
    /// for g in 0..t.shard_count() {
    ///     let client = t.client::<CudaRuntime>(g)?;
    ///     let k: Vec<u32> = (0..1000u32).map(|i| i * 7 + g as u32).collect();
    ///     keys.push(client.create_from_slice(u32::as_bytes(&k)));
    ///     values.push(client.create_from_slice(u32::as_bytes(&k)));
    ///     lens.push(k.len());
    /// }
    /// t.insert_device::<CudaRuntime>(&keys, &values, &lens)?;
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    pub fn insert_device<R: HostTransfer>(
        &mut self,
        keys: &[Handle],
        values: &[Handle],
        lens: &[usize],
    ) -> Result<()> {
        let clients = self.clients::<R>()?;
        check_slices(&clients, &[keys, values], lens)?;
        let mut phases = DevicePhases::default();
        let mut lap = Lap::new();
        let (plan, routed) = self.route(&clients, keys, Some(values), lens)?;
        phases.route_ms = lap.ms();
        let send_keys: Vec<Handle> = routed.iter().map(|r| r.keys.clone()).collect();
        let send_values: Vec<Handle> = routed.iter().filter_map(|r| r.values.clone()).collect();
        let mut recv = self.exchange(&clients, &plan, &[&send_keys, &send_values])?;
        let (recv_values, recv_keys) = (
            recv.pop().unwrap_or_default(),
            recv.pop().unwrap_or_default(),
        );
        phases.exchange_ms = lap.ms();
        phases.exchange_bytes = 8 * lens.iter().sum::<usize>();
        let results = super::run_each(&mut self.shards, |h, shard| {
            let n = plan.recv_len(h);
            let stream = shard.stream();
            let t = gpu_mut::<R, S, K, V>(shard)?;
            stream.executes(|| t.insert_device(&recv_keys[h], &recv_values[h], n))
        });
        phases.shards_ms = lap.ms();
        *self.device_phases.lock().unwrap_or_else(|e| e.into_inner()) = phases;
        let mut unplaced = Vec::new();
        for r in results {
            let u = r?;
            if u.untracked > 0 {
                return Err(Error::StashOverflow {
                    untracked: u.untracked,
                    unplaced: u.pairs,
                });
            }
            unplaced.extend(u.pairs);
        }
        if unplaced.is_empty() {
            Ok(())
        } else {
            Err(Error::BuildFailed {
                attempts: 1,
                unplaced,
            })
        }
    }

    /// Looks up keys held on the shards' devices: `keys[g]` holds `lens[g]` 32-bit keys on shard `g`'s device;
    /// `out[g]` receives their values (all ones where absent) and `found[g]` 1 or 0 per key, in `keys[g]`'s
    /// order (buffers of at least `lens[g]` words on the same device). 32-bit keys and values on GPU backends
    /// only, else [`Error::InvalidConfig`].
    pub fn find_device<R: HostTransfer>(
        &self,
        keys: &[Handle],
        lens: &[usize],
        out: &[Handle],
        found: &[Handle],
    ) -> Result<()> {
        let clients = self.clients::<R>()?;
        check_slices(&clients, &[keys, out, found], lens)?;
        let mut phases = DevicePhases::default();
        let mut lap = Lap::new();
        let (plan, routed) = self.route(&clients, keys, None, lens)?;
        phases.route_ms = lap.ms();
        let send_keys: Vec<Handle> = routed.iter().map(|r| r.keys.clone()).collect();
        let recv_keys = self.exchange(&clients, &plan, &[&send_keys])?.remove(0);
        phases.exchange_ms = lap.ms();
        phases.exchange_bytes = 4 * lens.iter().sum::<usize>();
        let answers = super::run_each_ref(&self.shards, |h, shard| -> Result<(Handle, Handle)> {
            let (n, client) = (plan.recv_len(h), &clients[h]);
            let t = gpu::<R, S, K, V>(shard)?;
            shard.stream().executes(|| {
                let values = client.empty(n.max(1) * 4);
                let flags = client.empty(n.max(1) * 4);
                if n > 0 {
                    t.find_device(&recv_keys[h], &values, Some(&flags), n);
                }
                sync_device(client)?;
                Ok((values, flags))
            })
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        phases.shards_ms = lap.ms();
        let values: Vec<Handle> = answers.iter().map(|a| a.0.clone()).collect();
        let flags: Vec<Handle> = answers.iter().map(|a| a.1.clone()).collect();
        let mut back = self.exchange(&clients, &plan.reversed(), &[&values, &flags])?;
        let (back_flags, back_values) = (
            back.pop().unwrap_or_default(),
            back.pop().unwrap_or_default(),
        );
        for (g, client) in clients.iter().enumerate() {
            let n = lens[g];
            if n == 0 {
                continue;
            }
            self.shards[g].stream().executes(|| {
                let stand_in = client.empty(4);
                for (from, to) in [(&back_values[g], &out[g]), (&back_flags[g], &found[g])] {
                    // SAFETY: `to[i] < n` for every key (the send buffer held the slice's `n` keys), and every
                    // array passed holds `n` words; the bits arrays are not read without bits.
                    unsafe {
                        route_gather_kernel::launch_unchecked::<Packed, R>(
                            client,
                            cube_count(n),
                            CubeDim::new_1d(CUBE_SIZE),
                            ArrayArg::from_raw_parts(routed[g].to.clone(), n),
                            ArrayArg::from_raw_parts(from.clone(), n),
                            ArrayArg::from_raw_parts(stand_in.clone(), 1),
                            ArrayArg::from_raw_parts(to.clone(), n),
                            ArrayArg::from_raw_parts(stand_in.clone(), 1),
                            false,
                        )
                    }
                }
            });
        }
        for (g, client) in clients.iter().enumerate() {
            self.shards[g].stream().executes(|| sync_device(client))?;
        }
        phases.back_ms = lap.ms();
        *self.device_phases.lock().unwrap_or_else(|e| e.into_inner()) = phases;
        Ok(())
    }

    /// Host finds through the devices: slice `g` of `keys` (contiguous, an equal share) crosses shard `g`'s own
    /// link (its table's staging), [`ShardedTable::find_device`] answers every slice, and each slice's values
    /// (into `values`) and presence flags (into `flags`, 1 or 0 per key) come back over the same link into
    /// the caller's memory: no host partition, no host join, every link busy at once. Keys must not be the
    /// sentinel (the caller checks).
    pub(crate) fn find_host<R: HostTransfer>(
        &self,
        keys: &[K],
        values: Option<&mut [V]>,
        flags: Option<&mut [u32]>,
    ) -> Result<()> {
        let clients = self.clients::<R>()?;
        let n = self.shards.len();
        let per = keys.len().div_ceil(n).max(1);
        let lens: Vec<usize> = (0..n)
            .map(|g| keys.len().saturating_sub(g * per).min(per))
            .collect();
        let uploaded = super::run_each_ref(
            &self.shards,
            |g, shard| -> Result<(Handle, Handle, Handle)> {
                let (client, part) = (&clients[g], &keys[(g * per).min(keys.len())..][..lens[g]]);
                let t = gpu::<R, S, K, V>(shard)?;
                shard.stream().executes(|| {
                    let kh = R::upload(client, t.host_stager(), bytes_of(part))?;
                    let m = part.len().max(1);
                    Ok((kh, client.empty(m * 4), client.empty(m * 4)))
                })
            },
        )
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        let kh: Vec<Handle> = uploaded.iter().map(|u| u.0.clone()).collect();
        let out: Vec<Handle> = uploaded.iter().map(|u| u.1.clone()).collect();
        let found: Vec<Handle> = uploaded.iter().map(|u| u.2.clone()).collect();
        self.find_device::<R>(&kh, &lens, &out, &found)?;
        let mut value_parts: Vec<Option<&mut [V]>> = match values {
            Some(v) => v.chunks_mut(per).map(Some).collect(),
            None => Vec::new(),
        };
        let mut flag_parts: Vec<Option<&mut [u32]>> = match flags {
            Some(f) => f.chunks_mut(per).map(Some).collect(),
            None => Vec::new(),
        };
        value_parts.resize_with(n, || None);
        flag_parts.resize_with(n, || None);
        std::thread::scope(|sc| {
            let handles: Vec<_> = value_parts
                .into_iter()
                .zip(flag_parts)
                .enumerate()
                .map(|(g, (v, f))| {
                    let (client, shard, out, found) =
                        (&clients[g], &self.shards[g], &out[g], &found[g]);
                    sc.spawn(move || -> Result<()> {
                        let t = gpu::<R, S, K, V>(shard)?;
                        shard.stream().executes(|| {
                            if let Some(v) = v {
                                R::download(client, t.host_stager(), out, bytes_of_mut(v))?;
                            }
                            if let Some(f) = f {
                                R::download(client, t.host_stager(), found, bytes_of_mut(f))?;
                            }
                            Ok(())
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(super::join_thread)
                .collect::<Result<Vec<()>>>()
        })?;
        Ok(())
    }

    /// Shard `shard`'s CubeCL client of runtime `R` (the client of its device), to make and read the buffers
    /// of device-data calls. [`Error::InvalidConfig`] when the shard is not a 32-bit GPU table of `R`.
    pub fn client<R: HostTransfer>(&self, shard: usize) -> Result<ComputeClient<R>> {
        Ok(gpu::<R, S, K, V>(&self.shards[shard])?.client().clone())
    }

    /// The phases of the last device-data call ([`DevicePhases`]).
    pub fn last_device_phases(&self) -> DevicePhases {
        *self.device_phases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The exchange alone, as a ceiling for the device-data calls: every shard sends `words` 32-bit words,
    /// split evenly over the shards, through the table's transport ([`ShardedTable::transport`]); returns the
    /// best of `runs` timed exchanges (after one untimed) in seconds, and the bytes each moved.
    pub fn exchange_ceiling<R: HostTransfer>(
        &self,
        words: usize,
        runs: usize,
    ) -> Result<(f64, usize)> {
        let clients = self.clients::<R>()?;
        let n = clients.len();
        let part = words / n;
        let plan = Plan::new(vec![vec![part; n]; n]);
        let send: Vec<Handle> = clients
            .iter()
            .zip(&self.shards)
            .map(|(c, s)| {
                s.stream().executes(|| {
                    let h = c.empty((part * n).max(1) * 4);
                    fill_u32(c, &h, part * n, 7);
                    sync_device(c).map(|_| h)
                })
            })
            .collect::<Result<_>>()?;
        let mut best = f64::INFINITY;
        for run in 0..=runs.max(1) {
            let t0 = std::time::Instant::now();
            let recv = self.exchange(&clients, &plan, &[&send])?;
            let secs = t0.elapsed().as_secs_f64();
            drop(recv);
            if run > 0 {
                best = best.min(secs);
            }
        }
        Ok((best, part * n * n * 4))
    }

    /// The transport of this table's device-data calls.
    pub fn transport(&self) -> Transport {
        #[cfg(feature = "cuda")]
        {
            if self.nccl().is_some() {
                return Transport::Nccl;
            }
        }
        Transport::Host
    }

    /// Each shard's client of runtime `R` (its GPU table's), checked: the shards are 32-bit GPU tables of `R`.
    fn clients<R: HostTransfer>(&self) -> Result<Vec<ComputeClient<R>>> {
        self.shards
            .iter()
            .map(|s| Ok(gpu::<R, S, K, V>(s)?.client().clone()))
            .collect()
    }

    /// Routes every slice on its device (after a wait for the caller's stream, which wrote it), reads the
    /// counts back (the plan of the exchange) and lays each slice out by destination into its send buffers
    /// (waited for, so the exchange may read them).
    fn route<R: HostTransfer>(
        &self,
        clients: &[ComputeClient<R>],
        keys: &[Handle],
        values: Option<&[Handle]>,
        lens: &[usize],
    ) -> Result<(Plan, Vec<Routed>)> {
        for c in clients {
            sync_device(c)?;
        }
        let shards = self.shards.len();
        let (seed, width) = (self.route.seed, shards as u32);
        let entries_len = self.route.entries.len();
        let counted =
            super::run_each_ref(&self.shards, |g, shard| -> Result<(Handle, Vec<usize>)> {
                let (client, key, n) = (&clients[g], &keys[g], lens[g]);
                shard.stream().executes(|| {
                    let entries = client.create_from_slice(u32::as_bytes(&self.route.entries));
                    let counts = client.empty(shards * 4);
                    fill_u32(client, &counts, shards, 0);
                    if n > 0 {
                        let stand_in = client.empty(4);
                        // SAFETY: the kernel guards each position against the keys' length `n`; the mask is not
                        // read unmasked.
                        unsafe {
                            route_count_kernel::launch_unchecked::<Packed, R>(
                                client,
                                cube_count(n.div_ceil(TILE) * CUBE),
                                CubeDim::new_1d(CUBE_SIZE),
                                ArrayArg::from_raw_parts(key.clone(), n),
                                ArrayArg::from_raw_parts(stand_in, 1),
                                ArrayArg::from_raw_parts(entries.clone(), entries_len),
                                ArrayArg::from_raw_parts(counts.clone(), shards),
                                seed,
                                ROUTE_BITS,
                                false,
                                width,
                            )
                        }
                    }
                    let c = u32::from_bytes(&client.read_one_unchecked(counts)).to_vec();
                    Ok((entries, c.iter().map(|&x| x as usize).collect()))
                })
            })
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        let plan = Plan::new(counted.iter().map(|c| c.1.clone()).collect());
        let routed = (0..shards)
            .map(|g| {
                let (client, n, entries) = (&clients[g], lens[g], &counted[g].0);
                self.shards[g].stream().executes(|| {
                    let starts: Vec<u32> = (0..shards)
                        .map(|to| plan.send_start(g, to) as u32)
                        .collect();
                    let cursor = client.create_from_slice(u32::as_bytes(&starts));
                    let to = client.empty(n.max(1) * 4);
                    let send_keys = client.empty(n.max(1) * 4);
                    let send_values = values.map(|_| client.empty(n.max(1) * 4));
                    if n > 0 {
                        let stand_in = client.empty(4);
                        // SAFETY: a one-word stand-in for arrays the launch does not read or write.
                        let one = || unsafe { ArrayArg::from_raw_parts(stand_in.clone(), 1) };
                        // SAFETY: positions are guarded by `n`; routed positions lie in the parts the counts
                        // laid out (`n` in all); mask, routed mask, ends and overflow are not used unmasked
                        // and unbounded.
                        unsafe {
                            route_scatter_kernel::launch_unchecked::<Packed, R>(
                                client,
                                cube_count(n.div_ceil(TILE) * CUBE),
                                CubeDim::new_1d(CUBE_SIZE),
                                ArrayArg::from_raw_parts(keys[g].clone(), n),
                                one(),
                                ArrayArg::from_raw_parts(entries.clone(), entries_len),
                                ArrayArg::from_raw_parts(cursor, shards),
                                ArrayArg::from_raw_parts(send_keys.clone(), n),
                                one(),
                                ArrayArg::from_raw_parts(to.clone(), n),
                                one(),
                                one(),
                                seed,
                                ROUTE_BITS,
                                false,
                                false,
                                width,
                            )
                        }
                        if let (Some(v), Some(sv)) = (values, &send_values) {
                            // SAFETY: guarded by `n`; `to` holds positions below `n`.
                            unsafe {
                                route_values_kernel::launch_unchecked::<Packed, R>(
                                    client,
                                    cube_count(n),
                                    CubeDim::new_1d(CUBE_SIZE),
                                    ArrayArg::from_raw_parts(v[g].clone(), n),
                                    one(),
                                    ArrayArg::from_raw_parts(to.clone(), n),
                                    ArrayArg::from_raw_parts(sv.clone(), n),
                                    false,
                                )
                            }
                        }
                    }
                    sync_device(client)?;
                    Ok(Routed {
                        to,
                        keys: send_keys,
                        values: send_values,
                    })
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((plan, routed))
    }

    /// Moves sets of 32-bit words along `plan` (each set: one send buffer per shard), all sets in one
    /// exchange: NCCL when the table has it, else through the host. Returns each set's receive buffers.
    fn exchange<R: HostTransfer>(
        &self,
        clients: &[ComputeClient<R>],
        plan: &Plan,
        sets: &[&[Handle]],
    ) -> Result<Vec<Vec<Handle>>> {
        if plan.shards() == 1 {
            // One shard: its send buffers are what it receives.
            return Ok(sets.iter().map(|s| s.to_vec()).collect());
        }
        #[cfg(feature = "cuda")]
        if let Some(nccl) = self.nccl() {
            use std::any::Any;
            let cuda: Option<Vec<&ComputeClient<cubecl::cuda::CudaRuntime>>> = clients
                .iter()
                .map(|c| (c as &dyn Any).downcast_ref())
                .collect();
            if let Some(cuda) = cuda {
                return self.exchange_nccl(nccl, &cuda, plan, sets);
            }
        }
        let ends: Vec<End<'_, R>> = clients
            .iter()
            .zip(&self.shards)
            .map(|(client, s)| End {
                client,
                stream: s.stream(),
            })
            .collect();
        sets.iter()
            .map(|send| through_host(&ends, plan, 4, send))
            .collect()
    }
}

#[cfg(feature = "cuda")]
impl<S: SchemeInfo, K: Key, V: Value> ShardedTable<S, K, V> {
    /// The table's NCCL communicators: made at the first device-data call when the shards are on distinct
    /// CUDA devices and the library is found (a failed set-up is logged and leaves the host exchange).
    fn nccl(&self) -> Option<&super::nccl::Nccl> {
        self.nccl
            .get_or_init(|| {
                let mut distinct = self.devices.clone();
                distinct.sort_unstable();
                distinct.dedup();
                if self.backend != crate::Backend::Cuda
                    || self.devices.len() < 2
                    || distinct.len() != self.devices.len()
                {
                    return None;
                }
                match super::nccl::Nccl::new(&self.devices) {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::warn!(target: "hashtile", "NCCL set-up failed, exchanging through the host: {e}");
                        None
                    }
                }
            })
            .as_ref()
    }

    /// [`ShardedTable::exchange`] over NCCL: receive buffers made on each destination, then one group for
    /// every set.
    fn exchange_nccl(
        &self,
        nccl: &super::nccl::Nccl,
        clients: &[&ComputeClient<cubecl::cuda::CudaRuntime>],
        plan: &Plan,
        sets: &[&[Handle]],
    ) -> Result<Vec<Vec<Handle>>> {
        use crate::runtime::transfer::device_ptr;
        let _one_at_a_time = self.exchange_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut recv: Vec<Vec<Handle>> = vec![Vec::with_capacity(clients.len()); sets.len()];
        let mut addresses: Vec<(Vec<u64>, Vec<u64>)> = vec![Default::default(); sets.len()];
        for (h, c) in clients.iter().enumerate() {
            self.shards[h].stream().executes(|| -> Result<()> {
                for (k, send) in sets.iter().enumerate() {
                    let r = c.empty(plan.recv_len(h).max(1) * 4);
                    addresses[k].0.push(device_ptr(c, &send[h])?);
                    addresses[k].1.push(device_ptr(c, &r)?);
                    recv[k].push(r);
                }
                // CubeCL may hand out memory a queued kernel still reads: wait before NCCL writes it.
                sync_device(*c)
            })?;
        }
        nccl.all_to_all(plan, 4, &addresses)?;
        Ok(recv)
    }
}

/// Milliseconds since the last lap.
struct Lap(std::time::Instant);

impl Lap {
    fn new() -> Self {
        Self(std::time::Instant::now())
    }
    fn ms(&mut self) -> f64 {
        let now = std::time::Instant::now();
        let ms = (now - self.0).as_secs_f64() * 1e3;
        self.0 = now;
        ms
    }
}

/// Shard `t`'s GPU table of runtime `R` with packed 32-bit pairs.
fn gpu<R: HostTransfer, S: SchemeInfo, K: Key, V: Value>(
    t: &crate::table::HashTable<S, K, V>,
) -> Result<&GpuTable<R, S, Packed>> {
    t.engine_any()
        .downcast_ref::<GpuTable<R, S, Packed>>()
        .ok_or_else(not_device_table::<K, V>)
}

/// [`gpu`], mutable.
fn gpu_mut<R: HostTransfer, S: SchemeInfo, K: Key, V: Value>(
    t: &mut crate::table::HashTable<S, K, V>,
) -> Result<&mut GpuTable<R, S, Packed>> {
    t.engine_any_mut()
        .downcast_mut::<GpuTable<R, S, Packed>>()
        .ok_or_else(not_device_table::<K, V>)
}

fn not_device_table<K: Key, V: Value>() -> Error {
    Error::InvalidConfig(format!(
        "device-data calls need the shards on the GPU runtime named and 32-bit keys and values ({}-bit keys, \
         {}-bit values here, or another backend); use the host-data calls",
        K::BITS,
        V::BITS
    ))
}

/// Every slice list has one buffer per shard, and no slice passes 2^32 - 1 keys (the kernels' indices).
fn check_slices<R: Runtime>(
    clients: &[ComputeClient<R>],
    lists: &[&[Handle]],
    lens: &[usize],
) -> Result<()> {
    let n = clients.len();
    if lens.len() != n {
        return Err(Error::LengthMismatch {
            what: "lens",
            got: lens.len(),
            expected: n,
        });
    }
    for l in lists {
        if l.len() != n {
            return Err(Error::LengthMismatch {
                what: "device slices",
                got: l.len(),
                expected: n,
            });
        }
    }
    if let Some(&big) = lens.iter().find(|&&l| l >= u32::MAX as usize) {
        return Err(Error::InvalidConfig(format!(
            "a device slice of {big} keys; at most 2^32 - 2 per slice"
        )));
    }
    Ok(())
}
