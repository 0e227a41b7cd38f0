//! Error replies counted by their code, for INFO errorstats: the code is
//! the first word of the message (`NOGROUP` of `NOGROUP No such key ...`),
//! found in its first 31 bytes as Redis looks for it, `ERR` when there is
//! no space there. CONFIG RESETSTAT empties the table.
//!
//! Clients choose what errors they provoke, so the table is bounded: once
//! it holds [`MAX_CODES`] codes, a new code is not counted by itself (the
//! reply still counts in `total_error_replies` and its command's
//! `failed_calls`).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Distinct error codes counted at most.
pub const MAX_CODES: usize = 128;

/// Error replies by code, in code order (as Redis lists them).
#[derive(Default)]
pub struct ErrorCodes {
    counts: Mutex<BTreeMap<String, u64>>,
}

/// The code of error message `msg` (without its leading `-`).
pub fn code_of(msg: &str) -> &str {
    let head = &msg.as_bytes()[..msg.len().min(31)];
    match head.iter().position(|&b| b == b' ') {
        Some(end) => &msg[..end],
        None => "ERR",
    }
}

impl ErrorCodes {
    /// One more error reply with message `msg`.
    pub fn count(&self, msg: &str) {
        let code = code_of(msg);
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts.get_mut(code) {
            *n += 1;
        } else if counts.len() < MAX_CODES {
            counts.insert(code.to_string(), 1);
        }
    }

    /// Every code counted, and how many replies had it.
    pub fn snapshot(&self) -> Vec<(String, u64)> {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.iter().map(|(c, n)| (c.clone(), *n)).collect()
    }

    pub fn reset(&self) {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_first_word_and_the_table_is_bounded() {
        assert_eq!(code_of("NOGROUP No such key 'x'"), "NOGROUP");
        assert_eq!(code_of("ERR syntax error"), "ERR");
        assert_eq!(code_of("NOSPACEHERE"), "ERR");
        assert_eq!(code_of(&format!("{} x", "A".repeat(40))), "ERR");
        let e = ErrorCodes::default();
        e.count("WRONGTYPE Operation against a key");
        e.count("ERR syntax error");
        e.count("ERR unknown command");
        assert_eq!(
            e.snapshot(),
            [("ERR".to_string(), 2), ("WRONGTYPE".to_string(), 1)]
        );
        for i in 0..2 * MAX_CODES {
            e.count(&format!("C{i} x"));
        }
        assert_eq!(e.snapshot().len(), MAX_CODES);
        e.count("ERR again");
        assert!(e.snapshot().contains(&("ERR".to_string(), 3)));
        e.reset();
        assert!(e.snapshot().is_empty());
    }
}
