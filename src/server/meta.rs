//! A Redis key's metadata: the value of its metadata key
//! ([`super::keys::meta`]).
//!
//! ```text
//! type:1 flags:1 version:8 [expire-at:8] body
//! ```
//!
//! Little-endian integers. `flags` bit 0: an expiry (milliseconds since
//! the epoch) follows the version. The body: a string's value; a hash's,
//! set's or sorted set's element count (8 bytes); a list's head and tail
//! positions (8 bytes each: its elements are at head..tail).

use std::rc::Rc;

/// A Redis key's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    String,
    Hash,
    List,
    Set,
    ZSet,
    Stream,
}

impl Type {
    /// As TYPE names it.
    pub fn name(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Hash => "hash",
            Type::List => "list",
            Type::Set => "set",
            Type::ZSet => "zset",
            Type::Stream => "stream",
        }
    }

    /// The type TYPE and SCAN ... TYPE call `name`.
    pub fn named(name: &[u8]) -> Option<Type> {
        match name.to_ascii_lowercase().as_slice() {
            b"string" => Some(Type::String),
            b"hash" => Some(Type::Hash),
            b"list" => Some(Type::List),
            b"set" => Some(Type::Set),
            b"zset" => Some(Type::ZSet),
            b"stream" => Some(Type::Stream),
            _ => None,
        }
    }

    fn tag(self) -> u8 {
        match self {
            Type::String => b's',
            Type::Hash => b'h',
            Type::List => b'l',
            Type::Set => b't',
            Type::ZSet => b'z',
            Type::Stream => b'x',
        }
    }

    fn of_tag(t: u8) -> Option<Type> {
        match t {
            b's' => Some(Type::String),
            b'h' => Some(Type::Hash),
            b'l' => Some(Type::List),
            b't' => Some(Type::Set),
            b'z' => Some(Type::ZSet),
            b'x' => Some(Type::Stream),
            _ => None,
        }
    }
}

/// What a key's metadata holds besides its type, version and expiry.
#[derive(Clone, Debug, Eq)]
pub enum Body {
    /// A string's value: the bytes from the offset on (decoding leaves
    /// the header in front rather than move the value), shared with the
    /// shard's tables it was read from, so a GET copies it only into
    /// the reply.
    Value(Rc<Vec<u8>>, usize),
    /// How many elements a hash, set or sorted set has.
    Count(u64),
    /// Where a list's elements are: positions head..tail. Only those
    /// are read. A pop or a trim moves an end and writes nothing else:
    /// the elements it leaves outside stay until compaction drops them
    /// (a later push that takes a position back writes it first).
    Ends(u64, u64),
    /// A stream's state.
    Stream(Box<StreamState>),
}

/// A stream entry's ID: milliseconds and a sequence number.
pub type Id = (u64, u64);

/// What a stream's metadata holds (all little-endian words).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamState {
    pub length: u64,
    /// The highest ID ever added (or set by XSETID).
    pub last: Id,
    /// The first entry's ID ((0, 0) when empty).
    pub first: Id,
    pub max_deleted: Id,
    /// Entries ever added.
    pub added: u64,
    pub groups: u64,
    /// Where entries go for approximate trimming (`~`), as Redis's
    /// nodes of `stream-node-max-entries`: the current node, and its
    /// entries and bytes so far.
    pub node: u64,
    pub node_entries: u64,
    pub node_bytes: u64,
}

/// The words of a [`StreamState`].
const STREAM_WORDS: usize = 12;

impl StreamState {
    fn words(&self) -> [u64; STREAM_WORDS] {
        [
            self.length,
            self.last.0,
            self.last.1,
            self.first.0,
            self.first.1,
            self.max_deleted.0,
            self.max_deleted.1,
            self.added,
            self.groups,
            self.node,
            self.node_entries,
            self.node_bytes,
        ]
    }

    fn of_words(w: &[u64]) -> StreamState {
        StreamState {
            length: w[0],
            last: (w[1], w[2]),
            first: (w[3], w[4]),
            max_deleted: (w[5], w[6]),
            added: w[7],
            groups: w[8],
            node: w[9],
            node_entries: w[10],
            node_bytes: w[11],
        }
    }
}

impl PartialEq for Body {
    fn eq(&self, o: &Body) -> bool {
        match (self, o) {
            (Body::Value(a, i), Body::Value(b, j)) => a[*i..] == b[*j..],
            (Body::Count(a), Body::Count(b)) => a == b,
            (Body::Ends(a, b), Body::Ends(c, d)) => (a, b) == (c, d),
            (Body::Stream(a), Body::Stream(b)) => a == b,
            _ => false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: Type,
    /// Unique to this incarnation of the key: its sub-keys carry it.
    pub version: u64,
    /// When the key expires, in milliseconds since the epoch.
    pub expire_at: Option<u64>,
    pub body: Body,
}

const HAS_EXPIRY: u8 = 1;

/// Where a new list's head and tail start: pushes at either end have
/// room for 2^63 elements.
pub const LIST_MIDDLE: u64 = 1 << 63;

fn header(kind: Type, version: u64, expire_at: Option<u64>, body: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAX_HEADER + body);
    out.push(kind.tag());
    out.push(if expire_at.is_some() { HAS_EXPIRY } else { 0 });
    out.extend_from_slice(&version.to_le_bytes());
    if let Some(at) = expire_at {
        out.extend_from_slice(&at.to_le_bytes());
    }
    out
}

/// The metadata of a string, its value copied once.
pub fn encode_string(version: u64, expire_at: Option<u64>, value: &[u8]) -> Vec<u8> {
    let mut out = header(Type::String, version, expire_at, value.len());
    out.extend_from_slice(value);
    out
}

/// The most bytes the metadata of a string adds to its value.
pub const MAX_HEADER: usize = 18;

impl Meta {
    pub fn string(version: u64, value: Vec<u8>, expire_at: Option<u64>) -> Meta {
        Meta {
            kind: Type::String,
            version,
            expire_at,
            body: Body::Value(Rc::new(value), 0),
        }
    }

    /// An empty collection of type `kind`.
    pub fn collection(kind: Type, version: u64) -> Meta {
        Meta {
            kind,
            version,
            expire_at: None,
            body: match kind {
                Type::List => Body::Ends(LIST_MIDDLE, LIST_MIDDLE),
                Type::Stream => Body::Stream(Box::default()),
                _ => Body::Count(0),
            },
        }
    }

    pub fn hash(version: u64) -> Meta {
        Meta::collection(Type::Hash, version)
    }

    /// A string's value.
    pub fn value(&self) -> Option<&[u8]> {
        match &self.body {
            Body::Value(v, at) => Some(&v[*at..]),
            Body::Count(_) | Body::Ends(..) | Body::Stream(_) => None,
        }
    }

    /// A collection's element count (a string's: 1).
    pub fn count(&self) -> u64 {
        match self.body {
            Body::Count(n) => n,
            Body::Ends(head, tail) => tail - head,
            Body::Stream(ref s) => s.length,
            Body::Value(..) => 1,
        }
    }

    /// A list's head and tail positions.
    pub fn ends(&self) -> (u64, u64) {
        match self.body {
            Body::Ends(h, t) => (h, t),
            _ => (LIST_MIDDLE, LIST_MIDDLE),
        }
    }

    /// A stream's state (a default one for any other type).
    pub fn stream(&self) -> StreamState {
        match &self.body {
            Body::Stream(s) => (**s).clone(),
            _ => StreamState::default(),
        }
    }

    pub fn set_count(&mut self, n: u64) {
        self.body = Body::Count(n);
    }

    pub fn encode(&self) -> Vec<u8> {
        match &self.body {
            Body::Value(v, at) => encode_string(self.version, self.expire_at, &v[*at..]),
            Body::Count(n) => {
                let mut out = header(self.kind, self.version, self.expire_at, 8);
                out.extend_from_slice(&n.to_le_bytes());
                out
            }
            Body::Ends(h, t) => {
                let mut out = header(self.kind, self.version, self.expire_at, 16);
                out.extend_from_slice(&h.to_le_bytes());
                out.extend_from_slice(&t.to_le_bytes());
                out
            }
            Body::Stream(st) => {
                let mut out = header(self.kind, self.version, self.expire_at, 8 * STREAM_WORDS);
                for w in st.words() {
                    out.extend_from_slice(&w.to_le_bytes());
                }
                out
            }
        }
    }

    /// Decodes metadata, keeping a string's value in `raw` (no copy, no
    /// move); `None` if `raw` is not metadata this encoding writes.
    pub fn decode(raw: Vec<u8>) -> Option<Meta> {
        Meta::decode_shared(Rc::new(raw))
    }

    /// [`Meta::decode`] of a buffer shared with the shard's tables.
    pub fn decode_shared(raw: Rc<Vec<u8>>) -> Option<Meta> {
        let kind = Type::of_tag(*raw.first()?)?;
        let flags = *raw.get(1)?;
        if flags & !HAS_EXPIRY != 0 {
            return None;
        }
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(raw.get(at..at + 8)?.try_into().ok()?))
        };
        let version = word(2)?;
        let (expire_at, head) = if flags & HAS_EXPIRY != 0 {
            (Some(word(10)?), 18)
        } else {
            (None, 10)
        };
        let body = match kind {
            Type::String => Body::Value(raw, head),
            Type::List => {
                let (h, t) = (word(head)?, word(head + 8)?);
                if raw.len() != head + 16 || h > t {
                    return None;
                }
                Body::Ends(h, t)
            }
            Type::Hash | Type::Set | Type::ZSet => {
                if raw.len() != head + 8 {
                    return None;
                }
                Body::Count(word(head)?)
            }
            Type::Stream => {
                if raw.len() != head + 8 * STREAM_WORDS {
                    return None;
                }
                let w: Vec<u64> = (0..STREAM_WORDS)
                    .map(|i| word(head + 8 * i))
                    .collect::<Option<_>>()?;
                Body::Stream(Box::new(StreamState::of_words(&w)))
            }
        };
        Some(Meta {
            kind,
            version,
            expire_at,
            body,
        })
    }

    /// The version of metadata `raw`, read from its header alone (the
    /// compaction filter's question, asked of every key merged).
    /// Metadata that `decode` refuses is refused here too.
    pub fn version_of(raw: &[u8]) -> Option<u64> {
        let kind = Type::of_tag(*raw.first()?)?;
        let flags = *raw.get(1)?;
        if flags & !HAS_EXPIRY != 0 {
            return None;
        }
        let head = if flags & HAS_EXPIRY != 0 { 18 } else { 10 };
        let body_ok = match kind {
            Type::String => raw.len() >= head,
            Type::List => raw.len() == head + 16,
            Type::Hash | Type::Set | Type::ZSet => raw.len() == head + 8,
            Type::Stream => raw.len() == head + 8 * STREAM_WORDS,
        };
        if !body_ok {
            return None;
        }
        Some(u64::from_le_bytes(raw.get(2..10)?.try_into().ok()?))
    }

    /// The head and tail positions in list metadata `raw` (`None` for
    /// any other type, or metadata this server cannot read), without
    /// decoding the rest: what the compaction filter asks of each list.
    pub fn list_ends_of(raw: &[u8]) -> Option<(u64, u64)> {
        if Type::of_tag(*raw.first()?)? != Type::List || Meta::version_of(raw).is_none() {
            return None;
        }
        let at = raw.len() - 16;
        let word = |i: usize| u64::from_le_bytes(raw[i..i + 8].try_into().expect("8 bytes"));
        let (h, t) = (word(at), word(at + 8));
        (h <= t).then_some((h, t))
    }

    /// Whether the key has expired at `now` (milliseconds).
    pub fn expired(&self, now: u64) -> bool {
        self.expire_at.is_some_and(|at| at <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_refuses_what_it_never_writes() {
        let all = [
            Meta::string(1, b"v".to_vec(), None),
            Meta::string(u64::MAX, Vec::new(), Some(1_700_000_000_000)),
            Meta {
                expire_at: Some(5),
                body: Body::Count(3),
                ..Meta::hash(9)
            },
            Meta::hash(0),
            Meta {
                body: Body::Ends(3, 7),
                ..Meta::collection(Type::List, 4)
            },
            Meta::collection(Type::Set, 5),
            Meta::collection(Type::ZSet, 6),
            Meta {
                body: Body::Stream(Box::new(StreamState {
                    length: 2,
                    last: (5, 1),
                    first: (3, 0),
                    groups: 1,
                    ..StreamState::default()
                })),
                ..Meta::collection(Type::Stream, 7)
            },
        ];
        for m in all {
            let raw = m.encode();
            assert_eq!(Meta::version_of(&raw), Some(m.version));
            let ends = (m.kind == Type::List).then(|| m.ends());
            assert_eq!(Meta::list_ends_of(&raw), ends);
            let body = match m.kind {
                Type::Stream => 8 * STREAM_WORDS,
                _ => 16,
            };
            assert!(raw.len() <= MAX_HEADER + m.value().map_or(body, <[u8]>::len));
            assert_eq!(Meta::decode(raw), Some(m));
        }
        assert_eq!(Meta::decode(vec![]), None);
        assert_eq!(Meta::version_of(b"h\0aaaaaaaa"), None);
        assert_eq!(Meta::decode(b"x\0aaaaaaaa".to_vec()), None);
        assert_eq!(Meta::decode(b"s\x02aaaaaaaa".to_vec()), None);
        assert_eq!(Meta::decode(b"s\0aaaa".to_vec()), None);
        assert_eq!(Meta::decode(b"h\0aaaaaaaa".to_vec()), None);
        let mut backwards = Meta::collection(Type::List, 1);
        backwards.body = Body::Ends(7, 3);
        assert_eq!(Meta::decode(backwards.encode()), None);
        assert_eq!(Meta::list_ends_of(&backwards.encode()), None);
        let mut expiring = Meta::collection(Type::List, 1);
        expiring.expire_at = Some(9);
        expiring.body = Body::Ends(2, 5);
        assert_eq!(Meta::list_ends_of(&expiring.encode()), Some((2, 5)));
        let mut cut = expiring.encode();
        cut.pop();
        assert_eq!(Meta::list_ends_of(&cut), None);
        assert_eq!(Meta::decode(b"s\x01aaaaaaaa".to_vec()), None);
    }
}
