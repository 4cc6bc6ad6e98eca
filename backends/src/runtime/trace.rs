//! Device-syncing phase marks as `tracing` events, for any table family: a [`Trace`] waits for the device at each
//! mark and emits the time since the last one (level TRACE, target `hashtile`, the caller's name as `table`).

use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;

/// Phase timings of one call as `tracing` events (target `hashtile`, level TRACE, the caller's name as `table`).
/// Each mark waits for the device, so a trace changes the overlap it measures: it is on only while a
/// subscriber listens at that level (for diagnosis; nothing is waited for otherwise).
pub(crate) struct Trace {
    pub(crate) on: bool,
    target: &'static str,
    t0: std::time::Instant,
}

impl Trace {
    /// A trace of one call of `table` (the host path's, the routed batches', say): it marks only while a
    /// subscriber listens at level TRACE on target `hashtile`.
    pub(crate) fn new(table: &'static str) -> Self {
        Self {
            on: tracing::enabled!(target: "hashtile", tracing::Level::TRACE),
            target: table,
            t0: std::time::Instant::now(),
        }
    }
    /// Waits for the device and emits the time since the last mark as phase `what` (when on).
    pub(crate) fn mark<R: HostTransfer>(&mut self, client: &ComputeClient<R>, what: &str) {
        if self.on {
            let _ = cubecl::future::block_on(client.sync());
            let ms = self.t0.elapsed().as_secs_f64() * 1e3;
            tracing::trace!(target: "hashtile", phase = what, ms, table = self.target);
            self.t0 = std::time::Instant::now();
        }
    }
}
