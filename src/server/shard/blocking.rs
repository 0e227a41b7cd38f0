//! The clients blocked on keys (BLPOP and the like): who waits on which
//! key, in the order they blocked, until when; and which of those keys
//! were written since the event loop last looked. A write of any engine
//! key of a waited-on key makes it ready, whatever the command (a push,
//! a RENAME or SORT ... STORE into it, an EXEC): the loop then runs each
//! waiter's command again, first blocked first, until one finds nothing.
//! Only waited-on keys are looked up, so a shard where no one waits pays
//! one emptiness check per write.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Instant;

use crate::hash::BytesHash;

use super::super::keys;

/// The clients blocked on keys of a shard, by connection token.
#[derive(Default)]
pub struct Blocking {
    /// Waiters of each key (by `esc(key) 00 01`), first blocked first.
    by_owner: HashMap<Vec<u8>, VecDeque<usize>, BytesHash>,
    /// Keys written while waited on, in the order first written.
    ready: Vec<Vec<u8>>,
    ready_set: HashSet<Vec<u8>, BytesHash>,
    /// When each waiter with a timeout gives up.
    deadlines: BTreeSet<(Instant, usize)>,
    /// The waiters by client id (CLIENT UNBLOCK).
    by_client: HashMap<u64, usize, BytesHash>,
    /// Waiters CLIENT UNBLOCK ended, and whether with an error.
    unblocked: Vec<(usize, bool)>,
    /// Per key, the waiters that a delete of the key answers
    /// (XREADGROUP's), as Redis counts them.
    on_nokey: HashMap<Vec<u8>, usize, BytesHash>,
}

impl Blocking {
    /// Connection `token` waits on `owners` until `deadline` (for ever
    /// without one).
    pub fn block(
        &mut self,
        token: usize,
        client: u64,
        owners: &[Vec<u8>],
        deadline: Option<Instant>,
        nokey: bool,
    ) {
        self.by_client.insert(client, token);
        if nokey {
            for o in owners {
                *self.on_nokey.entry(o.clone()).or_default() += 1;
            }
        }
        for o in owners {
            let q = self.by_owner.entry(o.clone()).or_default();
            if !q.contains(&token) {
                q.push_back(token);
            }
        }
        if let Some(d) = deadline {
            self.deadlines.insert((d, token));
        }
    }

    /// Connection `token` waits no more.
    pub fn unblock(
        &mut self,
        token: usize,
        client: u64,
        owners: &[Vec<u8>],
        deadline: Option<Instant>,
        nokey: bool,
    ) {
        self.by_client.remove(&client);
        if nokey {
            for o in owners {
                if let Some(n) = self.on_nokey.get_mut(o) {
                    *n -= 1;
                    if *n == 0 {
                        self.on_nokey.remove(o);
                    }
                }
            }
        }
        for o in owners {
            if let Some(q) = self.by_owner.get_mut(o) {
                q.retain(|&t| t != token);
                if q.is_empty() {
                    self.by_owner.remove(o);
                }
            }
        }
        if let Some(d) = deadline {
            self.deadlines.remove(&(d, token));
        }
    }

    /// Marks the waited-on keys among the engine keys `written` as ready.
    pub fn touch<'k>(&mut self, written: impl Iterator<Item = &'k [u8]>) {
        if self.by_owner.is_empty() {
            return;
        }
        for k in written {
            // What can end a wait: the key itself, or a stream's entry
            // (not a consumer group's bookkeeping, which a served
            // XREADGROUP writes: waking the others for it would loop).
            let Some((end, part)) = keys::split(k) else {
                continue;
            };
            let wakes = match part {
                keys::Part::Meta => true,
                keys::Part::Sub(_, rest) => rest.first() == Some(&keys::ENTRY),
            };
            if wakes {
                let o = &k[..end];
                if self.by_owner.contains_key(o) && !self.ready_set.contains(o) {
                    self.ready_set.insert(o.to_vec());
                    self.ready.push(o.to_vec());
                }
            }
        }
    }

    /// Every waited-on key is ready (FLUSHALL: each waiter looks again).
    pub fn ready_all(&mut self) {
        for o in self.by_owner.keys() {
            if self.ready_set.insert(o.clone()) {
                self.ready.push(o.clone());
            }
        }
    }

    /// Whether a waited-on key was written since [`Blocking::take_ready`],
    /// or CLIENT UNBLOCK ended a wait.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty() || !self.unblocked.is_empty()
    }

    /// CLIENT UNBLOCK: ends the wait of client `id`, as a timeout or (if
    /// `error`) with an error; whether it was waiting.
    pub fn end_wait(&mut self, id: u64, error: bool) -> bool {
        match self.by_client.get(&id) {
            Some(&t) => {
                if !self.unblocked.iter().any(|&(u, _)| u == t) {
                    self.unblocked.push((t, error));
                }
                true
            }
            None => false,
        }
    }

    /// The waits CLIENT UNBLOCK ended since the last call.
    pub fn take_unblocked(&mut self) -> Vec<(usize, bool)> {
        std::mem::take(&mut self.unblocked)
    }

    /// The keys written since the last call, in the order first written.
    pub fn take_ready(&mut self) -> Vec<Vec<u8>> {
        self.ready_set.clear();
        std::mem::take(&mut self.ready)
    }

    /// The waiters of the key with owner prefix `o`, first blocked first.
    pub fn waiters(&self, o: &[u8]) -> Vec<usize> {
        self.by_owner
            .get(o)
            .map_or_else(Vec::new, |q| q.iter().copied().collect())
    }

    /// The waiters whose time is up at `now`.
    pub fn due(&self, now: Instant) -> Vec<usize> {
        self.deadlines
            .iter()
            .take_while(|(d, _)| *d <= now)
            .map(|&(_, t)| t)
            .collect()
    }

    /// Keys someone waits on, and of those, keys an XREADGROUP waits on.
    pub fn keys(&self) -> (usize, usize) {
        (self.by_owner.len(), self.on_nokey.len())
    }

    /// When the next waiter's time is up.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(d, _)| d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::shard::watch::owner;
    use std::time::Duration;

    #[test]
    fn waiters_come_in_the_order_they_blocked_and_writes_make_keys_ready() {
        let mut b = Blocking::default();
        let (a, c) = (owner(b"a"), owner(b"c"));
        let soon = Instant::now() + Duration::from_millis(10);
        b.block(7, 70, &[a.clone(), c.clone()], Some(soon), false);
        b.block(3, 30, std::slice::from_ref(&a), None, true);
        assert_eq!(b.keys(), (2, 1));
        assert_eq!(b.waiters(&a), [7, 3]);
        b.touch([keys::meta(b"b").as_slice()].into_iter());
        assert!(!b.has_ready());
        b.touch(
            [
                keys::element(b"c", 1, keys::ENTRY, b"x").as_slice(),
                keys::element(b"a", 1, keys::PENDING, b"x").as_slice(),
                keys::meta(b"a").as_slice(),
                keys::meta(b"c").as_slice(),
            ]
            .into_iter(),
        );
        assert_eq!(b.take_ready(), [c.clone(), a.clone()]);
        assert!(!b.has_ready());
        assert!(b.due(Instant::now()).is_empty());
        assert_eq!(b.due(soon), [7]);
        b.unblock(7, 70, &[a.clone(), c.clone()], Some(soon), false);
        assert_eq!(b.waiters(&a), [3]);
        assert!(!b.end_wait(70, false));
        assert!(b.end_wait(30, true));
        assert!(b.has_ready());
        assert_eq!(b.take_unblocked(), [(3, true)]);
        assert!(b.waiters(&c).is_empty());
        assert_eq!(b.next_deadline(), None);
    }
}
