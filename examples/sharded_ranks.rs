//! One process per GPU: a sharded table held by several processes (ranks), each holding one shard on its GPU.
//! Start one process per GPU, on one host or several (NCCL carries the exchange over NVLink, PCIe, InfiniBand or
//! sockets; nothing here changes):
//!
//! ```sh
//! cargo run --release --example sharded_ranks -- 0 2 127.0.0.1:29500 &
//! cargo run --release --example sharded_ranks -- 1 2 127.0.0.1:29500
//! ```
//!
//! Arguments: this process's rank, the number of ranks, and the TCP address rank 0 listens on (the rendezvous
//! through which the ranks meet; `Rendezvous::File` takes a path on a shared file system instead). Every rank
//! inserts its own keys, then finds its keys and its neighbour's: the answers come from whichever rank holds
//! each key. Needs CUDA and NCCL (`libnccl.so` on the library path); elsewhere it says why and exits.

use hashtile::{Bcht, Error, Ranks, Rendezvous, ShardedConfig, ShardedTable, TableConfig};
use std::time::Duration;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(rank), Some(world), Some(addr)) = (
        args.first().and_then(|a| a.parse::<usize>().ok()),
        args.get(1).and_then(|a| a.parse::<usize>().ok()),
        args.get(2).and_then(|a| a.parse().ok()),
    ) else {
        eprintln!("usage: sharded_ranks RANK WORLD HOST:PORT (one process per GPU)");
        std::process::exit(2);
    };
    let me = Ranks::new(rank, world, Rendezvous::Tcp(addr)).timeout(Duration::from_secs(60));
    let config = ShardedConfig::new(TableConfig::for_keys(world << 20, 0.8)).ranks(me);
    // Every rank makes its table at about the same time: this is where they meet.
    let mut table: ShardedTable<Bcht, u32, u32> = match ShardedTable::new(config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("rank {rank}: no table over ranks here: {e}");
            return Ok(());
        }
    };
    let keys_of = |r: usize| -> Vec<u32> {
        (0..1u32 << 20)
            .map(|i| hashtile::hash::fmix32(i ^ (r as u32) << 24) >> 1)
            .collect()
    };
    let mine = keys_of(rank);
    let values: Vec<u32> = mine.iter().map(|k| k ^ 0x5a5a).collect();
    // Every call is collective: each rank passes its own batch.
    table.insert(&mine, &values)?;
    let theirs = keys_of((rank + 1) % world);
    let found_mine = table.find(&mine)?;
    let found_theirs = table.contains(&theirs)?;
    assert!(found_mine.iter().zip(&values).all(|(f, v)| *f == Some(*v)));
    println!(
        "rank {rank} of {world}: shard {:?} holds {} pairs; my {} keys found, {} of my neighbour's present",
        table.local_shards(),
        table.len(),
        found_mine.len(),
        found_theirs.iter().filter(|&&p| p).count()
    );
    Ok(())
}
