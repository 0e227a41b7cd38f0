//! Read-ahead for runs of pops: a list popped at one end reads its
//! elements in order, and once they are in the block files each would
//! cost a bloom probe per file and a block search. A read there that is
//! told which keys come next reads them with it, one seek per block
//! file ([`crate::engine::Engine::scan_below`]), and keeps them in a
//! window for the next pops.
//!
//! A window is exact in the same way as a row of the row cache ([`rows`]):
//! it holds what the block files of one view hold, and answers only reads
//! below a view of that epoch. It is the row cache's complement: the row
//! cache keeps keys that are read again, a window keys read once, in
//! order, which would only push hot keys out of the row cache. Read
//! once, so a window hands each value over (no copy) and forgets it: a
//! second read of the key (a pop that failed after it) reads a new
//! window.
//!
//! [`rows`]: super::rows

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::{Deps, Row, Shard};
use crate::engine::{BelowRange, EngineError, PointRead};

/// Entries a window holds at most.
const AHEAD_ROWS: usize = 64;

/// Value bytes a window holds at most (a window stops after the entry
/// that passes it).
const AHEAD_BYTES: usize = 64 << 10;

/// Windows kept at once: lists popped by turns, each its own.
const WINDOWS: usize = 8;

/// A key's value in the block files (`None`: they do not have it), or
/// `None` once a read took it.
type Untaken = Option<Option<Vec<u8>>>;

/// What the block files of the view of `epoch` hold from `from` up to
/// `upto`: the rows of `rows`, and no other keys.
struct Window {
    epoch: u64,
    from: Vec<u8>,
    upto: Vec<u8>,
    /// The rows in key order, each `None` once taken: a pop reads its
    /// element once, and takes the value rather than copy it.
    rows: Vec<(Vec<u8>, Untaken)>,
    /// The row taken last: pops take rows in order, so the next one is
    /// beside it.
    at: usize,
}

impl Window {
    /// Takes `key`'s value (`Some(None)`: the block files do not have
    /// it), if the window covers it below a view of `epoch` and has not
    /// handed it out.
    fn take(&mut self, key: &[u8], epoch: u64) -> Untaken {
        if self.epoch != epoch || key < self.from.as_slice() || key >= self.upto.as_slice() {
            return None;
        }
        let near = [self.at.wrapping_sub(1), self.at.wrapping_add(1), self.at];
        let i = match near
            .into_iter()
            .find(|&i| self.rows.get(i).is_some_and(|(k, _)| k.as_slice() == key))
        {
            Some(i) => i,
            None => match self.rows.binary_search_by(|(k, _)| k.as_slice().cmp(key)) {
                Ok(i) => i,
                Err(_) => return Some(None),
            },
        };
        self.at = i;
        self.rows[i].1.take()
    }
}

/// The shard's windows, replaced in turn.
#[derive(Default)]
pub struct Ahead {
    windows: RefCell<Vec<Window>>,
    next: Cell<usize>,
    /// The window that answered last, or was read last: asked first, as
    /// the next pop of the same list reads there.
    last: Cell<usize>,
    /// Reads a window answered, and windows read.
    hits: Cell<u64>,
    reads: Cell<u64>,
}

impl Ahead {
    fn take(&self, key: &[u8], epoch: u64) -> Untaken {
        let mut windows = self.windows.borrow_mut();
        let last = self.last.get();
        let row = match windows.get_mut(last).and_then(|w| w.take(key, epoch)) {
            Some(row) => Some(row),
            None => windows.iter_mut().enumerate().find_map(|(i, w)| {
                let row = w.take(key, epoch)?;
                self.last.set(i);
                Some(row)
            }),
        };
        if row.is_some() {
            self.hits.set(self.hits.get() + 1);
        }
        row
    }

    fn put(&self, w: Window) {
        self.reads.set(self.reads.get() + 1);
        let mut windows = self.windows.borrow_mut();
        if windows.len() < WINDOWS {
            self.last.set(windows.len());
            windows.push(w);
            return;
        }
        let i = self.next.get();
        self.next.set((i + 1) % WINDOWS);
        self.last.set(i);
        windows[i] = w;
    }

    /// Reads answered by a window, and windows read.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits.get(), self.reads.get())
    }
}

impl<'a> Shard<'a> {
    /// [`Shard::get_shared`] of `key`, which the next reads follow in
    /// the range `near` gives (`from..to`, with `from <= key < to`): when
    /// the key's memstores and the row cache do not have it, the keys of
    /// that range are read from the block files with it, for those reads
    /// to find. `near` is asked only then.
    pub fn get_ahead(
        &self,
        key: &[u8],
        near: impl FnOnce() -> (Vec<u8>, Vec<u8>),
        deps: &mut Deps<'a>,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        self.read(key, Some(near), deps).map(Found::owned)
    }

    /// [`Shard::get_shared`], reading ahead over `near` if it is given.
    pub(super) fn read(
        &self,
        key: &[u8],
        near: Option<impl FnOnce() -> (Vec<u8>, Vec<u8>)>,
        deps: &mut Deps<'a>,
    ) -> Result<Found, EngineError> {
        if let Some(d) = self.dirty.borrow().get(key) {
            deps.merge(&d.deps);
            return Ok(Found::Shared(d.value.clone()));
        }
        if let Some(why) = self.lost.borrow().get(key) {
            return Err(super::lost_write(why));
        }
        // The memstores first: they have every write the dirty table let
        // go of, and the row cache only what the block files hold.
        let below = match self.engine.get_memstores(key) {
            // The memstore's copy is the reader's: no `Rc` to wrap it in
            // for a reader that takes it (a pop, a `get`).
            PointRead::Memstore(value) => return Ok(Found::Owned(value)),
            PointRead::Below(below) => below,
        };
        let epoch = below.epoch();
        if let Some(row) = self.rows.get(key, epoch) {
            return Ok(Found::Shared(row));
        }
        if near.is_some() {
            if let Some(value) = self.ahead.take(key, epoch) {
                return Ok(Found::Owned(value));
            }
        }
        let Some((from, to)) = near
            .map(|near| near())
            .filter(|(f, t)| f.as_slice() <= key && key < t.as_slice())
        else {
            let found: Row = self.engine.get_below(&below, key)?.map(Rc::new);
            self.rows.fill(key, found.clone(), epoch);
            return Ok(Found::Shared(found));
        };
        let BelowRange { entries, upto } =
            self.engine
                .scan_below(&below, &from, &to, AHEAD_ROWS, AHEAD_BYTES)?;
        let mut w = Window {
            epoch,
            from,
            upto,
            rows: entries.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            at: 0,
        };
        // Clipped to the key's region, or cut short before the key.
        let found = match w.take(key, epoch) {
            Some(value) => value,
            None => self.engine.get_below(&below, key)?,
        };
        self.ahead.put(w);
        Ok(Found::Owned(found))
    }
}

/// What a point read found: the memstore's copy, the reader's own, or a
/// row shared with the dirty table or the caches.
pub(super) enum Found {
    Owned(Option<Vec<u8>>),
    Shared(Row),
}

impl Found {
    /// As a row to share.
    pub(super) fn row(self) -> Row {
        match self {
            Found::Owned(v) => v.map(Rc::new),
            Found::Shared(r) => r,
        }
    }

    /// As the reader's own value: a shared row is copied unless no one
    /// else holds it.
    pub(super) fn owned(self) -> Option<Vec<u8>> {
        match self {
            Found::Owned(v) => v,
            Found::Shared(r) => r.map(|v| Rc::try_unwrap(v).unwrap_or_else(|v| (*v).clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::notify;
    use super::*;
    use crate::config::Durability;
    use crate::server::metrics::testing;

    fn key(i: u32) -> Vec<u8> {
        format!("e{i:04}").into_bytes()
    }

    #[test]
    fn windows_answer_what_the_block_files_hold() {
        let engine = testing::any_engine();
        let put = |ids: &mut dyn Iterator<Item = u32>, tag: &str| {
            let values: Vec<(Vec<u8>, Vec<u8>)> = ids
                .map(|i| (key(i), format!("{tag}{i}").into_bytes()))
                .collect();
            let batch: Vec<(&[u8], Option<&[u8]>)> = values
                .iter()
                .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
                .collect();
            engine.write_batch(&batch, None).unwrap();
        };
        // Three block files: the newer ones overwrite and delete some of
        // the older's keys, and leave gaps (odd keys past 150 are never
        // written).
        put(&mut (0..150), "a");
        engine.flush_all().unwrap();
        put(&mut (20..40), "b");
        let dead: Vec<Vec<u8>> = (60..70).map(key).collect();
        let deletes: Vec<(&[u8], Option<&[u8]>)> =
            dead.iter().map(|k| (k.as_slice(), None)).collect();
        engine.write_batch(&deletes, None).unwrap();
        engine.flush_all().unwrap();
        put(&mut (150..300).step_by(2), "c");
        engine.flush_all().unwrap();
        let shard = Shard::new(&engine, 1 << 20);
        let read = |i: u32, from: u32, to: u32| {
            let mut deps = Deps::default();
            shard
                .get_ahead(&key(i), || (key(from), key(to)), &mut deps)
                .unwrap()
        };
        // Runs of pops from either end, and windows that a cut or the
        // end of the range leaves short; every answer is the engine's.
        for i in 0..300 {
            assert_eq!(read(i, i, (i + 64).min(300)), engine.get(&key(i)).unwrap());
        }
        for i in (0..300).rev() {
            assert_eq!(
                read(i, i.saturating_sub(63), i + 1),
                engine.get(&key(i)).unwrap()
            );
        }
        let (hits, reads) = shard.ahead.stats();
        assert!(hits >= 500, "{hits} of 600 reads answered by a window");
        assert!(reads <= 20, "{reads} windows read");
        // A memstore's write is above every window.
        let mut w = Deps::default();
        shard.write(
            Durability::Write,
            vec![(key(5), Some(b"new".to_vec()))],
            &mut w,
        );
        assert_eq!(read(5, 0, 64), Some(b"new".to_vec()));
        shard.submit(&notify());
        while shard.pending().0 > 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
            shard.retire();
        }
        assert_eq!(read(5, 0, 64), Some(b"new".to_vec()));
        // Flushed: a new view, whose reads the old windows do not answer.
        engine.flush_all().unwrap();
        let (_, before) = shard.ahead.stats();
        assert_eq!(read(6, 0, 64), Some(b"a6".to_vec()));
        assert_eq!(shard.ahead.stats().1, before + 1);
        assert_eq!(read(5, 0, 64), Some(b"new".to_vec()));
        // A key outside the range it is said to be in is read alone.
        assert_eq!(read(200, 0, 64), Some(b"c200".to_vec()));
        assert_eq!(shard.ahead.stats().1, before + 1);
        // A window hands a value over once: the key read again (a pop
        // that failed after its read) reads a window anew, whose other
        // keys answer the reads after it.
        assert_eq!(read(6, 0, 64), Some(b"a6".to_vec()));
        assert_eq!(shard.ahead.stats().1, before + 2);
        let (hits, _) = shard.ahead.stats();
        assert_eq!(read(7, 0, 64), Some(b"a7".to_vec()));
        assert_eq!(read(65, 0, 64), None);
        assert_eq!(shard.ahead.stats(), (hits + 1, before + 2));
    }
}
