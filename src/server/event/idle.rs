//! What a shard's event loop does with a moment nobody waits on: folds
//! the memstores' new keys into their B-trees ahead of the range reads
//! that would otherwise do it while clients wait
//! ([`crate::engine::Engine::fold_ahead`]).
//!
//! The loop is idle when it has no request to run, no reply waiting for
//! its writes, and nothing for the log to do; once it has been so for
//! [`QUIET`], it folds a chunk, polls its sockets without sleeping, and
//! folds the next chunk if nothing came. A request that arrives
//! meanwhile waits for one chunk at most. A busy server never gets here,
//! so the folding costs its writes nothing; a server that idles spends a
//! few hundred milliseconds of a core per bulk load.

use std::time::Duration;

use crate::server::ServerEngine;

/// How long the loop must have been idle before it folds.
const QUIET: Duration = Duration::from_millis(1);

/// Keys a chunk folds: 0.6 ms of work on average, 2.4 ms at most, in
/// `cargo bench --bench memstore -- --members 400000 --ahead 1024`.
const CHUNK: usize = 1024;

/// Whether there may be something to fold, and how long the next idle
/// poll may sleep before folding.
pub struct IdleFold {
    more: bool,
    wait: Duration,
    /// The poll under way was given `wait` to fold after.
    armed: bool,
}

impl Default for IdleFold {
    fn default() -> IdleFold {
        IdleFold {
            more: true,
            wait: QUIET,
            armed: false,
        }
    }
}

impl IdleFold {
    /// The timeout of the next poll: `timeout`, the loop's own (`None`
    /// when it is idle: nothing to run, nothing owed), with `due`, when
    /// a timer is due, and with how long to wait before folding if the
    /// loop is idle and there may be something to fold.
    pub fn timeout(&mut self, timeout: Option<Duration>, due: Duration) -> Duration {
        self.armed = timeout.is_none() && self.more;
        let t = timeout.map_or(due, |t| t.min(due));
        if self.armed {
            t.min(self.wait)
        } else {
            t
        }
    }

    /// After a poll: folds a chunk if the loop was idle and the poll
    /// brought nothing (`quiet`).
    pub fn after_poll(&mut self, engine: &ServerEngine, quiet: bool) {
        if !quiet {
            // Whatever came may write.
            self.more = true;
            self.wait = QUIET;
            return;
        }
        if !self.armed {
            return;
        }
        let done = engine.fold_ahead(CHUNK);
        self.more = done.more;
        // Straight on while there is work and nothing else; a memstore
        // another shard holds is tried again after a quiet moment.
        self.wait = if done.folded > 0 {
            Duration::ZERO
        } else {
            QUIET
        };
    }
}
