//! The k-way merge behind scans and compactions: memstores and block
//! files in key order, the newest version of each key winning.

use std::cmp::Ordering;
use std::sync::Arc;

use super::error::Result;
use super::store::{FileSource, TableHandle};
use crate::device::Device;
use crate::memstore::Memstore;
use crate::table::{Entry, OwnedTableIter};

/// Entries a memstore source copies out at a time.
const MEM_CHUNK: usize = 64;

/// Where a source stands in the merge.
enum Head {
    /// Its next entry.
    Ready(Entry),
    /// The last call returned its entry (or an older version of that key):
    /// it moves on at the next call, not at once, so a seek for one key
    /// (SPOP's, a list's LINDEX) reads no entry past it.
    Used,
    /// Not read yet: it holds no key below [`Source::floor`]. A block file
    /// is sought only once the merge reaches its first key, so a range
    /// that ends before it (a sorted set's scores, a list's positions, a
    /// stream's IDs: keys written in order, each file holding a stretch)
    /// never reads it.
    Closed,
    /// Read to its end: dropped before the next choice.
    Ended,
}

/// A k-way merge of sources in key order: of several versions of a key,
/// the one from the earliest (newest) source wins, tombstones included.
pub(super) struct Merge<D: Device<Queue: Send>> {
    sources: Vec<Source<D>>,
    heads: Vec<Head>,
    /// The source the last call returned from, and the later ones that had
    /// its key (older versions): reused from call to call.
    winner: Option<usize>,
    ties: Vec<usize>,
    /// When no other source had the last key: the source with the
    /// smallest key among the others. While the winner's next key is below
    /// that one, it wins again after one comparison, so sources that hold
    /// stretches of the range cost one comparison a key, however many
    /// there are.
    runner: Option<usize>,
}

impl<D: Device<Queue: Send>> Merge<D> {
    pub(super) fn new(sources: Vec<Source<D>>) -> Result<Merge<D>> {
        let mut kept = Vec::with_capacity(sources.len());
        let mut heads = Vec::with_capacity(sources.len());
        for mut s in sources {
            if s.floor().is_some() {
                kept.push(s);
                heads.push(Head::Closed);
            } else if let Some(e) = s.next()? {
                // A source with nothing in the range (an empty memstore,
                // most often) is not asked again at every step.
                kept.push(s);
                heads.push(Head::Ready(e));
            }
        }
        Ok(Merge {
            sources: kept,
            heads,
            winner: None,
            ties: Vec::new(),
            runner: None,
        })
    }

    /// The next entry in key order. After an error the merge is done
    /// with: callers return it, and ask no more.
    pub(super) fn next(&mut self) -> Result<Option<Entry>> {
        // The sources the last call used move on.
        let mut ended = false;
        let last = self.winner.take();
        if let Some(w) = last {
            ended |= self.read(w)?;
        }
        for k in 0..self.ties.len() {
            ended |= self.read(self.ties[k])?;
        }
        if ended {
            self.drop_ended();
        } else if let (Some(w), Some(r), true) = (last, self.runner, self.ties.is_empty()) {
            // No other source moved since the runner was found.
            if self.key(w) < self.key(r) {
                return Ok(Some(self.take(w, Some(r))));
            }
        }
        self.ties.clear();
        self.runner = None;
        loop {
            if self.sources.len() == 1 {
                // One source left: its entries in order, nothing to compare.
                if matches!(self.heads[0], Head::Closed) && self.read(0)? {
                    self.drop_ended();
                    continue;
                }
                return Ok(Some(self.take(0, None)));
            }
            if self.sources.is_empty() {
                return Ok(None);
            }
            // The smallest key, from the first (newest) source that has
            // it; the later sources with the same key, and the smallest key
            // of the others, in the same pass.
            let mut best = 0;
            let mut runner: Option<usize> = None;
            for i in 1..self.sources.len() {
                match self.key(i).cmp(self.key(best)) {
                    Ordering::Less => {
                        runner = Some(best);
                        best = i;
                        self.ties.clear();
                    }
                    Ordering::Equal => self.ties.push(i),
                    Ordering::Greater => {
                        if runner.is_none_or(|r| self.key(i) < self.key(r)) {
                            runner = Some(i);
                        }
                    }
                }
            }
            // A source not read yet may hold that key, or one below it:
            // read it and choose again.
            let mut opened = false;
            let mut ended = false;
            for k in 0..=self.ties.len() {
                let i = if k == 0 { best } else { self.ties[k - 1] };
                if matches!(self.heads[i], Head::Closed) {
                    opened = true;
                    ended |= self.read(i)?;
                }
            }
            if opened {
                if ended {
                    self.drop_ended();
                }
                self.ties.clear();
                continue;
            }
            for k in 0..self.ties.len() {
                self.heads[self.ties[k]] = Head::Used;
            }
            let runner = runner.filter(|_| self.ties.is_empty());
            return Ok(Some(self.take(best, runner)));
        }
    }

    /// The key a source stands at: its next entry's, or the floor of one
    /// not read yet.
    fn key(&self, i: usize) -> &[u8] {
        match &self.heads[i] {
            Head::Ready(e) => &e.key,
            Head::Closed => self.sources[i].floor().unwrap_or_default(),
            Head::Used | Head::Ended => {
                unreachable!("source {i} is chosen from before it moved on")
            }
        }
    }

    /// Source `i`'s entry, returned: it moves on at the next call.
    fn take(&mut self, i: usize, runner: Option<usize>) -> Entry {
        self.winner = Some(i);
        self.runner = runner;
        match std::mem::replace(&mut self.heads[i], Head::Used) {
            Head::Ready(e) => e,
            _ => unreachable!("source {i} is taken from with an entry"),
        }
    }

    /// Reads source `i`'s next entry; whether it ended.
    fn read(&mut self, i: usize) -> Result<bool> {
        self.heads[i] = match self.sources[i].next()? {
            Some(e) => Head::Ready(e),
            None => Head::Ended,
        };
        Ok(matches!(self.heads[i], Head::Ended))
    }

    /// Drops the sources that ended, keeping the others in order (newest
    /// first: ties go to the first). Indices move, so no runner is kept.
    fn drop_ended(&mut self) {
        let mut i = 0;
        while i < self.sources.len() {
            if matches!(self.heads[i], Head::Ended) {
                self.sources.remove(i);
                self.heads.remove(i);
            } else {
                i += 1;
            }
        }
        self.runner = None;
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

    /// A key no entry of the source is below, known without reading it: a
    /// block file's first key, or the scan's start if later. `None` for a
    /// memstore, whose first key in range is found by reading it.
    fn floor(&self) -> Option<&[u8]> {
        match self {
            Source::Mem(_) => None,
            Source::Table(it, t) => Some(t.table.meta().min_key.as_slice().max(it.from())),
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
    /// Entries the next chunk copies out. Each entry copied out of a
    /// memstore is a walk through its tree and records, so a scan that may
    /// never need them copies few: the first chunk is one entry when other
    /// sources share the range (its key is the memstore's place in the
    /// merge), then the memstore's share of the scan's limit, doubling up
    /// to [`MEM_CHUNK`] when tombstones or newer sources use them up.
    chunk: usize,
    /// The chunk after the first.
    share: usize,
}

impl MemSource {
    /// A source of `[from, to)` that copies out `first` entries, then
    /// `share`, then twice as many each time.
    pub(super) fn new(
        ms: Arc<Memstore>,
        from: &[u8],
        to: Option<&[u8]>,
        (first, share): (usize, usize),
    ) -> MemSource {
        MemSource {
            ms,
            to: to.map(<[u8]>::to_vec),
            buf: Vec::new().into_iter(),
            next_from: Some((from.to_vec(), false)),
            chunk: first.clamp(1, MEM_CHUNK),
            share: share.clamp(1, MEM_CHUNK),
        }
    }

    fn next(&mut self) -> Option<Entry> {
        if let Some(e) = self.buf.next() {
            return Some(e);
        }
        let (from, after) = self.next_from.take()?;
        let want = self.chunk;
        self.chunk = if after {
            (want * 2).min(MEM_CHUNK)
        } else {
            self.share
        };
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
    use crate::table::EntryKind;

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
        .map(|m| Source::Mem(MemSource::new(m, b"", None, (1, 1))))
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

    #[test]
    fn merges_of_random_sources_match_a_model() {
        // Sources newest first, each holding either keys from the whole
        // space (ties, interleaving) or a stretch of its own (the runner's
        // shortcut); chunks of one to three entries.
        let mut seed = 7u64;
        let mut rnd = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for round in 0..500 {
            let n = 1 + rnd() % 5;
            let mut model = std::collections::BTreeMap::new();
            let mut sources: Vec<Source<SimDevice>> = Vec::new();
            for s in 0..n {
                let version = (n - s) as u64;
                let (base, span) = if rnd() % 2 == 0 {
                    (s * 20, 20)
                } else {
                    (0, 100)
                };
                let keys: std::collections::BTreeSet<String> = (0..rnd() % 25)
                    .map(|_| format!("k{:03}", base + rnd() % span))
                    .collect();
                for k in &keys {
                    model.entry(k.clone()).or_insert(format!("{k}@{version}"));
                }
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                let chunks = (1 + rnd() % 3, 1 + rnd() % 3);
                sources.push(Source::Mem(MemSource::new(
                    mem(&keys, version),
                    b"",
                    None,
                    chunks,
                )));
            }
            let mut merge = Merge::new(sources).unwrap();
            let mut got = Vec::new();
            while let Some(e) = merge.next().unwrap() {
                got.push(String::from_utf8(e.value).unwrap());
            }
            let want: Vec<String> = model.into_values().collect();
            assert_eq!(got, want, "round {round}");
        }
    }
}
