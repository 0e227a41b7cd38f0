//! Reading the log back after a start or a crash.
//!
//! [`recover`] finds the longest gap-free prefix of the log across the WAL
//! devices of the stripe, from the replay point on, and returns its records
//! in LSN order, with what the writer needs to go on (next LSN, epoch, per
//! device the next segment seq and slot, and the segments still live):
//!
//! 1. **Scan** (`scan.rs`): every device at once, one thread each; segment
//!    headers, then the batches of each valid segment, in 1 MiB reads with
//!    several in flight. Records are decoded during the scan and kept in
//!    memory (not re-read): recovery returns them all anyway, so re-reading
//!    would double the I/O to save at most the records beyond the prefix.
//!    Records of batches wholly before the replay point are checked and
//!    dropped at once.
//! 2. **Prefix** (`prefix.rs`): batches ordered by LSN, walked from the
//!    replay point until a gap, a bad batch or the end.
//! 3. **Evidence**: a good batch whose durable LSN reaches the first LSN not
//!    recovered proves that acknowledged data was lost: an error naming the
//!    device, segment and byte offset ([`RecoveryError::Corrupt`],
//!    [`RecoveryError::Missing`]), or with `truncate_corrupt` a prefix that
//!    ends there ([`PrefixEnd::Truncated`]).
//! 4. **Repair** (`repair.rs`): a damaged copy of a batch of the prefix
//!    (`wal.copies` above one) is rewritten from its good copy.
//! 5. **Tail truncation** (`tail.rs`): every batch beyond the prefix has its
//!    first block zeroed and every device is flushed, so that the writer can
//!    reuse those LSNs and a second recovery finds the same prefix.
//!
//! LSNs start at 1. With `replay_from: None` the prefix starts at the lowest
//! LSN found, which is right only while no segment has been reused; the
//! engine passes the manifest's replay point.
//!
//! Known limit: the scan of a segment ends at the first block that is not a
//! batch of that segment, so a batch after a damaged header in the same
//! segment is not seen (and cannot serve as evidence). Batches are not
//! looked for inside the bytes after a damaged header, as user data there
//! could otherwise pass for one.

mod prefix;
mod read;
mod repair;
mod report;
mod scan;
mod tail;

use std::time::{Duration, Instant};

use crate::device::{Device, DeviceError};
use crate::wal::format::Record;
use crate::wal::Lsn;

/// One WAL device of the stripe.
pub struct WalDevice<D> {
    /// Index of the device in the stripe, as its segment headers say.
    pub index: u32,
    /// Name used in messages.
    pub name: String,
    pub device: D,
}

impl<D: Device + Clone> WalDevice<D> {
    /// The stripe of `devices` in order, each named as its device is.
    pub fn stripe(devices: &[D]) -> Vec<WalDevice<D>> {
        devices
            .iter()
            .enumerate()
            .map(|(i, d)| WalDevice {
                index: i as u32,
                name: d.info().name.clone(),
                device: d.clone(),
            })
            .collect()
    }
}

/// What recovery is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryOptions {
    /// The first LSN to replay (the manifest's replay point); `None`: the
    /// lowest LSN found.
    pub replay_from: Option<Lsn>,
    /// End the prefix at lost or corrupt data that later batches depend on,
    /// instead of failing.
    pub truncate_corrupt: bool,
    /// Bytes per segment, as the log was written with.
    pub segment_size: u64,
    /// The largest batch the writer builds, header included; a header that
    /// claims more is not trusted.
    pub max_batch: u64,
    /// The appliance the devices must belong to.
    pub appliance_id: u128,
    /// Devices that may fail to read and be lost, recovery going on from
    /// the others (saying which); 0: a device that fails to read fails
    /// recovery. Only for a caller that knows every batch has a copy on the
    /// devices left: recovery cannot tell a device that missed batches (one
    /// lost in an earlier run, or back after one) from a complete one, so a
    /// log recovered without a device may silently lack acknowledged
    /// batches. The engine allows `copies - 1` and says which devices may
    /// lack batches (`stale`).
    pub lose_unreadable: usize,
    /// Devices (by [`WalDevice::index`]) known to lack batches: lost in an
    /// earlier run, or blank since they were replaced. No device is lost
    /// while one of these is among those the log would be recovered from.
    pub stale: Vec<u32>,
}

/// What recovery found.
#[derive(Clone, Debug)]
pub struct Recovered {
    /// The gap-free prefix, in LSN order, from the replay point.
    pub records: Vec<Record>,
    /// The first LSN after the prefix (the replay start if it is empty).
    pub next_lsn: Lsn,
    /// The highest epoch in any valid header; the writer uses `epoch + 1`.
    pub epoch: u64,
    /// `next_lsn - 1`: everything recovered is durable (recovery flushed).
    pub durable_lsn: Lsn,
    /// Per device, in the order given.
    pub devices: Vec<DeviceLog>,
    pub report: RecoveryReport,
}

/// Where the writer goes on, on one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceLog {
    pub index: u32,
    /// The highest valid segment seq seen plus one, or 1.
    pub next_seq: u64,
    /// The segment after the one with the highest valid seq (mod the number
    /// of segments); 0 if none.
    pub next_segment: u64,
    /// Segments holding batches of the prefix, by seq.
    pub live: Vec<LiveSegment>,
    /// Why the device could not be read, if it could not: the log was
    /// recovered from the copies on the others, and the writer goes on
    /// without it (degraded).
    pub lost: Option<String>,
}

/// A segment still needed: it holds batches of the prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveSegment {
    pub segment: u64,
    pub seq: u64,
    /// The last LSN of the prefix in it.
    pub last_lsn: Lsn,
}

/// What recovery did, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Batches, records and bytes (padded, on the device) of the prefix.
    pub batches: u64,
    pub records: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    pub end: PrefixEnd,
    /// Good batches (and their records) beyond the prefix, not replayed.
    pub dropped_batches: u64,
    pub dropped_records: u64,
    /// Batches beyond the prefix (good or bad) made unreadable.
    pub zeroed_batches: u64,
    /// Damaged copies of batches of the prefix, rewritten from a good copy
    /// on another device (`wal.copies`).
    pub repaired_batches: u64,
    /// Batches of the prefix found on one device alone while the log has
    /// several (a power cut between the copies' writes, a copy damaged):
    /// a log kept at several copies should not go on relying on them.
    pub single_copy_batches: u64,
    /// Devices that could not be read, and why: the log came from the
    /// copies on the others.
    pub lost_devices: Vec<(String, String)>,
    /// Valid segments scanned, and bytes read doing it.
    pub segments: u64,
    pub bytes_read: u64,
    /// Where each device's log ends before the first LSN after the
    /// prefix, and what lies there: where a batch lost though something
    /// else says it was durable would have been.
    pub ends: String,
}

/// Why the prefix ends where it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefixEnd {
    /// No batch at or after the replay point.
    Empty,
    /// The last batch found ends the prefix; nothing follows it.
    CleanEnd { next_lsn: Lsn },
    /// No batch holds this LSN, but later ones exist, none of which says it
    /// was durable: writes in flight at the crash.
    Gap { missing_lsn: Lsn },
    /// The batch where the prefix would go on is damaged (a write torn by
    /// the crash), and nothing says it was durable.
    Torn {
        device: String,
        segment: u64,
        offset: u64,
        why: String,
    },
    /// Data reported durable was lost or corrupt at `lsn` and the operator
    /// asked to truncate there. The place is the bad batch or, for a
    /// missing one, the batch whose durable LSN proves it was written.
    Truncated {
        device: String,
        segment: u64,
        offset: u64,
        lsn: Lsn,
    },
}

/// Why recovery cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error("WAL device {device}, segment {segment}, byte offset {offset}: the batch holding LSN {lsn} is corrupt ({why}), and later batches say it was durable; start with truncate-corrupt to drop it and everything after it")]
    Corrupt {
        device: String,
        segment: u64,
        offset: u64,
        lsn: Lsn,
        why: String,
    },
    #[error("WAL: no device holds LSN {lsn}, but {witness} says every LSN up to {durable_lsn} was durable ({ends}); start with truncate-corrupt to drop everything from LSN {lsn} on")]
    Missing {
        lsn: Lsn,
        durable_lsn: Lsn,
        witness: String,
        /// Where the log before the gap ends on each device holding it,
        /// and what is there.
        ends: String,
    },
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("WAL device {device} cannot be read ({why}), and the log cannot be recovered without it: {stale} may lack batches (lost in an earlier run, or replaced, and not whole again since)")]
    Incomplete {
        device: String,
        why: String,
        /// The devices that may lack batches, of those that can be read.
        stale: String,
    },
    #[error("WAL device {device}, segment {segment}: {why}; is this the right device?")]
    Foreign {
        device: String,
        segment: u64,
        why: String,
    },
}

/// Recovers the log from `devices`: finds the prefix, truncates what lies
/// beyond it, flushes every device and returns the prefix's records.
/// On an error nothing has been written.
///
/// # Panics
/// If `opts.segment_size` is not a whole number of at least two blocks of
/// some device (configuration validation refuses such sizes).
pub fn recover<D: Device>(
    devices: &[WalDevice<D>],
    opts: &RecoveryOptions,
) -> Result<Recovered, RecoveryError> {
    let started = Instant::now();
    let Scanned {
        scans,
        mut found,
        plan,
        lost,
    } = scan_and_plan(devices, opts)?;
    let repaired = repair::rewrite_bad_copies(devices, &found, &plan.repair)?;
    tail::truncate_and_flush(devices, &found, &plan.beyond, &lost)?;

    let epoch = scans
        .iter()
        .flat_map(|s| s.segments.iter().map(|seg| seg.header.epoch))
        .chain(found.iter().map(|f| f.epoch))
        .max()
        .unwrap_or(0);
    let logs = devices
        .iter()
        .enumerate()
        .map(|(dev, wd)| DeviceLog {
            lost: lost[dev].clone(),
            ..device_log(dev, wd.index, &scans[dev], &found, &plan.copies)
        })
        .collect();
    let bytes = plan.taken.iter().map(|&i| found[i].len).sum();
    let mut records = Vec::new();
    for &i in &plan.taken {
        if let Ok(recs) = &mut found[i].state {
            records.extend(recs.drain(..).filter(|r| r.lsn >= plan.start));
        }
    }
    let report = RecoveryReport {
        batches: plan.taken.len() as u64,
        records: records.len() as u64,
        bytes,
        elapsed: started.elapsed(),
        end: plan.end,
        dropped_batches: plan.dropped_batches,
        dropped_records: plan.dropped_records,
        zeroed_batches: plan.beyond.len() as u64,
        repaired_batches: repaired,
        single_copy_batches: if devices.len() > 1 {
            plan.single_copy
        } else {
            0
        },
        lost_devices: devices
            .iter()
            .zip(&lost)
            .filter_map(|(d, l)| Some((d.name.clone(), l.clone()?)))
            .collect(),
        segments: scans.iter().map(|s| s.segments.len() as u64).sum(),
        bytes_read: scans.iter().map(|s| s.bytes_read).sum(),
        ends: plan.ends,
    };
    Ok(Recovered {
        records,
        next_lsn: plan.next_lsn,
        epoch,
        durable_lsn: plan.next_lsn - 1,
        devices: logs,
        report,
    })
}

/// What the log holds from the replay point on, found as [`recover`] finds
/// it but touching nothing: no tail is truncated, no device flushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Survey {
    /// Records of the gap-free prefix from the replay point.
    pub records: u64,
    /// The first LSN of the prefix (the replay point).
    pub first_lsn: Lsn,
    /// The first LSN after it.
    pub next_lsn: Lsn,
}

/// Reads the log as [`recover`] would, and says what a recovery would
/// replay; writes nothing.
pub fn survey<D: Device>(
    devices: &[WalDevice<D>],
    opts: &RecoveryOptions,
) -> Result<Survey, RecoveryError> {
    let Scanned { found, plan, .. } = scan_and_plan(devices, opts)?;
    let records = plan
        .taken
        .iter()
        .filter_map(|&i| found[i].state.as_ref().ok())
        .map(|recs| recs.iter().filter(|r| r.lsn >= plan.start).count() as u64)
        .sum();
    Ok(Survey {
        records,
        first_lsn: plan.start,
        next_lsn: plan.next_lsn,
    })
}

/// What the scan found on every device, and the plan of the prefix.
struct Scanned {
    scans: Vec<scan::DeviceScan>,
    found: Vec<scan::Found>,
    plan: prefix::Plan,
    /// Per device, why it could not be read (lost), if it could not.
    lost: Vec<Option<String>>,
}

/// Scans every device at once, one thread each, and plans the prefix.
/// Up to `lose_unreadable` devices that fail to read are lost instead of
/// failing recovery.
fn scan_and_plan<D: Device>(
    devices: &[WalDevice<D>],
    opts: &RecoveryOptions,
) -> Result<Scanned, RecoveryError> {
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(dev, wd)| s.spawn(move || scan::scan_device(dev, wd, opts)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a WAL scan thread panicked"))
            .collect::<Vec<_>>()
    });
    let failed = results
        .iter()
        .filter(|r| matches!(r, Err(RecoveryError::Device(_))))
        .count();
    // The devices left must hold every batch: none of them may be one
    // known to lack some.
    let stale: Vec<&str> = results
        .iter()
        .zip(devices)
        .filter(|(r, wd)| r.is_ok() && opts.stale.contains(&wd.index))
        .map(|(_, wd)| wd.name.as_str())
        .collect();
    let mut scans = Vec::with_capacity(devices.len());
    let mut lost = Vec::with_capacity(devices.len());
    for (r, wd) in results.into_iter().zip(devices) {
        match r {
            Ok(scan) => {
                scans.push(scan);
                lost.push(None);
            }
            Err(RecoveryError::Device(e))
                if failed <= opts.lose_unreadable && !stale.is_empty() =>
            {
                return Err(RecoveryError::Incomplete {
                    device: wd.name.clone(),
                    why: e.to_string(),
                    stale: stale.join(", "),
                });
            }
            Err(RecoveryError::Device(e)) if failed <= opts.lose_unreadable => {
                tracing::error!(
                    "WAL device {} cannot be read ({e}): recovering the log from the copies on the other devices, and going on DEGRADED without it",
                    wd.name
                );
                scans.push(scan::DeviceScan::empty(wd, opts));
                lost.push(Some(e.to_string()));
            }
            Err(e) => return Err(e),
        }
    }
    let mut found: Vec<scan::Found> = Vec::new();
    for s in &mut scans {
        found.append(&mut s.batches);
    }
    let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    let plan = prefix::plan(&found, &scans, &names, opts)?;
    Ok(Scanned {
        scans,
        found,
        plan,
        lost,
    })
}

/// Where the writer goes on, on the device at position `dev`: the
/// segments holding any copy of the prefix stay live.
fn device_log(
    dev: usize,
    index: u32,
    scan: &scan::DeviceScan,
    found: &[scan::Found],
    copies: &[usize],
) -> DeviceLog {
    let newest = scan.segments.iter().max_by_key(|s| s.header.seq);
    let mut live: Vec<LiveSegment> = Vec::new();
    for f in copies.iter().map(|&i| &found[i]).filter(|f| f.dev == dev) {
        match live.iter_mut().find(|l| l.segment == f.segment) {
            Some(l) => l.last_lsn = l.last_lsn.max(f.last_lsn()),
            None => live.push(LiveSegment {
                segment: f.segment,
                seq: f.seq,
                last_lsn: f.last_lsn(),
            }),
        }
    }
    live.sort_by_key(|l| l.seq);
    DeviceLog {
        index,
        next_seq: newest.map_or(1, |s| s.header.seq + 1),
        next_segment: newest.map_or(0, |s| (s.index + 1) % scan.geometry.segments),
        live,
        lost: None,
    }
}
