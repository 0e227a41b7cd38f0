//! Reads: `get` stops at the newest memstore or block file that has the
//! key; `scan` merges them all in key order.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::error::{EngineError, Result};
use super::Engine;
use crate::device::Device;
use crate::memstore::Memstore;
use crate::table::{key_hash, Entry, EntryKind, OwnedTableIter};

use super::region::View;
use super::store::{FileSource, TableHandle};

/// Live pairs a scan found, in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Where [`Engine::get_memstores`] found a key.
pub enum PointRead<D: Device<Queue: Send>> {
    /// In a memstore: its value, `None` for a delete.
    Memstore(Option<Vec<u8>>),
    /// In none of them: the block files decide ([`Engine::get_below`]).
    Below(Below<D>),
}

/// A view of a region whose memstores do not have a key; held for a
/// moment (a read).
pub struct Below<D: Device<Queue: Send>> {
    view: arc_swap::Guard<Arc<View<D>>>,
    region: usize,
}

/// What [`Engine::scan_below`] found: the entries of a range in key
/// order (`None` for a delete), and the key before which that list is
/// whole.
pub struct BelowRange {
    pub entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub upto: Vec<u8>,
}

impl<D: Device<Queue: Send>> Below<D> {
    /// The view's number: two reads below views of one number read the
    /// same block files.
    pub fn epoch(&self) -> u64 {
        self.view.epoch
    }
}

/// Entries a memstore source copies out at a time.
const MEM_CHUNK: usize = 64;

/// Most entries a scan makes room for before it reads: a limit of
/// `usize::MAX` (read to the end) must not reserve it.
const SCAN_RESERVE: usize = 1024;

impl<D: Device<Queue: Send> + Clone> Engine<D> {
    /// The value of `key`, or `None` if it was never written or is deleted.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.get_memstores(key) {
            PointRead::Memstore(value) => Ok(value),
            PointRead::Below(below) => self.get_below(&below, key),
        }
    }

    /// The first half of [`Engine::get`]: what the memstores of `key`'s
    /// region hold of it, or the view to read its block files in.
    pub fn get_memstores(&self, key: &[u8]) -> PointRead<D> {
        let inner = &*self.inner;
        inner.counters.gets.fetch_add(1, Ordering::Relaxed);
        let region = inner.regions.of(key);
        let view = inner.region[region].glance();
        for ms in &view.mems {
            if let Some((kind, value)) = ms.get_value(key) {
                return PointRead::Memstore((kind == EntryKind::Put).then_some(value));
            }
        }
        PointRead::Below(Below { view, region })
    }

    /// The second half of [`Engine::get`]: what the block files of
    /// `below` hold of `key`, whose memstores in that view had none of
    /// it. The block files of a view never change, so the answer holds
    /// for every read that [`Engine::get_memstores`] sends below a view
    /// of the same [`Below::epoch`]: a cache of it needs no other
    /// invalidation. (RocksDB's row cache sits at the same level, keyed
    /// by block file.)
    pub fn get_below(&self, below: &Below<D>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let h = key_hash(key);
        for t in &below.view.tables {
            if !t.table.may_contain_hashed(key, h) {
                continue;
            }
            let found = t
                .table
                .get_filtered(&t.source(), key)
                .map_err(|e| t.error(e))?;
            if let Some(e) = found {
                return Ok(live(e));
            }
            self.inner
                .counters
                .bloom_false
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(None)
    }

    /// What the block files of `below` hold from `from` (inclusive) to
    /// `to` (exclusive), within `below`'s region: at most `limit` entries,
    /// and no more once their values pass `max_bytes`. Like
    /// [`Engine::get_below`], the answer holds for every read below a
    /// view of the same epoch: a reader that will read a run of keys
    /// (pops from a list in the block files) reads them at once, one
    /// seek per block file instead of a bloom probe per file and a block
    /// search per key.
    pub fn scan_below(
        &self,
        below: &Below<D>,
        from: &[u8],
        to: &[u8],
        limit: usize,
        max_bytes: usize,
    ) -> Result<BelowRange> {
        let regions = &self.inner.regions;
        let from = from.max(regions.start(below.region));
        let to = regions.end(below.region).map_or(to, |e| e.min(to));
        let mut sources: Vec<Source<D>> = Vec::new();
        if from < to {
            for t in &below.view.tables {
                let meta = t.table.meta();
                if meta.entries == 0
                    || meta.max_key.as_slice() < from
                    || meta.min_key.as_slice() >= to
                {
                    continue;
                }
                let it = t
                    .table
                    .iter_owned(t.source(), from.to_vec(), Some(to.to_vec()));
                sources.push(Source::Table(it, t.clone()));
            }
        }
        let mut merge = Merge::new(sources)?;
        let mut entries = Vec::new();
        let mut bytes = 0;
        while entries.len() < limit && bytes < max_bytes {
            let Some(e) = merge.next()? else {
                return Ok(BelowRange {
                    entries,
                    upto: to.max(from).to_vec(),
                });
            };
            bytes += e.value.len();
            let value = (e.kind == EntryKind::Put).then_some(e.value);
            entries.push((e.key, value));
        }
        // Cut short: whole up to the last key, inclusive.
        let mut upto = entries.last().map_or(from.to_vec(), |(k, _)| k.clone());
        upto.push(0);
        Ok(BelowRange { entries, upto })
    }

    /// Up to `limit` live pairs with `start <= key < end` (no end: to the
    /// last key), in key order.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self.scan_counting(start, end, limit)?.0)
    }

    /// [`Engine::scan`], and how many deleted keys it passed before its
    /// first live one (all it passed, when it found none): what a caller
    /// that remembers empty ranges weighs (a queue popped from its front
    /// leaves its deletes there until compaction).
    pub fn scan_counting(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Pairs, usize)> {
        if end.is_some_and(|e| e <= start) {
            return Err(EngineError::BadRange(format!(
                "the end of a scan must be after its start ({:?} is not after {:?})",
                String::from_utf8_lossy(end.unwrap_or_default()),
                String::from_utf8_lossy(start)
            )));
        }
        let inner = &*self.inner;
        inner.counters.scans.fetch_add(1, Ordering::Relaxed);
        // Most scans return what they ask for (a range, a page of SCAN):
        // made once, not grown by doubling.
        let mut out = Vec::with_capacity(limit.min(SCAN_RESERVE));
        let mut deleted = 0;
        let mut r = inner.regions.of(start);
        while out.len() < limit && r < inner.regions.count() {
            let from = if r == inner.regions.of(start) {
                start
            } else {
                inner.regions.start(r)
            };
            let to = match (inner.regions.end(r), end) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.scan_region(r, from, to, limit - out.len(), &mut out, &mut deleted)?;
            if inner
                .regions
                .end(r)
                .is_none_or(|e| end.is_some_and(|end| end <= e))
            {
                break;
            }
            r += 1;
        }
        Ok((out, deleted))
    }

    fn scan_region(
        &self,
        r: usize,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
        deleted: &mut usize,
    ) -> Result<()> {
        let view = self.inner.region[r].view();
        // Sources newest first: on equal keys the first one wins.
        let mut tables: Vec<Source<D>> = Vec::new();
        for t in &view.tables {
            if t.table.meta().entries == 0
                || t.table.meta().max_key.as_slice() < from
                || to.is_some_and(|to| t.table.meta().min_key.as_slice() >= to)
            {
                continue;
            }
            let it = t
                .table
                .iter_owned(t.source(), from.to_vec(), to.map(<[u8]>::to_vec));
            // The handle rides along so the file's space is not reused
            // while the scan reads it.
            tables.push(Source::Table(it, t.clone()));
        }
        // A memstore's first chunk is its share of the limit: of a range
        // spread over five sources (a large sorted set's score order), it
        // holds about a fifth, and each entry copied out of the memstore
        // is a walk through its tree and records. Chunks double after.
        let share = limit.div_ceil((view.mems.len() + tables.len()).max(1));
        let mut sources: Vec<Source<D>> = Vec::with_capacity(view.mems.len() + tables.len());
        for ms in &view.mems {
            sources.push(Source::Mem(MemSource::new(ms.clone(), from, to, share)));
        }
        sources.append(&mut tables);
        let mut merge = Merge::new(sources)?;
        let added = out.len();
        let mut passed = 0;
        while out.len() - added < limit {
            let Some(e) = merge.next()? else { break };
            match e.kind {
                EntryKind::Put => out.push((e.key, e.value)),
                EntryKind::Delete => {
                    passed += 1;
                    if out.is_empty() {
                        *deleted += 1;
                    }
                }
            }
        }
        let found = (out.len() - added) as u64;
        if self.inner.region[r].passed.record(passed, found) {
            self.inner.purge(r);
        }
        Ok(())
    }
}

/// The value a found entry stands for.
fn live(e: Entry) -> Option<Vec<u8>> {
    match e.kind {
        EntryKind::Put => Some(e.value),
        EntryKind::Delete => None,
    }
}

/// A k-way merge of sources in key order: of several versions of a key,
/// the one from the earliest (newest) source wins, tombstones included.
pub(super) struct Merge<D: Device<Queue: Send>> {
    sources: Vec<Source<D>>,
    heads: Vec<Option<Entry>>,
    /// Sources whose head the last entry returned used up: they move on
    /// at the next call, not at once, so a seek for one key (SPOP's, a
    /// list's LINDEX) reads no entry past it.
    used: Vec<bool>,
    /// The sources after the winner whose head has its key (older
    /// versions): reused from step to step.
    ties: Vec<usize>,
}

impl<D: Device<Queue: Send>> Merge<D> {
    pub(super) fn new(sources: Vec<Source<D>>) -> Result<Merge<D>> {
        let mut kept = Vec::with_capacity(sources.len());
        let mut heads = Vec::with_capacity(sources.len());
        for mut s in sources {
            // A source with nothing in the range (an empty memstore, most
            // often) is not asked again at every step.
            if let Some(e) = s.next()? {
                kept.push(s);
                heads.push(Some(e));
            }
        }
        let used = vec![false; kept.len()];
        Ok(Merge {
            sources: kept,
            heads,
            used,
            ties: Vec::new(),
        })
    }

    pub(super) fn next(&mut self) -> Result<Option<Entry>> {
        let mut ended = false;
        for i in 0..self.sources.len() {
            if std::mem::take(&mut self.used[i]) {
                self.heads[i] = self.sources[i].next()?;
                ended |= self.heads[i].is_none();
            }
        }
        if ended {
            // Sources in order, newest first: ties go to the first.
            let mut i = 0;
            while i < self.sources.len() {
                if self.heads[i].is_none() {
                    self.sources.remove(i);
                    self.heads.remove(i);
                    self.used.remove(i);
                } else {
                    i += 1;
                }
            }
        }
        if self.sources.len() == 1 {
            // One source left: its entries in order, nothing to compare.
            let head = self.heads[0].take();
            self.used[0] = head.is_some();
            return Ok(head);
        }
        // The smallest key, from the first (newest) source that has it;
        // the later sources with the same key, one comparison each.
        let mut best: Option<usize> = None;
        self.ties.clear();
        for i in 0..self.heads.len() {
            let Some(e) = &self.heads[i] else { continue };
            let order = match best {
                None => std::cmp::Ordering::Less,
                Some(b) => {
                    let be = self.heads[b].as_ref().expect("best has a head");
                    e.key.as_slice().cmp(be.key.as_slice())
                }
            };
            match order {
                std::cmp::Ordering::Less => {
                    best = Some(i);
                    self.ties.clear();
                }
                std::cmp::Ordering::Equal => self.ties.push(i),
                std::cmp::Ordering::Greater => {}
            }
        }
        let Some(b) = best else { return Ok(None) };
        let winner = self.heads[b].take().expect("best has a head");
        self.used[b] = true;
        for &i in &self.ties {
            self.heads[i] = None;
            self.used[i] = true;
        }
        Ok(Some(winner))
    }
}

pub(super) enum Source<D: Device<Queue: Send>> {
    Mem(MemSource),
    Table(OwnedTableIter<FileSource<D>>, Arc<TableHandle<D>>),
}

impl<D: Device<Queue: Send>> Source<D> {
    fn next(&mut self) -> Result<Option<Entry>> {
        match self {
            Source::Mem(m) => Ok(m.next()),
            Source::Table(it, t) => match it.next() {
                None => Ok(None),
                Some(Ok(e)) => Ok(Some(e)),
                Some(Err(e)) => Err(t.error(e)),
            },
        }
    }
}

/// A memstore read in chunks, newest version of each key.
pub(super) struct MemSource {
    ms: Arc<Memstore>,
    to: Option<Vec<u8>>,
    buf: std::vec::IntoIter<Entry>,
    /// Where the next chunk starts, and whether that key was already read.
    next_from: Option<(Vec<u8>, bool)>,
    /// Entries the next chunk copies out: its share of the scan's limit
    /// at first (a seek for one key, as LINDEX's, copies one entry, not
    /// [`MEM_CHUNK`]), doubling up to [`MEM_CHUNK`] when tombstones or
    /// newer sources use them up.
    chunk: usize,
}

impl MemSource {
    pub(super) fn new(
        ms: Arc<Memstore>,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> MemSource {
        MemSource {
            ms,
            to: to.map(<[u8]>::to_vec),
            buf: Vec::new().into_iter(),
            next_from: Some((from.to_vec(), false)),
            chunk: limit.clamp(1, MEM_CHUNK),
        }
    }

    fn next(&mut self) -> Option<Entry> {
        if let Some(e) = self.buf.next() {
            return Some(e);
        }
        let (from, after) = self.next_from.take()?;
        let want = self.chunk;
        self.chunk = (want * 2).min(MEM_CHUNK);
        let chunk = self.ms.range_newest(&from, after, self.to.as_deref(), want);
        if chunk.len() == want {
            self.next_from = Some((chunk[want - 1].key.clone(), true));
        }
        self.buf = chunk.into_iter();
        self.buf.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::sim::SimDevice;

    /// A memstore holding `keys`, each written at `version`.
    fn mem(keys: &[&str], version: u64) -> Arc<Memstore> {
        let m = Arc::new(Memstore::new(1, 0));
        for k in keys {
            let value = format!("{k}@{version}").into_bytes();
            m.insert(k.as_bytes().to_vec(), version, true, EntryKind::Put, value);
        }
        m
    }

    #[test]
    fn newer_sources_win_ties_as_sources_run_out() {
        // Newest first. The first runs out after "c", the second after
        // "d", the third is empty from the start; chunks of one entry make
        // every step refill.
        let sources: Vec<Source<SimDevice>> = [
            mem(&["a", "c"], 3),
            mem(&["b", "c", "d"], 2),
            mem(&[], 2),
            mem(&["a", "c", "d", "e", "f"], 1),
        ]
        .into_iter()
        .map(|m| Source::Mem(MemSource::new(m, b"", None, 1)))
        .collect();
        let mut merge = Merge::new(sources).unwrap();
        assert_eq!(merge.sources.len(), 3, "the empty source is dropped");
        let mut got = Vec::new();
        while let Some(e) = merge.next().unwrap() {
            got.push(String::from_utf8(e.value).unwrap());
        }
        assert_eq!(got, ["a@3", "b@2", "c@3", "d@2", "e@1", "f@1"]);
        assert_eq!(merge.next().unwrap(), None);
    }
}
