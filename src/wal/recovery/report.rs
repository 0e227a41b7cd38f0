//! How recovery's outcome reads in the log.

use std::fmt;

use bytesize::ByteSize;

use super::{PrefixEnd, RecoveryReport};

impl fmt::Display for PrefixEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixEnd::Empty => f.write_str("the log is empty"),
            PrefixEnd::CleanEnd { next_lsn } => {
                write!(f, "the log ends cleanly before LSN {next_lsn}")
            }
            PrefixEnd::Gap { missing_lsn } => write!(
                f,
                "the log ends at LSN {missing_lsn}, which no device holds (in flight at the crash)"
            ),
            PrefixEnd::Torn {
                device,
                segment,
                offset,
                why,
            } => write!(
                f,
                "the log ends at a torn batch on device {device}, segment {segment}, byte offset {offset} ({why})"
            ),
            PrefixEnd::Truncated {
                device,
                segment,
                offset,
                lsn,
            } => write!(
                f,
                "the log was TRUNCATED at LSN {lsn}, lost although reported durable (device {device}, segment {segment}, byte offset {offset})"
            ),
        }
    }
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "WAL recovery: {} records in {} batches ({}) from {} segments ({} read) in {:.1?}; {}",
            self.records,
            self.batches,
            ByteSize(self.bytes),
            self.segments,
            ByteSize(self.bytes_read),
            self.elapsed,
            self.end
        )?;
        if self.dropped_batches > 0 || self.zeroed_batches > 0 {
            write!(
                f,
                "; {} records in {} batches beyond it dropped, {} batches zeroed",
                self.dropped_records, self.dropped_batches, self.zeroed_batches
            )?;
        }
        for (device, why) in &self.lost_devices {
            write!(
                f,
                "; DEGRADED: device {device} could not be read ({why}), its batches came from their copies"
            )?;
        }
        if self.single_copy_batches > 0 {
            write!(
                f,
                "; {} batches found on one device alone",
                self.single_copy_batches
            )?;
        }
        if self.repaired_batches > 0 {
            write!(
                f,
                "; {} damaged batch copies rewritten from their good copies",
                self.repaired_batches
            )?;
        }
        Ok(())
    }
}
