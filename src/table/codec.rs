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

/// Where a block file lies on its device, and which file it is, which the
/// checksum of each of its blocks covers: a block read back from anywhere
/// else (a misdirected write) or left at this place by an earlier file (a
/// stale block under a lost write) fails its check even though its bytes
/// are intact. Format 3 binds the place and the file's id (never reused,
/// not even after a crash), format 2 the place alone; format 1 files have
/// plain checksums (`Place::UNBOUND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// Data device index and byte offset of the file's start, if bound.
    at: Option<(u32, u64)>,
    /// The file's id, if bound (format 3).
    file: Option<u64>,
}

impl Place {
    /// Plain checksums, as format 1 wrote them.
    pub const UNBOUND: Place = Place {
        at: None,
        file: None,
    };

    /// A file starting at byte `start` of data device `device`, bound to
    /// its place alone (as format 2 wrote them).
    pub fn at(device: u32, start: u64) -> Place {
        Place {
            at: Some((device, start)),
            file: None,
        }
    }

    /// File `id`, starting at byte `start` of data device `device`.
    pub fn file(device: u32, start: u64, id: u64) -> Place {
        Place {
            at: Some((device, start)),
            file: Some(id),
        }
    }

    /// The same place, without the file's id: how format 2 bound it.
    pub fn unfiled(self) -> Place {
        Place { file: None, ..self }
    }

    /// The CRC32C seed of the block at file offset `offset`: the checksum
    /// of its device and its byte offset on the device.
    pub(crate) fn seed(&self, offset: u64) -> u32 {
        let Some((device, start)) = self.at else {
            return 0;
        };
        let mut id = [0u8; 20];
        id[..4].copy_from_slice(&device.to_le_bytes());
        id[4..12].copy_from_slice(&(start + offset).to_le_bytes());
        match self.file {
            Some(file) => {
                id[12..].copy_from_slice(&file.to_le_bytes());
                crc32c::crc32c(&id)
            }
            None => crc32c::crc32c(&id[..12]),
        }
    }

    /// Replaces the plain checksum sealed at the end of `block` (at file
    /// offset `offset`) by this place's.
    pub(crate) fn reseal(&self, block: &mut [u8], offset: u64) {
        let body = block.len() - 4;
        let crc = crc32c::crc32c_append(self.seed(offset), &block[..body]);
        block[body..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Checks the CRC32C in the last 4 bytes of `block` (which starts at file
/// offset `offset` of a file at `place`) and returns the bytes before it.
pub(crate) fn check_crc<'a>(
    block: &'a [u8],
    what: &str,
    offset: u64,
    place: Place,
) -> Result<&'a [u8]> {
    if block.len() < 4 {
        return Err(TableError::Corrupt {
            what: format!("{what}: {} bytes, too short for its checksum", block.len()),
            offset,
        });
    }
    let (body, tail) = block.split_at(block.len() - 4);
    let stored = u32::from_le_bytes(tail.try_into().expect("4 bytes"));
    if crc32c::crc32c_append(place.seed(offset), body) != stored {
        let what = if place != Place::UNBOUND && crc32c::crc32c(body) == stored {
            // Intact bytes with a plain checksum: not a block of this format.
            format!("{what}: checksum mismatch (a block with no place)")
        } else {
            format!(
                "{what}: checksum mismatch (damaged, or a block written for another place: \
                 a misdirected or stale write)"
            )
        };
        return Err(TableError::Corrupt { what, offset });
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
    #[inline]
    pub(crate) fn bytes(&mut self, n: u64, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() as u64 {
            return Err(self.short(n, field));
        }
        let n = n as usize;
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// The error of [`Decoder::bytes`], kept out of its inlined body.
    #[cold]
    #[inline(never)]
    fn short(&self, n: u64, field: &str) -> TableError {
        self.corrupt(format!("{field} of {n} bytes, {} left", self.remaining()))
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
    #[inline]
    pub(crate) fn varint(&mut self, field: &str) -> Result<u64> {
        // Most varints of a block (shared and unshared key lengths, small
        // values' lengths) are one byte; a scan decodes four an entry, so
        // that case is inlined into it.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        self.long_varint(field)
    }

    /// [`Decoder::varint`] of more than one byte, or none.
    #[inline(never)]
    fn long_varint(&mut self, field: &str) -> Result<u64> {
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
