//! The paged tables' GPU side: the child (`child`: a GPU table and its residency, host image and place in
//! the frames), routing host batches to children on the device ([`routing`]), slot frames that let one launch
//! serve every resident child ([`frames`]), and the paging kernels ([`kernels`]).

pub(crate) mod child;
pub mod frames;
pub mod kernels;
pub mod routing;
