//! The WAL's behaviour at each durability level, across reopen, when the log
//! fills, and when a device fails.

use std::time::{Duration, Instant};

use stria::config::{DeviceLoss, Durability, SimConfig};
use stria::device::sim::SimDevice;
use stria::reactor::ReactorConfig;
use stria::wal::format::RecordOp;
use stria::wal::recovery::WalDevice;
use stria::wal::{Ticket, Wal, WalError, WalOptions};

fn sim(name: &str, write_us: u64, flush_us: u64, blocks: u64) -> SimDevice {
    let model = SimConfig {
        write_us,
        read_us: 0,
        flush_us,
        bandwidth: 0,
        volatile_cache: true,
        ..SimConfig::default()
    };
    SimDevice::new(name, 4096, blocks, 64, model)
}

fn opts() -> WalOptions {
    WalOptions {
        appliance_id: 1,
        segment_size: 64 << 10,
        max_batch: 16 << 10,
        in_flight_per_device: 2,
        fua: false,
        ring_capacity: 64,
        replay_from: Some(1),
        truncate_corrupt: false,
        copies: 1,
        lose_unreadable: 0,
        stale: Vec::new(),
        on_loss: None,
        on_device_loss: DeviceLoss::Degrade,
    }
}

fn open(devs: &[SimDevice]) -> (Wal, stria::wal::recovery::Recovered) {
    Wal::open(
        WalDevice::stripe(devs),
        &opts(),
        ReactorConfig::unpinned("wal"),
    )
    .expect("open the WAL")
}

/// Waits up to `limit` for the ticket; true if it completed.
fn done_within(t: &Ticket, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if t.is_done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    t.is_done()
}

fn put(wal: &Wal, key: &str, level: Durability) -> Ticket {
    wal.put(0, key.as_bytes().to_vec(), b"value".to_vec(), level)
        .unwrap()
}

#[test]
fn async_is_acknowledged_before_the_write_completes() {
    // Writes take 400 ms.
    let devs = [sim("w", 400_000, 0, 2048)];
    let (wal, _) = open(&devs);
    let a = put(&wal, "a", Durability::Async);
    let w = put(&wal, "w", Durability::Write);
    assert!(
        done_within(&a, Duration::from_millis(100)),
        "async waits for nothing"
    );
    assert!(!w.is_done(), "write waits for the 400 ms write");
    assert_eq!(w.wait().unwrap(), 2);
    assert_eq!(a.wait().unwrap(), 1);
}

#[test]
fn write_is_acknowledged_before_the_flush_and_sync_after_it() {
    // Flushes take 400 ms, writes nothing.
    let devs = [sim("w", 0, 400_000, 2048)];
    let (wal, _) = open(&devs);
    // The write goes first: whether the reactor takes the two appends in
    // one turn or two, its batch is written before the sync's, so the flush
    // the sync asks for covers both.
    let w = put(&wal, "w", Durability::Write);
    let s = put(&wal, "s", Durability::Sync);
    assert!(
        done_within(&w, Duration::from_millis(200)),
        "write waits for no flush"
    );
    assert!(!s.is_done(), "sync waits for the 400 ms flush");
    assert_eq!(s.wait().unwrap(), 2);
    assert_eq!(
        wal.durable_lsn(),
        2,
        "the flush after both writes covers both"
    );
    let stats = wal.stats();
    assert!(stats.flushes[0] >= 1);
}

#[test]
fn a_device_without_a_volatile_cache_is_never_flushed() {
    let model = SimConfig {
        write_us: 0,
        flush_us: 0,
        bandwidth: 0,
        volatile_cache: false,
        ..SimConfig::default()
    };
    let devs = [SimDevice::new("plp", 4096, 2048, 64, model)];
    let (wal, _) = open(&devs);
    for i in 0..100 {
        put(&wal, &format!("k{i}"), Durability::Sync)
            .wait()
            .unwrap();
    }
    assert_eq!(wal.stats().flushes, vec![0]);
}

#[test]
fn acknowledgements_follow_lsn_order() {
    // Two devices: the second one's writes are fast, the first one's slow.
    // A sync append striped to the fast device must still wait for the
    // earlier batch on the slow one.
    let devs = [sim("slow", 300_000, 0, 2048), sim("fast", 0, 0, 2048)];
    let (wal, _) = open(&devs);
    let first = put(&wal, "first", Durability::Sync);
    // Let the first batch go to the slow device alone.
    std::thread::sleep(Duration::from_millis(20));
    let second = put(&wal, "second", Durability::Sync);
    std::thread::sleep(Duration::from_millis(50));
    assert!(!second.is_done(), "LSN 2 is not acknowledged before LSN 1");
    assert_eq!(first.wait().unwrap(), 1);
    assert_eq!(second.wait().unwrap(), 2);
    assert_eq!(
        wal.stats().device_batches,
        vec![1, 1],
        "the batches were striped"
    );
}

#[test]
fn reopen_continues_after_the_recovered_log() {
    let devs = [sim("a", 0, 0, 2048), sim("b", 0, 0, 2048)];
    let (wal, rec) = open(&devs);
    assert!(rec.records.is_empty());
    for i in 0..500 {
        put(&wal, &format!("k{i}"), Durability::Async);
    }
    wal.close().unwrap();
    let (wal, rec) = open(&devs);
    assert_eq!(rec.records.len(), 500);
    assert_eq!(rec.records[499].key, b"k499");
    assert_eq!(put(&wal, "next", Durability::Sync).wait().unwrap(), 501);
    wal.close().unwrap();
    let (_wal, rec) = open(&devs);
    assert_eq!(rec.records.len(), 501);
    assert_eq!(rec.records[500].key, b"next");
}

#[test]
fn a_full_log_holds_writers_back_until_release() {
    // 1 MiB reserved + 4 segments of 64 KiB.
    let devs = [sim("small", 0, 0, 256 + 64)];
    let (wal, _) = open(&devs);
    let value = vec![7u8; 3000];
    let wal = std::sync::Arc::new(wal);
    let writer = {
        let wal = wal.clone();
        let value = value.clone();
        std::thread::spawn(move || {
            let mut last = 0;
            for i in 0..400u32 {
                let t = wal
                    .put(0, i.to_be_bytes().to_vec(), value.clone(), Durability::Sync)
                    .unwrap();
                last = t.wait().unwrap();
            }
            last
        })
    };
    // 400 records of 3 KiB do not fit in 256 KiB: the writer must stall.
    // How soon it fills the log depends on how often it is scheduled, so
    // wait for the log to fill rather than for a fixed time.
    let until = Instant::now() + Duration::from_secs(30);
    while wal.stats().log_full == 0 {
        assert!(!writer.is_finished(), "the writer stalls on a full log");
        assert!(Instant::now() < until, "the log never filled");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!writer.is_finished(), "the writer stalls on a full log");
    assert!(wal.is_full(), "the full log is published");
    // Release as the memstores would, until the writer is through.
    while !writer.is_finished() {
        wal.release(wal.durable_lsn());
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(writer.join().unwrap(), 400);
    let stats = wal.stats();
    assert!(stats.segments_reclaimed >= 4, "{stats}");
}

#[test]
fn a_record_larger_than_a_batch_is_refused() {
    let devs = [sim("w", 0, 0, 2048)];
    let (wal, _) = open(&devs);
    let err = wal
        .put(0, b"k".to_vec(), vec![0; 20 << 10], Durability::Sync)
        .unwrap_err();
    assert!(matches!(err, WalError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("raise wal.max-batch"), "{err}");
}

#[test]
fn a_device_error_fails_waiting_and_later_appends() {
    let mut model = SimConfig {
        write_us: 0,
        flush_us: 0,
        bandwidth: 0,
        ..SimConfig::default()
    };
    // Reads (recovery) work; every write fails.
    model.faults.write_error_rate = 1.0;
    let devs = [SimDevice::new("bad", 4096, 2048, 64, model)];
    let (wal, _) = open(&devs);
    let t = put(&wal, "a", Durability::Write);
    let err = t.wait().unwrap_err().to_string();
    assert!(err.contains("injected"), "{err}");
    let later = put(&wal, "b", Durability::Async);
    assert!(later.wait().is_err());
}

#[test]
fn none_is_not_logged() {
    let devs = [sim("w", 0, 0, 2048)];
    let (wal, _) = open(&devs);
    assert_eq!(
        wal.append(
            RecordOp::Put,
            0,
            b"k".to_vec(),
            b"v".to_vec(),
            Durability::None
        )
        .unwrap()
        .wait()
        .unwrap(),
        0
    );
    assert_eq!(wal.stats().appends, 0);
}

#[test]
fn reopen_without_a_replay_point_starts_after_the_last_release() {
    // 1 MiB reserved + 4 segments of 64 KiB: the log wraps.
    let devs = [sim("a", 0, 0, 256 + 64), sim("b", 0, 0, 256 + 64)];
    let mut o = opts();
    o.replay_from = None;
    let (wal, _) = Wal::open(WalDevice::stripe(&devs), &o, ReactorConfig::unpinned("wal")).unwrap();
    let value = vec![1u8; 3000];
    let mut last = 0;
    for i in 0..600u32 {
        let t = wal
            .put(0, i.to_be_bytes().to_vec(), value.clone(), Durability::Sync)
            .unwrap();
        last = t.wait().unwrap();
        // The memstores keep only the last 20 records.
        wal.release(last.saturating_sub(20));
    }
    let stats = wal.close().unwrap();
    assert!(stats.segments_reclaimed > 8, "the log wrapped: {stats}");
    let (_wal, rec) = Wal::open(WalDevice::stripe(&devs), &o, ReactorConfig::unpinned("wal"))
        .expect("reopen after the log wrapped, with no replay point given");
    let first = rec.records.first().expect("the unreleased records").lsn;
    assert!(
        first <= last - 20,
        "everything not released is replayed (from {first})"
    );
    assert_eq!(rec.records.last().unwrap().lsn, last);
}

#[test]
fn a_burst_spreads_over_every_device_of_the_stripe() {
    // Four devices whose link moves 1 MB/s: a 16 KiB batch takes 16 ms, so
    // a burst of appends is all queued before the first write completes.
    let slow = SimConfig {
        write_us: 0,
        flush_us: 0,
        bandwidth: 1_000_000,
        volatile_cache: false,
        ..SimConfig::default()
    };
    let devs: Vec<SimDevice> = (0..4)
        .map(|i| SimDevice::new(&format!("w{i}"), 4096, 2048, 64, slow.clone()))
        .collect();
    let opts = WalOptions {
        max_batch: 1 << 20,
        segment_size: 4 << 20,
        ring_capacity: 1024,
        ..opts()
    };
    let (wal, _) = Wal::open(
        WalDevice::stripe(&devs),
        &opts,
        ReactorConfig::unpinned("wal"),
    )
    .unwrap();
    let tickets: Vec<Ticket> = (0..256)
        .map(|i| {
            wal.put(
                0,
                format!("k{i}").into_bytes(),
                vec![7; 1024],
                Durability::Sync,
            )
            .unwrap()
        })
        .collect();
    for t in &tickets {
        t.wait().unwrap();
    }
    let stats = wal.stats();
    let total: u64 = stats.device_bytes.iter().sum();
    for (d, &bytes) in stats.device_bytes.iter().enumerate() {
        // One large batch on one device would leave the others idle while
        // every writer waits for it; each device must take a fair share.
        assert!(
            bytes * 8 >= total,
            "device {d} wrote {bytes} of {total} bytes: {:?}",
            stats.device_bytes
        );
    }
}

#[test]
fn with_fua_a_sync_append_needs_no_flush_but_still_waits_for_earlier_writes() {
    // Flushes take 400 ms; writes are instant.
    let devs = [sim("w", 0, 400_000, 2048)];
    let opts = WalOptions {
        fua: true,
        ..opts()
    };
    let (wal, _) = Wal::open(
        WalDevice::stripe(&devs),
        &opts,
        ReactorConfig::unpinned("wal"),
    )
    .unwrap();
    let s = put(&wal, "s", Durability::Sync);
    assert!(
        done_within(&s, Duration::from_millis(200)),
        "a FUA batch is durable when its write completes"
    );
    assert_eq!(wal.stats().flushes, vec![0]);

    // A `write` append goes out without FUA; a later `sync` append in a
    // FUA batch is acknowledged only once the earlier batch is flushed too.
    put(&wal, "w", Durability::Write).wait().unwrap();
    let t0 = Instant::now();
    let s2 = put(&wal, "s2", Durability::Sync);
    assert!(
        !done_within(&s2, Duration::from_millis(100)),
        "waits for the flush"
    );
    s2.wait().unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(350));
    assert_eq!(wal.stats().flushes, vec![1]);
}

#[test]
fn a_group_takes_consecutive_lsns_whatever_else_is_appended() {
    groups_take_consecutive_lsns(false);
}

#[test]
fn a_host_that_finds_every_buffer_in_flight_reaps_until_one_is_free() {
    // The groups' thread hosts the log and never drives it but through
    // its appends: with every buffer on its way, an append must reap.
    groups_take_consecutive_lsns(true);
}

fn groups_take_consecutive_lsns(hosted: bool) {
    use stria::record::Record;
    let devs = [sim("a", 20, 0, 4096), sim("b", 20, 0, 4096)];
    let (wal, _) = open(&devs);
    let wal = std::sync::Arc::new(wal);
    let host = hosted.then(|| wal.host().expect("no host yet"));
    // Another writer appends single records all along.
    let other = {
        let wal = wal.clone();
        std::thread::spawn(move || {
            for i in 0..2_000 {
                put(&wal, &format!("single{i}"), Durability::Async);
            }
        })
    };
    let mut tickets = Vec::new();
    for g in 0..300 {
        let n = 1 + g % 7;
        let keys: Vec<String> = (0..n).map(|i| format!("group{g}-{i}")).collect();
        let records = Record::group(keys.iter().map(|k| (k.as_bytes(), &[7u8; 500][..])));
        let mut group: Vec<_> = records
            .into_iter()
            .map(|r| (RecordOp::Put, 0u32, r))
            .collect();
        loop {
            match wal.try_append_group(group, Durability::Write).unwrap() {
                Ok(t) => {
                    tickets.extend(t);
                    break;
                }
                Err(back) => {
                    group = back;
                    std::thread::yield_now();
                }
            }
        }
    }
    other.join().unwrap();
    for t in tickets {
        t.wait().unwrap();
    }
    drop(host);
    let wal = std::sync::Arc::try_unwrap(wal).ok().expect("one handle");
    wal.close().unwrap();
    let (_wal, rec) = open(&devs);
    let keys: Vec<String> = rec
        .records
        .iter()
        .map(|r| String::from_utf8(r.key.clone()).unwrap())
        .collect();
    assert_eq!(
        keys.len(),
        2_000 + (0..300).map(|g| 1 + g % 7).sum::<usize>()
    );
    for g in 0..300 {
        let n = 1 + g % 7;
        let first = keys
            .iter()
            .position(|k| *k == format!("group{g}-0"))
            .expect("the group's first record");
        for i in 0..n {
            assert_eq!(
                keys[first + i],
                format!("group{g}-{i}"),
                "group {g} is split"
            );
        }
    }
}

#[test]
fn a_group_larger_than_a_batch_is_refused() {
    use stria::record::Record;
    let devs = [sim("w", 0, 0, 2048)];
    let (wal, _) = open(&devs);
    let keys: Vec<String> = (0..4).map(|i| format!("k{i}")).collect();
    let records = Record::group(keys.iter().map(|k| (k.as_bytes(), &[0u8; 5 << 10][..])));
    let group = records.into_iter().map(|r| (RecordOp::Put, 0, r)).collect();
    let err = wal.try_append_group(group, Durability::Sync).unwrap_err();
    assert!(matches!(err, WalError::TooLarge { .. }), "{err}");
    assert!(wal.max_group_bytes() < 20 << 10);
}

#[test]
fn a_host_drives_its_own_appends_and_others_without_its_reactor_watching() {
    // Writes take 2 ms, flushes 1 ms, on two devices.
    let devs = [sim("a", 2_000, 1_000, 2048), sim("b", 2_000, 1_000, 2048)];
    let (wal, _) = open(&devs);
    let wal = std::sync::Arc::new(wal);
    let host = wal.host().expect("the log has no host yet");
    assert!(wal.host().is_none(), "a thread hosts one log at most");
    // A second thread appends through the reactor's ring meanwhile.
    let other = {
        let wal = wal.clone();
        std::thread::spawn(move || {
            assert!(wal.host().is_none(), "the log has a host");
            (0..50)
                .map(|i| put(&wal, &format!("o{i}"), Durability::Sync))
                .map(|t| t.wait().unwrap())
                .collect::<Vec<_>>()
        })
    };
    // The host's appends: nothing is on a device until it drives.
    let mine: Vec<Ticket> = (0..50)
        .map(|i| put(&wal, &format!("h{i}"), Durability::Sync))
        .collect();
    let lsns: Vec<u64> = mine
        .iter()
        .map(|t| t.lsn().expect("an LSN at once"))
        .collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "in order: {lsns:?}");
    // Driving as an event loop does: until every one is acknowledged.
    let until = Instant::now() + Duration::from_secs(20);
    while !mine.iter().all(Ticket::is_done) {
        assert!(
            Instant::now() < until,
            "the host's appends were never acknowledged"
        );
        host.drive();
        let sleep = host.next_drive().unwrap_or(Duration::from_millis(1));
        std::thread::sleep(sleep.min(Duration::from_millis(1)));
    }
    for (t, lsn) in mine.iter().zip(&lsns) {
        assert_eq!(t.wait().unwrap(), *lsn);
    }
    // A blocking wait on the host's thread drives the log itself.
    assert_eq!(
        put(&wal, "last", Durability::Sync).wait().unwrap(),
        wal.durable_lsn()
    );
    let theirs = other.join().unwrap();
    assert!(theirs.windows(2).all(|w| w[0] < w[1]), "{theirs:?}");
    // Once the host goes, the reactor watches the devices again.
    drop(host);
    let after = {
        let wal = wal.clone();
        std::thread::spawn(move || put(&wal, "after", Durability::Sync).wait())
    };
    assert_eq!(after.join().unwrap().unwrap(), 102);
    let wal = std::sync::Arc::into_inner(wal).expect("the last reference");
    wal.close().unwrap();
    let (_wal, rec) = open(&devs);
    assert_eq!(rec.records.len(), 102, "every append is in the log");
}

#[test]
fn a_host_holds_its_open_batch_only_while_one_is_on_its_way() {
    // A batch of `write` appends is written and never flushed (nothing
    // waits for `sync`): the next batch must not wait for it to become
    // durable.
    let devs = [sim("a", 200, 0, 2048)];
    let (wal, _) = open(&devs);
    let host = wal.host().expect("no host yet");
    for i in 0..20 {
        let t = put(&wal, &format!("w{i}"), Durability::Write);
        let until = Instant::now() + Duration::from_secs(10);
        while !t.is_done() {
            assert!(Instant::now() < until, "write {i} was never acknowledged");
            host.drive();
            let sleep = host.next_drive().unwrap_or(Duration::from_millis(1));
            std::thread::sleep(sleep.min(Duration::from_millis(1)));
        }
    }
    assert!(wal.durable_lsn() < 20, "nothing asked for a flush");
    drop(host);
    wal.close().unwrap();
}
