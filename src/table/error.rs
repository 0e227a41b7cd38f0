//! Block file errors.

use std::fmt;

use super::FORMAT_VERSION;

/// Why building, opening or reading a block file failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The bytes do not check out: a checksum mismatch, a length pointing
    /// past its block, fields that contradict each other. `offset` is where
    /// the bad structure starts, counted from the start of the file.
    #[error("corrupt block file: {what} (at byte {offset})")]
    Corrupt { what: String, offset: u64 },
    /// The footer has no block file magic: not a block file, or not the
    /// length the caller gave.
    #[error("not a Stria block file: footer at byte {offset} has magic {found:02x?}")]
    BadMagic { found: [u8; 8], offset: u64 },
    /// Written by another version of the format.
    #[error("block file format version {0}, this build reads version {FORMAT_VERSION}")]
    UnsupportedVersion(u32),
    /// [`TableBuilder::add`](super::TableBuilder::add) was given a key not
    /// greater than the previous one. The builder is unchanged.
    #[error("entry {index}: key {key} is not greater than the previous key {previous}")]
    OutOfOrder {
        /// How many entries the builder had accepted.
        index: u64,
        key: KeyDisplay,
        previous: KeyDisplay,
    },
    /// An entry the format cannot hold (a key or value longer than a u32
    /// can say, a tombstone with a value). The builder is unchanged.
    #[error("entry {index}: {why}")]
    InvalidEntry { index: u64, why: String },
    /// A part of the file outgrows the fields that locate it.
    #[error("block file too large: {0}")]
    TooLarge(String),
    /// The [`BlockSource`](super::BlockSource) failed.
    #[error("block file read failed: {0}")]
    Read(String),
}

/// A key in an error message: its length and its first bytes, in hex.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyDisplay(pub Vec<u8>);

const SHOWN: usize = 24;

impl KeyDisplay {
    /// The first bytes of `key` (enough to tell keys apart in a message).
    pub(crate) fn of(key: &[u8]) -> KeyDisplay {
        KeyDisplay(key[..key.len().min(SHOWN + 1)].to_vec())
    }
}

impl fmt::Display for KeyDisplay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        for b in self.0.iter().take(SHOWN) {
            write!(f, "{b:02x}")?;
        }
        if self.0.len() > SHOWN {
            f.write_str("..")?;
        }
        Ok(())
    }
}

impl fmt::Debug for KeyDisplay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
