//! Regions whose scans keep stepping over deletes. A delete stays as a
//! tombstone until a compaction that rewrites every file of its region
//! drops it, and until its memstore is flushed it is in memory too: a
//! sorted set whose scores keep moving (a leaderboard's ZINCRBY) leaves a
//! delete in its score order for every move, and every range or rank
//! read of it steps over them all. Scans count what they pass in each
//! region; past a bound, with deletes outweighing the live keys found,
//! the region's memstore is frozen and, once it is flushed, the region's
//! files are compacted into one, even if there is only one: nothing older
//! is left, so its deletes go (RocksDB's deletion-triggered compaction).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::Inner;
use crate::device::Device;

/// Deletes a region's scans pass before it is purged.
pub const PURGE_AFTER: u64 = 1 << 18;

/// ... and how many times the live keys they found that must be.
const DELETES_PER_LIVE: u64 = 4;

/// What a region's scans have passed since it was last purged.
#[derive(Default)]
pub struct Passed {
    deletes: AtomicU64,
    live: AtomicU64,
    /// A purge is asked for: the next compaction of the region runs even
    /// over one file.
    purge: AtomicBool,
}

impl Passed {
    /// A scan passed `deletes` deletes and found `live` live keys: whether
    /// the region is to be purged now (once; the counts start again).
    pub fn record(&self, deletes: u64, live: u64) -> bool {
        if live > 0 {
            self.live.fetch_add(live, Ordering::Relaxed);
        }
        if deletes == 0 {
            return false;
        }
        let d = self.deletes.fetch_add(deletes, Ordering::Relaxed) + deletes;
        if d < PURGE_AFTER || d < DELETES_PER_LIVE * self.live.load(Ordering::Relaxed) {
            return false;
        }
        // One scan starts the counts again and asks.
        if self
            .deletes
            .compare_exchange(d, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.live.store(0, Ordering::Relaxed);
        !self.purge.swap(true, Ordering::AcqRel)
    }

    /// Whether a purge waits for the region's next compaction.
    pub fn purging(&self) -> bool {
        self.purge.load(Ordering::Acquire)
    }

    /// Takes the request, for the compaction that carries it out.
    pub fn take(&self) -> bool {
        self.purge.swap(false, Ordering::AcqRel)
    }
}

impl<D: Device<Queue: Send> + Clone> Inner<D> {
    /// Purges region `r`: its memstore is frozen (the compaction follows
    /// its flush), or, with nothing to flush, its files are compacted.
    pub(super) fn purge(&self, r: usize) {
        tracing::info!(
            "region {r}: scans passed {PURGE_AFTER} deleted keys or more; compacting them away"
        );
        self.counters.purges.fetch_add(1, Ordering::Relaxed);
        let mut st = self.region[r].lock();
        if !st.active.is_unused() {
            self.freeze_locked(r, &mut st);
        } else if st.frozen.is_empty() {
            drop(st);
            self.sched.push_compaction(r as u32);
        }
    }
}
