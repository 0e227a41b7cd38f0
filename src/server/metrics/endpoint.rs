//! The HTTP endpoint that serves `/metrics`.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The most bytes of a request (line and headers) the endpoint reads.
pub(super) const MAX_REQUEST: usize = 8 << 10;
/// How long a client has to send its request.
pub(super) const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// How long writing the answer may take.
pub(super) const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Stops a running [`spawn_endpoint`] thread.
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
}

impl ShutdownHandle {
    /// Asks the endpoint to stop: it ends after the request it is serving,
    /// if any. Join its thread to wait for that.
    pub fn shutdown(&self) {
        self.stop.store(true, Relaxed);
        // Wake the blocking accept with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
    }
}

/// Serves `render()` at `GET /metrics` on `addr` (port 0: any free port)
/// from one thread. Returns the address bound, the thread, and the handle
/// that stops it.
pub fn spawn_endpoint(
    addr: SocketAddr,
    render: Arc<dyn Fn() -> String + Send + Sync>,
) -> io::Result<(SocketAddr, JoinHandle<()>, ShutdownHandle)> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let handle = ShutdownHandle {
        stop: stop.clone(),
        addr: bound,
    };
    let thread = std::thread::Builder::new()
        .name("metrics-http".into())
        .spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Relaxed) {
                    break;
                }
                match conn {
                    Ok(stream) => {
                        if let Err(e) = serve(stream, &*render) {
                            tracing::debug!("metrics endpoint: {e}");
                        }
                    }
                    Err(e) => {
                        tracing::warn!("metrics endpoint: accept: {e}");
                        // Out of fds and the like: do not spin on it.
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })?;
    Ok((bound, thread, handle))
}

/// What the request line asked for.
pub(super) enum Asked {
    Get { head: bool, path: String },
    OtherMethod,
    Bad,
}

/// Answers one connection.
pub(super) fn serve(
    mut stream: TcpStream,
    render: &(dyn Fn() -> String + Send + Sync),
) -> io::Result<()> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let asked = match read_request(&mut stream)? {
        Some(head) => parse_request(&head),
        None => {
            respond(&mut stream, "431 Request Header Fields Too Large", "", b"")?;
            return Ok(());
        }
    };
    match asked {
        Asked::Get { head, path } => {
            let path = path.split(['?', '#']).next().unwrap_or("");
            if path == "/metrics" {
                match catch_unwind(AssertUnwindSafe(render)) {
                    Ok(body) => respond_with(
                        &mut stream,
                        "200 OK",
                        "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
                        body.as_bytes(),
                        !head,
                    )?,
                    Err(_) => respond(
                        &mut stream,
                        "500 Internal Server Error",
                        "",
                        b"rendering the metrics failed\n",
                    )?,
                }
            } else {
                respond(
                    &mut stream,
                    "404 Not Found",
                    "",
                    b"not found; try /metrics\n",
                )?;
            }
        }
        Asked::OtherMethod => respond(
            &mut stream,
            "405 Method Not Allowed",
            "Allow: GET, HEAD\r\n",
            b"method not allowed\n",
        )?,
        Asked::Bad => respond(&mut stream, "400 Bad Request", "", b"bad request\n")?,
    }
    let _ = stream.shutdown(Shutdown::Write);
    Ok(())
}

/// Reads up to the blank line ending the headers, within the deadline;
/// `None` when the request is larger than [`MAX_REQUEST`]. A client that
/// closes or stalls early ends with what it sent (parsed as bad).
pub(super) fn read_request(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            return Ok(Some(buf));
        }
        if buf.len() > MAX_REQUEST {
            return Ok(None);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Some(buf));
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(Some(buf)),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(Some(buf));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

pub(super) fn parse_request(head: &[u8]) -> Asked {
    let Some(line_end) = head.iter().position(|&b| b == b'\n') else {
        return Asked::Bad;
    };
    let Ok(line) = std::str::from_utf8(&head[..line_end]) else {
        return Asked::Bad;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Asked::Bad;
    };
    if !version.starts_with("HTTP/1.") || !path.starts_with('/') || method.is_empty() {
        return Asked::Bad;
    }
    match method {
        "GET" => Asked::Get {
            head: false,
            path: path.to_owned(),
        },
        "HEAD" => Asked::Get {
            head: true,
            path: path.to_owned(),
        },
        m if m.bytes().all(|b| b.is_ascii_uppercase()) => Asked::OtherMethod,
        _ => Asked::Bad,
    }
}

pub(super) fn respond(
    stream: &mut TcpStream,
    status: &str,
    headers: &str,
    body: &[u8],
) -> io::Result<()> {
    respond_with(stream, status, headers, body, true)
}

/// Writes a response; the body only with `send_body` (not for HEAD).
pub(super) fn respond_with(
    stream: &mut TcpStream,
    status: &str,
    headers: &str,
    body: &[u8],
    send_body: bool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\n{headers}");
    if !headers.contains("Content-Type") {
        head.push_str("Content-Type: text/plain; charset=utf-8\r\n");
    }
    let _ = write!(
        head,
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if send_body {
        stream.write_all(body)?;
    }
    stream.flush()
}
