//! Probe statistics. A probe is one bucket read, as in the BGHT paper.

/// The kind of bulk operation a probe count belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Insert (including the duplicate check and cuckoo evictions).
    Insert,
    /// Find / contains.
    Find,
}

/// Total probes and operations of one bulk call; `average()` is the paper's "average probes per key".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeStats {
    /// Bucket reads.
    pub probes: u64,
    /// Operations (keys) they served.
    pub ops: u64,
    /// Of `probes`, the re-reads of a bucket after a lost compare-and-swap (GPU inserts only; a concurrent
    /// insert took the slot). The sequential model (CPU deterministic mode, the paper's analysis) has none.
    pub retries: u64,
}

impl ProbeStats {
    /// Probes per operation (0 when there were none).
    pub fn average(&self) -> f64 {
        if self.ops == 0 {
            0.0
        } else {
            self.probes as f64 / self.ops as f64
        }
    }
    /// Probes per operation without the retries: what the sequential model predicts.
    pub fn model_average(&self) -> f64 {
        if self.ops == 0 {
            0.0
        } else {
            (self.probes - self.retries) as f64 / self.ops as f64
        }
    }
    /// Retries per operation (lost compare-and-swaps).
    pub fn retry_rate(&self) -> f64 {
        if self.ops == 0 {
            0.0
        } else {
            self.retries as f64 / self.ops as f64
        }
    }
    /// Sum of two statistics.
    pub fn merged(self, other: Self) -> Self {
        Self {
            probes: self.probes + other.probes,
            ops: self.ops + other.ops,
            retries: self.retries + other.retries,
        }
    }
}
