//! Scrub: read every live block file back from its device and check it.
//!
//! Opening the engine already checks what it reads in full: the superblock
//! copies (and rewrites bad ones from those that agree), the manifest, and
//! the log from its replay point. A scrub reads the rest: every block of
//! every live block file, straight from the device (never the block cache),
//! checking each checksum (bound to the block's place, so a misdirected or
//! stale block fails too) and walking each block's entries, in each copy
//! of the file (`flush.copies`). A bad block is rewritten from a copy
//! where it is good (`repair.rs`); with one copy, or none good there, it
//! is reported with the device, the LBA and the keys it covers.

use std::fmt;
use std::time::{Duration, Instant};

use super::repair::repair;
use super::store::TableHandle;
use super::Engine;
use crate::device::Device;
use crate::table::{KeyDisplay, Table};

/// A block that failed its check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScrubFinding {
    pub file: u64,
    pub region: u32,
    pub device: String,
    pub lba: u64,
    /// The keys the block covers, for the operator: `(after, last]`, or the
    /// file's whole range when the file cannot be opened.
    pub keys: String,
    pub what: String,
    /// The device whose copy of the file the blocks were rewritten from.
    pub repaired: Option<String>,
    /// Why they could not be, when they were not.
    pub unrepaired: Option<String>,
}

/// What a scrub read and found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrubReport {
    pub files: u64,
    pub blocks: u64,
    pub bytes: u64,
    pub bad: Vec<ScrubFinding>,
    pub elapsed: Duration,
}

impl<D: Device<Queue: Send> + Clone> Engine<D> {
    /// Reads and checks every block of every live block file.
    pub fn scrub(&self) -> ScrubReport {
        let started = Instant::now();
        let mut report = ScrubReport::default();
        for region in &self.inner.region {
            for t in &region.view().tables {
                report.files += 1;
                let checked = check(t, &mut |_| true);
                report.blocks += checked.blocks;
                report.bytes += checked.bytes;
                report.bad.extend(checked.bad);
            }
        }
        report.elapsed = started.elapsed();
        report
    }
}

/// What reading one block file back found.
pub(super) struct Checked {
    pub blocks: u64,
    pub bytes: u64,
    pub bad: Vec<ScrubFinding>,
}

/// Reads and checks every block of every copy of `t`, calling `pace`
/// before each data block (see [`Table::verify_paced`]); a bad block of a
/// copy is rewritten from another copy where one is good there.
pub(super) fn check<D: Device<Queue: Send>>(
    t: &TableHandle<D>,
    pace: &mut dyn FnMut(u64) -> bool,
) -> Checked {
    let f = &t.file;
    let mut out = Checked {
        blocks: 0,
        bytes: 0,
        bad: Vec::new(),
    };
    let stopped = std::cell::Cell::new(false);
    let mut pace = |n: u64| {
        stopped.set(!pace(n));
        !stopped.get()
    };
    // A lost device's copies are not checked: nothing can be written
    // there until it is replaced.
    let store = t.store();
    for place in f.places().filter(|&(d, _)| !store.is_lost(d)) {
        let src = t.copy_source(place);
        // A copy that does not open is bad in its index, bloom, meta or
        // footer: those are rewritten first, then the copy is read again.
        let mut verified = Table::verify_paced(&src, f.len, &mut pace);
        if let Err(e) = &verified {
            let pieces = t.table.pieces();
            let tail = pieces[t.table.meta().data_blocks as usize].0;
            let repaired = repair(t, place, tail, f.len);
            out.bad.push(finding(
                t,
                place,
                tail,
                format!(
                    "the index, bloom, meta and footer of the copy (keys {:?} to {:?})",
                    KeyDisplay(f.min_key.clone()),
                    KeyDisplay(f.max_key.clone())
                ),
                e.to_string(),
                repaired,
            ));
            if out.bad.last().is_some_and(|b| b.repaired.is_some()) {
                verified = Table::verify_paced(&src, f.len, &mut pace);
                if let (Err(e), Some(b)) = (&verified, out.bad.last_mut()) {
                    b.unrepaired =
                        Some(format!("rewritten, but the copy still does not open: {e}"));
                    b.repaired = None;
                }
            }
        }
        let Ok(v) = verified else {
            continue;
        };
        out.blocks += v.blocks;
        out.bytes += v.bytes;
        for b in v.bad {
            let len = t.table.pieces()[b.block].1;
            let after = b.after.map_or("the file's start".to_string(), |k| {
                format!("{:?}", KeyDisplay(k))
            });
            let keys = format!("after {after} up to {:?}", KeyDisplay(b.last));
            let repaired = repair(t, place, b.offset, b.offset + len);
            out.bad.push(finding(
                t,
                place,
                b.offset,
                keys,
                b.error.to_string(),
                repaired,
            ));
        }
        if stopped.get() {
            break;
        }
    }
    out
}

/// A finding in the copy of `t` at `place`, at file offset `offset`.
fn finding<D: Device<Queue: Send>>(
    t: &TableHandle<D>,
    place: (u32, u64),
    offset: u64,
    keys: String,
    what: String,
    repaired: Result<String, String>,
) -> ScrubFinding {
    let (device, lba) = t.lba_in(place, offset);
    let (repaired, unrepaired) = match repaired {
        Ok(from) => (Some(from), None),
        Err(why) => (None, Some(why)),
    };
    ScrubFinding {
        file: t.file.id,
        region: t.file.region,
        device,
        lba,
        keys,
        what,
        repaired,
        unrepaired,
    }
}

impl fmt::Display for ScrubFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "block file {} (region {}) on {} at LBA {}: {}; keys {} ",
            self.file, self.region, self.device, self.lba, self.what, self.keys
        )?;
        match (&self.repaired, &self.unrepaired) {
            (Some(from), _) => write!(f, "repaired from the copy on {from}"),
            (None, Some(why)) => write!(f, "cannot be read ({why})"),
            (None, None) => write!(f, "cannot be read"),
        }
    }
}

impl ScrubReport {
    /// Bad blocks rewritten from another copy.
    pub fn repaired(&self) -> usize {
        self.bad.iter().filter(|b| b.repaired.is_some()).count()
    }

    /// Bad blocks left bad: their keys cannot be read.
    pub fn unrepaired(&self) -> usize {
        self.bad.len() - self.repaired()
    }
}

impl fmt::Display for ScrubReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "scrub: {} block files, {} data blocks, {} read and checked in {:.1?}; {} bad, {} of them repaired",
            self.files,
            self.blocks,
            bytesize::ByteSize::b(self.bytes),
            self.elapsed,
            self.bad.len(),
            self.repaired()
        )?;
        for b in &self.bad {
            let tag = if b.repaired.is_some() {
                "REPAIRED"
            } else {
                "BAD"
            };
            writeln!(f, "  {tag}: {b}")?;
        }
        Ok(())
    }
}
