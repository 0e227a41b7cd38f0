//! Hand-made logs with one thing wrong at a time.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use stria::wal::recovery::{LiveSegment, PrefixEnd, RecoveryError};

use crate::writer::*;

fn rng() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(11)
}

#[test]
fn striped_log_round_trips_in_order() {
    let devs = sims(3, 1);
    let mut w = Writer::new(devs.clone());
    let mut rng = rng();
    let mut placed = Vec::new();
    for i in 0..60 {
        placed.push(w.write(i % 3, &records(&mut rng, 1 + i % 7), None));
    }
    w.flush_all();
    let writes_before: Vec<u64> = devs.iter().map(|d| d.stats().writes).collect();
    let rec = run_recovery(&devs, &options(None, false)).unwrap();
    assert_eq!(rec.records, w.expected(1, w.next_lsn));
    assert_eq!(
        (rec.next_lsn, rec.durable_lsn, rec.epoch),
        (w.next_lsn, w.next_lsn - 1, 1)
    );
    assert_eq!(
        rec.report.end,
        PrefixEnd::CleanEnd {
            next_lsn: w.next_lsn
        }
    );
    assert_eq!(rec.report.batches, 60);
    assert_eq!(rec.report.records, rec.records.len() as u64);
    assert_eq!(
        (rec.report.zeroed_batches, rec.report.dropped_batches),
        (0, 0)
    );
    let writes_after: Vec<u64> = devs.iter().map(|d| d.stats().writes).collect();
    assert_eq!(
        writes_before, writes_after,
        "a clean recovery writes nothing"
    );
    for (dev, log) in rec.devices.iter().enumerate() {
        let mine: Vec<_> = placed.iter().filter(|p| p.dev == dev).collect();
        let last_seg = mine.last().unwrap().segment;
        assert!(last_seg > 0, "the test spans several segments per device");
        assert_eq!(log.index, dev as u32);
        assert_eq!(
            log.next_seq,
            last_seg + 2,
            "segments were used in order from seq 1"
        );
        assert_eq!(log.next_segment, last_seg + 1);
        let live: Vec<u64> = log.live.iter().map(|l| l.segment).collect();
        assert_eq!(live, (0..=last_seg).collect::<Vec<_>>());
        assert_eq!(
            *log.live.last().unwrap(),
            LiveSegment {
                segment: last_seg,
                seq: last_seg + 1,
                last_lsn: mine.last().unwrap().last_lsn()
            }
        );
    }
    println!("{}", rec.report);
}

#[test]
fn blank_devices_are_empty() {
    let devs = sims(2, 2);
    let rec = run_recovery(&devs, &options(None, false)).unwrap();
    assert_eq!(rec.report.end, PrefixEnd::Empty);
    assert!(rec.records.is_empty());
    assert_eq!((rec.next_lsn, rec.durable_lsn, rec.epoch), (1, 0, 0));
    for log in &rec.devices {
        assert_eq!((log.next_seq, log.next_segment, log.live.len()), (1, 0, 0));
    }
    let rec = run_recovery(&devs, &options(Some(500), false)).unwrap();
    assert_eq!((rec.report.end, rec.next_lsn), (PrefixEnd::Empty, 500));
}

#[test]
fn torn_last_batch_ends_the_prefix_and_is_zeroed() {
    let devs = sims(2, 3);
    let mut w = Writer::new(devs.clone());
    let mut rng = rng();
    let placed: Vec<_> = (0..6)
        .map(|i| w.write(i % 2, &records(&mut rng, 3), None))
        .collect();
    let torn = placed[5];
    corrupt_payload(&devs, &torn);
    let rec = run_recovery(&devs, &options(None, false)).unwrap();
    assert_eq!(rec.next_lsn, torn.first_lsn);
    assert_eq!(rec.records, w.expected(1, torn.first_lsn));
    match &rec.report.end {
        PrefixEnd::Torn {
            device,
            segment,
            offset,
            why,
        } => {
            assert_eq!(
                (device.as_str(), *segment, *offset),
                ("wal1", torn.segment, torn.offset)
            );
            assert!(why.contains("payload checksum"), "{why}");
        }
        other => panic!("expected a torn end, got {other:?}"),
    }
    assert_eq!(rec.report.zeroed_batches, 1);
    assert_eq!(
        rec.report.dropped_batches, 0,
        "a bad batch is zeroed, not counted as dropped"
    );
    assert!(zeroed(&devs, &torn));
    let again = run_recovery(&devs, &options(None, false)).unwrap();
    assert_eq!(
        again.report.end,
        PrefixEnd::CleanEnd {
            next_lsn: torn.first_lsn
        }
    );
}

#[test]
fn torn_header_of_the_next_batch_is_named() {
    let devs = sims(2, 12);
    let mut w = Writer::new(devs.clone());
    let mut rng = rng();
    let placed: Vec<_> = (0..4)
        .map(|i| w.write(i % 2, &records(&mut rng, 2), None))
        .collect();
    let torn = placed[3];
    corrupt_byte(&devs, &torn, 20); // the payload length: header checksum fails
    let rec = run_recovery(&devs, &options(None, false)).unwrap();
    assert_eq!(rec.next_lsn, torn.first_lsn);
    match &rec.report.end {
        PrefixEnd::Torn {
            device,
            offset,
            why,
            ..
        } => {
            assert_eq!((device.as_str(), *offset), ("wal1", torn.offset));
            assert!(why.contains("header checksum"), "{why}");
        }
        other => panic!("expected a torn end, got {other:?}"),
    }
    assert_eq!(
        rec.report.zeroed_batches, 0,
        "a damaged header is no batch to zero"
    );
}

/// Batches 0..6 alternating two devices, all flushed after the fourth, so
/// that the last two say the first four were durable; then batch 1 is hit.
fn log_with_corrupt_middle() -> (Vec<stria::device::sim::SimDevice>, Writer, Vec<Placed>) {
    let devs = sims(2, 4);
    let mut w = Writer::new(devs.clone());
    let mut rng = rng();
    let mut placed = Vec::new();
    for i in 0..6 {
        placed.push(w.write(i % 2, &records(&mut rng, 4), None));
        if i == 3 {
            w.flush_all();
        }
    }
    corrupt_payload(&devs, &placed[1]);
    (devs, w, placed)
}

#[test]
fn corrupt_durable_batch_is_an_error_naming_its_place() {
    let (devs, _, placed) = log_with_corrupt_middle();
    let bad = placed[1];
    match run_recovery(&devs, &options(None, false)) {
        Err(RecoveryError::Corrupt {
            device,
            segment,
            offset,
            lsn,
            why,
        }) => {
            assert_eq!(
                (device.as_str(), segment, offset, lsn),
                ("wal1", bad.segment, bad.offset, bad.first_lsn)
            );
            assert!(why.contains("payload checksum"));
            let msg = RecoveryError::Corrupt {
                device,
                segment,
                offset,
                lsn,
                why,
            }
            .to_string();
            assert!(
                msg.contains("wal1") && msg.contains(&format!("byte offset {offset}")),
                "{msg}"
            );
        }
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(rec) => panic!("expected Corrupt, got {}", rec.report),
    }
    assert!(!zeroed(&devs, &bad), "a failed recovery changes nothing");
}

#[test]
fn truncate_corrupt_drops_the_rest_and_then_recovers_cleanly() {
    let (devs, w, placed) = log_with_corrupt_middle();
    let bad = placed[1];
    let rec = run_recovery(&devs, &options(None, true)).unwrap();
    assert_eq!(rec.records, w.expected(1, bad.first_lsn));
    assert_eq!(
        rec.report.end,
        PrefixEnd::Truncated {
            device: "wal1".into(),
            segment: bad.segment,
            offset: bad.offset,
            lsn: bad.first_lsn
        }
    );
    assert_eq!(
        (rec.report.dropped_batches, rec.report.dropped_records),
        (4, 16)
    );
    assert_eq!(rec.report.zeroed_batches, 5);
    assert!(placed[1..].iter().all(|p| zeroed(&devs, p)));
    println!("{}", rec.report);
    let again = run_recovery(&devs, &options(None, false)).unwrap();
    assert_eq!(
        again.report.end,
        PrefixEnd::CleanEnd {
            next_lsn: bad.first_lsn
        }
    );
    assert_eq!(again.records, rec.records);
}

#[test]
fn missing_durable_batch_is_an_error_naming_the_witness() {
    let devs = sims(2, 5);
    let mut w = Writer::new(devs.clone());
    let mut rng = rng();
    w.write(0, &records(&mut rng, 2), None);
    let lost_at = w.next_lsn;
    w.skip(3);
    let witness = w.write(1, &records(&mut rng, 2), Some(lost_at + 2));
    match run_recovery(&devs, &options(None, false)) {
        Err(RecoveryError::Missing {
            lsn,
            durable_lsn,
            witness: text,
            ends,
        }) => {
            assert_eq!((lsn, durable_lsn), (lost_at, lost_at + 2));
            assert!(
                text.contains("wal1") && text.contains(&witness.offset.to_string()),
                "{text}"
            );
            // Where the missing batch would be, and what is there.
            assert!(
                ends.contains(&format!("the log ends after LSN {}", lost_at - 1))
                    && ends.contains("blank"),
                "{ends}"
            );
        }
        Err(e) => panic!("expected Missing, got {e}"),
        Ok(rec) => panic!("expected Missing, got {}", rec.report),
    }
    let rec = run_recovery(&devs, &options(None, true)).unwrap();
    assert!(matches!(rec.report.end, PrefixEnd::Truncated { lsn, .. } if lsn == lost_at));
    assert_eq!(rec.next_lsn, lost_at);
}

#[test]
fn gap_without_evidence_is_a_normal_end() {
    let devs = sims(2, 6);
    let mut w = Writer::new(devs.clone());
    let mut rng = rng();
    w.write(0, &records(&mut rng, 2), None);
    let lost_at = w.next_lsn;
    w.skip(3);
    let later = w.write(1, &records(&mut rng, 2), None);
    let rec = run_recovery(&devs, &options(None, false)).unwrap();
    assert_eq!(
        rec.report.end,
        PrefixEnd::Gap {
            missing_lsn: lost_at
        }
    );
    assert_eq!(
        (rec.report.dropped_batches, rec.report.zeroed_batches),
        (1, 1)
    );
    assert!(zeroed(&devs, &later));
}

#[test]
fn stale_batches_of_a_reused_segment_are_ignored() {
    let devs = sims(1, 7);
    let mut w = Writer::new(devs.clone());
    let mut rng = rng();
    for _ in 0..3 {
        w.write(0, &records(&mut rng, 1), None);
    }
    // Reuse segment 0: new header (seq 2), one batch over the old first one.
    w.start_next_at(0, 0);
    let fresh = w.write(0, &records(&mut rng, 1), None);
    assert_eq!((fresh.segment, fresh.offset), (0, w.batches[0].0.offset));
    let rec = run_recovery(&devs, &options(Some(fresh.first_lsn), false)).unwrap();
    assert_eq!(rec.records, w.expected(fresh.first_lsn, w.next_lsn));
    assert_eq!(
        rec.report.end,
        PrefixEnd::CleanEnd {
            next_lsn: w.next_lsn
        }
    );
    assert_eq!((rec.report.batches, rec.report.zeroed_batches), (1, 0));
    assert_eq!(
        (rec.devices[0].next_seq, rec.devices[0].next_segment),
        (3, 1)
    );
}

#[test]
fn foreign_appliance_or_device_is_refused() {
    let devs = sims(2, 8);
    let mut w = Writer::new(devs.clone());
    w.appliance = 77;
    w.write(1, &records(&mut rng(), 1), None);
    match run_recovery(&devs, &options(None, false)) {
        Err(RecoveryError::Foreign {
            device,
            segment,
            why,
        }) => {
            assert_eq!((device.as_str(), segment), ("wal1", 0));
            assert!(why.contains("appliance"), "{why}");
        }
        Err(e) => panic!("expected Foreign, got {e}"),
        Ok(rec) => panic!("expected Foreign, got {}", rec.report),
    }
    // The right appliance, but the devices given in the wrong order.
    let devs = sims(2, 9);
    let mut w = Writer::new(devs.clone());
    w.write(1, &records(&mut rng(), 1), None);
    let swapped = vec![devs[1].clone(), devs[0].clone()];
    assert!(matches!(
        run_recovery(&swapped, &options(None, false)),
        Err(RecoveryError::Foreign { .. })
    ));
}

#[test]
fn replay_from_skips_older_batches() {
    let devs = sims(2, 10);
    let mut w = Writer::new(devs.clone());
    let mut rng = rng();
    let placed: Vec<_> = (0..6)
        .map(|i| w.write(i % 2, &records(&mut rng, 5), None))
        .collect();
    let from = placed[2].first_lsn + 2; // inside the third batch
    let rec = run_recovery(&devs, &options(Some(from), false)).unwrap();
    assert_eq!(rec.records.first().map(|r| r.lsn), Some(from));
    assert_eq!(rec.records, w.expected(from, w.next_lsn));
    assert_eq!(rec.report.batches, 4);
    let live: Vec<&LiveSegment> = rec.devices.iter().flat_map(|d| &d.live).collect();
    assert_eq!(live.len(), 2);
    // A replay point past everything written: empty, nothing zeroed.
    let rec = run_recovery(&devs, &options(Some(w.next_lsn + 10), false)).unwrap();
    assert_eq!(rec.report.end, PrefixEnd::Empty);
    assert_eq!(rec.report.zeroed_batches, 0);
}
