//! redis-cli and redis-benchmark (Debian's redis-tools) against the server.
//!
//! CI installs them (.ci/run); a machine without them fails here, unless
//! STRIA_SKIP_REDIS_TOOLS=1 says to skip.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::harness::{tempdir, Map, Server};

/// The tool on PATH, or `None` when it may be skipped.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var("STRIA_SKIP_REDIS_TOOLS").is_ok_and(|v| v == "1") {
            println!("NOT RUN: {name} is not on PATH (STRIA_SKIP_REDIS_TOOLS=1)");
            return None;
        }
        panic!(
            "{name} is not on PATH: install Debian's redis-tools (`.ci/run` does, as root: apt-get install redis-tools), or set STRIA_SKIP_REDIS_TOOLS=1 to skip this test locally"
        );
    }
    found
}

fn run(tool: &PathBuf, args: &[&str]) -> Output {
    Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", tool.display()))
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn redis_cli_and_redis_benchmark_work_against_the_server() {
    let (Some(cli), Some(bench)) = (tool("redis-cli"), tool("redis-benchmark")) else {
        return;
    };
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let port = s.addr.port().to_string();
    let cli_args = |args: &[&str]| -> Vec<String> {
        ["-h", "127.0.0.1", "-p", &port]
            .iter()
            .chain(args)
            .map(|a| a.to_string())
            .collect()
    };
    let cli_run = |args: &[&str]| {
        let a = cli_args(args);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        stdout(&run(&cli, &a))
    };
    assert_eq!(cli_run(&["set", "a", "b"]), "OK\n");
    assert_eq!(cli_run(&["get", "a"]), "b\n");
    assert_eq!(cli_run(&["hset", "h", "f", "v"]), "1\n");
    assert_eq!(cli_run(&["incr", "n"]), "1\n");
    let mut keys: Vec<String> = cli_run(&["--scan"]).lines().map(String::from).collect();
    keys.sort();
    assert_eq!(keys, ["a", "h", "n"]);
    assert_eq!(cli_run(&["--scan", "--pattern", "h*"]), "h\n");
    // Errors come back as text, exit status 0 (as with a real Redis).
    let err = cli_run(&["incr", "a"]);
    assert!(err.contains("ERR value is not an integer"), "{err}");
    assert!(cli_run(&["info", "server"]).contains("redis_version:"));

    // The benchmark pipelines SETs and GETs over ten connections.
    let out = run(
        &bench,
        &[
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "set,get",
            "-n",
            "2000",
            "-c",
            "10",
            "-P",
            "4",
            "-q",
        ],
    );
    let text = stdout(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("SET:") && text.contains("GET:"),
        "{text}{stderr}"
    );
    assert!(
        !text.contains("ERR") && !stderr.contains("ERR"),
        "{text}{stderr}"
    );
    // redis-benchmark writes key:__rand_int__ with a 3-byte value.
    let v = cli_run(&["get", "key:__rand_int__"]);
    assert!(v.len() == 4 && v.ends_with('\n'), "{v:?}");
    assert_eq!(cli_run(&["get", "a"]), "b\n");
    s.stop();
}
