//! Client-side caching (CLIENT TRACKING), the shard's half: which
//! connections track, in which mode, which keys each has read, and the
//! invalidations that writes make for them.
//!
//! In the default mode a read-only command's connection is remembered as
//! a reader of every key the command looked up; the first write of the
//! key sends each reader one invalidation and forgets them all (they
//! track it again when they read it again). In BCAST mode a connection
//! names key prefixes instead, and gets, once per turn of the loop, the
//! keys written under each prefix. An invalidation is a message: it waits
//! for the write it tells of, and the loop hands it to the connection (or
//! the one it redirects to) after the reply of the command that wrote.

use std::collections::{BTreeMap, HashMap};

use crate::hash::BytesHash;

use super::super::keys::{self, Part};
use super::{Deps, Write};

/// How a connection tracks (CLIENT TRACKING ON and its options).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mode {
    /// The client id its invalidations go to; 0: itself.
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// BCAST's prefixes (the empty prefix when none was named).
    pub prefixes: Vec<Vec<u8>>,
}

/// A tracking connection.
#[derive(Debug)]
pub struct Tracker {
    /// The client id: a token is used again by later connections, and
    /// what an earlier one read is not theirs.
    pub id: u64,
    pub mode: Mode,
    /// CLIENT CACHING YES (OPTIN) or NO (OPTOUT) for the next command.
    pub caching: bool,
    /// The connection it redirects to was gone when an invalidation came.
    pub broken: bool,
}

impl Tracker {
    /// Whether the keys the running command reads are remembered.
    fn remembers(&self) -> bool {
        let m = &self.mode;
        // OPTIN remembers with CACHING YES, OPTOUT without CACHING NO.
        if m.bcast {
            return false;
        }
        if m.optin {
            return self.caching;
        }
        !(m.optout && self.caching)
    }
}

/// An invalidation for tracking connection `token`: the keys, or `None`
/// for all of them (FLUSHALL), and the writes it waits for.
pub struct Invalidation<'a> {
    pub token: usize,
    pub keys: Option<Vec<Vec<u8>>>,
    pub deps: Deps<'a>,
}

/// Keys written under a BCAST prefix this turn: each with the connection
/// that wrote it last (for NOLOOP), and what the writes were.
#[derive(Default)]
struct Prefix<'a> {
    trackers: Vec<usize>,
    written: Vec<(Vec<u8>, Option<usize>)>,
    deps: Deps<'a>,
}

/// What every tracking connection of the shard tracks.
#[derive(Default)]
pub struct Tracking<'a> {
    trackers: HashMap<usize, Tracker, BytesHash>,
    /// Default mode: each key read and who read it (token, client id).
    readers: HashMap<Vec<u8>, Vec<(usize, u64)>, BytesHash>,
    /// BCAST mode, by prefix.
    prefixes: BTreeMap<Vec<u8>, Prefix<'a>>,
    outbox: Vec<Invalidation<'a>>,
}

/// Whether `a` or `b` is a prefix of the other: two BCAST prefixes that
/// would both tell of one key.
fn overlap(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

impl<'a> Tracking<'a> {
    pub fn get(&self, token: usize) -> Option<&Tracker> {
        self.trackers.get(&token)
    }

    pub fn get_mut(&mut self, token: usize) -> Option<&mut Tracker> {
        self.trackers.get_mut(&token)
    }

    /// Nothing tracks: a write has nothing to look up.
    pub fn is_idle(&self) -> bool {
        self.trackers.is_empty() && self.readers.is_empty()
    }

    /// Why `mode`'s prefixes cannot join those `token` has: Redis's error.
    pub fn prefix_collision(&self, token: usize, mode: &Mode) -> Option<String> {
        let have = self
            .trackers
            .get(&token)
            .map_or(&[][..], |t| &t.mode.prefixes[..]);
        for (i, p) in mode.prefixes.iter().enumerate() {
            if let Some(old) = have.iter().find(|o| overlap(p, o)) {
                return Some(format!(
                    "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(old)
                ));
            }
            if let Some(other) = mode.prefixes[i + 1..].iter().find(|o| overlap(p, o)) {
                return Some(format!(
                    "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(other)
                ));
            }
        }
        None
    }

    /// CLIENT TRACKING ON: `token` tracks in `mode` (checked by the
    /// caller). Turned on again, the options are the new ones and BCAST
    /// prefixes add to those it had.
    pub fn enable(&mut self, token: usize, id: u64, mut mode: Mode) {
        if mode.bcast && mode.prefixes.is_empty() {
            mode.prefixes.push(Vec::new());
        }
        let old = self.trackers.remove(&token);
        let mut prefixes = old.map(|t| t.mode.prefixes).unwrap_or_default();
        for p in std::mem::take(&mut mode.prefixes) {
            if !prefixes.contains(&p) {
                let e = self.prefixes.entry(p.clone()).or_default();
                e.trackers.push(token);
                prefixes.push(p);
            }
        }
        mode.prefixes = prefixes;
        self.trackers.insert(
            token,
            Tracker {
                id,
                mode,
                caching: false,
                broken: false,
            },
        );
    }

    /// CLIENT TRACKING OFF, RESET, a connection that goes. The keys it
    /// read stay in the table until written (as Redis does): the
    /// invalidation finds no tracker and is dropped.
    pub fn disable(&mut self, token: usize) {
        let Some(t) = self.trackers.remove(&token) else {
            return;
        };
        for p in t.mode.prefixes {
            if let Some(e) = self.prefixes.get_mut(&p) {
                e.trackers.retain(|&x| x != token);
                if e.trackers.is_empty() {
                    self.prefixes.remove(&p);
                }
            }
        }
    }

    /// Remembers that `token` read `key`, if it tracks keys it reads now.
    pub fn remember(&mut self, token: usize, key: &[u8]) {
        let Some(t) = self.trackers.get(&token).filter(|t| t.remembers()) else {
            return;
        };
        let reader = (token, t.id);
        let readers = self.readers.entry(key.to_vec()).or_default();
        if !readers.contains(&reader) {
            readers.push(reader);
        }
    }

    /// The command is over: CLIENT CACHING applied to it alone.
    pub fn command_done(&mut self, token: usize) {
        if let Some(t) = self.trackers.get_mut(&token) {
            t.caching = false;
        }
    }

    /// The Redis keys of engine writes `written`, each once, when anyone
    /// tracks.
    pub fn keys_of(&self, written: &[Write]) -> Vec<Vec<u8>> {
        if self.is_idle() {
            return Vec::new();
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        for (k, _) in written {
            if let Some((key, Part::Meta | Part::Sub(..))) = keys::decode(k) {
                if !out.contains(&key) {
                    out.push(key);
                }
            }
        }
        out
    }

    /// Keys `written` by connection `writer` (`None`: the server's own
    /// expiry) changed: their readers' invalidations, and the keys for
    /// the BCAST prefixes they fall under; all wait for `deps`.
    pub fn invalidate(&mut self, written: Vec<Vec<u8>>, writer: Option<usize>, deps: &Deps<'a>) {
        for key in written {
            for (p, e) in self.prefixes.iter_mut() {
                if key.starts_with(p) {
                    match e.written.iter_mut().find(|(k, _)| *k == key) {
                        Some(w) => w.1 = writer,
                        None => e.written.push((key.clone(), writer)),
                    }
                    e.deps.merge(deps);
                }
            }
            self.forget_key(&key, writer, deps);
        }
    }

    /// Sends `key`'s readers (but a NOLOOP writer) their invalidation and
    /// forgets them.
    fn forget_key(&mut self, key: &[u8], writer: Option<usize>, deps: &Deps<'a>) {
        let Some(readers) = self.readers.remove(key) else {
            return;
        };
        for (token, id) in readers {
            let Some(t) = self.trackers.get(&token).filter(|t| t.id == id) else {
                continue;
            };
            if t.mode.bcast || (t.mode.noloop && writer == Some(token)) {
                continue;
            }
            self.outbox.push(Invalidation {
                token,
                keys: Some(vec![key.to_vec()]),
                deps: deps.clone(),
            });
        }
    }

    /// FLUSHALL: every tracking connection is told that every key changed,
    /// and the table is emptied.
    pub fn flush(&mut self, deps: &Deps<'a>) {
        self.readers.clear();
        for e in self.prefixes.values_mut() {
            e.written.clear();
        }
        let mut tokens: Vec<usize> = self.trackers.keys().copied().collect();
        tokens.sort_unstable();
        for token in tokens {
            self.outbox.push(Invalidation {
                token,
                keys: None,
                deps: deps.clone(),
            });
        }
    }

    /// The turn is over: each BCAST connection gets the keys written
    /// under each of its prefixes (but its own, with NOLOOP), one
    /// message a prefix.
    pub fn broadcast(&mut self) {
        for e in self.prefixes.values_mut() {
            if e.written.is_empty() {
                continue;
            }
            let written = std::mem::take(&mut e.written);
            let deps = std::mem::take(&mut e.deps);
            for &token in &e.trackers {
                let Some(t) = self.trackers.get(&token) else {
                    continue;
                };
                let keys: Vec<Vec<u8>> = written
                    .iter()
                    .filter(|(_, w)| !(t.mode.noloop && *w == Some(token)))
                    .map(|(k, _)| k.clone())
                    .collect();
                if !keys.is_empty() {
                    self.outbox.push(Invalidation {
                        token,
                        keys: Some(keys),
                        deps: deps.clone(),
                    });
                }
            }
        }
    }

    /// Keeps the table at `max` keys at most (0: no limit): keys over it
    /// are invalidated for their readers, as if written, up to `effort`.
    pub fn limit(&mut self, max: usize, effort: usize) {
        if max == 0 {
            return;
        }
        for _ in 0..effort {
            if self.readers.len() <= max {
                return;
            }
            let Some(key) = self.readers.keys().next().cloned() else {
                return;
            };
            self.forget_key(&key, None, &Deps::default());
        }
    }

    pub fn has_outbox(&self) -> bool {
        !self.outbox.is_empty()
    }

    pub fn take_outbox(&mut self) -> Vec<Invalidation<'a>> {
        std::mem::take(&mut self.outbox)
    }

    /// INFO's counts: tracking connections, keys in the table, readers
    /// in all, BCAST prefixes.
    pub fn counts(&self) -> [usize; 4] {
        [
            self.trackers.len(),
            self.readers.len(),
            self.readers.values().map(Vec::len).sum(),
            self.prefixes.len(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Vec<u8> {
        k.as_bytes().to_vec()
    }

    fn sent(t: &mut Tracking<'_>) -> Vec<(usize, Option<Vec<Vec<u8>>>)> {
        t.take_outbox()
            .into_iter()
            .map(|i| (i.token, i.keys))
            .collect()
    }

    #[test]
    fn a_reader_is_told_once_and_a_noloop_writer_not_at_all() {
        let mut t = Tracking::default();
        let none = Deps::default();
        t.enable(1, 1, Mode::default());
        t.enable(
            2,
            2,
            Mode {
                noloop: true,
                ..Mode::default()
            },
        );
        t.remember(1, b"k");
        t.remember(2, b"k");
        t.remember(3, b"k"); // not tracking: not remembered
        assert_eq!(t.counts(), [2, 1, 2, 0]);
        t.invalidate(vec![key("k")], Some(2), &none);
        assert_eq!(sent(&mut t), [(1, Some(vec![key("k")]))]);
        t.invalidate(vec![key("k")], Some(2), &none);
        assert!(sent(&mut t).is_empty(), "forgotten after one invalidation");
        // A later connection on token 1 is not told of what 1 read.
        t.remember(1, b"j");
        t.disable(1);
        t.enable(1, 9, Mode::default());
        t.invalidate(vec![key("j")], None, &none);
        assert!(sent(&mut t).is_empty(), "told another client's keys");
    }

    #[test]
    fn optin_and_optout_remember_by_caching() {
        let mut t = Tracking::default();
        t.enable(
            1,
            1,
            Mode {
                optin: true,
                ..Mode::default()
            },
        );
        t.remember(1, b"a");
        t.get_mut(1).unwrap().caching = true;
        t.remember(1, b"b");
        t.command_done(1);
        t.remember(1, b"c");
        assert_eq!(t.counts()[1], 1);
        assert!(t.readers.contains_key(b"b".as_slice()));
    }

    #[test]
    fn bcast_prefixes_collect_a_turn_of_keys_and_collide_as_redis_says() {
        let mut t = Tracking::default();
        let none = Deps::default();
        let bcast = |p: &[&str]| Mode {
            bcast: true,
            prefixes: p.iter().map(|s| key(s)).collect(),
            ..Mode::default()
        };
        assert!(t
            .prefix_collision(1, &bcast(&["FOOBAR", "FOO"]))
            .unwrap()
            .starts_with("Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'"));
        t.enable(1, 1, bcast(&["a:", "b:"]));
        assert!(t
            .prefix_collision(1, &bcast(&["a"]))
            .unwrap()
            .starts_with("Prefix 'a' overlaps with an existing prefix 'a:'"));
        t.invalidate(vec![key("a:1"), key("b:1"), key("c:1")], None, &none);
        t.invalidate(vec![key("a:1"), key("a:2")], None, &none);
        t.broadcast();
        let mut got = sent(&mut t);
        got.sort();
        assert_eq!(
            got,
            [
                (1, Some(vec![key("a:1"), key("a:2")])),
                (1, Some(vec![key("b:1")]))
            ]
        );
        t.flush(&none);
        assert_eq!(sent(&mut t), [(1, None)]);
        t.disable(1);
        assert_eq!(t.counts(), [0, 0, 0, 0]);
    }

    #[test]
    fn the_table_is_kept_to_its_limit() {
        let mut t = Tracking::default();
        t.enable(1, 1, Mode::default());
        for i in 0..250 {
            t.remember(1, format!("key{i}").as_bytes());
        }
        t.limit(1, 1000);
        assert_eq!(t.counts()[1], 1);
        assert_eq!(sent(&mut t).len(), 249);
    }
}
