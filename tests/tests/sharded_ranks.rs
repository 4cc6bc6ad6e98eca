//! `ShardedTable` over ranks (issue 31): one process per GPU, joined through a file or a TCP rendezvous, against a
//! `HashMap` oracle that every rank computes whole (each rank holds its own slices and its own shard). The test
//! process starts one child process per GPU (this test binary again, told its rank by `HASHTILE_TEST_RANK`) and
//! checks that every child passed. Children check device slices with keys repeated within and across ranks (an
//! empty slice, every key in one shard), host-data calls through the devices, counting and erases, each rank's shard holding exactly the oracle's
//! pairs of its keys; and failures: a rank that dies, or fails a call, yields `Error::PeerFailed` on the other
//! within the time-out, and the survivor's shard keeps its pairs. Needs CUDA with two GPUs and NCCL; elsewhere
//! the bad configurations are checked and the rest is reported skipped.
#![cfg(feature = "cuda")]

use hashtile::cubecl::cuda::CudaRuntime;
use hashtile::cubecl::prelude::*;
use hashtile::reduce::Add;
use hashtile::{
    Backend, BackendChoice, Bcht, DoubleHashing, Error, Ranks, Rendezvous, SchemeInfo,
    ShardedConfig, ShardedTable, TableConfig,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set in a child: `rank,world,scenario,rendezvous` (`file:PATH` or `tcp:ADDR`).
const CHILD: &str = "HASHTILE_TEST_RANK";

fn config(backend: Backend) -> ShardedConfig {
    ShardedConfig::new(
        TableConfig::with_capacity(1 << 16)
            .batch_keys(1 << 11)
            .backend(BackendChoice::Exactly(backend)),
    )
    .exchange_step(4096)
}

/// Spread keys from an index.
fn key(i: u64) -> u32 {
    hashtile::hash::fmix32(i as u32 ^ 0x7a3) >> 1
}

#[test]
fn ranks_need_cuda_and_a_place_among_them() {
    let rv = Rendezvous::Tcp("127.0.0.1:9".parse().unwrap());
    for (backend, ranks) in [
        (Backend::Cpu, Ranks::new(0, 2, rv.clone())),
        (Backend::Cuda, Ranks::new(2, 2, rv.clone())),
        (Backend::Cuda, Ranks::new(0, 2, rv).timeout(Duration::ZERO)),
    ] {
        let made = ShardedTable::<Bcht, u32, u32>::new(config(backend).ranks(ranks));
        assert!(
            matches!(
                made,
                Err(Error::InvalidConfig(_) | Error::BackendUnavailable { .. })
            ),
            "{backend}: {:?}",
            made.err()
        );
    }
}

/// The rank's side: which scenario, with which rendezvous.
struct Child {
    rank: usize,
    world: usize,
    scenario: String,
    rendezvous: Rendezvous,
}

fn child() -> Option<Child> {
    let v = std::env::var(CHILD).ok()?;
    let mut it = v.splitn(4, ',');
    let rank = it.next()?.parse().ok()?;
    let world = it.next()?.parse().ok()?;
    let scenario = it.next()?.to_string();
    let rv = it.next()?;
    let rendezvous = match rv.split_once(':') {
        Some(("file", p)) => Rendezvous::File(p.into()),
        Some(("tcp", a)) => Rendezvous::Tcp(a.parse().ok()?),
        _ => return None,
    };
    Some(Child {
        rank,
        world,
        scenario,
        rendezvous,
    })
}

/// Runs `scenario` in `world` child processes through rendezvous `rv` (`file:` or `tcp:`, `{}` replaced by a
/// fresh path or port); returns each child's exit status and output.
fn run_children(test: &str, world: usize, scenario: &str, rv: &str) -> Vec<(bool, String)> {
    let rv = if rv == "file" {
        let p =
            std::env::temp_dir().join(format!("hashtile-ranks-{}-{scenario}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        format!("file:{}", p.display())
    } else {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        format!("tcp:127.0.0.1:{port}")
    };
    let exe = std::env::current_exe().unwrap();
    let mut kids: Vec<_> = (0..world)
        .map(|rank| {
            Command::new(&exe)
                .args([test, "--exact", "--nocapture", "--test-threads", "1"])
                .env(CHILD, format!("{rank},{world},{scenario},{rv}"))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let t0 = Instant::now();
    let mut done: Vec<Option<bool>> = vec![None; world];
    while done.iter().any(Option::is_none) {
        for (r, kid) in kids.iter_mut().enumerate() {
            if done[r].is_none()
                && let Some(status) = kid.try_wait().unwrap()
            {
                done[r] = Some(status.success());
            }
        }
        if t0.elapsed() > Duration::from_secs(240) {
            for (r, kid) in kids.iter_mut().enumerate() {
                if done[r].is_none() {
                    let _ = kid.kill();
                    done[r] = Some(false);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kids.into_iter()
        .zip(done)
        .map(|(kid, ok)| {
            let out = kid.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            (ok.unwrap_or(false), text)
        })
        .collect()
}

/// `true` when the machine can run ranks (CUDA with two GPUs); else says so on stderr.
fn can_run_ranks() -> bool {
    let gpus = if hashtile::is_available(Backend::Cuda) {
        hashtile::device_count(Backend::Cuda)
    } else {
        0
    };
    if gpus >= 2 {
        return true;
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIPPED: tables over ranks need CUDA with two GPUs ({gpus} here); nothing was tested"
    );
    false
}

/// The rank count of the children: every GPU, at most 4.
fn world() -> usize {
    hashtile::device_count(Backend::Cuda).min(4)
}

/// Each rank's slices of every round, the same on every rank (seeded), keys repeated within and across ranks.
fn slices(round: u32, world: usize, len: usize, universe: u64) -> Vec<Vec<u32>> {
    let mut rng = StdRng::seed_from_u64(0x7a00 + round as u64);
    (0..world)
        .map(|r| {
            let n = if round == 1 && r == world - 1 {
                0
            } else {
                len + 333 * r
            };
            (0..n).map(|_| key(rng.random_range(0..universe))).collect()
        })
        .collect()
}

/// This rank's shard holds exactly the oracle's pairs of its keys.
fn shard_matches<S: SchemeInfo>(t: &ShardedTable<S, u32, u32>, o: &HashMap<u32, u32>, what: &str) {
    let me = t.local_shards().start;
    let mut want: Vec<(u32, u32)> = o
        .iter()
        .filter(|(k, _)| t.shard_of(**k) == me)
        .map(|(k, v)| (*k, *v))
        .collect();
    want.sort();
    let mut got = t.shard(me).pairs().unwrap();
    got.sort();
    assert_eq!(t.len(), want.len(), "{what}: len of shard {me}");
    assert_eq!(got, want, "{what}: pairs of shard {me}");
}

/// A rank's check of its find answers (`out`, `found` on its device) against the oracle.
fn check_found(
    client: &ComputeClient<CudaRuntime>,
    q: &[u32],
    (out, found): (
        &hashtile::cubecl::server::Handle,
        &hashtile::cubecl::server::Handle,
    ),
    o: &HashMap<u32, u32>,
    what: &str,
) {
    let got = u32::from_bytes(&client.read_one(out.clone()).unwrap()).to_vec();
    let has = u32::from_bytes(&client.read_one(found.clone()).unwrap()).to_vec();
    for (i, k) in q.iter().enumerate() {
        let w = o.get(k).copied();
        assert_eq!(has[i] == 1, w.is_some(), "{what}: found {k}");
        assert_eq!(got[i], w.unwrap_or(u32::MAX), "{what}: value of {k}");
    }
}

/// One rank of the oracle scenario: device inserts and finds on BCHT; host calls, counting and erases on double
/// hashing.
fn oracle_rank(c: &Child) {
    let what = format!("rank {} of {}", c.rank, c.world);
    let ranks = Ranks::new(c.rank, c.world, c.rendezvous.clone()).timeout(Duration::from_secs(60));
    let mut t: ShardedTable<Bcht, u32, u32> =
        ShardedTable::new(config(Backend::Cuda).ranks(ranks.clone())).unwrap();
    assert_eq!(t.shard_count(), c.world);
    assert_eq!(t.local_shards(), c.rank..c.rank + 1);
    assert_eq!(t.transport(), hashtile::Transport::Nccl);
    let client = t.client::<CudaRuntime>(c.rank).unwrap();
    let up = |v: &[u32]| client.create_from_slice(u32::as_bytes(v));
    let mut o: HashMap<u32, u32> = HashMap::new();
    for round in 0..3u32 {
        let all = slices(round, c.world, 9000, 30_000);
        let value = |k: u32| k.rotate_left(5) ^ round;
        let mine = &all[c.rank];
        let vals: Vec<u32> = mine.iter().map(|&k| value(k)).collect();
        t.insert_device::<CudaRuntime>(&[up(mine)], &[up(&vals)], &[mine.len()])
            .unwrap();
        for &k in all.iter().flatten() {
            o.insert(k, value(k));
        }
        shard_matches(&t, &o, &format!("{what}: insert_device round {round}"));
        let q: Vec<u32> = (0..7000 + 100 * c.rank as u64)
            .map(|i| key((i * 7 + round as u64) % 45_000))
            .collect();
        let (out, found) = (client.empty(q.len() * 4), client.empty(q.len() * 4));
        t.find_device::<CudaRuntime>(
            &[up(&q)],
            &[q.len()],
            std::slice::from_ref(&out),
            std::slice::from_ref(&found),
        )
        .unwrap();
        check_found(
            &client,
            &q,
            (&out, &found),
            &o,
            &format!("{what}: round {round}"),
        );
        // Host finds of the same keys (and the sentinel, absent).
        let mut hq = q.clone();
        hq.push(u32::MAX);
        let got = t.find(&hq).unwrap();
        let has = t.contains(&hq).unwrap();
        for (i, k) in hq.iter().enumerate() {
            assert_eq!(got[i], o.get(k).copied(), "{what}: host find {k}");
            assert_eq!(has[i], o.contains_key(k), "{what}: contains {k}");
        }
    }
    // Adversarial: every rank's keys in shard 0 (the other shards receive nothing), some repeated across ranks.
    let one: Vec<Vec<u32>> = (0..c.world)
        .map(|r| {
            (0..12_000u64)
                .map(|i| key(60_000 + i * 3 + r as u64 * 5))
                .filter(|&k| t.shard_of(k) == 0)
                .collect()
        })
        .collect();
    let mine = &one[c.rank];
    let vals: Vec<u32> = mine.iter().map(|&k| k ^ 0x77).collect();
    t.insert_device::<CudaRuntime>(&[up(mine)], &[up(&vals)], &[mine.len()])
        .unwrap();
    for &k in one.iter().flatten() {
        o.insert(k, k ^ 0x77);
    }
    shard_matches(&t, &o, &format!("{what}: every key in shard 0"));
    let (out, found) = (client.empty(mine.len() * 4), client.empty(mine.len() * 4));
    t.find_device::<CudaRuntime>(
        &[up(mine)],
        &[mine.len()],
        std::slice::from_ref(&out),
        std::slice::from_ref(&found),
    )
    .unwrap();
    check_found(
        &client,
        mine,
        (&out, &found),
        &o,
        &format!("{what}: shard 0"),
    );
    assert!(matches!(
        t.client::<CudaRuntime>((c.rank + 1) % c.world),
        Err(Error::InvalidConfig(_))
    ));
    drop(t);

    // Host data, counting and erases on a stable scheme (a second communicator: its own rendezvous).
    let ranks = Ranks {
        rendezvous: match &c.rendezvous {
            Rendezvous::File(p) => Rendezvous::File(p.with_extension("second")),
            Rendezvous::Tcp(a) => Rendezvous::Tcp(std::net::SocketAddr::new(a.ip(), a.port() + 1)),
        },
        ..ranks
    };
    let mut t: ShardedTable<DoubleHashing, u32, u32> =
        ShardedTable::new(config(Backend::Cuda).ranks(ranks)).unwrap();
    let mut o: HashMap<u32, u32> = HashMap::new();
    for round in 0..3u32 {
        let all = slices(10 + round, c.world, 6000, 8000);
        let value = |k: u32| (k % 5) + 1;
        let mine = &all[c.rank];
        let vals: Vec<u32> = mine.iter().map(|&k| value(k)).collect();
        if round == 0 {
            t.insert(mine, &vals).unwrap();
            for &k in all.iter().flatten() {
                o.insert(k, value(k));
            }
        } else {
            t.insert_or_apply::<Add>(mine, &vals).unwrap();
            for &k in all.iter().flatten() {
                *o.entry(k).or_insert(0) += value(k);
            }
        }
        shard_matches(&t, &o, &format!("{what}: counts round {round}"));
        let gone: Vec<Vec<u32>> = slices(20 + round, c.world, 800, 10_000);
        let erased = t.erase(&gone[c.rank]).unwrap();
        // Over ranks, each rank counts the pairs its own shard lost (to any rank's keys).
        let mut expected = 0;
        for k in gone.iter().flatten() {
            let mine = t.shard_of(*k) == c.rank;
            expected += usize::from(o.remove(k).is_some() && mine);
        }
        assert_eq!(erased, expected, "{what}: erased from shard {}", c.rank);
        shard_matches(&t, &o, &format!("{what}: erases round {round}"));
        let q: Vec<u32> = (0..5000).map(|i| key(i % 12_000)).collect();
        let mut into = vec![0u32; q.len()];
        t.find_into(&q, &mut into).unwrap();
        for (i, k) in q.iter().enumerate() {
            assert_eq!(
                into[i],
                o.get(k).copied().unwrap_or(u32::MAX),
                "{what}: find_into {k}"
            );
        }
    }
    println!("RANK {} PASSED", c.rank);
}

/// One rank of a failure scenario: both ranks insert a slice; then rank 1 dies (`killed`) or fails its next call
/// (`errs`: slices for the wrong number of shards), and rank 0's next call must be `PeerFailed` within the
/// time-out while its shard keeps the first insert's pairs.
fn failing_rank(c: &Child) {
    let limit = Duration::from_secs(5);
    let ranks = Ranks::new(c.rank, c.world, c.rendezvous.clone()).timeout(limit);
    let mut t: ShardedTable<Bcht, u32, u32> =
        ShardedTable::new(config(Backend::Cuda).ranks(ranks)).unwrap();
    let client = t.client::<CudaRuntime>(c.rank).unwrap();
    let up = |v: &[u32]| client.create_from_slice(u32::as_bytes(v));
    let all = slices(0, c.world, 5000, 20_000);
    let mut o = HashMap::new();
    for &k in all.iter().flatten() {
        o.insert(k, !k);
    }
    let mine = &all[c.rank];
    let vals: Vec<u32> = mine.iter().map(|&k| !k).collect();
    t.insert_device::<CudaRuntime>(&[up(mine)], &[up(&vals)], &[mine.len()])
        .unwrap();
    shard_matches(&t, &o, "before the failure");
    if c.rank == 1 {
        if c.scenario == "killed" {
            std::process::abort();
        }
        let e = t.insert_device::<CudaRuntime>(&[up(mine)], &[up(&vals)], &[]);
        assert!(matches!(e, Err(Error::LengthMismatch { .. })), "{e:?}");
        println!("RANK 1 FAILED ITS CALL AS MEANT");
        return;
    }
    let t0 = Instant::now();
    let e = t.insert_device::<CudaRuntime>(&[up(mine)], &[up(&vals)], &[mine.len()]);
    let waited = t0.elapsed();
    assert!(matches!(e, Err(Error::PeerFailed { .. })), "{e:?}");
    assert!(waited < limit * 4, "PeerFailed after {waited:?}");
    // Later calls across ranks fail at once; the shard still answers for itself.
    let t1 = Instant::now();
    let again = t.find(&mine[..10]);
    assert!(matches!(again, Err(Error::PeerFailed { .. })), "{again:?}");
    assert!(t1.elapsed() < Duration::from_secs(1));
    shard_matches(&t, &o, "after the failure");
    println!("RANK 0 SAW {e:?} AFTER {waited:?}");
}

/// The parent's check of children that all pass.
fn all_pass(results: &[(bool, String)], what: &str) {
    for (r, (ok, out)) in results.iter().enumerate() {
        assert!(*ok, "{what}: rank {r} failed:\n{out}");
    }
}

#[test]
fn ranks_match_the_oracle() {
    if let Some(c) = child() {
        return oracle_rank(&c);
    }
    if !can_run_ranks() {
        return;
    }
    for rv in ["file", "tcp"] {
        let r = run_children("ranks_match_the_oracle", world(), "oracle", rv);
        all_pass(&r, &format!("oracle over {rv}"));
    }
}

#[test]
fn a_failed_rank_is_a_typed_error_on_the_others() {
    if let Some(c) = child() {
        return failing_rank(&c);
    }
    if !can_run_ranks() {
        return;
    }
    for scenario in ["killed", "errs"] {
        let r = run_children(
            "a_failed_rank_is_a_typed_error_on_the_others",
            2,
            scenario,
            "tcp",
        );
        assert!(r[0].0, "{scenario}: rank 0 failed:\n{}", r[0].1);
        assert!(
            r[0].1.contains("RANK 0 SAW Err(PeerFailed"),
            "{scenario}:\n{}",
            r[0].1
        );
        if scenario == "errs" {
            assert!(r[1].0, "{scenario}: rank 1:\n{}", r[1].1);
        }
    }
}
