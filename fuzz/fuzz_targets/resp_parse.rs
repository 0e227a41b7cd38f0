//! Feeds the RESP request parser a stream cut into pieces, as a connection
//! reads it, and checks that it never panics, consumes only what it was
//! given, makes progress, and gives the same requests and error however
//! the stream is cut.
//!
//! Input: a flags byte (bit 0: small limits, bit 1: not authenticated),
//! a count byte for up to 3 cut points of 2 bytes each, then the stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use stria::server::resp::{Limits, Parsed, Parser, ProtocolError};

#[derive(Debug, PartialEq)]
struct Outcome {
    requests: Vec<Vec<Vec<u8>>>,
    error: Option<ProtocolError>,
    consumed: usize,
}

fn feed(limits: Limits, authenticated: bool, wire: &[u8], cuts: &[usize]) -> Outcome {
    let mut parser = Parser::new(limits);
    parser.set_authenticated(authenticated);
    let mut requests = Vec::new();
    let mut off = 0;
    for end in cuts.iter().copied().chain([wire.len()]) {
        let buf = &wire[..end];
        loop {
            let rest = &buf[off..];
            match parser.parse(rest) {
                Ok(Parsed::Request(args, n)) => {
                    assert!(n > 0 && n <= rest.len(), "took {n} of {}", rest.len());
                    let bytes: usize = args.iter().map(Vec::len).sum();
                    assert!(!args.is_empty() && bytes < n);
                    requests.push(args);
                    off += n;
                }
                Ok(Parsed::Skip(n)) => {
                    assert!(n > 0 && n <= rest.len(), "skipped {n} of {}", rest.len());
                    off += n;
                }
                Ok(Parsed::Incomplete) => break,
                Err(e) => {
                    return Outcome {
                        requests,
                        error: Some(e),
                        consumed: off,
                    }
                }
            }
        }
    }
    Outcome {
        requests,
        error: None,
        consumed: off,
    }
}

fuzz_target!(|data: &[u8]| {
    let [flags, ncuts, rest @ ..] = data else {
        return;
    };
    let ncuts = usize::from(ncuts % 4).min(rest.len() / 2);
    let (cut_bytes, wire) = rest.split_at(ncuts * 2);
    let mut cuts: Vec<usize> = cut_bytes
        .chunks(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (wire.len() + 1))
        .collect();
    cuts.sort_unstable();

    let limits = if flags & 1 == 1 {
        Limits {
            max_bulk: 64,
            max_query: 256,
        }
    } else {
        Limits {
            max_bulk: 1 << 20,
            max_query: 4 << 20,
        }
    };
    let authenticated = flags & 2 == 0;

    let whole = feed(limits, authenticated, wire, &[]);
    let cut = feed(limits, authenticated, wire, &cuts);
    assert_eq!(whole, cut, "cuts {cuts:?}");
    let bytewise: Vec<usize> = (0..wire.len()).collect();
    if wire.len() <= 512 {
        assert_eq!(whole, feed(limits, authenticated, wire, &bytewise));
    }

    // What was taken reads back the same when sent again as multibulk.
    let mut again = Vec::new();
    for args in &whole.requests {
        again.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            again.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            again.extend_from_slice(a);
            again.extend_from_slice(b"\r\n");
        }
    }
    let big = Limits {
        max_bulk: again.len(),
        max_query: again.len(),
    };
    let back = feed(big, true, &again, &[]);
    assert_eq!(back.requests, whole.requests);
    assert_eq!((back.error, back.consumed), (None, again.len()));
});
