//! A block file's copies: the same bytes at several places, each block's
//! checksum bound to its own place. A piece of one copy is made from
//! another's bytes by checking each block against the place it was read
//! from and resealing it for the place it goes to.

use super::codec::{check_crc, Place};
use super::reader::Table;
use super::{Result, TableError};

impl Table {
    /// The file bytes `[start, end)` of the pieces (see [`Table::pieces`])
    /// that cover `[from, to)`: what must be read to rebuild that range.
    pub fn span(&self, from: u64, to: u64) -> (u64, u64) {
        let pieces = self.pieces();
        let mut span = (to, from);
        for &(at, len, _) in &pieces {
            if at < to && at + len > from {
                span = (span.0.min(at), span.1.max(at + len));
            }
        }
        span
    }

    /// Turns `bytes`, the file bytes from `at` (the start of a piece)
    /// through the end of a piece, read from the copy at `from`, into the
    /// copy at `to`'s: each block is checked against `from` (an error if
    /// it fails: that copy is bad there too) and resealed for `to`; the
    /// zeros and the footer are written as the file's footer says.
    pub fn recopy(&self, bytes: &mut [u8], at: u64, from: Place, to: Place) -> Result<()> {
        let end = at + bytes.len() as u64;
        self.recopy_around(bytes, None, at, from, to, (at, end))
    }

    /// As [`Table::recopy`], but only the blocks that overlap `need` (the
    /// bad range) must be good in `from`'s bytes. A block outside it, in
    /// the device blocks the write covers, is kept as `own` (the bytes the
    /// copy at `to` holds there, if they could be read) has it when it
    /// checks at `to`, and taken from `from` otherwise: two copies bad in
    /// neighbouring blocks repair each other.
    pub fn recopy_around(
        &self,
        bytes: &mut [u8],
        own: Option<&[u8]>,
        at: u64,
        from: Place,
        to: Place,
        need: (u64, u64),
    ) -> Result<()> {
        let end = at + bytes.len() as u64;
        let (from, to) = (self.bound(from), self.bound(to));
        for (offset, len, sealed) in self.pieces() {
            if offset < at || offset + len > end {
                if offset < end && offset + len > at {
                    return Err(TableError::Read(format!(
                        "bytes {at}..{end} cut the piece at {offset} of {len} bytes"
                    )));
                }
                continue;
            }
            let range = (offset - at) as usize..(offset - at + len) as usize;
            let piece = &mut bytes[range.clone()];
            if !sealed {
                piece.copy_from_slice(&self.plain_piece(offset, len));
                continue;
            }
            let needed = offset < need.1 && offset + len > need.0;
            if !needed {
                if let Some(own) = own.map(|o| &o[range]) {
                    if check_crc(own, "block", offset, to).is_ok() {
                        piece.copy_from_slice(own);
                        continue;
                    }
                }
            }
            check_crc(piece, "block", offset, from)?;
            to.reseal(piece, offset);
        }
        Ok(())
    }
}
