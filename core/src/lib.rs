//! # hashtile-core
//!
//! The pieces every hashtile table is made of, independent of any backend:
//!
//! - [`element`]: key / value traits with their sentinels,
//! - [`hash`]: the seeded hash family (one source for host and kernels),
//! - [`scheme`]: the probing-scheme trait, written as pure step functions over a [`scheme::BucketView`],
//! - [`tile`]: the tile-cooperative bucket, the only place that uses plane (warp) operations and atomics,
//! - [`error`]: the typed error enum,
//! - [`probes`]: probe statistics,
//! - [`reduce`]: the reductions of `insert_or_apply` (add, min, max, assign, your own).
//!
//! See `docs/ARCHITECTURE.md` for the picture of how they fit together.

pub mod element;
pub mod error;
pub mod hash;
pub mod probes;
pub mod reduce;
pub mod scheme;
pub mod tile;

pub use element::{Element, Key, Value};
pub use error::{Error, Result};
pub use hash::HashFamily;
pub use probes::{OpKind, ProbeStats};
pub use scheme::{BucketView, ProbeState, ProbingScheme, SchemeParams, Step};
