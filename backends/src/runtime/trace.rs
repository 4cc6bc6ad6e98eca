//! Phase timings as `tracing` events, for any table family (level TRACE, target `hashtile`, the caller's name as
//! `table`): a [`Trace`] marks a phase at once after waiting for the device (`mark`), or sums the host time of
//! named phases (`lap`, `laps_ending_at`) and emits them as one event at the end of the call (`report`).

use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;

/// Phase timings of one call as `tracing` events (target `hashtile`, level TRACE, the caller's name as `table`).
/// It is on only while a subscriber listens at that level (for diagnosis; nothing is timed or waited for
/// otherwise). A mark waits for the device, so it changes the overlap it measures; a lap does not wait, so it
/// shows where the host's time goes (queueing included) while the device's work overlaps.
pub(crate) struct Trace {
    pub(crate) on: bool,
    target: &'static str,
    /// The end of the last mark or lap.
    t0: std::time::Instant,
    /// Host seconds per phase of the laps so far, in the order the phases first came.
    laps: Vec<(&'static str, f64)>,
}

impl Trace {
    /// A trace of one call of `table` (the host path's, the routed batches', the paged calls', say): it times
    /// only while a subscriber listens at level TRACE on target `hashtile`.
    pub(crate) fn new(table: &'static str) -> Self {
        Self {
            on: tracing::enabled!(target: "hashtile", tracing::Level::TRACE),
            target: table,
            t0: std::time::Instant::now(),
            laps: Vec::new(),
        }
    }

    /// Waits for the device and emits the time since the last mark or lap as phase `what` (when on).
    pub(crate) fn mark<R: HostTransfer>(&mut self, client: &ComputeClient<R>, what: &str) {
        if self.on {
            let _ = cubecl::future::block_on(client.sync());
            let ms = self.t0.elapsed().as_secs_f64() * 1e3;
            tracing::trace!(target: "hashtile", phase = what, ms, table = self.target);
            self.t0 = std::time::Instant::now();
        }
    }

    /// Adds the host time since the last mark or lap to phase `what`, without waiting for the device (when on).
    pub(crate) fn lap(&mut self, what: &'static str) {
        if self.on {
            let now = std::time::Instant::now();
            self.add(what, now.saturating_duration_since(self.t0).as_secs_f64());
            self.t0 = now;
        }
    }

    /// Laps that ended at `ends` (instants taken where a lap cannot be, in a callback that holds no trace): the
    /// last `names.len()` of them, paired with `names` in order (when on and there are that many).
    pub(crate) fn laps_ending_at(&mut self, ends: &[std::time::Instant], names: &[&'static str]) {
        if !self.on || ends.len() < names.len() {
            return;
        }
        for (end, what) in ends[ends.len() - names.len()..].iter().zip(names) {
            self.add(what, end.saturating_duration_since(self.t0).as_secs_f64());
            self.t0 = *end;
        }
    }

    fn add(&mut self, what: &'static str, secs: f64) {
        match self.laps.iter_mut().find(|l| l.0 == what) {
            Some(l) => l.1 += secs,
            None => self.laps.push((what, secs)),
        }
    }

    /// Emits the laps so far as one event (when on): the call's name, its number of keys, and each phase's
    /// host time.
    pub(crate) fn report(&self, call: &str, keys: usize) {
        if self.on {
            let laps: Vec<String> = self
                .laps
                .iter()
                .map(|(w, t)| format!("{w} {:.2} ms", t * 1e3))
                .collect();
            tracing::trace!(
                target: "hashtile",
                table = self.target,
                call,
                keys,
                laps = %laps.join(", "),
                "{} call",
                self.target
            );
        }
    }
}
