//! Stria: a write-path storage appliance.
//!
//! Layers, bottom up (see ARCHITECTURE.md):
//! - [`device`]: raw block devices (sim, psync, uring; spdk behind a feature)
//!   behind one trait, with per-reactor queues.
//! - [`reactor`]: pinned poll-mode threads that own device queues.
//! - [`config`]: the YAML device map, validated at start.
//! - [`layout`]: what Stria writes on a device: the superblock, the manifest
//!   of block files, and the extent allocator of the data devices.
//! - [`admin`]: `format` and `inspect`.
//! - [`bench`]: benchmarks shared by the CLI and `benches/`.
//! - [`wal`]: the write-ahead log: format, group commit, recovery.
//! - [`memstore`]: sorted in-memory maps, memory accounting, the global limit.
//! - [`table`]: the block file format (sorted, immutable tables of entries).
//! - [`engine`]: the in-process API: put/delete/get/scan with a durability
//!   level, flush reactors, compaction, recovery.
//! - [`server`]: the RESP server's INFO sections and Prometheus metrics.

pub mod admin;
pub mod bench;
pub mod config;
pub mod device;
pub mod engine;
pub mod hash;
pub mod layout;
pub mod memstore;
pub mod reactor;
pub mod record;
pub mod server;
pub mod table;
pub mod wal;
