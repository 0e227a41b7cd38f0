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

/// Appends `args` as a RESP request.
fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// What MIGRATE was asked.
struct Request<'r> {
    host: String,
    port: u16,
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
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    // A port that is not one cannot be connected to, as in Redis.
    let port = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|p| p.parse().ok())
        .ok_or_else(connect_error)?;
    Ok(Request {
        host,
        port,
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

/// How an exchange with the target ended.
enum Failure {
    /// Writing failed, or reading the first reply: nothing was done there.
    Untouched { writing: bool, timed_out: bool },
    /// Reading failed after the keys `acked` (indexes) were acknowledged.
    Broken { acked: Vec<usize> },
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
        let mut retried = false;
        let outcome = loop {
            match self.exchange(&req, &moving) {
                Ok(r) => break Ok(r),
                Err(Failure::Untouched {
                    timed_out: false, ..
                }) if !retried => {
                    // A kept connection the target closed: once more, on
                    // a new one.
                    retried = true;
                }
                Err(e) => break Err(e),
            }
        };
        let (acked, reply) = match outcome {
            Ok(r) => r,
            Err(Failure::Untouched { writing, .. }) => (Vec::new(), Err(io_error(writing))),
            Err(Failure::Broken { acked }) => (acked, Err(io_error(false))),
        };
        if !req.copy && !acked.is_empty() {
            let gone: Vec<&[u8]> = acked.iter().map(|&i| &moving[i].0[..]).collect();
            self.write(gone.iter().map(|k| (keys::meta(k), None)).collect());
            for k in gone {
                self.notify(GENERIC, "del", k);
            }
        }
        reply
    }

    /// Sends AUTH, SELECT and a RESTORE per key, and reads the replies:
    /// the keys the target acknowledged (as in Redis, every RESTORE that
    /// succeeded, unless AUTH or SELECT failed), and MIGRATE's reply.
    fn exchange(
        &mut self,
        req: &Request<'_>,
        moving: &[(&Vec<u8>, u64, Vec<u8>)],
    ) -> Result<(Vec<usize>, Res<Reply>), Failure> {
        let shard = self.shard.clone();
        let mut sockets = shard.sockets();
        let timeout = req.timeout;
        let (target, _) = match sockets.get(&req.host, req.port, timeout) {
            Ok(t) => t,
            Err(_) => {
                self.shared.metrics.set_migrate_sockets(sockets.len());
                return Ok((Vec::new(), Err(connect_error())));
            }
        };
        let mut out = Vec::new();
        if let Some((user, password)) = req.auth {
            let mut a: Vec<&[u8]> = vec![b"AUTH"];
            a.extend(user);
            a.push(password);
            encode_command(&mut out, &a);
        }
        let select = target.last_db != Some(req.db);
        if select {
            encode_command(&mut out, &[&b"SELECT"[..], req.db.to_string().as_bytes()]);
        }
        for (key, ttl, payload) in moving {
            let ttl = ttl.to_string();
            let mut a: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
            if req.replace {
                a.push(b"REPLACE");
            }
            encode_command(&mut out, &a);
        }
        let timed_out = |e: &std::io::Error| {
            matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            )
        };
        let result = (|| {
            target.send(&out, timeout).map_err(|e| Failure::Untouched {
                writing: true,
                timed_out: timed_out(&e),
            })?;
            let untouched = |e: std::io::Error| Failure::Untouched {
                writing: false,
                timed_out: timed_out(&e),
            };
            // An error of AUTH or SELECT fails every key.
            let mut setup_error = None;
            for _ in 0..usize::from(req.auth.is_some()) + usize::from(select) {
                let line = target.read_line(timeout).map_err(untouched)?;
                setup_error = setup_error.or(line.strip_prefix(b"-").map(<[u8]>::to_vec));
            }
            let mut first_error = setup_error.clone();
            let mut acked = Vec::new();
            for i in 0..moving.len() {
                let line = match target.read_line(timeout) {
                    Ok(l) => l,
                    Err(e) if i == 0 => return Err(untouched(e)),
                    Err(_) => return Err(Failure::Broken { acked }),
                };
                match line.strip_prefix(b"-") {
                    Some(e) => first_error = first_error.or(Some(e.to_vec())),
                    None if setup_error.is_none() => acked.push(i),
                    None => {}
                }
            }
            Ok((acked, first_error))
        })();
        match result {
            Ok((acked, None)) => {
                target.last_db = Some(req.db);
                self.shared.metrics.set_migrate_sockets(sockets.len());
                Ok((acked, Ok(Reply::ok())))
            }
            Ok((acked, Some(e))) => {
                target.last_db = None;
                self.shared.metrics.set_migrate_sockets(sockets.len());
                let e = String::from_utf8_lossy(&e);
                Ok((
                    acked,
                    Err(Reply::err(format!(
                        "Target instance replied with error: {e}"
                    ))),
                ))
            }
            Err(f) => {
                sockets.close(&req.host, req.port);
                self.shared.metrics.set_migrate_sockets(sockets.len());
                Err(f)
            }
        }
    }
}

fn io_error(writing: bool) -> Reply {
    Reply::Error(format!(
        "IOERR error or timeout {} to target instance",
        if writing { "writing" } else { "reading" }
    ))
}
