//! MIGRATE: moves keys to another server (or copies them, with COPY), as
//! Redis does: DUMP here, RESTORE there (with the key's remaining TTL),
//! over a connection kept for reuse (INFO `migrate_cached_sockets`). A
//! key is deleted here only once the target acknowledged its RESTORE. The
//! shard waits on the target, for at most the timeout per step, as
//! Redis's event loop does. The payload is Stria's DUMP form, so the
//! target is another Stria server: a Redis server refuses it, and MIGRATE
//! replies with the target's error.

use std::time::Duration;

use super::{integer, not_integer, syntax_error, Res};
use crate::server::conn::Conn;
use crate::server::keys;
use crate::server::notify::GENERIC;
use crate::server::resp::Reply;

/// `args` as a RESP request.
fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// What MIGRATE was asked.
struct Request<'r> {
    host: String,
    port: &'r [u8],
    db: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    /// AUTH password, or AUTH2 username password.
    auth: Option<(Option<&'r [u8]>, &'r [u8])>,
    keys: &'r [Vec<u8>],
}

fn parse(args: &[Vec<u8>]) -> Res<Request<'_>> {
    let (mut copy, mut replace, mut auth) = (false, false, None);
    let mut keys = &args[3..4];
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        match args[j].to_ascii_lowercase().as_slice() {
            b"copy" => copy = true,
            b"replace" => replace = true,
            b"auth" if more >= 1 => {
                auth = Some((None, &args[j + 1][..]));
                j += 1;
            }
            b"auth2" if more >= 2 => {
                auth = Some((Some(&args[j + 1][..]), &args[j + 2][..]));
                j += 2;
            }
            b"keys" => {
                if !args[3].is_empty() {
                    return Err(Reply::err(
                        "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                    ));
                }
                keys = &args[j + 1..];
                break;
            }
            _ => return Err(syntax_error()),
        }
        j += 1;
    }
    let timeout = integer(&args[5]).ok_or_else(not_integer)?;
    let db = integer(&args[4]).ok_or_else(not_integer)?;
    let timeout = if timeout <= 0 { 1000 } else { timeout as u64 };
    Ok(Request {
        host: String::from_utf8_lossy(&args[1]).into_owned(),
        port: &args[2],
        db,
        timeout: Duration::from_millis(timeout),
        copy,
        replace,
        auth,
        keys,
    })
}

fn connect_error() -> Reply {
    Reply::Error("IOERR error or timeout connecting to the client".into())
}

fn io_error(writing: bool) -> Reply {
    Reply::Error(format!(
        "IOERR error or timeout {} to target instance",
        if writing { "writing" } else { "reading" }
    ))
}

/// Requests sent before their replies are read: a target that stops
/// reading while its replies wait (as a Stria server does) never has
/// more than this many bytes of requests in front of it, so neither
/// side waits for the other.
const CHUNK_BYTES: usize = 64 << 10;

/// How an exchange with the target ended.
struct Exchange {
    /// The keys (indexes) whose RESTORE the target acknowledged.
    acked: Vec<usize>,
    /// The target's first error, without its `-`.
    error: Option<Vec<u8>>,
    /// A socket error: while writing or not, whether it was a timeout,
    /// and whether anything had been read back before it.
    broken: Option<(bool, bool, bool)>,
}

impl<'a> Conn<'a> {
    /// MIGRATE host port key|"" db timeout [COPY] [REPLACE]
    /// [AUTH password | AUTH2 username password] [KEYS key ...].
    pub(super) fn migrate(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let req = parse(args)?;
        // The keys here, each with its remaining TTL and its dump.
        let now = self.now();
        let mut moving = Vec::new();
        for key in req.keys {
            let Some(m) = self.lookup(key)? else { continue };
            let ttl = match m.expire_at {
                Some(at) if at < now => continue,
                Some(at) => (at - now).max(1),
                None => 0,
            };
            let payload = self.dump_payload(key, &m)?;
            moving.push((key, ttl, payload));
        }
        if moving.is_empty() {
            return Ok(Reply::Status("NOKEY"));
        }
        // A port that is not one cannot be connected to, as in Redis.
        let Some(port) = std::str::from_utf8(req.port)
            .ok()
            .and_then(|p| p.parse().ok())
        else {
            return Err(connect_error());
        };
        // What goes to the target must not be a write a crash here could
        // lose.
        self.shard.make_durable(&self.deps).map_err(Reply::err)?;
        let mut retried = false;
        let done = loop {
            let done = self.exchange(&req, port, &moving)?;
            match done.broken {
                // A kept connection the target closed: once more, on a
                // new one, if nothing was read back.
                Some((_, false, false)) if !retried && done.error.is_none() => retried = true,
                _ => break done,
            }
        };
        if !req.copy && !done.acked.is_empty() {
            let gone: Vec<&[u8]> = done.acked.iter().map(|&i| &moving[i].0[..]).collect();
            self.write(gone.iter().map(|k| (keys::meta(k), None)).collect());
            for k in gone {
                self.notify(GENERIC, "del", k);
            }
        }
        match (done.error, done.broken) {
            (Some(e), _) => Err(Reply::err(format!(
                "Target instance replied with error: {}",
                String::from_utf8_lossy(&e)
            ))),
            (None, Some((writing, _, _))) => Err(io_error(writing)),
            (None, None) => Ok(Reply::ok()),
        }
    }

    /// Sends AUTH, SELECT and a RESTORE per key, [`CHUNK_BYTES`] at a
    /// time, reading each chunk's replies before the next. As in Redis,
    /// every RESTORE that succeeded is acknowledged unless AUTH or SELECT
    /// failed. `Err` only when no connection could be made.
    fn exchange(
        &mut self,
        req: &Request<'_>,
        port: u16,
        moving: &[(&Vec<u8>, u64, Vec<u8>)],
    ) -> Res<Exchange> {
        let shard = self.shard.clone();
        let mut sockets = shard.sockets();
        let timeout = req.timeout;
        let got = sockets.get(&req.host, port, timeout);
        let Ok((target, _)) = got else {
            self.shared.metrics.set_migrate_sockets(sockets.len());
            return Err(connect_error());
        };
        // Each request, and the key it moves (`None`: AUTH or SELECT).
        let mut requests: Vec<(Vec<u8>, Option<usize>)> = Vec::new();
        if let Some((user, password)) = req.auth {
            let mut a: Vec<&[u8]> = vec![b"AUTH"];
            a.extend(user);
            a.push(password);
            requests.push((encode_command(&a), None));
        }
        let select = target.last_db != Some(req.db);
        if select {
            let db = req.db.to_string();
            requests.push((encode_command(&[b"SELECT", db.as_bytes()]), None));
        }
        for (i, (key, ttl, payload)) in moving.iter().enumerate() {
            let ttl = ttl.to_string();
            let mut a: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
            if req.replace {
                a.push(b"REPLACE");
            }
            requests.push((encode_command(&a), Some(i)));
        }
        let timed_out = |e: &std::io::Error| {
            matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            )
        };
        let mut done = Exchange {
            acked: Vec::new(),
            error: None,
            broken: None,
        };
        let mut setup_failed = false;
        let mut read_any = false;
        let mut at = 0;
        'chunks: while at < requests.len() {
            let mut end = at;
            let mut out = Vec::new();
            while end < requests.len()
                && (end == at || out.len() + requests[end].0.len() <= CHUNK_BYTES)
            {
                out.extend_from_slice(&requests[end].0);
                end += 1;
            }
            if let Err(e) = target.send(&out, timeout) {
                done.broken = Some((true, timed_out(&e), read_any));
                break;
            }
            for (_, key) in &requests[at..end] {
                let line = match target.read_line(timeout) {
                    Ok(l) => l,
                    Err(e) => {
                        done.broken = Some((false, timed_out(&e), read_any));
                        break 'chunks;
                    }
                };
                read_any = true;
                match (line.strip_prefix(b"-"), key) {
                    (Some(e), k) => {
                        setup_failed |= k.is_none();
                        done.error = done.error.take().or(Some(e.to_vec()));
                    }
                    (None, Some(i)) if !setup_failed => done.acked.push(*i),
                    _ => {}
                }
            }
            at = end;
        }
        if done.broken.is_some() {
            sockets.close(&req.host, port);
        } else if done.error.is_some() {
            target.last_db = None;
        } else {
            target.last_db = Some(req.db);
        }
        self.shared.metrics.set_migrate_sockets(sockets.len());
        Ok(done)
    }
}
