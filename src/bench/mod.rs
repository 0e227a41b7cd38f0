//! Benchmarks shared by the CLI (`stria devbench`) and `benches/`.

pub mod devbench;
pub mod device;
pub mod latency;
pub mod table;
pub mod walpe;
