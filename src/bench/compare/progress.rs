//! Progress of a comparison: a bar on a terminal, a line per run where
//! standard error is not one (a log, CI).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use super::sample::Sample;
use crate::bench::latency::fmt_us;

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Counts `total` runs.
    pub fn new(total: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
                    .expect("a valid template"),
            );
            bar
        });
        Progress { bar }
    }

    /// A run begins.
    pub fn start(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
        }
    }

    /// A run ended with `sample`.
    pub fn done(&self, what: &str, sample: &Sample) {
        self.line(&format!("{what}: {}", summary(sample)));
        self.step();
    }

    pub fn step(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// A line above the bar (or on its own without one).
    pub fn line(&self, text: &str) {
        match &self.bar {
            Some(b) => b.println(text),
            None => eprintln!("{text}"),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// One line of a run's figures.
pub fn summary(s: &Sample) -> String {
    let mut out = format!(
        "{:.0} ops/s, {:.1} MB/s, {:.1} CPU s per million ops, {:.2} cs/op",
        s.ops_per_sec(),
        s.mb_per_sec(),
        s.cpu_per_mop(),
        s.switches_per_op()
    );
    if let Some(p50) = s.latency.p50 {
        out.push_str(&format!(", p50 {}us", fmt_us(p50)));
    }
    if let Some(p99) = s.latency.p99 {
        out.push_str(&format!(" p99 {}us", fmt_us(p99)));
    }
    out
}
