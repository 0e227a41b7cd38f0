//! Servers the RESP benches start and stop: `stria serve` and
//! `redis-server`, as child processes.

use std::io::{self, BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::config::Config;

/// The line `stria serve` prints once it accepts connections.
pub const LISTENING: &str = "listening on ";

/// How long a server has to stop after SIGTERM before it is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends SIGTERM to process `pid`.
pub fn sigterm(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) takes two integers and touches no memory of ours; the
    // pid is that of a child we have not waited for yet, so it cannot have
    // been reused by another process.
    if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Writes back every dirty page of the system (sync(2)), so that what one
/// bench left in the page cache (a buffered ingest's gigabytes) is not
/// written back under the next one's durable writes.
pub fn settle() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

/// A loopback port nobody listened on a moment ago (another process may
/// take it before we use it; good enough for benches and tests).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// True when `program` can be run (it is a path that exists, or a name
/// found on PATH).
pub fn installed(program: &Path) -> bool {
    if program.components().count() > 1 {
        return program.is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// How long `stria serve` may take to open (recover) the engine.
pub const SERVE_TIMEOUT: Duration = Duration::from_secs(300);

/// How to start `stria serve`: the executable (the running `stria`) and
/// the map it gets (`None`: the embedded default).
#[derive(Clone, Debug)]
pub struct Serve {
    pub exe: PathBuf,
    pub config: Option<PathBuf>,
}

impl Serve {
    /// The running executable with `config`.
    pub fn current(config: Option<PathBuf>) -> io::Result<Serve> {
        Ok(Serve {
            exe: std::env::current_exe()?,
            config,
        })
    }

    /// `stria format` with the same map, for messages.
    pub fn format_command(&self) -> String {
        match &self.config {
            Some(c) => format!("stria format --config {}", c.display()),
            None => "stria format".to_string(),
        }
    }

    /// Starts `stria serve [--config F] --listen 127.0.0.1:0` and waits
    /// for its `listening on` line. The file devices of `cfg` (the map the
    /// server gets) must all exist, or none (a first start, which the
    /// server formats): if some do not, says how to create them.
    pub fn start(&self, cfg: &Config) -> Result<ServerProcess, String> {
        let first_start = cfg
            .devices
            .iter()
            .all(|d| d.path().is_some_and(|p| !p.exists()));
        for d in cfg.devices.iter().filter(|_| !first_start) {
            if let Some(path) = d.path() {
                if !path.exists() {
                    return Err(format!(
                        "device {} of {}: {} does not exist; create the devices with `{}` (from this directory: relative paths are relative to it)",
                        d.name,
                        cfg.source,
                        path.display(),
                        self.format_command()
                    ));
                }
            }
        }
        let mut cmd = Command::new(&self.exe);
        cmd.arg("serve");
        if let Some(c) = &self.config {
            cmd.arg("--config").arg(c);
        }
        cmd.args(["--listen", "127.0.0.1:0"]);
        ServerProcess::spawn_announced("stria serve", cmd, SERVE_TIMEOUT).map_err(|e| e.to_string())
    }
}

/// The directory of the map's first WAL device file: where the benches put
/// the files of their references (fio's file, Redis's append-only file),
/// so that they are on the same disk as Stria's log. Made if missing.
pub fn wal_dir(cfg: &Config) -> Result<PathBuf, String> {
    let name = cfg
        .wal
        .devices
        .first()
        .ok_or_else(|| format!("{} has no WAL device", cfg.source))?;
    let dev = cfg.device(name).expect("validated WAL device");
    let path = dev.path().ok_or_else(|| {
        format!(
            "WAL device {name} of {} is a {} device, not a file: no disk to put the reference on",
            cfg.source,
            dev.kind()
        )
    })?;
    if let Ok(meta) = std::fs::metadata(path) {
        if !meta.is_file() {
            return Err(format!(
                "WAL device {name} ({}) is not a regular file: no file system to put the reference on",
                path.display()
            ));
        }
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // The server makes this folder when it formats its devices at its first
    // start; a bench run on a fresh checkout makes it first.
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "cannot create {} (the directory of WAL device {name}): {e}",
            dir.display()
        )
    })?;
    Ok(dir)
}

/// A server child process, stopped (SIGTERM, then SIGKILL after
/// [`STOP_TIMEOUT`]) when dropped.
pub struct ServerProcess {
    name: String,
    child: Option<Child>,
    /// Where it listens.
    pub addr: SocketAddr,
}

/// How a server ended.
#[derive(Clone, Debug)]
pub struct Stopped {
    pub status: ExitStatus,
    /// It did not stop within the timeout and was killed.
    pub killed: bool,
    pub took: Duration,
}

impl ServerProcess {
    /// Starts `cmd` with its standard output piped and waits up to
    /// `timeout` for a line starting with `listening on ` followed by the
    /// address. Later output is read and dropped, so the server never
    /// blocks on a full pipe; standard error is the caller's.
    pub fn spawn_announced(
        name: &str,
        mut cmd: Command,
        timeout: Duration,
    ) -> io::Result<ServerProcess> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {name} ({cmd:?}): {e}")))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("{name}-stdout"))
            .spawn(move || {
                let mut sent = false;
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if !sent {
                        if let Some(rest) = line.trim().strip_prefix(LISTENING) {
                            sent = true;
                            let _ = tx.send(rest.trim().to_string());
                        }
                    }
                }
            })?;
        let mut server = ServerProcess {
            name: name.to_string(),
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let deadline = Instant::now() + timeout;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(addr) => {
                    server.addr = addr.parse().map_err(|_| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("{name} printed `{LISTENING}{addr}`: not an address"),
                        )
                    })?;
                    return Ok(server);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // Standard output closed without the line.
                Err(mpsc::RecvTimeoutError::Disconnected) => {}
            }
            if let Some(status) = server.try_wait()? {
                return Err(io::Error::other(format!(
                    "{name} exited ({status}) before it printed `{LISTENING}<address>`"
                )));
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{name} did not print `{LISTENING}<address>` within {}s",
                        timeout.as_secs()
                    ),
                ));
            }
        }
    }

    /// Starts `cmd` (standard output and error dropped: give the server a
    /// log file) and waits up to `timeout` until `addr` answers PING.
    pub fn spawn_pinged(
        name: &str,
        mut cmd: Command,
        addr: SocketAddr,
        timeout: Duration,
    ) -> io::Result<ServerProcess> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {name} ({cmd:?}): {e}")))?;
        let mut server = ServerProcess {
            name: name.to_string(),
            child: Some(child),
            addr,
        };
        let deadline = Instant::now() + timeout;
        loop {
            let pong = super::resp_client::RespClient::connect(addr)
                .ok()
                .and_then(|mut c| c.command(&["PING"]).ok());
            if pong.is_some() {
                return Ok(server);
            }
            if let Some(status) = server.try_wait()? {
                return Err(io::Error::other(format!(
                    "{name} exited ({status}) before it answered PING on {addr}"
                )));
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{name} did not answer PING on {addr} within {}s",
                        timeout.as_secs()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match &mut self.child {
            Some(c) => c.try_wait(),
            None => Ok(None),
        }
    }

    /// Sends SIGTERM and waits up to `timeout` for the server to exit;
    /// kills it after that.
    pub fn stop(mut self, timeout: Duration) -> io::Result<Stopped> {
        let child = self.child.take().expect("a running server");
        stop_child(child, timeout)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }
}

fn stop_child(mut child: Child, timeout: Duration) -> io::Result<Stopped> {
    let started = Instant::now();
    if let Some(status) = child.try_wait()? {
        return Ok(Stopped {
            status,
            killed: false,
            took: Duration::ZERO,
        });
    }
    sigterm(child.id())?;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Stopped {
                status,
                killed: false,
                took: started.elapsed(),
            });
        }
        if started.elapsed() >= timeout {
            child.kill()?;
            let status = child.wait()?;
            return Ok(Stopped {
                status,
                killed: true,
                took: started.elapsed(),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            let _ = stop_child(child, Duration::from_secs(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_the_announced_address_and_stops_with_sigterm() {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo starting; echo 'listening on 127.0.0.1:4567'; exec sleep 30",
        ]);
        let s = ServerProcess::spawn_announced("sh", cmd, Duration::from_secs(10)).unwrap();
        assert_eq!(s.addr, "127.0.0.1:4567".parse().unwrap());
        let stopped = s.stop(Duration::from_secs(10)).unwrap();
        assert!(!stopped.killed);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(stopped.status.signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn a_server_that_exits_first_is_an_error() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo no; exit 3"]);
        let e = ServerProcess::spawn_announced("sh", cmd, Duration::from_secs(10))
            .err()
            .unwrap();
        assert!(e.to_string().contains("exited"), "{e}");
    }

    #[test]
    fn a_server_that_ignores_sigterm_is_killed() {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "trap '' TERM; echo 'listening on 127.0.0.1:1'; while :; do sleep 0.1; done",
        ]);
        let s = ServerProcess::spawn_announced("sh", cmd, Duration::from_secs(10)).unwrap();
        let stopped = s.stop(Duration::from_millis(300)).unwrap();
        assert!(stopped.killed);
    }

    #[test]
    fn the_wal_folder_of_a_fresh_checkout_is_made() {
        let d = tempfile::tempdir().unwrap();
        let wal = d.path().join("fresh/data/wal0.img");
        let map = format!(
            "appliance: t
reactors: {{ wal: [0], flush: [1], idle: park }}
devices:
  - {{ name: wal0, backend: psync, path: {}, size: 4MiB, role: wal }}
  - {{ name: data0, backend: psync, path: {}, size: 32MiB, role: data }}
wal: {{ segment-size: 1MiB, max-batch: 256KiB }}
",
            wal.display(),
            d.path().join("fresh/data/data0.img").display()
        );
        let cfg = Config::parse(&map, "m.yaml").unwrap();
        assert_eq!(wal_dir(&cfg).unwrap(), d.path().join("fresh/data"));
        assert!(d.path().join("fresh/data").is_dir());
        assert!(!wal.exists(), "the devices are the server's to format");
    }

    #[test]
    fn finds_programs_on_path() {
        assert!(installed(Path::new("sh")));
        assert!(!installed(Path::new("no-such-program-here")));
        assert!(!installed(Path::new("/no/such/program")));
    }
}
