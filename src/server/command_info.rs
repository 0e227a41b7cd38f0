//! COMMAND: the command table as clients see it. Its entries (COMMAND,
//! COMMAND INFO) are Redis's ten fields: name, arity, flags, first key,
//! last key, step, ACL categories, tips, key specs (none given) and
//! subcommands (the container commands' own entries, `config|get`).
//! COMMAND LIST names the subcommands too; COMMAND COUNT counts the
//! commands only, as Redis does.

use super::cmd::syntax_error;
use super::command::show;
use super::keyspecs::{has_keys, key_positions, keys_optional, movable};
use super::resp::Reply;
use super::subcommands::{lookup_full, lookup_request, subcommands_of};
use super::table::{categories, Spec, COMMANDS};

/// COMMAND GETKEYS and GETKEYSANDFLAGS: the keys of request `cmd`, and
/// what it does with each when `flags`.
fn getkeys(cmd: &[Vec<u8>], flags: bool) -> Reply {
    let Some(spec) = lookup_request(cmd) else {
        return Reply::err("Invalid command specified");
    };
    if !has_keys(spec) {
        return Reply::err("The command has no key arguments");
    }
    let n = cmd.len() as i32;
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        return Reply::err("Invalid number of arguments specified for command");
    }
    let keys = key_positions(spec, cmd);
    if keys.is_empty() && !keys_optional(spec) {
        return Reply::err("Invalid arguments specified for command");
    }
    Reply::Array(
        keys.into_iter()
            .map(|(i, f)| {
                let key = Reply::Bulk(cmd[i].clone());
                if flags {
                    let f = f.iter().map(|f| Reply::Status(f)).collect();
                    Reply::Array(vec![key, Reply::Array(f)])
                } else {
                    key
                }
            })
            .collect(),
    )
}

/// A command's (or subcommand's) COMMAND INFO entry.
fn entry(c: &Spec) -> Reply {
    let mut flags: Vec<Reply> = c.flags.iter().map(|f| Reply::Status(f)).collect();
    if keys_optional(c) {
        flags.push(Reply::Status("no_mandatory_keys"));
    }
    if movable(c) {
        flags.push(Reply::Status("movablekeys"));
    }
    Reply::Array(vec![
        Reply::bulk(c.name),
        Reply::Int(c.arity as i64),
        Reply::Array(flags),
        Reply::Int(c.keys.0 as i64),
        Reply::Int(c.keys.1 as i64),
        Reply::Int(c.keys.2 as i64),
        Reply::Array(
            categories(c)
                .into_iter()
                .map(|cat| Reply::Simple(format!("@{cat}")))
                .collect(),
        ),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
        Reply::Array(subcommands_of(c.name).map(entry).collect()),
    ])
}

/// A command's COMMAND DOCS entry.
fn docs(c: &Spec) -> (Reply, Reply) {
    let mut fields = vec![
        (Reply::bulk("summary"), Reply::bulk(c.summary)),
        (Reply::bulk("since"), Reply::bulk("1.0.0")),
        (Reply::bulk("group"), Reply::bulk(c.group)),
    ];
    let subs: Vec<(Reply, Reply)> = subcommands_of(c.name).map(docs).collect();
    if !subs.is_empty() {
        fields.push((Reply::bulk("subcommands"), Reply::Map(subs)));
    }
    (Reply::bulk(c.name), Reply::Map(fields))
}

/// Every command and subcommand, each container followed by its
/// subcommands.
fn every_name() -> impl Iterator<Item = &'static Spec> {
    COMMANDS
        .iter()
        .flat_map(|c| std::iter::once(c).chain(subcommands_of(c.name)))
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob].
fn list(args: &[Vec<u8>]) -> Reply {
    let names = |keep: &dyn Fn(&Spec) -> bool| {
        Reply::Array(
            every_name()
                .filter(|c| keep(c))
                .map(|c| Reply::bulk(c.name))
                .collect(),
        )
    };
    match args {
        [] => names(&|_| true),
        [by, kind, arg] if by.eq_ignore_ascii_case(b"filterby") => {
            match kind.to_ascii_lowercase().as_slice() {
                // Stria loads no modules: no command is a module's.
                b"module" => Reply::Array(vec![]),
                b"aclcat" => {
                    let cat = String::from_utf8_lossy(arg).to_ascii_lowercase();
                    names(&|c| categories(c).contains(&cat.as_str()))
                }
                b"pattern" => {
                    let pattern = arg.to_ascii_lowercase();
                    names(&|c| super::glob::matches(&pattern, c.name.as_bytes()))
                }
                _ => syntax_error(),
            }
        }
        _ => syntax_error(),
    }
}

/// COMMAND and its subcommands.
pub fn command(args: &[Vec<u8>]) -> Reply {
    let Some(sub) = args.first().map(|a| a.to_ascii_lowercase()) else {
        return Reply::Array(COMMANDS.iter().map(entry).collect());
    };
    match (sub.as_slice(), args.len()) {
        (b"count", 1) => Reply::Int(COMMANDS.len() as i64),
        (b"help", 1) => super::help::command(),
        (b"getkeys", n) if n >= 2 => getkeys(&args[1..], false),
        (b"getkeysandflags", n) if n >= 2 => getkeys(&args[1..], true),
        (b"list", _) => list(&args[1..]),
        (b"info", 1) => Reply::Array(COMMANDS.iter().map(entry).collect()),
        (b"info", _) => Reply::Array(
            args[1..]
                .iter()
                .map(|n| lookup_full(n).map_or(Reply::Nil, entry))
                .collect(),
        ),
        (b"docs", 1) => Reply::Map(COMMANDS.iter().map(docs).collect()),
        (b"docs", _) => Reply::Map(
            args[1..]
                .iter()
                .filter_map(|n| lookup_full(n))
                .map(docs)
                .collect(),
        ),
        (b"count" | b"help" | b"getkeys" | b"getkeysandflags", _) => Reply::err(format!(
            "wrong number of arguments for 'command|{}' command",
            show(&sub)
        )),
        _ => Reply::err(format!(
            "unknown subcommand '{}'. Try COMMAND HELP.",
            show(&args[0])
        )),
    }
}
