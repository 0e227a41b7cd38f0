//! When a simulated request completes.
//!
//! Reads and writes share one transfer link of `bandwidth` bytes per second:
//! a transfer starts when the link is free (or at submission, if later) and
//! occupies it for `bytes / bandwidth`; the request then completes after its
//! fixed latency. A flush moves no data and completes `flush_us` after its
//! submission. Time is real (`Instant`), so a reactor parked on a deadline
//! sees the same timing a device would give it.

use std::time::{Duration, Instant};

use crate::config::SimConfig;
use crate::device::IoKind;

/// The latency and bandwidth model of one device.
pub(super) struct Timing {
    write: Duration,
    read: Duration,
    flush: Duration,
    /// Bytes per second; 0 means transfers take no time.
    bandwidth: u64,
    /// When the transfer link is next free.
    link_free: Option<Instant>,
}

impl Timing {
    pub(super) fn new(model: &SimConfig) -> Timing {
        Timing {
            write: Duration::from_micros(model.write_us),
            read: Duration::from_micros(model.read_us),
            flush: Duration::from_micros(model.flush_us),
            bandwidth: model.bandwidth,
            link_free: None,
        }
    }

    /// The completion time of a request of `kind` moving `bytes`, submitted
    /// at `now`; reserves the link for its transfer.
    pub(super) fn due(&mut self, now: Instant, kind: IoKind, bytes: u64) -> Instant {
        let latency = match kind {
            IoKind::Write => self.write,
            IoKind::Read => self.read,
            IoKind::Flush => return now + self.flush,
        };
        if self.bandwidth == 0 {
            return now + latency;
        }
        let start = self.link_free.map_or(now, |free| free.max(now));
        let nanos = u128::from(bytes) * 1_000_000_000 / u128::from(self.bandwidth);
        let end = start + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        self.link_free = Some(end);
        end + latency
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_queue_on_the_link_then_add_latency() {
        let model = SimConfig {
            write_us: 10,
            read_us: 20,
            flush_us: 5,
            bandwidth: 1_000_000,
            ..SimConfig::default()
        };
        let mut t = Timing::new(&model);
        let now = Instant::now();
        let us = Duration::from_micros;
        assert_eq!(t.due(now, IoKind::Write, 1000), now + us(1000 + 10));
        assert_eq!(t.due(now, IoKind::Read, 500), now + us(1500 + 20));
        assert_eq!(t.due(now, IoKind::Flush, 0), now + us(5));
        let later = now + us(10_000);
        assert_eq!(t.due(later, IoKind::Write, 1000), later + us(1000 + 10));
    }

    #[test]
    fn zero_bandwidth_means_unlimited() {
        let model = SimConfig {
            write_us: 0,
            bandwidth: 0,
            ..SimConfig::default()
        };
        let mut t = Timing::new(&model);
        let now = Instant::now();
        assert_eq!(t.due(now, IoKind::Write, 1 << 30), now);
    }
}
