//! The footer: the last 64 bytes of a block file, which locate the rest.

use super::codec::Decoder;
use super::{Result, TableError};

/// Identifies a Stria block file.
pub const MAGIC: [u8; 8] = *b"STRIA\0BF";
/// The block file format version this build writes. Version 3 binds each
/// block's checksum to the file's place and id ([`Place`](super::Place)),
/// version 2 to its place alone; version 2 and 1 files (plain checksums)
/// are still read.
pub const FORMAT_VERSION: u32 = 3;
/// Bytes of the footer, at the very end of the file.
pub const FOOTER_BYTES: usize = 64;

const CRC_AT: usize = FOOTER_BYTES - 4;

/// Where the index, bloom and meta blocks are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Footer {
    /// The format version the file was written in.
    pub version: u32,
    pub device_block: u32,
    pub index_off: u64,
    pub bloom_off: u64,
    pub meta_off: u64,
    pub index_len: u32,
    pub bloom_len: u32,
    pub meta_len: u32,
    pub file_bytes: u64,
}

impl Footer {
    /// The footer's bytes.
    pub(crate) fn encode(&self) -> [u8; FOOTER_BYTES] {
        let mut out = [0u8; FOOTER_BYTES];
        out[0..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[12..16].copy_from_slice(&self.device_block.to_le_bytes());
        out[16..24].copy_from_slice(&self.index_off.to_le_bytes());
        out[24..32].copy_from_slice(&self.bloom_off.to_le_bytes());
        out[32..40].copy_from_slice(&self.meta_off.to_le_bytes());
        out[40..44].copy_from_slice(&self.index_len.to_le_bytes());
        out[44..48].copy_from_slice(&self.bloom_len.to_le_bytes());
        out[48..52].copy_from_slice(&self.meta_len.to_le_bytes());
        out[52..60].copy_from_slice(&self.file_bytes.to_le_bytes());
        let crc = crc32c::crc32c(&out[..CRC_AT]);
        out[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes the footer of a `file_bytes`-long file from its last
    /// [`FOOTER_BYTES`], and checks that the blocks it locates follow each
    /// other, end within a device block of the footer, and that the file is
    /// as long as it says and a whole number of its device blocks.
    pub(crate) fn decode(b: &[u8], file_bytes: u64) -> Result<Footer> {
        let offset = file_bytes.saturating_sub(FOOTER_BYTES as u64);
        if b.len() != FOOTER_BYTES {
            return Err(TableError::Corrupt {
                what: format!("footer: {} bytes, expected {FOOTER_BYTES}", b.len()),
                offset,
            });
        }
        if b[0..8] != MAGIC {
            return Err(TableError::BadMagic {
                found: b[0..8].try_into().expect("8 bytes"),
                offset,
            });
        }
        let mut d = Decoder::new(b, offset, &"footer");
        d.bytes(8, "magic")?;
        let version = d.u32("version")?;
        if !(1..=FORMAT_VERSION).contains(&version) {
            return Err(TableError::UnsupportedVersion(version));
        }
        let stored = u32::from_le_bytes(b[CRC_AT..].try_into().expect("4 bytes"));
        if crc32c::crc32c(&b[..CRC_AT]) != stored {
            return Err(d.corrupt_at(0, "checksum mismatch"));
        }
        let f = Footer {
            version,
            device_block: d.u32("device block")?,
            index_off: d.u64("index offset")?,
            bloom_off: d.u64("bloom offset")?,
            meta_off: d.u64("meta offset")?,
            index_len: d.u32("index length")?,
            bloom_len: d.u32("bloom length")?,
            meta_len: d.u32("meta length")?,
            file_bytes: d.u64("file length")?,
        };
        if f.file_bytes != file_bytes {
            return Err(d.corrupt_at(
                52,
                format!("file of {} bytes, {file_bytes} given", f.file_bytes),
            ));
        }
        let bs = u64::from(f.device_block);
        let meta_end = f.meta_off.checked_add(f.meta_len.into());
        let laid_out = bs > 0
            && file_bytes % bs == 0
            && f.index_off.checked_add(f.index_len.into()) == Some(f.bloom_off)
            && f.bloom_off.checked_add(f.bloom_len.into()) == Some(f.meta_off)
            && meta_end.is_some_and(|end| end <= offset && offset - end < bs);
        if !laid_out {
            return Err(d.corrupt_at(0, format!("inconsistent layout {f:?}")));
        }
        Ok(f)
    }
}
