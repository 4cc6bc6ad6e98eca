//! Host <-> device plumbing with no knowledge of any table family: the backend choice and the availability
//! probes ([`select`], which make their clients under the kernel cache; re-exported at the crate root), launch
//! geometry and the shared fill / copy
//! kernels ([`launch`]), host transfers ([`transfer`]; pinned memory, huge-page advice and answer vectors in
//! `host_memory`, crate-internal), the one host-I/O layer every family's host calls go through ([`host_io`]),
//! the one runtime dispatch ([`dispatch`]), the persistent kernel cache every client is made under
//! ([`kernel_cache`]), device prefix sums ([`scan`]), phase timings as `tracing` events
//! (`trace`, crate-internal: device-syncing marks and host-time laps), host word casts ([`words`]) and
//! disjoint parallel writes (`disjoint`, crate-internal).

pub(crate) mod disjoint;
pub mod dispatch;
pub mod host_io;
pub(crate) mod host_memory;
pub mod kernel_cache;
pub mod launch;
pub mod scan;
pub mod select;
pub(crate) mod trace;
pub mod transfer;
pub mod words;
