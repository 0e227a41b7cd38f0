//! Stria: a write-path storage appliance.
//!
//! Layers, bottom up (see ARCHITECTURE.md):
//! - [`device`]: raw block devices (sim, psync, uring; spdk behind a feature)
//!   behind one trait, with per-reactor queues.
//! - [`reactor`]: pinned poll-mode threads that own device queues.
//! - [`config`]: the YAML device map, validated at start.
//! - [`devbench`]: the raw device benchmark behind `stria devbench`.

pub mod bench;
pub mod config;
pub mod device;
pub mod layout;
pub mod reactor;
