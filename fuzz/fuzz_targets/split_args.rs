//! Splits arbitrary lines into inline words, and checks that the words,
//! quoted back, split into the same words.

#![no_main]

use libfuzzer_sys::fuzz_target;
use stria::server::resp::split_args;

fn quote(word: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in word {
        match b {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

fuzz_target!(|line: &[u8]| {
    let Some(words) = split_args(line) else {
        return;
    };
    let mut again = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            again.push(b' ');
        }
        quote(w, &mut again);
    }
    assert_eq!(split_args(&again).as_ref(), Some(&words));
    // Plain words (no blanks, no quotes) read back as they are.
    if words
        .iter()
        .all(|w| !w.is_empty() && !w.iter().any(|b| b" \t\r\n\x0b\x0c\"'".contains(b)))
    {
        assert_eq!(split_args(&words.join(&b' ')), Some(words));
    }
});
