//! Device data spread over the shards' devices, as a multi-GPU program holds it: shard `g`'s device holds slice
//! `g` of a batch. Each slice is routed and laid out by destination shard on its own device
//! (`sharded::steps`, by the kernels that partition a paged table's batches, `device::route`, given the shards'
//! directory), in exchange steps of [`ShardedConfig::exchange_step`](super::config::ShardedConfig) keys. The
//! steps cross in all-to-all exchanges (`sharded::exchange`: NCCL between distinct CUDA devices, else through
//! the host) while the shards work: every shard runs the device-resident call of its [`GpuTable`] on step `s`
//! while step `s + 1`'s keys (and, for a find, step `s - 1`'s answers) travel, and a find's answers return by
//! the reverse exchange into the callers' slices, in their order. 32-bit keys and values (the packed layout).
//!
//! Streams: each shard's kernels run on its table's stream. The callers' slices are read there after a wait
//! for the calling thread's stream (where a caller writes them), and answers are written there and waited
//! for before a call returns.

use super::ShardedTable;
use super::config::PART_ALIGN;
use super::exchange::{Bufs, End, Exchanger, Move};
use super::plan::Plan;
use super::steps::Steps;
use crate::device::find::found_mode;
use crate::device::layout::Packed;
use crate::device::route::route_gather_kernel;
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::trace::Trace;
use crate::runtime::transfer::{HostTransfer, sync_device};
use crate::table::gpu::GpuTable;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, Result, Value};

/// How a sharded table's device-data calls move words between devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// One shard: nothing moves.
    Local,
    /// NCCL's grouped sends and receives between the GPUs (CUDA, one shard per distinct device, NCCL found).
    Nccl,
    /// Read back to the host and written to the destination (any runtime; shards that share a device).
    Host,
}

/// Where the time of the last device-data call went ([`ShardedTable::last_device_phases`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DevicePhases {
    /// Routing every slice into steps on its device (counts, one read of them, the layout by destination),
    /// all devices at once, host-timed.
    pub route_ms: f64,
    /// The call's exchange steps.
    pub steps: usize,
    /// From routed to returned, host-timed: the steps (the shards' work with the exchange beside it) and a
    /// find's gather of its answers.
    pub steps_ms: f64,
    /// The exchange's own time: over NCCL, each step's group timed on the devices by events around it (the
    /// slowest device's), summed over the steps; through the host, the host's time; 0 for one shard.
    pub exchange_ms: f64,
    /// Bytes the exchange moved (every source's words, its own part included; a find's answers and presence
    /// flags on the way back too).
    pub exchange_bytes: usize,
}

impl<S: SchemeInfo, K: Key, V: Value> ShardedTable<S, K, V> {
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
        let clients = self.closing(self.clients::<R>())?;
        self.closing(check_slices(&clients, &[keys, out, found], lens))?;
        if self.shard_count() == 1 {
            // One shard: its table answers the slice in place.
            let t = gpu::<R, S, K, V>(&self.shards[0])?;
            return self.shards[0].stream().executes(|| {
                sync_device(&clients[0])?;
                t.find_device(&keys[0], &out[0], Some(&found[0]), lens[0]);
                sync_device(&clients[0])
            });
        }
        let _one_at_a_time = self.exchange_lock.lock().unwrap_or_else(|e| e.into_inner());
        let done = self.find_steps(&clients, keys, lens, (out, found));
        self.closing(done)
    }

    /// [`ShardedTable::find_device`] over several shards, in exchange steps.
    fn find_steps<R: HostTransfer>(
        &self,
        clients: &[ComputeClient<R>],
        keys: &[Handle],
        lens: &[usize],
        (out, found): (&[Handle], &[Handle]),
    ) -> Result<()> {
        let mut phases = DevicePhases::default();
        let mut lap = Lap::new();
        let mut trace = Trace::new("sharded");
        let ex = self.exchanger(clients)?;
        let steps = self.route_steps(clients, &ex, (keys, None), lens, PART_ALIGN, &mut trace)?;
        phases.route_ms = lap.ms();
        phases.steps = steps.count();
        let recv_words = |h| steps.recv_words(h);
        let recv_keys = self.buffers(clients, recv_words)?;
        let answers = self.buffers(clients, recv_words)?;
        let flags = self.buffers(clients, recv_words)?;
        let send_words = |g| steps.send_words(g);
        let back_values = self.buffers(clients, send_words)?;
        let back_flags = self.buffers(clients, send_words)?;
        let send_keys = ex.bufs(steps.keys.clone())?;
        let recv_keys = ex.bufs(recv_keys)?;
        let (answers, flags) = (ex.bufs(answers)?, ex.bufs(flags)?);
        let (back_values, back_flags) = (ex.bufs(back_values)?, ex.bufs(back_flags)?);
        let keys_move = |s: usize| vec![forward(&steps, s, &send_keys, &recv_keys)];
        let back_moves = |s: usize| {
            let back = steps.plans[s].reversed();
            [(&answers, &back_values), (&flags, &back_flags)]
                .into_iter()
                .map(|(from, to)| Move {
                    plan: back.clone(),
                    word_bytes: 4,
                    send: from.regions(|h| steps.recv_at(h, s)),
                    recv: to.regions(|g| steps.send_at(g, s)),
                })
                .collect::<Vec<_>>()
        };
        trace.lap("receive buffers made");
        start_step(&ex, &keys_move(0), &mut phases)?;
        phases.exchange_ms += ex.wait()?;
        trace.lap("first keys moved");
        let last = steps.count() - 1;
        for s in 0..=last {
            // Step `s + 1`'s keys and step `s - 1`'s answers travel while the shards find step `s`.
            let mut beside = if s < last {
                keys_move(s + 1)
            } else {
                Vec::new()
            };
            if s > 0 {
                beside.extend(back_moves(s - 1));
            }
            start_step(&ex, &beside, &mut phases)?;
            trace.lap("exchange queued");
            // Each shard's find is queued and waited for on a thread of its own, as its inserts are.
            super::shard_threads::run_each_ref(&self.shards, |h, shard| {
                let n = steps.recv_len(h, s);
                if n == 0 {
                    return Ok(());
                }
                let at = (steps.recv_at(h, s) * 4) as u64;
                let t = gpu::<R, S, K, V>(shard)?;
                shard.stream().executes(|| {
                    t.launch_find(
                        &recv_keys.handles[h].clone().offset_start(at),
                        &answers.handles[h].clone().offset_start(at),
                        Some(&flags.handles[h].clone().offset_start(at)),
                        found_mode::FLAGS,
                        n,
                    );
                    sync_device(&clients[h])
                })
            })
            .into_iter()
            .collect::<Result<Vec<()>>>()?;
            trace.lap("finds waited");
            if !beside.is_empty() {
                phases.exchange_ms += ex.wait()?;
            }
            trace.lap("exchange waited");
        }
        start_step(&ex, &back_moves(last), &mut phases)?;
        phases.exchange_ms += ex.wait()?;
        trace.lap("last answers moved");
        self.gather(
            clients,
            &steps,
            lens,
            (&back_values.handles, &back_flags.handles),
            (out, found),
        )?;
        trace.lap("gathered");
        trace.report("find_device", lens.iter().sum());
        phases.steps_ms = lap.ms();
        *self.device_phases.lock().unwrap_or_else(|e| e.into_inner()) = phases;
        Ok(())
    }

    /// Gathers the answers, back in every source's send layout (values and presence flags), into the callers'
    /// slices (values into `out[g]`, 1 or 0 into `found[g]`), each shard's on a thread of its own, and waits.
    fn gather<R: HostTransfer>(
        &self,
        clients: &[ComputeClient<R>],
        steps: &Steps,
        lens: &[usize],
        (values, flags): (&[Handle], &[Handle]),
        (out, found): (&[Handle], &[Handle]),
    ) -> Result<()> {
        super::shard_threads::run_each_ref(&self.shards, |g, shard| {
            let (client, n) = (&clients[g], lens[g]);
            let words = steps.send_words(g).max(1);
            shard.stream().executes(|| {
                if n > 0 {
                    // SAFETY: `to[i]` of each of the slice's `n` keys lies in the send buffers (`words` words),
                    // and `out` and `found` hold the slice's keys.
                    unsafe {
                        route_gather_kernel::launch_unchecked::<Packed, R>(
                            client,
                            cube_count(n),
                            CubeDim::new_1d(CUBE_SIZE),
                            ArrayArg::from_raw_parts(steps.to[g].clone(), n),
                            ArrayArg::from_raw_parts(values[g].clone(), words),
                            ArrayArg::from_raw_parts(flags[g].clone(), words),
                            ArrayArg::from_raw_parts(out[g].clone(), n),
                            ArrayArg::from_raw_parts(found[g].clone(), n),
                            true,
                            found_mode::FLAGS,
                        )
                    }
                }
                sync_device(client)
            })
        })
        .into_iter()
        .collect::<Result<Vec<()>>>()
        .map(|_| ())
    }

    /// One buffer of `words(g)` 32-bit words (at least one) on each shard's device, made on its stream.
    pub(super) fn buffers<R: HostTransfer>(
        &self,
        clients: &[ComputeClient<R>],
        words: impl Fn(usize) -> usize,
    ) -> Result<Vec<Handle>> {
        Ok(clients
            .iter()
            .enumerate()
            .map(|(g, c)| {
                self.shards[g]
                    .stream()
                    .executes(|| c.empty(words(g).max(1) * 4))
            })
            .collect())
    }

    /// Shard `shard`'s CubeCL client of runtime `R` (the client of its device), to make and read the buffers
    /// of device-data calls. [`Error::InvalidConfig`] when the shard is not a 32-bit GPU table of `R`, or not
    /// held by this process ([`ShardedTable::local_shards`]).
    pub fn client<R: HostTransfer>(&self, shard: usize) -> Result<ComputeClient<R>> {
        if !self.local_shards().contains(&shard) {
            return Err(Error::InvalidConfig(format!(
                "shard {shard} is not held by this process (it holds {:?})",
                self.local_shards()
            )));
        }
        Ok(gpu::<R, S, K, V>(&self.shards[shard - self.base()])?
            .client()
            .clone())
    }

    /// The phases of the last device-data call ([`DevicePhases`]).
    pub fn last_device_phases(&self) -> DevicePhases {
        *self.device_phases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The exchange alone, as a ceiling for the device-data calls: every shard sends `words` 32-bit words,
    /// split evenly over the shards, through the table's transport ([`ShardedTable::transport`]) in one step;
    /// returns the best of `runs` timed exchanges (after one untimed) in seconds, timed as a call's steps are
    /// ([`DevicePhases::exchange_ms`]), and the bytes each moved.
    pub fn exchange_ceiling<R: HostTransfer>(
        &self,
        words: usize,
        runs: usize,
    ) -> Result<(f64, usize)> {
        let clients = self.clients::<R>()?;
        let _one_at_a_time = self.exchange_lock.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.shard_count();
        let part = words / n;
        let plan = Plan::new(vec![vec![part; n]; n]);
        let send = self.buffers(&clients, |_| part * n)?;
        let recv = self.buffers(&clients, |_| part * n)?;
        for (g, c) in clients.iter().enumerate() {
            self.shards[g].stream().executes(|| {
                fill_u32(c, &send[g], part * n, 7);
                sync_device(c)
            })?;
        }
        let ex = self.exchanger(&clients)?;
        let step = Move {
            plan,
            word_bytes: 4,
            send: ex.bufs(send)?.regions(|_| 0),
            recv: ex.bufs(recv)?.regions(|_| 0),
        };
        let mut best = f64::INFINITY;
        for run in 0..=runs.max(1) {
            ex.start(std::slice::from_ref(&step))?;
            let ms = ex.wait()?;
            if run > 0 {
                best = best.min(ms * 1e-3);
            }
        }
        Ok((best, step.bytes()))
    }

    /// `r`, and over ranks an error closes the exchange: it leaves the ranks out of step (the others would wait
    /// on this one inside the exchange), so the others fail with [`Error::PeerFailed`] and this rank's later
    /// calls across ranks return the error.
    pub(super) fn closing<T>(&self, r: Result<T>) -> Result<T> {
        #[cfg(feature = "cuda")]
        if let (Err(e), Some(_)) = (&r, &self.ranks)
            && let Some(nccl) = self.nccl()
        {
            nccl.close(e.clone());
        }
        r
    }

    /// The transport of this table's device-data calls.
    pub fn transport(&self) -> Transport {
        if self.shard_count() == 1 {
            return Transport::Local;
        }
        #[cfg(feature = "cuda")]
        {
            if self.nccl().is_some() {
                return Transport::Nccl;
            }
        }
        Transport::Host
    }

    /// Each shard's client of runtime `R` (its GPU table's), checked: the shards are 32-bit GPU tables of `R`.
    pub(super) fn clients<R: HostTransfer>(&self) -> Result<Vec<ComputeClient<R>>> {
        self.shards
            .iter()
            .map(|s| Ok(gpu::<R, S, K, V>(s)?.client().clone()))
            .collect()
    }

    /// How this call's steps travel: nothing moves for one shard; NCCL when the table has it; else the host
    /// (which a table over ranks cannot use: [`Error::InvalidConfig`]).
    pub(super) fn exchanger<'c, R: HostTransfer>(
        &self,
        clients: &'c [ComputeClient<R>],
    ) -> Result<Exchanger<'c, R>> {
        if self.shard_count() == 1 {
            return Ok(Exchanger::Local);
        }
        #[cfg(feature = "cuda")]
        if let Some(nccl) = self.nccl() {
            use std::any::Any;
            let cuda: Option<Vec<&ComputeClient<cubecl::cuda::CudaRuntime>>> = clients
                .iter()
                .map(|c| (c as &dyn Any).downcast_ref())
                .collect();
            if let Some(clients) = cuda {
                return Ok(Exchanger::Nccl {
                    nccl,
                    clients,
                    streams: self.shards.iter().map(|s| s.stream()).collect(),
                });
            }
        }
        if self.ranks.is_some() {
            return Err(Error::InvalidConfig(
                "a table over ranks exchanges through NCCL on CUDA only".into(),
            ));
        }
        Ok(Exchanger::Host {
            ends: clients
                .iter()
                .zip(&self.shards)
                .map(|(client, s)| End {
                    client,
                    stream: s.stream(),
                })
                .collect(),
            ms: Default::default(),
        })
    }
}

#[cfg(feature = "cuda")]
impl<S: SchemeInfo, K: Key, V: Value> ShardedTable<S, K, V> {
    /// The table's NCCL communicators: made at the first device-data call when the shards are on distinct
    /// CUDA devices and the library is found (a failed set-up is logged and leaves the host exchange).
    fn nccl(&self) -> Option<std::sync::Arc<super::nccl::Nccl>> {
        self.nccl
            .get_or_init(|| {
                let mut distinct = self.devices.clone();
                distinct.sort_unstable();
                distinct.dedup();
                if self.backend != crate::runtime::select::Backend::Cuda
                    || self.devices.len() < 2
                    || distinct.len() != self.devices.len()
                {
                    return None;
                }
                match super::nccl::Nccl::new(&self.devices) {
                    Ok(n) => n.map(std::sync::Arc::new),
                    Err(e) => {
                        tracing::warn!(target: "hashtile", "NCCL set-up failed, exchanging through the host: {e}");
                        None
                    }
                }
            })
            .clone()
    }
}

/// Milliseconds since the last lap.
pub(super) struct Lap(std::time::Instant);

impl Lap {
    pub(super) fn new() -> Self {
        Self(std::time::Instant::now())
    }
    pub(super) fn ms(&mut self) -> f64 {
        let now = std::time::Instant::now();
        let ms = (now - self.0).as_secs_f64() * 1e3;
        self.0 = now;
        ms
    }
}

/// Shard `t`'s GPU table of runtime `R` with packed 32-bit pairs.
pub(super) fn gpu<R: HostTransfer, S: SchemeInfo, K: Key, V: Value>(
    t: &crate::table::HashTable<S, K, V>,
) -> Result<&GpuTable<R, S, Packed>> {
    t.engine_any()
        .downcast_ref::<GpuTable<R, S, Packed>>()
        .ok_or_else(not_device_table::<K, V>)
}

/// [`gpu`], mutable.
pub(super) fn gpu_mut<R: HostTransfer, S: SchemeInfo, K: Key, V: Value>(
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
pub(super) fn check_slices<R: Runtime>(
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

/// An insert's outcome from the pairs its shards could not place: [`Error::StashOverflow`] when some were not
/// even tracked, [`Error::BuildFailed`] with the pairs when some were, else success.
pub(super) fn failures(untracked: usize, unplaced: Vec<(u64, u64)>) -> Result<()> {
    if untracked > 0 {
        Err(Error::StashOverflow {
            untracked,
            unplaced,
        })
    } else if unplaced.is_empty() {
        Ok(())
    } else {
        Err(Error::BuildFailed {
            attempts: 1,
            unplaced,
        })
    }
}

/// Step `s`'s move of `send` (each shard's send buffer) into `recv` (each shard's receive buffer), in the
/// step's regions, by the step's plan.
pub(super) fn forward(steps: &Steps, s: usize, send: &Bufs, recv: &Bufs) -> Move {
    Move {
        plan: steps.plans[s].clone(),
        word_bytes: 4,
        send: send.regions(|g| steps.send_at(g, s)),
        recv: recv.regions(|h| steps.recv_at(h, s)),
    }
}

/// Queues `moves` as one exchange step (none: nothing), counting their bytes.
pub(super) fn start_step<R: HostTransfer>(
    ex: &Exchanger<'_, R>,
    moves: &[Move],
    phases: &mut DevicePhases,
) -> Result<()> {
    if moves.is_empty() {
        return Ok(());
    }
    phases.exchange_bytes += moves.iter().map(Move::bytes).sum::<usize>();
    ex.start(moves)
}
