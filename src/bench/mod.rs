//! Benchmarks shared by the CLI (`stria devbench`) and `benches/`.

pub mod devbench;
pub mod device;
pub mod flush;
pub mod ingest;
pub mod latency;
pub mod table;
pub mod walpe;
