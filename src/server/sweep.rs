//! The sweep behind FLUSHALL: FLUSHALL only raises the version floor
//! (one write, O(1)); the sweep then walks the key space on the shard's
//! thread, a couple of milliseconds `hz` times a second, and deletes the
//! metadata of every key below the floor. Those deletes make the keys'
//! elements dead to the compaction filter, so compaction reclaims them.
//! Commands treat keys below the floor as absent all along; the sweep
//! only gives their space back and keeps walks (SCAN, KEYS, DBSIZE) from
//! stepping over them.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::keys::{self, Part};
use super::meta::{Meta, Type};
use super::shard::{Deps, Shard};
use super::Shared;
use crate::engine::EngineError;

/// How long one step of the sweep runs at most.
const BUDGET: Duration = Duration::from_millis(2);

/// Engine keys read at a time.
const STEP: usize = 256;

/// Where the metadata of the first Redis key can be.
const FIRST: &[u8] = &[0, 0xff];

/// How far the sweep has come, for which floor.
#[derive(Default)]
pub struct Sweep {
    /// The floor swept for, and the engine key to go on from (`None`:
    /// done).
    at: Option<(u64, Option<Vec<u8>>)>,
    next: Option<Instant>,
}

impl Sweep {
    /// Runs a step if one is due and there is something to sweep.
    pub fn run<'a>(&mut self, shared: &Shared, shard: &Shard<'a>) {
        let floor = shared.floor.load(Ordering::SeqCst);
        if floor == 0 {
            return;
        }
        let from = match &self.at {
            Some((f, from)) if *f == floor => match from {
                Some(k) => k.clone(),
                None => return,
            },
            // A new floor: from the start.
            _ => FIRST.to_vec(),
        };
        let now = Instant::now();
        if self.next.is_some_and(|t| now < t) {
            return;
        }
        self.next = Some(now + Duration::from_millis(1000 / shared.settings.hz().max(1)));
        match step(shared, shard, floor, from) {
            Ok(next) => self.at = Some((floor, next)),
            Err(e) => tracing::warn!("sweep after FLUSHALL: {e}"),
        }
    }
}

/// Deletes the metadata below `floor` from `from` on, for up to
/// [`BUDGET`]: where to go on from, `None` at the end.
fn step<'a>(
    shared: &Shared,
    shard: &Shard<'a>,
    floor: u64,
    mut from: Vec<u8>,
) -> Result<Option<Vec<u8>>, EngineError> {
    let started = Instant::now();
    let level = shared.settings.durability();
    // Nothing waits for these deletes.
    let mut deps = Deps::default();
    while started.elapsed() < BUDGET {
        let batch = shard.scan(&from, None, STEP, &mut deps)?;
        let Some((last, _)) = batch.last() else {
            return Ok(None);
        };
        let mut next = last.clone();
        next.push(0);
        let mut writes = Vec::new();
        for (k, v) in batch {
            let Some((user, part)) = keys::decode(&k) else {
                continue;
            };
            if part != Part::Meta {
                // Elements: their metadata's fate decides theirs.
                next = keys::after(&user);
                break;
            }
            let m = Meta::decode(v);
            if m.as_ref().is_some_and(|m| m.version < floor) {
                writes.push((k, None));
            }
            if m.is_some_and(|m| m.kind != Type::String) {
                next = keys::after(&user);
                break;
            }
        }
        shard.write(level, writes, &mut deps);
        from = next;
    }
    Ok(Some(from))
}
