//! The active expiry cycle: `hz` times a second (10 by default, as in
//! Redis; CONFIG SET changes it), the shard's thread reads
//! the expiry index up to now and deletes the keys whose metadata still
//! says they expire then, for at most a millisecond a cycle (Redis's
//! active expiry, bounded the same way); a stale entry (the key's expiry
//! changed, or the key was overwritten or deleted) is only dropped. The
//! deletes are logged at the server's durability level, like a client's.
//!
//! While keys with an expiry exist, the cycle also records the clock in
//! the store once a second, so a clock that steps back across a restart
//! does not bring back keys (see [`super::clock`]).

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

/// When the cycle runs next, and when the clock was last recorded.
pub struct Expiry {
    next: Instant,
    clock_at: Option<Instant>,
}

impl Default for Expiry {
    fn default() -> Expiry {
        Expiry {
            next: Instant::now() + Duration::from_millis(100),
            clock_at: None,
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
        let mut from = keys::EXPIRES.to_vec();
        // Nothing waits for these writes but the keys' next readers.
        let mut deps = Deps::default();
        loop {
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
                Some((last, _)) if due.len() == STEP && started.elapsed() < BUDGET => {
                    from = last.clone();
                    from.push(0);
                }
                _ => break,
            }
        }
        if self.clock_at.is_none_or(|t| t.elapsed() >= CLOCK_EVERY) {
            let index_end = [0u8, 3];
            if !shard
                .scan(keys::EXPIRES, Some(&index_end), 1, &mut deps)?
                .is_empty()
            {
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
