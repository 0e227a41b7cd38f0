//! GEO commands: a GEO key is a sorted set whose scores are 52-bit
//! geohashes ([`super::geohash`]), so GEOADD is ZADD of encoded points,
//! and a search reads one range of scores per cell that covers its area
//! (the score order's sub-keys: only what falls in those cells), then
//! keeps the points inside the radius or box. Replies, options and
//! errors are Redis's.

use std::ops::Bound;

use super::geohash::{self, Shape};
use super::{float, integer, not_float, not_integer, syntax_error, Res};
use crate::server::conn::Conn;
use crate::server::notify::GENERIC;
use crate::server::resp::Reply;

/// A point a search found: member, score, distance (meters), position.
struct Found {
    member: Vec<u8>,
    score: f64,
    dist: f64,
    at: (f64, f64),
}

/// How a search was asked for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS[_RO] key lon lat radius unit ...
    Radius,
    /// GEORADIUSBYMEMBER[_RO] key member radius unit ...
    ByMember,
    /// GEOSEARCH key FROMMEMBER|FROMLONLAT ... BYRADIUS|BYBOX ...
    Search,
    /// GEOSEARCHSTORE dst key ...
    SearchStore,
}

/// A unit's meters, as Redis names units.
fn unit(arg: &[u8]) -> Res<f64> {
    match arg.to_ascii_lowercase().as_slice() {
        b"m" => Ok(1.0),
        b"km" => Ok(1000.0),
        b"ft" => Ok(0.3048),
        b"mi" => Ok(1609.34),
        _ => Err(Reply::err(
            "unsupported unit provided. please use M, KM, FT, MI",
        )),
    }
}

/// A number argument, with Redis's message when it is not one.
fn number(arg: &[u8], what: &str) -> Res<f64> {
    float(arg).ok_or_else(|| {
        if what.is_empty() {
            not_float()
        } else {
            Reply::err(what)
        }
    })
}

/// A longitude and latitude argument pair, in the GEO ranges.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Res<(f64, f64)> {
    let (x, y) = (number(lon, "")?, number(lat, "")?);
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&x)
        || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&y)
    {
        return Err(Reply::err(format!(
            "invalid longitude,latitude pair {x:.6},{y:.6}"
        )));
    }
    Ok((x, y))
}

/// `<radius> <unit>`: the radius in the unit, and the unit's meters.
fn radius(args: &[Vec<u8>]) -> Res<(f64, f64)> {
    let r = number(&args[0], "need numeric radius")?;
    if r < 0.0 {
        return Err(Reply::err("radius cannot be negative"));
    }
    Ok((r, unit(&args[1])?))
}

/// A coordinate as Redis gives it: 17 decimals, trailing zeros cut.
fn coordinate(v: f64) -> Reply {
    let s = format!("{v:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    Reply::bulk(s.to_string())
}

/// A distance as Redis gives it: 4 decimals.
fn distance_reply(d: f64) -> Reply {
    Reply::bulk(format!("{d:.4}"))
}

impl<'a> Conn<'a> {
    pub(super) fn geo(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "geoadd" => self.geoadd(args),
            "geopos" => self.geopos(&args[1], &args[2..]),
            "geohash" => self.geohash(&args[1], &args[2..]),
            "geodist" => self.geodist(args),
            "georadius" => self.geosearch(args, Form::Radius, true),
            "georadius_ro" => self.geosearch(args, Form::Radius, false),
            "georadiusbymember" => self.geosearch(args, Form::ByMember, true),
            "georadiusbymember_ro" => self.geosearch(args, Form::ByMember, false),
            "geosearch" => self.geosearch(args, Form::Search, false),
            "geosearchstore" => self.geosearch(args, Form::SearchStore, true),
            _ => return None,
        })
    }

    /// GEOADD key [NX|XX] [CH] lon lat member ...: ZADD of the points'
    /// scores.
    fn geoadd(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let mut at = 2;
        let (mut nx, mut xx) = (false, false);
        while at < args.len() {
            match args[at].to_ascii_lowercase().as_slice() {
                b"nx" => nx = true,
                b"xx" => xx = true,
                b"ch" => {}
                _ => break,
            }
            at += 1;
        }
        if (args.len() - at) % 3 != 0 || (nx && xx) || at == args.len() {
            return Err(syntax_error());
        }
        let mut zadd: Vec<Vec<u8>> = vec![b"zadd".to_vec()];
        zadd.extend_from_slice(&args[1..at]);
        for point in args[at..].chunks(3) {
            let (lon, lat) = lon_lat(&point[0], &point[1])?;
            let score = geohash::score_of(lon, lat).expect("a point in range");
            zadd.push(score.to_string().into_bytes());
            zadd.push(point[2].clone());
        }
        self.zadd(&zadd)
    }

    /// A member's position, `None` when it or the key is missing.
    fn geo_point(&mut self, key: &[u8], member: &[u8]) -> Res<Option<(f64, f64)>> {
        let Some(m) = self.zset(key)? else {
            return Ok(None);
        };
        Ok(self.score(key, &m, member)?.map(geohash::decode_score))
    }

    /// Each member's reply by `shown`: its position, or `None` when it or
    /// the key is missing.
    fn each_point(
        &mut self,
        key: &[u8],
        members: &[Vec<u8>],
        shown: impl Fn(Option<(f64, f64)>) -> Reply,
    ) -> Res<Reply> {
        let m = self.zset(key)?;
        let mut out = Vec::with_capacity(members.len());
        for mem in members {
            let score = match &m {
                Some(m) => self.score(key, m, mem)?,
                None => None,
            };
            out.push(shown(score.map(geohash::decode_score)));
        }
        Ok(Reply::Array(out))
    }

    fn geopos(&mut self, key: &[u8], members: &[Vec<u8>]) -> Res<Reply> {
        self.each_point(key, members, |p| match p {
            Some((lon, lat)) => Reply::Array(vec![coordinate(lon), coordinate(lat)]),
            None => Reply::NilArray,
        })
    }

    fn geohash(&mut self, key: &[u8], members: &[Vec<u8>]) -> Res<Reply> {
        self.each_point(key, members, |p| match p {
            Some((lon, lat)) => Reply::bulk(geohash::standard_hash(lon, lat)),
            None => Reply::Nil,
        })
    }

    /// GEODIST key a b [unit].
    fn geodist(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let to_meters = match args.len() {
            4 => 1.0,
            5 => unit(&args[4])?,
            _ => return Err(syntax_error()),
        };
        if self.zset(&args[1])?.is_none() {
            return Ok(Reply::Nil);
        }
        let (Some(a), Some(b)) = (
            self.geo_point(&args[1], &args[2])?,
            self.geo_point(&args[1], &args[3])?,
        ) else {
            return Ok(Reply::Nil);
        };
        Ok(distance_reply(
            geohash::distance(a.0, a.1, b.0, b.1) / to_meters,
        ))
    }

    /// GEORADIUS, GEORADIUSBYMEMBER (and their `_RO` forms), GEOSEARCH and
    /// GEOSEARCHSTORE: Redis's `georadiusGeneric`.
    fn geosearch(&mut self, args: &[Vec<u8>], form: Form, may_store: bool) -> Res<Reply> {
        let src = if form == Form::SearchStore {
            &args[2]
        } else {
            &args[1]
        };
        let zset = self.zset(src)?;
        let mut center = None;
        let mut shape = None;
        let mut conversion = 1.0;
        let base = match form {
            Form::Radius => {
                center = Some(lon_lat(&args[2], &args[3])?);
                let (r, c) = radius(&args[4..6])?;
                (shape, conversion) = (Some(Shape::Radius(r * c)), c);
                6
            }
            Form::ByMember => {
                if zset.is_some() {
                    let Some(p) = self.geo_point(src, &args[2])? else {
                        return Err(Reply::err("could not decode requested zset member"));
                    };
                    center = Some(p);
                    let (r, c) = radius(&args[3..5])?;
                    (shape, conversion) = (Some(Shape::Radius(r * c)), c);
                }
                5
            }
            Form::Search => 2,
            Form::SearchStore => 3,
        };
        let search = matches!(form, Form::Search | Form::SearchStore);
        let mut store: Option<(&Vec<u8>, bool)> =
            (form == Form::SearchStore).then_some((&args[1], false));
        let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
        let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
        let mut sort: Option<bool> = None;
        let mut count: u64 = 0;
        let rest = &args[base..];
        let mut i = 0;
        while i < rest.len() {
            let left = rest.len() - i - 1;
            match rest[i].to_ascii_lowercase().as_slice() {
                b"withdist" => withdist = true,
                b"withhash" => withhash = true,
                b"withcoord" => withcoord = true,
                b"any" => any = true,
                b"asc" => sort = Some(true),
                b"desc" => sort = Some(false),
                b"count" if left >= 1 => {
                    let n = integer(&rest[i + 1]).ok_or_else(not_integer)?;
                    if n <= 0 {
                        return Err(Reply::err("COUNT must be > 0"));
                    }
                    count = n as u64;
                    i += 1;
                }
                o @ (b"store" | b"storedist") if left >= 1 && may_store && !search => {
                    store = Some((&rest[i + 1], o == b"storedist"));
                    i += 1;
                }
                b"storedist" if form == Form::SearchStore => {
                    store = store.map(|(k, _)| (k, true));
                }
                b"frommember" if left >= 1 && search && !fromloc => {
                    if zset.is_some() {
                        let Some(p) = self.geo_point(src, &rest[i + 1])? else {
                            return Err(Reply::err("could not decode requested zset member"));
                        };
                        center = Some(p);
                    }
                    frommember = true;
                    i += 1;
                }
                b"fromlonlat" if left >= 2 && search && !frommember => {
                    center = Some(lon_lat(&rest[i + 1], &rest[i + 2])?);
                    fromloc = true;
                    i += 2;
                }
                b"byradius" if left >= 2 && search && !bybox => {
                    let (r, c) = radius(&rest[i + 1..i + 3])?;
                    (shape, conversion) = (Some(Shape::Radius(r * c)), c);
                    byradius = true;
                    i += 2;
                }
                b"bybox" if left >= 3 && search && !byradius => {
                    let w = number(&rest[i + 1], "need numeric width")?;
                    let h = number(&rest[i + 2], "need numeric height")?;
                    if w < 0.0 || h < 0.0 {
                        return Err(Reply::err("height or width cannot be negative"));
                    }
                    let c = unit(&rest[i + 3])?;
                    (shape, conversion) = (Some(Shape::Box(w * c, h * c)), c);
                    bybox = true;
                    i += 3;
                }
                _ => return Err(syntax_error()),
            }
            i += 1;
        }
        if store.is_some() && (withdist || withhash || withcoord) {
            let who = if form == Form::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            };
            return Err(Reply::err(format!(
                "{who} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
            )));
        }
        let cmd = String::from_utf8_lossy(&args[0]).into_owned();
        if search && !(frommember || fromloc) {
            return Err(Reply::err(format!(
                "exactly one of FROMMEMBER or FROMLONLAT can be specified for {cmd}"
            )));
        }
        if search && !(byradius || bybox) {
            return Err(Reply::err(format!(
                "exactly one of BYRADIUS and BYBOX can be specified for {cmd}"
            )));
        }
        if any && count == 0 {
            return Err(Reply::err("the ANY argument requires COUNT argument"));
        }
        let (Some(m), Some(center), Some(shape)) = (zset, center, shape) else {
            // No source key: nothing found (and the destination goes).
            return match store {
                Some((dst, _)) => {
                    self.check_key(dst)?;
                    let gone = self.lookup(dst)?.is_some();
                    if gone {
                        self.write(vec![(crate::server::keys::meta(dst), None)]);
                        self.notify(GENERIC, "del", dst);
                    }
                    Ok(Reply::Int(0))
                }
                None => Ok(Reply::Array(vec![])),
            };
        };
        if count != 0 && sort.is_none() && !any {
            sort = Some(true);
        }
        let limit = if any { count as usize } else { 0 };
        let mut found: Vec<Found> = Vec::new();
        let mut last: Option<geohash::Hash> = None;
        for cell in geohash::cells(center, shape) {
            let Some((lo, hi)) = geohash::score_range(cell) else {
                continue;
            };
            if last == Some(cell) {
                continue;
            }
            if limit > 0 && found.len() >= limit {
                break;
            }
            let bounds = (Bound::Included(lo as f64), Bound::Excluded(hi as f64));
            for (member, score) in self.score_range(src, &m, &bounds, usize::MAX)? {
                let at = geohash::decode_score(score);
                if let Some(dist) = geohash::within(center, shape, at) {
                    found.push(Found {
                        member,
                        score,
                        dist,
                        at,
                    });
                    if limit > 0 && found.len() >= limit {
                        break;
                    }
                }
            }
            last = Some(cell);
        }
        match sort {
            Some(true) => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
            Some(false) => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
            None => {}
        }
        if count > 0 {
            found.truncate(count as usize);
        }
        if let Some((dst, storedist)) = store {
            self.check_key(dst)?;
            let items = found
                .iter()
                .map(|f| {
                    let score = if storedist {
                        f.dist / conversion
                    } else {
                        f.score
                    };
                    (f.member.clone(), score)
                })
                .collect();
            let event = if search {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            return self.store_scored(dst, items, event);
        }
        let options = withdist as usize + withhash as usize + withcoord as usize;
        let out = found
            .into_iter()
            .map(|f| {
                if options == 0 {
                    return Reply::Bulk(f.member);
                }
                let mut item = vec![Reply::Bulk(f.member)];
                if withdist {
                    item.push(distance_reply(f.dist / conversion));
                }
                if withhash {
                    item.push(Reply::Int(f.score as i64));
                }
                if withcoord {
                    item.push(Reply::Array(vec![coordinate(f.at.0), coordinate(f.at.1)]));
                }
                Reply::Array(item)
            })
            .collect();
        Ok(Reply::Array(out))
    }
}
