//! The all-to-all exchange of a sharded table's device-data calls: every source device's send buffer holds its
//! slice's words laid out by destination shard, and every destination receives its words from each source in
//! source order ([`Plan`]). A call moves its words in steps (`sharded::steps`), each step one or more [`Move`]s
//! between regions of buffers made once per call. Two transports carry them: NCCL's grouped `ncclSend` /
//! `ncclRecv` between the GPUs (`sharded::nccl`, CUDA with one shard per distinct device), queued and waited for
//! apart so that the shards work while the next step's words travel; and the host's memory (any runtime, shards
//! sharing a device included: each send buffer read back and each receive region written, the exchange the
//! tests on lavapipe run). The answers of a find return by the reverse exchange ([`Plan::reversed`]), which puts
//! them back in send-buffer order.

use crate::runtime::launch::copy;
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use cubecl::stream_id::StreamId;
use hashtile_core::Result;

use super::plan::Plan;

/// One set of words of an exchange step: `plan`'s words of `word_bytes` from each source's send region to each
/// destination's receive region ([`Bufs::regions`]).
pub(crate) struct Move {
    pub plan: Plan,
    pub word_bytes: usize,
    pub send: Vec<Region>,
    pub recv: Vec<Region>,
}

/// Part of a shard's buffer from byte `at` on, with the buffer's device address where NCCL moves it (else 0).
#[derive(Clone)]
pub(crate) struct Region {
    pub buf: Handle,
    pub at: usize,
    addr: u64,
}

/// One buffer per shard that a call's steps move words from or into, with their device addresses read once
/// ([`Exchanger::bufs`]): reading one goes through CubeCL's server, about 0.1 ms each.
pub(crate) struct Bufs {
    pub handles: Vec<Handle>,
    addrs: Vec<u64>,
}

impl Bufs {
    /// Every shard's buffer from the 32-bit word each `word(g)` gives on.
    pub fn regions(&self, word: impl Fn(usize) -> usize) -> Vec<Region> {
        (self.handles.iter().zip(&self.addrs).enumerate())
            .map(|(g, (h, &addr))| Region {
                buf: h.clone(),
                at: word(g) * 4,
                addr,
            })
            .collect()
    }
}

impl Move {
    /// Bytes the move carries.
    pub fn bytes(&self) -> usize {
        self.plan.words() * self.word_bytes
    }
}

/// One shard's end of an exchange: its device's client and the stream its buffers were written on.
pub(crate) struct End<'a, R: Runtime> {
    pub client: &'a ComputeClient<R>,
    pub stream: StreamId,
}

/// How a call's steps travel: not at all (one shard: its calls skip the exchange, and its ceiling moves
/// nothing), through the host, or over NCCL. [`Exchanger::start`] queues a step and [`Exchanger::wait`] waits for it; the shards work
/// in between.
pub(crate) enum Exchanger<'c, R: Runtime> {
    /// One shard: nothing moves.
    Local,
    /// Through the host's memory ([`through_host`]), done inside `start`; `ms` is the last step's host time.
    Host {
        ends: Vec<End<'c, R>>,
        ms: std::cell::Cell<f64>,
    },
    /// NCCL between distinct CUDA devices.
    #[cfg(feature = "cuda")]
    Nccl {
        nccl: std::sync::Arc<super::nccl::Nccl>,
        clients: Vec<&'c ComputeClient<cubecl::cuda::CudaRuntime>>,
        streams: Vec<StreamId>,
    },
}

impl<R: HostTransfer> Exchanger<'_, R> {
    /// `handles` (one per shard) with their device addresses, read once for every step of a call (NCCL only).
    pub fn bufs(&self, handles: Vec<Handle>) -> Result<Bufs> {
        let addrs = match self {
            #[cfg(feature = "cuda")]
            Self::Nccl {
                clients, streams, ..
            } => (handles.iter().enumerate())
                .map(|(g, h)| {
                    streams[g].executes(|| crate::runtime::transfer::device_ptr(clients[g], h))
                })
                .collect::<Result<Vec<u64>>>()?,
            _ => vec![0; handles.len()],
        };
        Ok(Bufs { handles, addrs })
    }

    /// Queues `moves` as one step (every send region's writes finished, and no queued kernel using a receive
    /// region's memory: `ShardedTable::route_steps` leaves every shard's stream idle before the call's buffers
    /// are made).
    pub fn start(&self, moves: &[Move]) -> Result<()> {
        match self {
            Self::Local => Ok(()),
            Self::Host { ends, ms } => {
                let t0 = std::time::Instant::now();
                for m in moves {
                    through_host(ends, m)?;
                }
                ms.set(t0.elapsed().as_secs_f64() * 1e3);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Self::Nccl { nccl, .. } => {
                let at = |side: &[Region]| side.iter().map(|r| r.addr + r.at as u64).collect();
                let list: Vec<_> = (moves.iter())
                    .map(|m| (&m.plan, m.word_bytes, at(&m.send), at(&m.recv)))
                    .collect();
                nccl.start(&list)
            }
        }
    }

    /// Every shard's row of 32-bit words, in shard order, from the rows of the shards held here (`local[g]`,
    /// all of one length): over ranks, NCCL gathers them from every rank (each rank gets the same rows); else
    /// this process holds every shard, and its rows are all of them.
    pub fn all_rows(&self, local: Vec<Vec<u32>>) -> Result<Vec<Vec<u32>>> {
        match self {
            #[cfg(feature = "cuda")]
            Self::Nccl {
                nccl,
                clients,
                streams,
            } if nccl.world() > local.len() => {
                let words = local.first().map_or(0, Vec::len);
                let world = nccl.world();
                let made = (local.iter().enumerate())
                    .map(|(g, row)| {
                        let c = clients[g];
                        streams[g].executes(|| {
                            let send = c.create_from_slice(u32::as_bytes(row));
                            let recv = c.empty((world * words).max(1) * 4);
                            crate::runtime::transfer::sync_device(c)?;
                            let at = |h: &Handle| crate::runtime::transfer::device_ptr(c, h);
                            Ok((at(&send)?, at(&recv)?, send, recv))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let sends: Vec<u64> = made.iter().map(|m| m.0).collect();
                let recvs: Vec<u64> = made.iter().map(|m| m.1).collect();
                nccl.all_gather(&sends, &recvs, words * 4)?;
                let (c, recv) = (clients[0], made[0].3.clone());
                let all = streams[0].executes(|| c.read_one_unchecked(recv));
                let all = u32::from_bytes(&all);
                Ok((0..world)
                    .map(|r| all[r * words..(r + 1) * words].to_vec())
                    .collect())
            }
            _ => Ok(local),
        }
    }

    /// Waits for the step `start` queued; returns the exchange's own time in milliseconds (NCCL's on the
    /// devices, the slowest device's; the host's for the host exchange; 0 when nothing moves).
    pub fn wait(&self) -> Result<f64> {
        match self {
            Self::Local => Ok(0.0),
            Self::Host { ms, .. } => Ok(ms.replace(0.0)),
            #[cfg(feature = "cuda")]
            Self::Nccl { nccl, .. } => nccl.wait(),
        }
    }
}

/// Carries `m` through the host's memory: each source's send buffer is read back on its stream, and each
/// destination's receive region written on its stream (queued: a later kernel there sees it). Words are 4
/// bytes.
pub(crate) fn through_host<R: HostTransfer>(ends: &[End<'_, R>], m: &Move) -> Result<()> {
    debug_assert_eq!(m.word_bytes, 4);
    let (plan, wb) = (&m.plan, m.word_bytes);
    let n = plan.shards();
    debug_assert_eq!(ends.len(), n, "the host exchange holds every shard");
    let sent: Vec<Vec<u8>> = (0..n)
        .map(|from| {
            if plan.send_len(from) == 0 {
                return Vec::new();
            }
            let e = &ends[from];
            let all = e.stream.executes(|| {
                e.client
                    .read_one_unchecked(m.send[from].buf.clone())
                    .to_vec()
            });
            all[m.send[from].at..].to_vec()
        })
        .collect();
    for (to, e) in ends.iter().enumerate() {
        let words = plan.recv_len(to);
        if words == 0 {
            continue;
        }
        let mut bytes = vec![0u8; words * wb];
        for (from, s) in sent.iter().enumerate() {
            let (src, dst, len) = (
                plan.send_start(from, to) * wb,
                plan.recv_start(to, from) * wb,
                plan.count(from, to) * wb,
            );
            bytes[dst..dst + len].copy_from_slice(&s[src..src + len]);
        }
        let r = &m.recv[to];
        e.stream.executes(|| {
            let landed = e.client.create_from_slice(&bytes);
            copy::<R, u32>(
                e.client,
                &landed,
                &r.buf.clone().offset_start(r.at as u64),
                words,
            );
        });
    }
    Ok(())
}
