//! MIGRATE's connections to target servers, kept for reuse as Redis keeps
//! them: at most [`MAX`], each closed after [`IDLE`] unused (the shard's
//! turn calls [`Sockets::close_idle`]), and dropped after any error so the
//! next MIGRATE connects again.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Connections kept at most; a new one past it closes another.
pub const MAX: usize = 64;

/// The longest reply line read from a target (its replies to AUTH,
/// SELECT and RESTORE are short); a longer one is an error.
const MAX_LINE: u64 = 64 << 10;

/// How long an unused connection is kept.
pub const IDLE: Duration = Duration::from_secs(10);

/// A connection to a target, and the database last selected on it.
pub struct Target {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
    pub last_db: Option<i64>,
    used: Instant,
}

impl Target {
    /// Sends `bytes`, giving up after `timeout`.
    pub fn send(&mut self, bytes: &[u8], timeout: Duration) -> io::Result<()> {
        self.stream.set_write_timeout(Some(timeout))?;
        self.stream.write_all(bytes)
    }

    /// Reads one reply line (a status or an error: what AUTH, SELECT and
    /// RESTORE answer), without its CRLF, giving up after `timeout`.
    pub fn read_line(&mut self, timeout: Duration) -> io::Result<Vec<u8>> {
        self.stream.set_read_timeout(Some(timeout))?;
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)?;
        if n == 0 || !line.ends_with(b"\r\n") {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        line.truncate(line.len() - 2);
        Ok(line)
    }
}

/// The connections, by `host:port`.
#[derive(Default)]
pub struct Sockets {
    open: HashMap<String, Target>,
}

impl Sockets {
    /// The connection to `host:port`, kept or new (connecting within
    /// `timeout`); whether it is new.
    pub fn get(
        &mut self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> io::Result<(&mut Target, bool)> {
        let name = format!("{host}:{port}");
        let fresh = !self.open.contains_key(&name);
        if fresh {
            if self.open.len() >= MAX {
                if let Some(k) = self.open.keys().next().cloned() {
                    self.open.remove(&k);
                }
            }
            // Each address the name resolves to, in turn.
            let mut last = io::Error::from(io::ErrorKind::AddrNotAvailable);
            let mut connected = None;
            for addr in (host, port).to_socket_addrs()? {
                match TcpStream::connect_timeout(&addr, timeout) {
                    Ok(s) => {
                        connected = Some(s);
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            let stream = connected.ok_or(last)?;
            stream.set_nodelay(true)?;
            let reader = BufReader::new(stream.try_clone()?);
            self.open.insert(
                name.clone(),
                Target {
                    stream,
                    reader,
                    last_db: None,
                    used: Instant::now(),
                },
            );
        }
        let t = self.open.get_mut(&name).expect("just kept");
        t.used = Instant::now();
        Ok((t, fresh))
    }

    /// Closes the connection to `host:port`, after an error on it.
    pub fn close(&mut self, host: &str, port: u16) {
        self.open.remove(&format!("{host}:{port}"));
    }

    /// Closes the connections unused for [`IDLE`].
    pub fn close_idle(&mut self) {
        if !self.open.is_empty() {
            self.open.retain(|_, t| t.used.elapsed() <= IDLE);
        }
    }

    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}
