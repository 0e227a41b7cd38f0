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
                let f = &t.file;
                match Table::verify(&t.source(), f.len) {
                    Ok(v) => {
                        report.blocks += v.blocks;
                        report.bytes += v.bytes;
                        for b in v.bad {
                            let (device, lba) = t.lba_of(b.offset);
                            let after = b.after.map_or("the file's start".to_string(), |k| {
                                format!("{:?}", KeyDisplay(k))
                            });
                            report.bad.push(ScrubFinding {
                                file: f.id,
                                region: f.region,
                                device,
                                lba,
                                keys: format!("after {after} up to {:?}", KeyDisplay(b.last)),
                                what: b.error.to_string(),
                            });
                        }
                    }
                    Err(e) => {
                        let (device, lba) = t.lba_of(0);
                        report.bad.push(ScrubFinding {
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
                        });
                    }
                }
            }
        }
        report.elapsed = started.elapsed();
        report
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
            writeln!(
                f,
                "  BAD: block file {} (region {}) on {} at LBA {}: {}; keys {} cannot be read (no second copy to repair from)",
                b.file, b.region, b.device, b.lba, b.what, b.keys
            )?;
        }
        Ok(())
    }
}
