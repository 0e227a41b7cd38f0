//! Requests, timing, queue limits and injected I/O errors.

use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use stria::config::{BackendConfig, DeviceConfig, Role, SimConfig, SimFaults};
use stria::device::sim::SimDevice;
use stria::device::{Device, DeviceError, IoBuf, IoKind, Queue, Request, WaitHint};

use super::*;

#[test]
fn round_trip() {
    let dev = device(instant());
    let mut q = queue(&dev);
    let c = run(&mut q, Request::write(7, 3, vec![filled(0xab, 2)]));
    assert_eq!((c.tag, c.kind, c.lba), (7, IoKind::Write, 3));
    assert_eq!(c.bufs.len(), 1, "the buffer comes back");
    c.result.unwrap();
    let data = read(&mut q, 2, 4);
    assert!(
        data[..BS].iter().all(|&b| b == 0),
        "unwritten blocks read as zeroes"
    );
    assert!(data[BS..3 * BS].iter().all(|&b| b == 0xab));
    assert!(data[3 * BS..].iter().all(|&b| b == 0));
    let stats = dev.stats();
    assert_eq!(
        (
            stats.writes,
            stats.reads,
            stats.bytes_written,
            stats.bytes_read
        ),
        (1, 1, 2 * BS as u64, 4 * BS as u64)
    );
}

#[test]
fn multi_buffer_requests_are_back_to_back() {
    let dev = device(instant());
    let mut q = queue(&dev);
    let bufs = vec![filled(1, 1), filled(2, 2), filled(3, 1)];
    run(&mut q, Request::write(0, 10, bufs)).result.unwrap();
    let c = run(
        &mut q,
        Request::read(0, 10, vec![IoBuf::new(3 * BS), IoBuf::new(BS)]),
    );
    c.result.unwrap();
    let expected: Vec<u8> = [1u8, 2, 2, 3].iter().flat_map(|&f| vec![f; BS]).collect();
    assert_eq!([&c.bufs[0][..], &c.bufs[1][..]].concat(), expected);
    assert_eq!(dev.visible_read(10, 4), expected);
}

#[test]
fn refused_requests_change_nothing() {
    let dev = SimDevice::new("d0", BS as u32, 16, 2, instant());
    let mut q = queue(&dev);
    write(&mut q, 0, filled(9, 1));
    let before = dev.stats();

    let misaligned = q
        .submit(Request::write(1, 0, vec![IoBuf::with_offset(BS, BS, 8)]))
        .unwrap_err();
    assert!(matches!(misaligned.error, DeviceError::Misaligned { .. }));
    assert_eq!(
        misaligned.request.into_bufs().len(),
        1,
        "the buffer comes back"
    );
    let partial = q
        .submit(Request::write(2, 0, vec![IoBuf::new(100)]))
        .unwrap_err();
    assert!(matches!(partial.error, DeviceError::Misaligned { .. }));
    let past_end = q
        .submit(Request::write(3, 15, vec![filled(1, 2)]))
        .unwrap_err();
    assert!(matches!(past_end.error, DeviceError::OutOfRange { .. }));
    assert_eq!(q.in_flight(), 0);

    q.submit(Request::read(4, 0, vec![IoBuf::new(BS)])).unwrap();
    q.submit(Request::flush(5)).unwrap();
    let full = q
        .submit(Request::write(6, 0, vec![filled(1, 1)]))
        .unwrap_err();
    assert!(full.error.is_queue_full());
    assert_eq!(q.in_flight(), 2);

    let after = dev.stats();
    assert_eq!(after.writes, before.writes);
    assert_eq!(after.refused, before.refused + 4);
    assert_eq!(
        dev.visible_read(0, 16),
        [vec![9; BS], vec![0; 15 * BS]].concat()
    );
    let mut out = Vec::new();
    assert_eq!(q.poll(&mut out), 2);
    assert!(out.iter().all(|c| c.result.is_ok()));
}

#[test]
fn large_devices_allocate_only_what_is_written() {
    let dev = SimDevice::new("big", BS as u32, (4u64 << 30) / BS as u64, 8, instant());
    let mut q = queue(&dev);
    let last = dev.info().capacity_blocks - 1;
    write(&mut q, last, filled(5, 1));
    write(&mut q, 0, filled(0, 1));
    flush(&mut q);
    assert_eq!(dev.stats().stored_bytes, 64 << 10);
    assert!(dev.durable_read(last, 1).iter().all(|&b| b == 5));
}

#[test]
fn a_write_does_not_complete_before_its_latency() {
    let model = SimConfig {
        write_us: 1000,
        ..instant()
    };
    let dev = device(model);
    let mut q = queue(&dev);
    let start = Instant::now();
    q.submit(Request::write(0, 0, vec![filled(1, 1)])).unwrap();
    let due = match q.wait_hint() {
        WaitHint::Deadline(due) => {
            assert!(due >= start + Duration::from_millis(1));
            Some(due)
        }
        WaitHint::Ready => {
            assert!(start.elapsed() >= Duration::from_millis(1));
            None
        }
        other => panic!("unexpected hint {other:?}"),
    };
    let mut out = Vec::new();
    if q.poll(&mut out) == 0 {
        // Reading advances the device to the time of the read: what it
        // shows before the deadline (this thread may be descheduled past
        // it between the poll and the read) must be the old data.
        let old = dev.visible_read(0, 1).iter().all(|&b| b == 0);
        if due.is_some_and(|due| Instant::now() < due) {
            assert!(old, "not visible before completion");
        }
        out.push(wait_one(&mut q));
    }
    assert!(start.elapsed() >= Duration::from_millis(1));
    out[0].result.as_ref().unwrap();
    assert_eq!(q.wait_hint(), WaitHint::Idle);
}

#[test]
fn transfers_share_the_device_bandwidth() {
    let model = SimConfig {
        bandwidth: BS as u64 * 1000, // one block per millisecond
        ..instant()
    };
    let dev = device(model);
    let mut q = queue(&dev);
    let start = Instant::now();
    q.submit(Request::write(0, 0, vec![filled(1, 1)])).unwrap();
    q.submit(Request::write(1, 1, vec![filled(2, 1)])).unwrap();
    // A sleep that overshoots the first deadline (a loaded machine) finds
    // both done in one poll: what is checked is their order and the time.
    let out = wait_for(&mut q, 2);
    assert_eq!((out[0].tag, out[1].tag), (0, 1));
    assert!(start.elapsed() >= Duration::from_millis(2));
}

#[test]
fn wait_hint_follows_the_queue() {
    let dev = device(instant());
    let mut q = queue(&dev);
    assert_eq!(q.wait_hint(), WaitHint::Idle);
    q.submit(Request::flush(0)).unwrap();
    assert_eq!(q.wait_hint(), WaitHint::Ready);
    let mut out = Vec::new();
    assert_eq!(q.poll(&mut out), 1);
    assert_eq!(q.wait_hint(), WaitHint::Idle);
}

#[test]
fn fail_ops_fail_by_number_and_change_nothing() {
    let model = SimConfig {
        faults: SimFaults {
            fail_ops: vec![1, 3],
            ..SimFaults::default()
        },
        ..instant()
    };
    let dev = device(model);
    // Each flush on its own: the flush after the failed one succeeds.
    dev.set_sticky_flush_errors(false);
    let mut q = queue(&dev);
    write(&mut q, 0, filled(1, 1)); // op 0
    let failed = run(&mut q, Request::write(1, 1, vec![filled(2, 1)])); // op 1
    match failed.result {
        Err(DeviceError::Io {
            kind, lba, source, ..
        }) => {
            assert_eq!(
                (kind, lba, source.kind()),
                (IoKind::Write, 1, ErrorKind::Other)
            );
            assert!(source.to_string().contains("op 1"), "{source}");
        }
        other => panic!("expected an injected error, got {other:?}"),
    }
    assert!(read(&mut q, 1, 1).iter().all(|&b| b == 0)); // op 2
    let failed_flush = run(&mut q, Request::flush(3)); // op 3
    assert!(matches!(
        failed_flush.result,
        Err(DeviceError::Io {
            kind: IoKind::Flush,
            ..
        })
    ));
    assert!(
        dev.durable_read(0, 1).iter().all(|&b| b == 0),
        "a failed flush makes nothing durable"
    );
    flush(&mut q);
    assert!(dev.durable_read(0, 1).iter().all(|&b| b == 1));
    assert_eq!(dev.stats().errors_injected, 2);
}

/// Asserts that `c` is a flush failed because an earlier flush, op
/// `first`, was.
fn assert_sticky_flush_error(c: &stria::device::Completion, first: u64) {
    match &c.result {
        Err(DeviceError::Io {
            kind: IoKind::Flush,
            source,
            ..
        }) => {
            let msg = source.to_string();
            assert!(msg.contains("an earlier flush failed"), "{msg}");
            assert!(msg.contains(&format!("op {first}")), "{msg}");
        }
        other => panic!("expected a sticky flush error, got {other:?}"),
    }
}

/// An instant device on which operation `op` fails.
fn failing_op(op: u64) -> SimConfig {
    SimConfig {
        faults: SimFaults {
            fail_ops: vec![op],
            ..SimFaults::default()
        },
        ..instant()
    }
}

#[test]
fn a_failed_flush_fails_every_later_flush_until_reboot() {
    let dev = device(failing_op(1));
    let (mut a, mut b) = (queue(&dev), queue(&dev));
    write(&mut a, 0, filled(1, 1)); // op 0
    let failed = run(&mut a, Request::flush(1)); // op 1
    assert!(
        matches!(&failed.result, Err(DeviceError::Io { source, .. })
            if source.to_string().contains("fail-ops lists op 1")),
        "{:?}",
        failed.result
    );
    // A retry, or another queue's flush, fails too and makes nothing durable.
    assert_sticky_flush_error(&run(&mut b, Request::flush(2)), 1);
    assert_sticky_flush_error(&run(&mut a, Request::flush(3)), 1);
    assert!(dev.durable_read(0, 1).iter().all(|&b| b == 0));
    // Writes and reads go on.
    write(&mut b, 1, filled(2, 1));
    assert!(read(&mut a, 1, 1).iter().all(|&b| b == 2));
    assert_sticky_flush_error(&run(&mut b, Request::flush(4)), 1);
    assert_eq!(dev.stats().errors_injected, 4);
    // Until reboot.
    let new = dev.reboot(9);
    let mut q = queue(&new);
    write(&mut q, 0, filled(3, 1));
    flush(&mut q);
    assert!(new.durable_read(0, 1).iter().all(|&b| b == 3));
}

/// Which of 200 writes fail on a device with a 30% write error rate.
fn failures(seed: u64) -> Vec<bool> {
    let model = SimConfig {
        seed,
        faults: SimFaults {
            write_error_rate: 0.3,
            ..SimFaults::default()
        },
        ..instant()
    };
    let dev = device(model);
    let mut q = queue(&dev);
    (0..200)
        .map(|i| {
            run(&mut q, Request::write(i, i % 64, vec![filled(1, 1)]))
                .result
                .is_err()
        })
        .collect()
}

#[test]
fn error_rates_are_reproducible_from_the_seed() {
    let a = failures(42);
    assert_eq!(a, failures(42));
    assert_ne!(a, failures(43));
    let n = a.iter().filter(|&&f| f).count();
    assert!((30..90).contains(&n), "{n} of 200 failed at rate 0.3");
}

#[test]
fn power_cut_at_op_refuses_that_request_and_fails_those_in_flight() {
    let model = SimConfig {
        write_us: 10_000_000,
        faults: SimFaults {
            power_cut_at_op: Some(3),
            ..SimFaults::default()
        },
        ..instant()
    };
    let dev = device(model);
    let mut q = queue(&dev);
    for i in 0..3 {
        q.submit(Request::write(i, i, vec![filled(1, 1)])).unwrap();
    }
    assert!(dev.is_powered());
    let refused = q.submit(Request::flush(3)).unwrap_err();
    assert!(
        matches!(refused.error, DeviceError::Offline { .. }),
        "{}",
        refused.error
    );
    assert!(!dev.is_powered());
    assert_eq!(q.wait_hint(), WaitHint::Ready);
    let mut out = Vec::new();
    assert_eq!(q.poll(&mut out), 3);
    assert!(out
        .iter()
        .all(|c| matches!(c.result, Err(DeviceError::Offline { .. }))));
    assert_eq!(q.in_flight(), 0);
    let later = q
        .submit(Request::read(4, 0, vec![IoBuf::new(BS)]))
        .unwrap_err();
    assert!(matches!(later.error, DeviceError::Offline { .. }));
}

#[test]
fn after_a_cut_nothing_unpolled_reports_success() {
    let dev = device(instant());
    let mut q = queue(&dev);
    q.submit(Request::write(0, 0, vec![filled(1, 1)])).unwrap();
    // Completes the write on the device before the read is queued.
    q.submit(Request::read(1, 0, vec![IoBuf::new(BS)])).unwrap();
    dev.cut_power();
    let mut out = Vec::new();
    assert_eq!(q.poll(&mut out), 2);
    for c in &out {
        assert!(
            matches!(c.result, Err(DeviceError::Offline { .. })),
            "{:?}",
            c.result
        );
    }
}

#[test]
fn a_completed_write_is_visible_and_durable_only_after_a_flush() {
    let dev = device(instant());
    let mut q = queue(&dev);
    write(&mut q, 0, filled(1, 1));
    assert!(read(&mut q, 0, 1).iter().all(|&b| b == 1));
    assert!(dev.durable_read(0, 1).iter().all(|&b| b == 0));
    assert_eq!(dev.stats().cached_bytes, BS as u64);
    flush(&mut q);
    assert!(dev.durable_read(0, 1).iter().all(|&b| b == 1));
    assert_eq!(dev.stats().cached_bytes, 0);
}

#[test]
fn a_fua_write_is_durable_when_it_completes_and_older_cached_writes_never_land_over_it() {
    let dev = device(instant());
    let mut q = queue(&dev);
    // An older cached write to the same block, a later one elsewhere, then
    // a FUA write over the first.
    write(&mut q, 0, filled(1, 2));
    write(&mut q, 5, filled(3, 1));
    let c = run(&mut q, Request::write_fua(1, 1, vec![filled(2, 1)]));
    c.result.unwrap();
    assert!(dev.durable_read(1, 1).iter().all(|&b| b == 2));
    assert!(
        dev.durable_read(0, 1).iter().all(|&b| b == 1),
        "destaged in order"
    );
    assert!(
        dev.durable_read(5, 1).iter().all(|&b| b == 0),
        "the later write elsewhere is still only cached"
    );
    assert_eq!(dev.stats().cached_bytes, BS as u64);
    flush(&mut q);
    assert!(
        dev.durable_read(1, 1).iter().all(|&b| b == 2),
        "still the FUA data"
    );
    assert!(read(&mut q, 1, 1).iter().all(|&b| b == 2));
}

#[test]
fn a_fua_write_fails_like_a_flush_once_a_flush_failed() {
    let dev = device(failing_op(1));
    let mut q = queue(&dev);
    write(&mut q, 0, filled(1, 1)); // op 0
    assert!(run(&mut q, Request::flush(1)).result.is_err()); // op 1
    let c = run(&mut q, Request::write_fua(2, 1, vec![filled(2, 1)]));
    let err = c
        .result
        .expect_err("a FUA write cannot claim durability now");
    assert!(err.to_string().contains("an earlier flush failed"), "{err}");
}

#[test]
fn a_flush_does_not_cover_writes_still_in_flight() {
    let model = SimConfig {
        write_us: 2000,
        ..instant()
    };
    // The flush must reach the device while the write is in flight, within
    // 2 ms of it. A thread descheduled between the two submissions (a
    // loaded machine) misses that, and the write completes first: such a
    // round proves nothing, so it is tried again on a new device.
    for _ in 0..100 {
        let dev = device(model.clone());
        let mut q = queue(&dev);
        let before = Instant::now();
        q.submit(Request::write(0, 0, vec![filled(1, 1)])).unwrap();
        q.submit(Request::flush(1)).unwrap();
        if before.elapsed() >= Duration::from_micros(model.write_us) {
            continue;
        }
        let kinds: Vec<IoKind> = wait_for(&mut q, 2).iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [IoKind::Flush, IoKind::Write]);
        assert!(dev.visible_read(0, 1).iter().all(|&b| b == 1));
        assert!(dev.durable_read(0, 1).iter().all(|&b| b == 0));
        flush(&mut q);
        assert!(dev.durable_read(0, 1).iter().all(|&b| b == 1));
        return;
    }
    panic!("in 100 tries, never submitted a flush within 2 ms of a write");
}

#[test]
fn without_a_volatile_cache_a_completed_write_is_durable() {
    let model = SimConfig {
        volatile_cache: false,
        ..instant()
    };
    let dev = device(model);
    assert!(!dev.info().volatile_cache);
    let mut q = queue(&dev);
    write(&mut q, 0, filled(1, 1));
    assert!(dev.durable_read(0, 1).iter().all(|&b| b == 1));
}

#[test]
fn queues_on_many_threads() {
    let dev = SimDevice::new("d0", BS as u32, 64, 4, instant());
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let dev = dev.clone();
            s.spawn(move || {
                let mut q = queue(&dev);
                let mut out = Vec::new();
                for i in 0..16u64 {
                    let lba = u64::from(t) * 16 + i;
                    while q.in_flight() == 4 {
                        q.poll(&mut out);
                    }
                    q.submit(Request::write(lba, lba, vec![filled(t + 1, 1)]))
                        .unwrap();
                }
                while q.in_flight() > 0 {
                    q.poll(&mut out);
                }
                assert_eq!(out.len(), 16);
                assert!(out.iter().all(|c| c.result.is_ok()));
            });
        }
    });
    for t in 0..4u8 {
        let data = dev.visible_read(u64::from(t) * 16, 16);
        assert!(data.iter().all(|&b| b == t + 1));
    }
}

fn config(backend: BackendConfig) -> DeviceConfig {
    DeviceConfig {
        name: "wal0".into(),
        role: Role::Wal,
        size: 1 << 20,
        block_size: 4096,
        queue_depth: 32,
        backend,
    }
}

#[test]
fn open_takes_geometry_from_the_device_map() {
    let dev = SimDevice::open(&config(BackendConfig::Sim(SimConfig::default()))).unwrap();
    let info = dev.info();
    assert_eq!(
        (info.name.as_str(), info.capacity_blocks, info.queue_depth),
        ("wal0", 256, 32)
    );
    assert!(info.volatile_cache);

    let psync = config(BackendConfig::Psync {
        path: PathBuf::from("/dev/null"),
    });
    assert!(matches!(
        SimDevice::open(&psync),
        Err(DeviceError::Unavailable { .. })
    ));
    let mut bad = SimConfig::default();
    bad.faults.read_error_rate = 1.5;
    let err = SimDevice::open(&config(BackendConfig::Sim(bad))).unwrap_err();
    assert!(err.to_string().contains("read-error-rate"), "{err}");
}
