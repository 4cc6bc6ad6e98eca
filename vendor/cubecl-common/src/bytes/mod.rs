pub(crate) mod default_controller;
#[cfg(feature = "std")]
pub(crate) mod file;
#[cfg(feature = "shared-bytes")]
mod shared;

mod base;

pub use base::*;
#[cfg(feature = "shared-bytes")]
pub use shared::SharedBytesAllocationController;
