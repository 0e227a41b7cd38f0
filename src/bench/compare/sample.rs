//! What one run of one system measured, and the medians over rounds.

use serde::Serialize;

use crate::bench::latency::Latency;
use crate::bench::procstat::ProcSample;

/// Latency percentiles of a run, in microseconds (a figure the system did
/// not report is `None`: redis-benchmark prints no p99.9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub p9999: Option<f64>,
    pub max: Option<f64>,
}

/// Reads one figure of [`Percentiles`].
pub type Figure = fn(&Percentiles) -> Option<f64>;

/// The percentiles a latency chart draws, with their labels.
pub const CURVE: [(&str, Figure); 6] = [
    ("p50", |p| p.p50),
    ("p90", |p| p.p90),
    ("p99", |p| p.p99),
    ("p99.9", |p| p.p999),
    ("p99.99", |p| p.p9999),
    ("max", |p| p.max),
];

impl Percentiles {
    /// From an HdrHistogram of the run.
    pub fn of(latency: &Latency) -> Percentiles {
        if latency.count() == 0 {
            return Percentiles::default();
        }
        let q = |q: f64| Some(latency.quantile_us(q));
        let s = latency.summary();
        Percentiles {
            mean: Some(s.mean_us),
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p999: q(0.999),
            p9999: q(0.9999),
            max: Some(s.max_us),
        }
    }
}

/// One run of one system on one case of a workload.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Operations completed: writes acknowledged (a batch's records count
    /// one each), or requests answered.
    pub ops: u64,
    /// Bytes of keys and values those operations carried.
    pub bytes: u64,
    pub secs: f64,
    /// CPU time (user + system) of the system measured: this process for
    /// in-process systems, the server's process for servers.
    pub cpu_secs: f64,
    /// Its context switches, voluntary and involuntary.
    pub switches: u64,
    pub latency: Percentiles,
}

impl Sample {
    /// A run of `ops` operations of `bytes` in `secs`, using `usage`.
    pub fn new(ops: u64, bytes: u64, secs: f64, usage: ProcSample, latency: Percentiles) -> Self {
        Sample {
            ops,
            bytes,
            secs,
            cpu_secs: usage.cpu_secs,
            switches: usage.switches,
            latency,
        }
    }

    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }

    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.secs.max(1e-9)
    }

    /// CPU seconds per million operations (the same number as CPU
    /// microseconds per operation).
    pub fn cpu_per_mop(&self) -> f64 {
        self.cpu_secs * 1e6 / self.ops.max(1) as f64
    }

    pub fn switches_per_op(&self) -> f64 {
        self.switches as f64 / self.ops.max(1) as f64
    }
}

/// The medians of a system's runs on one case.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Medians {
    pub runs: usize,
    pub ops_per_sec: f64,
    /// The lowest and highest run, so a reader sees the spread.
    pub ops_per_sec_min: f64,
    pub ops_per_sec_max: f64,
    pub mb_per_sec: f64,
    pub cpu_per_mop: f64,
    pub switches_per_op: f64,
    pub latency: Percentiles,
}

/// The median of `values` (the mean of the middle two of an even count);
/// `None` when there are none.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

impl Medians {
    pub fn of(samples: &[Sample]) -> Medians {
        let m = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect()).unwrap_or(0.0);
        let l = |f: fn(&Percentiles) -> Option<f64>| {
            median(samples.iter().filter_map(|s| f(&s.latency)).collect())
        };
        let rates: Vec<f64> = samples.iter().map(Sample::ops_per_sec).collect();
        Medians {
            runs: samples.len(),
            ops_per_sec: m(Sample::ops_per_sec),
            ops_per_sec_min: rates.iter().copied().fold(f64::INFINITY, f64::min),
            ops_per_sec_max: rates.iter().copied().fold(0.0, f64::max),
            mb_per_sec: m(Sample::mb_per_sec),
            cpu_per_mop: m(Sample::cpu_per_mop),
            switches_per_op: m(Sample::switches_per_op),
            latency: Percentiles {
                mean: l(|p| p.mean),
                p50: l(|p| p.p50),
                p90: l(|p| p.p90),
                p99: l(|p| p.p99),
                p999: l(|p| p.p999),
                p9999: l(|p| p.p9999),
                max: l(|p| p.max),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_odd_and_an_even_count() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![f64::NAN, 5.0]), Some(5.0));
    }

    #[test]
    fn medians_of_runs_and_their_spread() {
        let run = |ops: u64, cpu: f64| Sample {
            ops,
            bytes: ops * 1000,
            secs: 1.0,
            cpu_secs: cpu,
            switches: ops * 2,
            latency: Percentiles {
                p50: Some(ops as f64),
                ..Percentiles::default()
            },
        };
        let m = Medians::of(&[run(100, 0.001), run(300, 0.009), run(200, 0.002)]);
        assert_eq!(m.runs, 3);
        assert_eq!(m.ops_per_sec, 200.0);
        assert_eq!((m.ops_per_sec_min, m.ops_per_sec_max), (100.0, 300.0));
        assert_eq!(m.mb_per_sec, 0.2);
        // 10, 30 and 10 us per op.
        assert!((m.cpu_per_mop - 10.0).abs() < 1e-9, "{}", m.cpu_per_mop);
        assert_eq!(m.switches_per_op, 2.0);
        assert_eq!(m.latency.p50, Some(200.0));
        assert_eq!(m.latency.p99, None);
    }
}
