use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::counters::*;
use super::endpoint::*;
use super::prometheus::*;
use super::*;
use crate::wal::stats::WRITE_LATENCY_BOUNDS_NS;
use std::collections::{BTreeMap, BTreeSet};

#[test]
fn buckets_cover_every_value_once_and_in_order() {
    for i in 0..BUCKETS {
        assert_eq!(bucket_of(bucket_low(i)), i, "bucket {i}");
        assert!(bucket_end(i) > bucket_low(i));
        if i + 1 < BUCKETS {
            assert_eq!(bucket_of(bucket_end(i) - 1), i);
        }
    }
    for v in [0, 1, 7, 8, 9, 15, 16, 1000, 123_456_789, u64::MAX] {
        let i = bucket_of(v);
        assert!(bucket_low(i) <= v && (v < bucket_end(i) || i == BUCKETS - 1));
    }
    // The Prometheus bounds are bucket boundaries, so counts are exact.
    for b in COMMAND_BOUNDS_NS.iter().chain(&WRITE_LATENCY_BOUNDS_NS) {
        assert_eq!(bucket_low(bucket_of(*b)), *b);
    }
}

#[test]
fn quantiles_are_within_the_bucket_width() {
    let h = Histogram::new();
    for us in 1..=10_000u64 {
        h.record(us * 1000);
    }
    let counts = h.counts();
    for (q, want) in [
        (0.5, 5_000_000.0),
        (0.99, 9_900_000.0),
        (0.999, 9_990_000.0),
    ] {
        let got = quantile(&counts, q);
        assert!((got - want).abs() / want < 0.07, "q{q}: {got} vs {want}");
    }
    assert_eq!(quantile(&[0; BUCKETS], 0.5), 0.0);
    assert_eq!(count_below(&counts, 1 << 20), 1048); // 1..=1048 µs < 1048.576 µs
}

#[test]
fn commands_are_counted_by_name_and_strangers_as_unknown() {
    let m = ServerMetrics::with_commands(&["get", "set"]);
    m.command("get", Duration::from_micros(10), None);
    m.command("GET", Duration::from_micros(30), Some("ERR failed"));
    m.command("set", Duration::from_micros(5), None);
    for i in 0..100 {
        m.command(
            &format!("nosuch{i}"),
            Duration::from_micros(1),
            Some("ERR failed"),
        );
    }
    assert_eq!(m.total_commands(), 103);
    assert_eq!(m.total_errors(), 101);
    let c = m.commands();
    let names: Vec<&str> = c.iter().map(|c| c.name).collect();
    assert_eq!(names, ["get", "set", "unknown"]);
    assert_eq!((c[0].calls, c[0].errors, c[0].usec), (2, 1, 40));
    assert_eq!(c[0].usec_per_call(), 20.0);
    assert_eq!((c[2].calls, c[2].errors), (100, 100));
    assert!(c[0].p99_usec > 25.0 && c[0].p99_usec < 33.0, "{:?}", c[0]);
}

#[test]
fn metrics_are_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<ServerMetrics>();
    let m = Arc::new(ServerMetrics::new());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    m.command("get", Duration::from_micros(5), None);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(m.total_commands(), 4000);
    assert_eq!(m.commands()[0].calls, 4000);
}

#[test]
fn connections_and_bytes() {
    let m = ServerMetrics::new();
    m.connection_opened();
    m.connection_opened();
    m.connection_closed();
    m.connection_closed();
    m.connection_closed(); // one too many: stays at 0
    m.connection_rejected();
    m.bytes_in(10);
    m.bytes_out(20);
    m.protocol_error();
    m.auth_failure();
    assert_eq!(
        (m.connected(), m.total_connections(), m.rejected()),
        (0, 2, 1)
    );
    assert_eq!((m.bytes_in_total(), m.bytes_out_total()), (10, 20));
    assert_eq!((m.protocol_errors(), m.auth_failures()), (1, 1));
}

#[test]
fn rates_come_from_samples_at_least_100ms_apart() {
    let m = ServerMetrics::new();
    m.sample();
    for _ in 0..50 {
        m.command("ping", Duration::from_micros(1), None);
    }
    m.bytes_in(2048);
    std::thread::sleep(Duration::from_millis(120));
    let r = m.rates();
    // 50 commands in a little over 0.12 s.
    assert!(r.ops_per_sec > 100.0 && r.ops_per_sec < 420.0, "{r:?}");
    assert!(r.input_kbps > 4.0 && r.input_kbps < 17.0, "{r:?}");
    assert_eq!(r.output_kbps, 0.0);
}

#[test]
fn label_values_and_floats_are_escaped() {
    assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    assert_eq!(float(f64::INFINITY), "+Inf");
    assert_eq!(float(f64::NAN), "NaN");
    assert_eq!(float(0.000001024), "0.000001024");
}

/// Checks the text exposition format line by line and returns each
/// family's type and its samples (name with labels, value).
pub(super) fn parse_exposition(text: &str) -> BTreeMap<String, (String, Vec<(String, f64)>)> {
    let mut families: BTreeMap<String, (String, Vec<(String, f64)>)> = BTreeMap::new();
    let mut current = String::new();
    let mut helped = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(helped.insert(name.to_owned()), "HELP twice for {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut p = rest.split(' ');
            let (name, kind) = (p.next().unwrap(), p.next().unwrap());
            assert!(helped.contains(name), "TYPE before HELP for {name}");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(
                families
                    .insert(name.to_owned(), (kind.to_owned(), Vec::new()))
                    .is_none(),
                "family {name} declared twice"
            );
            current = name.to_owned();
            continue;
        }
        assert!(!line.starts_with('#'), "stray comment {line}");
        let (series, value) = line.rsplit_once(' ').expect(line);
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value of {line}")),
        };
        let name = series.split('{').next().unwrap();
        assert!(name.starts_with("stria_"), "{line}");
        assert!(
            name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{line}"
        );
        let (kind, samples) = families.get_mut(&current).expect("sample before TYPE");
        let ok = name == current
            || (kind == "histogram"
                && ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| name == format!("{current}{s}")));
        assert!(ok, "sample {name} in family {current}");
        if kind == "counter" {
            assert!(current.ends_with("_total"), "counter {current}");
        }
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
            }
        }
        samples.push((series.to_owned(), value));
    }
    families
}

#[test]
fn render_covers_the_server_and_the_engine() {
    let engine = testing::engine();
    testing::fill(&engine, 600);
    let server = ServerMetrics::new();
    server.connection_opened();
    server.command("set", Duration::from_micros(40), None);
    server.command("get", Duration::from_micros(3), None);
    server.command("get", Duration::from_millis(2), Some("ERR failed"));
    let text = render_prometheus(&engine, &server);
    let f = parse_exposition(&text);
    for family in [
        "stria_commands_total",
        "stria_command_errors_total",
        "stria_command_duration_seconds",
        "stria_connected_clients",
        "stria_connections_received_total",
        "stria_connections_rejected_total",
        "stria_net_input_bytes_total",
        "stria_wal_batches_total",
        "stria_wal_records_total",
        "stria_wal_bytes_total",
        "stria_wal_syncs_total",
        "stria_wal_batch_write_seconds",
        "stria_flushes_total",
        "stria_flush_bytes_total",
        "stria_compactions_total",
        "stria_memstore_bytes",
        "stria_region_memstore_bytes",
        "stria_memory_limit_bytes",
        "stria_writer_stalls_total",
        "stria_writer_stall_seconds_total",
        "stria_reactor_busy_seconds_total",
        "stria_reactor_idle_seconds_total",
        "stria_device_reads_total",
        "stria_device_writes_total",
        "stria_device_written_bytes_total",
        "stria_device_flushes_total",
        "stria_replay_point",
    ] {
        assert!(f.contains_key(family), "no {family} in\n{text}");
    }
    let value = |family: &str, series: &str| {
        f[family]
            .1
            .iter()
            .find(|(s, _)| s == series)
            .unwrap_or_else(|| panic!("no {series}"))
            .1
    };
    assert_eq!(
        value(
            "stria_commands_total",
            "stria_commands_total{command=\"get\"}"
        ),
        2.0
    );
    assert_eq!(
        value(
            "stria_command_errors_total",
            "stria_command_errors_total{command=\"get\"}"
        ),
        1.0
    );
    // 3 µs is under the 4.096 µs bound, 2 ms under 4.19 ms.
    let get = "stria_command_duration_seconds";
    assert_eq!(
        value(
            get,
            &format!("{get}_bucket{{command=\"get\",le=\"0.000004096\"}}")
        ),
        1.0
    );
    assert_eq!(
        value(
            get,
            &format!("{get}_bucket{{command=\"get\",le=\"0.004194304\"}}")
        ),
        2.0
    );
    assert_eq!(
        value(get, &format!("{get}_bucket{{command=\"get\",le=\"+Inf\"}}")),
        2.0
    );
    assert_eq!(value(get, &format!("{get}_count{{command=\"get\"}}")), 2.0);
    // Buckets only grow.
    for (kind, samples) in f.values() {
        if kind == "histogram" {
            let mut last: BTreeMap<String, f64> = BTreeMap::new();
            for (s, v) in samples.iter().filter(|(s, _)| s.contains("_bucket")) {
                let key = s
                    .split(",le=")
                    .next()
                    .unwrap()
                    .split("{le=")
                    .next()
                    .unwrap()
                    .to_owned();
                assert!(*v >= last.get(&key).copied().unwrap_or(0.0), "{s}");
                last.insert(key, *v);
            }
        }
    }
    let wal_batches = value("stria_wal_batches_total", "stria_wal_batches_total");
    assert!(wal_batches > 0.0);
    assert_eq!(
        value(
            "stria_wal_batch_write_seconds",
            "stria_wal_batch_write_seconds_count"
        ),
        wal_batches
    );
    let flushes: f64 = f["stria_flushes_total"].1.iter().map(|s| s.1).sum();
    assert!(flushes >= 3.0, "{flushes}");
    // The quote in the device name is escaped.
    assert!(text.contains("stria_device_writes_total{device=\"data \\\"1\\\"\",role=\"data\"}"));
    let wal0_writes = value(
        "stria_device_writes_total",
        "stria_device_writes_total{device=\"wal0\",role=\"wal\"}",
    );
    assert!(wal0_writes > 0.0);
    let data_writes: f64 = f["stria_device_writes_total"]
        .1
        .iter()
        .filter(|(s, _)| s.contains("role=\"data\""))
        .map(|s| s.1)
        .sum();
    assert!(data_writes >= flushes);
    let busy: f64 = f["stria_reactor_busy_seconds_total"]
        .1
        .iter()
        .map(|s| s.1)
        .sum();
    assert!(busy > 0.0);
    engine.close().expect("close");
}

fn http(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let _ = s.shutdown(Shutdown::Write);
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_endpoint_serves_metrics_and_refuses_the_rest() {
    let render: Arc<dyn Fn() -> String + Send + Sync> =
        Arc::new(|| "# HELP stria_x X.\n# TYPE stria_x gauge\nstria_x 1\n".to_owned());
    let (addr, thread, stop) = spawn_endpoint("127.0.0.1:0".parse().unwrap(), render).unwrap();
    assert_ne!(addr.port(), 0);

    let ok = http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.contains("Content-Type: text/plain; version=0.0.4"),
        "{ok}"
    );
    assert!(
        ok.ends_with("\r\n\r\n# HELP stria_x X.\n# TYPE stria_x gauge\nstria_x 1\n"),
        "{ok}"
    );
    let len: usize = ok
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(len, 49);
    let head = http(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n");
    assert!(
        head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"),
        "{head}"
    );
    assert!(head.contains("Content-Length: 49\r\n"), "{head}");
    let q = http(addr, b"GET /metrics?x=1 HTTP/1.1\r\n\r\n");
    assert!(q.starts_with("HTTP/1.1 200 OK"), "{q}");

    let nf = http(addr, b"GET / HTTP/1.1\r\n\r\n");
    assert!(nf.starts_with("HTTP/1.1 404 Not Found\r\n"), "{nf}");
    let na = http(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert!(
        na.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
        "{na}"
    );
    assert!(na.contains("Allow: GET, HEAD\r\n"), "{na}");
    for garbage in [
        &b"\x00\xff\x13garbage\r\n\r\n"[..],
        b"GET\r\n\r\n",
        b"GET /metrics\r\n\r\n",
        b"GET /metrics SPDY/3\r\n\r\n",
        b"GET /metrics HTTP/1.1", // closed before the headers end
        b"",
    ] {
        let bad = http(addr, garbage);
        assert!(
            bad.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{garbage:?}: {bad}"
        );
    }
    let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    huge.resize(64 << 10, b'a');
    let big = {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // The server stops reading at its limit: the write may fail.
        let _ = s.write_all(&huge);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    assert!(big.is_empty() || big.starts_with("HTTP/1.1 431"), "{big}");

    // Still serving after all that.
    let ok = http(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");

    stop.shutdown();
    thread.join().unwrap();
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn a_client_that_says_nothing_is_dropped_at_the_deadline() {
    let render: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(|| "stria_x 1\n".to_owned());
    let (addr, thread, stop) = spawn_endpoint("127.0.0.1:0".parse().unwrap(), render).unwrap();
    let silent = TcpStream::connect(addr).unwrap();
    let started = Instant::now();
    let ok = http(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    let waited = started.elapsed();
    assert!(
        waited < REQUEST_DEADLINE + Duration::from_secs(2),
        "{waited:?}"
    );
    drop(silent);
    stop.shutdown();
    thread.join().unwrap();
}

#[test]
fn a_panicking_render_answers_500_and_keeps_serving() {
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    let render: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(move || {
        if c.fetch_add(1, Relaxed) == 0 {
            panic!("first render fails");
        }
        "stria_x 1\n".to_owned()
    });
    let (addr, thread, stop) = spawn_endpoint("127.0.0.1:0".parse().unwrap(), render).unwrap();
    let err = http(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(err.starts_with("HTTP/1.1 500"), "{err}");
    let ok = http(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    stop.shutdown();
    thread.join().unwrap();
}
