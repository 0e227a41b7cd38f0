//! The subcommands of the container commands (CLIENT LIST, CONFIG GET,
//! XGROUP CREATE, ...), as COMMAND tells clients: each is named
//! `parent|sub`, with its own arity (the parent's name counted), flags
//! and keys. The parent's handler runs them; this table describes them
//! for COMMAND LIST, INFO, DOCS, GETKEYS and ACL's key checks.

use super::table::{lookup, spec as sub, Spec, NO};

const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const CONN: &[&str] = &["noscript", "loading", "stale"];
const HELP: &[&str] = &["loading", "stale"];
const SCRIPT: &[&str] = &["noscript"];
const SCRIPT_WRITE: &[&str] = &["write", "noscript"];
const SCRIPT_LOAD: &[&str] = &["write", "denyoom", "noscript"];
const SCRIPT_BUSY: &[&str] = &["noscript", "allow_busy"];
const PUBSUB: &[&str] = &["pubsub", "loading", "stale"];
const SLOWLOG: &[&str] = &["admin", "loading", "stale"];
const MODULE: &[&str] = &["admin", "noscript"];
const MODULE_LOAD: &[&str] = &["admin", "noscript", "no_async_loading"];
const READ: &[&str] = &["readonly"];
const WRITE: &[&str] = &["write"];
const WRITE_OOM: &[&str] = &["write", "denyoom"];
const STALE: &[&str] = &["stale"];
const STALE_LOADING: &[&str] = &["loading", "stale"];

/// The key right after the subcommand's name.
const K2: (i32, i32, i32) = (2, 2, 1);

/// Every subcommand, by parent, in name order.
#[rustfmt::skip]
pub static SUBCOMMANDS: &[Spec] = &[
    sub("acl|cat", -2, CONN, NO, "server", "The ACL categories, or the commands of one."),
    sub("acl|deluser", -3, ADMIN, NO, "server", "Deletes users."),
    sub("acl|dryrun", -4, ADMIN, NO, "server", "Whether a user may run a command."),
    sub("acl|genpass", -2, CONN, NO, "server", "A random password."),
    sub("acl|getuser", 3, ADMIN, NO, "server", "A user's rules."),
    sub("acl|help", 2, HELP, NO, "server", "What the ACL subcommands do."),
    sub("acl|list", 2, ADMIN, NO, "server", "Every user's rules."),
    sub("acl|load", 2, ADMIN, NO, "server", "Nothing to load: users are stored durably."),
    sub("acl|log", -2, ADMIN, NO, "server", "The ACL log: empty."),
    sub("acl|save", 2, ADMIN, NO, "server", "Nothing to save: users are stored durably."),
    sub("acl|setuser", -3, ADMIN, NO, "server", "Creates or changes a user."),
    sub("acl|users", 2, ADMIN, NO, "server", "The users' names."),
    sub("acl|whoami", 2, CONN, NO, "server", "The connection's user."),
    sub("client|caching", 3, CONN, NO, "connection", "Tracks or skips the next command's keys (OPTIN, OPTOUT)."),
    sub("client|getname", 2, CONN, NO, "connection", "The connection's name."),
    sub("client|getredir", 2, CONN, NO, "connection", "Where tracking invalidations go."),
    sub("client|help", 2, HELP, NO, "connection", "What the CLIENT subcommands do."),
    sub("client|id", 2, CONN, NO, "connection", "The connection's id."),
    sub("client|info", 2, CONN, NO, "connection", "The connection, as CLIENT LIST shows it."),
    sub("client|list", -2, ADMIN, NO, "connection", "Every connection."),
    sub("client|no-evict", 3, ADMIN, NO, "connection", "Accepted: Stria evicts no client."),
    sub("client|no-touch", 3, CONN, NO, "connection", "Whether the connection's reads leave keys' access times."),
    sub("client|reply", 3, CONN, NO, "connection", "ON, OFF or SKIP the replies."),
    sub("client|setinfo", 4, CONN, NO, "connection", "Accepted: the client library's name and version."),
    sub("client|setname", 3, CONN, NO, "connection", "Names the connection."),
    sub("client|tracking", -3, CONN, NO, "connection", "Invalidation messages for the keys read (BCAST, PREFIX, REDIRECT, OPTIN, OPTOUT, NOLOOP)."),
    sub("client|trackinginfo", 2, CONN, NO, "connection", "The connection's tracking."),
    sub("client|unblock", -3, ADMIN, NO, "connection", "Ends another connection's blocking command (TIMEOUT, ERROR)."),
    sub("cluster|help", 2, STALE_LOADING, NO, "server", "Refused: Stria is not a cluster."),
    sub("cluster|info", 2, STALE, NO, "server", "Refused: Stria is not a cluster."),
    sub("cluster|keyslot", 3, STALE, NO, "server", "Refused: Stria is not a cluster."),
    sub("cluster|myid", 2, STALE, NO, "server", "Refused: Stria is not a cluster."),
    sub("cluster|nodes", 2, STALE, NO, "server", "Refused: Stria is not a cluster."),
    sub("cluster|shards", 2, STALE_LOADING, NO, "server", "Refused: Stria is not a cluster."),
    sub("cluster|slots", 2, STALE_LOADING, NO, "server", "Refused: Stria is not a cluster."),
    sub("command|count", 2, HELP, NO, "server", "The number of commands."),
    sub("command|docs", -2, HELP, NO, "server", "What commands do."),
    sub("command|getkeys", -3, HELP, NO, "server", "The keys of a request."),
    sub("command|getkeysandflags", -3, HELP, NO, "server", "The keys of a request and what it does with each."),
    sub("command|help", 2, HELP, NO, "server", "What the COMMAND subcommands do."),
    sub("command|info", -2, HELP, NO, "server", "Commands' arity, flags, keys and ACL categories."),
    sub("command|list", -2, HELP, NO, "server", "The commands' names (FILTERBY MODULE, ACLCAT, PATTERN)."),
    sub("config|get", -3, ADMIN, NO, "server", "Settings matching patterns."),
    sub("config|help", 2, HELP, NO, "server", "What the CONFIG subcommands do."),
    sub("config|resetstat", 2, ADMIN, NO, "server", "Resets the statistics INFO shows."),
    sub("config|rewrite", 2, ADMIN, NO, "server", "Refused: Stria is configured by its device map."),
    sub("config|set", -4, ADMIN, NO, "server", "Changes settings."),
    sub("function|delete", 3, SCRIPT_WRITE, NO, "scripting", "Deletes a library."),
    sub("function|dump", 2, SCRIPT, NO, "scripting", "Every library, in a form FUNCTION RESTORE takes."),
    sub("function|flush", -2, SCRIPT_WRITE, NO, "scripting", "Deletes every library."),
    sub("function|help", 2, HELP, NO, "scripting", "What the FUNCTION subcommands do."),
    sub("function|kill", 2, SCRIPT_BUSY, NO, "scripting", "Stops a running function."),
    sub("function|list", -2, SCRIPT, NO, "scripting", "The libraries and their functions."),
    sub("function|load", -3, SCRIPT_LOAD, NO, "scripting", "Loads a library."),
    sub("function|restore", -3, SCRIPT_LOAD, NO, "scripting", "Loads libraries from FUNCTION DUMP's form."),
    sub("function|stats", 2, SCRIPT_BUSY, NO, "scripting", "The running function and the engines."),
    sub("memory|help", 2, HELP, NO, "server", "What the MEMORY subcommands do."),
    sub("memory|usage", -3, READ, K2, "server", "The bytes a key takes."),
    sub("module|help", 2, HELP, NO, "server", "What the MODULE subcommands do."),
    sub("module|list", 2, MODULE, NO, "server", "The modules loaded: none."),
    sub("module|load", -3, MODULE_LOAD, NO, "server", "Refused: Stria loads no modules."),
    sub("module|loadex", -3, MODULE_LOAD, NO, "server", "Refused: Stria loads no modules."),
    sub("module|unload", 3, MODULE_LOAD, NO, "server", "Refused: Stria loads no modules."),
    sub("object|encoding", 3, READ, K2, "generic", "How a key is stored."),
    sub("object|freq", 3, READ, K2, "generic", "A key's access frequency: Stria keeps none (0)."),
    sub("object|help", 2, HELP, NO, "generic", "What the OBJECT subcommands do."),
    sub("object|idletime", 3, READ, K2, "generic", "Seconds since a key was last read or written."),
    sub("object|refcount", 3, READ, K2, "generic", "A key's reference count (1)."),
    sub("pubsub|channels", -2, PUBSUB, NO, "pubsub", "The channels with subscribers."),
    sub("pubsub|help", 2, HELP, NO, "pubsub", "What the PUBSUB subcommands do."),
    sub("pubsub|numpat", 2, PUBSUB, NO, "pubsub", "The number of pattern subscriptions."),
    sub("pubsub|numsub", -2, PUBSUB, NO, "pubsub", "The subscribers of channels."),
    sub("pubsub|shardchannels", -2, PUBSUB, NO, "pubsub", "The shard channels with subscribers."),
    sub("pubsub|shardnumsub", -2, PUBSUB, NO, "pubsub", "The subscribers of shard channels."),
    sub("script|exists", -3, SCRIPT, NO, "scripting", "Whether scripts are cached."),
    sub("script|flush", -2, SCRIPT, NO, "scripting", "Empties the script cache."),
    sub("script|help", 2, HELP, NO, "scripting", "What the SCRIPT subcommands do."),
    sub("script|kill", 2, SCRIPT_BUSY, NO, "scripting", "Stops a running script."),
    sub("script|load", 3, &["noscript", "stale"], NO, "scripting", "Caches a script."),
    sub("slowlog|get", -2, SLOWLOG, NO, "server", "The slow log: empty."),
    sub("slowlog|help", 2, HELP, NO, "server", "What the SLOWLOG subcommands do."),
    sub("slowlog|len", 2, SLOWLOG, NO, "server", "The slow log's length: 0."),
    sub("slowlog|reset", 2, SLOWLOG, NO, "server", "Empties the slow log."),
    sub("xgroup|create", -5, WRITE_OOM, K2, "stream", "Creates a consumer group (MKSTREAM, ENTRIESREAD)."),
    sub("xgroup|createconsumer", 5, WRITE_OOM, K2, "stream", "Creates a consumer in a group."),
    sub("xgroup|delconsumer", 5, WRITE, K2, "stream", "Deletes a consumer from a group."),
    sub("xgroup|destroy", 4, WRITE, K2, "stream", "Deletes a consumer group."),
    sub("xgroup|help", 2, HELP, NO, "stream", "What the XGROUP subcommands do."),
    sub("xgroup|setid", -5, WRITE, K2, "stream", "Sets a group's last delivered ID (ENTRIESREAD)."),
    sub("xinfo|consumers", 4, READ, K2, "stream", "The consumers of a group."),
    sub("xinfo|groups", 3, READ, K2, "stream", "The groups of a stream."),
    sub("xinfo|help", 2, HELP, NO, "stream", "What the XINFO subcommands do."),
    sub("xinfo|stream", -3, READ, K2, "stream", "A stream, its groups and consumers (FULL, COUNT)."),
];

/// The subcommands of command `parent` (its table name).
pub fn subcommands_of(parent: &str) -> impl Iterator<Item = &'static Spec> + '_ {
    SUBCOMMANDS.iter().filter(move |s| {
        s.name
            .strip_prefix(parent)
            .is_some_and(|rest| rest.starts_with('|'))
    })
}

/// Whether command `parent` has subcommands.
pub fn has_subcommands(parent: &str) -> bool {
    subcommands_of(parent).next().is_some()
}

/// A command or subcommand by its full name (`get`, `config|get`, any
/// case); `None` for a name that is neither (`get|key`).
pub fn lookup_full(name: &[u8]) -> Option<&'static Spec> {
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    match lower.split_once('|') {
        None => lookup(name),
        Some(_) => SUBCOMMANDS.iter().find(|s| s.name == lower),
    }
}

/// The command or subcommand a request runs, as Redis looks it up: a
/// container's second argument names its subcommand (`None` when it
/// names none of them); a container alone is itself.
pub fn lookup_request(cmd: &[Vec<u8>]) -> Option<&'static Spec> {
    let spec = lookup(cmd.first()?)?;
    if cmd.len() < 2 || !has_subcommands(spec.name) {
        return Some(spec);
    }
    let full = format!(
        "{}|{}",
        spec.name,
        String::from_utf8_lossy(&cmd[1]).to_ascii_lowercase()
    );
    SUBCOMMANDS.iter().find(|s| s.name == full)
}
