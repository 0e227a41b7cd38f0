//! The HELP subcommands, Redis's form: a first line naming the command,
//! then each subcommand and what it does. And SLOWLOG, MODULE and
//! CLUSTER, which Stria answers as a server without a slow log, modules
//! or cluster support.

use super::resp::Reply;

/// `<NAME> <subcommand> ...` and `lines`, as Redis's HELP replies.
pub fn help(name: &str, lines: &[&str]) -> Reply {
    let mut out = vec![Reply::bulk(format!(
        "{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ))];
    out.extend(lines.iter().map(|l| Reply::bulk(*l)));
    out.push(Reply::bulk("HELP"));
    out.push(Reply::bulk("    Print this help."));
    Reply::Array(out)
}

pub fn client() -> Reply {
    help(
        "CLIENT",
        &[
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "LIST",
            "    Return information about client connections.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
        ],
    )
}

pub fn command() -> Reply {
    help(
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands in this server.",
            "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
            "    Return a list of all commands and subcommands in this server,",
            "    or those of a module, an ACL category or matching a pattern.",
            "INFO [<command-name> ...]",
            "    Return details about multiple commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full command.",
        ],
    )
}

pub fn config() -> Reply {
    help(
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
        ],
    )
}

pub fn function() -> Reply {
    help(
        "FUNCTION",
        &[
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "LIST",
            "    Return information about the functions and libraries.",
        ],
    )
}

/// SLOWLOG: Stria keeps no slow log (`INFO latencystats` has the
/// latency of each command).
pub fn slowlog(args: &[Vec<u8>]) -> Reply {
    match (args[0].to_ascii_lowercase().as_slice(), args.len()) {
        (b"get", 1 | 2) => Reply::Array(vec![]),
        (b"len", 1) => Reply::Int(0),
        (b"reset", 1) => Reply::ok(),
        (b"help", 1) => help(
            "SLOWLOG",
            &[
                "GET [<count>]",
                "    Return the slow log's entries: none (Stria keeps no slow log; INFO latencystats has each command's latency).",
                "LEN",
                "    Return the length of the slow log: 0.",
                "RESET",
                "    Reset the slow log.",
            ],
        ),
        _ => unknown("SLOWLOG", &args[0]),
    }
}

/// MODULE: Stria loads no modules.
pub fn module(args: &[Vec<u8>]) -> Reply {
    match (args[0].to_ascii_lowercase().as_slice(), args.len()) {
        (b"list", 1) => Reply::Array(vec![]),
        (b"load" | b"loadex" | b"unload", _) => Reply::err("Stria does not load modules"),
        (b"help", 1) => help(
            "MODULE",
            &["LIST", "    Return a list of loaded modules: none."],
        ),
        _ => unknown("MODULE", &args[0]),
    }
}

/// CLUSTER's subcommands and their arities (the name included), as
/// Redis 7.2 has them.
const CLUSTER: &[(&str, i32)] = &[
    ("addslots", -3),
    ("addslotsrange", -4),
    ("bumpepoch", 2),
    ("count-failure-reports", 3),
    ("countkeysinslot", 3),
    ("delslots", -3),
    ("delslotsrange", -4),
    ("failover", -2),
    ("flushslots", 2),
    ("forget", 3),
    ("getkeysinslot", 4),
    ("help", 2),
    ("info", 2),
    ("keyslot", 3),
    ("links", 2),
    ("meet", -4),
    ("myid", 2),
    ("myshardid", 2),
    ("nodes", 2),
    ("replicas", 3),
    ("replicate", 3),
    ("reset", -2),
    ("saveconfig", 2),
    ("set-config-epoch", 3),
    ("setslot", -4),
    ("shards", 2),
    ("slaves", 3),
    ("slots", 2),
];

/// CLUSTER: Stria is one node, not a cluster; every subcommand says so,
/// as a Redis started without cluster support does.
pub fn cluster(args: &[Vec<u8>]) -> Reply {
    let sub = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let Some(&(name, arity)) = CLUSTER.iter().find(|(n, _)| *n == sub) else {
        return Reply::err(format!(
            "unknown subcommand '{}'. Try CLUSTER HELP.",
            super::command::show(&args[0])
        ));
    };
    let n = args.len() as i32 + 1;
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        return Reply::err(format!(
            "wrong number of arguments for 'cluster|{name}' command"
        ));
    }
    Reply::err("This instance has cluster support disabled")
}

fn unknown(name: &str, sub: &[u8]) -> Reply {
    Reply::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {name} HELP.",
        super::command::show(sub)
    ))
}
