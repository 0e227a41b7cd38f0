//! One connection of a shard reactor's loop: its socket, its requests
//! and replies, and the socket I/O the loop does for it: reading what the
//! client sent and running its complete requests ([`serve`]), noticing a
//! blocked client go ([`watch_for_close`]), and writing its replies
//! without blocking ([`flush`]).

use std::io::{ErrorKind, Read, Write};

use mio::net::TcpStream;

use crate::server::conn::{Conn, Input, Taken};
use crate::server::resp::{Parser, Reply};
use crate::server::Shared;

/// Reads from one connection in one turn, at most: a client that keeps
/// its socket full does not starve the others.
const READS_PER_TURN: usize = 16;

/// One connection of a loop.
pub(super) struct Connection<'a> {
    pub(super) stream: TcpStream,
    pub(super) conn: Conn<'a>,
    pub(super) parser: Parser,
    pub(super) input: Input<'a>,
    /// Bytes of `conn.out` already written.
    pub(super) sent: usize,
    /// The socket may have more to read (readiness is edge-triggered).
    pub(super) readable: bool,
    /// The peer's end was reported (or an error): read until a read
    /// says so, never stop at a short one.
    pub(super) hup: bool,
    /// The client is done sending: answer what it sent, then close.
    pub(super) eof: bool,
    /// Replies wait for the socket to drain.
    pub(super) blocked: bool,
    /// Close once the replies are out.
    pub(super) closing: bool,
    /// The socket failed: close without writing.
    pub(super) dead: bool,
    /// In the next turn's work list.
    pub(super) queued: bool,
    /// In the list of connections with replies to come.
    pub(super) waiting: bool,
}

impl Drop for Connection<'_> {
    /// Out of the registry, also when a panic unwinds the loop. The socket
    /// closes (and leaves the poll) after this; the connection waits for
    /// its writes in flight as it drops.
    fn drop(&mut self) {
        self.conn.shared.forget(&self.conn.client);
    }
}

/// Reads what connection `c` has and runs its complete requests, until its
/// socket is empty, it cannot go on for now, or it closes. True when it
/// stopped with more to do and nothing to wait for: complete requests left
/// after a full turn's replies, or a socket not read to the end.
pub(super) fn serve(shared: &Shared, c: &mut Connection<'_>, stopping: bool) -> bool {
    let limit = shared.opts.buffer_budget();
    let mut reads = 0;
    if c.conn.is_blocked() {
        watch_for_close(c);
        return false;
    }
    loop {
        match c.conn.take(&mut c.parser, &mut c.input) {
            Taken::Close => {
                c.closing = true;
                return false;
            }
            Taken::Busy | Taken::Yield => return true,
            Taken::Blocked => {
                // Blocked after its end came: nothing will report it again.
                watch_for_close(c);
                return false;
            }
            // Every whole request the client sent before it was done is
            // answered; a partial one is not.
            Taken::Incomplete if c.eof => {
                c.closing = true;
                return false;
            }
            Taken::Incomplete => {}
        }
        // A stopping server answers what it has read and reads no more.
        if stopping || !c.readable {
            return false;
        }
        if reads == READS_PER_TURN {
            return true;
        }
        let space = match c.input.space(limit) {
            Ok(space) => space,
            Err(e) => {
                shared.metrics.protocol_error();
                c.conn.push(Reply::err(&e));
                c.closing = true;
                return false;
            }
        };
        let space_len = space.len();
        match c.stream.read(space) {
            Ok(0) => {
                c.readable = false;
                c.eof = true;
            }
            Ok(n) => {
                reads += 1;
                // A read that did not fill its space emptied the socket:
                // readiness is edge-triggered, so data arriving after it
                // is reported anew, and a second read would only find
                // nothing (a system call per request saved). Not once the
                // peer's end is reported: that edge came with the data,
                // and only a read to the end finds it.
                if n < space_len && !c.hup {
                    c.readable = false;
                }
                c.input.filled(n);
                shared.metrics.bytes_in(n as u64);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                c.readable = false;
                return false;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::debug!("client {} ({}): {e}", c.conn.client.id, c.conn.client.addr);
                c.dead = true;
                return false;
            }
        }
    }
}

/// A connection blocked in a command reads nothing, but must learn when
/// its client goes: a peek says whether the socket reached its end.
pub(super) fn watch_for_close(c: &mut Connection<'_>) {
    // Its end came before it blocked (a pipelined blocking command after
    // the last read): no readiness will report it again. A client gone
    // while blocked is forgotten, as Redis frees it at its end of file.
    if c.eof || c.hup {
        c.dead = true;
        return;
    }
    if !c.readable {
        return;
    }
    match c.stream.peek(&mut [0u8; 1]) {
        Ok(0) => c.dead = true,
        Ok(_) => c.readable = false,
        Err(e) if e.kind() == ErrorKind::WouldBlock => c.readable = false,
        Err(e) if e.kind() == ErrorKind::Interrupted => {}
        Err(_) => c.dead = true,
    }
}

/// Bytes of ready replies a connection keeps back while a later reply
/// waits for its write; past this they go at once.
pub(super) const HOLD_AHEAD: usize = 64 << 10;

/// Writes what connection `c` owes without blocking; what the socket does
/// not take waits for it to drain (`blocked`).
pub(super) fn flush(shared: &Shared, c: &mut Connection<'_>) {
    let out = &mut c.conn.out;
    while c.sent < out.len() {
        match c.stream.write(&out[c.sent..]) {
            Ok(0) => {
                c.dead = true;
                return;
            }
            Ok(n) => {
                c.sent += n;
                shared.metrics.bytes_out(n as u64);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                c.blocked = true;
                return;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::debug!("client {} ({}): {e}", c.conn.client.id, c.conn.client.addr);
                c.dead = true;
                return;
            }
        }
    }
    c.blocked = false;
    c.sent = 0;
    out.clear();
    if out.capacity() > 4 << 20 {
        out.shrink_to(16 * 1024);
    }
}
