mod fp8_e4m3;
mod fp8_e5m2;
mod fp8_e8m0;

pub use fp8_e4m3::*;
pub use fp8_e5m2::*;
pub use fp8_e8m0::*;
