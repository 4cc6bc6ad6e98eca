//! Per-phase timings of the paged calls (diagnosis through `tracing`).

/// Per-phase host times of one paged call, as a `tracing` event (target `hashtile`, level TRACE) while a
/// subscriber listens at that level (diagnosis of the paged calls).
pub(crate) struct Trace {
    on: bool,
    at: std::time::Instant,
    laps: Vec<(&'static str, f64)>,
}

impl Trace {
    pub(crate) fn start() -> Self {
        Self {
            on: tracing::enabled!(target: "hashtile", tracing::Level::TRACE),
            at: std::time::Instant::now(),
            laps: Vec::new(),
        }
    }
    pub(crate) fn lap(&mut self, what: &'static str) {
        if self.on {
            let t = self.at.elapsed().as_secs_f64();
            self.at = std::time::Instant::now();
            match self.laps.iter_mut().find(|l| l.0 == what) {
                Some(l) => l.1 += t,
                None => self.laps.push((what, t)),
            }
        }
    }
    /// Laps ending at `marks` (the last at most `names.len()` of them, paired in order), from the last lap.
    pub(crate) fn split(&mut self, marks: &[std::time::Instant], names: &[&'static str]) {
        if !self.on || marks.len() < names.len() {
            return;
        }
        for (m, what) in marks[marks.len() - names.len()..].iter().zip(names) {
            let t = m.saturating_duration_since(self.at).as_secs_f64();
            self.at = *m;
            match self.laps.iter_mut().find(|l| l.0 == *what) {
                Some(l) => l.1 += t,
                None => self.laps.push((what, t)),
            }
        }
    }
    pub(crate) fn report(&self, call: &str, n: usize) {
        if self.on {
            let laps: Vec<String> = self
                .laps
                .iter()
                .map(|(w, t)| format!("{w} {:.2} ms", t * 1e3))
                .collect();
            tracing::trace!(target: "hashtile", call, keys = n, laps = %laps.join(", "), "paged call");
        }
    }
}
