//! The one-process-per-GPU rows of `hashtile-bench sharded` (`--ranks`, a leaf under the mode): for each shard
//! count of two or more, the program runs again once per GPU as rank `r` of `g` (the hidden `--rank-of
//! r,g,ADDR`, meeting by TCP at `ADDR`), each rank holding its own slice of `2^log2-keys` keys, and prints its
//! timings; the parent turns the slowest rank's time of each call into the call's rate. Calls: `insert_device`
//! and `find_device` of the rank's device slice, `insert` and `find_into` of its host slice. Before each timed
//! call the ranks meet in a find of no keys, so that they start together. Every rank checks its answers.

use crate::common::median;
use crate::sharded_device::value_of;
use hashtile::cubecl::prelude::*;
use hashtile::gpu::transfer::HostTransfer;
use hashtile::{
    Backend, BackendChoice, Ranks, Rendezvous, SchemeInfo, ShardedConfig, ShardedTable, TableConfig,
};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One call's result on one rank: its median time and whether its answers were right.
const ROW: &str = "RANKROW";

/// A call measured over ranks: `(input, call, rate in M keys/s over all ranks, correct)`.
pub type RankRow = (&'static str, &'static str, f64, bool);

/// Runs `g` ranks of this program (its own arguments and `--rank-of`), waits for them and returns each call's
/// rate (from the slowest rank's median) and correctness.
pub fn rows(g: usize, per: usize) -> Result<Vec<RankRow>, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("a port for the ranks: {e}"))?
        .port();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let kids = (0..g)
        .map(|r| {
            Command::new(&exe)
                .args(&args)
                .arg("--rank-of")
                .arg(format!("{r},{g},127.0.0.1:{port}"))
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| format!("rank {r}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut per_rank = Vec::new();
    for (r, kid) in kids.into_iter().enumerate() {
        let out = kid
            .wait_with_output()
            .map_err(|e| format!("rank {r}: {e}"))?;
        if !out.status.success() {
            return Err(format!("rank {r} of {g} failed ({})", out.status));
        }
        per_rank.push(String::from_utf8_lossy(&out.stdout).to_string());
    }
    let calls = [
        ("device", "insert_device"),
        ("device", "find_device"),
        ("host", "insert"),
        ("host", "find_into"),
    ];
    Ok(calls
        .iter()
        .map(|&(input, call)| {
            let (mut slowest, mut ok) = (0f64, true);
            for text in &per_rank {
                let line = text.lines().find(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    w.len() == 5 && w[0] == ROW && w[1] == input && w[2] == call
                });
                match line.map(|l| l.split_whitespace().collect::<Vec<_>>()) {
                    Some(w) => {
                        slowest = slowest.max(w[3].parse().unwrap_or(f64::INFINITY));
                        ok &= w[4] == "1";
                    }
                    None => ok = false,
                }
            }
            (input, call, (g * per) as f64 / slowest / 1e6, ok)
        })
        .collect())
}

/// One rank's side: `spec` is `r,g,ADDR`; `keys` holds at least `g * per` distinct keys (the same on every
/// rank), of which the rank's slice is the `r`-th `per`. Prints a [`ROW`] line per call.
pub fn rank<S: SchemeInfo>(
    spec: &str,
    per: usize,
    load: f64,
    runs: usize,
    keys: &[u32],
) -> Result<(), String> {
    let parts: Vec<&str> = spec.splitn(3, ',').collect();
    let (r, g, addr) = match parts[..] {
        [r, g, a] => (
            r.parse::<usize>().map_err(|e| e.to_string())?,
            g.parse::<usize>().map_err(|e| e.to_string())?,
            a.parse().map_err(|e| format!("{a}: {e}"))?,
        ),
        _ => return Err(format!("--rank-of {spec}: RANK,WORLD,ADDR")),
    };
    let table = TableConfig::for_keys(per * g, load).backend(BackendChoice::Exactly(Backend::Cuda));
    let ranks = Ranks::new(r, g, Rendezvous::Tcp(addr)).timeout(Duration::from_secs(120));
    let mut t: ShardedTable<S, u32, u32> =
        ShardedTable::new(ShardedConfig::new(table).ranks(ranks)).map_err(|e| e.to_string())?;
    t.warm_up().map_err(|e| e.to_string())?;
    rank_calls::<S, hashtile::cubecl::cuda::CudaRuntime>(
        &mut t,
        &keys[r * per..(r + 1) * per],
        runs,
    )
    .map_err(|e| format!("rank {r}: {e}"))
}

/// Times the rank's calls (`runs` timed after one untimed) and prints their median times.
fn rank_calls<S: SchemeInfo, R: HostTransfer>(
    t: &mut ShardedTable<S, u32, u32>,
    mine: &[u32],
    runs: usize,
) -> hashtile::Result<()> {
    let me = t.local_shards().start;
    let client = t.client::<R>(me)?;
    let n = mine.len();
    let values: Vec<u32> = mine.iter().map(|&k| value_of(k)).collect();
    let kh = client.create_from_slice(u32::as_bytes(mine));
    let vh = client.create_from_slice(u32::as_bytes(&values));
    let (out, found) = (client.empty(n * 4), client.empty(n * 4));
    let none = client.empty(4);
    // The ranks meet: a find of no keys is a collective call.
    let meet = |t: &ShardedTable<S, u32, u32>| {
        t.find_device::<R>(
            std::slice::from_ref(&none),
            &[0],
            std::slice::from_ref(&none),
            std::slice::from_ref(&none),
        )
    };
    let read = |h: &hashtile::cubecl::server::Handle| -> hashtile::Result<Vec<u32>> {
        Ok(u32::from_bytes(
            &client
                .read_one(h.clone())
                .map_err(|e| hashtile::Error::Device(format!("{e:?}")))?,
        )
        .to_vec())
    };
    let report = |input: &str, call: &str, secs: &mut Vec<f64>, ok: bool| {
        println!("{ROW} {input} {call} {:.9} {}", median(secs), u8::from(ok));
    };
    let mut secs = Vec::new();
    for run in 0..=runs {
        t.clear()?;
        meet(t)?;
        let t0 = Instant::now();
        t.insert_device::<R>(std::slice::from_ref(&kh), std::slice::from_ref(&vh), &[n])?;
        if run > 0 {
            secs.push(t0.elapsed().as_secs_f64());
        }
    }
    report("device", "insert_device", &mut secs, true);
    let mut secs = Vec::new();
    for run in 0..=runs {
        meet(t)?;
        let t0 = Instant::now();
        t.find_device::<R>(
            std::slice::from_ref(&kh),
            &[n],
            std::slice::from_ref(&out),
            std::slice::from_ref(&found),
        )?;
        if run > 0 {
            secs.push(t0.elapsed().as_secs_f64());
        }
    }
    let ok = read(&out)? == values && read(&found)?.iter().all(|&f| f == 1);
    report("device", "find_device", &mut secs, ok);
    let mut secs = Vec::new();
    for run in 0..=runs {
        t.clear()?;
        meet(t)?;
        let t0 = Instant::now();
        t.insert(mine, &values)?;
        if run > 0 {
            secs.push(t0.elapsed().as_secs_f64());
        }
    }
    report("host", "insert", &mut secs, true);
    let mut secs = Vec::new();
    let mut got = vec![0u32; n];
    for run in 0..=runs {
        meet(t)?;
        let t0 = Instant::now();
        t.find_into(mine, &mut got)?;
        if run > 0 {
            secs.push(t0.elapsed().as_secs_f64());
        }
    }
    report("host", "find_into", &mut secs, got == values);
    Ok(())
}
