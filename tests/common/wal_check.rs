//! The checks of the WAL crash checker, shared by tests/wal_crash.rs (sim
//! devices) and tests/spdk_wal.rs (a local SPDK target): what the writers
//! append, how they record acknowledgements, and checks (a) to (c) on what
//! recovery found.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::ops::Deref;
use std::sync::Mutex;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stria::config::Durability;
use stria::wal::format::{Record, RecordOp};
use stria::wal::Wal;

/// How the appliance went down, which decides what must survive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// Only appends acknowledged at `sync` must survive.
    PowerCut,
    /// Appends acknowledged at `write` or `sync` must survive.
    Process,
}

impl Crash {
    /// Whether an append acknowledged at `level` must survive this crash.
    pub fn keeps(self, level: Durability) -> bool {
        match self {
            Crash::PowerCut => level == Durability::Sync,
            Crash::Process => level >= Durability::Write,
        }
    }
}

/// An acknowledged append: writer, index, level, LSN.
pub type Ack = (u32, u32, Durability, u64);

/// The value writer `t` appends as its `i`th record, derived so the checker
/// can tell any recovered record's origin and contents from its key alone.
pub fn value_of(seed: u64, t: u32, i: u32) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (u64::from(t) << 40) ^ u64::from(i));
    let len = rng.random_range(0..600);
    (0..len).map(|_| rng.random()).collect()
}

pub fn key_of(t: u32, i: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(8);
    k.extend_from_slice(&t.to_be_bytes());
    k.extend_from_slice(&i.to_be_bytes());
    k
}

/// Writer `t`: appends `count` records at a random mix of durability
/// levels, up to a random number of them waiting at once, and records each
/// acknowledgement in `acks` as it arrives. `wal` gives the WAL for one
/// append (`None`: it is gone, stop); the writer holds it only while
/// appending, never while waiting. Returns at the first failed append or
/// acknowledgement (the WAL stopped).
pub fn writer<W: Deref<Target = Wal>>(
    seed: u64,
    t: u32,
    count: u32,
    rng_seed: u64,
    acks: &Mutex<Vec<Ack>>,
    wal: impl Fn() -> Option<W>,
) {
    let mut wrng = ChaCha8Rng::seed_from_u64(rng_seed);
    let depth = wrng.random_range(1..=8usize);
    let mut pending = VecDeque::new();
    let ack = |(i, level, ticket): (u32, Durability, stria::wal::Ticket)| match ticket.wait() {
        Ok(lsn) => {
            acks.lock().unwrap().push((t, i, level, lsn));
            true
        }
        Err(_) => false,
    };
    for i in 0..count {
        let level = match wrng.random_range(0..3) {
            0 => Durability::Async,
            1 => Durability::Write,
            _ => Durability::Sync,
        };
        let Some(wal) = wal() else {
            return;
        };
        let Ok(ticket) = wal.append(RecordOp::Put, t, key_of(t, i), value_of(seed, t, i), level)
        else {
            return;
        };
        drop(wal);
        pending.push_back((i, level, ticket));
        if pending.len() >= depth && !ack(pending.pop_front().unwrap()) {
            return;
        }
    }
    for p in pending {
        if !ack(p) {
            return;
        }
    }
}

/// Checks (a) to (c); returns how many acknowledgements had to survive.
pub fn check(seed: u64, crash: Crash, acked: &[Ack], records: &[Record]) -> Result<usize, String> {
    // (b) a gap-free run of LSNs from 1, (c) byte-identical, nothing invented.
    let mut next_i: HashMap<u32, u32> = HashMap::new();
    let mut by_lsn: HashMap<u64, (u32, u32)> = HashMap::new();
    for (n, r) in records.iter().enumerate() {
        if r.lsn != n as u64 + 1 {
            return Err(format!("record {n} has LSN {}, expected {}", r.lsn, n + 1));
        }
        if r.key.len() != 8 {
            return Err(format!("LSN {}: invented key {:?}", r.lsn, r.key));
        }
        let t = u32::from_be_bytes(r.key[..4].try_into().unwrap());
        let i = u32::from_be_bytes(r.key[4..].try_into().unwrap());
        if r.op != RecordOp::Put || r.region != t || r.value != value_of(seed, t, i) {
            return Err(format!(
                "LSN {}: record of writer {t} #{i} is not what it appended",
                r.lsn
            ));
        }
        let want = next_i.entry(t).or_insert(0);
        if i != *want {
            return Err(format!(
                "LSN {}: writer {t} #{i} recovered, expected #{want} next",
                r.lsn
            ));
        }
        *want += 1;
        by_lsn.insert(r.lsn, (t, i));
    }
    // (a) acknowledged appends survive at their LSN.
    let mut kept = 0;
    for &(t, i, level, lsn) in acked {
        let must = crash.keeps(level);
        kept += usize::from(must);
        if must && by_lsn.get(&lsn) != Some(&(t, i)) {
            return Err(format!(
                "writer {t} #{i} acknowledged at {} with LSN {lsn} was lost ({} records recovered)",
                level.as_str(),
                records.len()
            ));
        }
    }
    Ok(kept)
}

/// What one seed saw: records recovered, acknowledgements the crash had to
/// keep, and appends (acknowledged or not) that the crash took.
#[derive(Default)]
pub struct Seen {
    pub recovered: usize,
    pub kept: usize,
    pub lost: usize,
}

/// Runs `run` for seeds `0..n` (or only `STRIA_SEED`), each guarded against
/// hanging; panics naming the first failing seed, prints what was checked,
/// and fails when the crashes came too late to test anything.
pub fn run_seeds<F>(label: &str, n: u64, run: F)
where
    F: Fn(u64) -> Result<Seen, String> + Send + Sync + 'static,
{
    let only: Option<u64> = std::env::var("STRIA_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let seeds: Vec<u64> = only.map_or_else(|| (0..n).collect(), |s| vec![s]);
    let run = std::sync::Arc::new(run);
    let mut all = Seen::default();
    let mut cut_short = 0;
    let started = std::time::Instant::now();
    for &seed in &seeds {
        // A seed that does not finish is a hang: report it, do not wait forever.
        let (tx, rx) = std::sync::mpsc::channel();
        let run = run.clone();
        std::thread::spawn(move || {
            let _ = tx.send(run(seed));
        });
        let outcome = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| Err("did not finish within 60 s: a hang".to_string()));
        match outcome {
            Ok(seen) => {
                all.recovered += seen.recovered;
                all.kept += seen.kept;
                all.lost += seen.lost;
                cut_short += usize::from(seen.lost > 0);
            }
            Err(e) => panic!("{label}: seed {seed} failed (replay with STRIA_SEED={seed}): {e}"),
        }
    }
    println!(
        "{label}: {} seeds passed in {:.1?}; {} records recovered, {} acknowledgements checked, \
         {} appends lost to the crash in {cut_short} seeds",
        seeds.len(),
        started.elapsed(),
        all.recovered,
        all.kept,
        all.lost
    );
    if seeds.len() > 1 {
        // The crash must land while writes are in flight, or nothing is tested.
        assert!(
            all.kept > 0 && cut_short * 4 >= seeds.len(),
            "{label}: crashes came too late to test anything"
        );
    }
}
