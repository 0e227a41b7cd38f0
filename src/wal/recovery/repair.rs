//! Rewriting a damaged copy of a recovered batch from its good copy.
//!
//! With `wal.copies` above one, a batch of the prefix can have a good copy
//! on one device and a bad one (a flipped bit, a torn or lost write of
//! that copy) on another. Its header checked out, so its place and length
//! are known: the batch is built again from the good copy's records, sealed
//! with the bad copy's own segment number, and written over it, so the log
//! has both copies again before the writer goes on. Recovery flushes every
//! device afterwards.

use super::scan::Found;
use super::{RecoveryError, WalDevice};
use crate::device::{wait, Device, Request};
use crate::wal::format::BatchBuilder;

/// Rewrites `found[bad]` from `found[good]` for each pair. Returns how
/// many were rewritten; a copy whose rebuilt length differs from what its
/// header says (never, for copies of one batch) is left as it is.
pub(super) fn rewrite_bad_copies<D: Device>(
    devices: &[WalDevice<D>],
    found: &[Found],
    repair: &[(usize, usize)],
) -> Result<u64, RecoveryError> {
    let mut rewritten = 0;
    for &(bad, good) in repair {
        let (b, g) = (&found[bad], &found[good]);
        let Ok(records) = &g.state else { continue };
        let wd = &devices[b.dev];
        let bs = wd.device.info().block_size;
        let Ok(len) = usize::try_from(b.len) else {
            continue;
        };
        let mut builder = BatchBuilder::new(wd.device.alloc_buf(len), bs);
        for r in records {
            if !builder.fits(r.key.len(), r.value.len()) {
                break;
            }
            builder.push(r.as_ref());
        }
        if builder.count() != g.count || builder.padded_len() != len {
            tracing::warn!(
                "WAL device {}, segment {}, byte offset {}: the damaged copy of LSNs {}..={} cannot be rebuilt to its length; left as it is",
                wd.name, b.segment, b.offset, b.first_lsn, b.last_lsn()
            );
            continue;
        }
        let (buf, _) = builder.seal(g.first_lsn, b.seq, g.durable_lsn, g.epoch);
        let mut queue = wd.device.open_queue()?;
        let lba = b.offset / u64::from(bs);
        wait::run(&mut queue, Request::write(lba, lba, vec![buf]))
            .map_err(|r| r.error)?
            .result?;
        tracing::warn!(
            "WAL device {}, segment {}, byte offset {}: the copy of LSNs {}..={} was damaged ({}); rewritten from the copy on device {}",
            wd.name,
            b.segment,
            b.offset,
            b.first_lsn,
            b.last_lsn(),
            b.state.as_ref().err().map_or("", String::as_str),
            devices[g.dev].name
        );
        rewritten += 1;
    }
    Ok(rewritten)
}
