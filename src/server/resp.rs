//! RESP, the Redis protocol: requests in, replies out.
//!
//! A request is an array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\na\r\n`),
//! or an inline line of words (`GET a\r\n`, what telnet sends). [`Parser`]
//! takes one request off the front of a buffer, or says it needs more
//! bytes, or fails with the error Redis would give; after an error the
//! connection is closed, as Redis does, since the stream can no longer be
//! framed. The limits bound what one request may make the server hold.
//!
//! Replies are [`Reply`] values, encoded for the connection's protocol:
//! RESP3 (after `HELLO 3`) has maps, nulls and verbatim text, which
//! RESP2 spells as flat arrays, `$-1` and bulk strings.

use std::fmt;
use std::rc::Rc;

/// What one request may make the server hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The largest bulk string (Redis's `proto-max-bulk-len`).
    pub max_bulk: usize,
    /// The most bytes a request may take, all its arguments together
    /// (Redis's `client-query-buffer-limit`).
    pub max_query: usize,
}

/// The most arguments a request may have (Redis 6 had this bound; Redis 7
/// allows up to `INT_MAX`, more than any real command needs).
pub const MAX_ARGS: usize = 1024 * 1024;

/// The longest inline request, and the longest `*`/`$` header line.
pub const MAX_INLINE: usize = 64 * 1024;

/// Before AUTH, the most arguments a request may have (as Redis).
pub const UNAUTH_MAX_ARGS: usize = 10;

/// Before AUTH, the largest bulk string (as Redis).
pub const UNAUTH_MAX_BULK: usize = 16 * 1024;

/// A request that cannot be framed; the text follows `-ERR ` on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn error<T>(what: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError(what.into()))
}

/// One request taken off a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// The arguments, and how many bytes of the buffer they took.
    Request(Vec<Vec<u8>>, usize),
    /// Bytes that hold no request (an empty line, `*0`): drop them.
    Skip(usize),
    /// The buffer ends inside a request.
    Incomplete,
}

/// Takes requests off the front of a connection's buffer. It remembers the
/// arguments of a request that is still arriving, so a large request read
/// in many pieces is walked once, not once per read: after `Incomplete`,
/// the next call must pass a buffer that starts at the same request.
#[derive(Debug)]
pub struct Parser {
    limits: Limits,
    authenticated: bool,
    partial: Option<Partial>,
}

#[derive(Debug)]
struct Partial {
    count: usize,
    args: Vec<Vec<u8>>,
    /// Where the next argument starts, from the start of the request.
    at: usize,
}

impl Parser {
    /// A parser for an authenticated connection (or one on a server without
    /// a password); see [`Parser::set_authenticated`].
    pub fn new(limits: Limits) -> Parser {
        Parser {
            limits,
            authenticated: true,
            partial: None,
        }
    }

    /// Until a connection has passed AUTH, Redis refuses requests of more
    /// than [`UNAUTH_MAX_ARGS`] arguments or with a bulk string larger than
    /// [`UNAUTH_MAX_BULK`], so that a stranger cannot make the server hold
    /// `max_query` bytes. A connection to a server with a password starts
    /// with `set_authenticated(false)`.
    pub fn set_authenticated(&mut self, yes: bool) {
        self.authenticated = yes;
    }

    /// Takes one request off the front of `buf`.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        if let Some(p) = self.partial.take() {
            // A buffer shorter than what was already walked breaks the
            // contract; start the request over rather than index past it.
            if p.at <= buf.len() {
                return self.multibulk_args(buf, p);
            }
        }
        match buf.first() {
            None => Ok(Parsed::Incomplete),
            Some(b'*') => self.multibulk(buf),
            Some(_) => inline(buf),
        }
    }

    fn multibulk(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        let (head, at) = match header(buf, 0) {
            Header::Line(head, _) | Header::Partial(head) if head.len() > MAX_INLINE => {
                return error("too big mbulk count string");
            }
            Header::Line(head, at) => (head, at),
            Header::Partial(_) => return Ok(Parsed::Incomplete),
        };
        let count = match number(&head[1..]) {
            Some(n) if n <= MAX_ARGS as i64 => n,
            _ => return error("invalid multibulk length"),
        };
        if count > UNAUTH_MAX_ARGS as i64 && !self.authenticated {
            return error("unauthenticated multibulk length");
        }
        if count <= 0 {
            return Ok(Parsed::Skip(at));
        }
        let count = count as usize;
        let args = Vec::with_capacity(count.min(1024));
        self.multibulk_args(buf, Partial { count, args, at })
    }

    fn multibulk_args(&mut self, buf: &[u8], mut p: Partial) -> Result<Parsed, ProtocolError> {
        let limits = self.limits;
        while p.args.len() < p.count {
            let (head, data) = match header(buf, p.at) {
                Header::Line(head, _) | Header::Partial(head) if head.len() > MAX_INLINE => {
                    return error("too big bulk count string");
                }
                Header::Line(head, data) => (head, data),
                Header::Partial(_) => {
                    self.partial = Some(p);
                    return Ok(Parsed::Incomplete);
                }
            };
            // The line may be empty (a CR straight away): read the byte.
            if buf[p.at] != b'$' {
                return error(format!("expected '$', got '{}'", buf[p.at] as char));
            }
            let len = match number(&head[1..]) {
                Some(n) if n >= 0 && n as u64 <= limits.max_bulk as u64 => n as usize,
                _ => return error("invalid bulk length"),
            };
            if len > UNAUTH_MAX_BULK && !self.authenticated {
                return error("unauthenticated bulk length");
            }
            if data > limits.max_query || len > limits.max_query - data {
                return error("query buffer limit reached");
            }
            if buf.len() < data + len + 2 {
                self.partial = Some(p);
                return Ok(Parsed::Incomplete);
            }
            // Redis skips these two bytes unread; a request that does not
            // have CRLF there is not framed as its sender meant.
            if &buf[data + len..data + len + 2] != b"\r\n" {
                return error("bulk string is not followed by CRLF");
            }
            p.args.push(buf[data..data + len].to_vec());
            p.at = data + len + 2;
        }
        Ok(Parsed::Request(p.args, p.at))
    }
}

/// A `*` or `$` header line, read as Redis reads one.
enum Header<'a> {
    /// The line without its CRLF, and where the next line begins.
    Line(&'a [u8], usize),
    /// The buffer ends inside the line; what there is of it so far.
    Partial(&'a [u8]),
}

/// The header line starting at `at` (not empty). Redis ends it at the first
/// CR, so an LF alone does not end it; the byte after the CR must be an LF,
/// else the line keeps the CR and so is not a valid header.
fn header(buf: &[u8], at: usize) -> Header<'_> {
    let rest = &buf[at..];
    match rest.iter().position(|&b| b == b'\r') {
        None => Header::Partial(rest),
        Some(cr) if cr + 1 == rest.len() => Header::Partial(&rest[..cr]),
        Some(cr) if rest[cr + 1] == b'\n' => Header::Line(&rest[..cr], at + cr + 2),
        Some(cr) => Header::Line(&rest[..cr + 1], at + cr + 2),
    }
}

/// The line starting at `at`, without its `\r\n` or `\n`, and where the next
/// begins: an inline request ends at LF, as in Redis.
fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let nl = buf[at..].iter().position(|&b| b == b'\n')? + at;
    let end = if nl > at && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    Some((&buf[at..end], nl + 1))
}

/// A decimal integer as Redis's `string2ll` reads it: `0`, or an optional
/// minus and digits without a leading zero; no plus, no spaces, at most 20
/// bytes, within `i64`.
pub(crate) fn number(s: &[u8]) -> Option<i64> {
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, s),
    };
    if digits.len() > 19 || !matches!(digits.first(), Some(b'1'..=b'9')) {
        return None;
    }
    // Summed below zero, where i64 reaches one further (i64::MIN), with
    // no check for UTF-8 or a second pass as `str::parse` makes: every
    // request has a few of these.
    let mut n: i64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_sub(i64::from(d))?;
    }
    if negative {
        Some(n)
    } else {
        n.checked_neg()
    }
}

fn inline(buf: &[u8]) -> Result<Parsed, ProtocolError> {
    let Some((text, next)) = line(buf, 0) else {
        // A CR at the end may be the start of the CRLF: do not count it,
        // so that a line is refused or not whatever pieces it comes in.
        let text = buf.strip_suffix(b"\r").unwrap_or(buf);
        if text.len() > MAX_INLINE {
            return error("too big inline request");
        }
        return Ok(Parsed::Incomplete);
    };
    if text.len() > MAX_INLINE {
        return error("too big inline request");
    }
    let args =
        split_args(text).ok_or_else(|| ProtocolError("unbalanced quotes in request".into()))?;
    if args.is_empty() {
        return Ok(Parsed::Skip(next));
    }
    Ok(Parsed::Request(args, next))
}

/// Splits an inline request into words as Redis's `sdssplitargs` does.
/// Blanks (C `isspace`) separate words; within a word only space, tab, CR
/// and LF end it. A quote anywhere in a word opens a quoted part: "double
/// quotes" take `\n`, `\xHH` and friends, 'single quotes' only `\'`; a
/// closing quote must be followed by a blank or the end. `None` for
/// unbalanced quotes. Unlike Redis, a NUL byte is an ordinary byte, not the
/// end of the line.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let blank = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let closed = |i: usize| i == line.len() || blank(line[i]);
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && blank(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return Some(out);
        }
        let mut word = Vec::new();
        while let Some(&c) = line.get(i) {
            match c {
                b' ' | b'\t' | b'\n' | b'\r' => break,
                b'"' => {
                    i += 1;
                    loop {
                        let c = *line.get(i)?;
                        match c {
                            b'\\'
                                if line.get(i + 1) == Some(&b'x')
                                    && line.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
                                    && line.get(i + 3).is_some_and(u8::is_ascii_hexdigit) =>
                            {
                                let hex = std::str::from_utf8(&line[i + 2..i + 4]).ok()?;
                                word.push(u8::from_str_radix(hex, 16).ok()?);
                                i += 4;
                            }
                            b'\\' if i + 1 < line.len() => {
                                word.push(match line[i + 1] {
                                    b'n' => b'\n',
                                    b'r' => b'\r',
                                    b't' => b'\t',
                                    b'b' => 0x08,
                                    b'a' => 0x07,
                                    other => other,
                                });
                                i += 2;
                            }
                            b'"' => {
                                i += 1;
                                if !closed(i) {
                                    return None;
                                }
                                break;
                            }
                            _ => {
                                word.push(c);
                                i += 1;
                            }
                        }
                    }
                    break;
                }
                b'\'' => {
                    i += 1;
                    loop {
                        let c = *line.get(i)?;
                        if c == b'\\' && line.get(i + 1) == Some(&b'\'') {
                            word.push(b'\'');
                            i += 2;
                        } else if c == b'\'' {
                            i += 1;
                            if !closed(i) {
                                return None;
                            }
                            break;
                        } else {
                            word.push(c);
                            i += 1;
                        }
                    }
                    break;
                }
                _ => {
                    word.push(c);
                    i += 1;
                }
            }
        }
        out.push(word);
    }
}

/// A reply, encoded for RESP2 or RESP3 by [`Reply::encode`].
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`: a short status without CR or LF.
    Status(&'static str),
    /// A status made at run time (a script's `status_reply`).
    Simple(String),
    /// `-ERR ...`: the text must start with an error code (`ERR`, `WRONGTYPE`, ...).
    Error(String),
    /// A boolean: `#t`/`#f` in RESP3, 1 or a null in RESP2 (scripts).
    Bool(bool),
    Int(i64),
    /// A double: `,1.5` in RESP3, a bulk string in RESP2.
    Double(f64),
    Bulk(Vec<u8>),
    /// The bytes of a buffer from an offset on, as a bulk string: a value
    /// sent without copying it out of what it was read with.
    BulkFrom(Rc<Vec<u8>>, usize),
    /// A missing value: `$-1` in RESP2, `_` in RESP3.
    Nil,
    Array(Vec<Reply>),
    /// A missing array (`*-1` in RESP2).
    NilArray,
    /// A map in RESP3, a flat array of keys and values in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// Text for humans (INFO, CLIENT LIST): verbatim in RESP3, bulk in RESP2.
    Verbatim(String),
    /// Out-of-band data (pub/sub): a push in RESP3, an array in RESP2.
    Push(Vec<Reply>),
    /// Several replies to one command, one after another (SUBSCRIBE of
    /// several channels).
    Seq(Vec<Reply>),
    /// A push of bulk strings encoded once for every connection it goes
    /// to (a message PUBLISH hands to many subscribers): how many, and
    /// their bytes, which RESP2 and RESP3 write alike. Made by
    /// [`Reply::shared_push`].
    SharedPush(usize, Rc<[u8]>),
}

impl Reply {
    /// About what the reply takes in memory and on the wire: what bounds
    /// the replies a connection may hold.
    pub fn weight(&self) -> usize {
        match self {
            Reply::Status(_)
            | Reply::Int(_)
            | Reply::Double(_)
            | Reply::Nil
            | Reply::NilArray
            | Reply::Bool(_) => 16,
            Reply::Error(s) | Reply::Verbatim(s) | Reply::Simple(s) => 32 + s.len(),
            Reply::Bulk(b) => 32 + b.len(),
            Reply::BulkFrom(b, at) => 32 + b.len() - at,
            Reply::Array(a) | Reply::Push(a) | Reply::Seq(a) => {
                32 + a.iter().map(Reply::weight).sum::<usize>()
            }
            Reply::SharedPush(_, body) => 32 + body.len(),
            Reply::Map(m) => {
                32 + m
                    .iter()
                    .map(|(k, v)| k.weight() + v.weight())
                    .sum::<usize>()
            }
        }
    }

    pub fn ok() -> Reply {
        Reply::Status("OK")
    }

    /// `-ERR <what>`.
    pub fn err(what: impl fmt::Display) -> Reply {
        Reply::Error(format!("ERR {what}"))
    }

    pub fn bulk(s: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(s.into())
    }

    /// A push of `items` as bulk strings, encoded now: a clone of it is
    /// a reference, and encoding it copies its bytes.
    pub fn shared_push(items: &[&[u8]]) -> Reply {
        let mut body = Vec::with_capacity(items.iter().map(|i| i.len() + 16).sum());
        for i in items {
            bulk_to(&mut body, b'$', i);
        }
        Reply::SharedPush(items.len(), body.into())
    }

    /// A [`Reply::SharedPush`] as the push of bulk strings it encodes
    /// (for a reader that looks into replies: a script, a test); any
    /// other reply as it is.
    pub fn unshared(&self) -> Reply {
        let Reply::SharedPush(n, body) = self else {
            return self.clone();
        };
        let mut items = Vec::with_capacity(*n);
        let mut at = 0;
        while at < body.len() {
            // `$<len>\r\n<bytes>\r\n`, as `bulk_to` wrote it.
            let eol = at
                + body[at..]
                    .iter()
                    .position(|&b| b == b'\r')
                    .expect("a length");
            let len: usize = std::str::from_utf8(&body[at + 1..eol])
                .ok()
                .and_then(|l| l.parse().ok())
                .expect("a length");
            items.push(Reply::Bulk(body[eol + 2..eol + 2 + len].to_vec()));
            at = eol + 2 + len + 2;
        }
        Reply::Push(items)
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// The message of an error reply (without the `-`).
    pub fn error_message(&self) -> Option<&str> {
        match self {
            Reply::Error(m) => Some(m),
            _ => None,
        }
    }

    /// Appends the reply to `out` in protocol version `proto` (2 or 3).
    pub fn encode(&self, out: &mut Vec<u8>, proto: u8) {
        let resp3 = proto >= 3;
        match self {
            Reply::Status(s) => line_to(out, b'+', s.as_bytes()),
            Reply::Simple(s) => {
                let clean: Vec<u8> = s
                    .bytes()
                    .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                    .collect();
                line_to(out, b'+', &clean);
            }
            Reply::Bool(b) if resp3 => {
                out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" })
            }
            Reply::Bool(true) => out.extend_from_slice(b":1\r\n"),
            Reply::Bool(false) => out.extend_from_slice(b"$-1\r\n"),
            Reply::Error(e) => {
                // A CR or LF would end the line early and desynchronise the client.
                let clean: Vec<u8> = e
                    .bytes()
                    .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                    .collect();
                line_to(out, b'-', &clean);
            }
            Reply::Int(n) => number_to(out, b':', *n),
            Reply::Bulk(b) => bulk_to(out, b'$', b),
            Reply::BulkFrom(b, at) => bulk_to(out, b'$', &b[*at..]),
            Reply::Double(d) if resp3 => line_to(out, b',', format_double(*d).as_bytes()),
            Reply::Double(d) => bulk_to(out, b'$', format_double(*d).as_bytes()),
            Reply::Nil if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                number_to(out, b'*', items.len());
                for i in items {
                    i.encode(out, proto);
                }
            }
            Reply::Push(items) => {
                let kind = if resp3 { b'>' } else { b'*' };
                number_to(out, kind, items.len());
                for i in items {
                    i.encode(out, proto);
                }
            }
            Reply::Seq(replies) => {
                for r in replies {
                    r.encode(out, proto);
                }
            }
            Reply::SharedPush(n, body) => {
                number_to(out, if resp3 { b'>' } else { b'*' }, *n);
                out.extend_from_slice(body);
            }
            Reply::Map(pairs) => {
                if resp3 {
                    number_to(out, b'%', pairs.len());
                } else {
                    number_to(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(out, proto);
                    v.encode(out, proto);
                }
            }
            Reply::Verbatim(text) if resp3 => {
                let mut body = b"txt:".to_vec();
                body.extend_from_slice(text.as_bytes());
                bulk_to(out, b'=', &body);
            }
            Reply::Verbatim(text) => bulk_to(out, b'$', text.as_bytes()),
        }
    }
}

/// A double as Redis prints one: the shortest form that reads back the
/// same, `inf` and `-inf` for the infinities.
pub fn format_double(f: f64) -> String {
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    if f == f.trunc() && f.abs() < 1e17 {
        return format!("{}", f as i64);
    }
    let s = format!("{f}");
    if s.len() > 24 {
        // As C's %g writes it: a sign on the exponent, always.
        let e = format!("{f:e}");
        match e.split_once('e') {
            Some((m, x)) if !x.starts_with('-') => format!("{m}e+{x}"),
            _ => e,
        }
    } else {
        s
    }
}

fn line_to(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    out.push(kind);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// `kind`, a number and CRLF: a length or an integer reply, formatted
/// without an allocation (each reply has one or more).
fn number_to(out: &mut Vec<u8>, kind: u8, n: impl itoa::Integer) {
    line_to(out, kind, itoa::Buffer::new().format(n).as_bytes());
}

fn bulk_to(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    let mut len = itoa::Buffer::new();
    let len = len.format(body.len()).as_bytes();
    // Room for all five pieces at once: a range's reply writes a hundred.
    out.reserve(1 + len.len() + 2 + body.len() + 2);
    out.push(kind);
    out.extend_from_slice(len);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests;
