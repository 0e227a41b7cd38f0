//! Which flush or compaction a free flush reactor runs next.
//!
//! A region runs one flush at a time, so its memstores are flushed oldest
//! first, and one compaction at a time (which may run beside its flush:
//! a compaction merges the files it saw when it started, which are older
//! than any file a flush adds meanwhile). Among the regions free to run,
//! the largest frozen memstore goes first (it frees the most memory), then
//! compactions, then memstores put back after a pass over a full log.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::memstore::Memstore;

pub enum Job {
    Flush(u32, Arc<Memstore>),
    Compact(u32),
}

pub struct Scheduler {
    state: Mutex<State>,
    changed: Condvar,
    /// Flushes queued plus jobs running, readable without the lock.
    active: AtomicUsize,
}

struct State {
    stop: bool,
    /// Frozen memstores in the order they were frozen; true for one that
    /// a pass flushed in part, put back first of its region.
    flushes: Vec<(u32, Arc<Memstore>, bool)>,
    compactions: VecDeque<u32>,
    flushing: Vec<bool>,
    compacting: Vec<bool>,
    running: usize,
}

impl Scheduler {
    pub fn new(regions: usize) -> Scheduler {
        Scheduler {
            state: Mutex::new(State {
                stop: false,
                flushes: Vec::new(),
                compactions: VecDeque::new(),
                flushing: vec![false; regions],
                compacting: vec![false; regions],
                running: 0,
            }),
            changed: Condvar::new(),
            active: AtomicUsize::new(0),
        }
    }

    /// Flushes queued plus jobs running.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    fn count(&self, s: &State) {
        self.active
            .store(s.flushes.len() + s.running, Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("scheduler lock")
    }

    pub fn push_flush(&self, region: u32, ms: Arc<Memstore>) {
        let mut s = self.lock();
        s.flushes.push((region, ms, false));
        self.count(&s);
        drop(s);
        self.changed.notify_all();
    }

    /// Puts back a memstore whose flush left writes for another pass
    /// (before [`Scheduler::done`] lets its region flush again): first of
    /// its region, which flushes oldest first, but after every other
    /// region's, whose flushes may be what frees the log it waits for.
    pub fn requeue_flush(&self, region: u32, ms: Arc<Memstore>) {
        let mut s = self.lock();
        s.flushes.insert(0, (region, ms, true));
        self.count(&s);
    }

    pub fn push_compaction(&self, region: u32) {
        let mut s = self.lock();
        if !s.compactions.contains(&region) {
            s.compactions.push_back(region);
        }
        drop(s);
        self.changed.notify_all();
    }

    /// The next job, waiting for one; `None` once stopped. While it waits,
    /// calls `tick` every 10 ms (without the lock), so an idle flush
    /// reactor can look for work no writer asked for.
    pub fn next(&self, tick: impl Fn()) -> Option<Job> {
        let mut s = self.lock();
        loop {
            if s.stop {
                return None;
            }
            if let Some(job) = s.pick() {
                s.running += 1;
                self.count(&s);
                return Some(job);
            }
            let (g, timeout) = self
                .changed
                .wait_timeout(s, Duration::from_millis(10))
                .expect("scheduler lock");
            s = g;
            if timeout.timed_out() {
                drop(s);
                tick();
                s = self.lock();
            }
        }
    }

    /// A job ended.
    pub fn done(&self, job: &Job) {
        let mut s = self.lock();
        match job {
            Job::Flush(r, _) => s.flushing[*r as usize] = false,
            Job::Compact(r) => s.compacting[*r as usize] = false,
        }
        s.running -= 1;
        self.count(&s);
        drop(s);
        self.changed.notify_all();
    }

    /// Waits until nothing is queued or running, or `failed` says why not.
    pub fn wait_idle<E>(&self, failed: impl Fn() -> Option<E>) -> Result<(), E> {
        let mut s = self.lock();
        loop {
            if let Some(e) = failed() {
                return Err(e);
            }
            if s.flushes.is_empty() && s.compactions.is_empty() && s.running == 0 {
                return Ok(());
            }
            s = self
                .changed
                .wait_timeout(s, Duration::from_millis(20))
                .expect("scheduler lock")
                .0;
        }
    }

    /// Jobs queued or running.
    pub fn backlog(&self) -> (usize, usize, usize) {
        let s = self.lock();
        (s.flushes.len(), s.compactions.len(), s.running)
    }

    pub fn stop(&self) {
        self.lock().stop = true;
        self.changed.notify_all();
    }
}

impl State {
    fn pick(&mut self) -> Option<Job> {
        // Memstores frozen and not yet passed over first, largest first;
        // then compactions; then memstores put back after a pass. A pass
        // over a full log can be put back many times while the log moves
        // a little at a time, and the files it adds are what compaction
        // merges: behind it, they would pile up past what the manifest
        // holds.
        if let Some(job) = self.pick_flush(false) {
            return Some(job);
        }
        if let Some(i) = self
            .compactions
            .iter()
            .position(|&r| !self.compacting[r as usize])
        {
            let r = self.compactions.remove(i).expect("position is in range");
            self.compacting[r as usize] = true;
            return Some(Job::Compact(r));
        }
        self.pick_flush(true)
    }

    /// The first memstore of a free region whose `again` (put back after
    /// a pass) is as asked: the largest of those not put back, the one of
    /// the lowest floor of those put back.
    fn pick_flush(&mut self, again: bool) -> Option<Job> {
        let mut best: Option<usize> = None;
        let mut seen = vec![false; self.flushing.len()];
        for (i, (r, ms, put_back)) in self.flushes.iter().enumerate() {
            let r = *r as usize;
            if seen[r] {
                continue;
            }
            seen[r] = true;
            if self.flushing[r] || *put_back != again {
                continue;
            }
            // A put-back pass waits for log space: the memstore that pins
            // the oldest log goes first, since its flush is what frees it.
            // (By size, a large one put back again and again kept a
            // smaller one of another region, that pinned the log, waiting
            // for good.)
            let better = best.is_none_or(|b| {
                let other = &self.flushes[b].1;
                match again {
                    false => ms.bytes() > other.bytes(),
                    true => ms.floor() < other.floor(),
                }
            });
            if better {
                best = Some(i);
            }
        }
        let (r, ms, _) = self.flushes.remove(best?);
        self.flushing[r as usize] = true;
        Some(Job::Flush(r, ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memstore(floor: u64, bytes: u64) -> Arc<Memstore> {
        let ms = Arc::new(Memstore::new(floor, floor));
        ms.charge(bytes);
        ms
    }

    fn flush_of(job: Option<Job>) -> (u32, u64) {
        match job {
            Some(Job::Flush(r, ms)) => (r, ms.floor()),
            Some(Job::Compact(r)) => panic!("a compaction of region {r}, not a flush"),
            None => panic!("no job"),
        }
    }

    #[test]
    fn put_back_passes_go_last_and_the_oldest_pin_first() {
        let s = Scheduler::new(3);
        // Region 1's pass was put back with the most bytes; region 0's,
        // smaller, pins older log.
        s.requeue_flush(1, memstore(120, 1 << 20));
        s.requeue_flush(0, memstore(60, 1 << 10));
        s.push_compaction(2);
        s.push_flush(2, memstore(130, 10));
        let tick = || {};
        // A memstore not yet passed over first, then the compaction.
        assert_eq!(flush_of(s.next(tick)), (2, 130));
        assert!(matches!(s.next(tick), Some(Job::Compact(2))));
        // Then the put-back pass of the lowest floor, whatever its size.
        assert_eq!(flush_of(s.next(tick)), (0, 60));
        assert_eq!(flush_of(s.next(tick)), (1, 120));
    }

    #[test]
    fn a_region_flushes_its_memstores_oldest_first() {
        let s = Scheduler::new(2);
        s.push_flush(0, memstore(10, 1));
        s.push_flush(0, memstore(20, 1 << 20));
        s.push_flush(1, memstore(15, 100));
        let tick = || {};
        let first = flush_of(s.next(tick));
        let second = flush_of(s.next(tick));
        // Region 1's larger first memstore goes before region 0's small
        // one; region 0's second waits until its first is done.
        assert_eq!((first, second), ((1, 15), (0, 10)));
        s.done(&Job::Flush(0, memstore(10, 1)));
        assert_eq!(flush_of(s.next(tick)), (0, 20));
    }
}
