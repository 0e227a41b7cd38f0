//! `stria serve` as a child process, for the server tests.
//!
//! [`Map`] writes a small device map into a folder (file devices of a few
//! MiB, reactors that park when idle, optional password, limits and
//! metrics endpoint); [`Server::start`] runs the binary on it with
//! `--listen 127.0.0.1:0`, reads its standard output until `listening on
//! <addr>` and keeps reading it (and standard error) on threads, so the
//! child never blocks on a full pipe and a test can look at everything it
//! printed. The child is killed when the [`Server`] is dropped; the folder
//! belongs to the test, so a second server can start on what the first
//! left behind.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a start (first start: format, then open) may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a clean stop may take.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// The device map a test server runs on.
#[derive(Clone, Debug)]
pub struct Map {
    /// `psync` or `uring`.
    pub backend: &'static str,
    pub password: Option<String>,
    pub max_clients: Option<usize>,
    pub max_bulk: Option<u64>,
    pub max_query: Option<u64>,
    pub max_key: u64,
    pub max_value: u64,
    /// Serve `/metrics` on 127.0.0.1, any free port.
    pub metrics: bool,
    /// The data device's size (24MiB: the smallest the layout takes).
    pub data_size: &'static str,
    /// The map's `wal.durability` (the default of every connection).
    pub durability: &'static str,
    /// `Some(n)`: two WAL devices, `wal0` and `wal1`, and `wal.copies: n`.
    pub wal_copies: Option<usize>,
    /// The map's `wal.submit`: `shard` or `reactor`.
    pub wal_submit: &'static str,
    /// `Some(n)`: two data devices, `data0` and `data1`, and
    /// `flush.copies: n`.
    pub file_copies: Option<usize>,
}

impl Default for Map {
    fn default() -> Map {
        Map {
            backend: "psync",
            password: None,
            max_clients: None,
            max_bulk: None,
            max_query: None,
            max_key: 1024,
            max_value: 64 << 10,
            metrics: false,
            data_size: "24MiB",
            durability: "sync",
            wal_copies: None,
            wal_submit: "shard",
            file_copies: None,
        }
    }
}

impl Map {
    /// The YAML text: one WAL device of 8 MiB (1 MiB segments) and one data
    /// device of 24 MiB, the smallest the layout takes with a 256 KiB
    /// manifest (1 MiB reserved + manifest + 16 MiB of data, rounded up).
    pub fn yaml(&self) -> String {
        let b = self.backend;
        let mut server = String::from("server:\n  listen: 127.0.0.1:6380\n");
        if let Some(p) = &self.password {
            server.push_str(&format!("  password: {p:?}\n"));
        }
        if let Some(n) = self.max_clients {
            server.push_str(&format!("  max-clients: {n}\n"));
        }
        if let Some(n) = self.max_bulk {
            server.push_str(&format!("  max-bulk: {n}\n"));
        }
        if let Some(n) = self.max_query {
            server.push_str(&format!("  max-query: {n}\n"));
        }
        if self.metrics {
            server.push_str("  metrics: 127.0.0.1:0\n");
        }
        let (wal1, copies) = match self.wal_copies {
            Some(n) => (
                format!("  - {{ name: wal1, backend: {b}, path: ./data/wal1.img, size: 8MiB, role: wal, queue-depth: 32 }}\n"),
                format!(", copies: {n}"),
            ),
            None => (String::new(), String::new()),
        };
        let (data1, file_copies) = match self.file_copies {
            Some(n) => (
                format!("  - {{ name: data1, backend: {b}, path: ./data/data1.img, size: {}, role: data, queue-depth: 32 }}\n", self.data_size),
                format!(", copies: {n}"),
            ),
            None => (String::new(), String::new()),
        };
        format!(
            "appliance: servertest
reactors: {{ wal: [0], flush: [1], idle: park, spin-us: 20 }}
devices:
  - {{ name: wal0, backend: {b}, path: ./data/wal0.img, size: 8MiB, role: wal, queue-depth: 32 }}
{wal1}  - {{ name: data0, backend: {b}, path: ./data/data0.img, size: {}, role: data, queue-depth: 32 }}
{data1}wal: {{ segment-size: 1MiB, max-batch: 256KiB, durability: {}{copies}, submit: {} }}
memstore: {{ regions: 4, flush-size: 2MiB, global-limit: 8MiB, max-key: {}, max-value: {} }}
flush: {{ manifest-size: 256KiB{file_copies} }}
{server}",
            self.data_size, self.durability, self.wal_submit, self.max_key, self.max_value
        )
    }

    /// Writes the map to `dir/stria.yaml` and returns its path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        let path = dir.join("stria.yaml");
        std::fs::write(&path, self.yaml()).unwrap();
        path
    }
}

/// A temporary folder under cargo's target directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// What a child printed so far, standard output and standard error apart.
#[derive(Clone, Default)]
pub struct Printed {
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Printed {
    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Both, for failure messages.
    pub fn all(&self) -> String {
        format!("--- stdout\n{}--- stderr\n{}", self.stdout(), self.stderr())
    }
}

fn drain(
    pipe: impl Read + Send + 'static,
    into: Arc<Mutex<String>>,
    lines: Option<std::sync::mpsc::Sender<String>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = BufReader::new(pipe);
        let mut line = String::new();
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    into.lock().unwrap().push_str(&line);
                    if let Some(tx) = &lines {
                        let _ = tx.send(line.clone());
                    }
                }
            }
        }
    })
}

/// The `stria serve` command on the map in `dir`.
fn command(dir: &Path, map: &Map, listen: &str) -> Command {
    map.write(dir);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stria"));
    cmd.args(["serve", "--config", "stria.yaml", "--listen", listen])
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `stria serve` on `map` with `--listen listen` and waits for it to
/// exit (for starts that must fail): its status and what it printed.
pub fn serve_to_exit(dir: &Path, map: &Map, listen: &str) -> (ExitStatus, Printed) {
    let mut child = command(dir, map, listen).spawn().expect("run stria serve");
    let printed = Printed::default();
    let out = drain(child.stdout.take().unwrap(), printed.stdout.clone(), None);
    let err = drain(child.stderr.take().unwrap(), printed.stderr.clone(), None);
    let deadline = Instant::now() + START_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "stria serve --listen {listen} did not exit within {START_TIMEOUT:?}\n{}",
                printed.all()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = out.join();
    let _ = err.join();
    (status, printed)
}

/// A running `stria serve`.
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// Where `/metrics` is served, when the map asks for it.
    pub metrics: Option<SocketAddr>,
    pub dir: PathBuf,
    pub map: Map,
    pub printed: Printed,
    readers: Vec<JoinHandle<()>>,
}

impl Server {
    /// Starts `stria serve` after a clean stop and checks that the start
    /// replayed nothing (the stop flushed every write to block files).
    pub fn start_after_clean_stop(dir: &Path, map: &Map) -> Server {
        let s = Server::start(dir, map);
        assert!(
            s.printed.stdout().contains("replayed 0 WAL records"),
            "{}",
            s.printed.all()
        );
        s
    }

    /// Starts `stria serve` on `map` in `dir` and waits until it listens.
    pub fn start(dir: &Path, map: &Map) -> Server {
        let mut child = command(dir, map, "127.0.0.1:0")
            .spawn()
            .expect("run stria serve");
        let printed = Printed::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let readers = vec![
            drain(
                child.stdout.take().unwrap(),
                printed.stdout.clone(),
                Some(tx),
            ),
            drain(child.stderr.take().unwrap(), printed.stderr.clone(), None),
        ];
        let mut server = Server {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics: None,
            dir: dir.to_path_buf(),
            map: map.clone(),
            printed,
            readers,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    let line = line.trim_end();
                    if let Some(m) = line.strip_prefix("metrics on http://") {
                        let m = m.strip_suffix("/metrics").unwrap_or(m);
                        server.metrics = Some(
                            m.parse()
                                .unwrap_or_else(|e| panic!("metrics address {m:?}: {e}")),
                        );
                    }
                    if let Some(a) = line.strip_prefix("listening on ") {
                        server.addr = a
                            .parse()
                            .unwrap_or_else(|e| panic!("listening address {a:?}: {e}"));
                        return server;
                    }
                }
                Err(_) => {
                    // Ended (stdout closed) or timed out.
                    let status = server.child.as_mut().unwrap().try_wait().unwrap();
                    let _ = server.child.as_mut().unwrap().kill();
                    let _ = server.child.as_mut().unwrap().wait();
                    std::thread::sleep(Duration::from_millis(50));
                    panic!(
                        "stria serve never said `listening on` (exit: {status:?})\n{}",
                        server.printed.all()
                    );
                }
            }
        }
    }

    /// The process ID, for signals.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// `redis://127.0.0.1:PORT/`, with the map's password when it has one.
    pub fn url(&self) -> String {
        match &self.map.password {
            Some(p) => format!("redis://:{p}@{}/", self.addr),
            None => format!("redis://{}/", self.addr),
        }
    }

    /// A connection through the redis crate.
    pub fn client(&self) -> redis::Connection {
        let c = redis::Client::open(self.url()).unwrap();
        let con = c
            .get_connection_with_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr));
        con.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        con.set_write_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        con
    }

    /// A plain TCP connection with timeouts, for raw protocol tests.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr));
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_none()
    }

    /// Sends `signal` to the server.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the PID of a child this process has not yet
        // waited for, so the PID cannot have been reused.
        let r = unsafe { libc::kill(self.pid() as libc::pid_t, signal) };
        assert_eq!(r, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits for the process to exit by itself (after SHUTDOWN or a
    /// signal) and returns its status and everything it printed.
    pub fn wait_exit(mut self) -> (ExitStatus, Printed) {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + STOP_TIMEOUT;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "stria serve did not exit within {STOP_TIMEOUT:?}\n{}",
                    self.printed.all()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        (status, self.printed.clone())
    }

    /// SIGTERM, then a clean exit that says so; returns what it printed.
    pub fn stop(self) -> Printed {
        self.signal(libc::SIGTERM);
        let (status, printed) = self.wait_exit();
        assert!(status.success(), "exit {status}\n{}", printed.all());
        assert!(
            printed.stdout().contains("stopped cleanly"),
            "{}",
            printed.all()
        );
        printed
    }

    /// SIGKILL: the process dies wherever it is.
    pub fn kill9(mut self) -> Printed {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        self.printed.clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `stria args...` in `dir`: whether it succeeded, and what it
/// printed (standard output, then standard error).
pub fn stria(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stria"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("STRIA_CONFIG")
        .output()
        .expect("run stria");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
