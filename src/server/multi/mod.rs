//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! After MULTI a connection's commands are queued (`QUEUED`); one that
//! fails before it would run (unknown, wrong arity, not allowed in a
//! transaction) is refused and makes EXEC fail with `EXECABORT`. EXEC
//! runs the queue on the shard in one go, so no other command sees a part
//! of it or runs between its commands, and the writes of all of them are
//! one WAL group ([`super::shard::Shard::begin_atomic`]): after a crash
//! the log holds all of them or none. Its reply, the array of each
//! command's, waits for every write any of them made or read. A runtime
//! error of one command is its reply; the others run, as in Redis.
//!
//! WATCH remembers how often each key had been written
//! ([`super::shard::watch`]); EXEC is aborted (a null reply) when any
//! watched key was written, deleted or expired since, FLUSHALL included
//! (for keys that existed), or is past its expiry now.

use std::time::Instant;

use super::conn::{Conn, Outcome};
use super::keys;
use super::meta::Meta;
use super::resp::Reply;
use super::table::Spec;

/// A transaction being queued.
#[derive(Default)]
pub struct Tx {
    commands: Vec<(&'static Spec, Vec<Vec<u8>>)>,
    /// A command was refused while queuing: EXEC aborts.
    failed: bool,
}

/// A key the connection watches.
pub struct Watched {
    key: Vec<u8>,
    /// `esc(key) 00 01`: what the shard counts its writes by.
    owner: Vec<u8>,
    /// Its count of writes when watched.
    touches: u64,
}

/// Commands refused inside a transaction (they cannot be undone or held).
const NOT_IN_MULTI: &[&str] = &["save", "shutdown", "bgsave", "waitaof", "monitor"];

/// Commands that run at once inside a transaction rather than queue.
const RUN_IN_MULTI: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

impl<'a> Conn<'a> {
    pub fn in_multi(&self) -> bool {
        self.tx.is_some()
    }

    /// Whether a command queued in the transaction has `flag`.
    pub fn queued_flag(&self, flag: &str) -> bool {
        self.tx
            .as_ref()
            .is_some_and(|tx| tx.commands.iter().any(|(s, _)| s.flags.contains(&flag)))
    }

    /// `spec` refused before it runs, with error `r`: as [`Conn::reject`],
    /// and a refused EXEC discards its transaction, as Redis does
    /// (`EXECABORT Transaction discarded because of: ...`).
    pub fn refuse(&mut self, spec: &Spec, r: Reply) -> Reply {
        match (&r, spec.name) {
            (Reply::Error(why), "exec") if self.in_multi() => {
                let why = format!("EXECABORT Transaction discarded because of: {why}");
                self.end_multi();
                Reply::Error(why)
            }
            _ => self.reject(r),
        }
    }

    /// An error found before a command runs: in a transaction, it aborts
    /// the EXEC.
    pub fn reject(&mut self, r: Reply) -> Reply {
        if let Some(tx) = self.tx.as_mut() {
            tx.failed = true;
        }
        r
    }

    /// Queues a command of a transaction; `None` for one that runs now.
    pub fn queue(&mut self, spec: &'static Spec, args: &[Vec<u8>]) -> Option<Reply> {
        if RUN_IN_MULTI.contains(&spec.name) {
            return None;
        }
        if NOT_IN_MULTI.contains(&spec.name) {
            return Some(self.reject(Reply::err("Command not allowed inside a transaction")));
        }
        let tx = self.tx.as_mut().expect("in a transaction");
        tx.commands.push((spec, args.to_vec()));
        Some(Reply::Status("QUEUED"))
    }

    pub fn multi(&mut self) -> Reply {
        if self.tx.is_some() {
            return Reply::err("MULTI calls can not be nested");
        }
        self.tx = Some(Tx::default());
        Reply::ok()
    }

    pub fn discard(&mut self) -> Reply {
        if self.tx.is_none() {
            return Reply::err("DISCARD without MULTI");
        }
        self.end_multi();
        Reply::ok()
    }

    /// Takes over what a busy script's hook did to the transaction: began
    /// one (MULTI), ended it (EXEC, DISCARD), or refused a command in it
    /// (`failed`: EXEC aborts).
    pub fn take_busy_tx(&mut self, multi: bool, failed: bool) {
        if !multi {
            if self.tx.is_some() {
                self.end_multi();
            }
            return;
        }
        let tx = self.tx.get_or_insert_with(Tx::default);
        tx.failed |= failed;
    }

    /// Forgets the transaction and every watched key (DISCARD, EXEC, RESET).
    pub fn end_multi(&mut self) {
        self.tx = None;
        self.unwatch_all();
    }

    pub fn exec(&mut self) -> Reply {
        let Some(tx) = self.tx.take() else {
            return Reply::err("EXEC without MULTI");
        };
        if tx.failed {
            self.end_multi();
            return Reply::Error(
                "EXECABORT Transaction discarded because of previous errors.".into(),
            );
        }
        let broken = self.watch_broken();
        self.end_multi();
        match broken {
            Ok(false) => {}
            Ok(true) => return Reply::NilArray,
            Err(r) => return r,
        }
        self.shard.begin_atomic();
        let mut replies = Vec::with_capacity(tx.commands.len());
        for (spec, args) in tx.commands {
            let started = Instant::now();
            let r = match self.run(spec, args) {
                Outcome::Reply(r) | Outcome::Close(r) => r,
                Outcome::Stop => Reply::err("the server is stopping"),
                // Nothing blocks inside a transaction.
                Outcome::Block => Reply::NilArray,
            };
            self.count(spec.name, started, &r);
            replies.push(r);
        }
        self.shard.end_atomic();
        Reply::Array(replies)
    }

    pub fn watch(&mut self, keys: &[Vec<u8>]) -> Reply {
        if self.tx.is_some() {
            return Reply::err("WATCH inside MULTI is not allowed");
        }
        for key in keys {
            if self.watching.iter().any(|w| &w.key == key) {
                continue;
            }
            // An expired key goes first (its delete is not a change the
            // watcher could have seen).
            if let Err(r) = self.lookup(key) {
                return r;
            }
            let (owner, touches) = self.shard.watches().watch(key);
            self.watching.push(Watched {
                key: key.clone(),
                owner,
                touches,
            });
        }
        Reply::ok()
    }

    pub fn unwatch_all(&mut self) {
        if self.watching.is_empty() {
            return;
        }
        let mut w = self.shard.watches();
        for k in self.watching.drain(..) {
            w.unwatch(&k.owner);
        }
    }

    /// Whether a watched key was written since it was watched, or is past
    /// its expiry now (and so gone, though not yet deleted).
    fn watch_broken(&mut self) -> Result<bool, Reply> {
        if self.watching.is_empty() {
            return Ok(false);
        }
        let now = self.shared.clock.now();
        for i in 0..self.watching.len() {
            let w = &self.watching[i];
            if self.shard.watches().touches(&w.owner) != w.touches {
                return Ok(true);
            }
            let meta = keys::meta(&w.key);
            let raw = self.shard.get(&meta, &mut self.deps).map_err(Reply::err)?;
            if raw
                .and_then(Meta::decode)
                .is_some_and(|m| m.expire_at.is_some() && m.expired(now))
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// FLUSHALL touches every watched key that exists before it.
    pub fn touch_watched_existing(&mut self) -> Result<(), Reply> {
        let watched = self.shard.watches().keys();
        for (key, owner) in watched {
            if self.lookup(&key)?.is_some() {
                self.shard.watches().touch_owner(&owner);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod crash_tests;
