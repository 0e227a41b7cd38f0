//! What only moves forward across restarts: key versions and the time
//! expiry is judged by.
//!
//! A version is never given twice, or the sub-keys of a deleted
//! collection would come back under a new one: versions are handed out
//! from a range whose end is durable before the first of it is used.
//!
//! The clock is the system's, never behind the highest time it has shown
//! (so a clock that steps back does not bring expired keys back while
//! the server runs) nor behind the time last recorded in the store (so
//! it does not across a restart either, to within how often that is
//! recorded: [`super::expire`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use super::keys;
use super::ServerEngine;
use crate::config::Durability;
use crate::engine::EngineError;

/// Versions reserved by one durable write.
const STEP: u64 = 1 << 20;

fn number(v: Option<Vec<u8>>) -> u64 {
    v.and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok())
        .unwrap_or(0)
}

pub struct Versions {
    next: AtomicU64,
    /// Versions below this are reserved durably.
    reserved: AtomicU64,
    reserving: Mutex<()>,
}

impl Versions {
    /// Goes on after the range the last run reserved.
    pub fn open(engine: &ServerEngine) -> Result<Versions, EngineError> {
        let from = number(engine.get(keys::VERSIONS)?);
        let v = Versions {
            next: AtomicU64::new(from),
            reserved: AtomicU64::new(from),
            reserving: Mutex::new(()),
        };
        v.reserve(engine, from)?;
        Ok(v)
    }

    fn reserve(&self, engine: &ServerEngine, upto: u64) -> Result<(), EngineError> {
        let _g = self.reserving.lock().unwrap_or_else(|p| p.into_inner());
        let have = self.reserved.load(Ordering::SeqCst);
        if upto < have {
            return Ok(());
        }
        let end = upto + STEP;
        engine.write_batch(
            &[(keys::VERSIONS, Some(end.to_string().as_bytes()))],
            Some(Durability::Sync),
        )?;
        self.reserved.store(end, Ordering::SeqCst);
        Ok(())
    }

    /// A version no key has had. Once per [`STEP`], it waits for a
    /// durable write.
    pub fn next(&self, engine: &ServerEngine) -> Result<u64, EngineError> {
        let v = self.next.fetch_add(1, Ordering::SeqCst);
        if v >= self.reserved.load(Ordering::SeqCst) {
            self.reserve(engine, v)?;
        }
        Ok(v)
    }
}

pub struct Clock {
    shown: AtomicU64,
}

/// The system's time in milliseconds since the epoch.
fn system_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Clock {
    /// Never behind the time the store last recorded.
    pub fn open(engine: &ServerEngine) -> Result<Clock, EngineError> {
        Ok(Clock {
            shown: AtomicU64::new(number(engine.get(keys::CLOCK)?)),
        })
    }

    /// Now, in milliseconds since the epoch.
    pub fn now(&self) -> u64 {
        let sys = system_ms();
        self.shown.fetch_max(sys, Ordering::SeqCst).max(sys)
    }
}
