//! EVAL scripts that declare their flags in a shebang line
//! (`#!lua flags=no-writes`): what Redis takes and refuses, and what a
//! declared flag changes.

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::{e, q};

#[test]
fn a_shebang_declares_flags_and_keeps_line_numbers() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["EVAL", "#!lua\nreturn 1", "0"]), 1);
    assert_eq!(
        q::<i64>(&mut c, &["EVAL", "#!lua flags=\nreturn 2", "0"]),
        2
    );
    for (script, err) in [
        ("#!lua", "ERR Invalid script shebang"),
        (
            "#!not-lua\nreturn 1",
            "ERR Unexpected engine in script shebang: #!not-lua",
        ),
        (
            "#!lua badger=data\nreturn 1",
            "ERR Unknown lua shebang option: badger=data",
        ),
        (
            "#!lua flags=allow-oom,what?\nreturn 1",
            "ERR Unexpected flag in script shebang: what?",
        ),
    ] {
        assert_eq!(e(&mut c, &["EVAL", script, "0"]), err, "{script}");
        assert_eq!(e(&mut c, &["SCRIPT", "LOAD", script]), err, "{script}");
    }
    // The shebang is not Lua, and the code's lines are numbered from it.
    let missing = "#!lua\nreturn nope";
    let sha: String = q(&mut c, &["SCRIPT", "LOAD", missing]);
    assert_eq!(
        e(&mut c, &["EVALSHA", &sha, "0"]),
        format!(
            "ERR user_script:2: Script attempted to access nonexistent global variable \
             'nope' script: {sha}, on @user_script:2."
        )
    );
    // no-writes: a read-only script, which EVAL_RO may run; without it
    // the script may write, which EVAL_RO refuses before it runs.
    q::<()>(&mut c, &["SET", "x", "old"]);
    assert!(e(
        &mut c,
        &[
            "EVAL",
            "#!lua flags=no-writes\nredis.call('set', KEYS[1], 1)",
            "1",
            "x"
        ]
    )
    .starts_with("ERR Write commands are not allowed from read-only scripts."));
    assert_eq!(
        q::<String>(
            &mut c,
            &[
                "EVAL_RO",
                "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
                "1",
                "x"
            ]
        ),
        "old"
    );
    assert_eq!(
        e(
            &mut c,
            &[
                "EVAL_RO",
                "#!lua\nreturn redis.call('get', KEYS[1])",
                "1",
                "x"
            ]
        ),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    // The flags Stria has nothing to act on are taken.
    assert_eq!(
        q::<Value>(
            &mut c,
            &[
                "EVAL",
                "#!lua flags=allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\n\
                 return redis.call('set', KEYS[1], 'new')",
                "1",
                "x"
            ]
        ),
        Value::Okay
    );
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "new");
}
