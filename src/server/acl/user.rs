//! An ACL user as Redis 7 defines one: on or off, its passwords (SHA-256
//! hashes, or `nopass`), the commands it may run (by name, `cmd|sub`, or
//! category), the keys it may read and write (`~p`, `%R~p`, `%W~p`), and
//! the pub/sub channels it may use (`&p`). Rules apply left to right, as
//! ACL SETUSER gives them; [`User::describe`] writes them back in the
//! form ACL LIST prints and the server stores.

use sha2::{Digest, Sha256};

use crate::server::glob;
use crate::server::table::{categories, Spec, COMMANDS};

/// A key pattern and what it allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
}

#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// SHA-256 of each password, lowercase hex.
    pub passwords: Vec<String>,
    /// Per command of the table: allowed.
    allowed: Vec<bool>,
    /// Subcommands allowed or refused apart from their command
    /// (`+config|get`, `-client|kill`).
    subcommands: Vec<(usize, Vec<u8>, bool)>,
    /// The command rules as given since the last reset of them, for
    /// ACL LIST (`+@all -debug`).
    rules: Vec<String>,
    pub keys: Vec<KeyPattern>,
    pub all_keys: bool,
    pub channels: Vec<Vec<u8>>,
    pub all_channels: bool,
}

/// The SHA-256 of a password, as ACL GETUSER shows it.
pub fn hash(password: &[u8]) -> String {
    Sha256::digest(password)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn valid_hash(h: &str) -> bool {
    h.len() == 64
        && h.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The categories a command rule can name.
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

impl User {
    /// A new user as ACL SETUSER creates one: off, no passwords, no
    /// commands, keys or channels.
    pub fn new(name: &str) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            allowed: vec![false; COMMANDS.len()],
            subcommands: Vec::new(),
            rules: vec!["-@all".into()],
            keys: Vec::new(),
            all_keys: false,
            channels: Vec::new(),
            all_channels: false,
        }
    }

    /// The `default` user: on, every command, key and channel, with the
    /// device map's password if it has one.
    pub fn default_user(password: Option<&str>) -> User {
        let mut u = User::new("default");
        for rule in ["on", "~*", "&*", "+@all"] {
            u.apply(rule.as_bytes()).expect("a valid rule");
        }
        match password {
            Some(p) => u.passwords.push(hash(p.as_bytes())),
            None => u.nopass = true,
        }
        u
    }

    /// Whether the user may run anything on anything: no check needed.
    pub fn unrestricted(&self) -> bool {
        self.all_keys
            && self.all_channels
            && self.subcommands.is_empty()
            && self.allowed.iter().all(|&a| a)
    }

    /// Whether `password` authenticates the user.
    pub fn accepts(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = hash(password);
        // Compared in full whatever matches first.
        self.passwords.iter().fold(false, |found, p| {
            found | equal_in_constant_time(p.as_bytes(), h.as_bytes())
        })
    }

    /// Whether the user may run `spec` (with `sub` its first argument).
    pub fn may_run(&self, at: usize, sub: Option<&[u8]>) -> bool {
        let apart = sub.and_then(|s| {
            self.subcommands
                .iter()
                .rev()
                .find(|(i, n, _)| *i == at && n.eq_ignore_ascii_case(s))
        });
        match apart {
            Some((_, _, allow)) => *allow,
            None => self.allowed[at],
        }
    }

    /// Whether the user may read (`write`: write) `key`.
    pub fn may_touch(&self, key: &[u8], write: bool) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|k| (if write { k.write } else { k.read }) && glob::matches(&k.pattern, key))
    }

    /// Whether the user may publish to or subscribe to `channel`
    /// (`pattern`: a PSUBSCRIBE pattern, which must be one of its own).
    pub fn may_use_channel(&self, channel: &[u8], pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|c| {
                if pattern {
                    c == channel
                } else {
                    glob::matches(c, channel)
                }
            })
    }

    fn set_command(&mut self, rule: &str, allow: bool) -> Result<(), String> {
        let name = &rule[1..];
        let unknown = || "Unknown command or category name in ACL".to_string();
        if let Some(cat) = name.strip_prefix('@') {
            let cat = cat.to_ascii_lowercase();
            if cat != "all" && !CATEGORIES.contains(&cat.as_str()) {
                return Err(unknown());
            }
            for (i, spec) in COMMANDS.iter().enumerate() {
                if cat == "all" || categories(spec).contains(&cat.as_str()) {
                    self.allowed[i] = allow;
                    self.subcommands.retain(|(c, ..)| *c != i);
                }
            }
        } else if let Some((cmd, sub)) = name.split_once('|') {
            let i = position(cmd).ok_or_else(unknown)?;
            if sub.is_empty() || sub.contains('|') {
                return Err(unknown());
            }
            let sub = sub.to_ascii_lowercase().into_bytes();
            self.subcommands.retain(|(c, s, _)| !(*c == i && *s == sub));
            self.subcommands.push((i, sub, allow));
        } else {
            let i = position(name).ok_or_else(unknown)?;
            self.allowed[i] = allow;
            self.subcommands.retain(|(c, ..)| *c != i);
        }
        Ok(())
    }

    /// Applies one ACL SETUSER rule; Redis's message when it is refused.
    pub fn apply(&mut self, rule: &[u8]) -> Result<(), String> {
        let text = String::from_utf8_lossy(rule).into_owned();
        let lower = text.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "allkeys" => return self.apply(b"~*"),
            "resetkeys" => {
                self.keys.clear();
                self.all_keys = false;
            }
            "allchannels" => return self.apply(b"&*"),
            "resetchannels" => {
                self.channels.clear();
                self.all_channels = false;
            }
            "allcommands" => return self.apply(b"+@all"),
            "nocommands" => return self.apply(b"-@all"),
            "reset" => {
                for r in ["resetpass", "resetkeys", "resetchannels", "off", "-@all"] {
                    self.apply(r.as_bytes())?;
                }
            }
            "sanitize-payload" | "skip-sanitize-payload" => {}
            _ => return self.apply_pattern_or_command(rule, &text),
        }
        Ok(())
    }

    fn apply_pattern_or_command(&mut self, rule: &[u8], text: &str) -> Result<(), String> {
        match rule.first() {
            Some(b'>') => {
                self.passwords.retain(|p| *p != hash(&rule[1..]));
                self.passwords.push(hash(&rule[1..]));
                self.nopass = false;
            }
            Some(b'<') => {
                let h = hash(&rule[1..]);
                if !self.passwords.contains(&h) {
                    return Err("no such password".into());
                }
                self.passwords.retain(|p| *p != h);
            }
            Some(b'#') => {
                let h = &text[1..];
                if !valid_hash(h) {
                    return Err("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters".into());
                }
                if !self.passwords.iter().any(|p| p == h) {
                    self.passwords.push(h.to_string());
                }
                self.nopass = false;
            }
            Some(b'!') => {
                let h = &text[1..];
                if !valid_hash(h) {
                    return Err("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters".into());
                }
                if !self.passwords.iter().any(|p| p == h) {
                    return Err("no such password".into());
                }
                self.passwords.retain(|p| p != h);
            }
            Some(b'~') | Some(b'%') => self.add_key_pattern(rule)?,
            Some(b'&') => {
                if self.all_channels {
                    return Err("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels".into());
                }
                let p = rule[1..].to_vec();
                if p == b"*" {
                    self.all_channels = true;
                    self.channels.clear();
                } else if !self.channels.contains(&p) {
                    self.channels.push(p);
                }
            }
            Some(b'+') | Some(b'-') => {
                let allow = rule[0] == b'+';
                self.set_command(text, allow)?;
                let r = text.to_ascii_lowercase();
                if r == "+@all" || r == "-@all" {
                    self.rules.clear();
                }
                self.rules.push(r);
            }
            _ => return Err("Syntax error".into()),
        }
        Ok(())
    }

    fn add_key_pattern(&mut self, rule: &[u8]) -> Result<(), String> {
        let (read, write, pattern) = if rule[0] == b'~' {
            (true, true, &rule[1..])
        } else {
            let Some(at) = rule.iter().position(|&b| b == b'~') else {
                return Err("Syntax error".into());
            };
            let flags = rule[1..at].to_ascii_uppercase();
            if flags.is_empty() || flags.iter().any(|f| !matches!(f, b'R' | b'W')) {
                return Err("Syntax error".into());
            }
            (
                flags.contains(&b'R'),
                flags.contains(&b'W'),
                &rule[at + 1..],
            )
        };
        if self.all_keys {
            return Err("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns".into());
        }
        if pattern == b"*" && read && write {
            self.all_keys = true;
            self.keys.clear();
            return Ok(());
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(k) => {
                k.read |= read;
                k.write |= write;
            }
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                read,
                write,
            }),
        }
        Ok(())
    }

    /// The user's flags as ACL GETUSER gives them.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        f.push("sanitize-payload");
        f
    }

    /// The command rules, as ACL LIST and GETUSER print them.
    pub fn command_rules(&self) -> String {
        self.rules.join(" ")
    }

    /// The key patterns, as ACL LIST and GETUSER print them.
    pub fn key_rules(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        self.keys
            .iter()
            .map(|k| {
                let p = String::from_utf8_lossy(&k.pattern);
                match (k.read, k.write) {
                    (true, true) => format!("~{p}"),
                    (true, false) => format!("%R~{p}"),
                    _ => format!("%W~{p}"),
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The channel patterns, as ACL LIST and GETUSER print them.
    pub fn channel_rules(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        self.channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The user as ACL LIST prints it (and as the server stores it):
    /// rules that, applied to a new user, make this one.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("user {}", self.name)];
        parts.extend(self.flags().iter().map(|f| f.to_string()));
        parts.extend(self.passwords.iter().map(|p| format!("#{p}")));
        for r in [self.key_rules(), self.channel_rules(), self.command_rules()] {
            if !r.is_empty() {
                parts.push(r);
            }
        }
        parts.join(" ")
    }

    /// A user from its description (what [`User::describe`] wrote).
    pub fn from_description(text: &str) -> Result<User, String> {
        let mut words = text.split(' ');
        let (Some("user"), Some(name)) = (words.next(), words.next()) else {
            return Err(format!("not a user: {text}"));
        };
        let mut u = User::new(name);
        for w in words {
            u.apply(w.as_bytes())?;
        }
        Ok(u)
    }
}

fn position(name: &str) -> Option<usize> {
    crate::server::table::position(name.as_bytes())
}

fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What `spec` is, for the error a user gets.
pub fn denied(user: &User, spec: &Spec, sub: Option<&[u8]>) -> String {
    match sub {
        Some(s) if spec.name == "config" || spec.name == "client" || spec.name == "acl" => format!(
            "NOPERM User {} has no permissions to run the '{}|{}' command",
            user.name,
            spec.name,
            String::from_utf8_lossy(s).to_ascii_lowercase()
        ),
        _ => format!(
            "NOPERM User {} has no permissions to run the '{}' command",
            user.name, spec.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> Result<User, String> {
        let mut u = User::new("alice");
        for r in rules {
            u.apply(r.as_bytes())?;
        }
        Ok(u)
    }

    #[test]
    fn rules_apply_in_order_and_describe_round_trips() {
        let u = user(&[
            "on", ">secret", "~cache:*", "%R~ro:*", "&news", "+@read", "-keys", "+set",
        ])
        .unwrap();
        assert!(u.accepts(b"secret") && !u.accepts(b"other"));
        let get = position("get").unwrap();
        let keys = position("keys").unwrap();
        let set = position("set").unwrap();
        let del = position("del").unwrap();
        assert!(u.may_run(get, None) && !u.may_run(keys, None) && u.may_run(set, None));
        assert!(!u.may_run(del, None));
        assert!(u.may_touch(b"cache:1", true) && u.may_touch(b"ro:1", false));
        assert!(!u.may_touch(b"ro:1", true) && !u.may_touch(b"other", false));
        assert!(u.may_use_channel(b"news", false) && !u.may_use_channel(b"n*", true));
        let text = u.describe();
        assert!(
            text.starts_with("user alice on sanitize-payload #"),
            "{text}"
        );
        assert!(
            text.ends_with("~cache:* %R~ro:* &news -@all +@read -keys +set"),
            "{text}"
        );
        let back = User::from_description(&text).unwrap();
        assert_eq!(back.describe(), text);
    }

    #[test]
    fn bad_rules_are_refused_with_redis_s_messages() {
        assert_eq!(
            user(&["+nosuch"]).unwrap_err(),
            "Unknown command or category name in ACL"
        );
        assert_eq!(
            user(&["+@nosuch"]).unwrap_err(),
            "Unknown command or category name in ACL"
        );
        assert_eq!(user(&["bogus"]).unwrap_err(), "Syntax error");
        assert!(user(&["#abc"])
            .unwrap_err()
            .starts_with("The password hash must be exactly 64"));
        assert!(user(&["allkeys", "~x"])
            .unwrap_err()
            .starts_with("Adding a pattern after the * pattern"));
        let d = User::default_user(None);
        assert!(d.unrestricted() && d.nopass && d.accepts(b"anything"));
        assert_eq!(
            d.describe(),
            "user default on nopass sanitize-payload ~* &* +@all"
        );
    }
}
