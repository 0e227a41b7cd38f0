//! A scan as the shard's commands see it: the engine's keys merged with
//! the dirty table's, from where the known-empty ranges ([`Gaps`]) say
//! the first live key can be.
//!
//! [`Gaps`]: super::gaps::Gaps

use super::gaps::LEARN_AFTER;
use super::{Deps, Found, Shard};
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
        if let Some(e) = self.lost_in(start, end) {
            return Err(e);
        }
        let mut from = start.to_vec();
        // Only bounded scans use and learn empty ranges (see `gaps`).
        if let Some(end) = end {
            if let Some((to, why)) = self.gaps.borrow_mut().skip(start) {
                deps.merge(&why);
                if to.as_slice() >= end {
                    return Ok(Vec::new());
                }
                from = to;
            }
        }
        let skipped_to = from.clone();
        let mut out = Vec::new();
        // Deletes passed before the first live key, and what the dirty
        // ones among them depend on.
        let mut passed = 0;
        let mut lead = Deps::default();
        'steps: while out.len() < limit {
            let want = limit - out.len();
            let (got, deleted) = self.engine.scan_counting(&from, end, want)?;
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
                _ => end.map(<[u8]>::to_vec),
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
                        }
                        None => {}
                    }
                } else {
                    out.push(got.next().expect("peeked"));
                }
                if out.len() == limit {
                    break 'steps;
                }
            }
            match (cut, upto) {
                (true, Some(u)) => from = u,
                _ => break,
            }
        }
        if let Some(end) = end {
            if passed >= LEARN_AFTER {
                // Nothing live before the first key found, or before the
                // end when none was (the loop ran out, not into `limit`).
                let to = out.first().map_or(end, |(k, _)| k.as_slice());
                self.gaps.borrow_mut().learn(&skipped_to, to, &lead);
            }
        }
        Ok(out)
    }
}
