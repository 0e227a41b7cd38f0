//! Benchmarks shared by the CLI (`stria devbench`) and `benches/`.

pub mod device;
pub mod latency;
pub mod table;
