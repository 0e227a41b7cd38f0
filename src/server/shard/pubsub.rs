//! Who is subscribed to what (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE), by
//! connection token, and the messages PUBLISH made that the event loop
//! has yet to hand to their subscribers. Messages are never logged: a
//! subscriber gets what is published while it is connected, as in Redis.
//! A message waits, like a reply, for the writes its publisher had read
//! or made (a script that publishes what it wrote, a keyspace
//! notification): no subscriber learns of a write a crash could lose.

use std::collections::HashMap;

use crate::hash::BytesHash;

use super::super::glob;
use super::super::resp::Reply;
use super::Deps;

/// The three kinds of subscription, each its own namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

type Subscribers = HashMap<Vec<u8>, Vec<usize>, BytesHash>;

/// A message for a connection and the writes it waits for.
pub type Message<'a> = (usize, Reply, Deps<'a>);

/// The subscriptions of a shard's connections.
#[derive(Default)]
pub struct PubSub<'a> {
    channels: Subscribers,
    patterns: Subscribers,
    shard_channels: Subscribers,
    /// Connections in MONITOR, in the order they asked.
    monitors: Vec<usize>,
    /// Messages for connections, in the order published.
    outbox: Vec<Message<'a>>,
}

impl<'a> PubSub<'a> {
    fn of(&mut self, kind: Kind) -> &mut Subscribers {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    pub fn subscribe(&mut self, kind: Kind, name: &[u8], token: usize) {
        let subs = self.of(kind).entry(name.to_vec()).or_default();
        if !subs.contains(&token) {
            subs.push(token);
        }
    }

    pub fn unsubscribe(&mut self, kind: Kind, name: &[u8], token: usize) {
        let map = self.of(kind);
        if let Some(subs) = map.get_mut(name) {
            subs.retain(|&t| t != token);
            if subs.is_empty() {
                map.remove(name);
            }
        }
    }

    /// Queues `message` for every subscriber of `channel` (and, unless a
    /// shard channel, of every matching pattern), each to wait for
    /// `deps`: how many get it.
    pub fn publish(
        &mut self,
        shard: bool,
        channel: &[u8],
        message: &[u8],
        deps: &Deps<'a>,
    ) -> usize {
        let mut n = 0;
        let (kind, subs) = if shard {
            ("smessage", &self.shard_channels)
        } else {
            ("message", &self.channels)
        };
        if let Some(subs) = subs.get(channel) {
            // Encoded once, shared by every subscriber's reply.
            let msg = Reply::shared_push(&[kind.as_bytes(), channel, message]);
            for &t in subs {
                self.outbox.push((t, msg.clone(), deps.clone()));
                n += 1;
            }
        }
        if !shard {
            for (p, subs) in &self.patterns {
                if !glob::matches(p, channel) {
                    continue;
                }
                let msg = Reply::shared_push(&[b"pmessage", p, channel, message]);
                for &t in subs {
                    self.outbox.push((t, msg.clone(), deps.clone()));
                    n += 1;
                }
            }
        }
        n
    }

    /// MONITOR: `token` gets every command run from now on.
    pub fn monitor(&mut self, token: usize) {
        if !self.monitors.contains(&token) {
            self.monitors.push(token);
        }
    }

    pub fn unmonitor(&mut self, token: usize) {
        self.monitors.retain(|&t| t != token);
    }

    pub fn has_monitors(&self) -> bool {
        !self.monitors.is_empty()
    }

    /// A command's MONITOR line for every monitor, to wait for `deps`.
    pub fn feed(&mut self, line: &str, deps: &Deps<'a>) {
        for &t in &self.monitors {
            self.outbox
                .push((t, Reply::Simple(line.to_string()), deps.clone()));
        }
    }

    /// Whether messages wait to be handed over.
    pub fn has_outbox(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// The messages to hand over, in the order published.
    pub fn take_outbox(&mut self) -> Vec<Message<'a>> {
        std::mem::take(&mut self.outbox)
    }

    /// The channels (shard channels) with subscribers, matching `pattern`.
    pub fn channels(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let map = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        map.keys()
            .filter(|c| pattern.is_none_or(|p| glob::matches(p, c)))
            .cloned()
            .collect()
    }

    /// The subscribers of a channel (shard channel).
    pub fn numsub(&self, shard: bool, channel: &[u8]) -> usize {
        let map = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        map.get(channel).map_or(0, Vec::len)
    }

    /// Patterns with subscribers.
    pub fn numpat(&self) -> usize {
        self.patterns.len()
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    #[test]
    fn a_message_reaches_channel_and_pattern_subscribers_once_each() {
        let mut p = PubSub::default();
        p.subscribe(Kind::Channel, b"news", 1);
        p.subscribe(Kind::Channel, b"news", 1);
        p.subscribe(Kind::Pattern, b"n*", 1);
        p.subscribe(Kind::Pattern, b"x*", 2);
        p.subscribe(Kind::Shard, b"news", 3);
        let none = Deps::default();
        assert_eq!(p.publish(false, b"news", b"hi", &none), 2);
        assert_eq!(p.publish(true, b"news", b"hi", &none), 1);
        let out = p.take_outbox();
        assert_eq!(out.iter().map(|(t, ..)| *t).collect::<Vec<_>>(), [1, 1, 3]);
        assert!(!p.has_outbox());
        assert_eq!(p.numsub(false, b"news"), 1);
        assert_eq!(p.numpat(), 2);
        p.unsubscribe(Kind::Channel, b"news", 1);
        assert_eq!(p.channels(false, None), Vec::<Vec<u8>>::new());
        assert_eq!(p.channels(true, Some(b"n*")), [b"news".to_vec()]);
    }

    #[test]
    fn a_message_is_encoded_once_and_reads_as_the_push_redis_sends() {
        let mut p = PubSub::default();
        p.subscribe(Kind::Channel, b"ch", 1);
        p.subscribe(Kind::Channel, b"ch", 2);
        p.subscribe(Kind::Pattern, b"c*", 3);
        p.publish(false, b"ch", b"a\r\nb", &Deps::default());
        let out = p.take_outbox();
        let (Reply::SharedPush(_, a), Reply::SharedPush(_, b)) = (&out[0].1, &out[1].1) else {
            panic!("not shared: {:?}", out[0].1);
        };
        assert!(Rc::ptr_eq(a, b), "one encoding for both subscribers");
        let plain = |items: &[&[u8]]| Reply::Push(items.iter().map(|i| Reply::bulk(*i)).collect());
        let want = [
            plain(&[b"message", b"ch", b"a\r\nb"]),
            plain(&[b"message", b"ch", b"a\r\nb"]),
            plain(&[b"pmessage", b"c*", b"ch", b"a\r\nb"]),
        ];
        for ((_, got, _), want) in out.iter().zip(&want) {
            for proto in [2, 3] {
                let (mut g, mut w) = (Vec::new(), Vec::new());
                got.encode(&mut g, proto);
                want.encode(&mut w, proto);
                assert_eq!(String::from_utf8_lossy(&g), String::from_utf8_lossy(&w));
            }
            assert_eq!(format!("{:?}", got.unshared()), format!("{want:?}"));
        }
    }
}
