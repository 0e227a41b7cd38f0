//! An EVAL script's shebang line, `#!lua flags=no-writes,allow-oom`: a
//! script that starts with one declares what it does, as a function's
//! flags do; one without it runs as scripts ran before Redis 7 (it may
//! write, and its writes are checked one by one as they come).

/// The flags a shebang may give, as Redis names them. `no-writes` and
/// `allow-oom` (writes past `maxmemory`) change what a script may do;
/// Stria has no replication (`allow-stale`) and no cluster
/// (`no-cluster`, `allow-cross-slot-keys`).
const FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// What a script's first line declares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shebang {
    /// The flags given (none is not the same as no shebang).
    pub flags: Vec<String>,
}

impl Shebang {
    pub fn no_writes(&self) -> bool {
        self.flags.iter().any(|f| f == "no-writes")
    }

    pub fn allow_oom(&self) -> bool {
        self.flags.iter().any(|f| f == "allow-oom")
    }
}

/// The shebang of `body` (`None` without one) and how long its line is
/// (the Lua code starts at its line feed, so that line numbers hold), or
/// Redis's error for a shebang it does not take.
pub fn parse(body: &[u8]) -> Result<(Option<Shebang>, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((None, 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..end]);
    let mut parts = line.split_ascii_whitespace();
    let Some(engine) = parts.next() else {
        return Err("Invalid engine in script shebang".into());
    };
    if engine != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {engine}"));
    }
    let mut shebang = Shebang::default();
    for part in parts {
        let Some(flags) = part.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {part}"));
        };
        for flag in flags.split(',').filter(|f| !f.is_empty()) {
            if !FLAGS.contains(&flag) {
                return Err(format!("Unexpected flag in script shebang: {flag}"));
            }
            shebang.flags.push(flag.to_string());
        }
    }
    Ok((Some(shebang), end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs_are_read_as_redis_reads_them() {
        assert_eq!(parse(b"return 1").unwrap(), (None, 0));
        let (s, at) = parse(b"#!lua\nreturn 1").unwrap();
        assert_eq!((s.unwrap().flags.len(), at), (0, 5));
        let (s, _) = parse(b"#!lua flags=no-writes,allow-oom\n").unwrap();
        assert!(s.unwrap().no_writes());
        let (s, _) = parse(b"#!lua flags=\n").unwrap();
        assert!(!s.unwrap().no_writes());
        for (body, err) in [
            (&b"#!lua"[..], "Invalid script shebang"),
            (
                b"#!not-lua\n",
                "Unexpected engine in script shebang: #!not-lua",
            ),
            (
                b"#!lua badger=data\n",
                "Unknown lua shebang option: badger=data",
            ),
            (
                b"#!lua flags=allow-oom,what?\n",
                "Unexpected flag in script shebang: what?",
            ),
        ] {
            assert_eq!(parse(body).unwrap_err(), err);
        }
    }
}
