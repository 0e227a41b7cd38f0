//! XINFO STREAM's groups, XINFO GROUPS and XINFO CONSUMERS, and a
//! group's lag as Redis reckons it.

use super::stream_groups::{decode_group, Group};
use super::streams::format_id;
use super::Res;
use crate::server::conn::Conn;
use crate::server::keys::{self, GROUP};
use crate::server::meta::{Id, Meta, StreamState};
use crate::server::resp::Reply;

impl<'a> Conn<'a> {
    pub(super) fn xinfo(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let sub = args[1].to_ascii_lowercase();
        match (sub.as_slice(), args.len()) {
            (b"stream", n) if n >= 3 => self.xinfo_stream(args),
            (b"groups", 3) => {
                let key = &args[2];
                let m = self
                    .stream_meta(key)?
                    .ok_or_else(|| Reply::err("no such key"))?;
                let groups = self.group_list(key, &m)?;
                let st = m.stream();
                let now = self.now();
                let mut out = Vec::new();
                for (name, g) in groups {
                    let consumers = self.consumers(key, &m, &name)?.len();
                    let pending = self.pending(key, &m, &name, (0, 0), usize::MAX)?.len();
                    let _ = now;
                    out.push(Reply::Map(vec![
                        (Reply::bulk("name"), Reply::Bulk(name)),
                        (Reply::bulk("consumers"), Reply::Int(consumers as i64)),
                        (Reply::bulk("pending"), Reply::Int(pending as i64)),
                        (
                            Reply::bulk("last-delivered-id"),
                            Reply::bulk(format_id(g.last)),
                        ),
                        (
                            Reply::bulk("entries-read"),
                            if g.read >= 0 {
                                Reply::Int(g.read)
                            } else {
                                Reply::Nil
                            },
                        ),
                        (Reply::bulk("lag"), lag(&st, g)),
                    ]));
                }
                Ok(Reply::Array(out))
            }
            (b"consumers", 4) => {
                let (key, group) = (&args[2], &args[3]);
                let (m, _) = self.stream_and_group(key, group, "")?;
                let now = self.now();
                let pend = self.pending(key, &m, group, (0, 0), usize::MAX)?;
                let mut out = Vec::new();
                for (c, seen, active) in self.consumers(key, &m, group)? {
                    let n = pend.iter().filter(|p| p.consumer == c).count();
                    out.push(Reply::Map(vec![
                        (Reply::bulk("name"), Reply::Bulk(c)),
                        (Reply::bulk("pending"), Reply::Int(n as i64)),
                        (
                            Reply::bulk("idle"),
                            Reply::Int(now.saturating_sub(seen) as i64),
                        ),
                        (
                            Reply::bulk("inactive"),
                            Reply::Int(if active == 0 {
                                -1
                            } else {
                                now.saturating_sub(active) as i64
                            }),
                        ),
                    ]));
                }
                Ok(Reply::Array(out))
            }
            (b"help", n) if n > 2 => Err(Reply::err(
                "wrong number of arguments for 'xinfo|help' command",
            )),
            (b"help", 2) => Ok(crate::server::help::help(
                "XINFO",
                &[
                    "CONSUMERS <key> <groupname>",
                    "GROUPS <key>",
                    "STREAM <key> [FULL [COUNT <count>]]",
                ],
            )),
            _ => Err(Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
                String::from_utf8_lossy(&args[1])
            ))),
        }
    }

    /// The groups of a stream, by name.
    fn group_list(&mut self, key: &[u8], m: &Meta) -> Res<Vec<(Vec<u8>, Group)>> {
        let prefix = keys::sub(key, m.version, GROUP, 0);
        let end = keys::sub_end(key, m.version, GROUP);
        let got = self.scan_raw(&prefix, Some(&end), usize::MAX)?;
        Ok(got
            .into_iter()
            .filter_map(|(k, v)| Some((k[prefix.len()..].to_vec(), decode_group(&v)?)))
            .collect())
    }

    /// XINFO STREAM FULL's groups.
    pub(super) fn xinfo_groups_full(&mut self, key: &[u8], m: &Meta, count: usize) -> Res<Reply> {
        let st = m.stream();
        let now = self.now();
        let mut out = Vec::new();
        for (name, g) in self.group_list(key, m)? {
            let pend = self.pending(key, m, &name, (0, 0), usize::MAX)?;
            let pel: Vec<Reply> = pend
                .iter()
                .take(count)
                .map(|p| {
                    Reply::Array(vec![
                        Reply::bulk(format_id(p.id)),
                        Reply::Bulk(p.consumer.clone()),
                        Reply::Int(p.time as i64),
                        Reply::Int(p.count as i64),
                    ])
                })
                .collect();
            let mut consumers = Vec::new();
            for (c, seen, active) in self.consumers(key, m, &name)? {
                let mine: Vec<Reply> = pend
                    .iter()
                    .filter(|p| p.consumer == c)
                    .take(count)
                    .map(|p| {
                        Reply::Array(vec![
                            Reply::bulk(format_id(p.id)),
                            Reply::Int(p.time as i64),
                            Reply::Int(p.count as i64),
                        ])
                    })
                    .collect();
                let _ = now;
                consumers.push(Reply::Map(vec![
                    (Reply::bulk("name"), Reply::Bulk(c.clone())),
                    (Reply::bulk("seen-time"), Reply::Int(seen as i64)),
                    (Reply::bulk("active-time"), Reply::Int(active as i64)),
                    (
                        Reply::bulk("pel-count"),
                        Reply::Int(pend.iter().filter(|p| p.consumer == c).count() as i64),
                    ),
                    (Reply::bulk("pending"), Reply::Array(mine)),
                ]));
            }
            out.push(Reply::Map(vec![
                (Reply::bulk("name"), Reply::Bulk(name)),
                (
                    Reply::bulk("last-delivered-id"),
                    Reply::bulk(format_id(g.last)),
                ),
                (
                    Reply::bulk("entries-read"),
                    if g.read >= 0 {
                        Reply::Int(g.read)
                    } else {
                        Reply::Nil
                    },
                ),
                (Reply::bulk("lag"), lag(&st, g)),
                (Reply::bulk("pel-count"), Reply::Int(pend.len() as i64)),
                (Reply::bulk("pending"), Reply::Array(pel)),
                (Reply::bulk("consumers"), Reply::Array(consumers)),
            ]));
        }
        Ok(Reply::Array(out))
    }
}

/// Whether an entry from `start` on was deleted (as Redis asks).
pub(super) fn tombstones_from(st: &StreamState, start: Id) -> bool {
    st.length > 0 && st.max_deleted != (0, 0) && start <= st.max_deleted
}

/// How many entries were added up to `id`, when it can be known without
/// counting (Redis's estimate of a group's read counter); -1 when not.
pub(super) fn estimate_read(st: &StreamState, id: Id) -> i64 {
    if st.added == 0 {
        return 0;
    }
    if st.length == 0 && id <= st.last {
        return st.added as i64;
    }
    if id == st.last {
        return st.added as i64;
    }
    if id > st.last {
        return -1;
    }
    if st.max_deleted == (0, 0) || st.max_deleted < st.first {
        if id < st.first {
            return (st.added - st.length) as i64;
        }
        if id == st.first {
            return (st.added - st.length + 1) as i64;
        }
    }
    -1
}

/// A group's lag: entries added that it has not read, when known.
fn lag(st: &StreamState, g: Group) -> Reply {
    if st.added == 0 {
        return Reply::Int(0);
    }
    if g.read >= 0 && !tombstones_from(st, g.last) {
        return Reply::Int(st.added as i64 - g.read);
    }
    match estimate_read(st, g.last) {
        -1 => Reply::Nil,
        read => Reply::Int(st.added as i64 - read),
    }
}
