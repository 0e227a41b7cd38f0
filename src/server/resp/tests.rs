use super::*;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const LIMITS: Limits = Limits {
    max_bulk: 1 << 20,
    max_query: 4 << 20,
};

fn words(w: &[&str]) -> Vec<Vec<u8>> {
    w.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// What a connection makes of a stream: the requests, in order, and the
/// error that ended it, if one did.
#[derive(Debug, PartialEq)]
struct Outcome {
    requests: Vec<Vec<Vec<u8>>>,
    error: Option<ProtocolError>,
    /// Bytes left in the buffer at the end (an incomplete request).
    left: usize,
}

/// Feeds `wire` to a parser as a connection does: the bytes arrive in
/// pieces ending at `cuts` (then the rest), and after each arrival the
/// connection calls `parse` on what it has not consumed until it needs more.
/// Checks the contract on the way: `consumed <= buf.len()`, and a request
/// or skip consumes something.
fn feed_with(mut parser: Parser, wire: &[u8], cuts: &[usize]) -> Outcome {
    let mut requests = Vec::new();
    let mut off = 0;
    let ends = cuts
        .iter()
        .copied()
        .filter(|&c| c <= wire.len())
        .chain([wire.len()]);
    for end in ends {
        let buf = &wire[..end];
        loop {
            match parser.parse(&buf[off..]) {
                Ok(Parsed::Request(args, n)) => {
                    assert!(
                        n > 0 && n <= buf.len() - off,
                        "took {n} of {}",
                        buf.len() - off
                    );
                    requests.push(args);
                    off += n;
                }
                Ok(Parsed::Skip(n)) => {
                    assert!(
                        n > 0 && n <= buf.len() - off,
                        "skipped {n} of {}",
                        buf.len() - off
                    );
                    off += n;
                }
                Ok(Parsed::Incomplete) => break,
                Err(e) => {
                    return Outcome {
                        requests,
                        error: Some(e),
                        left: wire.len() - off,
                    }
                }
            }
        }
    }
    Outcome {
        requests,
        error: None,
        left: wire.len() - off,
    }
}

fn feed(wire: &[u8], cuts: &[usize]) -> Outcome {
    feed_with(Parser::new(LIMITS), wire, cuts)
}

/// The outcome of `wire` arriving whole, checked to be the same when it
/// arrives one byte at a time.
fn outcome_with(limits: Limits, authenticated: bool, wire: &[u8]) -> Outcome {
    let parser = || {
        let mut p = Parser::new(limits);
        p.set_authenticated(authenticated);
        p
    };
    let whole = feed_with(parser(), wire, &[]);
    let cuts: Vec<usize> = (0..wire.len()).collect();
    let bytewise = feed_with(parser(), wire, &cuts);
    assert_eq!(whole, bytewise, "whole vs byte by byte: {wire:?}");
    whole
}

fn outcome(wire: &[u8]) -> Outcome {
    outcome_with(LIMITS, true, wire)
}

/// The error `wire` fails with, whole or byte by byte.
fn error_of(wire: &[u8]) -> String {
    error_with(LIMITS, true, wire)
}

fn error_with(limits: Limits, authenticated: bool, wire: &[u8]) -> String {
    match outcome_with(limits, authenticated, wire).error {
        Some(e) => e.0,
        None => panic!("no error for {wire:?}"),
    }
}

/// The one request of `wire`, which must be taken whole.
fn request_of(wire: &[u8]) -> Vec<Vec<u8>> {
    let mut p = Parser::new(LIMITS);
    match p.parse(wire) {
        Ok(Parsed::Request(args, n)) => {
            assert_eq!(n, wire.len(), "{wire:?}");
            args
        }
        other => panic!("{wire:?}: {other:?}"),
    }
}

fn encoded(r: &Reply, proto: u8) -> Vec<u8> {
    let mut out = Vec::new();
    r.encode(&mut out, proto);
    out
}

// ---- requests ----

#[test]
fn a_request_arrives_byte_by_byte() {
    let wire = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n";
    let mut p = Parser::new(LIMITS);
    for end in 0..wire.len() {
        assert_eq!(
            p.parse(&wire[..end]).unwrap(),
            Parsed::Incomplete,
            "at {end}"
        );
    }
    assert_eq!(
        p.parse(wire).unwrap(),
        Parsed::Request(vec![b"GET".to_vec(), b"a".to_vec()], wire.len())
    );
}

#[test]
fn a_request_takes_only_its_own_bytes() {
    let mut p = Parser::new(LIMITS);
    let wire = b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI";
    assert_eq!(
        p.parse(wire).unwrap(),
        Parsed::Request(words(&["PING"]), 14)
    );
    assert_eq!(p.parse(&wire[14..]).unwrap(), Parsed::Incomplete);
}

#[test]
fn bulk_strings_are_binary() {
    let wire = b"*3\r\n$3\r\nSET\r\n$4\r\n\r\n\0\xff\r\n$0\r\n\r\n";
    assert_eq!(
        request_of(wire),
        vec![b"SET".to_vec(), b"\r\n\0\xff".to_vec(), Vec::new()]
    );
}

#[test]
fn an_empty_buffer_is_incomplete() {
    assert_eq!(Parser::new(LIMITS).parse(b"").unwrap(), Parsed::Incomplete);
}

#[test]
fn empty_and_negative_multibulks_are_skipped() {
    for wire in [&b"*0\r\n"[..], b"*-1\r\n", b"*-5\r\n"] {
        let mut p = Parser::new(LIMITS);
        assert_eq!(p.parse(wire).unwrap(), Parsed::Skip(wire.len()), "{wire:?}");
    }
    let o = outcome(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n");
    assert_eq!(o.requests, vec![words(&["PING"])]);
    assert_eq!((o.error, o.left), (None, 0));
}

#[test]
fn empty_lines_are_skipped() {
    for wire in [&b"\r\n"[..], b"\n", b"   \r\n", b"\t \x0b\x0c\n"] {
        let mut p = Parser::new(LIMITS);
        assert_eq!(p.parse(wire).unwrap(), Parsed::Skip(wire.len()), "{wire:?}");
    }
    let o = outcome(b"\r\n\n   \r\nPING\n");
    assert_eq!(o.requests, vec![words(&["PING"])]);
}

#[test]
fn an_inline_request_ends_at_lf_with_or_without_cr() {
    assert_eq!(request_of(b"SET a b\r\n"), words(&["SET", "a", "b"]));
    assert_eq!(request_of(b"SET a b\n"), words(&["SET", "a", "b"]));
    // A CR not before the LF is a blank.
    assert_eq!(request_of(b"ECHO a\rb\r\n"), words(&["ECHO", "a", "b"]));
    let mut p = Parser::new(LIMITS);
    assert_eq!(p.parse(b"SET a b").unwrap(), Parsed::Incomplete);
    assert_eq!(p.parse(b"SET a b\r").unwrap(), Parsed::Incomplete);
}

#[test]
fn a_header_line_must_end_with_crlf() {
    // Redis ends a header at the first CR, so an LF alone leaves a line
    // that is not a number.
    assert_eq!(error_of(b"*1\n$4\r\nPING\r\n"), "invalid multibulk length");
    assert_eq!(error_of(b"*1\r\n$4\nPING\r\n"), "invalid bulk length");
    // Redis skips the byte after the CR unread; here it must be the LF.
    assert_eq!(error_of(b"*1\rX$4\r\nPING\r\n"), "invalid multibulk length");
    assert_eq!(error_of(b"*1\r\n$4\r\r\nPING\r\n"), "invalid bulk length");
    // A header without any CR waits for one.
    let o = outcome(b"*1\n$4\nPING\n");
    assert_eq!((o.requests.len(), o.error, o.left), (0, None, 11));
}

// ---- every protocol error ----

#[test]
fn invalid_multibulk_length() {
    for wire in [
        &b"*\r\n"[..],
        b"*x\r\n",
        b"*1x\r\n",
        b"*+1\r\n",
        b"*01\r\n",
        b"*00\r\n",
        b"*-0\r\n",
        b"*--1\r\n",
        b"*-\r\n",
        b"* 1\r\n",
        b"*1 \r\n",
        b"*1.0\r\n",
        b"*1048577\r\n",
        b"*2147483648\r\n",
        b"*9223372036854775808\r\n",
        b"*123456789012345678901\r\n",
    ] {
        assert_eq!(error_of(wire), "invalid multibulk length", "{wire:?}");
    }
}

#[test]
fn invalid_bulk_length() {
    for head in [
        &b"$"[..],
        b"$x",
        b"$-1",
        b"$-0",
        b"$+4",
        b"$04",
        b"$00",
        b"$4 ",
        b"$ 4",
        b"$4.0",
        b"$1048577",
        b"$9223372036854775807",
        b"$9223372036854775808",
    ] {
        let mut wire = b"*1\r\n".to_vec();
        wire.extend_from_slice(head);
        wire.extend_from_slice(b"\r\nPING\r\n");
        assert_eq!(error_of(&wire), "invalid bulk length", "{head:?}");
    }
}

#[test]
fn the_bulk_length_is_refused_before_its_data_arrives() {
    let mut p = Parser::new(LIMITS);
    assert_eq!(
        p.parse(b"*1\r\n$1048577\r\n").unwrap_err().0,
        "invalid bulk length"
    );
}

#[test]
fn expected_dollar() {
    assert_eq!(error_of(b"*1\r\nx\r\n"), "expected '$', got 'x'");
    assert_eq!(error_of(b"*1\r\n:1\r\n"), "expected '$', got ':'");
    assert_eq!(
        error_of(b"*1\r\n*1\r\n$4\r\nPING\r\n"),
        "expected '$', got '*'"
    );
    // The second argument, after a good first one.
    assert_eq!(
        error_of(b"*2\r\n$3\r\nGET\r\n+a\r\n"),
        "expected '$', got '+'"
    );
    // An empty line: the byte is the CR (Redis shows it as a space, since
    // CR and LF cannot be in an error reply).
    assert_eq!(error_of(b"*1\r\n\r\n"), "expected '$', got '\r'");
    assert_eq!(error_of(b"*1\r\n\n$4\r\n"), "expected '$', got '\n'");
    // The line is checked once it is whole, as in Redis.
    let mut p = Parser::new(LIMITS);
    assert_eq!(p.parse(b"*1\r\nx").unwrap(), Parsed::Incomplete);
}

#[test]
fn a_bulk_string_must_be_followed_by_crlf() {
    for wire in [
        &b"*1\r\n$4\r\nPINGxx"[..],
        b"*1\r\n$4\r\nPING\rx",
        b"*1\r\n$4\r\nPING\n\r",
        b"*1\r\n$3\r\nPING\r\n",
        b"*2\r\n$3\r\nGET\r\n$0\r\nx\r\n",
    ] {
        assert_eq!(
            error_of(wire),
            "bulk string is not followed by CRLF",
            "{wire:?}"
        );
    }
}

#[test]
fn unbalanced_quotes() {
    for wire in [
        &b"ECHO \"a\r\n"[..],
        b"ECHO 'a\r\n",
        b"ECHO \"a\"b\r\n",
        b"ECHO 'a'b\r\n",
        b"ECHO a\"b\"c\r\n",
        b"ECHO ''\"\"\r\n",
        b"ECHO \"a\\\r\n",
        b"ECHO 'a\\'\r\n",
        b"\"\n",
    ] {
        assert_eq!(error_of(wire), "unbalanced quotes in request", "{wire:?}");
    }
}

#[test]
fn too_big_inline_request() {
    // The longest line passes, arriving whole or in pieces.
    let mut wire = vec![b'a'; MAX_INLINE];
    wire.extend_from_slice(b"\r\n");
    for cuts in [
        &[][..],
        &[MAX_INLINE][..],
        &[MAX_INLINE + 1][..],
        &[1, MAX_INLINE - 1],
    ] {
        let o = feed(&wire, cuts);
        assert_eq!(o.requests, vec![vec![vec![b'a'; MAX_INLINE]]], "{cuts:?}");
        assert_eq!(o.error, None);
    }
    // One byte more is refused, whole, or as soon as it is known.
    wire.insert(0, b'b');
    for cuts in [&[][..], &[MAX_INLINE + 1][..], &[MAX_INLINE + 2][..]] {
        let o = feed(&wire, cuts);
        assert_eq!(o.error.unwrap().0, "too big inline request", "{cuts:?}");
    }
    let mut p = Parser::new(LIMITS);
    assert_eq!(
        p.parse(&wire[..MAX_INLINE + 1]).unwrap_err().0,
        "too big inline request"
    );
}

#[test]
fn too_big_mbulk_count_string() {
    let mut wire = b"*".to_vec();
    wire.resize(MAX_INLINE, b'1');
    let mut p = Parser::new(LIMITS);
    assert_eq!(p.parse(&wire).unwrap(), Parsed::Incomplete);
    wire.push(b'1');
    assert_eq!(p.parse(&wire).unwrap_err().0, "too big mbulk count string");
    wire.extend_from_slice(b"\r\n");
    assert_eq!(
        Parser::new(LIMITS).parse(&wire).unwrap_err().0,
        "too big mbulk count string"
    );
}

#[test]
fn too_big_bulk_count_string() {
    let mut wire = b"*1\r\n$".to_vec();
    wire.resize(4 + MAX_INLINE, b'1');
    let mut p = Parser::new(LIMITS);
    assert_eq!(p.parse(&wire).unwrap(), Parsed::Incomplete);
    wire.push(b'1');
    assert_eq!(p.parse(&wire).unwrap_err().0, "too big bulk count string");
    wire.extend_from_slice(b"\r\n");
    assert_eq!(
        Parser::new(LIMITS).parse(&wire).unwrap_err().0,
        "too big bulk count string"
    );
}

#[test]
fn unauthenticated_lengths() {
    let limits = LIMITS;
    assert_eq!(
        error_with(limits, false, b"*11\r\n"),
        "unauthenticated multibulk length"
    );
    assert_eq!(
        error_with(limits, false, b"*1\r\n$16385\r\n"),
        "unauthenticated bulk length"
    );
    // At the bounds, and once authenticated, the same requests wait for
    // their data.
    for (auth, wire) in [
        (false, &b"*10\r\n"[..]),
        (false, b"*1\r\n$16384\r\n"),
        (true, b"*11\r\n"),
        (true, b"*1\r\n$16385\r\n"),
    ] {
        let mut p = Parser::new(limits);
        p.set_authenticated(auth);
        assert_eq!(p.parse(wire).unwrap(), Parsed::Incomplete, "{wire:?}");
    }
    // A parser that learns of the AUTH takes the next request with the
    // full limits.
    let mut p = Parser::new(limits);
    p.set_authenticated(false);
    let auth = b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n";
    assert_eq!(
        p.parse(auth).unwrap(),
        Parsed::Request(words(&["AUTH", "pw"]), auth.len())
    );
    p.set_authenticated(true);
    assert_eq!(p.parse(b"*11\r\n").unwrap(), Parsed::Incomplete);
}

// ---- limits ----

#[test]
fn max_bulk() {
    let limits = Limits {
        max_bulk: 10,
        max_query: 1000,
    };
    let mut wire = b"*1\r\n$10\r\n0123456789\r\n".to_vec();
    assert_eq!(outcome_with(limits, true, &wire).requests.len(), 1);
    wire = b"*1\r\n$11\r\n01234567890\r\n".to_vec();
    assert_eq!(error_with(limits, true, &wire), "invalid bulk length");
}

#[test]
fn max_query_counts_every_byte_of_the_request() {
    // `*2\r\n$3\r\nSET\r\n$NN\r\n`: the second argument's data starts at
    // byte 4 + 4 + 5 + 5 = 18.
    let limits = Limits {
        max_bulk: 100,
        max_query: 30,
    };
    let request = |n: usize| {
        let mut w = format!("*2\r\n$3\r\nSET\r\n${n}\r\n").into_bytes();
        w.resize(w.len() + n, b'v');
        w.extend_from_slice(b"\r\n");
        w
    };
    // 18 + 12 = 30 bytes: at the limit.
    assert_eq!(outcome_with(limits, true, &request(12)).requests.len(), 1);
    assert_eq!(
        error_with(limits, true, &request(13)),
        "query buffer limit reached"
    );
    // Refused on the header, before the data.
    let mut p = Parser::new(limits);
    assert_eq!(
        p.parse(b"*2\r\n$3\r\nSET\r\n$13\r\n").unwrap_err().0,
        "query buffer limit reached"
    );
    // Many small arguments add up too.
    let mut many = b"*100\r\n".to_vec();
    for _ in 0..100 {
        many.extend_from_slice(b"$0\r\n\r\n");
    }
    assert_eq!(
        error_with(limits, true, &many),
        "query buffer limit reached"
    );
}

#[test]
fn max_args() {
    let mut p = Parser::new(LIMITS);
    assert_eq!(
        p.parse(format!("*{MAX_ARGS}\r\n").as_bytes()).unwrap(),
        Parsed::Incomplete
    );
    assert_eq!(
        Parser::new(LIMITS)
            .parse(format!("*{}\r\n", MAX_ARGS + 1).as_bytes())
            .unwrap_err()
            .0,
        "invalid multibulk length"
    );
    // And a request of MAX_ARGS empty arguments is taken.
    let mut wire = format!("*{MAX_ARGS}\r\n").into_bytes();
    for _ in 0..MAX_ARGS {
        wire.extend_from_slice(b"$0\r\n\r\n");
    }
    let limits = Limits {
        max_bulk: 1,
        max_query: wire.len(),
    };
    match Parser::new(limits).parse(&wire).unwrap() {
        Parsed::Request(args, n) => {
            assert_eq!((args.len(), n), (MAX_ARGS, wire.len()));
            assert!(args.iter().all(Vec::is_empty));
        }
        other => panic!("{other:?}"),
    }
}

// ---- arrival in pieces ----

/// A pipeline of every kind of request, and what it holds.
fn mixed_pipeline() -> (Vec<u8>, Vec<Vec<Vec<u8>>>) {
    let wire = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n\
                 PING\r\n\
                 *0\r\n\
                 \r\n\
                 *3\r\n$3\r\nSET\r\n$5\r\nk\r\ney\r\n$0\r\n\r\n\
                 *-1\r\n\
                 \n\
                 SET \"a b\" 'c\\'d'\n\
                 *1\r\n$12\r\nhello world!\r\n"
        .to_vec();
    let want = vec![
        words(&["GET", "a"]),
        words(&["PING"]),
        words(&["SET", "k\r\ney", ""]),
        words(&["SET", "a b", "c'd"]),
        words(&["hello world!"]),
    ];
    (wire, want)
}

#[test]
fn a_pipeline_arrives_byte_by_byte() {
    let (wire, want) = mixed_pipeline();
    let cuts: Vec<usize> = (0..wire.len()).collect();
    let o = feed(&wire, &cuts);
    assert_eq!(o.requests, want);
    assert_eq!((o.error, o.left), (None, 0));
}

#[test]
fn a_pipeline_split_at_every_pair_of_offsets() {
    let (wire, want) = mixed_pipeline();
    for i in 0..=wire.len() {
        for j in i..=wire.len() {
            let o = feed(&wire, &[i, j]);
            assert_eq!(o.requests, want, "cut at {i}, {j}");
            assert_eq!((&o.error, o.left), (&None, 0), "cut at {i}, {j}");
        }
    }
}

#[test]
fn after_incomplete_the_request_is_resumed_not_restarted() {
    // Two arguments are taken, then the third is awaited: a buffer that
    // the caller has compacted (the same request, now at offset 0 of a new
    // allocation) resumes with the arguments already taken.
    let mut p = Parser::new(LIMITS);
    let wire = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n";
    assert_eq!(p.parse(&wire[..25]).unwrap(), Parsed::Incomplete);
    let copy = wire.to_vec();
    assert_eq!(
        p.parse(&copy).unwrap(),
        Parsed::Request(words(&["SET", "k", "value"]), wire.len())
    );
    // Called again on the same bytes with none new, it still waits.
    let mut p = Parser::new(LIMITS);
    for _ in 0..3 {
        assert_eq!(p.parse(&wire[..20]).unwrap(), Parsed::Incomplete);
    }
    // A caller that breaks the contract with a shorter buffer gets the
    // request started over, not a panic.
    assert_eq!(p.parse(&wire[..5]).unwrap(), Parsed::Incomplete);
    assert_eq!(
        p.parse(wire).unwrap(),
        Parsed::Request(words(&["SET", "k", "value"]), wire.len())
    );
}

#[test]
fn after_a_request_the_parser_starts_afresh() {
    let mut p = Parser::new(LIMITS);
    let wire = b"*1\r\n$4\r\nPING\r\n";
    for _ in 0..3 {
        assert_eq!(p.parse(&wire[..9]).unwrap(), Parsed::Incomplete);
        assert_eq!(
            p.parse(wire).unwrap(),
            Parsed::Request(words(&["PING"]), wire.len())
        );
    }
}

#[test]
fn an_error_after_good_requests_keeps_them() {
    let o = outcome(b"*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n$x\r\n*1\r\n$4\r\nPING\r\n");
    assert_eq!(o.requests, vec![words(&["PING"]), words(&["PING"])]);
    assert_eq!(o.error.unwrap().0, "invalid bulk length");
}

// ---- inline quoting (each checked against redis-server 7.0) ----

#[test]
fn split_args_like_sdssplitargs() {
    let cases: &[(&[u8], &[&[u8]])] = &[
        (b"", &[]),
        (b"   ", &[]),
        (b"a", &[b"a"]),
        (b"  a  b\tc  ", &[b"a", b"b", b"c"]),
        (b"\"\"", &[b""]),
        (b"''", &[b""]),
        (b"\"a b\" c", &[b"a b", b"c"]),
        (b"'a b' c", &[b"a b", b"c"]),
        (b"\"\\x41\\x4g\\n\"", &[b"Ax4g\n"]),
        (b"\"\\xff\\x00\\xAb\"", &[b"\xff\x00\xab"]),
        (b"\"\\n\\r\\t\\b\\a\\\\\\\"\\q\"", &[b"\n\r\t\x08\x07\\\"q"]),
        (b"\"\\x4\"", &[b"x4"]),
        (b"'a\\'b'", &[b"a'b"]),
        (b"'a\\nb'", &[b"a\\nb"]),
        (b"'a\"b'", &[b"a\"b"]),
        (b"\"a'b\"", &[b"a'b"]),
        // A quote in the middle of a word opens a quoted part of it.
        (b"a\"b c\"", &[b"ab c"]),
        (b"a'b c'", &[b"ab c"]),
        (b"a\"\"", &[b"a"]),
        // A closing quote may be followed by any blank.
        (b"\"a\"\x0b", &[b"a"]),
        (b"\"a\"\tb", &[b"a", b"b"]),
        // Vertical tab and form feed are skipped between words, but do not
        // end one.
        (b"a\x0bb", &[b"a\x0bb"]),
        (b"a\x0cb", &[b"a\x0cb"]),
        (b"\x0bb", &[b"b"]),
        (b"a\x0b b", &[b"a\x0b", b"b"]),
        // Control bytes and NUL are ordinary bytes.
        (b"a\x00b \x01", &[b"a\x00b", b"\x01"]),
        (b"\xff\xfe", &[b"\xff\xfe"]),
    ];
    for (line, want) in cases {
        let want: Vec<Vec<u8>> = want.iter().map(|w| w.to_vec()).collect();
        assert_eq!(split_args(line), Some(want), "{line:?}");
    }
}

#[test]
fn split_args_refuses_unbalanced_quotes() {
    for line in [
        &b"\""[..],
        b"'",
        b"\"a",
        b"'a",
        b"\"a\"b",
        b"'a'b",
        b"a\"b\"c",
        b"''\"\"",
        b"\"a\\\"",
        b"\"a\\",
        b"'a\\'",
        b"\"\\x4",
    ] {
        assert_eq!(split_args(line), None, "{line:?}");
    }
}

// ---- replies ----

#[test]
fn encode_every_reply_in_resp2_and_resp3() {
    let cases: Vec<(Reply, &[u8], &[u8])> = vec![
        (Reply::ok(), b"+OK\r\n", b"+OK\r\n"),
        (Reply::Status("PONG"), b"+PONG\r\n", b"+PONG\r\n"),
        (
            Reply::err("unknown command"),
            b"-ERR unknown command\r\n",
            b"-ERR unknown command\r\n",
        ),
        (
            Reply::Error("WRONGTYPE Operation".into()),
            b"-WRONGTYPE Operation\r\n",
            b"-WRONGTYPE Operation\r\n",
        ),
        (Reply::Int(0), b":0\r\n", b":0\r\n"),
        (Reply::Int(-42), b":-42\r\n", b":-42\r\n"),
        (
            Reply::Int(i64::MIN),
            b":-9223372036854775808\r\n",
            b":-9223372036854775808\r\n",
        ),
        (Reply::bulk("abc"), b"$3\r\nabc\r\n", b"$3\r\nabc\r\n"),
        (Reply::bulk(""), b"$0\r\n\r\n", b"$0\r\n\r\n"),
        (
            Reply::bulk(&b"\r\n\0\xff"[..]),
            b"$4\r\n\r\n\0\xff\r\n",
            b"$4\r\n\r\n\0\xff\r\n",
        ),
        (Reply::Nil, b"$-1\r\n", b"_\r\n"),
        (Reply::NilArray, b"*-1\r\n", b"_\r\n"),
        (Reply::Array(vec![]), b"*0\r\n", b"*0\r\n"),
        (
            Reply::Array(vec![Reply::bulk("a"), Reply::Nil, Reply::Int(1)]),
            b"*3\r\n$1\r\na\r\n$-1\r\n:1\r\n",
            b"*3\r\n$1\r\na\r\n_\r\n:1\r\n",
        ),
        (
            Reply::Array(vec![Reply::Array(vec![Reply::NilArray]), Reply::ok()]),
            b"*2\r\n*1\r\n*-1\r\n+OK\r\n",
            b"*2\r\n*1\r\n_\r\n+OK\r\n",
        ),
        (Reply::Map(vec![]), b"*0\r\n", b"%0\r\n"),
        (
            Reply::Map(vec![
                (Reply::bulk("k"), Reply::Int(1)),
                (Reply::bulk("n"), Reply::Nil),
            ]),
            b"*4\r\n$1\r\nk\r\n:1\r\n$1\r\nn\r\n$-1\r\n",
            b"%2\r\n$1\r\nk\r\n:1\r\n$1\r\nn\r\n_\r\n",
        ),
        (
            Reply::Map(vec![(
                Reply::bulk("m"),
                Reply::Map(vec![(Reply::bulk("x"), Reply::bulk("y"))]),
            )]),
            b"*2\r\n$1\r\nm\r\n*2\r\n$1\r\nx\r\n$1\r\ny\r\n",
            b"%1\r\n$1\r\nm\r\n%1\r\n$1\r\nx\r\n$1\r\ny\r\n",
        ),
        (
            Reply::Verbatim("a: 1\r\n".into()),
            b"$6\r\na: 1\r\n\r\n",
            b"=10\r\ntxt:a: 1\r\n\r\n",
        ),
        (
            Reply::Verbatim(String::new()),
            b"$0\r\n\r\n",
            b"=4\r\ntxt:\r\n",
        ),
    ];
    for (reply, resp2, resp3) in &cases {
        assert_eq!(encoded(reply, 2), *resp2, "{reply:?} in RESP2");
        assert_eq!(encoded(reply, 3), *resp3, "{reply:?} in RESP3");
    }
}

#[test]
fn encode_appends() {
    let mut out = b"+OK\r\n".to_vec();
    Reply::Int(1).encode(&mut out, 2);
    assert_eq!(out, b"+OK\r\n:1\r\n");
}

#[test]
fn an_error_reply_cannot_break_the_line() {
    let r = Reply::err("bad\r\nkey\rx\ny");
    assert_eq!(encoded(&r, 2), b"-ERR bad  key x y\r\n");
    assert_eq!(encoded(&r, 3), b"-ERR bad  key x y\r\n");
    assert!(r.is_error());
    assert!(!Reply::ok().is_error());
    assert!(!Reply::bulk("-ERR").is_error());
}

#[test]
fn a_protocol_error_reply_is_the_bytes_redis_sends() {
    // What redis-server 7.0 answers to `*1\r\n\r\n`.
    let e = Parser::new(LIMITS).parse(b"*1\r\n\r\n").unwrap_err();
    assert_eq!(
        encoded(&Reply::err(&e), 2),
        b"-ERR Protocol error: expected '$', got ' '\r\n"
    );
    let e = Parser::new(LIMITS).parse(b"*x\r\n").unwrap_err();
    assert_eq!(
        encoded(&Reply::err(e), 3),
        b"-ERR Protocol error: invalid multibulk length\r\n"
    );
}

// ---- properties, over seeded random streams ----

/// Writes `word` as an inline word, in a random one of the spellings that
/// `sdssplitargs` reads back as `word`.
fn inline_word(rng: &mut ChaCha8Rng, word: &[u8], out: &mut Vec<u8>) {
    // Vertical tab and form feed do not end a word, but are skipped before one.
    let plain_ok = |b: &u8| !b" \t\r\n\"'".contains(b);
    let plain = !word.is_empty() && word.iter().all(plain_ok) && !b"\x0b\x0c".contains(&word[0]);
    let single = !word.iter().any(|b| b"\\\n\r".contains(b));
    match rng.random_range(0..4) {
        0 | 1 if plain => out.extend_from_slice(word),
        2 if single => {
            out.push(b'\'');
            for &b in word {
                if b == b'\'' {
                    out.push(b'\\');
                }
                out.push(b);
            }
            out.push(b'\'');
        }
        _ => {
            // A plain prefix, then the rest in double quotes.
            let prefix = if plain {
                rng.random_range(0..word.len())
            } else {
                0
            };
            out.extend_from_slice(&word[..prefix]);
            out.push(b'"');
            for &b in &word[prefix..] {
                match b {
                    b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' if rng.random_bool(0.5) => out.extend_from_slice(b"\\t"),
                    0x20..=0x7e if rng.random_bool(0.8) => out.push(b),
                    _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                }
            }
            out.push(b'"');
        }
    }
}

fn random_word(rng: &mut ChaCha8Rng, max: usize) -> Vec<u8> {
    let len = if rng.random_bool(0.1) {
        0
    } else {
        rng.random_range(0..=max)
    };
    let alphabet: &[u8] = b"abcXYZ019 \t\r\n\"'\\$*:-+\x00\x0b\x0c\xff";
    (0..len)
        .map(|_| {
            if rng.random_bool(0.7) {
                alphabet[rng.random_range(0..alphabet.len())]
            } else {
                rng.random()
            }
        })
        .collect()
}

/// A random pipeline of requests, in both framings, with skippable bits
/// between them, and the requests it holds.
fn random_pipeline(rng: &mut ChaCha8Rng) -> (Vec<u8>, Vec<Vec<Vec<u8>>>) {
    let mut wire = Vec::new();
    let mut want = Vec::new();
    for _ in 0..rng.random_range(1..8) {
        match rng.random_range(0..10) {
            0 => {
                let skip: &[&[u8]] = &[b"*0\r\n", b"*-1\r\n", b"\r\n", b"\n", b"  \t\r\n"];
                wire.extend_from_slice(skip[rng.random_range(0..skip.len())]);
            }
            1..=5 => {
                let n = rng.random_range(1..6);
                let args: Vec<Vec<u8>> = (0..n).map(|_| random_word(rng, 40)).collect();
                wire.extend_from_slice(format!("*{n}\r\n").as_bytes());
                for a in &args {
                    wire.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                    wire.extend_from_slice(a);
                    wire.extend_from_slice(b"\r\n");
                }
                want.push(args);
            }
            _ => {
                let n = rng.random_range(1..5);
                let args: Vec<Vec<u8>> = (0..n).map(|_| random_word(rng, 12)).collect();
                let blanks: &[&[u8]] = &[b" ", b"\t", b"  ", b" \x0b\x0c", b"\t \r"];
                if rng.random_bool(0.3) {
                    wire.extend_from_slice(blanks[rng.random_range(0..blanks.len())]);
                }
                let start = wire.len();
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        wire.extend_from_slice(blanks[rng.random_range(0..blanks.len())]);
                    }
                    inline_word(rng, a, &mut wire);
                }
                if wire[start] == b'*' {
                    // It would be read as a multibulk header: lead with a blank.
                    wire.insert(start, b' ');
                }
                if rng.random_bool(0.3) {
                    wire.push(b' ');
                }
                wire.extend_from_slice(if rng.random_bool(0.8) { b"\r\n" } else { b"\n" });
                want.push(args);
            }
        }
    }
    (wire, want)
}

fn random_cuts(rng: &mut ChaCha8Rng, len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = (0..rng.random_range(0..6))
        .map(|_| rng.random_range(0..=len))
        .collect();
    cuts.sort_unstable();
    cuts
}

#[test]
fn random_pipelines_parse_to_what_was_sent_however_they_are_cut() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5745_5341);
    for round in 0..2000 {
        let (wire, want) = random_pipeline(&mut rng);
        for _ in 0..4 {
            let cuts = random_cuts(&mut rng, wire.len());
            let o = feed(&wire, &cuts);
            assert_eq!(
                o.requests, want,
                "round {round}, cuts {cuts:?}, wire {wire:?}"
            );
            assert_eq!(
                (&o.error, o.left),
                (&None, 0),
                "round {round}, wire {wire:?}"
            );
        }
    }
}

fn mutate(rng: &mut ChaCha8Rng, wire: &mut Vec<u8>) {
    let special: &[u8] = b"*$\r\n0123456789-+ \"'\\x";
    for _ in 0..rng.random_range(1..4) {
        let at = rng.random_range(0..=wire.len());
        let byte = if rng.random_bool(0.7) {
            special[rng.random_range(0..special.len())]
        } else {
            rng.random()
        };
        match rng.random_range(0..3) {
            0 if at < wire.len() => wire[at] = byte,
            1 if at < wire.len() => {
                wire.remove(at);
            }
            _ => wire.insert(at, byte),
        }
    }
}

#[test]
fn garbage_never_panics_and_parses_the_same_however_it_is_cut() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x6761_7262);
    let limits = Limits {
        max_bulk: 64,
        max_query: 256,
    };
    let special: &[u8] = b"*$\r\n0123456789-+ \"'\\x";
    for round in 0..3000 {
        let wire = if rng.random_bool(0.5) {
            let (mut wire, _) = random_pipeline(&mut rng);
            mutate(&mut rng, &mut wire);
            wire
        } else {
            (0..rng.random_range(0..80))
                .map(|_| {
                    if rng.random_bool(0.8) {
                        special[rng.random_range(0..special.len())]
                    } else {
                        rng.random()
                    }
                })
                .collect()
        };
        let auth = rng.random_bool(0.8);
        let parser = || {
            let mut p = Parser::new(limits);
            p.set_authenticated(auth);
            p
        };
        let whole = feed_with(parser(), &wire, &[]);
        for _ in 0..3 {
            let cuts = random_cuts(&mut rng, wire.len());
            let cut = feed_with(parser(), &wire, &cuts);
            assert_eq!(cut, whole, "round {round}, cuts {cuts:?}, wire {wire:?}");
        }
    }
}

#[test]
fn numbers_are_read_as_redis_reads_them() {
    for (text, want) in [
        (&b"0"[..], Some(0)),
        (b"7", Some(7)),
        (b"-7", Some(-7)),
        (b"1234567890", Some(1_234_567_890)),
        (b"9223372036854775807", Some(i64::MAX)),
        (b"-9223372036854775808", Some(i64::MIN)),
        (b"9223372036854775808", None),
        (b"-9223372036854775809", None),
        (b"99999999999999999999", None),
        (b"", None),
        (b"-", None),
        (b"-0", None),
        (b"00", None),
        (b"01", None),
        (b"+1", None),
        (b" 1", None),
        (b"1 ", None),
        (b"12a", None),
        (b"1-2", None),
        (b"1.5", None),
    ] {
        assert_eq!(number(text), want, "{:?}", String::from_utf8_lossy(text));
    }
}
