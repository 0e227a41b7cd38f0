//! Building a batch in place, in the buffer that goes to the device.
//!
//! The writer copies each record exactly once: [`BatchBuilder::push`]
//! encodes it straight into the device buffer after the space kept for the
//! header, and [`BatchBuilder::seal`] writes the header and the padding and
//! trims the buffer to the batch's padded length, ready for a write request.

use super::{
    batch::BatchHeader, record::encode_record, record_len, round_up, RecordRef, BATCH_HEADER_BYTES,
};
use crate::device::IoBuf;
use crate::wal::Lsn;

/// A batch being filled.
pub struct BatchBuilder {
    buf: IoBuf,
    block_size: u32,
    /// End of the payload so far, counted from the start of the buffer.
    end: usize,
    count: u32,
}

impl BatchBuilder {
    /// A builder over `buf`, whose length is the largest batch to build.
    ///
    /// # Panics
    /// If `buf.len()` is not a whole number of at least one `block_size`
    /// block, or a block is too small for the batch header.
    pub fn new(buf: IoBuf, block_size: u32) -> BatchBuilder {
        let bs = block_size as usize;
        assert!(
            bs >= BATCH_HEADER_BYTES && !buf.is_empty() && buf.len() % bs == 0,
            "a batch buffer of {} bytes is not a whole number of {bs}-byte blocks",
            buf.len()
        );
        BatchBuilder {
            buf,
            block_size,
            end: BATCH_HEADER_BYTES,
            count: 0,
        }
    }

    /// True before the first push.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Records pushed so far.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Payload bytes so far.
    pub fn payload_len(&self) -> usize {
        self.end - BATCH_HEADER_BYTES
    }

    /// True when one more record with these key and value lengths fits.
    /// The buffer is a whole number of blocks, so a record that fits also
    /// leaves room for the padding.
    pub fn fits(&self, key_len: usize, value_len: usize) -> bool {
        key_len <= u32::MAX as usize
            && value_len <= u32::MAX as usize
            && self.fits_len(record_len(key_len, value_len))
    }

    /// True when records of `len` bytes in all (by [`record_len`]) fit.
    pub fn fits_len(&self, len: usize) -> bool {
        self.count < u32::MAX
            && len.checked_add(self.end).is_some_and(|end| {
                end <= self.buf.len() && end - BATCH_HEADER_BYTES <= u32::MAX as usize
            })
    }

    /// Appends a record.
    ///
    /// # Panics
    /// If it does not fit ([`BatchBuilder::fits`]).
    pub fn push(&mut self, rec: RecordRef<'_>) {
        assert!(
            self.fits(rec.key.len(), rec.value.len()),
            "a record with a {}-byte key and a {}-byte value does not fit in the batch",
            rec.key.len(),
            rec.value.len()
        );
        self.end += encode_record(&rec, &mut self.buf[self.end..]);
        self.count += 1;
    }

    /// Bytes the sealed batch will occupy: header and payload rounded up to
    /// whole blocks.
    pub fn padded_len(&self) -> usize {
        round_up(self.end, self.block_size)
    }

    /// Writes the header and zero padding, trims the buffer to
    /// [`BatchBuilder::padded_len`] and returns it with that length. The
    /// records get LSNs `first_lsn`, `first_lsn + 1`, ...
    ///
    /// # Panics
    /// If the batch is empty, `first_lsn` is 0, or `durable_lsn` is not below
    /// `first_lsn` (a batch cannot be durable before it is written): the
    /// reader would reject such a batch.
    pub fn seal(
        mut self,
        first_lsn: Lsn,
        segment_seq: u64,
        durable_lsn: Lsn,
        epoch: u64,
    ) -> (IoBuf, usize) {
        assert!(!self.is_empty(), "sealing an empty batch");
        assert!(
            first_lsn > 0 && durable_lsn < first_lsn,
            "batch at LSN {first_lsn} with durable LSN {durable_lsn}"
        );
        let padded = self.padded_len();
        let payload = &self.buf[BATCH_HEADER_BYTES..self.end];
        let header = BatchHeader {
            first_lsn,
            count: self.count,
            payload_len: payload.len() as u32,
            segment_seq,
            durable_lsn,
            epoch,
            payload_crc: crc32c::crc32c(payload),
        };
        header.encode(&mut self.buf);
        self.buf[self.end..padded].fill(0);
        self.buf.truncate(padded);
        (self.buf, padded)
    }

    /// A second builder over `buf` holding the same records, for another
    /// copy of the batch (sealed on its own, with its own segment number).
    ///
    /// # Panics
    /// If `buf` is shorter than what this builder holds.
    pub fn copy_into(&self, mut buf: IoBuf) -> BatchBuilder {
        assert!(
            buf.len() >= self.end && buf.len() % self.block_size as usize == 0,
            "a {}-byte buffer cannot hold a copy of a {}-byte batch",
            buf.len(),
            self.end
        );
        buf[BATCH_HEADER_BYTES..self.end].copy_from_slice(&self.buf[BATCH_HEADER_BYTES..self.end]);
        BatchBuilder {
            buf,
            block_size: self.block_size,
            end: self.end,
            count: self.count,
        }
    }

    /// Gives the buffer back without sealing (its contents are unspecified).
    pub fn into_buf(self) -> IoBuf {
        self.buf
    }
}
