//! What the server counts, the Prometheus text it exposes, and the small
//! HTTP endpoint that serves it.
//!
//! - [`ServerMetrics`]: connections, bytes and per-command calls, errors
//!   and latency, recorded by every connection thread with relaxed atomics
//!   only (no lock on the command path). Latencies go into a fixed
//!   log-linear histogram per command (8 buckets per power of two of
//!   nanoseconds, so a quantile is within about 6% of the true value).
//!   The command table is fixed when the metrics are made; a name outside
//!   it counts as `unknown`, so clients cannot grow it.
//! - [`render_prometheus`]: the text exposition format (version 0.0.4) of
//!   the server's and the engine's figures, every name prefixed `stria_`.
//! - [`spawn_endpoint`]: one thread answering `GET /metrics` over HTTP/1.1,
//!   one connection at a time, each with a deadline and a size limit.

mod counters;
mod devices;
mod endpoint;
mod errors;
mod prometheus;
#[cfg(test)]
pub(in crate::server) mod testing;
#[cfg(test)]
mod tests;

pub use counters::{CommandSummary, Rates, ServerMetrics, COMMANDS, UNKNOWN_COMMAND};
pub(crate) use devices::unix_secs;
pub use devices::{device_figures, DeviceFigures};
pub use endpoint::{spawn_endpoint, ShutdownHandle};
pub use prometheus::render_prometheus;
