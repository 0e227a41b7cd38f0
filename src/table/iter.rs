//! Range scans over a block file, one data block in memory at a time.

use std::sync::Arc;

use super::block::BlockScan;
use super::reader::{BlockSource, Table};
use super::{Entry, Result};

/// Data blocks a scan adds to the block cache: its first ones.
const FILL_BLOCKS: usize = 4;

/// The state of a scan, shared by the borrowing and the owning iterator.
struct Cursor {
    from: Vec<u8>,
    to: Option<Vec<u8>>,
    /// The next data block to read; `None` until the first, found from
    /// the index when the scan first reads (a merge may never read it).
    next_block: Option<usize>,
    scan: Option<BlockScan>,
    done: bool,
    /// Data blocks read (from the cache or the device) so far.
    blocks_read: usize,
    /// A key at or past `from` was returned: the keys after it are too.
    past_from: bool,
    /// The current block's last key reaches `to`: only then can its keys
    /// be past the range.
    ends_here: bool,
}

impl Cursor {
    fn new(from: Vec<u8>, to: Option<Vec<u8>>) -> Cursor {
        let empty = to.as_ref().is_some_and(|to| *to <= from);
        Cursor {
            next_block: None,
            blocks_read: 0,
            from,
            to,
            scan: None,
            done: empty,
            past_from: false,
            ends_here: true,
        }
    }

    fn next(&mut self, table: &Table, src: &dyn BlockSource) -> Option<Result<Entry>> {
        let r = self.step(table, src);
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
            self.scan = None;
        }
        r
    }

    fn step(&mut self, table: &Table, src: &dyn BlockSource) -> Option<Result<Entry>> {
        if self.done {
            return None;
        }
        loop {
            let scan = match &mut self.scan {
                Some(scan) => scan,
                None => {
                    let (i, first) = match self.next_block {
                        Some(i) => (i, false),
                        None => (table.first_block(&self.from), true),
                    };
                    if i >= table.index.len() {
                        return None;
                    }
                    self.next_block = Some(i + 1);
                    // A scan's first blocks are cached like a point
                    // lookup's (a short range, an LRANGE, a ZRANGE with a
                    // LIMIT or a pop, reads one or two blocks it will
                    // likely read again, the second when it starts near
                    // the end of the first); later blocks only use the
                    // cache, so a long scan does not flush it.
                    let fill = self.blocks_read < FILL_BLOCKS;
                    self.blocks_read += 1;
                    match table.read_block(src, i, fill) {
                        Ok(mut scan) => {
                            if first {
                                scan.seek(&self.from);
                            }
                            let last_key = table.index[i].last_key.as_slice();
                            self.ends_here = self.to.as_deref().is_none_or(|to| last_key >= to);
                            self.scan.insert(scan)
                        }
                        Err(e) => return Some(Err(e)),
                    }
                }
            };
            let block = self.next_block.expect("a block is read") - 1;
            let last_key = table.index[block].last_key.as_slice();
            match scan.next_raw() {
                None => {
                    // The block's keys must have ended at its index key.
                    if scan.key() != last_key {
                        return Some(Err(scan.corrupt("last key differs from the index")));
                    }
                    self.scan = None;
                }
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(raw)) => {
                    let key = scan.key();
                    if key > last_key {
                        return Some(Err(scan.corrupt("key past the block's last key")));
                    }
                    if !self.past_from {
                        if key < self.from.as_slice() {
                            continue;
                        }
                        self.past_from = true;
                    }
                    // Only the block whose last key reaches `to` can hold
                    // keys past it.
                    if self.ends_here && self.to.as_deref().is_some_and(|to| key >= to) {
                        return None;
                    }
                    return Some(Ok(scan.entry(raw)));
                }
            }
        }
    }
}

/// Entries of a [`Table`] in key order, borrowing the table and the source.
/// Yields nothing more after an error.
pub struct TableIter<'a> {
    table: &'a Table,
    src: &'a dyn BlockSource,
    cursor: Cursor,
}

impl<'a> TableIter<'a> {
    pub(crate) fn new(
        table: &'a Table,
        src: &'a dyn BlockSource,
        from: Vec<u8>,
        to: Option<Vec<u8>>,
    ) -> TableIter<'a> {
        TableIter {
            cursor: Cursor::new(from, to),
            table,
            src,
        }
    }
}

impl Iterator for TableIter<'_> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        self.cursor.next(self.table, self.src)
    }
}

/// Entries of a [`Table`] in key order, owning a handle on the table and
/// the source (`'static` if the source is). Yields nothing more after an
/// error.
pub struct OwnedTableIter<S> {
    table: Arc<Table>,
    src: S,
    cursor: Cursor,
}

impl<S: BlockSource> OwnedTableIter<S> {
    pub(crate) fn new(
        table: Arc<Table>,
        src: S,
        from: Vec<u8>,
        to: Option<Vec<u8>>,
    ) -> OwnedTableIter<S> {
        OwnedTableIter {
            cursor: Cursor::new(from, to),
            table,
            src,
        }
    }

    /// Where the scan starts: no key it returns is below.
    pub fn from(&self) -> &[u8] {
        &self.cursor.from
    }
}

impl<S: BlockSource> Iterator for OwnedTableIter<S> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        self.cursor.next(&self.table, &self.src)
    }
}
