//! Pub/sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE,
//! SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB, as a single-node Redis
//! answers them (shard channels are channels of their own namespace).
//! PUBLISH queues its messages on the shard ([`super::shard::pubsub`]);
//! the event loop hands them to the subscribers right after the command,
//! so a subscriber gets them after the reply to anything it ran before,
//! and a client publishing to itself gets the count first. In RESP2 a
//! subscribed connection may only (un)subscribe, PING, QUIT and RESET.

use super::conn::Conn;
use super::resp::Reply;
use super::shard::pubsub::Kind;

/// What a connection is subscribed to, in the order it subscribed.
#[derive(Default)]
pub struct Subscriptions {
    channels: Vec<Vec<u8>>,
    patterns: Vec<Vec<u8>>,
    shard: Vec<Vec<u8>>,
}

impl Subscriptions {
    fn of(&mut self, kind: Kind) -> &mut Vec<Vec<u8>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// The count a (un)subscribe reply carries: shard channels count
    /// apart, as in Redis.
    fn count(&self, kind: Kind) -> i64 {
        match kind {
            Kind::Shard => self.shard.len() as i64,
            _ => (self.channels.len() + self.patterns.len()) as i64,
        }
    }

    pub fn any(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty())
    }
}

/// Commands a subscribed RESP2 connection may run.
const IN_SUBSCRIBED: &[&str] = &[
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "ping",
    "quit",
    "reset",
];

fn names(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::Channel => ("subscribe", "unsubscribe"),
        Kind::Pattern => ("psubscribe", "punsubscribe"),
        Kind::Shard => ("ssubscribe", "sunsubscribe"),
    }
}

impl<'a> Conn<'a> {
    /// The refusal of a command a subscribed RESP2 connection may not run.
    pub fn subscribed_refusal(&self, name: &str) -> Option<Reply> {
        if self.proto >= 3 || !self.subs.any() || IN_SUBSCRIBED.contains(&name) {
            return None;
        }
        Some(Reply::err(format!(
            "Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        )))
    }

    /// PING of a subscribed RESP2 connection: `["pong", message]`.
    pub fn subscribed_ping(&self, args: &[Vec<u8>]) -> Option<Reply> {
        if self.proto >= 3 || !self.subs.any() || args.len() > 2 {
            return None;
        }
        let msg = args.get(1).cloned().unwrap_or_default();
        Some(Reply::Array(vec![Reply::bulk("pong"), Reply::Bulk(msg)]))
    }

    pub fn subscribe(&mut self, kind: Kind, names_given: &[Vec<u8>]) -> Reply {
        let (verb, _) = names(kind);
        let mut out = Vec::new();
        for n in names_given {
            if !self.subs.of(kind).contains(n) {
                self.subs.of(kind).push(n.clone());
                self.shard.pubsub().subscribe(kind, n, self.token);
            }
            out.push(Reply::Push(vec![
                Reply::bulk(verb),
                Reply::Bulk(n.clone()),
                Reply::Int(self.subs.count(kind)),
            ]));
        }
        Reply::Seq(out)
    }

    /// Unsubscribes from `given`, or from everything of `kind` if none.
    pub fn unsubscribe(&mut self, kind: Kind, given: &[Vec<u8>]) -> Reply {
        let (_, verb) = names(kind);
        let which: Vec<Vec<u8>> = if given.is_empty() {
            self.subs.of(kind).clone()
        } else {
            given.to_vec()
        };
        if which.is_empty() {
            return Reply::Push(vec![
                Reply::bulk(verb),
                Reply::Nil,
                Reply::Int(self.subs.count(kind)),
            ]);
        }
        let mut out = Vec::new();
        for n in which {
            let mine = self.subs.of(kind);
            if let Some(i) = mine.iter().position(|c| *c == n) {
                mine.remove(i);
                self.shard.pubsub().unsubscribe(kind, &n, self.token);
            }
            out.push(Reply::Push(vec![
                Reply::bulk(verb),
                Reply::Bulk(n),
                Reply::Int(self.subs.count(kind)),
            ]));
        }
        Reply::Seq(out)
    }

    /// Leaves every subscription (RESET, a connection that goes).
    pub fn unsubscribe_all(&mut self) {
        if !self.subs.any() {
            return;
        }
        let subs = std::mem::take(&mut self.subs);
        let mut p = self.shard.pubsub();
        for (kind, list) in [
            (Kind::Channel, subs.channels),
            (Kind::Pattern, subs.patterns),
            (Kind::Shard, subs.shard),
        ] {
            for n in list {
                p.unsubscribe(kind, &n, self.token);
            }
        }
    }

    pub fn publish(&mut self, shard: bool, channel: &[u8], message: &[u8]) -> Reply {
        let n = self
            .shard
            .pubsub()
            .publish(shard, channel, message, &self.deps);
        Reply::Int(n as i64)
    }

    pub fn pubsub_command(&mut self, args: &[Vec<u8>]) -> Reply {
        let sub = args[0].to_ascii_lowercase();
        let p = self.shard.pubsub();
        match (sub.as_slice(), args.len()) {
            (b"channels" | b"shardchannels", 1 | 2) => {
                let shard = sub == b"shardchannels";
                let pattern = args.get(1).map(Vec::as_slice);
                Reply::Array(
                    p.channels(shard, pattern)
                        .into_iter()
                        .map(Reply::Bulk)
                        .collect(),
                )
            }
            (b"numsub" | b"shardnumsub", _) => {
                let shard = sub == b"shardnumsub";
                Reply::Map(
                    args[1..]
                        .iter()
                        .map(|c| {
                            (
                                Reply::Bulk(c.clone()),
                                Reply::Int(p.numsub(shard, c) as i64),
                            )
                        })
                        .collect(),
                )
            }
            (b"numpat", 1) => Reply::Int(p.numpat() as i64),
            (b"help", 1) => crate::server::help::help(
"PUBSUB",
&[
"CHANNELS [<pattern>]",
"    Return the currently active channels matching a <pattern> (default: '*').",
"NUMPAT",
"    Return number of subscriptions to patterns.",
"NUMSUB [<channel> ...]",
"    Return the number of subscribers for the specified channels, excluding",
"    pattern subscriptions(default: no channels).",
"SHARDCHANNELS [<pattern>]",
"    Return the currently active shard level channels matching a <pattern> (default: '*').",
"SHARDNUMSUB [<shardchannel> ...]",
"    Return the number of subscribers for the specified shard level channel(s)",
],
),
            _ => Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
                super::command::show(&args[0])
            )),
        }
    }
}
