//! A scan as the shard's commands see it: the engine's keys merged with
//! the dirty table's, from where the known-empty ranges ([`Gaps`]) say
//! the first live key can be.
//!
//! [`Gaps`]: super::gaps::Gaps

use super::gaps::LEARN_AFTER;
use super::{Deps, Found, Shard, CHUNK};
use crate::engine::EngineError;

impl<'a> Shard<'a> {
    /// Up to `limit` engine keys and values from `start` (inclusive) to
    /// `end` (exclusive), as the shard's commands see them; what the
    /// answer depends on goes to `deps`.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        deps: &mut Deps<'a>,
    ) -> Result<Found, EngineError> {
        self.scan_with(start, end, limit, deps, false)
    }

    /// [`Shard::scan`] of a bounded range for a run of pops: every key
    /// found is remembered, so that deleting them, in any order, grows
    /// one empty range over them (see [`super::gaps::Gaps::deleted`]).
    pub fn scan_ahead(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        deps: &mut Deps<'a>,
    ) -> Result<Found, EngineError> {
        self.scan_with(start, Some(end), limit, deps, true)
    }

    /// Whether `key`, a key [`Shard::scan_ahead`] found, is there still,
    /// when the shard knows it without a read: the dirty table has a
    /// write of it since (what the answer depends on goes to `deps`), or
    /// no write has reached it since the scan found it live
    /// ([`super::gaps::Gaps::found_live`]). `None`: read it.
    pub fn still_found(&self, key: &[u8], deps: &mut Deps<'a>) -> Option<bool> {
        if let Some(d) = self.dirty.borrow().get(key) {
            deps.merge(&d.deps);
            return Some(d.value.is_some());
        }
        let known = self.gaps.borrow().found_live(key) && !self.lost.borrow().contains_key(key);
        known.then_some(true)
    }

    fn scan_with(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        deps: &mut Deps<'a>,
        ahead: bool,
    ) -> Result<Found, EngineError> {
        if let Some(e) = self.lost_in(start, end) {
            return Err(e);
        }
        let mut from = start.to_vec();
        let mut skipped_to = None;
        let mut out = Vec::with_capacity(limit.min(CHUNK));
        // Deletes passed before the first live key, and what the dirty
        // ones among them (and the ranges jumped) depend on.
        let mut passed = 0;
        let mut jumped = false;
        let mut started_in_range = false;
        let mut lead = Deps::default();
        // What the emptiness between the keys found depends on (for a
        // scan ahead): every delete and range passed.
        let mut span = Deps::default();
        'steps: while out.len() < limit {
            // Only bounded scans use and learn empty ranges (see `gaps`):
            // one that holds `from` is jumped, and the engine's scan stops
            // where the next one starts.
            let mut stop = end.map(<[u8]>::to_vec);
            if let Some(end) = end {
                let mut gaps = self.gaps.borrow_mut();
                if let Some((to, why)) = gaps.skip(&from) {
                    deps.merge(&why);
                    if ahead {
                        span.merge(&why);
                    }
                    if out.is_empty() {
                        lead.merge(&why);
                        jumped |= skipped_to.is_some();
                    }
                    started_in_range |= skipped_to.is_none();
                    from = to;
                }
                skipped_to.get_or_insert_with(|| from.clone());
                if from.as_slice() >= end {
                    break;
                }
                if let Some(next) = gaps.next_start(&from).filter(|&n| n < end) {
                    stop = Some(next.to_vec());
                }
            }
            let want = limit - out.len();
            let (got, deleted) = self.engine.scan_counting(&from, stop.as_deref(), want)?;
            if out.is_empty() {
                passed += deleted;
            }
            // Up to where the engine's answer is whole: past its last key
            // only when it was cut at `want`.
            let cut = got.len() == want;
            let upto: Option<Vec<u8>> = match (cut, got.last()) {
                (true, Some((k, _))) => {
                    let mut after = k.clone();
                    after.push(0);
                    Some(after)
                }
                _ => stop.clone(),
            };
            let mut dirty = self.dirty.borrow_mut();
            let range = dirty.range(&from, upto.as_deref());
            let mut got = got.into_iter().peekable();
            let mut ours = range.peekable();
            loop {
                let take_ours = match (got.peek(), ours.peek()) {
                    (None, None) => break,
                    (Some(_), None) => false,
                    (None, Some(_)) => true,
                    (Some((gk, _)), Some((dk, _))) => dk.as_ref() <= gk.as_slice(),
                };
                if take_ours {
                    let (k, d) = ours.next().expect("peeked");
                    if got.peek().is_some_and(|(gk, _)| gk.as_slice() == &**k) {
                        got.next();
                    }
                    deps.merge(&d.deps);
                    match &d.value {
                        Some(v) => out.push((k.to_vec(), v.to_vec())),
                        None if out.is_empty() => {
                            passed += 1;
                            lead.merge(&d.deps);
                            if ahead {
                                span.merge(&d.deps);
                            }
                        }
                        None if ahead => span.merge(&d.deps),
                        None => {}
                    }
                } else {
                    out.push(got.next().expect("peeked"));
                }
                if out.len() == limit {
                    break 'steps;
                }
            }
            // On from past the last key read, or from the range the
            // engine's scan stopped at; done at the end.
            match upto {
                Some(u) if cut || end.is_some_and(|e| u.as_slice() < e) => from = u,
                _ => break,
            }
        }
        if let (Some(end), Some(skipped_to)) = (end, skipped_to) {
            let mut gaps = self.gaps.borrow_mut();
            let first = out.first().map(|(k, _)| k.as_slice());
            if passed >= LEARN_AFTER || jumped {
                // Nothing live before the first key found, or before the
                // end when none was (the loop ran out, not into `limit`).
                gaps.learn(&skipped_to, first.unwrap_or(end), &lead);
            }
            // A scan that passed few deletes and started outside a range
            // would make a range of little more than the key it found,
            // once that is deleted: tens of thousands of them over a
            // set's first pops, each making every scan's searches longer.
            if ahead {
                let keys = out.iter().map(|(k, _)| k.clone()).collect();
                gaps.found(&skipped_to, keys, &span);
            } else if let Some(first) = first.filter(|_| passed >= LEARN_AFTER || started_in_range)
            {
                gaps.found(&skipped_to, [first.to_vec()].into(), &lead);
            }
        }
        Ok(out)
    }
}
