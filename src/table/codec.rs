//! Bounds-checked decoding of little-endian integers and LEB128 varints,
//! and their encoders. Every decoding failure is a
//! [`TableError::Corrupt`] naming the structure and the file offset.

use super::{Result, TableError};

/// Most bytes a u64 varint takes.
pub(crate) const MAX_VARINT: usize = 10;

/// Appends `v` as a LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes `v` takes as a varint.
pub(crate) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Checks the CRC32C in the last 4 bytes of `block` (which starts at file
/// offset `offset`) and returns the bytes before it.
pub(crate) fn check_crc<'a>(block: &'a [u8], what: &str, offset: u64) -> Result<&'a [u8]> {
    if block.len() < 4 {
        return Err(TableError::Corrupt {
            what: format!("{what}: {} bytes, too short for its checksum", block.len()),
            offset,
        });
    }
    let (body, tail) = block.split_at(block.len() - 4);
    let stored = u32::from_le_bytes(tail.try_into().expect("4 bytes"));
    if crc32c::crc32c(body) != stored {
        return Err(TableError::Corrupt {
            what: format!("{what}: checksum mismatch"),
            offset,
        });
    }
    Ok(body)
}

/// Appends the CRC32C of `out[from..]` to `out`.
pub(crate) fn seal_crc(out: &mut Vec<u8>, from: usize) {
    let crc = crc32c::crc32c(&out[from..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// A cursor over the bytes of one structure, which starts at file offset
/// `base`. Never reads past its slice.
pub(crate) struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    what: &'a dyn std::fmt::Display,
}

impl<'a> Decoder<'a> {
    /// A cursor at the start of `buf`, which is `what` at file offset `base`.
    pub(crate) fn new(buf: &'a [u8], base: u64, what: &'a dyn std::fmt::Display) -> Decoder<'a> {
        Decoder {
            buf,
            pos: 0,
            base,
            what,
        }
    }

    /// Bytes read so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// A [`TableError::Corrupt`] about the current position.
    pub(crate) fn corrupt(&self, why: impl std::fmt::Display) -> TableError {
        self.corrupt_at(self.pos, why)
    }

    /// A [`TableError::Corrupt`] about byte `pos` of this structure.
    pub(crate) fn corrupt_at(&self, pos: usize, why: impl std::fmt::Display) -> TableError {
        TableError::Corrupt {
            what: format!("{}: {why}", self.what),
            offset: self.base + pos as u64,
        }
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: u64, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() as u64 {
            return Err(self.corrupt(format!("{field} of {n} bytes, {} left", self.remaining())));
        }
        let n = n as usize;
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// The next byte.
    pub(crate) fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.bytes(1, field)?[0])
    }

    /// The next little-endian u32.
    pub(crate) fn u32(&mut self, field: &str) -> Result<u32> {
        let b = self.bytes(4, field)?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    /// The next little-endian u64.
    pub(crate) fn u64(&mut self, field: &str) -> Result<u64> {
        let b = self.bytes(8, field)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// The next LEB128 varint (at most 10 bytes, no overflow).
    pub(crate) fn varint(&mut self, field: &str) -> Result<u64> {
        // Most varints of a block (shared and unshared key lengths, small
        // values' lengths) are one byte.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        let start = self.pos;
        let mut v = 0u64;
        for i in 0..MAX_VARINT {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.corrupt_at(start, format!("{field}: varint runs off the end")));
            };
            self.pos += 1;
            let bits = u64::from(b & 0x7f);
            if i == MAX_VARINT - 1 && bits > 1 {
                return Err(self.corrupt_at(start, format!("{field}: varint overflows a u64")));
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.corrupt_at(
            start,
            format!("{field}: varint longer than {MAX_VARINT} bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_garbage() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "{v}");
            let mut d = Decoder::new(&out, 0, &"t");
            assert_eq!(d.varint("v").unwrap(), v);
            assert_eq!(d.remaining(), 0);
            // Every strict prefix runs off the end.
            for cut in 0..out.len() {
                assert!(Decoder::new(&out[..cut], 0, &"t").varint("v").is_err());
            }
        }
        assert!(Decoder::new(&[0xff; 11], 0, &"t").varint("v").is_err());
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert!(Decoder::new(&over, 0, &"t").varint("v").is_err());
    }
}
