//! The keys connections WATCH, and how often each was written since: a
//! key's count of touches goes up with every write of any of its engine
//! keys (its metadata or an element), so an EXEC whose watched key's
//! count moved since its WATCH is aborted. Only watched keys are counted,
//! so a shard with no WATCH pays one emptiness check per write.

use std::collections::HashMap;

use crate::hash::BytesHash;

use super::super::keys;

/// A watched key: who watches it, and its touches since anyone did.
struct Watch {
    /// The Redis key (for FLUSHALL, which must learn which exist).
    key: Vec<u8>,
    watchers: usize,
    touches: u64,
}

/// The watched keys of a shard, by `esc(key) 00 01`: what every engine
/// key of a Redis key starts with.
#[derive(Default)]
pub struct Watches {
    by_owner: HashMap<Vec<u8>, Watch, BytesHash>,
}

/// What every engine key of `key` starts with.
pub fn owner(key: &[u8]) -> Vec<u8> {
    let mut m = keys::meta(key);
    m.pop();
    m
}

impl Watches {
    /// One more watcher of `key`: its owner prefix and its touches now.
    pub fn watch(&mut self, key: &[u8]) -> (Vec<u8>, u64) {
        let o = owner(key);
        let w = self.by_owner.entry(o.clone()).or_insert_with(|| Watch {
            key: key.to_vec(),
            watchers: 0,
            touches: 0,
        });
        w.watchers += 1;
        (o, w.touches)
    }

    /// One watcher of the key with owner prefix `o` fewer.
    pub fn unwatch(&mut self, o: &[u8]) {
        if let Some(w) = self.by_owner.get_mut(o) {
            w.watchers -= 1;
            if w.watchers == 0 {
                self.by_owner.remove(o);
            }
        }
    }

    /// The touches of the watched key with owner prefix `o`.
    pub fn touches(&self, o: &[u8]) -> u64 {
        self.by_owner.get(o).map_or(0, |w| w.touches)
    }

    /// Counts a write of each engine key in `written` against its Redis
    /// key, if watched.
    pub fn touch<'k>(&mut self, written: impl Iterator<Item = &'k [u8]>) {
        if self.by_owner.is_empty() {
            return;
        }
        for k in written {
            if let Some((end, _)) = keys::split(k) {
                if let Some(w) = self.by_owner.get_mut(&k[..end]) {
                    w.touches += 1;
                }
            }
        }
    }

    /// Counts a write of the watched key with owner prefix `o`.
    pub fn touch_owner(&mut self, o: &[u8]) {
        if let Some(w) = self.by_owner.get_mut(o) {
            w.touches += 1;
        }
    }

    /// Every watched key, Redis key and owner prefix.
    pub fn keys(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.by_owner
            .iter()
            .map(|(o, w)| (w.key.clone(), o.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_of_any_engine_key_of_a_watched_key_touches_it_and_no_other() {
        let mut w = Watches::default();
        let (a, at) = w.watch(b"a");
        let (ab, _) = w.watch(b"a\0b");
        assert_eq!(at, 0);
        w.touch([keys::meta(b"a").as_slice()].into_iter());
        assert_eq!(w.touches(&a), 1);
        w.touch([keys::element(b"a", 7, keys::FIELD, b"f").as_slice()].into_iter());
        assert_eq!(w.touches(&a), 2);
        // Another key that starts with the same bytes, the expiry index
        // and the server's own keys touch nothing.
        w.touch(
            [
                keys::meta(b"ab").as_slice(),
                keys::expiry(5, b"a").as_slice(),
                keys::FLOOR,
            ]
            .into_iter(),
        );
        assert_eq!(w.touches(&a), 2);
        assert_eq!(w.touches(&ab), 0);
        w.touch([keys::meta(b"a\0b").as_slice()].into_iter());
        assert_eq!(w.touches(&ab), 1);
        // Watched twice, unwatched once: still counted.
        let (_, again) = w.watch(b"a");
        assert_eq!(again, 2);
        w.unwatch(&a);
        w.touch([keys::meta(b"a").as_slice()].into_iter());
        assert_eq!(w.touches(&a), 3);
        w.unwatch(&a);
        assert_eq!(w.keys().len(), 1);
    }
}
