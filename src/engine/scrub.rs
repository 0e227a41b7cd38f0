//! Scrub: read every live block file back from its device and check it.
//!
//! Opening the engine already checks what it reads in full: the superblock
//! copies (and rewrites bad ones from those that agree), the manifest, and
//! the log from its replay point. A scrub reads the rest: every block of
//! every live block file, straight from the device (never the block cache),
//! checking each checksum (bound to the block's place, so a misdirected or
//! stale block fails too) and walking each block's entries. With one copy
//! of each file there is nothing to repair from, so a bad block is reported
//! with the device, the LBA and the keys it covers.

use std::fmt;
use std::time::{Duration, Instant};

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

/// Reads and checks every block of `t`, calling `pace` before each data
/// block (see [`Table::verify_paced`]).
pub(super) fn check<D: Device<Queue: Send>>(
    t: &TableHandle<D>,
    pace: &mut dyn FnMut(u64) -> bool,
) -> Checked {
    let f = &t.file;
    match Table::verify_paced(&t.source(), f.len, pace) {
        Ok(v) => Checked {
            blocks: v.blocks,
            bytes: v.bytes,
            bad: v
                .bad
                .into_iter()
                .map(|b| {
                    let (device, lba) = t.lba_of(b.offset);
                    let after = b.after.map_or("the file's start".to_string(), |k| {
                        format!("{:?}", KeyDisplay(k))
                    });
                    ScrubFinding {
                        file: f.id,
                        region: f.region,
                        device,
                        lba,
                        keys: format!("after {after} up to {:?}", KeyDisplay(b.last)),
                        what: b.error.to_string(),
                    }
                })
                .collect(),
        },
        Err(e) => {
            let (device, lba) = t.lba_of(0);
            Checked {
                blocks: 0,
                bytes: 0,
                bad: vec![ScrubFinding {
                    file: f.id,
                    region: f.region,
                    device,
                    lba,
                    keys: format!(
                        "the whole file, {:?} to {:?}",
                        KeyDisplay(f.min_key.clone()),
                        KeyDisplay(f.max_key.clone())
                    ),
                    what: e.to_string(),
                }],
            }
        }
    }
}

impl fmt::Display for ScrubFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "block file {} (region {}) on {} at LBA {}: {}; keys {} cannot be read (no second copy to repair from)",
            self.file, self.region, self.device, self.lba, self.what, self.keys
        )
    }
}

impl fmt::Display for ScrubReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "scrub: {} block files, {} data blocks, {} read and checked in {:.1?}; {} bad",
            self.files,
            self.blocks,
            bytesize::ByteSize::b(self.bytes),
            self.elapsed,
            self.bad.len()
        )?;
        for b in &self.bad {
            writeln!(f, "  BAD: {b}")?;
        }
        Ok(())
    }
}
