//! A device-data call's slices routed into exchange steps: step `s` of every slice is its keys
//! `s * step .. (s + 1) * step`, laid out by destination shard in a region of the slice's send buffer, with a
//! [`Plan`] of its own. Each shard's send buffers hold every step's region in step order (each region starting
//! on a multiple of [`STEP_ALIGN`] words), and so do its receive buffers, so one set of buffers made per call
//! serves every step while the shards work on one step and the next one travels (`sharded::device`).
//!
//! Routing runs on every slice's device at once: one count launch per step into per-step counters, one read of
//! all of them (the plans), then one scatter launch per step (and one for the values of an insert).

use super::ShardedTable;
use super::config::STEP_ALIGN;
use super::exchange::Plan;
use crate::device::layout::Packed;
use crate::device::route::{
    CUBE, TILE, route_count_kernel, route_scatter_kernel, route_values_kernel,
};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::trace::Trace;
use crate::runtime::transfer::{HostTransfer, sync_device};
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Key, Result, Value};

/// Per-step counters and cursors start on 256-byte boundaries (storage bindings at an offset must be aligned).
const COUNTER_ALIGN: usize = 64;

/// The slices of a device-data call routed into steps.
pub(super) struct Steps {
    /// Each step's plan (spans padded as asked).
    pub plans: Vec<Plan>,
    /// Keys of each slice per step.
    step: usize,
    /// Each slice's length.
    lens: Vec<usize>,
    /// Per shard: where each key of its slice went in its send buffers (a word index of the whole buffer).
    pub to: Vec<Handle>,
    /// Per shard: the keys laid out by destination, step regions in order.
    pub keys: Vec<Handle>,
    /// Per shard: the values likewise (inserts).
    pub values: Option<Vec<Handle>>,
    /// `send_base[g][s]`: the word where step `s`'s region of shard `g`'s send buffers starts (the last entry:
    /// the buffers' words).
    send_base: Vec<Vec<usize>>,
    /// `recv_base[h][s]`: likewise in shard `h`'s receive buffers.
    recv_base: Vec<Vec<usize>>,
}

impl Steps {
    /// How many steps.
    pub fn count(&self) -> usize {
        self.plans.len()
    }

    /// The first key and the number of keys of slice `g` in step `s`.
    pub fn part(&self, g: usize, s: usize) -> (usize, usize) {
        part_of(&self.lens, self.step, g, s)
    }

    /// Where step `s`'s region of shard `g`'s send buffers starts, in words.
    pub fn send_at(&self, g: usize, s: usize) -> usize {
        self.send_base[g][s]
    }

    /// Where step `s`'s region of shard `h`'s receive buffers starts, in words.
    pub fn recv_at(&self, h: usize, s: usize) -> usize {
        self.recv_base[h][s]
    }

    /// Words of shard `g`'s send buffers.
    pub fn send_words(&self, g: usize) -> usize {
        *self.send_base[g]
            .last()
            .expect("a base per step and the end")
    }

    /// Words of shard `h`'s receive buffers.
    pub fn recv_words(&self, h: usize) -> usize {
        *self.recv_base[h]
            .last()
            .expect("a base per step and the end")
    }
}

/// The first key and the number of keys of slice `g` (of `lens`) in step `s` of `step` keys.
fn part_of(lens: &[usize], step: usize, g: usize, s: usize) -> (usize, usize) {
    let first = (s * step).min(lens[g]);
    (first, lens[g].min(first + step) - first)
}

/// The start of each region of the given lengths, each on a multiple of [`STEP_ALIGN`] words, and the end.
fn bases(lens: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut at = 0;
    let mut out = vec![0];
    for l in lens {
        at = (at + l).next_multiple_of(STEP_ALIGN);
        out.push(at);
    }
    out
}

impl<S: SchemeInfo, K: Key, V: Value> ShardedTable<S, K, V> {
    /// Routes every slice into steps of `self.step` keys on its device (after a wait for the caller's stream,
    /// which wrote it), with spans padded to `pad` words: counts per step and destination, one read of them,
    /// then the scatter of each step into its region of the send buffers (waited for, so the exchange may read
    /// them).
    pub(super) fn route_steps<R: HostTransfer>(
        &self,
        clients: &[ComputeClient<R>],
        keys: &[Handle],
        values: Option<&[Handle]>,
        lens: &[usize],
        pad: usize,
        trace: &mut Trace,
    ) -> Result<Steps> {
        for c in clients {
            sync_device(c)?;
        }
        trace.lap("callers' streams waited");
        let shards = self.shards.len();
        let step = self.step;
        let steps = lens
            .iter()
            .map(|&n| n.div_ceil(step))
            .max()
            .unwrap_or(0)
            .max(1);
        let stride = shards.next_multiple_of(COUNTER_ALIGN);
        let (seed, width) = (self.route.seed, shards as u32);
        let entries_len = self.route.entries.len();
        let part = |g: usize, s: usize| part_of(lens, step, g, s);
        let counted = super::run_each_ref(&self.shards, |g, shard| -> Result<(Handle, Vec<u32>)> {
            let client = &clients[g];
            shard.stream().executes(|| {
                let entries = client.create_from_slice(u32::as_bytes(&self.route.entries));
                let counts = client.empty(steps * stride * 4);
                fill_u32(client, &counts, steps * stride, 0);
                let stand_in = client.empty(4);
                for s in 0..steps {
                    let (first, m) = part(g, s);
                    if m == 0 {
                        continue;
                    }
                    // SAFETY: the kernel guards each position against the part's length `m`; the mask is
                    // not read unmasked.
                    unsafe {
                        route_count_kernel::launch_unchecked::<Packed, R>(
                            client,
                            cube_count(m.div_ceil(TILE) * CUBE),
                            CubeDim::new_1d(CUBE_SIZE),
                            ArrayArg::from_raw_parts(
                                keys[g].clone().offset_start((first * 4) as u64),
                                m,
                            ),
                            ArrayArg::from_raw_parts(stand_in.clone(), 1),
                            ArrayArg::from_raw_parts(entries.clone(), entries_len),
                            ArrayArg::from_raw_parts(
                                counts.clone().offset_start((s * stride * 4) as u64),
                                shards,
                            ),
                            seed,
                            super::route::ROUTE_BITS,
                            false,
                            width,
                        )
                    }
                }
                let c = u32::from_bytes(&client.read_one_unchecked(counts)).to_vec();
                Ok((entries, c))
            })
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        trace.lap("counted and read");
        let plans: Vec<Plan> = (0..steps)
            .map(|s| {
                Plan::padded(
                    (0..shards)
                        .map(|g| {
                            counted[g].1[s * stride..s * stride + shards]
                                .iter()
                                .map(|&x| x as usize)
                                .collect()
                        })
                        .collect(),
                    pad,
                )
            })
            .collect();
        let send_base: Vec<Vec<usize>> = (0..shards)
            .map(|g| bases(plans.iter().map(|p| p.send_len(g))))
            .collect();
        let recv_base: Vec<Vec<usize>> = (0..shards)
            .map(|h| bases(plans.iter().map(|p| p.recv_len(h))))
            .collect();
        let routed = super::run_each_ref(
            &self.shards,
            |g, shard| -> Result<(Handle, Handle, Option<Handle>)> {
                let (client, n, entries) = (&clients[g], lens[g], &counted[g].0);
                let words = *send_base[g].last().expect("bases end");
                shard.stream().executes(|| {
                    let mut starts = vec![0u32; steps * stride];
                    for (s, plan) in plans.iter().enumerate() {
                        for to in 0..shards {
                            starts[s * stride + to] =
                                (send_base[g][s] + plan.send_start(g, to)) as u32;
                        }
                    }
                    let cursor = client.create_from_slice(u32::as_bytes(&starts));
                    let to = client.empty(n.max(1) * 4);
                    let send_keys = client.empty(words.max(1) * 4);
                    let send_values = values.map(|_| client.empty(words.max(1) * 4));
                    let stand_in = client.empty(4);
                    // SAFETY: a one-word stand-in for arrays the launch does not read or write.
                    let one = || unsafe { ArrayArg::from_raw_parts(stand_in.clone(), 1) };
                    for s in 0..steps {
                        let (first, m) = part(g, s);
                        if m == 0 {
                            continue;
                        }
                        let at = (first * 4) as u64;
                        // SAFETY: positions are guarded by `m`; routed positions lie in the step's region, whose
                        // spans the counts laid out; mask, routed mask, ends and overflow are not used unmasked
                        // and unbounded.
                        unsafe {
                            route_scatter_kernel::launch_unchecked::<Packed, R>(
                                client,
                                cube_count(m.div_ceil(TILE) * CUBE),
                                CubeDim::new_1d(CUBE_SIZE),
                                ArrayArg::from_raw_parts(keys[g].clone().offset_start(at), m),
                                one(),
                                ArrayArg::from_raw_parts(entries.clone(), entries_len),
                                ArrayArg::from_raw_parts(
                                    cursor.clone().offset_start((s * stride * 4) as u64),
                                    shards,
                                ),
                                ArrayArg::from_raw_parts(send_keys.clone(), words.max(1)),
                                one(),
                                ArrayArg::from_raw_parts(to.clone().offset_start(at), m),
                                one(),
                                one(),
                                seed,
                                super::route::ROUTE_BITS,
                                false,
                                false,
                                width,
                            )
                        }
                        if let (Some(v), Some(sv)) = (values, &send_values) {
                            // SAFETY: guarded by `m`; `to` holds positions inside the send buffer.
                            unsafe {
                                route_values_kernel::launch_unchecked::<Packed, R>(
                                    client,
                                    cube_count(m),
                                    CubeDim::new_1d(CUBE_SIZE),
                                    ArrayArg::from_raw_parts(v[g].clone().offset_start(at), m),
                                    one(),
                                    ArrayArg::from_raw_parts(to.clone().offset_start(at), m),
                                    ArrayArg::from_raw_parts(sv.clone(), words.max(1)),
                                    false,
                                )
                            }
                        }
                    }
                    sync_device(client)?;
                    Ok((to, send_keys, send_values))
                })
            },
        )
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        trace.lap("scattered");
        let mut to = Vec::with_capacity(shards);
        let mut keys_out = Vec::with_capacity(shards);
        let mut values_out = Vec::with_capacity(shards);
        for (t, k, v) in routed {
            to.push(t);
            keys_out.push(k);
            values_out.extend(v);
        }
        Ok(Steps {
            plans,
            step,
            lens: lens.to_vec(),
            to,
            keys: keys_out,
            values: values.map(|_| values_out),
            send_base,
            recv_base,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_start_aligned() {
        assert_eq!(
            bases([5, 0, 2048, 1].into_iter()),
            vec![0, 2048, 2048, 4096, 6144]
        );
        assert_eq!(bases(std::iter::empty()), vec![0]);
    }
}
