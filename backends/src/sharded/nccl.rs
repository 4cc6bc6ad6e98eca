//! NCCL between the shards' GPUs, through cudarc's bindings: the GPUs of one process (`ncclCommInitAll`), or one
//! GPU per process among ranks (`ncclCommInitRank`, the id from `sharded::ranks`). One communicator and one
//! stream per shard held here, and each exchange step as a group of `ncclSend` / `ncclRecv` (NCCL's
//! point-to-point all-to-all) for the shards held here, queued and waited for apart (the shards work in between),
//! timed on the devices by events. Over ranks every wait is bounded ([`Ranks::timeout`]): a rank that dies or
//! stops answering turns into [`Error::PeerFailed`] after NCCL's asynchronous error or the time-out, the
//! communicators are aborted (which stops NCCL's kernels waiting on the lost rank) and stay closed. NCCL is loaded at its first use (`libnccl.so`, e.g. the `nvidia-nccl` wheel's, on the library
//! path); without it a sharded table exchanges through the host. NCCL's NVLink multicast (NVLS) serves
//! collectives only, which the exchange does not use; keep `NCCL_NVLS_ENABLE=0` on shared machines anyway.

use super::plan::Plan;
use super::ranks::{Deadline, ID_BYTES, Ranks};
use cudarc::driver::{result as cu, sys};
use cudarc::nccl::{result as nccl, sys as nsys};
use hashtile_core::{Error, Result};
use std::ffi::c_int;
use std::sync::Mutex;
use std::time::Duration;

/// Communicators and streams of the shards held here.
pub(crate) struct Nccl {
    comms: Vec<nsys::ncclComm_t>,
    streams: Vec<sys::CUstream>,
    ctxs: Vec<sys::CUcontext>,
    /// Events recorded on each stream before and after a step's group.
    begin: Vec<sys::CUevent>,
    end: Vec<sys::CUevent>,
    /// The rank of `comms[0]` (the shards held here are `base..base + comms.len()`), and how many ranks.
    base: usize,
    world: usize,
    /// How long a wait may take (over ranks); `None` waits for the devices as long as they take.
    timeout: Option<Duration>,
    /// Set when the communicators were aborted: every later call returns it.
    failed: Mutex<Option<Error>>,
}

// SAFETY: the raw handles are used by one call at a time (the sharded table's `&self` calls serialise on a
// mutex around the exchange) after making the device's context current.
unsafe impl Send for Nccl {}
// SAFETY: as above.
unsafe impl Sync for Nccl {}

fn nccl_error(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Device(format!("{what}: {e:?}"))
}

fn cuda_error(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Device(format!("{what}: {e:?}"))
}

impl Nccl {
    /// Communicators for `devices` (distinct CUDA ordinals, one rank each), or `None` when the NCCL library
    /// is not found.
    pub fn new(devices: &[usize]) -> Result<Option<Self>> {
        // SAFETY: probes for the library by name; loads nothing else.
        if !unsafe { nsys::is_culib_present() } {
            return Ok(None);
        }
        let n = devices.len();
        let list: Vec<c_int> = devices.iter().map(|&d| d as c_int).collect();
        let mut comms = vec![std::ptr::null_mut(); n];
        // SAFETY: `comms` holds `n` slots and `list` `n` distinct device ordinals.
        unsafe { nccl::comm_init_all(comms.as_mut_ptr(), n as c_int, list.as_ptr()) }
            .map_err(|e| nccl_error("ncclCommInitAll", e))?;
        Self::with_comms(comms, devices, (0, n), None).map(Some)
    }

    /// The communicator of rank `ranks.rank` on CUDA device `device`, joined with the other ranks through
    /// `ranks.rendezvous` (every rank calls this at about the same time), then warmed up: one exchange with every
    /// other rank and one gather, so that NCCL's connections are made here, within the time-out, and not
    /// inside a later call. [`Error::PeerFailed`] when a rank does not come in time; [`Error::InvalidConfig`]
    /// without the NCCL library.
    pub fn rank(device: usize, ranks: &Ranks) -> Result<Self> {
        // SAFETY: probes for the library by name; loads nothing else.
        if !unsafe { nsys::is_culib_present() } {
            return Err(Error::InvalidConfig(
                "a table over ranks needs NCCL (libnccl.so on the library path)".into(),
            ));
        }
        let id = ranks.share_id(|| {
            let id = nccl::get_uniqueid().map_err(|e| nccl_error("ncclGetUniqueId", e))?;
            Ok(std::array::from_fn(|i| id.internal[i] as u8))
        })?;
        let deadline = Deadline::new(ranks.timeout);
        let (rank, world) = (ranks.rank, ranks.world);
        // NCCL's set-up waits for every rank without a limit: it runs on a thread of its own, and a rank that
        // never comes leaves that thread waiting while this one returns the error.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let made = (|| -> Result<usize> {
                let ctx = retain(device)?;
                // SAFETY: the retained primary context; NCCL takes the current device from it.
                unsafe { cu::ctx::set_current(ctx) }
                    .map_err(|e| cuda_error("cuCtxSetCurrent", e))?;
                let id = nsys::ncclUniqueId {
                    internal: std::array::from_fn::<_, ID_BYTES, _>(|i| id[i] as _),
                };
                let mut comm = std::ptr::null_mut();
                // SAFETY: one communicator slot; the id every rank shares.
                unsafe { nccl::comm_init_rank(&mut comm, world as c_int, id, rank as c_int) }
                    .map_err(|e| nccl_error("ncclCommInitRank", e))?;
                Ok(comm as usize)
            })();
            let _ = tx.send(made);
        });
        let comm = match rx.recv_timeout(deadline.left()) {
            Ok(made) => made? as nsys::ncclComm_t,
            Err(_) => {
                return Err(deadline.failed(format!(
                    "NCCL's set-up of rank {rank} of {world} did not complete"
                )));
            }
        };
        ranks.joined();
        let me = Self::with_comms(vec![comm], &[device], (rank, world), Some(ranks.timeout))?;
        me.warm_up()?;
        Ok(me)
    }

    /// Streams and events for communicators `comms` made on `devices`, of ranks `base..` among `world`.
    fn with_comms(
        comms: Vec<nsys::ncclComm_t>,
        devices: &[usize],
        (base, world): (usize, usize),
        timeout: Option<Duration>,
    ) -> Result<Self> {
        let n = devices.len();
        let mut ctxs = Vec::with_capacity(n);
        let mut streams = Vec::with_capacity(n);
        let (mut begin, mut end) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for &d in devices {
            let ctx = retain(d)?;
            // SAFETY: the retained primary context.
            unsafe { cu::ctx::set_current(ctx) }.map_err(|e| cuda_error("cuCtxSetCurrent", e))?;
            let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
                .map_err(|e| cuda_error("cuStreamCreate", e))?;
            let event = || {
                cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                    .map_err(|e| cuda_error("cuEventCreate", e))
            };
            begin.push(event()?);
            end.push(event()?);
            ctxs.push(ctx);
            streams.push(stream);
        }
        Ok(Self {
            comms,
            streams,
            ctxs,
            begin,
            end,
            base,
            world,
            timeout,
            failed: Mutex::new(None),
        })
    }

    /// Ranks (= shards) in the communicator.
    pub fn world(&self) -> usize {
        self.world
    }

    /// One all-to-all of a mebibyte per pair of ranks and one gather, waited for: NCCL connects peers at their
    /// first exchange, which then waits on them outside any time-out of ours.
    fn warm_up(&self) -> Result<()> {
        let bytes = 1 << 20;
        let words = bytes / 4;
        let plan = Plan::new(vec![vec![words; self.world]; self.world]);
        // SAFETY: the context of the one device held here; the buffers are freed below, after the waits.
        let (send, recv) = unsafe {
            cu::ctx::set_current(self.ctxs[0]).map_err(|e| cuda_error("cuCtxSetCurrent", e))?;
            let alloc =
                || cu::malloc_sync(bytes * self.world).map_err(|e| cuda_error("cuMemAlloc", e));
            (alloc()?, alloc()?)
        };
        let done = self
            .start(&[(&plan, 4, vec![send], vec![recv])])
            .and_then(|_| self.wait())
            .and_then(|_| self.all_gather(&[send], &[recv], 4));
        // SAFETY: every queued use of the buffers was waited for (or aborted).
        unsafe {
            let _ = cu::free_sync(send);
            let _ = cu::free_sync(recv);
        }
        done
    }

    /// Gathers `bytes` from each rank's `send[g]` into every rank's `recv[g]` (`world * bytes`, in rank order)
    /// and waits (the send buffers' writes finished before).
    pub fn all_gather(&self, send: &[u64], recv: &[u64], bytes: usize) -> Result<()> {
        self.check_open()?;
        self.record(&self.begin)?;
        nccl::group_start().map_err(|e| nccl_error("ncclGroupStart", e))?;
        let mut queued = Ok(());
        for (g, (&s, &r)) in send.iter().zip(recv).enumerate() {
            // SAFETY: `s` holds `bytes` and `r` `world * bytes` on device `g`; the stream and communicator are
            // this struct's.
            let q = unsafe {
                nccl::all_gather(
                    s as *const std::ffi::c_void,
                    r as *mut std::ffi::c_void,
                    bytes,
                    nsys::ncclDataType_t::ncclUint8,
                    self.comms[g],
                    self.streams[g] as nsys::cudaStream_t,
                )
            };
            if let Err(e) = q {
                queued = Err(nccl_error("ncclAllGather", e));
                break;
            }
        }
        let ended = nccl::group_end().map_err(|e| nccl_error("ncclGroupEnd", e));
        queued?;
        ended?;
        self.record(&self.end)?;
        self.wait().map(|_| ())
    }

    /// Queues one exchange step on the NCCL streams and returns at once: each move's words, `(plan, word
    /// bytes, send addresses, receive addresses)` with each source's send region and each destination's receive
    /// region at the addresses given (every buffer's writes finished before), a group per move. Events around
    /// the step time it on each device ([`Nccl::wait`]).
    pub fn start(&self, moves: &[(&Plan, usize, Vec<u64>, Vec<u64>)]) -> Result<()> {
        self.check_open()?;
        self.record(&self.begin)?;
        // One group per move, queued back to back on each stream (measured no different from one group for all
        // moves on two H200s: a step of 2^26 pairs per GPU took 2.2-2.4 ms of NCCL's time either way).
        for (plan, word_bytes, send, recv) in moves {
            nccl::group_start().map_err(|e| nccl_error("ncclGroupStart", e))?;
            let queued = self.queue(plan, *word_bytes, send, recv);
            // The group is always closed, even when queueing failed.
            let ended = nccl::group_end().map_err(|e| nccl_error("ncclGroupEnd", e));
            queued?;
            ended?;
        }
        self.record(&self.end)
    }

    /// Waits for the work [`Nccl::start`] (or a gather) queued; returns its time on the devices (the slowest
    /// device's, between the events around it), in milliseconds. Over ranks the wait polls, bounded by the
    /// time-out, and turns NCCL's asynchronous error or the time-out into [`Error::PeerFailed`].
    pub fn wait(&self) -> Result<f64> {
        let mut ms = 0f64;
        for (d, ctx) in self.ctxs.iter().enumerate() {
            // SAFETY: the retained context.
            unsafe { cu::ctx::set_current(*ctx) }.map_err(|e| cuda_error("cuCtxSetCurrent", e))?;
            match self.timeout {
                // SAFETY: an event recorded on this device's stream by `start`.
                None => unsafe { cu::event::synchronize(self.end[d]) }
                    .map_err(|e| cuda_error("cuEventSynchronize", e))?,
                Some(limit) => self.poll(d, &Deadline::new(limit))?,
            }
            // SAFETY: both events recorded on this device's stream, the second complete.
            let t = unsafe { cu::event::elapsed(self.begin[d], self.end[d]) }
                .map_err(|e| cuda_error("cuEventElapsedTime", e))?;
            ms = ms.max(t as f64);
        }
        Ok(ms)
    }

    /// Polls communicator `d`'s end event until it completes, NCCL reports an asynchronous error, or the
    /// deadline passes (the last two abort every communicator).
    fn poll(&self, d: usize, deadline: &Deadline) -> Result<()> {
        loop {
            // SAFETY: an event recorded on this device's stream (its context current).
            match unsafe { cu::event::query(self.end[d]) } {
                Ok(()) => return Ok(()),
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => {}
                Err(e) => return Err(cuda_error("cuEventQuery", e)),
            }
            let mut state = nsys::ncclResult_t::ncclSuccess;
            // SAFETY: a live communicator and a result slot.
            unsafe { nsys::ncclCommGetAsyncError(self.comms[d], &mut state) };
            if !matches!(
                state,
                nsys::ncclResult_t::ncclSuccess | nsys::ncclResult_t::ncclInProgress
            ) {
                return Err(self.abort(deadline.failed(format!("NCCL reported {state:?}"))));
            }
            if let Err(e) = deadline.check(|| {
                format!(
                    "rank {} waited for an exchange with the other ranks",
                    self.base + d
                )
            }) {
                return Err(self.abort(e));
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// Aborts every communicator (NCCL's kernels waiting on a lost rank return) and keeps `e` for later calls.
    pub fn close(&self, e: Error) {
        let _ = self.abort(e);
    }

    /// [`Nccl::close`], returning `e`.
    fn abort(&self, e: Error) -> Error {
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        if failed.is_none() {
            for c in &self.comms {
                // SAFETY: a live communicator, aborted once (the lock is held).
                let _ = unsafe { nccl::comm_abort(*c) };
            }
            tracing::error!(target: "hashtile", "sharded exchange aborted: {e}");
            *failed = Some(e.clone());
        }
        e
    }

    /// The error that closed the exchange, if it is closed.
    fn check_open(&self) -> Result<()> {
        match &*self.failed.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Records `events[d]` on device `d`'s NCCL stream, for every device.
    fn record(&self, events: &[sys::CUevent]) -> Result<()> {
        for ((ctx, stream), ev) in self.ctxs.iter().zip(&self.streams).zip(events) {
            // SAFETY: the retained context, its stream and an event made in it.
            unsafe {
                cu::ctx::set_current(*ctx).map_err(|e| cuda_error("cuCtxSetCurrent", e))?;
                cu::event::record(*ev, *stream).map_err(|e| cuda_error("cuEventRecord", e))?;
            }
        }
        Ok(())
    }

    /// Queues the sends of the shards held here (each to every destination) and their receives (from every
    /// source), inside a group: `send[g]` and `recv[g]` are shard `base + g`'s regions.
    fn queue(&self, plan: &Plan, word_bytes: usize, send: &[u64], recv: &[u64]) -> Result<()> {
        for (g, (&send_at, &recv_at)) in send.iter().zip(recv).enumerate() {
            let me = self.base + g;
            let (comm, stream) = (self.comms[g], self.streams[g] as nsys::cudaStream_t);
            for peer in 0..self.world {
                let out = plan.count(me, peer) * word_bytes;
                if out > 0 {
                    let src = send_at + (plan.send_start(me, peer) * word_bytes) as u64;
                    // SAFETY: the range lies in a live device buffer of the plan's size; the stream and
                    // communicator are this struct's.
                    unsafe {
                        nccl::send(
                            src as *const std::ffi::c_void,
                            out,
                            nsys::ncclDataType_t::ncclUint8,
                            peer as c_int,
                            comm,
                            stream,
                        )
                    }
                    .map_err(|e| nccl_error("ncclSend", e))?;
                }
                let inn = plan.count(peer, me) * word_bytes;
                if inn > 0 {
                    let dst = recv_at + (plan.recv_start(me, peer) * word_bytes) as u64;
                    // SAFETY: as above.
                    unsafe {
                        nccl::recv(
                            dst as *mut std::ffi::c_void,
                            inn,
                            nsys::ncclDataType_t::ncclUint8,
                            peer as c_int,
                            comm,
                            stream,
                        )
                    }
                    .map_err(|e| nccl_error("ncclRecv", e))?;
                }
            }
        }
        Ok(())
    }
}

/// Device `d`'s primary context (the one CubeCL uses), retained for the process.
fn retain(d: usize) -> Result<sys::CUcontext> {
    let dev = cu::device::get(d as c_int).map_err(|e| cuda_error("cuDeviceGet", e))?;
    // SAFETY: a valid device.
    unsafe { cu::primary_ctx::retain(dev) }.map_err(|e| cuda_error("cuDevicePrimaryCtxRetain", e))
}

impl Drop for Nccl {
    fn drop(&mut self) {
        let aborted = self.failed.get_mut().map_or(true, |f| f.is_some());
        for c in &self.comms {
            if !aborted {
                // SAFETY: live communicators, destroyed once (an aborted one is freed by its abort).
                let _ = unsafe { nccl::comm_destroy(*c) };
            }
        }
        for (d, (ctx, stream)) in self.ctxs.iter().zip(&self.streams).enumerate() {
            // SAFETY: the retained context, its stream and events, destroyed once.
            unsafe {
                let _ = cu::ctx::set_current(*ctx);
                let _ = cu::stream::destroy(*stream);
                let _ = cu::event::destroy(self.begin[d]);
                let _ = cu::event::destroy(self.end[d]);
            }
        }
    }
}
