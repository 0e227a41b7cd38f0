//! A minimal blocking RESP2 client for the benches: one request at a time,
//! arrays of bulk strings out, `+ - : $ *` replies in.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A reply of the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`
    Simple(String),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo`; `None` for the null bulk string `$-1`.
    Bulk(Option<Vec<u8>>),
    /// `*2\r\n...`; `None` for the null array `*-1`.
    Array(Option<Vec<Reply>>),
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum RespError {
    /// The server answered with an error reply (`-ERR ...`).
    #[error("server error: {0}")]
    Server(String),
    /// The reply was not RESP.
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The deepest array nesting accepted in a reply.
const MAX_DEPTH: usize = 32;

/// Appends the command `args` as a RESP array of bulk strings.
pub fn encode<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Reads one reply; an error reply is returned as [`RespError::Server`].
pub fn read_reply<R: BufRead>(r: &mut R) -> Result<Reply, RespError> {
    read_at(r, 0)
}

fn read_at<R: BufRead>(r: &mut R, depth: usize) -> Result<Reply, RespError> {
    let line = read_line(r)?;
    let (kind, rest) = line
        .split_first()
        .ok_or_else(|| RespError::Protocol("empty line".into()))?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    match kind {
        b'+' => Ok(Reply::Simple(text())),
        b'-' => Err(RespError::Server(text())),
        b':' => Ok(Reply::Integer(number(rest)?)),
        b'$' => {
            let len = number(rest)?;
            if len < 0 {
                return Ok(Reply::Bulk(None));
            }
            let len = usize::try_from(len).map_err(|_| bad_len(len))?;
            let mut data = vec![0; len + 2];
            r.read_exact(&mut data)?;
            if !data.ends_with(b"\r\n") {
                return Err(RespError::Protocol(
                    "bulk string not followed by CRLF".into(),
                ));
            }
            data.truncate(len);
            Ok(Reply::Bulk(Some(data)))
        }
        b'*' => {
            let n = number(rest)?;
            if n < 0 {
                return Ok(Reply::Array(None));
            }
            if depth >= MAX_DEPTH {
                return Err(RespError::Protocol("arrays nested too deep".into()));
            }
            let n = usize::try_from(n).map_err(|_| bad_len(n))?;
            let mut items = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                items.push(read_at(r, depth + 1)?);
            }
            Ok(Reply::Array(Some(items)))
        }
        other => Err(RespError::Protocol(format!(
            "unknown reply type {:?}",
            char::from(*other)
        ))),
    }
}

fn bad_len(n: i64) -> RespError {
    RespError::Protocol(format!("bad length {n}"))
}

/// A line without its CRLF.
fn read_line<R: BufRead>(r: &mut R) -> Result<Vec<u8>, RespError> {
    let mut line = Vec::with_capacity(16);
    if r.read_until(b'\n', &mut line)? == 0 {
        return Err(RespError::Io(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection",
        )));
    }
    if !line.ends_with(b"\r\n") {
        return Err(RespError::Protocol(format!(
            "line not ended by CRLF: {:?}",
            String::from_utf8_lossy(&line)
        )));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

fn number(digits: &[u8]) -> Result<i64, RespError> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            RespError::Protocol(format!(
                "not a number: {:?}",
                String::from_utf8_lossy(digits)
            ))
        })
}

/// One connection, one command at a time.
pub struct RespClient {
    reader: BufReader<TcpStream>,
    stream: TcpStream,
    out: Vec<u8>,
}

impl RespClient {
    /// Connects with TCP_NODELAY (each request is one small write).
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<RespClient> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(RespClient {
            reader: BufReader::with_capacity(64 << 10, stream.try_clone()?),
            stream,
            out: Vec::with_capacity(4096),
        })
    }

    /// Connects, retrying refused connections until `timeout` (a server
    /// that has just said it listens may not accept yet).
    pub fn connect_retry(addr: SocketAddr, timeout: Duration) -> io::Result<RespClient> {
        let deadline = Instant::now() + timeout;
        loop {
            match RespClient::connect(addr) {
                Err(e)
                    if e.kind() == io::ErrorKind::ConnectionRefused
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    /// Sends `args` and waits for the reply.
    pub fn command<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Reply, RespError> {
        self.out.clear();
        encode(&mut self.out, args);
        self.stream.write_all(&self.out)?;
        read_reply(&mut self.reader)
    }

    /// Sends `commands` in one write, as a client library's pipeline (or
    /// transaction) does, and reads their replies in order; an error
    /// reply is the first `Err`.
    pub fn pipeline<A: AsRef<[u8]>>(&mut self, commands: &[&[A]]) -> Result<Vec<Reply>, RespError> {
        self.out.clear();
        for args in commands {
            encode(&mut self.out, args);
        }
        self.stream.write_all(&self.out)?;
        commands
            .iter()
            .map(|_| read_reply(&mut self.reader))
            .collect()
    }

    /// Waits for the next reply or push message without sending anything
    /// (a subscriber's messages).
    pub fn next_reply(&mut self) -> Result<Reply, RespError> {
        read_reply(&mut self.reader)
    }

    /// Bounds how long a read waits (`None`: for ever).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Reply, RespError> {
        read_reply(&mut &bytes[..])
    }

    #[test]
    fn encodes_an_array_of_bulk_strings() {
        let mut out = Vec::new();
        encode(&mut out, &[&b"SET"[..], b"k", b""]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn parses_every_reply_type() {
        assert_eq!(parse(b"+OK\r\n").unwrap(), Reply::Simple("OK".into()));
        assert_eq!(parse(b":-42\r\n").unwrap(), Reply::Integer(-42));
        assert_eq!(
            parse(b"$5\r\na\r\nbc\r\n").unwrap(),
            Reply::Bulk(Some(b"a\r\nbc".to_vec()))
        );
        assert_eq!(parse(b"$-1\r\n").unwrap(), Reply::Bulk(None));
        assert_eq!(parse(b"*-1\r\n").unwrap(), Reply::Array(None));
        assert_eq!(
            parse(b"*3\r\n:1\r\n$-1\r\n*1\r\n+x\r\n").unwrap(),
            Reply::Array(Some(vec![
                Reply::Integer(1),
                Reply::Bulk(None),
                Reply::Array(Some(vec![Reply::Simple("x".into())])),
            ]))
        );
    }

    #[test]
    fn error_replies_are_errors() {
        // What Redis 7.0 answers to a command it does not know.
        let e = parse(
            b"-ERR unknown command 'STRIA.DURABILITY', with args beginning with: 'sync' \r\n",
        )
        .unwrap_err();
        match e {
            RespError::Server(m) => assert!(m.starts_with("ERR unknown command"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_replies_are_protocol_errors() {
        for bad in [
            &b"?x\r\n"[..],
            b"+OK\n",
            b":12a\r\n",
            b"$3\r\nabcd\r\n",
            b"\r\n",
        ] {
            assert!(
                matches!(parse(bad), Err(RespError::Protocol(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(matches!(parse(b"$3\r\nab"), Err(RespError::Io(_))));
        assert!(matches!(parse(b""), Err(RespError::Io(_))));
    }
}
