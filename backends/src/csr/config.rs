//! What a CSR table or join is built with: [`CsrConfig`] (hash range, backend, device build and lookup knobs),
//! [`CsrBuild`], [`JoinMethod`], and the device side of a configuration ([`DeviceCsrParams`]).

use crate::runtime::select::{Backend, BackendChoice};
use hashtile_core::{Error, HashFamily, Result};

/// How a CSR table is built.
#[derive(Debug, Clone, PartialEq)]
pub struct CsrConfig {
    /// Number of vertices (hash values). `None`: `range_factor` times the number of keys (at least 1).
    pub vertices: Option<u32>,
    /// Vertices per key when `vertices` is `None` (the paper: 0.5 .. 2). Must be finite and positive.
    pub range_factor: f64,
    /// Seed of the hash function.
    pub seed: u64,
    /// Where the table lives (`Auto`: a GPU when one is there, as for `HashTable`); joins run there too.
    pub backend: BackendChoice,
    /// Which device of the backend (ordinal; default 0, ignored on the CPU): a sharded table's shards each take
    /// their own.
    pub device: usize,
    /// How a device builds the table ([`CsrBuild`]). The CPU build sorts instead; every method stores the same
    /// multimap.
    pub build: CsrBuild,
    /// Lanes that read one query's vertex range together in device lookups: 1 is a thread per query; 2..32 (a
    /// power of two, at most the device's plane size: wider requests run as wide as the plane) is a tile that
    /// reads the range in windows of its width and finds the matches with one ballot per window; 0 picks
    /// automatically. The CPU backend ignores it.
    pub lookup_tile: u32,
    /// Keys per device batch of a device table's lookups from host queries (`None`: the default, 2^26;
    /// larger calls run as consecutive device batches, bounding the device memory of one call), copied in
    /// chunks of half that. Small values are for tests of the batch and chunk boundaries. The CPU backend
    /// ignores it.
    pub batch_keys: Option<usize>,
}

/// How a device builds a CSR table (the paper's two versions). Both leave the same offsets and the same
/// multimap; the order of one key's values differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsrBuild {
    /// HashGraph-V1: count with one atomic per key into the vertex counters, scan, place with an atomic cursor
    /// per vertex.
    V1,
    /// HashGraph-V2: bin the pairs by ranges of `bin_vertices` consecutive vertices first (a power of two from
    /// 256 to 4096), then count, scan and place each bin in shared memory (one cube per bin).
    V2 {
        /// Vertices per bin.
        bin_vertices: u32,
    },
}

impl Default for CsrBuild {
    /// V2 with 512 vertices per bin: the fastest measured on the H100 (2^25 keys, 1 and 32 duplicates per key:
    /// 1.04-1.09x BCHT's device-resident bulk insert; 1024: 0.99-1.02x, 2048: 0.85-0.92x; docs/PERFORMANCE.md).
    fn default() -> Self {
        CsrBuild::V2 { bin_vertices: 512 }
    }
}

impl CsrBuild {
    /// Checks the method's parameters.
    pub fn validate(&self) -> Result<()> {
        match *self {
            CsrBuild::V1 => Ok(()),
            CsrBuild::V2 { bin_vertices: b }
                if b.is_power_of_two() && (256..=4096).contains(&b) =>
            {
                Ok(())
            }
            CsrBuild::V2 { bin_vertices } => Err(Error::InvalidConfig(format!(
                "bin_vertices must be a power of two from 256 to 4096 (its counters live in shared memory; 32 KB on some devices), got {bin_vertices}"
            ))),
        }
    }
}

impl Default for CsrConfig {
    fn default() -> Self {
        Self {
            vertices: None,
            range_factor: 1.0,
            seed: hashtile_core::hash::DEFAULT_SEED,
            backend: BackendChoice::Auto,
            device: 0,
            build: CsrBuild::default(),
            lookup_tile: 0,
            batch_keys: None,
        }
    }
}

impl CsrConfig {
    /// This configuration with exactly `vertices` vertices.
    pub fn vertices(mut self, vertices: u32) -> Self {
        self.vertices = Some(vertices);
        self
    }
    /// This configuration on `backend` ([`CsrConfig::backend`]).
    pub fn backend(mut self, backend: BackendChoice) -> Self {
        self.backend = backend;
        self
    }
    /// This configuration on device `ordinal` of its backend ([`CsrConfig::device`]).
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = ordinal;
        self
    }
    /// This configuration with device batches of `keys` keys (see [`CsrConfig::batch_keys`]).
    pub fn batch_keys(mut self, keys: usize) -> Self {
        self.batch_keys = Some(keys);
        self
    }
    /// This configuration with `factor` vertices per key.
    pub fn range_factor(mut self, factor: f64) -> Self {
        self.range_factor = factor;
        self.vertices = None;
        self
    }

    /// The vertex count for `n` keys, checked.
    pub(crate) fn vertices_for(&self, n: usize) -> Result<u32> {
        if n > u32::MAX as usize {
            return Err(Error::InvalidConfig(format!(
                "a CSR table holds at most 2^32 - 1 pairs (offsets are 32-bit), got {n}"
            )));
        }
        match self.vertices {
            Some(0) => Err(Error::InvalidConfig(
                "a CSR table needs at least one vertex".into(),
            )),
            Some(v) => Ok(v),
            None => {
                let f = self.range_factor;
                if !f.is_finite() || f <= 0.0 {
                    return Err(Error::InvalidConfig(format!(
                        "range_factor must be finite and positive, got {f}"
                    )));
                }
                let v = (n as f64 * f).ceil();
                if v > u32::MAX as f64 {
                    return Err(Error::InvalidConfig(format!(
                        "{n} keys at range_factor {f} need {v} vertices, more than 2^32 - 1"
                    )));
                }
                Ok((v as u32).max(1))
            }
        }
    }
}

impl CsrConfig {
    /// Checks the device knobs on every backend: a bad value is a bad configuration wherever `Auto` lands.
    pub(crate) fn check_knobs(&self) -> Result<()> {
        if self.batch_keys == Some(0) {
            return Err(Error::InvalidConfig("batch_keys must be at least 1".into()));
        }
        self.build.validate()?;
        check_lookup_tile(self.lookup_tile)
    }

    /// The device side of this configuration.
    pub(crate) fn device_params(
        &self,
        family: HashFamily,
        vertices: u32,
    ) -> Result<DeviceCsrParams> {
        self.check_knobs()?;
        Ok(DeviceCsrParams {
            device: self.device,
            family,
            vertices,
            build: self.build,
            lookup_tile: self.lookup_tile,
        })
    }

    /// The backend a table goes to (a backend named but absent: the same typed error as `HashTable`'s).
    pub(crate) fn backend_for(&self) -> Result<Backend> {
        match self.backend {
            BackendChoice::Exactly(Backend::Cpu) => Ok(Backend::Cpu),
            BackendChoice::Exactly(b) => {
                if !crate::runtime::select::is_available(b) {
                    return Err(crate::runtime::select::unavailable(b));
                }
                Ok(b)
            }
            BackendChoice::Auto => Ok(crate::runtime::select::resolve(BackendChoice::Auto)),
        }
    }
}

/// Checks a lookup tile width: 0 (automatic) or a power of two up to 32.
pub fn check_lookup_tile(t: u32) -> Result<()> {
    if t > 32 || !(t == 0 || t.is_power_of_two()) {
        return Err(Error::InvalidConfig(format!(
            "lookup_tile must be 0 (automatic) or a power of two up to 32, got {t}"
        )));
    }
    Ok(())
}

/// How `CsrJoin` finds the matching pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinMethod {
    /// Build a table of the left keys (values: their positions) and probe it with each right key.
    Probe,
    /// The paper's: build a table of each side with the same hash function and range, then intersect the two
    /// tables' ranges vertex by vertex (only keys of one vertex can match).
    Intersect,
}

/// What a device CSR call needs besides its data: the hash, the range, the build and the lookup tile.
#[derive(Debug, Clone, Copy)]
pub struct DeviceCsrParams {
    /// The device ordinal of the backend.
    pub device: usize,
    /// The hash family (function 0 picks a key's vertex).
    pub family: HashFamily,
    /// The hash range.
    pub vertices: u32,
    /// How tables are built.
    pub build: CsrBuild,
    /// Lanes per query in lookups ([`CsrConfig::lookup_tile`]).
    pub lookup_tile: u32,
}
