//! The connection's side of ACL: AUTH by user name, the check of every
//! command against the connection's user (the command, its keys, its
//! channels), and the ACL command itself.

use std::sync::Arc;

use super::user::{self, User, CATEGORIES};
use super::user_key;
use crate::server::cmd::{integer, syntax_error};
use crate::server::command::show;
use crate::server::conn::Conn;
use crate::server::keyspecs::keys_of;
use crate::server::resp::Reply;
use crate::server::table::{categories, lookup, position, Spec, COMMANDS};

/// Commands whose first argument is a subcommand that rules can name
/// (`+config|get`).
const WITH_SUBCOMMANDS: &[&str] = &[
    "acl", "client", "command", "config", "function", "memory", "object", "pubsub", "script",
    "slowlog", "xgroup", "xinfo", "module",
];

fn no_such_user(name: &[u8]) -> Reply {
    Reply::err(format!("User '{}' not found", show(name)))
}

impl<'a> Conn<'a> {
    /// The connection's user, as the ACL has it now.
    fn user_now(&mut self) -> Option<Arc<User>> {
        let g = self.shared.acl.generation();
        if g != self.user_generation {
            self.user_generation = g;
            self.user_open = false;
            self.user = self.shared.acl.get(&self.user.name)?;
        }
        self.user_open = self.user.unrestricted();
        Some(self.user.clone())
    }

    /// Becomes user `u` (AUTH, HELLO AUTH, RESET).
    pub fn become_user(&mut self, u: Arc<User>) {
        self.client
            .user
            .lock()
            .expect("client lock")
            .clone_from(&u.name);
        self.user_open = u.unrestricted();
        self.user = u;
        self.user_generation = self.shared.acl.generation();
    }

    /// AUTH [user] password.
    pub fn auth(&mut self, args: &[Vec<u8>]) -> Reply {
        let (name, given) = match args {
            [p] => (&b"default"[..], p),
            [u, p] => (u.as_slice(), p),
            _ => return syntax_error(),
        };
        if args.len() == 1 && self.shared.acl.default_open() {
            return Reply::err("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        }
        match self.shared.acl.get(&String::from_utf8_lossy(name)) {
            Some(u) if u.accepts(given) => {
                self.become_user(u);
                self.authed = true;
                Reply::ok()
            }
            _ => {
                self.shared.metrics.auth_failure();
                Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
            }
        }
    }

    /// Why the connection's user may not run this request; `None` when
    /// it may. A user deleted meanwhile may run nothing.
    pub fn acl_refusal(&mut self, spec: &Spec, args: &[Vec<u8>]) -> Option<Reply> {
        if matches!(spec.name, "auth" | "hello" | "quit" | "reset") {
            return None;
        }
        // The user of the last check, unchanged and unrestricted: the
        // usual case, without walking its rights per command.
        if self.user_open && self.shared.acl.generation() == self.user_generation {
            return None;
        }
        let Some(u) = self.user_now() else {
            self.authed = false;
            return Some(Reply::Error("NOAUTH Authentication required.".into()));
        };
        if u.unrestricted() {
            return None;
        }
        user_refusal(&u, spec, args).map(Reply::Error)
    }

    /// Whether the connection's user may run `args` (`args[0]` naming
    /// `spec`), as a script's `redis.acl_check_cmd` asks. A request of
    /// the wrong arity names no keys: only the command is checked.
    pub fn acl_allows(&mut self, spec: &Spec, args: &[Vec<u8>]) -> bool {
        let n = args.len() as i32;
        if (spec.arity > 0 && n == spec.arity) || (spec.arity < 0 && n >= -spec.arity) {
            return self.acl_refusal(spec, args).is_none();
        }
        let Some(u) = self.user_now() else {
            return false;
        };
        let at = position(spec.name.as_bytes()).expect("a command of the table");
        let sub = WITH_SUBCOMMANDS
            .contains(&spec.name)
            .then(|| args.get(1).map(Vec::as_slice))
            .flatten();
        u.unrestricted() || u.may_run(at, sub)
    }

    /// ACL SETUSER, GETUSER, DELUSER, USERS, LIST, WHOAMI, CAT, GENPASS,
    /// DRYRUN, LOG, SAVE, LOAD, HELP.
    pub fn acl_command(&mut self, args: &[Vec<u8>]) -> Reply {
        let sub = args[0].to_ascii_lowercase();
        match (sub.as_slice(), args.len()) {
            (b"setuser", n) if n >= 2 => self.acl_setuser(&args[1], &args[2..]),
            (b"getuser", 2) => match self.shared.acl.get(&String::from_utf8_lossy(&args[1])) {
                None => Reply::Nil,
                Some(u) => getuser(&u),
            },
            (b"deluser", n) if n >= 2 => self.acl_deluser(&args[1..]),
            (b"users", 1) => Reply::Array(
                self.shared
                    .acl
                    .all()
                    .iter()
                    .map(|u| Reply::bulk(u.name.clone()))
                    .collect(),
            ),
            (b"list", 1) => Reply::Array(
                self.shared
                    .acl
                    .all()
                    .iter()
                    .map(|u| Reply::bulk(u.describe()))
                    .collect(),
            ),
            (b"whoami", 1) => Reply::bulk(self.user.name.clone()),
            (b"cat", 1) => Reply::Array(CATEGORIES.iter().map(|c| Reply::bulk(*c)).collect()),
            (b"cat", 2) => {
                let cat = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
                if !CATEGORIES.contains(&cat.as_str()) {
                    return Reply::err(format!("Unknown category '{}'", show(&args[1])));
                }
                Reply::Array(
                    COMMANDS
                        .iter()
                        .filter(|c| categories(c).contains(&cat.as_str()))
                        .map(|c| Reply::bulk(c.name))
                        .collect(),
                )
            }
            (b"genpass", 1 | 2) => {
                let bits = match args.get(1).map(|b| integer(b)) {
                    None => 256,
                    Some(Some(b)) if (1..=4096).contains(&b) => b,
                    Some(_) => return Reply::err("ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"),
                };
                let chars = (bits as usize).div_ceil(4);
                let hex: String = (0..chars)
                    .map(|_| format!("{:x}", rand::random::<u8>() & 0xf))
                    .collect();
                Reply::bulk(hex)
            }
            (b"dryrun", n) if n >= 3 => {
                let Some(u) = self.shared.acl.get(&String::from_utf8_lossy(&args[1])) else {
                    return no_such_user(&args[1]);
                };
                let Some(spec) = lookup(&args[2]) else {
                    return Reply::err(format!("Command '{}' not found", show(&args[2])));
                };
                let cmd = &args[2..];
                let n = cmd.len() as i32;
                if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
                    return Reply::err(format!(
                        "wrong number of arguments for '{}' command",
                        spec.name
                    ));
                }
                match user_refusal(&u, spec, cmd) {
                    None => Reply::ok(),
                    Some(why) => Reply::bulk(
                        why.strip_prefix("NOPERM ").unwrap_or(&why).to_string(),
                    ),
                }
            }
            (b"log", 1) => Reply::Array(vec![]),
            (b"log", 2) if args[1].eq_ignore_ascii_case(b"reset") => Reply::ok(),
            (b"log", 2) => match integer(&args[1]) {
                Some(n) if n >= 0 => Reply::Array(vec![]),
                _ => Reply::err("value is out of range, must be positive"),
            },
            // The users are always stored: nothing to save or load.
            (b"save" | b"load", 1) => Reply::ok(),
            (b"help", 1) => crate::server::help::help(
                "ACL",
                &[
                    "CAT [<category>]",
                    "    List all commands that belong to <category>, or all command categories",
                    "    when no category is specified.",
                    "DELUSER <username> [<username> ...]",
                    "    Delete a list of users.",
                    "DRYRUN <username> <command> [<arg> ...]",
                    "    Returns whether the user can execute the given command without executing the command.",
                    "GETUSER <username>",
                    "    Get the user's details.",
                    "GENPASS [<bits>]",
                    "    Generate a secure 256-bit user password. The optional `bits` argument can",
                    "    be used to specify a different size.",
                    "LIST",
                    "    Show users details in config file format.",
                    "LOAD",
                    "    Reload users (Stria stores them in the engine: nothing to do).",
                    "LOG [<count> | RESET]",
                    "    Show the ACL log entries (Stria keeps none).",
                    "SAVE",
                    "    Save users (Stria stores them as they change: nothing to do).",
                    "SETUSER <username> <attribute> [<attribute> ...]",
                    "    Create or modify a user with the specified attributes.",
                    "USERS",
                    "    List all the registered usernames.",
                    "WHOAMI",
                    "    Return the current connection username.",
                ],
            ),
            _ => Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
                show(&args[0])
            )),
        }
    }

    fn acl_setuser(&mut self, name: &[u8], rules: &[Vec<u8>]) -> Reply {
        let name = String::from_utf8_lossy(name).into_owned();
        if name.is_empty() || name.contains(' ') {
            return Reply::err("Usernames can't contain spaces or null characters");
        }
        let mut u = match self.shared.acl.get(&name) {
            Some(u) => (*u).clone(),
            None => User::new(&name),
        };
        for r in rules {
            if let Err(why) = u.apply(r) {
                return Reply::err(format!(
                    "Error in ACL SETUSER modifier '{}': {why}",
                    show(r)
                ));
            }
        }
        self.write_own(vec![(user_key(&name), Some(u.describe().into_bytes()))]);
        self.shared.acl.put(u);
        Reply::ok()
    }

    fn acl_deluser(&mut self, names: &[Vec<u8>]) -> Reply {
        if names.iter().any(|n| n == b"default") {
            return Reply::err("The 'default' user cannot be removed");
        }
        let mut gone = 0;
        for n in names {
            let n = String::from_utf8_lossy(n).into_owned();
            if self.shared.acl.remove(&n) {
                self.write_own(vec![(user_key(&n), None)]);
                gone += 1;
            }
        }
        Reply::Int(gone)
    }
}

/// Why `u` may not run `args` (`args[0]` naming `spec`): Redis's NOPERM
/// error, or `None`.
fn user_refusal(u: &User, spec: &Spec, args: &[Vec<u8>]) -> Option<String> {
    let at = position(spec.name.as_bytes()).expect("a command of the table");
    let sub = WITH_SUBCOMMANDS
        .contains(&spec.name)
        .then(|| args.get(1).map(Vec::as_slice))
        .flatten();
    if !u.may_run(at, sub) {
        return Some(user::denied(u, spec, sub));
    }
    let write = spec.flags.contains(&"write");
    if keys_of(spec, args).iter().any(|k| !u.may_touch(k, write)) {
        return Some("NOPERM No permissions to access a key".into());
    }
    let channels: &[Vec<u8>] = match spec.name {
        "publish" | "spublish" => &args[1..2],
        "subscribe" | "ssubscribe" | "psubscribe" => &args[1..],
        _ => &[],
    };
    let pattern = spec.name == "psubscribe";
    if channels.iter().any(|c| !u.may_use_channel(c, pattern)) {
        return Some("NOPERM No permissions to access a channel".into());
    }
    None
}

/// ACL GETUSER's map.
fn getuser(u: &User) -> Reply {
    Reply::Map(vec![
        (
            Reply::bulk("flags"),
            Reply::Array(u.flags().into_iter().map(Reply::bulk).collect()),
        ),
        (
            Reply::bulk("passwords"),
            Reply::Array(u.passwords.iter().cloned().map(Reply::bulk).collect()),
        ),
        (Reply::bulk("commands"), Reply::bulk(u.command_rules())),
        (Reply::bulk("keys"), Reply::bulk(u.key_rules())),
        (Reply::bulk("channels"), Reply::bulk(u.channel_rules())),
        (Reply::bulk("selectors"), Reply::Array(vec![])),
    ])
}
