//! The background scrub: it reads every block file back at its rate, pass
//! after pass, finds a block that went bad at rest while the engine runs,
//! and stops with the engine.

use std::time::{Duration, Instant};

use stria::config::Durability;
use stria::engine::{ScrubOptions, ScrubProgress};

use crate::engine_env::{key, model, open, options, value, Devices};

/// Waits until `done` holds of the scrub's progress (or 30 s pass).
fn wait_for(
    e: &stria::engine::Engine<stria::device::sim::SimDevice>,
    what: &str,
    done: impl Fn(&ScrubProgress) -> bool,
) -> ScrubProgress {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let p = e.stats().scrub;
        if done(&p) {
            return p;
        }
        assert!(Instant::now() < until, "{what}: {p:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_background_scrub_finds_a_block_gone_bad_at_rest() {
    let devs = Devices::new(1, 1, 64, &model(31));
    let mut opts = options();
    opts.compact_at = 1000;
    opts.scrub = ScrubOptions {
        rate: 64 << 20,
        every: Duration::from_secs(1),
    };
    let (e, _) = open(&devs, &opts);
    for i in 0..600 {
        e.put(&key(i), &value(i, 0, 200), Some(Durability::Write))
            .unwrap();
    }
    e.flush_all().unwrap();
    let files = e.files();
    let bytes: u64 = files.iter().map(|f| f.len).sum();
    assert!(!files.is_empty());
    // A clean pass that began after the flush reads every file.
    let after = e.stats().scrub.passes + 2;
    let clean = wait_for(&e, "two passes", |p| p.passes >= after && !p.running);
    assert_eq!(clean.rate, 64 << 20);
    assert_eq!(clean.bad_blocks, 0, "{clean:?}");
    assert!(clean.blocks >= files.len() as u64, "{clean:?}");
    assert_eq!(clean.pass_files, files.len() as u64, "{clean:?}");
    assert_eq!(clean.bytes_done, bytes, "{clean:?}");
    // A flipped bit in the middle of the first file: a later pass names it.
    let f = &files[0];
    let lba = (f.offset + 4096 + 100) / 4096;
    devs.data[0].corrupt_at_rest(lba, 100, 2);
    let found = wait_for(&e, "the flipped bit found", |p| p.bad_blocks >= 1);
    let bad = found.findings.last().expect("a finding");
    assert_eq!((bad.file, bad.device.as_str()), (f.id, "data0"));
    assert!(bad.lba <= lba && lba < bad.lba + 2, "{bad:?}");
    assert!(bad.what.contains("checksum mismatch"), "{bad:?}");
    // Reads are not what found it: the cache of blocks is not consulted
    // and the engine goes on (the key is reported, not served wrong).
    let started = Instant::now();
    e.close().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the scrub held the close up"
    );
}

#[test]
fn the_scrub_keeps_to_its_rate() {
    let devs = Devices::new(1, 1, 64, &model(32));
    let mut opts = options();
    opts.compact_at = 1000;
    let (e, _) = open(&devs, &opts);
    for i in 0..2000 {
        e.put(&key(i), &value(i, 0, 500), Some(Durability::Write))
            .unwrap();
    }
    e.flush_all().unwrap();
    e.close().unwrap();
    let bytes: u64 = {
        let (e, _) = open(&devs, &opts);
        let b = e.files().iter().map(|f| f.len).sum();
        e.close().unwrap();
        b
    };
    assert!(bytes > 512 << 10, "{bytes}");
    // At 256 KiB a second the pass takes at least bytes / rate, less the
    // index and footer reads that the rate does not count.
    opts.scrub = ScrubOptions {
        rate: 256 << 10,
        every: Duration::from_secs(1),
    };
    let (e, _) = open(&devs, &opts);
    let p = wait_for(&e, "a pass", |p| p.passes >= 1);
    let took = p.last_pass.expect("a pass took some time");
    let least = Duration::from_secs_f64(p.bytes as f64 / (256 << 10) as f64);
    assert!(
        took + Duration::from_millis(50) >= least,
        "{took:?} for {} bytes at 256 KiB/s",
        p.bytes
    );
    // A stop in the middle of a pass is prompt.
    let started = Instant::now();
    e.close().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn no_scrub_runs_when_its_rate_is_zero() {
    let devs = Devices::new(1, 1, 64, &model(33));
    let (e, _) = open(&devs, &options());
    e.put(b"k", b"v", None).unwrap();
    e.flush_all().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(e.stats().scrub, ScrubProgress::default());
    e.close().unwrap();
}
