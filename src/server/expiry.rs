//! The active expiry cycle: `hz` times a second (10 by default, as in
//! Redis; CONFIG SET changes it), the shard's thread reads
//! the expiry index up to now and deletes the keys whose metadata still
//! says they expire then, for at most a millisecond a cycle (Redis's
//! active expiry, bounded the same way); a stale entry (the key's expiry
//! changed, or the key was overwritten or deleted) is only dropped. The
//! deletes are logged at the server's durability level, like a client's.
//!
//! A cycle goes on from where the last one stopped: the index entries
//! before that point were handled, and the tombstones they left (every
//! EXPIRE that moves a key's time deletes its old entry) are not stepped
//! over again. Every [`FULL_EVERY`] a cycle starts from the index's
//! beginning, for an entry written with a time already past (RESTORE with
//! an absolute TTL).
//!
//! While keys with an expiry exist, the cycle also records the clock in
//! the store once a second, so a clock that steps back across a restart
//! does not bring back keys (see [`super::clock`]). Whether they exist is
//! known without a scan while the index is being written; a scan for its
//! first live entry (stepping over its tombstones) asks only when it has
//! not been written for [`RECHECK_EVERY`].

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::keys;
use super::meta::Meta;
use super::notify;
use super::shard::{Deps, Shard};
use super::Shared;
use crate::config::Durability;
use crate::engine::EngineError;

/// How long one cycle runs at most.
const BUDGET: Duration = Duration::from_millis(1);

/// How often the clock is recorded while keys with an expiry exist.
const CLOCK_EVERY: Duration = Duration::from_secs(1);

/// Index entries read at a time.
const STEP: usize = 64;

/// How often a cycle reads the index from its beginning.
const FULL_EVERY: Duration = Duration::from_secs(10);

/// How long the index may go unwritten before a scan asks whether keys
/// with an expiry are left.
const RECHECK_EVERY: Duration = Duration::from_secs(30);

/// When the cycle runs next, where it goes on from, and what it knows of
/// the clock's record.
pub struct Expiry {
    next: Instant,
    /// The index entry the next cycle starts at; `None`: the beginning.
    resume: Option<Vec<u8>>,
    /// When a cycle last started from the beginning.
    full_at: Option<Instant>,
    clock_at: Option<Instant>,
    /// Whether keys with an expiry exist, and when that was last learnt.
    expiring: Option<(bool, Instant)>,
}

impl Default for Expiry {
    fn default() -> Expiry {
        Expiry {
            next: Instant::now() + Duration::from_millis(100),
            resume: None,
            full_at: None,
            clock_at: None,
            expiring: None,
        }
    }
}

impl Expiry {
    /// How long until the next cycle.
    pub fn due_in(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    /// Runs a cycle if one is due.
    pub fn run<'a>(&mut self, shared: &Shared, shard: &Shard<'a>) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + Duration::from_millis(1000 / shared.settings.hz().max(1));
        if let Err(e) = self.cycle(shared, shard) {
            tracing::warn!("active expiry: {e}");
        }
    }

    fn cycle<'a>(&mut self, shared: &Shared, shard: &Shard<'a>) -> Result<(), EngineError> {
        let started = Instant::now();
        let now = shared.clock.now();
        let floor = shared.floor.load(Ordering::SeqCst);
        let level = shared.settings.durability();
        let end = keys::expiry_after(now);
        if self.full_at.is_none_or(|t| t.elapsed() >= FULL_EVERY) {
            self.full_at = Some(started);
            self.resume = None;
        }
        let mut from = self.resume.take().unwrap_or_else(|| keys::EXPIRES.to_vec());
        // Nothing waits for these writes but the keys' next readers.
        let mut deps = Deps::default();
        loop {
            if from >= end {
                // The last cycle ran within this millisecond.
                self.resume = Some(from);
                break;
            }
            let due = shard.scan(&from, Some(&end), STEP, &mut deps)?;
            let mut writes = Vec::with_capacity(2 * due.len());
            let mut expired = Vec::new();
            for (entry, _) in &due {
                if let Some((at, key)) = keys::decode_expiry(entry) {
                    let meta = keys::meta(key);
                    let dead = shard
                        .get(&meta, &mut deps)?
                        .and_then(Meta::decode)
                        .map(|m| (m.version < floor, m.expire_at == Some(at)));
                    if let Some((flushed, due)) = dead.filter(|(f, d)| *f || *d) {
                        writes.push((meta, None));
                        shared.metrics.key_expired();
                        if due && !flushed {
                            expired.push(key.to_vec());
                        }
                    }
                }
                writes.push((entry.clone(), None));
            }
            shard.note_writes(&writes);
            shard.write(level, writes, &mut deps);
            if !expired.is_empty() && !shard.tracking().is_idle() {
                shard.tracking().invalidate(expired.clone(), None, &deps);
            }
            let flags = shared.settings.notify_flags();
            for key in expired {
                notify::publish(shard, flags, notify::EXPIRED, "expired", &key, &deps);
            }
            match due.last() {
                Some((last, _)) if due.len() == STEP => {
                    from = last.clone();
                    from.push(0);
                    if started.elapsed() >= BUDGET {
                        // The next cycle goes on from here.
                        self.resume = Some(from);
                        break;
                    }
                }
                // Every entry due by `now` was handled.
                _ => {
                    self.resume = Some(end);
                    break;
                }
            }
        }
        if self.clock_at.is_none_or(|t| t.elapsed() >= CLOCK_EVERY) {
            if shard.take_expiry_written() {
                self.expiring = Some((true, Instant::now()));
            }
            if self
                .expiring
                .is_none_or(|(_, at)| at.elapsed() >= RECHECK_EVERY)
            {
                let index_end = [0u8, 3];
                let found = !shard
                    .scan(keys::EXPIRES, Some(&index_end), 1, &mut deps)?
                    .is_empty();
                self.expiring = Some((found, Instant::now()));
            }
            if self.expiring.is_some_and(|(e, _)| e) {
                shard.write(
                    Durability::Async,
                    vec![(keys::CLOCK.to_vec(), Some(now.to_string().into_bytes()))],
                    &mut deps,
                );
                self.clock_at = Some(Instant::now());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::cmd::tests::{conn_on, run_command, shared_on, words};
    use crate::server::metrics::testing;

    /// Index entries and metadata of the keys `prefix0` .. `prefix<n-1>`
    /// still in the store.
    fn left(shard: &Shard<'_>, prefix: &str, n: usize) -> usize {
        let mut deps = Deps::default();
        (0..n)
            .filter(|i| {
                let key = format!("{prefix}{i}");
                shard
                    .get(&keys::meta(key.as_bytes()), &mut deps)
                    .unwrap()
                    .is_some()
            })
            .count()
    }

    /// Keys written after a cycle passed their time are still found by
    /// the cycles that go on from where it stopped, however many cycles a
    /// wave takes; keys not yet due stay.
    #[test]
    fn cycles_go_on_from_where_they_stopped_and_delete_every_key_due() {
        let devs = testing::sim_devices(&testing::model(1));
        let shared = shared_on(&devs).unwrap();
        let (shard, mut conn) = conn_on(&shared, 1);
        let mut expiry = Expiry::default();
        for wave in 0..3 {
            for i in 0..200 {
                let (r, _) = run_command(&mut conn, &words(&format!("SET w{wave}:{i} v PX 5")));
                assert!(!r.is_error(), "{r:?}");
            }
            run_command(&mut conn, &words(&format!("SET keep{wave} v EX 1000")));
            std::thread::sleep(Duration::from_millis(20));
            let mut cycles = 0;
            while left(&shard, &format!("w{wave}:"), 200) > 0 {
                cycles += 1;
                assert!(cycles < 1000, "wave {wave}: keys due are never deleted");
                expiry.cycle(&shared, &shard).unwrap();
            }
            assert!(expiry.resume.is_some(), "the next cycle goes on");
            assert_eq!(left(&shard, "keep", wave + 1), wave + 1);
        }
        std::mem::forget(conn);
        std::mem::forget(shard);
    }

    /// The clock is recorded while keys with an expiry exist, and not
    /// before any does.
    #[test]
    fn the_clock_is_recorded_once_an_expiry_is_written() {
        let devs = testing::sim_devices(&testing::model(2));
        let shared = shared_on(&devs).unwrap();
        let (shard, mut conn) = conn_on(&shared, 1);
        let clock = |shard: &Shard<'_>| {
            shard
                .get(keys::CLOCK, &mut Deps::default())
                .unwrap()
                .is_some()
        };
        let mut expiry = Expiry::default();
        run_command(&mut conn, &words("SET plain v"));
        expiry.cycle(&shared, &shard).unwrap();
        assert!(!clock(&shard), "no key expires");
        run_command(&mut conn, &words("SET k v EX 1000"));
        expiry.cycle(&shared, &shard).unwrap();
        assert!(clock(&shard), "a key expires");
        std::mem::forget(conn);
        std::mem::forget(shard);
    }
}
