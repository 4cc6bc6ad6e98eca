//! The kernels of a sharded table's device-data calls, on each source device's slice of a batch of 32-bit
//! words: [`route_kernel()`] names each key's shard and its place among the slice's keys of that shard,
//! [`scatter_kernel()`] lays the slice out by destination shard (the send buffer of the exchange) and records
//! where each key went, and [`gather_kernel()`] brings answers that came back in send-buffer order into the
//! caller's order. Launch code is in `sharded::device`.

use cubecl::prelude::*;
use hashtile_core::hash::shard_of;

/// `shard[i]` = the shard of `keys[i]`, `place[i]` = how many of the slice's keys of that shard took a place
/// before it (an atomic count per shard, so places within a shard follow no order), and `counts[s]` = the
/// slice's keys of shard `s` (zeroed before the launch).
#[cube(launch_unchecked)]
pub fn route_kernel(
    keys: &Array<u32>,
    shard: &mut Array<u32>,
    place: &mut Array<u32>,
    counts: &Array<Atomic<u32>>,
    seed: u64,
    shards: u32,
    n: u32,
) {
    let i = ABSOLUTE_POS;
    if i < n as usize {
        let s = shard_of(keys[i] as u64, seed, shards);
        shard[i] = s;
        place[i] = counts[s as usize].fetch_add(1u32);
    }
}

/// `to[i]` = `starts[shard[i]] + place[i]` (the key's index in the send buffer, where `starts` holds each
/// shard's first index), and the key (and its value, with `WITH_VALUES`) copied there.
#[cube(launch_unchecked)]
pub fn scatter_kernel(
    keys: &Array<u32>,
    values: &Array<u32>,
    shard: &Array<u32>,
    place: &Array<u32>,
    starts: &Array<u32>,
    to: &mut Array<u32>,
    send_keys: &mut Array<u32>,
    send_values: &mut Array<u32>,
    n: u32,
    #[comptime] with_values: bool,
) {
    let i = ABSOLUTE_POS;
    if i < n as usize {
        let at = starts[shard[i] as usize] + place[i];
        to[i] = at;
        send_keys[at as usize] = keys[i];
        if comptime!(with_values) {
            send_values[at as usize] = values[i];
        }
    }
}

/// `out[i] = back[to[i]]` and `found[i] = back_found[to[i]]`: the answers of the slice's keys, which came
/// back in send-buffer order, in the caller's order.
#[cube(launch_unchecked)]
pub fn gather_kernel(
    back: &Array<u32>,
    back_found: &Array<u32>,
    to: &Array<u32>,
    out: &mut Array<u32>,
    found: &mut Array<u32>,
    n: u32,
) {
    let i = ABSOLUTE_POS;
    if i < n as usize {
        let at = to[i] as usize;
        out[i] = back[at];
        found[i] = back_found[at];
    }
}
