//! Latency recording with HdrHistogram and the summary every bench prints.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Latencies in nanoseconds, 3 significant digits, up to a minute.
#[derive(Clone, Debug)]
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Latency {
        Latency::new()
    }
}

impl Latency {
    pub fn new() -> Latency {
        Latency {
            hist: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds"),
        }
    }

    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.hist.saturating_record(ns);
    }

    pub fn add(&mut self, other: &Latency) {
        self.hist
            .add(&other.hist)
            .expect("histograms with equal bounds");
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The latency at quantile `q` (0..=1), in microseconds.
    pub fn quantile_us(&self, q: f64) -> f64 {
        self.hist.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn summary(&self) -> Summary {
        let us = |ns: u64| ns as f64 / 1000.0;
        Summary {
            count: self.hist.len(),
            mean_us: self.hist.mean() / 1000.0,
            p50_us: us(self.hist.value_at_quantile(0.50)),
            p99_us: us(self.hist.value_at_quantile(0.99)),
            p999_us: us(self.hist.value_at_quantile(0.999)),
            max_us: us(self.hist.max()),
        }
    }
}

/// Mean, percentiles and max, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// Microseconds with precision that suits their size.
pub fn fmt_us(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.2}")
    } else if us < 1000.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "n={} mean={}us p50={}us p99={}us p99.9={}us max={}us",
            self.count,
            fmt_us(self.mean_us),
            fmt_us(self.p50_us),
            fmt_us(self.p99_us),
            fmt_us(self.p999_us),
            fmt_us(self.max_us)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut l = Latency::new();
        for us in 1..=1000 {
            l.record(Duration::from_micros(us));
        }
        let s = l.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50_us - 500.0).abs() < 1.0, "{s}");
        assert!((s.p99_us - 990.0).abs() < 1.5, "{s}");
        assert!((s.max_us - 1000.0).abs() < 1.0, "{s}");
    }
}
