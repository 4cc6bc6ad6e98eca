//! Writes of device data spread over the shards' devices (`sharded::device` has the layout, the reads and the
//! exchange's plumbing): inserts, insert-or-apply and erases move their slices in exchange steps, and every
//! shard applies step `s` while step `s + 1` travels. A key's step is its route's, so a step's keys are none of
//! the earlier steps' keys: a shard empty before the call takes each step without the pass that looks for the
//! step's keys in the table (`GpuTable::insert_device_absent`, `GpuTable::insert_or_apply_device_absent`).

use super::ShardedTable;
use super::config::PART_ALIGN;
use super::device::{DevicePhases, Lap, check_slices, failures, forward, gpu_mut, start_step};
use super::steps::Steps;
use crate::device::layout::Packed;
use crate::runtime::trace::Trace;
use crate::runtime::transfer::{HostTransfer, sync_device};
use crate::table::gpu::{GpuTable, Unplaced};
use cubecl::prelude::ComputeClient;
use cubecl::server::Handle;
use hashtile_core::reduce::{Reduce, kind};
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Key, Result, Value};

/// One step of a write on one shard: its table, the step's keys and values (`None` for erases), how many, and
/// whether the shard was empty before the call.
type StepWrite<'a, R, S, T> = dyn Fn(&mut GpuTable<R, S, Packed>, &Handle, Option<&Handle>, usize, bool) -> Result<T>
    + Sync
    + 'a;

/// One step of a write of pairs on one shard ([`StepWrite`] with the values there), placing what it can.
type PairsWrite<'a, R, S> = dyn Fn(&mut GpuTable<R, S, Packed>, &Handle, &Handle, usize, bool) -> Result<Unplaced>
    + Sync
    + 'a;

impl<S: SchemeInfo, K: Key, V: Value> ShardedTable<S, K, V> {
    /// Inserts pairs held on the shards' devices: `keys[g]` and `values[g]` hold `lens[g]` 32-bit words on
    /// shard `g`'s device (buffers of [`ShardedTable::client`]`(g)`, written by the calling thread). A key
    /// repeated in the batch, within a slice or across slices, is stored once, with one of its values (the
    /// copies race, as the copies of a key in one GPU's batch do on cuCollections). Keys must not be the
    /// sentinel (all ones); pairs a shard cannot place come back as
    /// [`Error::BuildFailed`](hashtile_core::Error::BuildFailed), every other pair stored. 32-bit keys and
    /// values on GPU backends only, else [`Error::InvalidConfig`](hashtile_core::Error::InvalidConfig).
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
        let call = ("insert_device", PART_ALIGN);
        self.write_pairs::<R>(call, keys, values, lens, &|t, k, v, n, empty| {
            if empty {
                t.insert_device_absent(k, v, n)
            } else {
                t.insert_device(k, v, n)
            }
        })
    }

    /// Inserts pairs held on the shards' devices (as [`ShardedTable::insert_device`] takes them), combining
    /// values by `F` ([`GpuTable::insert_or_apply_device`]): a stored key's value becomes `F::reduce(stored, v)`,
    /// and all copies of a key in the batch, from any slice, meet in one step of one shard and are reduced there.
    /// Errors as [`ShardedTable::insert_device`].
    pub fn insert_or_apply_device<F: Reduce, R: HostTransfer>(
        &mut self,
        keys: &[Handle],
        values: &[Handle],
        lens: &[usize],
    ) -> Result<()> {
        // A pair repeated to pad a part changes nothing under an idempotent reduction only.
        let idempotent = [kind::ASSIGN, kind::MIN, kind::MAX].contains(&F::KIND);
        self.write_pairs::<R>(
            (
                "insert_or_apply_device",
                if idempotent { PART_ALIGN } else { 1 },
            ),
            keys,
            values,
            lens,
            &|t, k, v, n, empty| {
                if empty {
                    t.insert_or_apply_device_absent::<F>(k, v, n)
                } else {
                    t.insert_or_apply_device::<F>(k, v, n)
                }
            },
        )
    }

    /// Erases keys held on the shards' devices (`keys[g]`: `lens[g]` 32-bit keys on shard `g`'s device) and
    /// returns how many pairs went from the shards held here ([`GpuTable::erase_device`]: repeats and absent keys
    /// erase nothing more; packed pairs or keys alone, else
    /// [`Error::InvalidConfig`](hashtile_core::Error::InvalidConfig)).
    pub fn erase_device<R: HostTransfer>(
        &mut self,
        keys: &[Handle],
        lens: &[usize],
    ) -> Result<usize> {
        let out = self.write_steps::<R, _>(
            ("erase_device", PART_ALIGN),
            keys,
            None,
            lens,
            &|t, k, _, n, _| t.erase_device(k, n),
        )?;
        Ok(out.into_iter().sum())
    }

    /// A write of pairs in exchange steps ([`ShardedTable::write_steps`]), the pairs no shard could place merged
    /// into one error.
    fn write_pairs<R: HostTransfer>(
        &mut self,
        call: (&str, usize),
        keys: &[Handle],
        values: &[Handle],
        lens: &[usize],
        write: &PairsWrite<'_, R, S>,
    ) -> Result<()> {
        let out =
            self.write_steps::<R, _>(call, keys, Some(values), lens, &|t, k, v, n, empty| {
                write(t, k, v.expect("pairs move values"), n, empty)
            })?;
        failures(
            out.iter().map(|u| u.untracked).sum(),
            out.into_iter().flat_map(|u| u.pairs).collect(),
        )
    }

    /// A write of device slices in exchange steps: routes them, moves step `s + 1` while every shard applies
    /// `write` to step `s` (on a thread of its own), and returns every shard's result of every step. One shard
    /// takes its slice as it is. `call`: the call's name and its parts' alignment (`route_steps`).
    fn write_steps<R: HostTransfer, T: Send + Default>(
        &mut self,
        call: (&str, usize),
        keys: &[Handle],
        values: Option<&[Handle]>,
        lens: &[usize],
        write: &StepWrite<'_, R, S, T>,
    ) -> Result<Vec<T>> {
        let clients = self.closing(self.clients::<R>())?;
        self.closing(match values {
            Some(v) => check_slices(&clients, &[keys, v], lens),
            None => check_slices(&clients, &[keys], lens),
        })?;
        if self.shard_count() == 1 {
            let (stream, n) = (self.shards[0].stream(), lens[0]);
            let t = gpu_mut::<R, S, K, V>(&mut self.shards[0])?;
            return stream
                .executes(|| {
                    sync_device(&clients[0])?;
                    write(t, &keys[0], values.map(|v| &v[0]), n, false)
                })
                .map(|r| vec![r]);
        }
        let done = self.write_each_step(call, &clients, (keys, values), lens, write);
        self.closing(done)
    }

    /// [`ShardedTable::write_steps`] over several shards.
    fn write_each_step<R: HostTransfer, T: Send + Default>(
        &mut self,
        (call, align): (&str, usize),
        clients: &[ComputeClient<R>],
        (keys, values): (&[Handle], Option<&[Handle]>),
        lens: &[usize],
        write: &StepWrite<'_, R, S, T>,
    ) -> Result<Vec<T>> {
        let mut phases = DevicePhases::default();
        let mut lap = Lap::new();
        let mut trace = Trace::new("sharded");
        let ex = self.exchanger(clients)?;
        let steps: Steps =
            self.route_steps(clients, &ex, (keys, values), lens, align, &mut trace)?;
        phases.route_ms = lap.ms();
        phases.steps = steps.count();
        let words = |h| steps.recv_words(h);
        // Each buffer the steps move (keys, and the values of pairs) with its receive buffer on every shard.
        let sets = std::iter::once(&steps.keys)
            .chain(&steps.values)
            .map(|send| {
                Ok((
                    ex.bufs(send.clone())?,
                    ex.bufs(self.buffers(clients, words)?)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let moves = |s: usize| {
            sets.iter()
                .map(|(send, recv)| forward(&steps, s, send, recv))
                .collect::<Vec<_>>()
        };
        // Whether each shard was empty before the call: then no step's keys are in it when the step lands.
        let empty: Vec<bool> = self.shards.iter().map(|t| t.is_empty()).collect();
        trace.lap("receive buffers made");
        start_step(&ex, &moves(0), &mut phases)?;
        phases.exchange_ms += ex.wait()?;
        trace.lap("first step moved");
        let mut out = Vec::with_capacity(steps.count() * self.shards.len());
        for s in 0..steps.count() {
            // Step `s + 1` travels while the shards write step `s`.
            let next = if s + 1 < steps.count() {
                moves(s + 1)
            } else {
                Vec::new()
            };
            start_step(&ex, &next, &mut phases)?;
            trace.lap("next step queued");
            let results = super::shard_threads::run_each(&mut self.shards, |h, shard| {
                let n = steps.recv_len(h, s);
                if n == 0 {
                    return Ok(T::default());
                }
                let at = (steps.recv_at(h, s) * 4) as u64;
                let k = sets[0].1.handles[h].clone().offset_start(at);
                let v = sets
                    .get(1)
                    .map(|set| set.1.handles[h].clone().offset_start(at));
                let stream = shard.stream();
                let t = gpu_mut::<R, S, K, V>(shard)?;
                stream.executes(|| write(t, &k, v.as_ref(), n, empty[h]))
            });
            trace.lap("shards written");
            if !next.is_empty() {
                phases.exchange_ms += ex.wait()?;
            }
            trace.lap("next step waited");
            for r in results {
                out.push(r?);
            }
        }
        phases.steps_ms = lap.ms();
        trace.report(call, lens.iter().sum());
        *self.device_phases.lock().unwrap_or_else(|e| e.into_inner()) = phases;
        Ok(out)
    }
}
