//! `stria bench patterns` against the server: each application pattern
//! runs briefly, and every job, message and stream entry it hands over is
//! checked to arrive exactly once (the bench fails otherwise).

use std::time::Duration;

use stria::bench::patterns::{run_pattern, Pattern, Target};

use crate::harness::{tempdir, Map, Server};

/// The bench's view of server `s`.
fn target(s: &Server, password: Option<&str>) -> Target {
    Target {
        name: "stria serve".into(),
        addr: s.addr,
        password: password.map(str::to_string),
        pid: s.pid(),
    }
}

#[test]
fn every_pattern_hands_everything_over_exactly_once() {
    let dir = tempdir();
    let map = Map {
        password: Some("pw".into()),
        ..Map::default()
    };
    let s = Server::start(dir.path(), &map);
    let t = target(&s, Some("pw"));
    for p in Pattern::ALL {
        let o = run_pattern(p, &t, Duration::from_millis(300), "t")
            .unwrap_or_else(|e| panic!("{}: {e}", p.name()));
        assert!(o.ops > 0 && o.secs > 0.0, "{}: {o:?}", p.name());
        assert!(o.server.cpu_secs > 0.0, "{}: {o:?}", p.name());
    }
    // What the patterns left: the rate limiters' counters have a TTL, the
    // queue is empty, the group has nothing pending.
    let mut c = s.client();
    // Which of the 1,000 counters the clients reached in the time given
    // depends on the machine's speed: every one they did has its TTL.
    let counters: Vec<String> = redis::cmd("KEYS").arg("t:rl:*").query(&mut c).unwrap();
    assert!(!counters.is_empty());
    for key in &counters {
        let ttl: i64 = redis::cmd("TTL").arg(key).query(&mut c).unwrap();
        assert!((1..=60).contains(&ttl), "{key}: {ttl}");
    }
    let len: i64 = redis::cmd("LLEN").arg("t:q").query(&mut c).unwrap();
    assert_eq!(len, 0);
}

/// A consumer that got an item twice is caught: the bench's check is not
/// one that cannot fail.
#[test]
fn a_duplicated_job_fails_the_queue_pattern() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let t = target(&s, None);
    // A job no producer of this run sent, waiting in the queue.
    let mut c = s.client();
    redis::cmd("RPUSH")
        .arg("d:q")
        .arg("0:0")
        .query::<()>(&mut c)
        .unwrap();
    let e = run_pattern(Pattern::Queue, &t, Duration::from_millis(200), "d").unwrap_err();
    assert!(e.contains("\"0:0\" was handed over twice"), "{e}");
}

/// A failed publish ends the pattern with its error: the subscribers are
/// told to stop rather than left waiting for ever.
#[test]
fn a_failed_publish_is_reported_not_waited_for() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let t = target(&s, None);
    // An eleventh subscriber: every PUBLISH reaches 11, not 10.
    let mut extra = s.client();
    redis::cmd("SUBSCRIBE")
        .arg("x:ch")
        .query::<()>(&mut extra)
        .unwrap();
    let e = run_pattern(Pattern::Publish, &t, Duration::from_millis(200), "x").unwrap_err();
    assert!(e.contains("reached 11 of 10"), "{e}");
}
