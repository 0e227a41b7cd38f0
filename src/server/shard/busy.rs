//! A script that runs past `busy-reply-threshold` holds its shard, as in
//! Redis: while it runs, the shard's other clients get `BUSY`, and only
//! `SCRIPT KILL`, `FUNCTION KILL` and `SHUTDOWN NOSAVE` are run. The
//! script's hook calls [`Busy::serve`], which answers them from here: the
//! event loop is in the middle of the script and cannot.
//!
//! It answers only a connection that owes nothing and has nothing read
//! and not yet run (the loop says which, [`Busy::set_idle`]), so a `BUSY`
//! never overtakes an earlier reply. It peeks at the socket and takes off
//! it only the whole requests it answers; a request that is not whole yet
//! stays in the socket for the loop. A reply the socket does not take at
//! once goes out through the loop once the script is over.

use std::cell::RefCell;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Instant;

use crate::server::resp::{Limits, Parsed, Parser, Reply};
use crate::server::script::function::stats;
use crate::server::Client;

/// Bytes peeked at a time from one connection.
const PEEK: usize = 16 * 1024;

/// What a busy script's hook is told to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Continue,
    /// SCRIPT KILL or FUNCTION KILL, and the script may be stopped.
    Kill,
}

/// A connection as a busy script's hook knows it.
pub struct Entry {
    /// The connection's socket (a second descriptor of it).
    stream: TcpStream,
    /// Owes nothing, holds no request: its next request may be answered.
    idle: bool,
    /// Bytes of replies the socket did not take, for the loop to send.
    owed: Vec<u8>,
    /// Its protocol (HELLO), for the replies.
    proto: u8,
    /// Its transaction as the hook left it.
    tx: TxState,
}

/// A connection's MULTI as a busy script's hook sees and changes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxState {
    /// In MULTI.
    pub multi: bool,
    /// A command was refused (BUSY) while queuing: EXEC aborts.
    pub failed: bool,
    /// The hook changed it: the loop takes it over.
    pub changed: bool,
}

/// The script that runs past its threshold, as FUNCTION STATS shows it.
pub struct Running {
    pub name: String,
    /// The command that runs it, as its client sent it.
    pub command: std::rc::Rc<Vec<Vec<u8>>>,
    pub started: Instant,
    /// Libraries and functions loaded.
    pub libraries: usize,
    pub functions: usize,
}

impl Entry {
    /// A connection known by `stream`, a second descriptor of its socket.
    pub fn of(stream: TcpStream) -> Entry {
        Entry {
            stream,
            idle: false,
            owed: Vec::new(),
            proto: 2,
            tx: TxState::default(),
        }
    }
}

/// The shard's connections as a busy script's hook sees them.
#[derive(Default)]
pub struct Busy {
    conns: RefCell<Vec<Option<Entry>>>,
    /// Where the acceptor hands the loop its new connections.
    incoming: RefCell<Option<Receiver<Handoff>>>,
    /// New connections a busy script's hook took, for the loop to serve.
    arrived: RefCell<Vec<(Handoff, Option<Entry>)>>,
    running: RefCell<Option<Running>>,
    /// Some connection has owed replies or a changed transaction, so the
    /// loop need not look at every one each turn.
    owing: std::cell::Cell<bool>,
}

/// A new connection, as the acceptor hands it over.
pub type Handoff = (Arc<Client>, TcpStream);

impl Busy {
    /// New connections come from `rx`.
    pub fn set_incoming(&self, rx: Receiver<Handoff>) {
        *self.incoming.borrow_mut() = Some(rx);
    }

    /// The new connections to serve: those a busy script answered (with
    /// what it knows of them), then the ones handed over since.
    pub fn accept(&self) -> Vec<(Handoff, Option<Entry>)> {
        let mut out = std::mem::take(&mut *self.arrived.borrow_mut());
        if let Some(rx) = self.incoming.borrow().as_ref() {
            out.extend(rx.try_iter().map(|h| (h, None)));
        }
        out
    }

    /// Connection `token` of the loop, as `e` knows it.
    pub fn join(&self, token: usize, mut e: Entry) {
        let mut conns = self.conns.borrow_mut();
        if conns.len() <= token {
            conns.resize_with(token + 1, || None);
        }
        e.idle = false;
        conns[token] = Some(e);
    }

    /// Connection `token` closes.
    pub fn leave(&self, token: usize) {
        if let Some(e) = self.conns.borrow_mut().get_mut(token) {
            *e = None;
        }
    }

    /// Whether connection `token` owes nothing and holds no request, and
    /// the protocol it speaks.
    pub fn set_idle(&self, token: usize, idle: bool, proto: u8, multi: bool) {
        if let Some(Some(e)) = self.conns.borrow_mut().get_mut(token) {
            e.idle = idle;
            e.proto = proto;
            e.tx = TxState {
                multi,
                ..TxState::default()
            };
        }
    }

    /// What the hook did to connection `token`'s transaction, if anything.
    pub fn take_tx(&self, token: usize) -> Option<TxState> {
        match self.conns.borrow_mut().get_mut(token) {
            Some(Some(e)) if e.tx.changed => Some(std::mem::take(&mut e.tx)),
            _ => None,
        }
    }

    /// The script past its threshold, or (`None`) that it ended.
    pub fn set_running(&self, r: Option<Running>) {
        *self.running.borrow_mut() = r;
    }

    /// Replies to connection `token` answered while a script ran that its
    /// socket did not take: the loop sends them before anything else.
    pub fn take_owed(&self, token: usize) -> Vec<u8> {
        match self.conns.borrow_mut().get_mut(token) {
            Some(Some(e)) => std::mem::take(&mut e.owed),
            _ => Vec::new(),
        }
    }

    /// The connections with such replies.
    pub fn owing(&self) -> Vec<usize> {
        if !self.owing.replace(false) {
            return Vec::new();
        }
        let conns = self.conns.borrow();
        (0..conns.len())
            .filter(|&t| {
                conns[t]
                    .as_ref()
                    .is_some_and(|e| !e.owed.is_empty() || e.tx.changed)
            })
            .collect()
    }

    /// Answers what the idle connections sent, new ones too (`open`: they
    /// need no AUTH). `function`: the script is a function (FCALL);
    /// `wrote`: it has written, so it cannot be killed. SHUTDOWN NOSAVE
    /// ends the process here: the script's writes, never submitted, are
    /// lost whole, as none of its replies went out.
    pub fn serve(&self, limits: Limits, open: bool, function: bool, wrote: bool) -> Verdict {
        if let Some(rx) = self.incoming.borrow().as_ref() {
            let mut arrived = self.arrived.borrow_mut();
            for (client, stream) in rx.try_iter() {
                let known = stream
                    .set_nonblocking(true)
                    .and_then(|()| stream.try_clone());
                let entry = known.ok().map(|peer| Entry {
                    idle: open,
                    ..Entry::of(peer)
                });
                arrived.push(((client, stream), entry));
            }
        }
        let mut verdict = Verdict::Continue;
        let mut buf = vec![0u8; PEEK];
        let mut conns = self.conns.borrow_mut();
        let mut arrived = self.arrived.borrow_mut();
        let known = conns
            .iter_mut()
            .flatten()
            .chain(arrived.iter_mut().filter_map(|(_, e)| e.as_mut()));
        for e in known {
            if !e.idle || !e.owed.is_empty() {
                continue;
            }
            let n = match e.stream.peek(&mut buf) {
                Ok(n) => n,
                Err(_) => continue,
            };
            let mut parser = Parser::new(limits);
            let (mut taken, mut out) = (0, Vec::new());
            while taken < n {
                match parser.parse(&buf[taken..n]) {
                    Ok(Parsed::Request(args, len)) => {
                        taken += len;
                        let (reply, kill) = self.answer(&args, &mut e.tx, function, wrote);
                        if kill {
                            verdict = Verdict::Kill;
                        }
                        reply.encode(&mut out, e.proto);
                    }
                    Ok(Parsed::Skip(len)) => taken += len,
                    // Not whole yet, or not a request: the loop's.
                    Ok(Parsed::Incomplete) | Err(_) => break,
                }
            }
            if taken == 0 {
                continue;
            }
            if e.stream.read_exact(&mut buf[..taken]).is_err() {
                continue;
            }
            let mut sent = 0;
            while sent < out.len() {
                match e.stream.write(&out[sent..]) {
                    Ok(0) => break,
                    Ok(k) => sent += k,
                    Err(err) if err.kind() == ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            e.owed.extend_from_slice(&out[sent..]);
            if !e.owed.is_empty() || e.tx.changed {
                self.owing.set(true);
            }
        }
        verdict
    }
}

impl Busy {
    /// The reply to a request sent while a script is busy, and whether it
    /// stops the script.
    fn answer(
        &self,
        args: &[Vec<u8>],
        tx: &mut TxState,
        function: bool,
        wrote: bool,
    ) -> (Reply, bool) {
        let word = |i: usize| args.get(i).map(|a| a.to_ascii_lowercase());
        let (cmd, sub) = (word(0).unwrap_or_default(), word(1));
        let busy = |kill_with: &str| {
            Reply::Error(format!(
            "BUSY Redis is busy running a script. You can only call {kill_with} or SHUTDOWN NOSAVE."
        ))
        };
        let own = if function {
            "FUNCTION KILL"
        } else {
            "SCRIPT KILL"
        };
        match (cmd.as_slice(), sub.as_deref(), args.len()) {
            (b"script" | b"function", Some(b"kill"), 2) => {
                let by_function = cmd == b"function";
                if wrote {
                    (Reply::Error(
                    "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into(),
                ), false)
                } else if by_function != function {
                    // SCRIPT KILL of a function, FUNCTION KILL of a script.
                    (busy(own), false)
                } else {
                    (Reply::Simple("OK".into()), true)
                }
            }
            (b"function", Some(b"stats"), 2) => (self.stats(), false),
            (b"shutdown", Some(b"nosave"), 2) => {
                tracing::warn!("SHUTDOWN NOSAVE while a script runs: exiting at once");
                println!("SHUTDOWN NOSAVE while a script runs: exiting at once");
                let _ = std::io::stdout().flush();
                std::process::exit(0);
            }
            // MULTI and DISCARD go on (Redis lets them); EXEC ends the
            // transaction unrun, and anything else refused while queuing
            // makes it fail.
            (b"multi", None, 1) if tx.multi => (Reply::err("MULTI calls can not be nested"), false),
            (b"multi", None, 1) => {
                *tx = TxState {
                    multi: true,
                    failed: false,
                    changed: true,
                };
                (Reply::Simple("OK".into()), false)
            }
            (b"discard", None, 1) if tx.multi => {
                *tx = TxState {
                    changed: true,
                    ..TxState::default()
                };
                (Reply::Simple("OK".into()), false)
            }
            (b"exec", None, 1) if tx.multi => {
                *tx = TxState {
                    changed: true,
                    ..TxState::default()
                };
                let Reply::Error(why) = busy(own) else {
                    unreachable!("busy is an error")
                };
                (
                    Reply::Error(format!("EXECABORT Transaction discarded because of: {why}")),
                    false,
                )
            }
            _ => {
                if tx.multi {
                    tx.failed = true;
                    tx.changed = true;
                }
                (busy(own), false)
            }
        }
    }

    /// FUNCTION STATS while the script runs.
    fn stats(&self) -> Reply {
        match &*self.running.borrow() {
            Some(r) => {
                let running = Reply::Map(vec![
                    (Reply::bulk("name"), Reply::bulk(r.name.as_str())),
                    (
                        Reply::bulk("command"),
                        Reply::Array(r.command.iter().map(|a| Reply::Bulk(a.clone())).collect()),
                    ),
                    (
                        Reply::bulk("duration_ms"),
                        Reply::Int(r.started.elapsed().as_millis() as i64),
                    ),
                ]);
                stats(running, r.libraries, r.functions)
            }
            None => stats(Reply::Nil, 0, 0),
        }
    }
}
