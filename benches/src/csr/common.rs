//! What the `csr` mode's host rows and device rows share: the result row, one case's input and the build
//! methods' names.

use hashtile::{Backend, CsrBuild};

/// One result row.
pub(super) struct CsrRow {
    pub(super) backend: Backend,
    /// Device-resident data (kernel rates) rather than host data.
    pub(super) resident: bool,
    pub(super) dups: usize,
    pub(super) range: f64,
    pub(super) op: String,
    /// Build method of the table(s) the call used.
    pub(super) build: String,
    /// Lookup tile width (device rows: the width that ran; host rows: as requested, 0 = automatic; builds: 0).
    pub(super) tile: u32,
    pub(super) keys: usize,
    pub(super) rate: f64,
    /// The row's baseline rate: the multimap (host rows) or BCHT's device insert of unique keys (resident rows).
    pub(super) baseline: f64,
    /// Host rows on GPUs: the rate the pageable bus alone allows for the call's bytes (plain driver copies
    /// measured in the same run; NaN elsewhere). A row near it is bound by the bus, so its swings between runs
    /// are the bus's.
    pub(super) bus: f64,
    pub(super) ok: bool,
}

impl CsrRow {
    /// Where the row's data lived, as the table and CSV name it.
    pub(super) fn data(&self) -> &'static str {
        if self.resident { "device" } else { "host" }
    }
}

/// The input of one (duplicates, hash range) case.
pub(super) struct Case {
    pub(super) dups: usize,
    pub(super) range: f64,
    pub(super) keys: Vec<u32>,
    pub(super) values: Vec<u32>,
    /// The sum of every value `find_all` of all keys returns: each key is queried `dups` times and finds its
    /// `dups` values, so each value is returned `dups` times.
    pub(super) value_sum_all: u64,
}

/// A build method as rows name it.
pub(super) fn build_name(b: CsrBuild) -> String {
    match b {
        CsrBuild::V1 => "v1".into(),
        CsrBuild::V2 { bin_vertices } => format!("v2/{bin_vertices}"),
    }
}
