//! `stria bench random-write`: HBase PerformanceEvaluation's randomWrite
//! with autoFlush, over RESP.
//!
//! C clients, each on its own connection and thread, each send R SETs one
//! at a time, waiting for the reply before the next. As in PE, `--rows` is
//! per client and the keys are drawn from all the rows of the run: the key
//! of each SET is `format!("{:010}", random % (R * C))` and its value V
//! fresh random bytes. A run is timed from the moment every client is
//! connected (and has set its durability) to the last reply; every SET's
//! latency, request sent to reply read, goes into one histogram per run.
//!
//! The server is either given (`--connect`) or a `stria serve` the bench
//! starts on a free loopback port and stops with SIGTERM at the end.
//! Durability: each connection sends `STRIA.DURABILITY <level>` first when
//! a level applies: the one given, or `sync` for the server the bench
//! starts. With `--connect` and no `--durability`, nothing is sent and the
//! server's default applies, which is what lets the bench drive another
//! RESP server (such as Redis, which knows no STRIA.DURABILITY). A level
//! the server refuses is fatal: the figures would not be what was asked.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use super::fio::{self, FioReference};
use super::latency::{fmt_us, Latency, Summary};
use super::process::{self, Serve, Stopped, STOP_TIMEOUT};
use super::resp_client::{Reply, RespClient, RespError};
use super::table::Table;
use crate::config::{Config, Durability};

/// What to run.
#[derive(Clone, Debug)]
pub struct RandomWriteOptions {
    /// SETs per client.
    pub rows: u64,
    pub clients: usize,
    pub runs: usize,
    pub value_size: usize,
    /// The level to set on each connection; see the module's comment for
    /// what `None` means.
    pub durability: Option<Durability>,
    /// AUTH with this first (the server the bench starts: the map's
    /// `server.password` when this is absent).
    pub password: Option<String>,
    /// Run fio's write+fdatasync reference for this many seconds.
    pub fio_seconds: Option<u32>,
}

/// Which server to drive.
#[derive(Clone, Debug)]
pub enum Target {
    /// A running server at this address.
    Connect(String),
    /// A `stria serve` the bench starts and stops.
    Serve(Serve),
}

/// One run.
#[derive(Clone, Debug)]
pub struct Run {
    pub rows: u64,
    pub elapsed: Duration,
    pub latency: Latency,
}

impl Run {
    pub fn rows_per_sec(&self) -> f64 {
        self.rows as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// What was measured.
#[derive(Clone, Debug)]
pub struct RandomWriteReport {
    pub opts: RandomWriteOptions,
    /// What was driven, for the header.
    pub server: String,
    pub durability: Option<Durability>,
    pub runs: Vec<Run>,
    /// How the server the bench started stopped.
    pub stopped: Option<Stopped>,
    /// fio's reference and its directory, or why there is none.
    pub fio: Option<Result<(PathBuf, FioReference), String>>,
}

/// Why the bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum RandomWriteError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Server(String),
    #[error("client {client}: {error}")]
    Client { client: usize, error: RespError },
}

/// Runs the bench against `target`; `cfg` is the map of the server the
/// bench starts, and with `--fio` tells where the WAL's disk is.
/// `progress` hears about each run as it ends.
pub fn run(
    target: &Target,
    cfg: &Config,
    opts: &RandomWriteOptions,
    mut progress: impl FnMut(usize, &Run),
) -> Result<RandomWriteReport, RandomWriteError> {
    if opts.rows == 0 || opts.clients == 0 || opts.runs == 0 {
        return Err(RandomWriteError::Usage(
            "--rows, --clients and --runs must be at least 1".into(),
        ));
    }
    if opts.rows.checked_mul(opts.clients as u64).is_none() {
        return Err(RandomWriteError::Usage(
            "--rows times --clients is too large".into(),
        ));
    }
    // Before anything runs: a reference that cannot run is a usage error.
    let fio_dir = match opts.fio_seconds {
        Some(_) => Some(process::wal_dir(cfg).map_err(RandomWriteError::Usage)?),
        None => None,
    };
    let (server, addr, durability, password, label) = match target {
        Target::Connect(a) => {
            let addr = a
                .to_socket_addrs()
                .ok()
                .and_then(|mut it| it.next())
                .ok_or_else(|| RandomWriteError::Usage(format!("--connect {a}: not an address")))?;
            (
                None,
                addr,
                opts.durability,
                opts.password.clone(),
                format!("{addr}"),
            )
        }
        Target::Serve(serve) => {
            let s = serve.start(cfg).map_err(RandomWriteError::Server)?;
            let addr = s.addr;
            (
                Some(s),
                addr,
                Some(opts.durability.unwrap_or(Durability::Sync)),
                opts.password
                    .clone()
                    .or_else(|| cfg.server.password.clone()),
                format!(
                    "{addr} (stria serve with {}, started by the bench)",
                    cfg.source
                ),
            )
        }
    };
    let mut runs = Vec::with_capacity(opts.runs);
    for i in 0..opts.runs {
        let r = one_run(addr, opts, durability, password.as_deref())?;
        progress(i, &r);
        runs.push(r);
    }
    let stopped = match server {
        Some(s) => Some(
            s.stop(STOP_TIMEOUT)
                .map_err(|e| RandomWriteError::Server(format!("stopping stria serve: {e}")))?,
        ),
        None => None,
    };
    let fio = match (fio_dir, opts.fio_seconds) {
        (Some(dir), Some(secs)) => Some(match fio::run(&dir, secs) {
            Ok(Some(r)) => Ok((dir, r)),
            Ok(None) => Err("fio is not installed (Debian: apt install fio)".to_string()),
            Err(e) => Err(e),
        }),
        _ => None,
    };
    Ok(RandomWriteReport {
        opts: opts.clone(),
        server: label,
        durability,
        runs,
        stopped,
        fio,
    })
}

fn one_run(
    addr: SocketAddr,
    opts: &RandomWriteOptions,
    durability: Option<Durability>,
    password: Option<&str>,
) -> Result<Run, RandomWriteError> {
    let total_rows = opts.rows * opts.clients as u64;
    let start = Barrier::new(opts.clients + 1);
    let latency = Mutex::new(Latency::new());
    let failure: Mutex<Option<RandomWriteError>> = Mutex::new(None);
    let fail = |client: usize, error: RespError| {
        failure
            .lock()
            .expect("lock")
            .get_or_insert(RandomWriteError::Client { client, error });
    };
    let mut began = Instant::now();
    std::thread::scope(|s| {
        for c in 0..opts.clients {
            let (start, latency, fail) = (&start, &latency, &fail);
            s.spawn(move || {
                let client = setup(addr, durability, password);
                // Everyone passes the barrier, ready or not, so that nobody
                // waits for a client that failed.
                start.wait();
                let result = client.and_then(|mut client| {
                    let mut l = Latency::new();
                    write_rows(&mut client, opts.rows, total_rows, opts.value_size, &mut l)?;
                    latency.lock().expect("lock").add(&l);
                    Ok(())
                });
                if let Err(e) = result {
                    fail(c, e);
                }
            });
        }
        start.wait();
        began = Instant::now();
    });
    let elapsed = began.elapsed();
    if let Some(e) = failure.into_inner().expect("lock") {
        return Err(e);
    }
    Ok(Run {
        rows: total_rows,
        elapsed,
        latency: latency.into_inner().expect("lock"),
    })
}

/// Connects, authenticates and sets the durability level.
fn setup(
    addr: SocketAddr,
    durability: Option<Durability>,
    password: Option<&str>,
) -> Result<RespClient, RespError> {
    let mut client = RespClient::connect_retry(addr, Duration::from_secs(5))
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot connect to {addr}: {e}")))?;
    if let Some(p) = password {
        client.command(&["AUTH", p])?;
    }
    if let Some(d) = durability {
        match client.command(&["STRIA.DURABILITY", d.as_str()]) {
            Ok(Reply::Simple(ok)) if ok == "OK" => {}
            Ok(other) => {
                return Err(RespError::Protocol(format!(
                    "STRIA.DURABILITY {}: unexpected reply {other:?}",
                    d.as_str()
                )))
            }
            Err(RespError::Server(m)) => {
                return Err(RespError::Server(format!(
                    "the server refused `STRIA.DURABILITY {}`: {m} (not a Stria server? without --durability the bench sends no level and the server's default applies)",
                    d.as_str()
                )))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(client)
}

/// `rows` SETs of random keys below `total_rows`, one at a time.
fn write_rows(
    client: &mut RespClient,
    rows: u64,
    total_rows: u64,
    value_size: usize,
    latency: &mut Latency,
) -> Result<(), RespError> {
    let mut rng = SmallRng::from_os_rng();
    let mut key = Vec::with_capacity(20);
    let mut value = vec![0u8; value_size];
    for _ in 0..rows {
        key.clear();
        super::push_decimal(&mut key, rng.next_u64() % total_rows, 10);
        rng.fill_bytes(&mut value);
        let at = Instant::now();
        let reply = client.command(&[&b"SET"[..], &key, &value])?;
        latency.record(at.elapsed());
        if reply != Reply::Simple("OK".into()) {
            return Err(RespError::Protocol(format!(
                "SET answered {reply:?}, not +OK"
            )));
        }
    }
    Ok(())
}

impl RandomWriteReport {
    /// Every run's latencies together.
    pub fn overall(&self) -> Summary {
        let mut all = Latency::new();
        for r in &self.runs {
            all.add(&r.latency);
        }
        all.summary()
    }
}

impl fmt::Display for RandomWriteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.opts;
        writeln!(
            f,
            "random-write: {} client{} x {} rows (keys below {}), {}-byte values, durability {}; server {}",
            o.clients,
            if o.clients == 1 { "" } else { "s" },
            o.rows,
            o.rows * o.clients as u64,
            o.value_size,
            self.durability
                .map_or("not set (the server's default)", |d| d.as_str()),
            self.server
        )?;
        let mut t = Table::new([
            "run", "rows", "seconds", "rows/s", "mean us", "p50 us", "p99 us", "p99.9 us", "max us",
        ]);
        for (i, r) in self.runs.iter().enumerate() {
            let s = r.latency.summary();
            t.row([
                (i + 1).to_string(),
                r.rows.to_string(),
                format!("{:.3}", r.elapsed.as_secs_f64()),
                format!("{:.0}", r.rows_per_sec()),
                fmt_us(s.mean_us),
                fmt_us(s.p50_us),
                fmt_us(s.p99_us),
                fmt_us(s.p999_us),
                fmt_us(s.max_us),
            ]);
        }
        write!(f, "{t}")?;
        let rates: Vec<f64> = self.runs.iter().map(Run::rows_per_sec).collect();
        let mean = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rates.iter().copied().fold(0.0, f64::max);
        let overall = self.overall();
        writeln!(
            f,
            "summary: {} run{}, rows/s mean {mean:.0} (min {min:.0}, max {max:.0}); latency over all runs {overall}",
            self.runs.len(),
            if self.runs.len() == 1 { "" } else { "s" }
        )?;
        if let Some(s) = &self.stopped {
            if s.killed {
                writeln!(
                    f,
                    "stria serve did not stop within {}s of SIGTERM and was killed",
                    STOP_TIMEOUT.as_secs()
                )?;
            } else if !s.status.success() {
                writeln!(f, "stria serve exited with {} after SIGTERM", s.status)?;
            }
        }
        match &self.fio {
            None => {}
            Some(Err(why)) => writeln!(f, "fio reference: none: {why}")?,
            Some(Ok((dir, r))) => {
                writeln!(f, "fio reference in {}: {r}", dir.display())?;
                writeln!(
                    f,
                    "random-write p50 / fio p50: {:.2}x (the issue's target for stria serve, one client, durability sync: at most 1.5x)",
                    overall.p50_us / r.p50_us().max(1e-9)
                )?;
            }
        }
        Ok(())
    }
}
