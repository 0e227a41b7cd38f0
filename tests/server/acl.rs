//! ACL through clients: users made with ACL SETUSER, AUTH by name, what a
//! user may run, read, write and publish to (NOPERM otherwise), ACL's
//! read-outs, bad rules refused with Redis's messages, and users that
//! survive a restart, with no ACL file.

use std::time::Duration;

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::{q, text};

/// A connection as `user` with `password`.
fn login(s: &Server, user: &str, password: &str) -> redis::Connection {
    let url = s
        .url()
        .replacen("redis://", &format!("redis://{user}:{password}@"), 1);
    let c = redis::Client::open(url).unwrap();
    c.get_connection_with_timeout(Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("login as {user}: {e}"))
}

fn fails(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(c) {
        Err(e) => text(&e),
        Ok(v) => panic!("{args:?} did not fail: {v:?}"),
    }
}

#[test]
fn a_user_runs_reads_and_writes_only_what_it_is_allowed() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut admin = s.client();
    q::<()>(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "alice",
            "on",
            ">secret",
            "~cache:*",
            "%R~ro:*",
            "&news",
            "+@read",
            "+set",
            "+publish",
            "+client",
            "+acl|whoami",
            "+@transaction",
        ],
    );
    q::<()>(&mut admin, &["SET", "ro:1", "x"]);
    let mut a = login(&s, "alice", "secret");
    assert_eq!(q::<String>(&mut a, &["ACL", "WHOAMI"]), "alice");
    q::<()>(&mut a, &["SET", "cache:1", "v"]);
    assert_eq!(q::<String>(&mut a, &["GET", "cache:1"]), "v");
    assert_eq!(q::<String>(&mut a, &["GET", "ro:1"]), "x");
    assert!(fails(&mut a, &["SET", "ro:1", "y"]).contains("NOPERM No permissions to access a key"));
    assert!(fails(&mut a, &["GET", "other"]).contains("NOPERM No permissions to access a key"));
    assert!(fails(&mut a, &["DEL", "cache:1"])
        .contains("NOPERM User alice has no permissions to run the 'del' command"));
    assert!(fails(&mut a, &["ACL", "LIST"])
        .contains("NOPERM User alice has no permissions to run the 'acl|list' command"));
    assert_eq!(q::<i64>(&mut a, &["PUBLISH", "news", "hi"]), 0);
    assert!(fails(&mut a, &["PUBLISH", "sport", "hi"])
        .contains("NOPERM No permissions to access a channel"));
    // A change shows at the next command of a connection already in.
    q::<()>(&mut admin, &["ACL", "SETUSER", "alice", "-get"]);
    assert!(fails(&mut a, &["GET", "cache:1"]).contains("NOPERM"));
    let list: String = q(&mut admin, &["CLIENT", "LIST"]);
    assert!(list.contains("user=alice"), "{list}");
    // A refused command in MULTI fails the EXEC.
    redis::cmd("MULTI").query::<()>(&mut a).unwrap();
    assert!(fails(&mut a, &["DEL", "cache:1"]).contains("NOPERM"));
    assert!(fails(&mut a, &["EXEC"]).contains("EXECABORT"));
    // Wrong password, disabled user, unknown user: one answer.
    for (u, p) in [("alice", "nope"), ("bob", "x")] {
        let e = fails(&mut admin, &["AUTH", u, p]);
        assert!(
            e.contains("WRONGPASS invalid username-password pair or user is disabled."),
            "{e}"
        );
    }
    q::<()>(&mut admin, &["ACL", "SETUSER", "alice", "off"]);
    assert!(fails(&mut admin, &["AUTH", "alice", "secret"]).contains("WRONGPASS"));
    // RESET goes back to default.
    q::<()>(&mut admin, &["ACL", "SETUSER", "alice", "on"]);
    q::<()>(&mut admin, &["AUTH", "alice", "secret"]);
    assert_eq!(q::<String>(&mut admin, &["ACL", "WHOAMI"]), "alice");
    assert_eq!(q::<String>(&mut admin, &["RESET"]), "RESET");
    assert_eq!(q::<String>(&mut admin, &["ACL", "WHOAMI"]), "default");
}

#[test]
fn acl_reads_out_and_refuses_as_redis_does() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ACL", "LIST"]),
        ["user default on nopass sanitize-payload ~* &* +@all"]
    );
    q::<()>(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            "nopass",
            "~*",
            "+@all",
            "-flushall",
        ],
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ACL", "USERS"]),
        ["bob", "default"]
    );
    let user: Value = q(&mut c, &["ACL", "GETUSER", "bob"]);
    let text = format!("{user:?}");
    assert!(text.contains("+@all -flushall"), "{text}");
    assert_eq!(
        q::<Value>(&mut c, &["ACL", "GETUSER", "nobody"]),
        Value::Nil
    );
    assert_eq!(
        q::<String>(&mut c, &["ACL", "DRYRUN", "bob", "get", "k"]),
        "OK"
    );
    assert_eq!(
        q::<String>(&mut c, &["ACL", "DRYRUN", "bob", "flushall"]),
        "User bob has no permissions to run the 'flushall' command"
    );
    let cats: Vec<String> = q(&mut c, &["ACL", "CAT"]);
    assert!(cats.contains(&"sortedset".to_string()) && cats.contains(&"dangerous".to_string()));
    let reads: Vec<String> = q(&mut c, &["ACL", "CAT", "geo"]);
    assert!(reads.contains(&"geoadd".to_string()), "{reads:?}");
    assert_eq!(q::<String>(&mut c, &["ACL", "GENPASS"]).len(), 64);
    for (args, want) in [
        (
            &["ACL", "SETUSER", "x", "+nosuch"][..],
            "ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL",
        ),
        (
            &["ACL", "SETUSER", "x", "bogus"][..],
            "ERR Error in ACL SETUSER modifier 'bogus': Syntax error",
        ),
        (
            &["ACL", "DELUSER", "default"][..],
            "ERR The 'default' user cannot be removed",
        ),
        (
            &["ACL", "CAT", "nosuch"][..],
            "ERR Unknown category 'nosuch'",
        ),
        (
            &["AUTH", "pw"][..],
            "ERR AUTH <password> called without any password configured for the default user",
        ),
    ] {
        let e = fails(&mut c, args);
        assert!(e.contains(want), "{args:?}: {e}");
    }
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ACL", "USERS"]),
        ["bob", "default"],
        "a refused rule changes nothing"
    );
    assert_eq!(q::<i64>(&mut c, &["ACL", "DELUSER", "bob", "nobody"]), 1);
}

#[test]
fn users_survive_a_restart() {
    let dir = tempdir();
    let map = Map::default();
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    q::<()>(
        &mut c,
        &["ACL", "SETUSER", "carol", "on", ">pw", "~k*", "+get"],
    );
    // The default user gets a password: new connections must log in.
    q::<()>(&mut c, &["ACL", "SETUSER", "default", ">adminpw"]);
    s.stop();
    let s = Server::start(dir.path(), &map);
    let mut raw = s.raw();
    let reply = crate::request_line(&mut raw, &crate::resp(&[b"GET", b"k"]));
    assert!(reply.starts_with("-NOAUTH"), "{reply}");
    let mut carol = login(&s, "carol", "pw");
    assert_eq!(q::<Option<String>>(&mut carol, &["GET", "k1"]), None);
    assert!(fails(&mut carol, &["SET", "k1", "v"]).contains("NOPERM"));
    let mut admin = login(&s, "default", "adminpw");
    let users: Vec<String> = q(&mut admin, &["ACL", "USERS"]);
    assert_eq!(users, ["carol", "default"]);
}
