//! The paged tables' GPU side: routing host batches to children on the device ([`routing`]), slot frames that
//! let one launch serve every resident child ([`frames`]), and the paging kernels ([`kernels`]).

pub mod frames;
pub mod kernels;
pub mod routing;
