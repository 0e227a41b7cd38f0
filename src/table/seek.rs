//! A data block as the block cache keeps it: its checked body and, for
//! blocks that point lookups cached, seek points.
//!
//! Keys in a block are prefix-compressed against the entry before, so a
//! lookup decodes every entry from the start of the block up to its key:
//! about half of a 32 KiB block of 1 KiB values on average, most of the
//! CPU of a `GET` served from block files. The file format has no restart
//! points; instead, when a lookup caches a block, one pass over it notes
//! every [`EVERY`]th entry's end and full key. A lookup in a cached block
//! then binary-searches those and decodes at most `EVERY` entries. The
//! points cost one key per `EVERY` entries and count against the cache.

use std::ops::Deref;

use super::block::{BlockName, BlockScan};

/// Entries between seek points.
pub const EVERY: usize = 8;

/// A checked data block body, with seek points or none.
#[derive(Debug)]
pub struct Block {
    body: Box<[u8]>,
    points: Vec<Point>,
}

/// Where the entry after the one of `key` starts.
#[derive(Debug)]
struct Point {
    after: u32,
    key: Box<[u8]>,
}

impl Block {
    /// A block without seek points: scans start at its first entry.
    pub fn plain(body: Vec<u8>) -> Block {
        Block {
            body: body.into_boxed_slice(),
            points: Vec::new(),
        }
    }

    /// A block with seek points, from one scan of it (data block `number`
    /// at file offset `offset`, for errors). A block that does not decode
    /// gets none: the lookup that reads it reports the corruption.
    pub fn indexed(body: Vec<u8>, number: usize, offset: u64) -> Block {
        let block = std::sync::Arc::new(Block::plain(body));
        let mut points = Vec::new();
        let mut scan = BlockScan::checked(block.clone(), BlockName(number), offset);
        let mut n = 0;
        let mut whole = true;
        while let Some(raw) = scan.next_raw() {
            if raw.is_err() {
                whole = false;
                break;
            }
            n += 1;
            if n % EVERY == 0 && !scan.is_done() {
                points.push(Point {
                    after: scan.pos() as u32,
                    key: scan.key().into(),
                });
            }
        }
        drop(scan);
        let mut block = std::sync::Arc::into_inner(block).expect("the only reference");
        if whole {
            block.points = points;
        }
        block
    }

    /// Where a scan for `key` may start instead of the first entry: the
    /// position after the last seek point whose key is below `key`, and
    /// that key (the previous key of the entry there). `None`: the start.
    pub fn seek(&self, key: &[u8]) -> Option<(usize, &[u8])> {
        let i = self.points.partition_point(|p| &*p.key < key);
        let p = self.points.get(i.checked_sub(1)?)?;
        Some((p.after as usize, &p.key))
    }

    /// What it takes in memory: the body and the seek points.
    pub fn weight(&self) -> usize {
        self.body.len()
            + self
                .points
                .iter()
                .map(|p| p.key.len() + std::mem::size_of::<Point>())
                .sum::<usize>()
    }
}

impl Deref for Block {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.body
    }
}
