//! The WAL on simulated devices: recovery of logs laid out by a minimal
//! test writer, then damaged, crashed and recovered (`scenarios`,
//! `power_cut`); and the real WAL's acknowledgements, reopen, log-full
//! back-pressure and failures (`log`). Crash safety under the real WAL is
//! in `wal_crash.rs`.

mod copies;
mod log;
mod power_cut;
mod scenarios;
mod writer;
