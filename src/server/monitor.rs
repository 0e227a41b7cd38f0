//! MONITOR: a connection that asks gets a line for every command the
//! server runs from then on, as Redis writes it: `+<secs>.<micros> [0
//! <addr>] "cmd" "arg" ...` (`[0 lua]` for a script's `redis.call`), the
//! arguments quoted and escaped, AUTH's and HELLO's passwords shown as
//! `"(redacted)"`. A command's line comes once it has run (EVAL, EVALSHA
//! and FCALL before, so the commands a script runs follow it), after the
//! commands of the EXEC it ran in; commands flagged `admin` or
//! `skip_monitor` (CONFIG, SHUTDOWN, MONITOR itself, ...) are not shown.
//! Like a published message, a line waits for the writes its command read
//! or made. A monitoring connection may not run commands that read or
//! write keys.

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use super::conn::Conn;
use super::resp::Reply;
use super::table::Spec;

/// CLIENT LIST's `O`.
pub const FLAG_MONITOR: u8 = 8;

/// Commands whose line comes before they run.
const FED_FIRST: &[&str] = &[
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

/// `arg` quoted as Redis's `sdscatrepr` quotes it.
fn quote(out: &mut String, arg: &[u8]) {
    out.push('"');
    for &b in arg {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
}

/// Which arguments a MONITOR line hides: AUTH's, and HELLO's after AUTH.
fn redacted(name: &str, args: &[Vec<u8>], i: usize) -> bool {
    match name {
        "auth" => i > 0,
        "hello" => args
            .iter()
            .position(|a| a.eq_ignore_ascii_case(b"auth"))
            .is_some_and(|at| i > at && i <= at + 2),
        _ => false,
    }
}

impl<'a> Conn<'a> {
    /// MONITOR: this connection gets every command's line from now on.
    pub fn monitor(&mut self) -> Reply {
        self.shard.pubsub().monitor(self.token);
        self.client.flags.fetch_or(FLAG_MONITOR, Ordering::Relaxed);
        Reply::ok()
    }

    /// RESET, or the connection goes.
    pub fn unmonitor(&mut self) {
        self.shard.pubsub().unmonitor(self.token);
        self.client
            .flags
            .fetch_and(!FLAG_MONITOR, Ordering::Relaxed);
    }

    /// A monitoring connection's refusal of a command on keys.
    pub fn monitor_refusal(&self, spec: &Spec) -> Option<Reply> {
        let on_keys = spec
            .flags
            .iter()
            .any(|f| matches!(*f, "write" | "readonly"));
        (on_keys && self.client.flags.load(Ordering::Relaxed) & FLAG_MONITOR != 0)
            .then(|| Reply::err("Replica can't interact with the keyspace"))
    }

    /// The MONITOR line of a command about to run, if anyone monitors and
    /// the command is shown.
    fn monitor_line(&self, spec: &Spec, args: &[Vec<u8>]) -> Option<String> {
        if !self.shard.pubsub().has_monitors() {
            return None;
        }
        let hidden = spec
            .flags
            .iter()
            .any(|f| matches!(*f, "admin" | "skip_monitor"));
        if hidden && !FED_FIRST.contains(&spec.name) {
            return None;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut line = format!("{}.{:06} ", now.as_secs(), now.subsec_micros());
        if self.scripting {
            line.push_str("[0 lua]");
        } else {
            line.push_str(&format!("[0 {}]", self.client.addr));
        }
        for (i, a) in args.iter().enumerate() {
            line.push(' ');
            if redacted(spec.name, args, i) {
                line.push_str("\"(redacted)\"");
            } else {
                quote(&mut line, a);
            }
        }
        Some(line)
    }

    /// Runs a command whose arity is checked, and shows it to the monitors.
    pub fn run(&mut self, spec: &'static Spec, args: Vec<Vec<u8>>) -> super::conn::Outcome {
        let Some(line) = self.monitor_line(spec, &args) else {
            return self.execute(spec, args);
        };
        if FED_FIRST.contains(&spec.name) {
            self.shard.pubsub().feed(&line, &self.deps);
            return self.execute(spec, args);
        }
        let out = self.execute(spec, args);
        self.shard.pubsub().feed(&line, &self.deps);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_and_passwords_hidden_as_redis_does() {
        let mut s = String::new();
        quote(&mut s, b"a\"b\\c\r\n\x01 z");
        assert_eq!(s, r#""a\"b\\c\r\n\x01 z""#);
        let args: Vec<Vec<u8>> = ["hello", "3", "AUTH", "u", "p", "SETNAME", "n"]
            .iter()
            .map(|a| a.as_bytes().to_vec())
            .collect();
        let hidden: Vec<bool> = (0..args.len())
            .map(|i| redacted("hello", &args, i))
            .collect();
        assert_eq!(hidden, [false, false, false, true, true, false, false]);
        assert!(redacted("auth", &args, 1) && !redacted("auth", &args, 0));
    }
}
