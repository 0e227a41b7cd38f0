//! The Prometheus endpoint of a running server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::harness::{tempdir, Map, Server};

/// `GET path` over HTTP/1.1: the status line and the body.
fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or("").to_string();
    (status, body.to_string())
}

/// The value of the series `name` in an exposition text.
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn metrics_count_the_commands_served() {
    let dir = tempdir();
    let map = Map {
        metrics: true,
        ..Map::default()
    };
    let s = Server::start(dir.path(), &map);
    // Port 0 was asked for; the real address is printed before `listening on`.
    let m = s
        .metrics
        .unwrap_or_else(|| panic!("no metrics address printed\n{}", s.printed.all()));
    assert_ne!(m.port(), 0);
    assert_ne!(m.port(), s.addr.port());

    let mut c = s.client();
    for i in 0..25 {
        redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query::<()>(&mut c)
            .unwrap();
    }
    for i in 0..7 {
        redis::cmd("GET")
            .arg(format!("k{i}"))
            .query::<i64>(&mut c)
            .unwrap();
    }
    // Keys no memstore has: the row cache keeps their absence from the
    // first read, and answers the second.
    for _ in 0..2 {
        for i in 0..7 {
            let n: i64 = redis::cmd("EXISTS")
                .arg(format!("none{i}"))
                .query(&mut c)
                .unwrap();
            assert_eq!(n, 0);
        }
    }
    redis::cmd("HSET")
        .arg("k1")
        .arg("f")
        .arg("v")
        .query::<i64>(&mut c)
        .unwrap_err();

    let (status, body) = http_get(m, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(
        body.contains("# TYPE stria_commands_total counter"),
        "{body}"
    );
    assert_eq!(
        sample(&body, "stria_commands_total{command=\"set\"}"),
        Some(25.0),
        "{body}"
    );
    assert_eq!(
        sample(&body, "stria_commands_total{command=\"get\"}"),
        Some(7.0),
        "{body}"
    );
    assert_eq!(
        sample(&body, "stria_command_errors_total{command=\"hset\"}"),
        Some(1.0),
        "{body}"
    );
    let records = sample(&body, "stria_wal_records_total").unwrap_or(0.0);
    assert!(records >= 25.0, "{body}");
    assert!(body.contains("stria_connected_clients"), "{body}");
    // The second EXISTS of each key: the row cache answered.
    assert!(
        sample(&body, "stria_row_cache_hits_total").unwrap_or(0.0) >= 7.0,
        "{body}"
    );
    assert!(
        sample(&body, "stria_row_cache_keys").unwrap_or(0.0) >= 7.0,
        "{body}"
    );
    assert_eq!(
        sample(&body, "stria_row_cache_limit_bytes"),
        Some(f64::from(256u32 << 20)),
        "{body}"
    );
    // The background scrub runs at the default rate.
    assert_eq!(
        sample(&body, "stria_scrub_rate_bytes"),
        Some(f64::from(16u32 << 20)),
        "{body}"
    );
    assert!(body.contains("stria_scrub_bad_blocks_total 0"), "{body}");
    let info: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {info}"))
    };
    assert!(field("row_cache_hits") >= 7, "{info}");
    assert!(field("row_cache_bytes") > 0, "{info}");
    assert_eq!(field("row_cache_limit"), 256 << 20, "{info}");

    let (status, _) = http_get(m, "/nope");
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    // The endpoint stops with the server.
    s.stop();
    assert!(TcpStream::connect_timeout(&m, Duration::from_secs(2)).is_err());
}

/// Every query of the shipped Grafana dashboard names metrics (and
/// labels) that a running server exports.
#[test]
fn the_dashboard_queries_only_metrics_that_exist() {
    let dir = tempdir();
    let map = Map {
        metrics: true,
        ..Map::default()
    };
    let s = Server::start(dir.path(), &map);
    let m = s.metrics.expect("a metrics address");
    let mut c = s.client();
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut c)
        .unwrap();
    redis::cmd("HGET")
        .arg("k")
        .arg("f")
        .query::<()>(&mut c)
        .unwrap_err();
    let (status, body) = http_get(m, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    // Each sample's name and label names.
    let mut labels: std::collections::HashMap<String, std::collections::HashSet<String>> =
        Default::default();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let set = labels.entry(line[..name_end].to_string()).or_default();
        if let Some(rest) = line[name_end..].strip_prefix('{') {
            for pair in rest.split('}').next().unwrap_or("").split(',') {
                if let Some((k, _)) = pair.split_once('=') {
                    set.insert(k.to_string());
                }
            }
        }
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/conf/grafana/stria.json");
    let dash: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .expect("the dashboard is JSON");
    let panels = dash["panels"].as_array().expect("panels");
    let mut queries = 0;
    for p in panels.iter().filter(|p| p["type"] != "row") {
        let title = p["title"].as_str().unwrap_or("?");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title:?} has no query");
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            queries += 1;
            let names: Vec<&str> = expr
                .match_indices("stria_")
                .map(|(i, _)| {
                    let rest = &expr[i..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    &rest[..end]
                })
                .collect();
            assert!(!names.is_empty(), "panel {title:?}: {expr}");
            for n in &names {
                assert!(
                    labels.contains_key(*n),
                    "panel {title:?}: {n} is not exported\n{body}"
                );
            }
            // Labels grouped or matched on are on one of the metrics.
            let mut used: Vec<String> = Vec::new();
            for (i, _) in expr.match_indices("by (") {
                let inner = &expr[i + 4..];
                let inner = &inner[..inner.find(')').unwrap()];
                used.extend(inner.split(',').map(|l| l.trim().to_string()));
            }
            for (i, _) in expr.match_indices("{") {
                let inner = &expr[i + 1..];
                let inner = &inner[..inner.find('}').unwrap()];
                used.extend(
                    inner
                        .split(',')
                        .filter_map(|m| m.split(['=', '!', '~']).next())
                        .map(|l| l.trim().to_string())
                        .filter(|l| l != "instance" && !l.is_empty()),
                );
            }
            for l in used.iter().filter(|l| *l != "le") {
                assert!(
                    names.iter().any(|n| labels[*n].contains(l)),
                    "panel {title:?}: no metric of {expr} has the label {l}"
                );
            }
        }
    }
    assert!(queries >= 30, "{queries} queries");
}
