//! One connection: read, run every complete request, reply in order.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::resp::{Parsed, Parser, ProtocolError, Reply};
use super::stripes::PlainMark;
use super::{Client, Shared};
use crate::config::Durability;
use crate::device::AnyDevice;
use crate::engine::Pending;

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Replies buffered (or writes in flight) before the connection stops
/// taking requests off its buffer and sends what it has.
const MAX_OUT: usize = 1 << 20;
const MAX_SLOTS: usize = 1024;

/// What a connection has read and not yet run: `buf[start..end]`. The
/// buffer is zeroed once, when it grows, not at every read. What buffers
/// hold beyond their first chunk is charged to the server-wide `budget`.
struct Input<'a> {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    budget: &'a AtomicUsize,
}

impl<'a> Input<'a> {
    fn new(budget: &'a AtomicUsize) -> Input<'a> {
        Input {
            buf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            budget,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            // A buffer grown for a large request is given back once it is done.
            if self.buf.len() > 4 * READ_CHUNK {
                self.budget
                    .fetch_sub(self.buf.len() - READ_CHUNK, Ordering::Relaxed);
                self.buf = vec![0; READ_CHUNK];
            }
        }
    }

    /// Room to read into: at least `READ_CHUNK / 2` bytes. What is left of
    /// a request moves to the front first; the parser's limits bound how
    /// far one buffer grows, and `limit` how far all of them together do.
    fn space(&mut self, limit: usize) -> Result<&mut [u8], ProtocolError> {
        if self.buf.len() - self.end < READ_CHUNK / 2 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() - self.end < READ_CHUNK / 2 {
                let grown = (self.buf.len() * 2).max(self.end + READ_CHUNK);
                let more = grown - self.buf.len();
                if self.budget.fetch_add(more, Ordering::Relaxed) + more > limit {
                    self.budget.fetch_sub(more, Ordering::Relaxed);
                    return Err(ProtocolError(format!(
                        "the server's request buffers are full ({limit} bytes over all connections); send smaller requests"
                    )));
                }
                self.buf.resize(grown, 0);
            }
        }
        Ok(&mut self.buf[self.end..])
    }

    fn filled(&mut self, n: usize) {
        self.end += n;
    }
}

impl Drop for Input<'_> {
    fn drop(&mut self) {
        self.budget
            .fetch_sub(self.buf.len() - READ_CHUNK, Ordering::Relaxed);
    }
}

/// A reply in order: ready, or waiting for a write's acknowledgement.
enum Slot<'a> {
    Ready(Reply),
    Write {
        pending: Pending<'a, AnyDevice>,
        mark: PlainMark,
        ok: Reply,
        command: &'static str,
        started: Instant,
    },
}

/// What running a request asks of the connection.
pub enum Outcome<'a> {
    Reply(Reply),
    /// A plain write in flight; `ok` is its reply once acknowledged.
    Write {
        pending: Pending<'a, AnyDevice>,
        mark: PlainMark,
        ok: Reply,
    },
    /// Reply, then close (QUIT).
    Close(Reply),
    /// Close without a reply (SHUTDOWN).
    Stop,
}

/// A connection's state.
pub struct Conn<'a> {
    pub shared: &'a Shared,
    pub client: &'a Client,
    pub proto: u8,
    pub authed: bool,
    pub durability: Durability,
    slots: VecDeque<Slot<'a>>,
    out: Vec<u8>,
}

pub fn serve(shared: &Arc<Shared>, client: &Arc<Client>, stream: TcpStream) {
    let mut conn = Conn {
        shared,
        client,
        proto: 2,
        authed: shared.opts.password.is_none(),
        durability: shared.opts.durability,
        slots: VecDeque::new(),
        out: Vec::with_capacity(16 * 1024),
    };
    if let Err(e) = conn.run(stream) {
        tracing::debug!("client {} ({}): {e}", client.id, client.addr);
    }
}

impl Drop for Conn<'_> {
    /// Writes still in flight are waited for, also when a command panicked:
    /// their stripes must be let go, and the engine's acknowledgement still
    /// comes for them.
    fn drop(&mut self) {
        self.settle();
    }
}

impl<'a> Conn<'a> {
    fn run(&mut self, mut stream: TcpStream) -> std::io::Result<()> {
        let mut parser = Parser::new(self.shared.opts.limits);
        parser.set_authenticated(self.authed);
        let mut input = Input::new(&self.shared.buffered);
        let limit = self.shared.opts.buffer_budget();
        loop {
            let mut off = 0;
            let mut close = false;
            loop {
                let parsed = match parser.parse(&input.bytes()[off..]) {
                    Ok(p) => p,
                    Err(e) => {
                        self.shared.metrics.protocol_error();
                        self.push(Reply::err(&e));
                        close = true;
                        break;
                    }
                };
                match parsed {
                    Parsed::Incomplete => break,
                    Parsed::Skip(n) => off += n,
                    Parsed::Request(args, n) => {
                        off += n;
                        let outcome = self.request(args);
                        parser.set_authenticated(self.authed);
                        match outcome {
                            Outcome::Reply(r) => self.push(r),
                            Outcome::Write { pending, mark, ok } => {
                                self.slots.push_back(Slot::Write {
                                    pending,
                                    mark,
                                    ok,
                                    command: "set",
                                    started: Instant::now(),
                                });
                            }
                            Outcome::Close(r) => {
                                self.push(r);
                                close = true;
                                break;
                            }
                            Outcome::Stop => {
                                close = true;
                                break;
                            }
                        }
                        if self.out.len() >= MAX_OUT || self.slots.len() >= MAX_SLOTS {
                            self.settle();
                            self.send(&mut stream)?;
                        }
                    }
                }
            }
            input.consume(off);
            self.settle();
            self.send(&mut stream)?;
            if close {
                return Ok(());
            }
            let n = loop {
                let space = match input.space(limit) {
                    Ok(space) => space,
                    Err(e) => {
                        self.shared.metrics.protocol_error();
                        Reply::err(&e).encode(&mut self.out, self.proto);
                        self.send(&mut stream)?;
                        return Ok(());
                    }
                };
                match stream.read(space) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            if n == 0 {
                return Ok(());
            }
            input.filled(n);
            self.shared.metrics.bytes_in(n as u64);
        }
    }

    /// Queues a reply after every earlier one.
    fn push(&mut self, r: Reply) {
        if self.slots.is_empty() {
            r.encode(&mut self.out, self.proto);
        } else {
            self.slots.push_back(Slot::Ready(r));
        }
    }

    /// Waits for every write in flight, in order, and encodes the replies.
    pub fn settle(&mut self) {
        while let Some(slot) = self.slots.pop_front() {
            match slot {
                Slot::Ready(r) => r.encode(&mut self.out, self.proto),
                Slot::Write {
                    pending,
                    mark,
                    ok,
                    command,
                    started,
                } => {
                    let result = pending.wait();
                    self.shared.stripes.done(mark);
                    let r = match result {
                        Ok(()) => ok,
                        Err(e) => Reply::err(e),
                    };
                    self.shared
                        .metrics
                        .command(command, started.elapsed(), r.is_error());
                    r.encode(&mut self.out, self.proto);
                }
            }
        }
    }

    fn send(&mut self, stream: &mut TcpStream) -> std::io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        stream.write_all(&self.out)?;
        self.shared.metrics.bytes_out(self.out.len() as u64);
        self.out.clear();
        if self.out.capacity() > 4 * MAX_OUT {
            self.out.shrink_to(16 * 1024);
        }
        Ok(())
    }

    /// Runs one request and records it.
    fn request(&mut self, args: Vec<Vec<u8>>) -> Outcome<'a> {
        let started = Instant::now();
        let client = self.client;
        client
            .last_active
            .store(client.since.elapsed().as_millis() as u64, Ordering::Relaxed);
        let (name, outcome) = self.dispatch(args);
        if let Outcome::Reply(r) | Outcome::Close(r) = &outcome {
            self.shared
                .metrics
                .command(name, started.elapsed(), r.is_error());
        }
        outcome
    }

    /// The time since the client's last command, for CLIENT LIST.
    pub fn idle_of(c: &Client) -> u64 {
        let active = c.last_active.load(Ordering::Relaxed);
        (c.since.elapsed().as_millis() as u64).saturating_sub(active) / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_buffers_stay_within_their_budget_and_give_it_back() {
        let budget = AtomicUsize::new(0);
        let limit = 3 * READ_CHUNK;
        let mut a = Input::new(&budget);
        let mut b = Input::new(&budget);
        // A request that keeps arriving: the buffer grows, charged to the budget.
        let mut grown = 0;
        let refused = loop {
            match a.space(limit) {
                Ok(space) => {
                    let n = space.len();
                    a.filled(n);
                    grown += n;
                }
                Err(e) => break e,
            }
            assert!(grown < 64 * READ_CHUNK, "never refused");
        };
        assert!(refused.0.contains("request buffers are full"), "{refused}");
        let charged = budget.load(Ordering::Relaxed);
        assert!(charged <= limit, "{charged} over {limit}");
        assert_eq!(charged, a.buf.len() - READ_CHUNK);
        // Another connection cannot grow past what is left either.
        b.filled(READ_CHUNK);
        assert!(b.space(limit).is_err());
        // What was read is intact; a buffer of up to four chunks is kept
        // (and stays charged) once its request is done, a larger one given
        // back, and a closed connection gives back all.
        assert_eq!(a.bytes().len(), grown);
        a.consume(grown);
        assert_eq!(budget.load(Ordering::Relaxed), a.buf.len() - READ_CHUNK);
        assert!(a.buf.len() <= 4 * READ_CHUNK);
        drop(a);
        drop(b);
        assert_eq!(budget.load(Ordering::Relaxed), 0);
        // A buffer grown past four chunks goes back as soon as it is done.
        let mut c = Input::new(&budget);
        while c.buf.len() <= 4 * READ_CHUNK {
            let n = c.space(16 * READ_CHUNK).unwrap().len();
            c.filled(n);
        }
        assert!(budget.load(Ordering::Relaxed) > 0);
        let n = c.bytes().len();
        c.consume(n);
        assert_eq!(budget.load(Ordering::Relaxed), 0);
    }
}
