//! What a single-node server says where Redis would count cluster
//! nodes: CLUSTER.

use crate::e;
use crate::harness::{tempdir, Map, Server};

#[test]
fn cluster_says_cluster_support_is_disabled() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    for sub in [&["INFO"][..], &["NODES"], &["SLOTS"], &["RESET", "HARD"]] {
        let mut args = vec!["CLUSTER"];
        args.extend_from_slice(sub);
        assert_eq!(
            e(&mut c, &args),
            "ERR This instance has cluster support disabled",
            "{sub:?}"
        );
    }
    assert_eq!(
        e(&mut c, &["CLUSTER", "FOO"]),
        "ERR unknown subcommand 'FOO'. Try CLUSTER HELP."
    );
    assert_eq!(
        e(&mut c, &["CLUSTER", "INFO", "extra"]),
        "ERR wrong number of arguments for 'cluster|info' command"
    );
    assert_eq!(
        e(&mut c, &["CLUSTER"]),
        "ERR wrong number of arguments for 'cluster' command"
    );
    // In a script too; CLUSTER RESET is refused there.
    assert!(e(
        &mut c,
        &["EVAL", "return redis.call('cluster', 'info')", "0"]
    )
    .starts_with("ERR This instance has cluster support disabled"));
    assert!(e(
        &mut c,
        &["EVAL", "return redis.call('cluster', 'reset', 'hard')", "0"]
    )
    .starts_with("ERR This Redis command is not allowed from script"));
}
