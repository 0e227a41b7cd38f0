//! Power cuts at random points of a striped log with volatile caches.
//!
//! The writer's durable-LSN claims are honest (it only claims what a flush
//! covered), so recovery must never fail, must keep at least every flushed
//! batch, and must return exactly the records written. Each crash is
//! followed by a second round: a writer resumed from recovery reuses the
//! LSNs beyond the prefix in a new epoch, power is cut again, and the second
//! recovery must again see the truth, never the first round's tail.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stria::device::sim::SimDevice;
use stria::wal::recovery::{PrefixEnd, Recovered};

use crate::writer::*;

/// Writes a random stripe of batches with random flushes, then cuts power.
fn random_run(w: &mut Writer, rng: &mut ChaCha8Rng) {
    let ndev = w.devs.len();
    for _ in 0..rng.random_range(1..25) {
        let dev = rng.random_range(0..ndev);
        let n = rng.random_range(1..6);
        w.write(dev, &records(rng, n), None);
        match rng.random_range(0..10) {
            0..=2 => w.flush(rng.random_range(0..ndev)),
            3 => w.flush_all(),
            _ => {}
        }
    }
    w.devs.iter().for_each(SimDevice::cut_power);
}

/// Recovery from LSN 1, the replay point of a log no flush has reclaimed
/// (with `None` a log whose first batches were lost in the crash would
/// start at its lowest surviving batch).
fn recover_all(devs: &[SimDevice], seed: u64, round: u32) -> Recovered {
    run_recovery(devs, &options(Some(1), false))
        .unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"))
}

fn reboot(devs: &[SimDevice], seed: u64) -> Vec<SimDevice> {
    devs.iter()
        .enumerate()
        .map(|(i, d)| d.reboot(seed * 16 + i as u64))
        .collect()
}

fn check(w: &Writer, rec: &Recovered, seed: u64, round: u32) {
    assert!(
        rec.durable_lsn >= w.durable,
        "seed {seed} round {round}: recovered up to {} but {} was flushed ({})",
        rec.durable_lsn,
        w.durable,
        rec.report
    );
    assert!(
        rec.next_lsn <= w.next_lsn,
        "seed {seed} round {round}: LSNs never written"
    );
    let expected = w.expected(1, rec.next_lsn);
    if let Some(i) =
        (0..rec.records.len().max(expected.len())).find(|&i| rec.records.get(i) != expected.get(i))
    {
        panic!(
            "seed {seed} round {round}: record {i} differs: LSN {:?} recovered, LSN {:?} written ({})",
            rec.records.get(i).map(|r| r.lsn),
            expected.get(i).map(|r| r.lsn),
            rec.report
        );
    }
}

#[test]
fn power_cut_keeps_every_flushed_batch() {
    let mut ends: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut zeroed = 0;
    for seed in 0..100u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ndev = rng.random_range(1..=3);
        let mut w = Writer::new(sims(ndev, seed * 8));
        random_run(&mut w, &mut rng);
        let devs = reboot(&w.devs, seed);
        let rec = recover_all(&devs, seed, 1);
        check(&w, &rec, seed, 1);

        let mut w2 = Writer::resume(devs, &rec);
        assert_eq!(w2.epoch, rec.epoch + 1);
        random_run(&mut w2, &mut rng);
        let devs = reboot(&w2.devs, seed + 1000);
        let rec2 = recover_all(&devs, seed, 2);
        check(&w2, &rec2, seed, 2);
        for r in [&rec, &rec2] {
            *ends.entry(end_kind(&r.report.end)).or_default() += 1;
            zeroed += r.report.zeroed_batches;
        }
    }
    println!("ends over 200 recoveries: {ends:?}; {zeroed} batches zeroed");
    // The crashes must have produced every kind of ordinary end, or the
    // property was checked on easy cases only.
    for kind in ["clean", "gap", "torn"] {
        assert!(ends.contains_key(kind), "no {kind} end in {ends:?}");
    }
    assert!(zeroed > 0);
}

fn end_kind(end: &PrefixEnd) -> &'static str {
    match end {
        PrefixEnd::Empty => "empty",
        PrefixEnd::CleanEnd { .. } => "clean",
        PrefixEnd::Gap { .. } => "gap",
        PrefixEnd::Torn { .. } => "torn",
        PrefixEnd::Truncated { .. } => "truncated",
    }
}
