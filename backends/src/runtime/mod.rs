//! Host <-> device plumbing with no knowledge of any table family: launch geometry and the shared fill / copy
//! kernels ([`launch`]), host transfers and pinned memory ([`transfer`]), the one runtime dispatch
//! ([`dispatch`]), device prefix sums ([`scan`]), phase timings as `tracing` events (`trace`, crate-internal:
//! device-syncing marks and host-time laps) and host word casts ([`words`]).

pub mod dispatch;
pub mod launch;
pub mod scan;
pub(crate) mod trace;
pub mod transfer;
pub mod words;
