//! The superblock: the first 512 bytes of block 0 of every device.
//!
//! It says what the device is part of and what it holds, so that `inspect`
//! and start-up can tell a device of this appliance from a blank one, one of
//! another appliance, or a damaged one, before reading anything else.
//!
//! Layout (little-endian), 512 bytes so that it fits any block size:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | magic `STRIA\0SB` |
//! | 8 | 4 | format version |
//! | 12 | 4 | device index in the map |
//! | 16 | 16 | appliance id (random, shared by all devices formatted together) |
//! | 32 | 32 | appliance name, zero-padded |
//! | 64 | 32 | device name, zero-padded |
//! | 96 | 1 | role: 1 wal, 2 data |
//! | 100 | 4 | block size |
//! | 104 | 8 | capacity in blocks |
//! | 112 | 8 | format time, seconds since the Unix epoch |
//! | 120 | 1 | stale manifest copies: bit `i` set when the manifest copy on data device `i` may be stale (kept on the WAL devices) |
//! | 121 | 387 | zero |
//! | 508 | 4 | CRC32C of bytes 0..508 |

use std::fmt;

use crate::config::Role;

/// Identifies a Stria superblock.
pub const MAGIC: [u8; 8] = *b"STRIA\0SB";
/// The layout version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes the superblock occupies at the start of block 0.
pub const SUPERBLOCK_BYTES: usize = 512;

const NAME_BYTES: usize = 32;
const CRC_AT: usize = SUPERBLOCK_BYTES - 4;

/// What block 0 of a device says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub version: u32,
    pub device_index: u32,
    pub appliance_id: u128,
    pub appliance: String,
    pub device: String,
    pub role: Role,
    pub block_size: u32,
    pub capacity_blocks: u64,
    pub formatted_at: u64,
    /// Bit `i`: the manifest copy on data device `i` missed writes the
    /// other took (its device failed one, or was missing at a start), so a
    /// start must not read the manifest from it alone. Kept on the WAL
    /// devices, which the manifest's failures do not touch; 0 elsewhere.
    pub stale_manifest: u8,
}

/// Why block 0 does not hold a usable superblock.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SuperblockError {
    /// No magic: the device was never formatted by Stria (or was wiped).
    #[error("not formatted (no Stria superblock)")]
    NotFormatted,
    /// The magic is there but the contents do not check out.
    #[error("corrupt superblock: {0}")]
    Corrupt(String),
    /// Written by a newer (or unknown) layout version.
    #[error("superblock format version {0}, this build reads version {FORMAT_VERSION}")]
    UnsupportedVersion(u32),
}

impl Superblock {
    /// Encodes into the first [`SUPERBLOCK_BYTES`] of `block` (which must be
    /// at least that long); the rest of the block is left as it is.
    pub fn encode(&self, block: &mut [u8]) {
        let out = &mut block[..SUPERBLOCK_BYTES];
        out.fill(0);
        out[0..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[12..16].copy_from_slice(&self.device_index.to_le_bytes());
        out[16..32].copy_from_slice(&self.appliance_id.to_le_bytes());
        put_name(&mut out[32..64], &self.appliance);
        put_name(&mut out[64..96], &self.device);
        out[96] = match self.role {
            Role::Wal => 1,
            Role::Data => 2,
        };
        out[100..104].copy_from_slice(&self.block_size.to_le_bytes());
        out[104..112].copy_from_slice(&self.capacity_blocks.to_le_bytes());
        out[112..120].copy_from_slice(&self.formatted_at.to_le_bytes());
        out[120] = self.stale_manifest;
        let crc = crc32c::crc32c(&out[..CRC_AT]);
        out[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    }

    /// Decodes block 0. Never panics, whatever the bytes.
    pub fn decode(block: &[u8]) -> Result<Superblock, SuperblockError> {
        if block.len() < SUPERBLOCK_BYTES || block[0..8] != MAGIC {
            return Err(SuperblockError::NotFormatted);
        }
        let b = &block[..SUPERBLOCK_BYTES];
        let stored = u32::from_le_bytes(b[CRC_AT..].try_into().expect("4 bytes"));
        let actual = crc32c::crc32c(&b[..CRC_AT]);
        if stored != actual {
            return Err(SuperblockError::Corrupt(format!(
                "checksum {stored:#010x} stored, {actual:#010x} computed"
            )));
        }
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(SuperblockError::UnsupportedVersion(version));
        }
        let role = match b[96] {
            1 => Role::Wal,
            2 => Role::Data,
            other => {
                return Err(SuperblockError::Corrupt(format!(
                    "unknown role code {other}"
                )))
            }
        };
        Ok(Superblock {
            version,
            device_index: u32_at(12),
            appliance_id: u128::from_le_bytes(b[16..32].try_into().expect("16 bytes")),
            appliance: get_name(&b[32..64])?,
            device: get_name(&b[64..96])?,
            role,
            block_size: u32_at(100),
            capacity_blocks: u64_at(104),
            formatted_at: u64_at(112),
            stale_manifest: b[120],
        })
    }
}

impl fmt::Display for Superblock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "appliance {} ({:032x}), device {} #{} ({}), {} blocks of {} bytes, format v{}, formatted {}",
            self.appliance,
            self.appliance_id,
            self.device,
            self.device_index,
            self.role,
            self.capacity_blocks,
            self.block_size,
            self.version,
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(self.formatted_at)
            )
        )
    }
}

fn put_name(out: &mut [u8], name: &str) {
    let bytes = name.as_bytes();
    let n = bytes.len().min(NAME_BYTES);
    out[..n].copy_from_slice(&bytes[..n]);
}

fn get_name(field: &[u8]) -> Result<String, SuperblockError> {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8(field[..end].to_vec())
        .map_err(|_| SuperblockError::Corrupt("a name is not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn sample() -> Superblock {
        Superblock {
            version: FORMAT_VERSION,
            device_index: 2,
            appliance_id: 0x0123_4567_89ab_cdef_0011_2233_4455_6677,
            appliance: "local".into(),
            device: "data0".into(),
            role: Role::Data,
            block_size: 4096,
            capacity_blocks: 262_144,
            formatted_at: 1_780_000_000,
            stale_manifest: 0b10,
        }
    }

    #[test]
    fn round_trip() {
        let mut block = vec![0xAA; 4096];
        sample().encode(&mut block);
        assert_eq!(Superblock::decode(&block).unwrap(), sample());
        assert!(block[SUPERBLOCK_BYTES..].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn blank_device_is_not_formatted() {
        assert_eq!(
            Superblock::decode(&[0; 4096]),
            Err(SuperblockError::NotFormatted)
        );
        assert_eq!(
            Superblock::decode(&MAGIC),
            Err(SuperblockError::NotFormatted)
        );
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let mut block = vec![0; 512];
        sample().encode(&mut block);
        for bit in 64..SUPERBLOCK_BYTES * 8 {
            let mut bad = block.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(
                matches!(Superblock::decode(&bad), Err(SuperblockError::Corrupt(_))),
                "bit {bit} flipped went unnoticed"
            );
        }
    }

    #[test]
    fn newer_version_is_refused() {
        let mut sb = sample();
        sb.version = 7;
        let mut block = vec![0; 512];
        sb.encode(&mut block);
        assert_eq!(
            Superblock::decode(&block),
            Err(SuperblockError::UnsupportedVersion(7))
        );
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..10_000 {
            let mut block = vec![0u8; 512];
            rng.fill(&mut block[..]);
            if rng.random_bool(0.5) {
                block[..8].copy_from_slice(&MAGIC);
            }
            let _ = Superblock::decode(&block);
        }
    }
}
