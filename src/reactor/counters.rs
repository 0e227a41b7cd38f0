//! What a reactor did, readable from any thread while it runs.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A counter that only the reactor thread writes.
///
/// Readers on other threads may see a value slightly behind, never a torn
/// one. With a single writer, adding is a plain load and store rather than an
/// atomic read-modify-write, which would cost a locked instruction for every
/// counter on every loop iteration.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }

    /// Adds `n`. Only the owning reactor thread may call this.
    pub(crate) fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Sets it to `n`, for a gauge. Only the owning reactor thread (or
    /// one holding its state's lock) may call this.
    pub(crate) fn set(&self, n: u64) {
        self.0.store(n, Relaxed);
    }
}

/// Counters of one reactor.
#[derive(Debug, Default)]
pub struct Counters {
    name: String,
    /// Turns of the loop.
    pub iterations: Counter,
    /// Time in iterations that handled a message, a completion or other work.
    pub busy_ns: Counter,
    /// Time in iterations that found nothing to do, parked time included.
    pub idle_ns: Counter,
    /// The part of `idle_ns` spent parked (deciding to sleep and sleeping).
    pub parked_ns: Counter,
    /// Inbound messages handled.
    pub messages: Counter,
    /// Device completions reported by the work.
    pub completions: Counter,
    /// Other units of work the work reported.
    pub work: Counter,
    /// Times the reactor went to sleep.
    pub parks: Counter,
    /// Sleeps ended by the reactor's doorbell: a message or a stop request.
    pub woken_by_message: Counter,
    /// Sleeps ended by a wait hint: a readable fd or a passed deadline.
    pub woken_by_device: Counter,
}

impl Counters {
    pub(super) fn new(name: &str) -> Counters {
        Counters {
            name: name.to_owned(),
            ..Counters::default()
        }
    }

    /// The reactor's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The counters now, as plain numbers.
    pub fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            name: self.name.clone(),
            iterations: self.iterations.get(),
            busy_ns: self.busy_ns.get(),
            idle_ns: self.idle_ns.get(),
            parked_ns: self.parked_ns.get(),
            messages: self.messages.get(),
            completions: self.completions.get(),
            work: self.work.get(),
            parks: self.parks.get(),
            woken_by_message: self.woken_by_message.get(),
            woken_by_device: self.woken_by_device.get(),
        }
    }
}

/// A copy of a reactor's [`Counters`] at one moment; see there for meanings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CountersSnapshot {
    pub name: String,
    pub iterations: u64,
    pub busy_ns: u64,
    pub idle_ns: u64,
    pub parked_ns: u64,
    pub messages: u64,
    pub completions: u64,
    pub work: u64,
    pub parks: u64,
    pub woken_by_message: u64,
    pub woken_by_device: u64,
}

impl CountersSnapshot {
    /// Fraction of measured time spent busy, in [0, 1].
    pub fn busy_fraction(&self) -> f64 {
        let total = self.busy_ns + self.idle_ns;
        if total == 0 {
            0.0
        } else {
            self.busy_ns as f64 / total as f64
        }
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl fmt::Display for CountersSnapshot {
    /// One line, for logs and the stop report.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reactor {}: {} iterations, busy {:.3} ms ({:.1}%), idle {:.3} ms (parked {:.3} ms), \
             {} messages, {} completions, {} work, {} parks, woken {} by message and {} by device",
            self.name,
            self.iterations,
            ms(self.busy_ns),
            self.busy_fraction() * 100.0,
            ms(self.idle_ns),
            ms(self.parked_ns),
            self.messages,
            self.completions,
            self.work,
            self.parks,
            self.woken_by_message,
            self.woken_by_device,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_reads_what_was_added_and_prints_one_line() {
        let c = Counters::new("wal0");
        c.iterations.add(3);
        c.busy_ns.add(1_500_000);
        c.idle_ns.add(500_000);
        c.messages.add(2);
        let s = c.snapshot();
        assert_eq!((s.iterations, s.messages), (3, 2));
        assert!((s.busy_fraction() - 0.75).abs() < 1e-9);
        let line = s.to_string();
        assert!(!line.contains('\n'));
        assert!(
            line.starts_with("reactor wal0: 3 iterations, busy 1.500 ms (75.0%)"),
            "{line}"
        );
    }
}
