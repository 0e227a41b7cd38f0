//! Fail points for the simulator (cargo feature `failpoints`): error paths
//! no device fault reaches, struck at a seeded moment. The one armed cuts
//! the power of every device at its Nth hit, as a crash at that point of
//! the code would leave them: between the two copies of a manifest
//! record, half-way through a compaction's file, after a flush's file is
//! written and before the manifest records it.
//!
//! Fail points are global to the process: a hit by another test's engine
//! cuts this life's devices early, which is one more crash the checks
//! take as any other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::device::sim::SimDevice;
use crate::engine::EngineDevices;

const POINTS: [&str; 3] = [
    "manifest-between-copies",
    "compaction-half-way",
    "flush-before-manifest",
];

/// Power cuts the fail points made, for the soak's report.
pub static CUTS: AtomicU64 = AtomicU64::new(0);

/// A fail point armed for one life; disarmed when dropped.
pub struct Armed(&'static str);

impl Armed {
    /// Arms one fail point in half the lives, drawn from `seed` and
    /// `life` apart from the seed's other draws (so a seed runs the same
    /// commands with the feature as without it).
    pub fn maybe(seed: u64, life: u64, devs: &EngineDevices<SimDevice>) -> Option<Armed> {
        let mut rng =
            ChaCha8Rng::seed_from_u64(seed ^ (life + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        if rng.random_bool(0.5) {
            return None;
        }
        let name = POINTS[rng.random_range(0..POINTS.len())];
        let at = rng.random_range(1..=8u64);
        let hits = Arc::new(AtomicU64::new(0));
        let devs: Vec<SimDevice> = devs.wal.iter().chain(&devs.data).cloned().collect();
        fail::cfg_callback(name, move || {
            if hits.fetch_add(1, Ordering::SeqCst) + 1 == at {
                CUTS.fetch_add(1, Ordering::SeqCst);
                for d in &devs {
                    d.cut_power();
                }
            }
        })
        .expect("a fail point");
        Some(Armed(name))
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        fail::remove(self.0);
    }
}
