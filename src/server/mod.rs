//! The RESP server: client connections, commands, INFO and metrics.

pub mod info;
pub mod metrics;
