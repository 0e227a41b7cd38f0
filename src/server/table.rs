//! The command table: every command the server knows, with its arity,
//! flags, key positions and group, as COMMAND tells clients. Dispatch
//! checks arity and key limits from it.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::hash::BytesHash;

/// What a command is, as COMMAND INFO tells clients.
pub struct Spec {
    pub name: &'static str,
    /// Redis's convention: N exactly N arguments (the name included), -N at least N.
    pub arity: i32,
    pub flags: &'static [&'static str],
    /// First key, last key (-1: the last argument), step.
    pub keys: (i32, i32, i32),
    pub group: &'static str,
    pub summary: &'static str,
}

const W: &[&str] = &["write"];
const WD: &[&str] = &["write", "denyoom"];
const WF: &[&str] = &["write", "fast"];
const WB: &[&str] = &["write", "blocking"];
const RB: &[&str] = &["readonly", "blocking"];
const R: &[&str] = &["readonly", "fast"];
const RS: &[&str] = &["readonly"];
const A: &[&str] = &["fast"];
/// Connection and server commands a script may not run.
const ANS: &[&str] = &["fast", "noscript"];
const ADMINNS: &[&str] = &["admin", "noscript"];
const ADMIN: &[&str] = &["admin"];
const PS: &[&str] = &["pubsub", "noscript", "loading", "stale"];
const PUB: &[&str] = &["pubsub", "loading", "stale", "fast"];
const SCRIPTING: &[&str] = &["noscript", "skip_monitor"];
const TX: &[&str] = &["noscript", "loading", "stale", "fast", "allow_busy"];
const LOADING: &[&str] = &["loading", "stale"];
const MONITOR: &[&str] = &["admin", "noscript", "loading", "stale"];
const ACL: &[&str] = &["noscript", "loading", "stale"];

pub(super) const NO: (i32, i32, i32) = (0, 0, 0);
const K1: (i32, i32, i32) = (1, 1, 1);
const KALL: (i32, i32, i32) = (1, -1, 1);
const K2: (i32, i32, i32) = (1, 2, 1);
const KPAIRS: (i32, i32, i32) = (1, -1, 2);
const KBUTLAST: (i32, i32, i32) = (1, -2, 1);

pub(super) const fn spec(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: (i32, i32, i32),
    group: &'static str,
    summary: &'static str,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys,
        group,
        summary,
    }
}

/// Every command the server knows, by name.
#[rustfmt::skip]
pub static COMMANDS: &[Spec] = &[
    spec("ping", -1, A, NO, "connection", "Returns PONG, or the argument."),
    spec("echo", 2, A, NO, "connection", "Returns the argument."),
    spec("hello", -1, ANS, NO, "connection", "Handshake: protocol version, AUTH, SETNAME."),
    spec("auth", -2, ANS, NO, "connection", "Authenticates the connection."),
    spec("select", 2, A, NO, "connection", "Selects database 0, the only one."),
    spec("quit", -1, ANS, NO, "connection", "Closes the connection."),
    spec("client", -2, ANS, NO, "connection", "SETNAME, GETNAME, ID, LIST, INFO, SETINFO, REPLY, UNBLOCK, HELP."),
    spec("stria.durability", -1, ANS, NO, "connection", "Sets this connection's durability: none, async, write or sync."),
    // Strings.
    spec("get", 2, R, K1, "string", "Returns a string value."),
    spec("set", -3, WD, K1, "string", "Sets a string value (NX, XX, GET, EX, PX, EXAT, PXAT, KEEPTTL)."),
    spec("setnx", 3, WD, K1, "string", "Sets a string value if the key does not exist."),
    spec("setex", 4, WD, K1, "string", "Sets a string value that expires in seconds."),
    spec("psetex", 4, WD, K1, "string", "Sets a string value that expires in milliseconds."),
    spec("getset", 3, WD, K1, "string", "Sets a string value and returns the old one."),
    spec("getex", -2, WF, K1, "string", "Returns a string value and sets or removes its expiry."),
    spec("getdel", 2, WF, K1, "string", "Returns a string value and deletes the key."),
    spec("mget", -2, R, KALL, "string", "Returns several string values."),
    spec("mset", -3, WD, KPAIRS, "string", "Sets several string values."),
    spec("msetnx", -3, WD, KPAIRS, "string", "Sets several string values if none of the keys exists."),
    spec("incr", 2, WD, K1, "string", "Adds 1 to an integer value."),
    spec("incrby", 3, WD, K1, "string", "Adds to an integer value."),
    spec("decr", 2, WD, K1, "string", "Subtracts 1 from an integer value."),
    spec("decrby", 3, WD, K1, "string", "Subtracts from an integer value."),
    spec("incrbyfloat", 3, WD, K1, "string", "Adds to a floating-point value."),
    spec("append", 3, WD, K1, "string", "Appends to a string value."),
    spec("strlen", 2, R, K1, "string", "The length of a string value."),
    spec("getrange", 4, RS, K1, "string", "A substring of a string value."),
    spec("substr", 4, RS, K1, "string", "A substring of a string value (GETRANGE)."),
    spec("setrange", 4, WD, K1, "string", "Overwrites part of a string value."),
    spec("lcs", -3, RS, K2, "string", "The longest common subsequence of two strings (LEN, IDX)."),
    spec("setbit", 4, WD, K1, "bitmap", "Sets a bit of a string."),
    spec("getbit", 3, R, K1, "bitmap", "A bit of a string."),
    spec("bitcount", -2, RS, K1, "bitmap", "Counts the set bits of a string (BYTE, BIT)."),
    spec("bitpos", -3, RS, K1, "bitmap", "The first bit set or clear (BYTE, BIT)."),
    spec("bitop", -4, WD, (2, -1, 1), "bitmap", "AND, OR, XOR or NOT of strings, stored."),
    spec("bitfield", -2, WD, K1, "bitmap", "Integers at bit offsets: GET, SET, INCRBY, OVERFLOW."),
    spec("bitfield_ro", -2, RS, K1, "bitmap", "Integers at bit offsets: GET."),
    // Hashes.
    spec("hset", -4, WD, K1, "hash", "Sets fields of a hash."),
    spec("hmset", -4, WD, K1, "hash", "Sets fields of a hash (replies OK)."),
    spec("hsetnx", 4, WD, K1, "hash", "Sets a field of a hash if it does not exist."),
    spec("hget", 3, R, K1, "hash", "Returns a field of a hash."),
    spec("hmget", -3, R, K1, "hash", "Returns fields of a hash."),
    spec("hdel", -3, WF, K1, "hash", "Deletes fields of a hash."),
    spec("hgetall", 2, RS, K1, "hash", "Returns every field and value of a hash."),
    spec("hkeys", 2, RS, K1, "hash", "Returns every field of a hash."),
    spec("hvals", 2, RS, K1, "hash", "Returns every value of a hash."),
    spec("hexists", 3, R, K1, "hash", "Whether a hash has a field."),
    spec("hlen", 2, R, K1, "hash", "Counts the fields of a hash."),
    spec("hstrlen", 3, R, K1, "hash", "The length of a field's value."),
    spec("hincrby", 4, WD, K1, "hash", "Adds to an integer field."),
    spec("hincrbyfloat", 4, WD, K1, "hash", "Adds to a floating-point field."),
    spec("hrandfield", -2, RS, K1, "hash", "Fields at random (WITHVALUES)."),
    spec("hscan", -3, RS, K1, "hash", "Iterates over the fields and values of a hash."),
    // Lists.
    spec("lpush", -3, WD, K1, "list", "Pushes elements at the head of a list."),
    spec("rpush", -3, WD, K1, "list", "Pushes elements at the tail of a list."),
    spec("lpushx", -3, WD, K1, "list", "Pushes elements at the head of an existing list."),
    spec("rpushx", -3, WD, K1, "list", "Pushes elements at the tail of an existing list."),
    spec("lpop", -2, WF, K1, "list", "Pops elements from the head of a list."),
    spec("rpop", -2, WF, K1, "list", "Pops elements from the tail of a list."),
    spec("llen", 2, R, K1, "list", "The length of a list."),
    spec("lrange", 4, RS, K1, "list", "A range of a list's elements."),
    spec("lindex", 3, RS, K1, "list", "The element at an index."),
    spec("lset", 4, WD, K1, "list", "Sets the element at an index."),
    spec("linsert", 5, WD, K1, "list", "Inserts an element before or after another."),
    spec("lrem", 4, W, K1, "list", "Removes elements equal to one."),
    spec("ltrim", 4, W, K1, "list", "Keeps only a range of a list."),
    spec("lpos", -3, RS, K1, "list", "The index of matching elements (RANK, COUNT, MAXLEN)."),
    spec("lmove", 5, WD, K2, "list", "Pops an element from one list and pushes it onto another."),
    spec("rpoplpush", 3, WD, K2, "list", "Pops from the tail of one list and pushes onto the head of another."),
    spec("lmpop", -4, W, NO, "list", "Pops elements from the first non-empty list of several."),
    spec("blpop", -3, WB, KBUTLAST, "list", "Pops from the head of the first non-empty list, waiting for one."),
    spec("brpop", -3, WB, KBUTLAST, "list", "Pops from the tail of the first non-empty list, waiting for one."),
    spec("blmove", 6, WB, K2, "list", "LMOVE, waiting for an element."),
    spec("brpoplpush", 4, WB, K2, "list", "RPOPLPUSH, waiting for an element."),
    spec("blmpop", -5, WB, NO, "list", "LMPOP, waiting for an element."),
    // Sets.
    spec("sadd", -3, WD, K1, "set", "Adds members to a set."),
    spec("srem", -3, WF, K1, "set", "Removes members from a set."),
    spec("smembers", 2, RS, K1, "set", "Every member of a set."),
    spec("sismember", 3, R, K1, "set", "Whether a member is in a set."),
    spec("smismember", -3, R, K1, "set", "Whether each member is in a set."),
    spec("scard", 2, R, K1, "set", "The number of members of a set."),
    spec("spop", -2, WF, K1, "set", "Removes and returns members at random."),
    spec("srandmember", -2, RS, K1, "set", "Members at random."),
    spec("smove", 4, WF, K2, "set", "Moves a member from one set to another."),
    spec("sinter", -2, RS, KALL, "set", "The intersection of sets."),
    spec("sunion", -2, RS, KALL, "set", "The union of sets."),
    spec("sdiff", -2, RS, KALL, "set", "The difference of sets."),
    spec("sinterstore", -3, WD, KALL, "set", "Stores the intersection of sets."),
    spec("sunionstore", -3, WD, KALL, "set", "Stores the union of sets."),
    spec("sdiffstore", -3, WD, KALL, "set", "Stores the difference of sets."),
    spec("sintercard", -3, RS, NO, "set", "The size of the intersection of sets (LIMIT)."),
    spec("sscan", -3, RS, K1, "set", "Iterates over the members of a set."),
    // Sorted sets.
    spec("zadd", -4, WD, K1, "sorted-set", "Adds members with scores (NX, XX, GT, LT, CH, INCR)."),
    spec("zincrby", 4, WD, K1, "sorted-set", "Adds to a member's score."),
    spec("zrem", -3, WF, K1, "sorted-set", "Removes members."),
    spec("zcard", 2, R, K1, "sorted-set", "The number of members."),
    spec("zscore", 3, R, K1, "sorted-set", "A member's score."),
    spec("zmscore", -3, R, K1, "sorted-set", "Members' scores."),
    spec("zrank", -3, R, K1, "sorted-set", "A member's rank, lowest score first (WITHSCORE)."),
    spec("zrevrank", -3, R, K1, "sorted-set", "A member's rank, highest score first (WITHSCORE)."),
    spec("zrange", -4, RS, K1, "sorted-set", "Members by rank, score or lex (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES)."),
    spec("zrangestore", -5, WD, K2, "sorted-set", "Stores a range of a sorted set."),
    spec("zrangebyscore", -4, RS, K1, "sorted-set", "Members by score."),
    spec("zrevrangebyscore", -4, RS, K1, "sorted-set", "Members by score, highest first."),
    spec("zrangebylex", -4, RS, K1, "sorted-set", "Members by lex range."),
    spec("zrevrangebylex", -4, RS, K1, "sorted-set", "Members by lex range, last first."),
    spec("zrevrange", -4, RS, K1, "sorted-set", "Members by rank, highest score first."),
    spec("zcount", 4, R, K1, "sorted-set", "Counts members with a score in a range."),
    spec("zlexcount", 4, R, K1, "sorted-set", "Counts members in a lex range."),
    spec("zpopmin", -2, WF, K1, "sorted-set", "Removes and returns the lowest-scored members."),
    spec("zpopmax", -2, WF, K1, "sorted-set", "Removes and returns the highest-scored members."),
    spec("zmpop", -4, W, NO, "sorted-set", "Pops from the first non-empty sorted set of several."),
    spec("bzpopmin", -3, WB, KBUTLAST, "sorted-set", "ZPOPMIN of the first non-empty sorted set, waiting for one."),
    spec("bzpopmax", -3, WB, KBUTLAST, "sorted-set", "ZPOPMAX of the first non-empty sorted set, waiting for one."),
    spec("bzmpop", -5, WB, NO, "sorted-set", "ZMPOP, waiting for a member."),
    spec("zremrangebyscore", 4, W, K1, "sorted-set", "Removes members with a score in a range."),
    spec("zremrangebyrank", 4, W, K1, "sorted-set", "Removes members in a rank range."),
    spec("zremrangebylex", 4, W, K1, "sorted-set", "Removes members in a lex range."),
    spec("zunion", -3, RS, NO, "sorted-set", "The union of sorted sets (WEIGHTS, AGGREGATE, WITHSCORES)."),
    spec("zinter", -3, RS, NO, "sorted-set", "The intersection of sorted sets."),
    spec("zdiff", -3, RS, NO, "sorted-set", "The difference of sorted sets."),
    spec("zunionstore", -4, WD, K1, "sorted-set", "Stores the union of sorted sets."),
    spec("zinterstore", -4, WD, K1, "sorted-set", "Stores the intersection of sorted sets."),
    spec("zdiffstore", -4, WD, K1, "sorted-set", "Stores the difference of sorted sets."),
    spec("zintercard", -3, RS, NO, "sorted-set", "The size of the intersection of sorted sets (LIMIT)."),
    spec("zrandmember", -2, RS, K1, "sorted-set", "Members at random (WITHSCORES)."),
    spec("zscan", -3, RS, K1, "sorted-set", "Iterates over members and scores."),
    spec("geoadd", -5, WD, K1, "geo", "Adds points (longitude, latitude, member) to a GEO key (NX, XX, CH)."),
    spec("geopos", -2, R, K1, "geo", "The longitude and latitude of members."),
    spec("geohash", -2, R, K1, "geo", "The 11-character geohash of members."),
    spec("geodist", -4, R, K1, "geo", "The distance between two members (M, KM, FT, MI)."),
    spec("georadius", -6, WD, K1, "geo", "Members within a radius of a point (STORE, STOREDIST)."),
    spec("georadius_ro", -6, RS, K1, "geo", "Members within a radius of a point."),
    spec("georadiusbymember", -5, WD, K1, "geo", "Members within a radius of a member (STORE, STOREDIST)."),
    spec("georadiusbymember_ro", -5, RS, K1, "geo", "Members within a radius of a member."),
    spec("geosearch", -7, RS, K1, "geo", "Members within a radius or box (FROMMEMBER, FROMLONLAT, BYRADIUS, BYBOX)."),
    spec("geosearchstore", -8, WD, K2, "geo", "GEOSEARCH into a sorted set (STOREDIST)."),
    // Streams.
    spec("xadd", -5, WD, K1, "stream", "Appends an entry (NOMKSTREAM, MAXLEN, MINID, LIMIT, *, ms-*)."),
    spec("xlen", 2, R, K1, "stream", "The number of entries."),
    spec("xrange", -4, RS, K1, "stream", "Entries in an ID range (COUNT)."),
    spec("xrevrange", -4, RS, K1, "stream", "Entries in an ID range, last first (COUNT)."),
    spec("xdel", -3, WF, K1, "stream", "Deletes entries."),
    spec("xtrim", -4, W, K1, "stream", "Trims a stream (MAXLEN, MINID, =, ~, LIMIT)."),
    spec("xread", -4, RB, NO, "stream", "Reads entries after IDs from streams (COUNT, BLOCK)."),
    spec("xsetid", -3, WD, K1, "stream", "Sets a stream's last ID (ENTRIESADDED, MAXDELETEDID)."),
    spec("xgroup", -2, WD, NO, "stream", "CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER of consumer groups."),
    spec("xreadgroup", -7, WB, NO, "stream", "Reads entries as a consumer of a group (COUNT, BLOCK, NOACK)."),
    spec("xack", -4, WF, K1, "stream", "Acknowledges entries of a group."),
    spec("xpending", -3, RS, K1, "stream", "A group's pending entries (IDLE, range, COUNT, consumer)."),
    spec("xclaim", -6, WF, K1, "stream", "Claims pending entries for a consumer."),
    spec("xautoclaim", -6, WF, K1, "stream", "Claims idle pending entries, scanning from an ID."),
    spec("xinfo", -2, RS, NO, "stream", "STREAM, GROUPS, CONSUMERS."),
    // The keyspace.
    spec("del", -2, W, KALL, "generic", "Deletes keys of any type, each in one write."),
    spec("unlink", -2, WF, KALL, "generic", "Deletes keys (as DEL)."),
    spec("exists", -2, R, KALL, "generic", "Counts the keys that exist."),
    spec("touch", -2, R, KALL, "generic", "Counts the keys that exist."),
    spec("type", 2, R, K1, "generic", "The type of a key."),
    spec("rename", 3, W, K2, "generic", "Renames a key."),
    spec("renamenx", 3, WF, K2, "generic", "Renames a key if the new name is free."),
    spec("copy", -3, WD, K2, "generic", "Copies a key (DB 0, REPLACE)."),
    spec("memory", -2, RS, NO, "server", "MEMORY USAGE of a key (SAMPLES)."),
    spec("object", -2, RS, NO, "generic", "ENCODING, FREQ, IDLETIME, REFCOUNT of a key."),
    spec("scan", -2, RS, NO, "generic", "Iterates over the keys (MATCH, COUNT, TYPE)."),
    spec("keys", 2, RS, NO, "generic", "The keys that match a pattern."),
    spec("randomkey", 1, RS, NO, "generic", "A key from a random place in the key space."),
    spec("dbsize", 1, RS, NO, "server", "Counts the keys (reads them all)."),
    spec("dump", 2, RS, K1, "generic", "A key in a form RESTORE takes (Stria's own, not Redis's RDB)."),
    spec("restore", -4, WD, K1, "generic", "Makes a key from DUMP's form, or a Redis server's of a string or stream (REPLACE, ABSTTL, IDLETIME, FREQ)."),
    spec("migrate", -6, W, (3, 3, 1), "generic", "Moves keys to another Stria server (COPY, REPLACE, AUTH, AUTH2, KEYS)."),
    spec("sort", -2, WD, K1, "generic", "Sorts a list, set or sorted set (BY, LIMIT, GET, ASC, DESC, ALPHA, STORE)."),
    spec("sort_ro", -2, RS, K1, "generic", "Sorts a list, set or sorted set, read-only."),
    spec("flushall", -1, W, NO, "server", "Deletes every key, in one write."),
    spec("flushdb", -1, W, NO, "server", "Deletes every key, in one write (as FLUSHALL)."),
    // Expiry.
    spec("expire", -3, WF, K1, "generic", "Sets a key's expiry in seconds (NX, XX, GT, LT)."),
    spec("pexpire", -3, WF, K1, "generic", "Sets a key's expiry in milliseconds (NX, XX, GT, LT)."),
    spec("expireat", -3, WF, K1, "generic", "Sets a key's expiry to a Unix time in seconds."),
    spec("pexpireat", -3, WF, K1, "generic", "Sets a key's expiry to a Unix time in milliseconds."),
    spec("ttl", 2, R, K1, "generic", "A key's time to live in seconds."),
    spec("pttl", 2, R, K1, "generic", "A key's time to live in milliseconds."),
    spec("expiretime", 2, R, K1, "generic", "A key's expiry as a Unix time in seconds."),
    spec("pexpiretime", 2, R, K1, "generic", "A key's expiry as a Unix time in milliseconds."),
    spec("persist", 2, WF, K1, "generic", "Removes a key's expiry."),
    // The server.
    spec("info", -1, LOADING, NO, "server", "What the appliance is doing."),
    spec("config", -2, ADMIN, NO, "server", "CONFIG GET of the settings clients ask about."),
    spec("command", -1, LOADING, NO, "server", "COUNT, DOCS, INFO, LIST, GETKEYS, GETKEYSANDFLAGS."),
    spec("time", 1, A, NO, "server", "The server's time: seconds and microseconds."),
    spec("function", -2, SCRIPTING, NO, "scripting", "LOAD, DELETE, FLUSH, LIST, DUMP, RESTORE, STATS, KILL: Lua function libraries, stored durably."),
    spec("fcall", -3, SCRIPTING, NO, "scripting", "Calls a function of a library."),
    spec("fcall_ro", -3, SCRIPTING, NO, "scripting", "Calls a function that does not write."),
    spec("eval", -3, SCRIPTING, NO, "scripting", "Runs a Lua script, atomically and as one WAL group."),
    spec("evalsha", -3, SCRIPTING, NO, "scripting", "Runs a cached Lua script by its SHA1."),
    spec("eval_ro", -3, SCRIPTING, NO, "scripting", "Runs a Lua script that does not write."),
    spec("evalsha_ro", -3, SCRIPTING, NO, "scripting", "Runs a cached Lua script that does not write."),
    spec("script", -2, SCRIPTING, NO, "scripting", "LOAD, EXISTS, FLUSH, KILL: the script cache."),
    spec("wait", 3, &[], NO, "generic", "Waits for replicas: Stria has none, so 0 at once."),
    spec("waitaof", 4, &["noscript"], NO, "generic", "Waits until this connection's writes are durable (sync)."),
    spec("shutdown", -1, ADMINNS, NO, "server", "Stops the server cleanly."),
    spec("stria.device", 3, ADMINNS, NO, "server", "REPLACE name: puts a new device where the WAL lost one, while serving."),
    spec("save", 1, ADMINNS, NO, "server", "Returns once every write applied before it is durable."),
    spec("bgsave", -1, ADMINNS, NO, "server", "Makes every write applied durable, replying at once."),
    spec("slowlog", -2, ADMIN, NO, "server", "GET, LEN, RESET, HELP: Stria keeps no slow log (INFO latencystats)."),
    spec("module", -2, ADMIN, NO, "server", "LIST, HELP: Stria loads no modules."),
    spec("cluster", -2, &["stale"], NO, "server", "Every subcommand: this instance has cluster support disabled (Stria is one node)."),
    spec("lastsave", 1, A, NO, "server", "Now: every acknowledged write is on the devices."),
    spec("monitor", 1, MONITOR, NO, "server", "Shows every command the server runs from now on."),
    spec("acl", -2, ACL, NO, "server", "SETUSER, GETUSER, DELUSER, USERS, LIST, WHOAMI, CAT, GENPASS, DRYRUN: users stored durably."),
    spec("reset", 1, ANS, NO, "connection", "Resets the connection: RESP2, default durability, no name, no transaction."),
    // Pub/sub.
    spec("subscribe", -2, PS, NO, "pubsub", "Listens for messages published to channels."),
    spec("unsubscribe", -1, PS, NO, "pubsub", "Stops listening to channels (all, without arguments)."),
    spec("psubscribe", -2, PS, NO, "pubsub", "Listens for messages published to channels matching patterns."),
    spec("punsubscribe", -1, PS, NO, "pubsub", "Stops listening to patterns (all, without arguments)."),
    spec("ssubscribe", -2, PS, KALL, "pubsub", "Listens for messages published to shard channels."),
    spec("sunsubscribe", -1, PS, KALL, "pubsub", "Stops listening to shard channels (all, without arguments)."),
    spec("publish", 3, PUB, NO, "pubsub", "Posts a message to a channel: how many clients got it."),
    spec("spublish", 3, PUB, K1, "pubsub", "Posts a message to a shard channel."),
    spec("pubsub", -2, PUB, NO, "pubsub", "CHANNELS, NUMSUB, NUMPAT, SHARDCHANNELS, SHARDNUMSUB."),
    // Transactions.
    spec("multi", 1, TX, NO, "transactions", "Starts a transaction: commands queue until EXEC."),
    spec("exec", 1, TX, NO, "transactions", "Runs the queued commands as one, in one WAL group."),
    spec("discard", 1, TX, NO, "transactions", "Drops the queued commands."),
    spec("watch", -2, TX, KALL, "transactions", "Aborts the next EXEC if any of these keys is written first."),
    spec("unwatch", 1, TX, NO, "transactions", "Forgets the watched keys."),
];

pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    position(name).map(|i| &COMMANDS[i])
}

/// Where command `name` (any case) is in [`COMMANDS`]: one hash lookup
/// of the name lowercased on the stack.
pub fn position(name: &[u8]) -> Option<usize> {
    static INDEX: OnceLock<HashMap<&'static [u8], usize, BytesHash>> = OnceLock::new();
    let index = INDEX.get_or_init(|| {
        COMMANDS
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_bytes(), i))
            .collect()
    });
    let mut buf = [0u8; 32];
    let lower = buf.get_mut(..name.len())?;
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    index.get(&*lower).copied()
}

/// Whether a script may not run `args` (a command of `spec`): what the
/// command table flags `noscript`, and CLUSTER RESET (the one CLUSTER
/// subcommand Redis refuses in scripts).
pub fn noscript(spec: &Spec, args: &[Vec<u8>]) -> bool {
    spec.flags.contains(&"noscript")
        || (spec.name == "cluster"
            && args
                .get(1)
                .is_some_and(|a| a.eq_ignore_ascii_case(b"reset")))
}

/// Commands ACL's `@dangerous` holds besides the admin ones.
const DANGEROUS: &[&str] = &[
    "flushall", "flushdb", "keys", "sort", "migrate", "info", "client", "config", "monitor",
    "shutdown", "save", "bgsave", "lastsave", "role", "slowlog", "module", "waitaof",
];

/// The ACL categories of a command (`+@read`, `-@dangerous`), from its
/// group and flags: the command table is their one source.
pub fn categories(spec: &Spec) -> Vec<&'static str> {
    let mut out = Vec::new();
    out.push(match spec.group {
        "string" => "string",
        "bitmap" => "bitmap",
        "hash" => "hash",
        "list" => "list",
        "set" => "set",
        "sorted-set" => "sortedset",
        "stream" => "stream",
        "geo" => "geo",
        "generic" => "keyspace",
        "pubsub" => "pubsub",
        "connection" => "connection",
        "transactions" => "transaction",
        "scripting" => "scripting",
        _ => "",
    });
    let has = |f: &str| spec.flags.contains(&f);
    if has("write") {
        out.push("write");
    }
    if has("readonly") {
        out.push("read");
    }
    out.push(if has("fast") { "fast" } else { "slow" });
    if has("blocking") {
        out.push("blocking");
    }
    if has("pubsub") && !out.contains(&"pubsub") {
        out.push("pubsub");
    }
    if has("admin") {
        out.push("admin");
    }
    if has("admin") || DANGEROUS.contains(&spec.name) {
        out.push("dangerous");
    }
    out.retain(|c| !c.is_empty());
    out
}
