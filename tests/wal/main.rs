//! WAL recovery on simulated devices: logs laid out by a minimal test
//! writer, then damaged, crashed and recovered.

mod power_cut;
mod scenarios;
mod writer;
