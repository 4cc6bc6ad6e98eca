//! Host <-> device plumbing with no knowledge of any table family: launch geometry and the shared fill / copy
//! kernels ([`launch`]), host transfers and pinned memory ([`transfer`]), the one runtime dispatch
//! ([`dispatch`]), device prefix sums ([`scan`]) and host word casts ([`words`]).

pub mod dispatch;
pub mod launch;
pub mod scan;
pub mod transfer;
pub mod words;
