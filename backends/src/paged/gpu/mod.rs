//! The paged tables' GPU side: the child (`child`: a GPU table and its residency, host image and place in
//! the frames), routing host batches to children on the device ([`routing`]: the router and its partition;
//! `route_calls`: its upsert and find calls; `route_framed`: its framed launches; the kernels are the shared
//! `device::route`), and slot frames that let one launch serve every resident child ([`frames`]).

pub(crate) mod child;
pub mod frames;
mod route_calls;
mod route_framed;
pub mod routing;
