//! When each key was last read or written, for OBJECT IDLETIME. Keys
//! live on the devices and most are never in memory, so the shard keeps
//! an access time only for the keys commands touched since the server
//! started, in memory and bounded: once the table holds
//! [`MAX_BYTES`], the older half is forgotten. A key with no access time
//! kept (not touched since the start, or forgotten) counts as idle since
//! the server started: a lower bound of its true idle time, never more.
//!
//! As in Redis, every command that looks a key up or writes it touches
//! it, except the ones that only ask about it (TTL, PTTL, EXPIRETIME,
//! PEXPIRETIME, TYPE, EXISTS, OBJECT, MEMORY USAGE), and a connection in
//! CLIENT NO-TOUCH mode touches keys only with TOUCH.
//!
//! The table is keyed by a 64-bit hash of each key, not the key: an
//! access is one probe of a table of integers, with no key to copy or
//! compare. Two keys whose hashes collide (about 2^-64 for a pair) share
//! an access time, which can only misstate their OBJECT IDLETIME.

use std::collections::HashMap;
use std::time::Instant;

use nohash_hasher::BuildNoHashHasher;
use xxhash_rust::xxh3::xxh3_64;

/// What the table may hold, keys and entries together.
pub const MAX_BYTES: usize = 16 << 20;

/// What one entry costs: a hash, a time and the table's slack, about.
const ENTRY: usize = 24;

/// Commands that read a key's metadata without touching it.
pub const NO_TOUCH: &[&str] = &[
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "type",
    "exists",
    "object",
    "memory",
];

pub struct AccessClock {
    started: Instant,
    /// Milliseconds since `started` at each key's last access, by the
    /// key's hash (already uniform, so the table does not hash it again).
    last: HashMap<u64, u64, BuildNoHashHasher<u64>>,
    bytes: usize,
    max_bytes: usize,
    /// The time of the event loop's turn under way ([`AccessClock::tick`]):
    /// its commands touch keys at it, without reading the clock each.
    turn_ms: u64,
    /// The last key set (its hash) and its time: a command that reads a
    /// key and writes it touches it twice, and the second touch then
    /// costs no probe of the table.
    last_set: (u64, u64),
}

impl Default for AccessClock {
    fn default() -> Self {
        AccessClock::with_limit(MAX_BYTES)
    }
}

impl AccessClock {
    pub fn with_limit(max_bytes: usize) -> AccessClock {
        AccessClock {
            started: Instant::now(),
            last: HashMap::default(),
            bytes: 0,
            max_bytes,
            turn_ms: 0,
            last_set: (0, 0),
        }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// A turn of the event loop begins: its accesses are at this time.
    pub fn tick(&mut self) {
        self.turn_ms = self.now();
    }

    /// `key` was read or written in this turn (now, before any turn:
    /// tests drive the shard without a loop).
    pub fn touch(&mut self, key: &[u8]) {
        let at = if self.turn_ms == 0 {
            self.now()
        } else {
            self.turn_ms
        };
        self.set(key, at);
    }

    /// `key` was last accessed `idle_ms` ago (RESTORE ... IDLETIME); no
    /// earlier than the start, which is what is known.
    pub fn set_idle(&mut self, key: &[u8], idle_ms: u64) {
        let at = self.now().saturating_sub(idle_ms);
        self.set(key, at);
    }

    fn set(&mut self, key: &[u8], at: u64) {
        let hash = xxh3_64(key);
        if self.last_set == (hash, at) && at != 0 {
            return;
        }
        self.last_set = (hash, at);
        if self.last.insert(hash, at).is_some() {
            return;
        }
        self.bytes += ENTRY;
        if self.bytes > self.max_bytes {
            self.forget_older_half();
        }
    }

    /// Keeps the newer half of the access times (fewer when many share
    /// the median's millisecond).
    fn forget_older_half(&mut self) {
        let mut times: Vec<u64> = self.last.values().copied().collect();
        let mid = times.len() / 2;
        let (_, &mut cut, _) = times.select_nth_unstable(mid);
        self.last.retain(|_, t| *t > cut);
        self.last_set = (0, 0);
        self.bytes = self.last.len() * ENTRY;
    }

    /// Milliseconds since `key` was last accessed, or since the start.
    pub fn idle_ms(&self, key: &[u8]) -> u64 {
        let now = self.now();
        let at = self.last.get(&xxh3_64(key)).copied().unwrap_or(0);
        now.saturating_sub(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_keys_have_times_and_the_table_stays_bounded() {
        let mut a = AccessClock::with_limit(100 * ENTRY);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Never touched: idle since the start.
        assert!(a.idle_ms(b"cold") >= 20);
        a.touch(b"hot");
        assert!(a.idle_ms(b"hot") < 20);
        a.set_idle(b"old", 10_000);
        // No earlier than the start.
        assert!(a.idle_ms(b"old") < 10_000);
        for i in 0..1000u32 {
            a.touch(format!("key{i:05}").as_bytes());
        }
        assert!(a.last.len() <= 100, "{}", a.last.len());
        a.touch(b"hot");
        assert!(a.idle_ms(b"hot") < 20);
    }
}
