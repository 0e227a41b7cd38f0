//! Redis's glob patterns (SCAN MATCH, CONFIG GET): `*`, `?`, `[abc]`,
//! `[^a-z]`, and `\` to take the next byte as it is.

/// Star groups past which Redis's matcher gives up (its recursion's
/// "protection against abusive patterns").
const MAX_NESTING: usize = 1000;

/// Whether `text` matches `pattern`, as Redis's `stringmatchlen`.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    // Redis recurses once per `*` run that has more pattern after it and
    // answers no match deeper than 1,000 runs: every match goes through
    // all of them, so such a pattern matches nothing there, and here.
    if nested_stars(pattern) > MAX_NESTING {
        return false;
    }
    // Iterative with one backtrack point: the last `*` seen and where its
    // match would resume, which is enough for `*` (it matches any run).
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, t));
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, next)) = class(pattern, p, text[t]) {
                        if hit {
                            p = next;
                            t += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == text[t] {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                c => {
                    if c == text[t] {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, st)) => {
                star = Some((sp, st + 1));
                p = sp;
                t = st + 1;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The runs of `*` in `pattern` that have more pattern after them (a `*`
/// escaped or in a class is a plain byte).
fn nested_stars(pattern: &[u8]) -> usize {
    let (mut p, mut runs) = (0, 0);
    while p < pattern.len() {
        match pattern[p] {
            b'*' => {
                while p < pattern.len() && pattern[p] == b'*' {
                    p += 1;
                }
                if p < pattern.len() {
                    runs += 1;
                }
            }
            b'\\' => p += 2,
            b'[' => match class(pattern, p, 0) {
                Some((_, next)) => p = next,
                // An unclosed class takes the rest of the pattern.
                None => break,
            },
            _ => p += 1,
        }
    }
    runs
}

/// Matches `c` against the class starting at `pattern[open] == '['`:
/// whether it hit, and where the pattern goes on after the class.
fn class(pattern: &[u8], open: usize, c: u8) -> Option<(bool, usize)> {
    let mut p = open + 1;
    let negate = pattern.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut hit = false;
    loop {
        match *pattern.get(p)? {
            b']' => break,
            b'\\' if p + 1 < pattern.len() => {
                hit |= pattern[p + 1] == c;
                p += 2;
            }
            lo if pattern.get(p + 1) == Some(&b'-')
                && p + 2 < pattern.len()
                && pattern[p + 2] != b']' =>
            {
                let hi = pattern[p + 2];
                let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                hit |= (lo..=hi).contains(&c);
                p += 3;
            }
            x => {
                hit |= x == c;
                p += 1;
            }
        }
    }
    Some((hit != negate, p + 1))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_as_in_redis() {
        let yes: &[(&str, &str)] = &[
            ("*", ""),
            ("*", "anything"),
            ("key:*", "key:1"),
            ("*:1", "key:1"),
            ("k?y", "key"),
            ("k[ae]y", "key"),
            ("k[^a]y", "key"),
            ("k[a-f]y", "key"),
            ("k[f-a]y", "key"),
            ("a*b*c", "aXXbYYc"),
            ("a\\*", "a*"),
            ("*a*a*a*a*b", "aaaaaaaaaaaaab"),
            ("save", "save"),
        ];
        let no: &[(&str, &str)] = &[
            ("key:*", "kez:1"),
            ("k?y", "ky"),
            ("k[^e]y", "key"),
            ("k[a-d]y", "key"),
            ("a\\*", "ab"),
            ("*a*a*a*a*b", "aaaaaaaaaaaaaa"),
            ("save", "saves"),
            ("k[ey", "key"),
        ];
        // Redis's limit on nested stars: past 1,000 runs that have more
        // pattern after them, nothing matches (a last run does not count).
        let long = "a".repeat(50_000);
        assert!(!matches("*?".repeat(50_000).as_bytes(), long.as_bytes()));
        assert!(!matches("*a".repeat(1001).as_bytes(), long.as_bytes()));
        assert!(matches("*a".repeat(1000).as_bytes(), long.as_bytes()));
        let last = format!("{}*", "*a".repeat(1000));
        assert!(matches(last.as_bytes(), long.as_bytes()));
        let text = format!("{}xa", "*a".repeat(1001));
        let escaped = format!("{}*a", "\\*a".repeat(1001));
        assert!(matches(escaped.as_bytes(), text.as_bytes()));
        let classes = format!("{}*a", "[*]a".repeat(1001));
        assert!(matches(classes.as_bytes(), text.as_bytes()));
        for (p, t) in yes {
            assert!(matches(p.as_bytes(), t.as_bytes()), "{p} should match {t}");
        }
        for (p, t) in no {
            assert!(
                !matches(p.as_bytes(), t.as_bytes()),
                "{p} should not match {t}"
            );
        }
    }
}
