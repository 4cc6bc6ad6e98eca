//! One process per GPU: a sharded table whose shards live in several processes (ranks), on one host or many,
//! each process holding its own shard and calling every operation together with the others. The ranks join
//! one NCCL communicator through a unique id that rank 0 makes and hands to the others by a rendezvous the user
//! names ([`Rendezvous`]): a file every rank can read, or a TCP address rank 0 listens on. Everything after the
//! id travels over NCCL (`sharded::nccl`), which picks NVLink or PCIe inside a host and InfiniBand or sockets
//! across hosts: nothing in hashtile changes with the deployment.
//!
//! Every wait on another rank is bounded by [`Ranks::timeout`]: the rendezvous, NCCL's set-up and every
//! exchange. A rank that does not show up, dies or fails yields [`Error::PeerFailed`] on the others instead of
//! a hang.

use hashtile_core::{Error, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Bytes of the id the ranks share (NCCL's `ncclUniqueId`).
pub const ID_BYTES: usize = 128;

/// How long a rank waits for the others unless the user says otherwise: NCCL's own collectives wait forever,
/// and a training framework's process group gives up after minutes; a table's calls are shorter, but ranks
/// may reach a call at quite different times.
pub const DEFAULT_RANK_TIMEOUT: Duration = Duration::from_secs(300);

/// How rank 0 hands the communicator's id to the other ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendezvous {
    /// A file every rank can read (across hosts: on a shared file system). Rank 0 writes the id there (whole, by
    /// a rename) and removes the file once every rank has joined; the others wait for it to appear. The path
    /// must not hold an earlier run's id when the ranks start (remove it after a crash).
    File(PathBuf),
    /// A TCP address rank 0 listens on; the other ranks connect to it, say who they are and read the id.
    Tcp(SocketAddr),
}

/// This process's place among the ranks of a table over several processes
/// ([`ShardedConfig::ranks`](super::config::ShardedConfig::ranks)).
///
/// ```
/// use hashtile_backends::sharded::ranks::{Ranks, Rendezvous};
/// use std::time::Duration;
/// let me = Ranks::new(1, 4, Rendezvous::Tcp("10.0.0.1:29500".parse().unwrap()))
///     .timeout(Duration::from_secs(60));
/// assert_eq!((me.rank, me.world), (1, 4));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranks {
    /// This process's rank, `0..world`: the shard it holds.
    pub rank: usize,
    /// How many ranks (= shards).
    pub world: usize,
    /// How the ranks meet.
    pub rendezvous: Rendezvous,
    /// The CUDA device of this rank's shard (default: `rank % devices`, so ranks of one host on its GPUs in turn).
    pub device: Option<usize>,
    /// How long any wait on the other ranks may take before [`Error::PeerFailed`].
    pub timeout: Duration,
}

impl Ranks {
    /// Rank `rank` of `world`, meeting by `rendezvous`.
    pub fn new(rank: usize, world: usize, rendezvous: Rendezvous) -> Self {
        Self {
            rank,
            world,
            rendezvous,
            device: None,
            timeout: DEFAULT_RANK_TIMEOUT,
        }
    }

    /// Puts this rank's shard on CUDA device `ordinal`.
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = Some(ordinal);
        self
    }

    /// Sets how long a wait on the other ranks may take ([`Ranks::timeout`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// [`Error::InvalidConfig`] for a rank outside `0..world`, no ranks, or no time to wait.
    pub(crate) fn check(&self, max_shards: usize) -> Result<()> {
        if self.world == 0 || self.world > max_shards || self.rank >= self.world {
            return Err(Error::InvalidConfig(format!(
                "rank {} of {}: ranks run 0..world, and a table has 1..={max_shards} shards",
                self.rank, self.world
            )));
        }
        if self.timeout.is_zero() {
            return Err(Error::InvalidConfig(
                "a rank time-out of 0; the ranks need time to meet".into(),
            ));
        }
        Ok(())
    }

    /// The id every rank joins with: made by `make` on rank 0 and handed to the others through the rendezvous.
    /// Rank 0 returns once every other rank has taken it over TCP (a file is read whenever they come); the
    /// others once they have it. [`Error::PeerFailed`] when the time-out passes first.
    pub(crate) fn share_id(
        &self,
        make: impl FnOnce() -> Result<[u8; ID_BYTES]>,
    ) -> Result<[u8; ID_BYTES]> {
        let deadline = Deadline::new(self.timeout);
        match (&self.rendezvous, self.rank) {
            (Rendezvous::File(path), 0) => {
                let id = make()?;
                let tmp = path.with_extension(format!("tmp{}", std::process::id()));
                std::fs::write(&tmp, id)
                    .and_then(|_| std::fs::rename(&tmp, path))
                    .map_err(|e| {
                        Error::InvalidConfig(format!(
                            "cannot write the rendezvous file {}: {e}",
                            path.display()
                        ))
                    })?;
                Ok(id)
            }
            (Rendezvous::File(path), _) => loop {
                if let Ok(bytes) = std::fs::read(path)
                    && let Ok(id) = <[u8; ID_BYTES]>::try_from(&bytes[..])
                {
                    return Ok(id);
                }
                deadline.check(|| format!("no id from rank 0 at {}", path.display()))?;
                std::thread::sleep(Duration::from_millis(10));
            },
            (Rendezvous::Tcp(addr), 0) => self.serve_id(*addr, make()?, &deadline),
            (Rendezvous::Tcp(addr), _) => self.fetch_id(*addr, &deadline),
        }
    }

    /// After every rank joined: rank 0 removes the rendezvous file, so that a later run cannot read this id.
    pub(crate) fn joined(&self) {
        if let (Rendezvous::File(path), 0) = (&self.rendezvous, self.rank) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Rank 0's side of the TCP rendezvous: every other rank connects once and says `(rank, world)`; each gets
    /// the id, and a rank of another world (a wrong command line) a typed error on both sides.
    fn serve_id(
        &self,
        addr: SocketAddr,
        id: [u8; ID_BYTES],
        deadline: &Deadline,
    ) -> Result<[u8; ID_BYTES]> {
        let listener = TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|_| l))
            .map_err(|e| Error::InvalidConfig(format!("rank 0 cannot listen on {addr}: {e}")))?;
        let mut seen = vec![false; self.world];
        seen[0] = true;
        while seen.iter().any(|s| !s) {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let hello = stream
                        .set_nonblocking(false)
                        .and_then(|_| stream.set_read_timeout(Some(deadline.left())))
                        .and_then(|_| read_words(&mut stream));
                    let Ok([rank, world]) = hello else { continue };
                    let (rank, world) = (rank as usize, world as usize);
                    if world != self.world || rank == 0 || rank >= world {
                        let _ = stream.write_all(&[0u8; 4]);
                        return Err(Error::InvalidConfig(format!(
                            "rank {rank} of {world} came to rank 0 of {}",
                            self.world
                        )));
                    }
                    let mut reply = MAGIC.to_vec();
                    reply.extend_from_slice(&id);
                    if stream.write_all(&reply).is_ok() {
                        seen[rank] = true;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let missing = (0..self.world).filter(|&r| !seen[r]).collect::<Vec<_>>();
                    deadline.check(|| format!("ranks {missing:?} never came to {addr}"))?;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(Error::Device(format!("rendezvous at {addr}: {e}"))),
            }
        }
        Ok(id)
    }

    /// Another rank's side of the TCP rendezvous: connects (rank 0 may not listen yet), says who it is and reads
    /// the id.
    fn fetch_id(&self, addr: SocketAddr, deadline: &Deadline) -> Result<[u8; ID_BYTES]> {
        loop {
            let got = TcpStream::connect_timeout(&addr, deadline.left()).and_then(|mut s| {
                s.set_read_timeout(Some(deadline.left()))?;
                let mut hello = Vec::with_capacity(8);
                hello.extend_from_slice(&(self.rank as u32).to_le_bytes());
                hello.extend_from_slice(&(self.world as u32).to_le_bytes());
                s.write_all(&hello)?;
                let mut reply = [0u8; 4 + ID_BYTES];
                s.read_exact(&mut reply[..4])?;
                if reply[..4] != MAGIC {
                    return Ok(None);
                }
                s.read_exact(&mut reply[4..])?;
                Ok(Some(
                    <[u8; ID_BYTES]>::try_from(&reply[4..]).expect("sized"),
                ))
            });
            match got {
                Ok(Some(id)) => return Ok(id),
                Ok(None) => {
                    return Err(Error::InvalidConfig(format!(
                        "rank 0 at {addr} refused rank {} of {}: another world size",
                        self.rank, self.world
                    )));
                }
                Err(_) => {
                    deadline.check(|| format!("rank 0 never answered at {addr}"))?;
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

/// What rank 0 sends before the id (a refusal sends zeros).
const MAGIC: [u8; 4] = *b"HTID";

/// Reads a rank's hello: its rank and world, two little-endian `u32`s.
fn read_words(s: &mut TcpStream) -> std::io::Result<[u32; 2]> {
    let mut b = [0u8; 8];
    s.read_exact(&mut b)?;
    Ok([
        u32::from_le_bytes(b[..4].try_into().expect("4 bytes")),
        u32::from_le_bytes(b[4..].try_into().expect("4 bytes")),
    ])
}

/// A time limit on waiting for other ranks.
pub(crate) struct Deadline {
    start: Instant,
    limit: Duration,
}

impl Deadline {
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            start: Instant::now(),
            limit,
        }
    }

    /// Time left (at least a millisecond: socket time-outs refuse zero).
    pub(crate) fn left(&self) -> Duration {
        self.limit
            .saturating_sub(self.start.elapsed())
            .max(Duration::from_millis(1))
    }

    /// [`Error::PeerFailed`] with `detail()` once the limit has passed.
    pub(crate) fn check(&self, detail: impl FnOnce() -> String) -> Result<()> {
        if self.start.elapsed() >= self.limit {
            return Err(self.failed(detail()));
        }
        Ok(())
    }

    /// [`Error::PeerFailed`] now, with the time waited so far.
    pub(crate) fn failed(&self, detail: String) -> Error {
        Error::PeerFailed {
            waited_ms: self.start.elapsed().as_millis() as u64,
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(seed: u8) -> [u8; ID_BYTES] {
        std::array::from_fn(|i| (i as u8).wrapping_mul(7) ^ seed)
    }

    /// Every rank of `world`, each on a thread, through `rendezvous`: every one gets rank 0's id.
    fn meet(world: usize, rendezvous: Rendezvous) -> Vec<Result<[u8; ID_BYTES]>> {
        std::thread::scope(|sc| {
            let handles: Vec<_> = (0..world)
                .rev()
                .map(|rank| {
                    let r = Ranks::new(rank, world, rendezvous.clone())
                        .timeout(Duration::from_secs(20));
                    sc.spawn(move || r.share_id(|| Ok(id_of(rank as u8 + 1))))
                })
                .collect();
            let mut out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            out.reverse();
            out
        })
    }

    fn free_addr() -> SocketAddr {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }

    #[test]
    fn every_rank_gets_rank_zeros_id() {
        let dir = std::env::temp_dir().join(format!("hashtile-rv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("id");
        for got in meet(3, Rendezvous::File(path.clone())) {
            assert_eq!(got.unwrap(), id_of(1));
        }
        Ranks::new(0, 3, Rendezvous::File(path.clone())).joined();
        assert!(!path.exists(), "rank 0 removes the file once all joined");
        for got in meet(4, Rendezvous::Tcp(free_addr())) {
            assert_eq!(got.unwrap(), id_of(1));
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_missing_rank_is_a_typed_error_in_bounded_time() {
        let short = Duration::from_millis(300);
        let path = std::env::temp_dir().join(format!("hashtile-none-{}", std::process::id()));
        let t0 = Instant::now();
        let r = Ranks::new(1, 2, Rendezvous::File(path)).timeout(short);
        assert!(matches!(
            r.share_id(|| unreachable!()),
            Err(Error::PeerFailed { .. })
        ));
        let addr = free_addr();
        let r = Ranks::new(1, 2, Rendezvous::Tcp(addr)).timeout(short);
        assert!(matches!(
            r.share_id(|| unreachable!()),
            Err(Error::PeerFailed { .. })
        ));
        // Rank 0 waits for a rank that never comes.
        let r = Ranks::new(0, 3, Rendezvous::Tcp(addr)).timeout(short);
        assert!(matches!(
            r.share_id(|| Ok(id_of(0))),
            Err(Error::PeerFailed { .. })
        ));
        assert!(t0.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_rank_of_another_world_is_refused() {
        let addr = free_addr();
        let results = std::thread::scope(|sc| {
            let zero = sc.spawn(|| {
                Ranks::new(0, 2, Rendezvous::Tcp(addr))
                    .timeout(Duration::from_secs(20))
                    .share_id(|| Ok(id_of(0)))
            });
            let one = sc.spawn(|| {
                Ranks::new(1, 3, Rendezvous::Tcp(addr))
                    .timeout(Duration::from_secs(20))
                    .share_id(|| unreachable!())
            });
            (zero.join().unwrap(), one.join().unwrap())
        });
        assert!(matches!(results.0, Err(Error::InvalidConfig(_))));
        assert!(matches!(results.1, Err(Error::InvalidConfig(_))));
    }

    #[test]
    fn bad_ranks_are_refused() {
        let rv = Rendezvous::Tcp("127.0.0.1:1".parse().unwrap());
        assert!(Ranks::new(2, 2, rv.clone()).check(256).is_err());
        assert!(Ranks::new(0, 0, rv.clone()).check(256).is_err());
        assert!(
            Ranks::new(0, 2, rv.clone())
                .timeout(Duration::ZERO)
                .check(256)
                .is_err()
        );
        assert!(Ranks::new(1, 2, rv).check(256).is_ok());
    }
}
