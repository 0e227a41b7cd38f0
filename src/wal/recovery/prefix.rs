//! Steps 2 and 3 of recovery: the gap-free prefix, and what its end means.
//!
//! Batches are ordered by first LSN. Copies of one batch (`wal.copies`)
//! start at the same LSN in the same epoch, one per device. Batches of
//! different writers can start at the same LSN only if an earlier
//! recovery's tail truncation did not reach a device: the higher epoch
//! wins, then on one device the higher segment seq, since it was written
//! later, by a writer that had already recovered past the other. Of the
//! copies that win, a good one is taken; a bad copy beside it is damage the
//! other copy repairs (in the manner of protocol-aware recovery: a
//! corrupted batch that has an intact copy is not the end of the log). The
//! walk starts at the batch covering the replay point and then takes, at
//! each step, the batch starting exactly at the next expected LSN. It stops
//! at a gap, at a batch with no good copy, or at the end.
//!
//! Then the evidence: every good batch carries the durable LSN its writer
//! knew. If any of them says the first LSN not recovered was durable, the
//! log lost acknowledged data and recovery refuses to go on, unless the
//! operator asked to truncate. Otherwise the end is an ordinary crash tail.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use super::scan::{DeviceScan, Found};
use super::{PrefixEnd, RecoveryError, RecoveryOptions};
use crate::wal::Lsn;

/// What the walk decided.
pub(super) struct Plan {
    /// Indices of the prefix's batches, in LSN order.
    pub taken: Vec<usize>,
    /// Indices of every copy of the prefix's batches, taken ones included:
    /// their segments stay live.
    pub copies: Vec<usize>,
    /// Bad copies of taken batches, each with the good copy taken.
    pub repair: Vec<(usize, usize)>,
    /// The first LSN replayed.
    pub start: Lsn,
    /// The first LSN not recovered.
    pub next_lsn: Lsn,
    pub end: PrefixEnd,
    /// Indices of the batches (good or bad) not taken that reach `next_lsn`
    /// or beyond: to be made unreadable.
    pub beyond: Vec<usize>,
    pub dropped_batches: u64,
    pub dropped_records: u64,
    /// Taken batches found on one device alone.
    pub single_copy: u64,
    /// Where each device's log ends before `next_lsn`, and what is there.
    pub ends: String,
}

/// Where a batch is, for messages.
fn place(found: &Found, names: &[&str]) -> (String, u64, u64) {
    (names[found.dev].to_string(), found.segment, found.offset)
}

pub(super) fn plan(
    found: &[Found],
    scans: &[DeviceScan],
    names: &[&str],
    opts: &RecoveryOptions,
) -> Result<Plan, RecoveryError> {
    let mut by_first: BTreeMap<Lsn, Vec<usize>> = BTreeMap::new();
    for (i, f) in found.iter().enumerate() {
        by_first.entry(f.first_lsn).or_default().push(i);
    }
    for group in by_first.values_mut() {
        let epoch = group.iter().map(|&i| found[i].epoch).max();
        group.retain(|&i| Some(found[i].epoch) == epoch);
        group.sort_by_key(|&i| (found[i].dev, Reverse(found[i].seq)));
        group.dedup_by_key(|i| found[*i].dev);
        group.sort_by_key(|&i| !found[i].is_good()); // stable: good copies first
    }
    // Without a replay point from the caller, start after the newest
    // release any segment header records: segments of LSNs below it may
    // have been reused, so what is left of them is not a prefix.
    let released = scans
        .iter()
        .flat_map(|s| s.segments.iter().map(|seg| seg.header.released))
        .max()
        .unwrap_or(0);
    let start = match opts.replay_from {
        Some(from) => from.max(1),
        None if released > 0 => released + 1,
        None => by_first.keys().next().copied().unwrap_or(1),
    };

    let mut taken = Vec::new();
    let mut expected = start;
    let mut stopped_at_bad = None;
    loop {
        let candidate = if taken.is_empty() {
            by_first
                .range(..=expected)
                .next_back()
                .map(|(_, g)| g[0])
                .filter(|&i| found[i].last_lsn() >= expected)
        } else {
            by_first.get(&expected).map(|g| g[0])
        };
        let Some(i) = candidate else { break };
        if !found[i].is_good() {
            stopped_at_bad = Some(i);
            break;
        }
        taken.push(i);
        expected = found[i].last_lsn() + 1;
    }
    let next_lsn = expected;

    let mut copies = Vec::new();
    let mut repair = Vec::new();
    let mut single_copy = 0;
    for &i in &taken {
        let group = &by_first[&found[i].first_lsn];
        single_copy += u64::from(group.len() < 2);
        for &c in group {
            copies.push(c);
            if !found[c].is_good() {
                repair.push((c, i));
            }
        }
    }
    let is_taken = {
        let mut t = vec![false; found.len()];
        copies.iter().for_each(|&i| t[i] = true);
        t
    };
    let beyond: Vec<usize> = (0..found.len())
        .filter(|&i| !is_taken[i] && found[i].last_lsn() >= next_lsn)
        .collect();
    let (dropped_batches, dropped_records) = beyond
        .iter()
        .filter(|&&i| found[i].is_good())
        .fold((0, 0), |(b, r), &i| (b + 1, r + u64::from(found[i].count)));

    let witness = found
        .iter()
        .filter(|f| f.is_good())
        .max_by_key(|f| f.durable_lsn)
        .filter(|f| f.durable_lsn >= next_lsn);

    let end = if let Some(w) = witness {
        let culprit = stopped_at_bad.map(|i| &found[i]);
        if !opts.truncate_corrupt {
            return Err(match culprit {
                Some(bad) => {
                    let (device, segment, offset) = place(bad, names);
                    RecoveryError::Corrupt {
                        device,
                        segment,
                        offset,
                        lsn: next_lsn,
                        why: bad.state.as_ref().err().cloned().unwrap_or_default(),
                    }
                }
                None => {
                    let (device, segment, offset) = place(w, names);
                    RecoveryError::Missing {
                        ends: ends_before(next_lsn, found, scans, names),
                        lsn: next_lsn,
                        durable_lsn: w.durable_lsn,
                        witness: format!(
                            "the batch of LSNs {}..={} on device {device}, segment {segment}, byte offset {offset}",
                            w.first_lsn,
                            w.last_lsn()
                        ),
                    }
                }
            });
        }
        let (device, segment, offset) = place(culprit.unwrap_or(w), names);
        PrefixEnd::Truncated {
            device,
            segment,
            offset,
            lsn: next_lsn,
        }
    } else if let Some(i) = stopped_at_bad {
        let (device, segment, offset) = place(&found[i], names);
        PrefixEnd::Torn {
            device,
            segment,
            offset,
            why: found[i].state.as_ref().err().cloned().unwrap_or_default(),
        }
    } else if !beyond.is_empty() {
        PrefixEnd::Gap {
            missing_lsn: next_lsn,
        }
    } else if let Some(torn) = torn_header_at(next_lsn, scans, names) {
        torn
    } else if taken.is_empty() {
        PrefixEnd::Empty
    } else {
        PrefixEnd::CleanEnd { next_lsn }
    };

    Ok(Plan {
        taken,
        copies,
        repair,
        start,
        next_lsn,
        end,
        beyond,
        dropped_batches,
        dropped_records,
        single_copy,
        ends: ends_before(next_lsn, found, scans, names),
    })
}

/// A damaged batch header that may have held `lsn`: where the scan of a
/// device's newest segment stopped, after batches that all end before `lsn`
/// (or first in a segment started no later than `lsn`). Of several, the one
/// after the highest LSN.
/// Where the log ends on each device before `lsn`, after the device's
/// last batch below it, and what lies there: where the missing batch
/// would be.
fn ends_before(lsn: Lsn, found: &[Found], scans: &[DeviceScan], names: &[&str]) -> String {
    let ends: Vec<String> = (0..scans.len())
        .map(|dev| {
            let before = found
                .iter()
                .filter(|f| f.dev == dev && f.last_lsn() < lsn)
                .max_by_key(|f| f.last_lsn());
            let Some(f) = before else {
                // The gap is at the start of the log: the oldest segment's.
                let oldest = scans[dev].segments.iter().min_by_key(|s| s.header.seq);
                return match oldest {
                    None => format!("device {} holds no segment", names[dev]),
                    Some(seg) => match &seg.end {
                        Some((offset, what)) => format!(
                            "device {}, segment {} (the oldest): the log ends at byte offset {offset}, where {what} is",
                            names[dev], seg.index
                        ),
                        None => format!(
                            "device {}, segment {} (the oldest) holds no batch before LSN {lsn}",
                            names[dev], seg.index
                        ),
                    },
                };
            };
            let seg = scans[dev].segments.iter().find(|s| s.index == f.segment);
            match seg.and_then(|s| s.end.as_ref()) {
                Some((offset, what)) => format!(
                    "device {}, segment {}: the log ends after LSN {} at byte offset {offset}, where {what} is",
                    names[dev],
                    f.segment,
                    f.last_lsn()
                ),
                None => format!(
                    "device {}, segment {} ends with LSN {}",
                    names[dev],
                    f.segment,
                    f.last_lsn()
                ),
            }
        })
        .collect();
    ends.join("; ")
}

fn torn_header_at(lsn: Lsn, scans: &[DeviceScan], names: &[&str]) -> Option<PrefixEnd> {
    scans
        .iter()
        .enumerate()
        .filter_map(|(dev, scan)| {
            let seg = scan.segments.iter().max_by_key(|s| s.header.seq)?;
            let (offset, why) = seg.torn.as_ref()?;
            let before = seg
                .last_lsn
                .unwrap_or(seg.header.first_lsn.saturating_sub(1));
            (before < lsn).then_some((before, dev, seg.index, *offset, why))
        })
        .max_by_key(|&(before, ..)| before)
        .map(|(_, dev, segment, offset, why)| PrefixEnd::Torn {
            device: names[dev].to_string(),
            segment,
            offset,
            why: why.clone(),
        })
}
