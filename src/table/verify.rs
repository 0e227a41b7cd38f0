//! Verifying every block of a file: what a scrub reads.
//!
//! [`Table::verify`] reads each data block from the source itself, never
//! from the block cache (a cached copy says nothing about the device),
//! checks its checksum and walks its entries, and reports each block that
//! fails with the keys it covers.

use super::cache::BlockCache;
use super::codec::Place;
use super::reader::{BlockSource, Table};
use super::{Result, TableError};

/// A data block that failed verification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadBlock {
    /// Its number in the file.
    pub block: usize,
    /// Its byte offset in the file.
    pub offset: u64,
    /// The keys it covers: after `after` (the previous block's last key;
    /// `None` for the first block) up to and including `last`.
    pub after: Option<Vec<u8>>,
    pub last: Vec<u8>,
    pub error: TableError,
}

/// What a verification read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verified {
    pub blocks: u64,
    pub bytes: u64,
    pub bad: Vec<BadBlock>,
}

/// `src` without its block cache.
struct Uncached<'a>(&'a dyn BlockSource);

impl BlockSource for Uncached<'_> {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.0.read_at(offset, len)
    }

    fn cache(&self) -> Option<(&BlockCache, u64)> {
        None
    }

    fn place(&self) -> Place {
        self.0.place()
    }
}

impl Table {
    /// Opens the `file_bytes`-long file at `src` afresh (footer, index,
    /// bloom and meta blocks), then reads and checks every data block.
    /// `Err` when the file cannot be opened at all.
    pub fn verify(src: &dyn BlockSource, file_bytes: u64) -> Result<Verified> {
        Table::verify_paced(src, file_bytes, &mut |_| true)
    }

    /// [`Table::verify`], calling `pace` with each data block's bytes
    /// before reading it: it may sleep (a background scrub keeps to its
    /// rate), and stops the walk by returning false (what was checked so
    /// far is returned).
    pub fn verify_paced(
        src: &dyn BlockSource,
        file_bytes: u64,
        pace: &mut dyn FnMut(u64) -> bool,
    ) -> Result<Verified> {
        let src = Uncached(src);
        let table = Table::open(&src, file_bytes)?;
        let mut out = Verified::default();
        for (i, h) in table.index.iter().enumerate() {
            if !pace(h.len) {
                break;
            }
            out.blocks += 1;
            out.bytes += h.len;
            let walked = table.read_block(&src, i, false).and_then(|mut scan| {
                while let Some(raw) = scan.next_raw() {
                    raw?;
                }
                Ok(())
            });
            if let Err(error) = walked {
                out.bad.push(BadBlock {
                    block: i,
                    offset: h.offset,
                    after: i.checked_sub(1).map(|p| table.index[p].last_key.clone()),
                    last: h.last_key.clone(),
                    error,
                });
            }
        }
        Ok(out)
    }
}
