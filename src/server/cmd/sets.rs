//! Sets: a member is a sub-key under the set's version, the count in the
//! metadata, so SISMEMBER is one lookup, SCARD none beyond the metadata,
//! and deleting a set of any size one write. Members are ordered by a
//! hash of the member (4 bytes before it in the sub-key), so a seek to a
//! random point finds a member uniformly at random: SPOP and SRANDMEMBER
//! of a large set read only what they return, and what SPOP deletes is
//! spread over the set rather than piled up where every next pop would
//! have to step over it.

use crate::server::notify::{GENERIC, SET};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::Rng;

use super::{absent, integer, not_integer, syntax_error, Res, Writes};
use crate::server::conn::Conn;
use crate::server::keys::{self, MEMBER};
use crate::server::meta::{Meta, Type};
use crate::server::resp::Reply;
use crate::server::shard::draws;

/// Sets up to this size are read whole to pick members at random
/// (uniformly); larger ones are sampled by seeking to random points.
const READ_WHOLE: u64 = 1024;

/// Which of the set algebra.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The sub-key of `member` in set `key` at `version`.
pub fn member_key(key: &[u8], version: u64, member: &[u8]) -> Vec<u8> {
    let mut k = keys::sub(key, version, MEMBER, 4 + member.len());
    k.extend_from_slice(&hash4(member));
    k.extend_from_slice(member);
    k
}

fn hash4(member: &[u8]) -> [u8; 4] {
    ((xxhash_rust::xxh3::xxh3_64(member) >> 32) as u32).to_be_bytes()
}

/// A member from what follows the tag in its sub-key.
pub fn member_of(rest: &[u8]) -> &[u8] {
    rest.get(4..).unwrap_or_default()
}

fn members_reply(members: impl IntoIterator<Item = Vec<u8>>) -> Reply {
    Reply::Array(members.into_iter().map(Reply::Bulk).collect())
}

impl<'a> Conn<'a> {
    pub(super) fn sets(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "sadd" => self.sadd(&args[1], &args[2..]),
            "srem" => self.srem(&args[1], &args[2..]),
            "smembers" => self.smembers(&args[1]),
            "sismember" => self.smismember(&args[1], &args[2..], false),
            "smismember" => self.smismember(&args[1], &args[2..], true),
            "scard" => self.scard(&args[1]),
            "spop" => self.spop(args),
            "srandmember" => self.srandmember(args),
            "smove" => self.smove(&args[1], &args[2], &args[3]),
            "sinter" => self.algebra(Op::Inter, None, &args[1..]),
            "sunion" => self.algebra(Op::Union, None, &args[1..]),
            "sdiff" => self.algebra(Op::Diff, None, &args[1..]),
            "sinterstore" => self.algebra(Op::Inter, Some(&args[1]), &args[2..]),
            "sunionstore" => self.algebra(Op::Union, Some(&args[1]), &args[2..]),
            "sdiffstore" => self.algebra(Op::Diff, Some(&args[1]), &args[2..]),
            "sintercard" => self.sintercard(&args[1..]),
            "sscan" => self.element_scan(&args[1], Type::Set, &args[2..]),
            _ => return None,
        })
    }

    fn set_meta(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        self.typed(key, Type::Set)
    }

    fn has_member(&mut self, key: &[u8], m: &Meta, member: &[u8]) -> Res<bool> {
        Ok(self.get_raw(&member_key(key, m.version, member))?.is_some())
    }

    /// Every member of set `m`, in hash order.
    pub(super) fn all_members(&mut self, key: &[u8], m: &Meta) -> Res<Vec<Vec<u8>>> {
        Ok(self
            .elements(key, m.version, MEMBER, usize::MAX)?
            .into_iter()
            .map(|(k, _)| member_of(&k).to_vec())
            .collect())
    }

    /// The writes that add `members` to set `key` (`m`, or a new set),
    /// and how many were not members yet.
    fn add_members(
        &mut self,
        key: &[u8],
        old: Option<&Meta>,
        members: &[Vec<u8>],
        writes: &mut Writes,
    ) -> Res<u64> {
        for mem in members {
            self.check_element(key, mem, "member")?;
        }
        let mut m = match old {
            Some(m) => m.clone(),
            None => Meta::collection(Type::Set, self.new_version()?),
        };
        let mut added = 0;
        let mut seen: Vec<&[u8]> = Vec::new();
        for mem in members {
            if seen.contains(&mem.as_slice()) {
                continue;
            }
            seen.push(mem);
            // One sub-key, made once: looked up, then written if new.
            let sub = member_key(key, m.version, mem);
            if old.is_none() || self.get_raw(&sub)?.is_none() {
                added += 1;
                writes.push((sub, Some(Vec::new())));
            }
        }
        if added > 0 {
            m.set_count(m.count() + added);
            self.put(key, &m, old, writes);
        }
        Ok(added)
    }

    fn sadd(&mut self, key: &[u8], members: &[Vec<u8>]) -> Res<Reply> {
        let old = self.set_meta(key)?;
        let mut writes = Vec::new();
        let added = self.add_members(key, old.as_ref(), members, &mut writes)?;
        self.write(writes);
        if added > 0 {
            self.notify(SET, "sadd", key);
        }
        Ok(Reply::Int(added as i64))
    }

    /// The writes that remove `members` (known members, no repeats) from
    /// set `m`.
    fn remove_members(&self, key: &[u8], m: &Meta, members: &[Vec<u8>], writes: &mut Writes) {
        let subs = members.iter().map(|mem| member_key(key, m.version, mem));
        self.remove_subs(key, m, subs.collect(), writes);
    }

    /// The writes that remove the members of set `key` (`m`) whose
    /// sub-keys are `subs`, each a member.
    fn remove_subs(&self, key: &[u8], m: &Meta, subs: Vec<Vec<u8>>, writes: &mut Writes) {
        let left = m.count().saturating_sub(subs.len() as u64);
        if left == 0 {
            // The last member: the set is gone, and with it every member.
            writes.push((self.meta_key(key), None));
            return;
        }
        writes.extend(subs.into_iter().map(|sub| (sub, None)));
        let mut next = m.clone();
        next.set_count(left);
        writes.push((self.meta_key(key), Some(next.encode())));
    }

    fn srem(&mut self, key: &[u8], members: &[Vec<u8>]) -> Res<Reply> {
        let Some(m) = self.set_meta(key)? else {
            return Ok(Reply::Int(0));
        };
        let mut gone: Vec<Vec<u8>> = Vec::new();
        for mem in members {
            if !gone.contains(mem) && self.has_member(key, &m, mem)? {
                gone.push(mem.clone());
            }
        }
        if gone.is_empty() {
            return Ok(Reply::Int(0));
        }
        let mut writes = Vec::new();
        self.remove_members(key, &m, &gone, &mut writes);
        self.write(writes);
        self.notify_removed(SET, key, "srem", &m, gone.len());
        Ok(Reply::Int(gone.len() as i64))
    }

    fn smembers(&mut self, key: &[u8]) -> Res<Reply> {
        let Some(m) = self.set_meta(key)? else {
            return Ok(Reply::Array(vec![]));
        };
        Ok(members_reply(self.all_members(key, &m)?))
    }

    fn smismember(&mut self, key: &[u8], members: &[Vec<u8>], many: bool) -> Res<Reply> {
        if !many && members.len() != 1 {
            return Err(Reply::err(
                "wrong number of arguments for 'sismember' command",
            ));
        }
        let m = self.set_meta(key)?;
        let mut out = Vec::with_capacity(members.len());
        for mem in members {
            let yes = match &m {
                Some(m) => self.has_member(key, m, mem)?,
                None => false,
            };
            out.push(Reply::Int(yes as i64));
        }
        Ok(if many {
            Reply::Array(out)
        } else {
            out.pop().expect("one member")
        })
    }

    fn scard(&mut self, key: &[u8]) -> Res<Reply> {
        Ok(Reply::Int(
            self.set_meta(key)?.map_or(0, |m| m.count() as i64),
        ))
    }

    /// Up to `n` distinct members of set `m` picked at random: `uniform`
    /// reads a set of up to [`READ_WHOLE`] members whole to pick exactly
    /// uniformly (SRANDMEMBER); otherwise members are found by seeking to
    /// random points of the hash order (each member is as likely as the
    /// gap of hashes before it), which reads only what it returns (SPOP:
    /// a set popped down to its last members is left with the tombstones
    /// of the others, which a whole read would step over at every pop).
    fn pick(&mut self, key: &[u8], m: &Meta, n: u64, uniform: bool) -> Res<Vec<Vec<u8>>> {
        if (uniform && m.count() <= READ_WHOLE) || n * 2 >= m.count() {
            let mut all = self.all_members(key, m)?;
            all.shuffle(&mut rand::rng());
            all.truncate(n as usize);
            return Ok(all);
        }
        let mut out: Vec<Vec<u8>> = Vec::with_capacity(n as usize);
        let mut tries = 0;
        while (out.len() as u64) < n && tries < 8 * n + 64 {
            tries += 1;
            if let Some(mem) = self.members_at_random_point(key, m, 1)?.pop() {
                if !out.contains(&mem) {
                    out.push(mem);
                }
            }
        }
        Ok(out)
    }

    /// Up to `n` members of set `m` in hash order from a random point of
    /// it (from its first member when none is past the point).
    fn members_at_random_point(&mut self, key: &[u8], m: &Meta, n: usize) -> Res<Vec<Vec<u8>>> {
        let prefix = keys::sub_len(key);
        Ok(self
            .subs_at_random_point(key, m, n, false)?
            .into_iter()
            .map(|k| member_of(&k[prefix..]).to_vec())
            .collect())
    }

    /// The sub-keys of up to `n` members of set `m` in hash order from a
    /// random point of it (the member after [`keys::sub_len`]); `ahead`
    /// remembers them for a run of pops ([`Shard::scan_ahead`]).
    ///
    /// [`Shard::scan_ahead`]: crate::server::shard::Shard::scan_ahead
    fn subs_at_random_point(
        &mut self,
        key: &[u8],
        m: &Meta,
        n: usize,
        ahead: bool,
    ) -> Res<Vec<Vec<u8>>> {
        let start = keys::sub(key, m.version, MEMBER, 0);
        let end = keys::sub_end(key, m.version, MEMBER);
        let mut from = start.clone();
        from.extend_from_slice(&rand::rng().random::<[u8; 4]>());
        let scan = |c: &mut Self, from: &[u8]| {
            let found = if ahead {
                c.shard.scan_ahead(from, &end, n, &mut c.deps)
            } else {
                c.shard.scan(from, Some(&end), n, &mut c.deps)
            };
            found.map_err(Reply::err)
        };
        let mut got = scan(self, &from)?;
        if got.is_empty() {
            got = scan(self, &start)?;
        }
        Ok(got.into_iter().map(|(k, _)| k).collect())
    }

    /// The sub-key of one member of the large set `m`, picked at random
    /// for a pop: the next of a run of members an earlier pop read ahead
    /// from a random point, if one is still a member, or else the first
    /// of a new run (see [`crate::server::shard::draws`]). Whether one
    /// of the run is still a member is most often known without a read:
    /// no write reached it since the scan found it
    /// ([`Shard::still_found`]).
    ///
    /// [`Shard::still_found`]: crate::server::shard::Shard::still_found
    fn draw(&mut self, key: &[u8], m: &Meta) -> Res<Option<Vec<u8>>> {
        loop {
            let next = self.shard.draws().take(key, m.version);
            let Some(sub) = next else { break };
            let live = match self.shard.still_found(&sub, &mut self.deps) {
                Some(live) => live,
                None => self.get_raw(&sub)?.is_some(),
            };
            if live {
                return Ok(Some(sub));
            }
        }
        let mut run = self
            .subs_at_random_point(key, m, draws::run(m.count()), true)?
            .into_iter();
        let first = run.next();
        self.shard.draws().keep(key, m.version, run.collect());
        Ok(first)
    }

    fn spop(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let key = &args[1];
        let count = match args.len() {
            2 => None,
            3 => match integer(&args[2]) {
                Some(n) if n >= 0 => Some(n as u64),
                _ => return Err(Reply::err("value is out of range, must be positive")),
            },
            _ => return Err(syntax_error()),
        };
        let Some(m) = self.set_meta(key)? else {
            return Ok(absent(count.is_some()));
        };
        let want = count.unwrap_or(1);
        if want == 0 {
            return Ok(Reply::Array(vec![]));
        }
        let mut writes = Vec::new();
        let got = match count {
            None if m.count() > READ_WHOLE => {
                let Some(sub) = self.draw(key, &m)? else {
                    return Ok(Reply::Nil);
                };
                let member = member_of(&sub[keys::sub_len(key)..]).to_vec();
                self.remove_subs(key, &m, vec![sub], &mut writes);
                vec![member]
            }
            _ => {
                let got = self.pick(key, &m, want, false)?;
                self.remove_members(key, &m, &got, &mut writes);
                got
            }
        };
        self.write(writes);
        self.notify_removed(SET, key, "spop", &m, got.len());
        Ok(match count {
            None => got.into_iter().next().map_or(Reply::Nil, Reply::Bulk),
            Some(_) => members_reply(got),
        })
    }

    fn srandmember(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let key = &args[1];
        let count = match args.len() {
            2 => None,
            3 => match integer(&args[2]) {
                Some(i64::MIN) | None => {
                    return Err(if integer(&args[2]).is_none() {
                        not_integer()
                    } else {
                        Reply::err("value is out of range")
                    })
                }
                n => n,
            },
            _ => return Err(syntax_error()),
        };
        let Some(m) = self.set_meta(key)? else {
            return Ok(absent(count.is_some()));
        };
        match count {
            None => Ok(self
                .pick(key, &m, 1, true)?
                .into_iter()
                .next()
                .map_or(Reply::Nil, Reply::Bulk)),
            Some(n) if n >= 0 => Ok(members_reply(self.pick(key, &m, n as u64, true)?)),
            Some(n) => {
                // Negative: that many, repeats allowed.
                let n = n.unsigned_abs();
                let pool = self.pick(
                    key,
                    &m,
                    n.min(READ_WHOLE).max(m.count().min(READ_WHOLE)),
                    true,
                )?;
                let mut rng = rand::rng();
                Ok(members_reply(
                    (0..n).filter_map(|_| pool.choose(&mut rng).cloned()),
                ))
            }
        }
    }

    fn smove(&mut self, from: &[u8], to: &[u8], member: &[u8]) -> Res<Reply> {
        let src = self.set_meta(from)?;
        let dst = self.set_meta(to)?;
        let Some(src) = src else {
            return Ok(Reply::Int(0));
        };
        if !self.has_member(from, &src, member)? {
            return Ok(Reply::Int(0));
        }
        if from == to {
            return Ok(Reply::Int(1));
        }
        let mut writes = Vec::new();
        self.remove_members(from, &src, &[member.to_vec()], &mut writes);
        let added = self.add_members(to, dst.as_ref(), &[member.to_vec()], &mut writes)?;
        self.write(writes);
        self.notify_removed(SET, from, "srem", &src, 1);
        if added > 0 {
            self.notify(SET, "sadd", to);
        }
        Ok(Reply::Int(1))
    }

    /// The sets named (a missing key is the empty set); WRONGTYPE if one
    /// is not a set.
    fn read_sets(&mut self, names: &[Vec<u8>]) -> Res<Vec<Option<Vec<Vec<u8>>>>> {
        let metas: Vec<Option<Meta>> =
            names.iter().map(|k| self.set_meta(k)).collect::<Res<_>>()?;
        let mut out = Vec::with_capacity(names.len());
        for (k, m) in names.iter().zip(&metas) {
            out.push(match m {
                Some(m) => Some(self.all_members(k, m)?),
                None => None,
            });
        }
        Ok(out)
    }

    fn combine(op: Op, sets: Vec<Option<Vec<Vec<u8>>>>) -> Vec<Vec<u8>> {
        use std::collections::BTreeSet;
        let mut it = sets.into_iter();
        let first: BTreeSet<Vec<u8>> = it
            .next()
            .flatten()
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut acc = first;
        for s in it {
            let s: BTreeSet<Vec<u8>> = s.unwrap_or_default().into_iter().collect();
            acc = match op {
                Op::Inter => acc.intersection(&s).cloned().collect(),
                Op::Union => acc.union(&s).cloned().collect(),
                Op::Diff => acc.difference(&s).cloned().collect(),
            };
        }
        acc.into_iter().collect()
    }

    fn algebra(&mut self, op: Op, store: Option<&Vec<u8>>, names: &[Vec<u8>]) -> Res<Reply> {
        if let Some(dst) = store {
            self.check_key(dst)?;
        }
        let sets = self.read_sets(names)?;
        let result = Self::combine(op, sets);
        let Some(dst) = store else {
            return Ok(members_reply(result));
        };
        let old = self.lookup(dst)?;
        let mut writes = Vec::new();
        if result.is_empty() {
            if old.is_some() {
                writes.push((keys::meta(dst), None));
            }
        } else {
            self.add_members(dst, None, &result, &mut writes)?;
        }
        self.write(writes);
        if !result.is_empty() {
            let event = match op {
                Op::Inter => "sinterstore",
                Op::Union => "sunionstore",
                Op::Diff => "sdiffstore",
            };
            self.notify(SET, event, dst);
        } else if old.is_some() {
            self.notify(GENERIC, "del", dst);
        }
        Ok(Reply::Int(result.len() as i64))
    }

    fn sintercard(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let n = match integer(&args[0]) {
            Some(n) if n > 0 => n as usize,
            _ => return Err(Reply::err("numkeys should be greater than 0")),
        };
        let (names, limit) = super::intercard_args(args, n)?;
        for k in names {
            self.check_key(k)?;
        }
        let sets = self.read_sets(names)?;
        let mut n = Self::combine(Op::Inter, sets).len();
        if limit > 0 {
            n = n.min(limit);
        }
        Ok(Reply::Int(n as i64))
    }
}
