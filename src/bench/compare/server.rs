//! The server workload of `bench compare`: redis-benchmark against one
//! started server (`stria serve`, or Redis with every write fsynced), each
//! test of each (clients, pipeline) case, with the server's CPU time and
//! context switches per request read from `/proc` around it.

use super::sample::{Percentiles, Sample};
use super::workloads::ServerTest;
use crate::bench::process::ServerProcess;
use crate::bench::procstat;
use crate::bench::redis_compare::{self, CompareOptions};

/// What the server workload runs.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    /// (clients, pipeline) cases.
    pub cases: Vec<(usize, usize)>,
    pub tests: Vec<ServerTest>,
    /// Requests of a test at `-c 50 -P 1` (see [`requests`]).
    pub requests: u64,
    /// Bytes per value (`-d`).
    pub data_size: usize,
}

/// The name of a test's case in the report.
pub fn case_name(test: &ServerTest, clients: usize, pipeline: usize) -> String {
    format!("{} -c {clients} -P {pipeline}", test.name())
}

/// Requests of a test of `clients` x `pipeline`: `requests` times the
/// pipeline depth (a pipelined case completes about that many times as
/// fast), and a fifth with one client, whose every request waits for its
/// own durable write.
pub fn requests(requests: u64, clients: usize, pipeline: usize) -> u64 {
    if clients == 1 {
        (requests / 5).max(1)
    } else {
        redis_compare::requests_of(requests, pipeline)
    }
}

/// Runs every case of `spec` against `server`, in order; `done` hears of
/// each test as it ends.
pub fn run(
    server: &ServerProcess,
    password: Option<&str>,
    spec: &ServerSpec,
    mut done: impl FnMut(&str, &Sample),
) -> Result<Vec<(String, Sample)>, String> {
    let mut out = Vec::new();
    for &(clients, pipeline) in &spec.cases {
        for t in &spec.tests {
            let n = requests(spec.requests, clients, pipeline);
            // redis-benchmark's -n is this per unpipelined request: it
            // multiplies it by the pipeline depth again.
            let opts = CompareOptions {
                requests: n.div_ceil(pipeline as u64).max(1),
                data_size: spec.data_size,
                redis_server: None,
            };
            // What redis-benchmark is told to send (never -n 0: it would
            // run forever).
            let n = redis_compare::requests_of(opts.requests, pipeline);
            let before = procstat::sample(server.pid()).unwrap_or_default();
            let row = redis_compare::benchmark_one(
                server, password, &opts, clients, pipeline, &t.test, t.random,
            )?
            .into_iter()
            .next()
            .ok_or_else(|| format!("redis-benchmark -t {} printed no result", t.test))?;
            let after = procstat::sample(server.pid()).unwrap_or_default();
            let us = |ms: Option<f64>| ms.map(|ms| ms * 1000.0);
            let sample = Sample::new(
                n,
                n * spec.data_size as u64,
                n as f64 / row.rps.max(1e-9),
                after.since(&before),
                Percentiles {
                    mean: us(row.avg_ms),
                    p50: us(row.p50_ms),
                    p99: us(row.p99_ms),
                    max: us(row.max_ms),
                    ..Percentiles::default()
                },
            );
            let name = case_name(t, clients, pipeline);
            done(&name, &sample);
            out.push((name, sample));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_runs_a_fifth_and_a_pipeline_its_depth_times() {
        assert_eq!(requests(20_000, 1, 1), 4_000);
        assert_eq!(requests(20_000, 50, 1), 20_000);
        assert_eq!(requests(20_000, 50, 16), 320_000);
        assert_eq!(requests(3, 1, 1), 1);
    }
}
