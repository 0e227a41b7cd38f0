//! Keyspace notifications, as Redis gives them: when
//! `notify-keyspace-events` enables an event's class, a command that
//! changes a key publishes `__keyspace@0__:<key> <event>` (class `K`) and
//! `__keyevent@0__:<event> <key>` (class `E`) to the ordinary pub/sub
//! channels. The events and their names are Redis's, command by command.
//!
//! Like any message, a notification waits for the writes of the command
//! that made it ([`super::shard::pubsub`]): a subscriber never hears of a
//! write a crash could lose. A write that fails tells no one.

use super::cmd::Writes;
use super::conn::Conn;
use super::keys::{self, Part};
use super::shard::{Deps, Shard};

/// `K`: `__keyspace@0__:<key>` channels.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: `__keyevent@0__:<event>` channels.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: DEL, EXPIRE, RENAME and the other commands of no one type.
pub const GENERIC: u32 = 1 << 2;
/// `$`
pub const STRING: u32 = 1 << 3;
/// `l`
pub const LIST: u32 = 1 << 4;
/// `s`
pub const SET: u32 = 1 << 5;
/// `h`
pub const HASH: u32 = 1 << 6;
/// `z`
pub const ZSET: u32 = 1 << 7;
/// `x`: a key deleted because its time was up.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key evicted (Stria never evicts; the class is accepted).
pub const EVICTED: u32 = 1 << 9;
/// `t`
pub const STREAM: u32 = 1 << 10;
/// `m`: a read of a key that does not exist (not part of `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: modules' events (Stria has no modules; the class is accepted).
pub const MODULE: u32 = 1 << 13;
/// `n`: a key created.
pub const NEW: u32 = 1 << 14;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The classes after `A`, in the order Redis writes them.
const CLASSES: &[(u8, u32)] = &[
    (b'g', GENERIC),
    (b'$', STRING),
    (b'l', LIST),
    (b's', SET),
    (b'h', HASH),
    (b'z', ZSET),
    (b'x', EXPIRED),
    (b'e', EVICTED),
    (b't', STREAM),
    (b'd', MODULE),
    (b'n', NEW),
];

/// The flags a `notify-keyspace-events` value sets; `None` for a
/// character that names no class.
pub fn parse(value: &[u8]) -> Option<u32> {
    value.iter().try_fold(0, |flags, &c| {
        let f = match c {
            b'A' => ALL,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b'm' => KEY_MISS,
            _ => CLASSES.iter().find(|(n, _)| *n == c)?.1,
        };
        Some(flags | f)
    })
}

/// `flags` as CONFIG GET gives them: `A` for all the classes it stands
/// for, then `K`, `E` and `m`.
pub fn format(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
        if flags & NEW != 0 {
            s.push('n');
        }
    } else {
        for (c, f) in CLASSES {
            if flags & f != 0 {
                s.push(*c as char);
            }
        }
    }
    for (c, f) in [('K', KEYSPACE), ('E', KEYEVENT), ('m', KEY_MISS)] {
        if flags & f != 0 {
            s.push(c);
        }
    }
    s
}

/// Publishes event `event` of `class` on `key` if `flags` enable it, to
/// wait for `deps`.
pub fn publish<'a>(
    shard: &Shard<'a>,
    flags: u32,
    class: u32,
    event: &str,
    key: &[u8],
    deps: &Deps<'a>,
) {
    if flags & class == 0 {
        return;
    }
    let mut p = shard.pubsub();
    if flags & KEYSPACE != 0 {
        let mut channel = b"__keyspace@0__:".to_vec();
        channel.extend_from_slice(key);
        p.publish(false, &channel, event.as_bytes(), deps);
    }
    if flags & KEYEVENT != 0 {
        let channel = format!("__keyevent@0__:{event}");
        p.publish(false, channel.as_bytes(), key, deps);
    }
}

impl<'a> Conn<'a> {
    /// Whether events of `class` are published: a command that must read
    /// to know of an event asks first.
    pub(crate) fn notifies(&self, class: u32) -> bool {
        let flags = self.shared.settings.notify_flags();
        flags & class != 0 && flags & (KEYSPACE | KEYEVENT) != 0
    }

    /// Publishes event `event` of `class` on `key`, if enabled, to wait
    /// for what the command has read and written so far.
    pub(crate) fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        let flags = self.shared.settings.notify_flags();
        publish(&self.shard, flags, class, event, key, &self.deps);
    }

    /// The keys that `writes` create (a metadata write of a key that does
    /// not exist now), for their `new` events; read only when enabled.
    pub(crate) fn created(&mut self, writes: &Writes) -> Vec<Vec<u8>> {
        if !self.notifies(NEW) {
            return Vec::new();
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        for (k, v) in writes {
            if v.is_none() {
                continue;
            }
            let Some((key, Part::Meta)) = keys::decode(k) else {
                continue;
            };
            if !out.contains(&key) && matches!(self.lookup(&key), Ok(None)) {
                out.push(key);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::cmd::tests::{conn_on, run_command, shared_on, words};
    use crate::server::metrics::testing;
    use crate::server::resp::Reply;
    use crate::server::shard::pubsub::Kind;

    /// A notification tells of a write: it waits for that write as the
    /// writer's reply does, and a subscriber gets nothing a crash could
    /// lose.
    #[test]
    fn a_notification_waits_for_the_write_it_tells_of() {
        let devs = testing::sim_devices(&testing::model(3));
        let shared = shared_on(&devs).unwrap();
        let (shard, mut conn) = conn_on(&shared, 1);
        shared
            .settings
            .set(&[b"notify-keyspace-events".to_vec(), b"KEA".to_vec()])
            .unwrap();
        shard.pubsub().subscribe(Kind::Pattern, b"*", 7);
        let (r, deps) = run_command(&mut conn, &words("SET foo bar"));
        assert_eq!(r, Reply::ok());
        let out = shard.pubsub().take_outbox();
        assert_eq!(out.len(), 2);
        for (token, msg, waits) in &out {
            assert_eq!(*token, 7);
            assert!(
                !waits.is_empty() && !waits.ready(),
                "{msg:?} waits for nothing"
            );
        }
        assert!(!deps.ready());
        // A plain PUBLISH of nothing read waits for nothing.
        run_command(&mut conn, &words("PUBLISH __keyspace@0__:foo hello"));
        let out = shard.pubsub().take_outbox();
        assert_eq!(out.len(), 1);
        assert!(out[0].2.is_empty());
        // `n`: a key created, once.
        shared
            .settings
            .set(&[b"notify-keyspace-events".to_vec(), b"En".to_vec()])
            .unwrap();
        run_command(&mut conn, &words("SET fresh 1"));
        run_command(&mut conn, &words("SET fresh 2"));
        let out = shard.pubsub().take_outbox();
        assert_eq!(
            out.len(),
            1,
            "{:?}",
            out.iter().map(|m| &m.1).collect::<Vec<_>>()
        );
        // A read of nothing changes nothing, and tells nothing at `KEA`.
        run_command(&mut conn, &words("GET missing"));
        assert!(shard.pubsub().take_outbox().is_empty());
        std::mem::forget(conn);
        std::mem::forget(shard);
    }

    #[test]
    fn flags_read_and_print_as_redis_does() {
        assert_eq!(parse(b""), Some(0));
        assert_eq!(parse(b"KEA").map(format).as_deref(), Some("AKE"));
        assert_eq!(parse(b"gKE").map(format).as_deref(), Some("gKE"));
        assert_eq!(
            parse(b"$lshzxeKE").map(format).as_deref(),
            Some("$lshzxeKE")
        );
        assert_eq!(parse(b"KA").map(format).as_deref(), Some("AK"));
        assert_eq!(parse(b"Em").map(format).as_deref(), Some("Em"));
        assert_eq!(parse(b"KEl?"), None);
        assert_eq!(parse(b"a"), None);
    }
}
