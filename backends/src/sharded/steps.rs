//! A device-data call's slices routed into exchange steps: a key's step, like its shard, comes from its route
//! hash (the directory entry `e` of a key is shard `entries[e]` and step `e % steps`), so every step holds
//! disjoint keys of the batch and all copies of a key travel in one step: shards can insert step by step with no
//! pass looking for a step's keys among the earlier steps'. Each slice is laid out by (step, destination) in its
//! send buffer: step `s`'s region (starting on a multiple of [`STEP_ALIGN`] words) holds its keys for each
//! destination in turn, with a [`Plan`] per step; each shard's receive buffers hold every step's region likewise,
//! so one set of buffers made per call serves every step while the shards work on one step and the next one
//! travels (`sharded::device`).
//!
//! Routing runs on every slice's device at once: one count launch (a counter per step and destination), one read
//! of the counts (the plans), and one scatter launch (and one for the values of an insert), with the cursors of
//! the parts placed by the host where each step's region and span start.

use super::ShardedTable;
use super::config::STEP_ALIGN;
use super::exchange::Exchanger;
use super::plan::Plan;
use crate::device::layout::Packed;
use crate::device::route::{
    ByRoute, CUBE, TILE, carry, route_count_kernel, route_pad_kernel, route_scatter_kernel,
    route_values_kernel,
};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::trace::Trace;
use crate::runtime::transfer::{HostTransfer, sync_device};
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Key, Result, Value};

/// The most (step, destination) parts of a routing launch: a counter of each in shared memory.
const MAX_PARTS: usize = 1024;

/// The slices of a device-data call routed into steps. Plans cover every shard of the table; everything else is
/// indexed by the shards held here (`g` is shard `base + g`).
pub(super) struct Steps {
    /// Each step's plan.
    pub plans: Vec<Plan>,
    /// The shard index of the first shard held here.
    base: usize,
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

    /// Words shard `h` (held here) receives in step `s`.
    pub fn recv_len(&self, h: usize, s: usize) -> usize {
        self.plans[s].recv_len(self.base + h)
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

/// How many exchange steps a call of slices of `lens` keys takes with steps of `step` keys: enough for the longest
/// slice, at least one, and at most as many as the routing launches' counters allow.
fn step_count(lens: &[usize], step: usize, shards: usize) -> usize {
    let wanted = lens.iter().map(|&n| n.div_ceil(step)).max().unwrap_or(0);
    wanted.clamp(1, (MAX_PARTS / shards).max(1))
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
    /// Routes every slice held here into steps of about `self.step` keys on its device (after a wait for the
    /// caller's stream, which wrote it): counts per step and destination, one read of them (shared with the
    /// other ranks through `ex`, as the slices' lengths are first, so that every rank takes the same steps),
    /// then the scatter into each step's region of the send buffers (waited for, so the exchange may read them;
    /// every shard's stream is then idle, so buffers the call makes next hold no memory a queued kernel still
    /// uses, and the exchange may write them). With `align` above 1 every part is padded to a multiple of
    /// `align` words with copies of its last pair (`route_pad_kernel`), and the plans count the padded parts:
    /// only for calls that tolerate a repeated pair.
    pub(super) fn route_steps<R: HostTransfer>(
        &self,
        clients: &[ComputeClient<R>],
        ex: &Exchanger<'_, R>,
        (keys, values): (&[Handle], Option<&[Handle]>),
        lens: &[usize],
        align: usize,
        trace: &mut Trace,
    ) -> Result<Steps> {
        for c in clients {
            sync_device(c)?;
        }
        trace.lap("callers' streams waited");
        let (shards, base) = (self.shard_count(), self.base());
        let every_len: Vec<usize> = (ex.all_rows(
            lens.iter()
                .map(|&l| vec![l as u32, (l as u64 >> 32) as u32])
                .collect(),
        )?)
        .iter()
        .map(|w| w[0] as usize | (w[1] as usize) << 32)
        .collect();
        let steps = step_count(&every_len, self.step, shards);
        let width = steps * shards;
        let seed = self.route.seed;
        // Entry `e`: its shard, in the part of step `e % steps` (parts step-major).
        let entries: Vec<u32> = (self.route.entries.iter().enumerate())
            .map(|(e, &shard)| ((e % steps) * shards) as u32 + shard)
            .collect();
        let counted = super::shard_threads::run_each_ref(
            &self.shards,
            |g, shard| -> Result<(Handle, Vec<u32>)> {
                let (client, n) = (&clients[g], lens[g]);
                shard.stream().executes(|| {
                    let entries_h = client.create_from_slice(u32::as_bytes(&entries));
                    let counts = client.empty(width * 4);
                    fill_u32(client, &counts, width, 0);
                    if n > 0 {
                        let stand_in = client.empty(4);
                        // SAFETY: the kernel guards each position against the slice's length `n`; the mask is
                        // not read unmasked.
                        unsafe {
                            route_count_kernel::launch_unchecked::<Packed, ByRoute, R>(
                                client,
                                cube_count(n.div_ceil(TILE) * CUBE),
                                CubeDim::new_1d(CUBE_SIZE),
                                ArrayArg::from_raw_parts(keys[g].clone(), n),
                                ArrayArg::from_raw_parts(stand_in, 1),
                                ArrayArg::from_raw_parts(entries_h.clone(), entries.len()),
                                ArrayArg::from_raw_parts(counts.clone(), width),
                                seed,
                                super::route::ROUTE_BITS,
                                false,
                                width as u32,
                            )
                        }
                    }
                    let c = u32::from_bytes(&client.read_one_unchecked(counts)).to_vec();
                    Ok((entries_h, c))
                })
            },
        )
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        let (entries_hs, rows): (Vec<Handle>, Vec<Vec<u32>>) = counted.into_iter().unzip();
        let rows = ex.all_rows(rows)?;
        trace.lap("counted and read");
        let plans: Vec<Plan> = (0..steps)
            .map(|s| {
                Plan::new(
                    (0..shards)
                        .map(|g| {
                            rows[g][s * shards..(s + 1) * shards]
                                .iter()
                                .map(|&x| (x as usize).next_multiple_of(align))
                                .collect()
                        })
                        .collect(),
                )
            })
            .collect();
        let send_base: Vec<Vec<usize>> = (0..self.shards.len())
            .map(|g| bases(plans.iter().map(|p| p.send_len(base + g))))
            .collect();
        let recv_base: Vec<Vec<usize>> = (0..self.shards.len())
            .map(|h| bases(plans.iter().map(|p| p.recv_len(base + h))))
            .collect();
        let routed = super::shard_threads::run_each_ref(
            &self.shards,
            |g, shard| -> Result<(Handle, Handle, Option<Handle>)> {
                let (client, n, entries_h) = (&clients[g], lens[g], &entries_hs[g]);
                let words = *send_base[g].last().expect("bases end");
                shard.stream().executes(|| {
                    let starts: Vec<u32> = (plans.iter().enumerate())
                        .flat_map(|(s, plan)| {
                            let (at, from) = (send_base[g][s], base + g);
                            (0..shards).map(move |to| (at + plan.send_start(from, to)) as u32)
                        })
                        .collect();
                    let cursor = client.create_from_slice(u32::as_bytes(&starts));
                    let to = client.empty(n.max(1) * 4);
                    let send_keys = client.empty(words.max(1) * 4);
                    let send_values = values.map(|_| client.empty(words.max(1) * 4));
                    if n > 0 {
                        let stand_in = client.empty(4);
                        // SAFETY: a one-word stand-in for arrays the launch does not read or write.
                        let one = || unsafe { ArrayArg::from_raw_parts(stand_in.clone(), 1) };
                        // SAFETY: positions are guarded by `n`; routed positions lie in the parts' spans the
                        // counts laid out; mask, routed mask, ends and overflow are not used unmasked and
                        // unbounded.
                        unsafe {
                            route_scatter_kernel::launch_unchecked::<Packed, ByRoute, R>(
                                client,
                                cube_count(n.div_ceil(TILE) * CUBE),
                                CubeDim::new_1d(CUBE_SIZE),
                                ArrayArg::from_raw_parts(keys[g].clone(), n),
                                one(),
                                one(),
                                ArrayArg::from_raw_parts(entries_h.clone(), entries.len()),
                                ArrayArg::from_raw_parts(cursor.clone(), width),
                                ArrayArg::from_raw_parts(send_keys.clone(), words.max(1)),
                                one(),
                                one(),
                                ArrayArg::from_raw_parts(to.clone(), n),
                                one(),
                                one(),
                                seed,
                                super::route::ROUTE_BITS,
                                false,
                                false,
                                carry::POSITIONS,
                                width as u32,
                                false,
                            )
                        }
                        if let (Some(v), Some(sv)) = (values, &send_values) {
                            // SAFETY: guarded by `n`; `to` holds positions inside the send buffer.
                            unsafe {
                                route_values_kernel::launch_unchecked::<Packed, R>(
                                    client,
                                    cube_count(n),
                                    CubeDim::new_1d(CUBE_SIZE),
                                    ArrayArg::from_raw_parts(v[g].clone(), n),
                                    one(),
                                    ArrayArg::from_raw_parts(to.clone(), n),
                                    ArrayArg::from_raw_parts(sv.clone(), words.max(1)),
                                    false,
                                )
                            }
                        }
                        // The cursors now hold each part's end; parts start aligned, so the padding runs from
                        // there to the next multiple of `align`.
                        let padded = std::iter::once(&send_keys).chain(&send_values);
                        for buf in padded.filter(|_| align > 1) {
                            // SAFETY: each part's padding lies inside its padded span of the send buffer
                            // (`words` words), laid out by the padded plans.
                            unsafe {
                                route_pad_kernel::launch_unchecked::<R>(
                                    client,
                                    cube_count(width * align),
                                    CubeDim::new_1d(CUBE_SIZE),
                                    ArrayArg::from_raw_parts(buf.clone(), words.max(1)),
                                    ArrayArg::from_raw_parts(cursor.clone(), width),
                                    align as u32,
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
            base,
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
    fn step_counts() {
        assert_eq!(step_count(&[0, 0], 2048, 2), 1);
        assert_eq!(step_count(&[5000, 2048], 2048, 2), 3);
        assert_eq!(step_count(&[1 << 30], 2048, 4), 256);
        assert_eq!(step_count(&[1 << 30], 2048, 256), 4);
    }

    #[test]
    fn regions_start_aligned() {
        assert_eq!(
            bases([5, 0, 2048, 1].into_iter()),
            vec![0, 2048, 2048, 4096, 6144]
        );
        assert_eq!(bases(std::iter::empty()), vec![0]);
    }
}
