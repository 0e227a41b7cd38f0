//! Reads of a large memstore in key order: the first scan's fold of the
//! keys a write-only load left outside the tree, then short ranges at
//! random places, as a sorted set's score order is read (`ZRANGEBYSCORE
//! ... LIMIT 0 100` of a set loaded with increasing scores).
//!
//! ```text
//! cargo bench --bench memstore -- --members 400000 --ranges 20000 --len 100
//! cargo bench --bench memstore -- --members 400000 --ahead 1024
//! ```
//!
//! Each member is two keys, as in a sorted set: (score, member) and
//! member → score. Prints the fold's time and, per round of ranges, the
//! time a range and an entry took. With `--ahead N`, the keys are first
//! folded ahead N at a time, as an idle server does, and it prints how
//! long the chunks took, then the first range's time.

use std::time::Instant;

use clap::Parser;
use stria::memstore::Memstore;
use stria::table::EntryKind;

#[derive(Parser, Debug)]
struct Args {
    /// Members of the sorted set (two keys each).
    #[arg(long, default_value_t = 400_000)]
    members: u64,
    /// Ranges a round.
    #[arg(long, default_value_t = 20_000)]
    ranges: u64,
    /// Entries a range.
    #[arg(long, default_value_t = 100)]
    len: usize,
    /// Fold ahead this many keys at a time before the first range (0:
    /// no folding ahead: the first range folds every key).
    #[arg(long, default_value_t = 0)]
    ahead: usize,
    /// Rounds of ranges.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// cargo bench passes this; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// A key of the score order, laid out as the server's sub-keys are: the
/// set's name and version, a tag, the score's 8 bytes, the member.
fn by_score(i: u64) -> Vec<u8> {
    let mut k = b"\x00\x04bigz\x00\x00\x00\x01s".to_vec();
    k.extend_from_slice(&i.to_be_bytes());
    k.extend_from_slice(format!("m{i}").as_bytes());
    k
}

fn by_member(i: u64) -> Vec<u8> {
    let mut k = b"\x00\x04bigz\x00\x00\x00\x01z".to_vec();
    k.extend_from_slice(format!("m{i}").as_bytes());
    k
}

fn main() {
    let args = Args::parse();
    let n = args.members.max(args.len as u64 + 1);
    let m = Memstore::new(1, 0);
    for i in 0..n {
        let lsn = 2 * i + 1;
        m.insert(by_score(i), lsn, true, EntryKind::Put, Vec::new());
        let score = (i as f64).to_be_bytes().to_vec();
        m.insert(by_member(i), lsn + 1, true, EntryKind::Put, score);
    }
    if args.ahead > 0 {
        let (mut chunks, mut longest, mut total) = (0, 0f64, 0f64);
        loop {
            let t = Instant::now();
            let (folded, more) = m.fold_ahead(args.ahead);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if folded > 0 {
                chunks += 1;
                longest = longest.max(ms);
                total += ms;
            }
            if !more {
                break;
            }
        }
        println!(
            "folded ahead in {chunks} chunks of {}: {total:.1} ms in all, the longest {longest:.2} ms",
            args.ahead
        );
    }
    let t = Instant::now();
    assert_eq!(m.range_newest(&by_score(0), false, None, 1).len(), 1);
    println!(
        "first range of {} keys: {:.1} ms",
        2 * n,
        t.elapsed().as_secs_f64() * 1e3
    );
    let mut seed = 1u64;
    for round in 1..=args.rounds {
        let t = Instant::now();
        let mut entries = 0;
        for _ in 0..args.ranges {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let from = by_score((seed >> 33) % (n - args.len as u64));
            entries += m.range_newest(&from, false, None, args.len).len();
        }
        let ns = t.elapsed().as_nanos() as f64;
        println!(
            "round {round}: {:.1} us a range of {}, {:.1} ns an entry",
            ns / args.ranges as f64 / 1e3,
            args.len,
            ns / entries as f64
        );
    }
}
