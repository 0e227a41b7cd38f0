//! Stria: a write-path storage appliance.
//!
//! Layers, bottom up (see ARCHITECTURE.md):
//! - [`device`]: raw block devices (sim, psync, uring; spdk behind a feature)
//!   behind one trait, with per-reactor queues.
//! - [`reactor`]: pinned poll-mode threads that own device queues.
//! - [`config`]: the YAML device map, validated at start.
//! - [`layout`]: what Stria writes on a device (today, the superblock).
//! - [`admin`]: `format` and `inspect`.
//! - [`bench`]: benchmarks shared by the CLI and `benches/`.
//! - [`wal`]: the write-ahead log's on-device format and recovery.

pub mod admin;
pub mod bench;
pub mod config;
pub mod device;
pub mod layout;
pub mod reactor;
pub mod wal;
