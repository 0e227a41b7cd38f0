//! The global memstore limit: writers wait above it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The bytes of all memstores together, and the writers it holds back.
///
/// A writer is admitted while the total is below `limit`; at or above it,
/// the writer waits until flushes bring the total below `low` (`low-water
/// × global-limit`). Admission and the charge are not one atomic step, so
/// the total can pass `limit` by at most what the writers admitted at the
/// same instant carry: one write per writer thread.
#[derive(Debug)]
pub struct Memory {
    total: AtomicU64,
    peak: AtomicU64,
    limit: u64,
    low: u64,
    lock: Mutex<()>,
    below: Condvar,
    /// Writers in [`Memory::wait_below_low`]: a release with none skips
    /// the lock and the wake (a system call, even with no one to wake).
    waiting: AtomicU64,
    blocks: AtomicU64,
    blocked_ns: AtomicU64,
}

/// What [`Memory`] counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    pub total: u64,
    pub peak: u64,
    pub limit: u64,
    pub low: u64,
    /// Times a writer waited above the limit, and for how long in all.
    pub blocks: u64,
    pub blocked: Duration,
}

impl Memory {
    pub fn new(limit: u64, low_water: f64) -> Memory {
        let low = ((limit as f64) * low_water) as u64;
        Memory {
            total: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            limit,
            low: low.min(limit),
            lock: Mutex::new(()),
            below: Condvar::new(),
            waiting: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
            blocked_ns: AtomicU64::new(0),
        }
    }

    /// True while writers must wait.
    pub fn is_over(&self) -> bool {
        self.total.load(Ordering::SeqCst) >= self.limit
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::SeqCst)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn low(&self) -> u64 {
        self.low
    }

    /// Adds `bytes` to the total.
    pub fn charge(&self, bytes: u64) {
        let now = self.total.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// Takes `bytes` off the total and wakes the waiting writers once it is
    /// below the low-water mark.
    pub fn release(&self, bytes: u64) {
        let now = self.total.fetch_sub(bytes, Ordering::SeqCst) - bytes;
        // Both sequentially consistent: a writer counts itself before it
        // reads the total, so either it reads this one or it is counted.
        if now < self.low && self.waiting.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock().expect("memory lock");
            self.below.notify_all();
        }
    }

    /// Wakes the waiting writers so they look at `stop` again.
    pub fn wake_all(&self) {
        let _guard = self.lock.lock().expect("memory lock");
        self.below.notify_all();
    }

    /// Waits until the total is below the low-water mark, calling `nudge`
    /// (to schedule flushes) first and again whenever a wait times out with
    /// the total still high (writers that got in meanwhile may have refilled
    /// what the first flushes freed), and checking `stop` on every wake-up
    /// (a failed engine must not leave writers waiting forever). Counts the
    /// wait.
    pub fn wait_below_low<E>(
        &self,
        nudge: impl Fn(),
        stop: impl Fn() -> Option<E>,
    ) -> Result<(), E> {
        let started = Instant::now();
        self.blocks.fetch_add(1, Ordering::Relaxed);
        nudge();
        let mut guard = self.lock.lock().expect("memory lock");
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let result = loop {
            if let Some(e) = stop() {
                break Err(e);
            }
            if self.total.load(Ordering::SeqCst) < self.low {
                break Ok(());
            }
            let (g, timeout) = self
                .below
                .wait_timeout(guard, Duration::from_millis(20))
                .expect("memory lock");
            guard = g;
            if timeout.timed_out() && self.total.load(Ordering::SeqCst) >= self.low {
                drop(guard);
                nudge();
                guard = self.lock.lock().expect("memory lock");
            }
        };
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.blocked_ns.fetch_add(ns, Ordering::Relaxed);
        result
    }

    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            total: self.total(),
            peak: self.peak.load(Ordering::Relaxed),
            limit: self.limit,
            low: self.low,
            blocks: self.blocks.load(Ordering::Relaxed),
            blocked: Duration::from_nanos(self.blocked_ns.load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_writer_waits_above_the_limit_until_below_low_water() {
        let m = Arc::new(Memory::new(1000, 0.5));
        m.charge(1000);
        assert!(m.is_over());
        let m2 = m.clone();
        let t = std::thread::spawn(move || m2.wait_below_low::<()>(|| {}, || None));
        std::thread::sleep(Duration::from_millis(30));
        m.release(400); // 600: still above low water
        std::thread::sleep(Duration::from_millis(30));
        assert!(!t.is_finished());
        m.release(200); // 400
        t.join().unwrap().unwrap();
        let s = m.stats();
        assert_eq!((s.blocks, s.total, s.peak), (1, 400, 1000));
        assert!(s.blocked >= Duration::from_millis(50));
    }

    #[test]
    fn a_stop_condition_ends_the_wait() {
        let m = Memory::new(10, 0.9);
        m.charge(20);
        assert_eq!(m.wait_below_low(|| {}, || Some("failed")), Err("failed"));
    }
}
