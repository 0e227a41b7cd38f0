//! The INFO sections that come from the engine and the server's counters,
//! in Redis's text shape: `# Section\r\n`, then `key:value\r\n` lines, a
//! blank line between sections. The `server` section (version, uptime,
//! port) is the server's own and is not made here.
//!
//! Keys that Redis tools look for keep their Redis names and meaning where
//! Stria has the figure (`connected_clients`, `used_memory`,
//! `aof_enabled`, `cmdstat_<name>`, ...); the rest are Stria's own.

use std::fmt::Write as _;

use super::metrics::{device_figures, unix_secs, ServerMetrics};
use crate::device::Device;
use crate::engine::{Engine, EngineStats};

/// Every section INFO prints, in order: the server's own first
/// (`server`) and last (`keyspace`), this module's between.
const ORDER: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "wal",
    "memstore",
    "devices",
    "scrub",
    "reactors",
    "commandstats",
    "errorstats",
    "latencystats",
    "keyspace",
];

/// The sections this module makes, in the order `INFO` prints them:
/// all but the server's own.
pub const SECTIONS: &[&str] = {
    let (_, rest) = ORDER.split_first().expect("sections");
    let (_, middle) = rest.split_last().expect("sections");
    middle
};

/// The sections INFO's arguments ask for (any case), in order, each
/// once: none or `default` give all but the per-command ones, `all` and
/// `everything` all; unknown names give nothing, as in Redis.
pub fn wanted(args: &[String]) -> Vec<&'static str> {
    let default = |s: &&str| !matches!(*s, "commandstats" | "latencystats");
    let mut want = vec![false; ORDER.len()];
    let args: Vec<String> = if args.is_empty() {
        vec!["default".into()]
    } else {
        args.iter().map(|a| a.to_ascii_lowercase()).collect()
    };
    for a in &args {
        for (i, s) in ORDER.iter().enumerate() {
            want[i] |= match a.as_str() {
                "all" | "everything" => true,
                "default" => default(s),
                name => name == *s,
            };
        }
    }
    ORDER
        .iter()
        .zip(want)
        .filter_map(|(s, w)| w.then_some(*s))
        .collect()
}

/// The INFO text of the `wanted` sections this module makes (others are
/// left out).
pub fn engine_sections<D: Device<Queue: Send> + Clone>(
    engine: &Engine<D>,
    server: &ServerMetrics,
    wanted: &[&str],
) -> String {
    let wanted: Vec<&str> = SECTIONS
        .iter()
        .copied()
        .filter(|s| wanted.contains(s))
        .collect();
    // Only the sections with engine figures pay for a snapshot.
    let needs_engine = wanted.iter().any(|s| {
        !matches!(
            *s,
            "clients"
                | "stats"
                | "commandstats"
                | "errorstats"
                | "latencystats"
                | "replication"
                | "cpu"
        )
    });
    let stats = needs_engine.then(|| engine.stats());
    let mut out = String::new();
    for name in wanted {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let mut w = Section::new(&mut out, name);
        match (name, &stats) {
            ("clients", _) => clients(&mut w, server),
            ("stats", _) => stats_section(&mut w, server),
            ("commandstats", _) => commandstats(&mut w, server),
            ("errorstats", _) => errorstats(&mut w, server),
            ("latencystats", _) => latencystats(&mut w, server),
            ("replication", _) => replication(&mut w),
            ("cpu", _) => cpu(&mut w),
            ("memory", Some(s)) => memory(&mut w, s, server),
            ("persistence", Some(s)) => persistence(&mut w, s, server),
            ("wal", Some(s)) => wal(&mut w, s, server),
            ("memstore", Some(s)) => memstore(&mut w, s),
            ("devices", Some(s)) => devices(&mut w, engine, s),
            ("scrub", Some(s)) => scrub(&mut w, s),
            ("reactors", Some(s)) => reactors(&mut w, s),
            _ => unreachable!("every section with engine figures has a snapshot"),
        }
    }
    out
}

/// No replicas: a master with none, as Redis reports one.
fn replication(w: &mut Section) {
    w.kv("role", "master");
    w.kv("connected_slaves", 0);
    w.kv("master_failover_state", "no-failover");
    w.kv("master_replid", "0000000000000000000000000000000000000000");
    w.kv("master_repl_offset", 0);
    w.kv("repl_backlog_active", 0);
}

/// The process's CPU time, from getrusage.
fn cpu(w: &mut Section) {
    let usage = |who| {
        // SAFETY: getrusage writes only into the struct it is given.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid rusage to write into.
        unsafe { libc::getrusage(who, &mut ru) };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        (secs(ru.ru_stime), secs(ru.ru_utime))
    };
    let (sys, user) = usage(libc::RUSAGE_SELF);
    let (csys, cuser) = usage(libc::RUSAGE_CHILDREN);
    w.kv("used_cpu_sys", format_args!("{sys:.6}"));
    w.kv("used_cpu_user", format_args!("{user:.6}"));
    w.kv("used_cpu_sys_children", format_args!("{csys:.6}"));
    w.kv("used_cpu_user_children", format_args!("{cuser:.6}"));
}

/// Writes one section's lines.
struct Section<'a> {
    out: &'a mut String,
}

impl Section<'_> {
    fn new<'a>(out: &'a mut String, name: &str) -> Section<'a> {
        let mut title = name.to_owned();
        if name == "wal" {
            title.make_ascii_uppercase();
        } else if let Some(first) = title.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        let _ = write!(out, "# {title}\r\n");
        Section { out }
    }

    fn kv(&mut self, key: &str, value: impl std::fmt::Display) {
        let _ = write!(self.out, "{key}:{value}\r\n");
    }
}

/// Bytes as Redis's `*_human` fields show them (`1.50M`).
fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "K", "M", "G", "T", "P"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes}B")
    } else {
        format!("{v:.2}{}", UNITS[u])
    }
}

/// A name usable inside an INFO key: anything but letters, digits, `-`
/// and `_` becomes `_`.
fn key_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn usec(ns: u64) -> u64 {
    ns / 1000
}

fn clients(w: &mut Section, s: &ServerMetrics) {
    w.kv("connected_clients", s.connected());
    w.kv("blocked_clients", s.blocked_clients());
    let (keys, nokey) = s.blocking_keys();
    w.kv("total_blocking_keys", keys);
    w.kv("total_blocking_keys_on_nokey", nokey);
    w.kv("tracking_clients", s.tracking()[0]);
    // Replies held until the writes they reveal are acknowledged, and
    // the shard's writes not yet in the engine's memstores.
    let (keys, bytes) = s.dirty();
    w.kv("replies_waiting_for_durability", s.replies_waiting());
    w.kv("replies_waiting_bytes", s.replies_waiting_bytes());
    w.kv("dirty_keys", keys);
    w.kv("dirty_bytes", bytes);
}

fn stats_section(w: &mut Section, s: &ServerMetrics) {
    let rates = s.rates();
    w.kv("total_connections_received", s.total_connections());
    w.kv("total_commands_processed", s.total_commands());
    w.kv(
        "instantaneous_ops_per_sec",
        rates.ops_per_sec.round() as u64,
    );
    w.kv("total_net_input_bytes", s.bytes_in_total());
    w.kv("total_net_output_bytes", s.bytes_out_total());
    let (reads, writes) = s.socket_calls();
    w.kv("total_reads_processed", reads);
    w.kv("total_writes_processed", writes);
    w.kv("gathered_connections", s.gathered_total());
    w.kv("migrate_cached_sockets", s.migrate_sockets());
    w.kv(
        "instantaneous_input_kbps",
        format_args!("{:.2}", rates.input_kbps),
    );
    w.kv(
        "instantaneous_output_kbps",
        format_args!("{:.2}", rates.output_kbps),
    );
    w.kv("rejected_connections", s.rejected());
    w.kv("total_error_replies", s.total_errors());
    w.kv("protocol_errors", s.protocol_errors());
    w.kv("auth_failures", s.auth_failures());
    w.kv("expired_keys", s.expired_keys());
    let [_, keys, items, prefixes] = s.tracking();
    w.kv("tracking_total_keys", keys);
    w.kv("tracking_total_items", items);
    w.kv("tracking_total_prefixes", prefixes);
}

/// The resident set size of this process, from /proc (0 where unknown).
fn rss_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn memory(w: &mut Section, s: &EngineStats, server: &ServerMetrics) {
    let m = &s.memory;
    let (scripts, lua) = server.scripting();
    w.kv("used_memory_lua", lua);
    w.kv("used_memory_vm_eval", lua);
    w.kv("number_of_cached_scripts", scripts);
    let c = &s.block_cache;
    // Redis's used_memory is what its allocator holds; here it is the
    // memstores, which the limit governs (writers wait at it, nothing is
    // evicted). The block cache, which evicts at its own limit, is
    // block_cache_bytes below; used_memory_rss counts both.
    w.kv("used_memory", m.total);
    w.kv("used_memory_human", human(m.total));
    let rss = rss_bytes();
    w.kv("used_memory_rss", rss);
    w.kv("used_memory_rss_human", human(rss));
    w.kv("used_memory_peak", m.peak);
    w.kv("used_memory_peak_human", human(m.peak));
    w.kv("maxmemory", m.limit);
    w.kv("maxmemory_human", human(m.limit));
    // Writers wait for flushes at the limit; nothing is evicted.
    w.kv("maxmemory_policy", "noeviction");
    w.kv("memstore_bytes", m.total);
    w.kv("memstore_limit", m.limit);
    w.kv("memstore_low_water", m.low);
    w.kv("writer_stalls", m.blocks);
    w.kv("writer_stall_usec", m.blocked.as_micros());
    w.kv("block_cache_bytes", c.bytes);
    w.kv("block_cache_limit", c.capacity);
    w.kv("block_cache_blocks", c.blocks);
    w.kv("block_cache_hits", c.hits);
    w.kv("block_cache_misses", c.misses);
    let r = server.rows();
    w.kv("row_cache_bytes", r.bytes);
    w.kv("row_cache_limit", r.capacity);
    w.kv("row_cache_keys", r.entries);
    w.kv("row_cache_hits", r.hits);
    w.kv("row_cache_misses", r.misses);
    w.kv("read_ahead_windows", r.ahead_reads);
    w.kv("read_ahead_hits", r.ahead_hits);
}

fn persistence(w: &mut Section, s: &EngineStats, server: &ServerMetrics) {
    // The engine answers only once its WAL is replayed.
    w.kv("loading", 0);
    w.kv("async_loading", 0);
    // Redis's count of changes since its last snapshot: here, since the
    // start (every change is in the log as it is made).
    w.kv("rdb_changes_since_last_save", server.changes());
    // Every acknowledged write at a logged level is in the WAL: the
    // equivalent of an append-only file that is always on.
    w.kv("aof_enabled", 1);
    w.kv("aof_rewrite_in_progress", 0);
    w.kv("aof_rewrite_scheduled", 0);
    w.kv(
        "aof_last_write_status",
        if s.failed.is_some() { "err" } else { "ok" },
    );
    w.kv("engine_failed", u8::from(s.failed.is_some()));
    if let Some(why) = &s.failed {
        // One line, whatever the reason says.
        w.kv("engine_failure", why.replace(['\r', '\n'], " "));
    }
    w.kv("replay_point", s.replay_point);
    w.kv("wal_written_lsn", s.wal_written_lsn);
    w.kv("wal_durable_lsn", s.wal_durable_lsn);
    w.kv("flushes", s.flushes);
    w.kv("flush_bytes", s.flush_bytes);
    w.kv("flush_usec", s.flush_time.as_micros());
    w.kv("flush_in_progress", s.running_jobs);
    w.kv("last_flush_time", s.last_flush.map_or(0, unix_secs));
    w.kv("compactions", s.compactions);
    w.kv("compaction_bytes", s.compaction_bytes);
    w.kv("compaction_filtered", s.compaction_filtered);
    w.kv("manifest_edits", s.manifest.edits);
    w.kv("manifest_checkpoints", s.manifest.checkpoints);
}

fn wal(w: &mut Section, s: &EngineStats, server: &ServerMetrics) {
    let wal = &s.wal;
    let used = s.wal_live_segments * s.wal_segment_size;
    let total = s.wal_segments * s.wal_segment_size;
    w.kv("wal_devices", wal.device_batches.len());
    let lost = wal.device_lost.iter().filter(|&&l| l > 0).count();
    w.kv("wal_devices_lost", lost);
    w.kv("wal_degraded", u8::from(lost > 0));
    w.kv("wal_devices_catching_up", s.wal_catching_up);
    w.kv(
        "wal_replace",
        server.replacements.describe(&wal.device_lost),
    );
    w.kv("wal_segment_size", s.wal_segment_size);
    w.kv("wal_segments", s.wal_segments);
    w.kv("wal_segments_live", s.wal_live_segments);
    w.kv("wal_log_used_bytes", used);
    w.kv("wal_log_free_bytes", total.saturating_sub(used));
    w.kv("wal_appends", wal.appends);
    w.kv("wal_batches", wal.batches);
    w.kv("wal_records", wal.records);
    w.kv("wal_bytes_written", wal.bytes);
    w.kv("wal_syncs", wal.flushes.iter().sum::<u64>());
    w.kv(
        "wal_records_per_batch",
        format_args!("{:.2}", wal.records_per_batch()),
    );
    w.kv("wal_bytes_per_batch", wal.bytes / wal.batches.max(1));
    let writes = wal.writes_completed();
    w.kv(
        "wal_batch_write_usec_per_call",
        format_args!("{:.2}", wal.write_ns as f64 / 1e3 / writes.max(1) as f64),
    );
    w.kv("wal_writer_wait_usec", usec(wal.writer_wait_ns));
    w.kv("wal_log_full", wal.log_full);
    w.kv("wal_segments_reclaimed", wal.segments_reclaimed);
    w.kv("wal_written_lsn", s.wal_written_lsn);
    w.kv("wal_durable_lsn", s.wal_durable_lsn);
}

fn memstore(w: &mut Section, s: &EngineStats) {
    w.kv("regions", s.region_bytes.len());
    w.kv("memstore_bytes", s.memory.total);
    w.kv(
        "memstore_active_bytes",
        s.region_active_bytes.iter().sum::<u64>(),
    );
    w.kv(
        "memstore_frozen_bytes",
        s.region_frozen_bytes.iter().sum::<u64>(),
    );
    w.kv("memstore_frozen", s.region_frozen.iter().sum::<usize>());
    w.kv("memstore_freezes", s.freezes);
    w.kv("delete_purges", s.purges);
    w.kv("memstore_unfolded_keys", s.unfolded);
    w.kv("memstore_folded_ahead", s.folded_ahead);
    w.kv("queued_flushes", s.queued_flushes);
    w.kv("queued_compactions", s.queued_compactions);
    w.kv("running_jobs", s.running_jobs);
    w.kv("block_files", s.region_files.iter().sum::<usize>());
    for r in 0..s.region_bytes.len() {
        let at = |v: &[u64]| v.get(r).copied().unwrap_or(0);
        w.kv(
            &format!("region{r}"),
            format_args!(
                "active_bytes={},frozen_bytes={},frozen={},files={}",
                at(&s.region_active_bytes),
                at(&s.region_frozen_bytes),
                s.region_frozen.get(r).copied().unwrap_or(0),
                s.region_files.get(r).copied().unwrap_or(0),
            ),
        );
    }
}

fn devices<D: Device<Queue: Send> + Clone>(w: &mut Section, engine: &Engine<D>, s: &EngineStats) {
    for d in device_figures(engine, s) {
        let mut v = format!(
            "role={},backend={},capacity={}",
            d.role, d.backend, d.capacity
        );
        if let Some(free) = d.free {
            let _ = write!(v, ",free={free}");
        }
        if let Some((reads, bytes)) = d.reads {
            let _ = write!(v, ",reads={reads},read_bytes={bytes}");
        }
        let _ = write!(
            v,
            ",writes={},written_bytes={},flushes={}",
            d.writes, d.written, d.flushes
        );
        if let Some(fua) = d.fua_writes {
            let _ = write!(v, ",fua_writes={fua}");
        }
        let _ = write!(v, ",errors={}", d.errors);
        let _ = write!(v, ",state={}", if d.lost { "lost" } else { "ok" });
        w.kv(&format!("device_{}", key_safe(&d.name)), v);
    }
}

/// The background scrub: how far the pass is, what it found.
fn scrub(w: &mut Section, s: &EngineStats) {
    let p = &s.scrub;
    w.kv("block_file_copies", s.file_copies);
    w.kv("block_copy_reads", s.copy_reads);
    w.kv(
        "data_devices_lost",
        s.data_lost.iter().filter(|&&l| l).count(),
    );
    w.kv("scrub_rate", p.rate);
    w.kv("scrub_running", u8::from(p.running));
    w.kv("scrub_passes", p.passes);
    w.kv("scrub_pass_files", p.pass_files);
    w.kv("scrub_pass_files_done", p.files_done);
    w.kv("scrub_pass_bytes", p.pass_bytes);
    w.kv("scrub_pass_bytes_done", p.bytes_done);
    let pct = if p.pass_bytes == 0 {
        0.0
    } else {
        p.bytes_done as f64 * 100.0 / p.pass_bytes as f64
    };
    w.kv("scrub_pass_pct", format_args!("{pct:.2}"));
    w.kv(
        "scrub_last_pass_usec",
        p.last_pass.map_or(0, |d| d.as_micros()),
    );
    w.kv("scrub_blocks", p.blocks);
    w.kv("scrub_bytes", p.bytes);
    w.kv("scrub_bad_blocks", p.bad_blocks);
    w.kv("scrub_repaired_blocks", p.repaired_blocks);
    for (i, f) in p.findings.iter().enumerate() {
        w.kv(
            &format!("scrub_bad_{i}"),
            format_args!(
                "file={},region={},device={},lba={},keys={},repaired={}",
                f.file,
                f.region,
                f.device,
                f.lba,
                f.keys,
                u8::from(f.repaired.is_some())
            ),
        );
    }
}

fn reactors(w: &mut Section, s: &EngineStats) {
    let pct = |busy: u64, idle: u64| {
        if busy + idle == 0 {
            0.0
        } else {
            busy as f64 * 100.0 / (busy + idle) as f64
        }
    };
    if let Some(r) = &s.wal_reactor {
        w.kv(
            &format!("reactor_{}", key_safe(&r.name)),
            format_args!(
                "set=wal,busy_usec={},idle_usec={},parked_usec={},busy_pct={:.2},iterations={},messages={},completions={},parks={}",
                usec(r.busy_ns),
                usec(r.idle_ns),
                usec(r.parked_ns),
                pct(r.busy_ns, r.idle_ns),
                r.iterations,
                r.messages,
                r.completions,
                r.parks,
            ),
        );
    }
    for r in &s.flush_reactors {
        let (busy, idle) = (r.busy.as_nanos() as u64, r.idle.as_nanos() as u64);
        w.kv(
            &format!("reactor_{}", key_safe(&r.name)),
            format_args!(
                "set=flush,busy_usec={},idle_usec={},busy_pct={:.2},jobs={}",
                usec(busy),
                usec(idle),
                pct(busy, idle),
                r.jobs,
            ),
        );
    }
}

fn commandstats(w: &mut Section, s: &ServerMetrics) {
    for c in s.commands() {
        w.kv(
            &format!("cmdstat_{}", c.name),
            format_args!(
                "calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}",
                c.calls,
                c.usec,
                c.usec_per_call(),
                c.rejected,
                c.errors
            ),
        );
    }
}

/// Error replies by code (see `metrics::errors`), as Redis's errorstats.
fn errorstats(w: &mut Section, s: &ServerMetrics) {
    for (code, n) in s.error_codes() {
        w.kv(
            &format!("errorstat_{}", key_safe(&code)),
            format_args!("count={n}"),
        );
    }
}

fn latencystats(w: &mut Section, s: &ServerMetrics) {
    for c in s.commands() {
        w.kv(
            &format!("latency_percentiles_usec_{}", c.name),
            format_args!(
                "p50={:.3},p99={:.3},p99.9={:.3}",
                c.p50_usec, c.p99_usec, c.p999_usec
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::server::metrics::testing;

    /// The sections of an INFO text and their `key:value` lines, checking
    /// the shape on the way.
    fn parse(text: &str) -> Vec<(String, Vec<(String, String)>)> {
        assert!(text.ends_with("\r\n"), "{text:?}");
        let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
        for (i, block) in text.split("\r\n\r\n").enumerate() {
            let mut lines = block.split("\r\n").filter(|l| !l.is_empty());
            let title = lines.next().expect("a title");
            let title = title.strip_prefix("# ").expect(title);
            let mut kv = Vec::new();
            for l in lines {
                assert!(!l.contains('\n') && !l.contains('\r'), "{l:?}");
                let (k, v) = l.split_once(':').unwrap_or_else(|| panic!("{l:?}"));
                assert!(!k.is_empty() && !k.contains(' '), "{l:?}");
                kv.push((k.to_owned(), v.to_owned()));
            }
            assert!(i == 0 || !out.is_empty());
            out.push((title.to_owned(), kv));
        }
        out
    }

    #[test]
    fn sections_have_the_keys_redis_tools_read() {
        let engine = testing::engine();
        testing::fill(&engine, 300);
        let server = ServerMetrics::new();
        server.connection_opened();
        server.connection_opened();
        server.connection_closed();
        server.bytes_in(100);
        server.bytes_out(300);
        server.command("get", Duration::from_micros(12), None);
        server.command(
            "set",
            Duration::from_micros(30),
            Some("WRONGTYPE Operation"),
        );

        let all = engine_sections(&engine, &server, &wanted(&["all".into()]));
        let sections = parse(&all);
        let titles: Vec<&str> = sections.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Clients",
                "Memory",
                "Persistence",
                "Stats",
                "Replication",
                "Cpu",
                "WAL",
                "Memstore",
                "Devices",
                "Scrub",
                "Reactors",
                "Commandstats",
                "Errorstats",
                "Latencystats"
            ]
        );
        let get = |section: &str, key: &str| -> String {
            sections
                .iter()
                .find(|(t, _)| t == section)
                .and_then(|(_, kv)| kv.iter().find(|(k, _)| k == key))
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("no {key} in {section}:\n{all}"))
        };
        assert_eq!(get("Clients", "connected_clients"), "1");
        assert_eq!(get("Stats", "total_connections_received"), "2");
        assert_eq!(get("Stats", "total_commands_processed"), "2");
        assert_eq!(get("Stats", "total_net_input_bytes"), "100");
        assert_eq!(get("Stats", "total_net_output_bytes"), "300");
        assert_eq!(get("Stats", "total_reads_processed"), "1");
        assert_eq!(get("Stats", "total_writes_processed"), "1");
        assert_eq!(get("Stats", "rejected_connections"), "0");
        assert_eq!(get("Stats", "total_error_replies"), "1");
        assert!(get("Stats", "instantaneous_ops_per_sec")
            .parse::<u64>()
            .is_ok());
        assert_eq!(get("Persistence", "loading"), "0");
        assert_eq!(get("Persistence", "aof_enabled"), "1");
        assert_eq!(get("Persistence", "aof_last_write_status"), "ok");
        assert!(get("Persistence", "flushes").parse::<u64>().unwrap() >= 3);
        assert_ne!(get("Persistence", "last_flush_time"), "0");
        assert!(get("Persistence", "replay_point").parse::<u64>().unwrap() > 300);
        assert_eq!(get("Memory", "maxmemory"), (1u64 << 20).to_string());
        assert_eq!(get("Memory", "maxmemory_human"), "1.00M");
        assert_eq!(get("Memory", "maxmemory_policy"), "noeviction");
        assert!(get("Memory", "used_memory").parse::<u64>().is_ok());
        assert!(get("Memory", "writer_stall_usec").parse::<u64>().is_ok());
        assert_eq!(get("WAL", "wal_devices"), "2");
        assert_eq!(get("WAL", "wal_segment_size"), (512u64 << 10).to_string());
        assert!(get("WAL", "wal_batches").parse::<u64>().unwrap() > 0);
        assert_eq!(get("WAL", "wal_records"), "300");
        let used: u64 = get("WAL", "wal_log_used_bytes").parse().unwrap();
        let free: u64 = get("WAL", "wal_log_free_bytes").parse().unwrap();
        let segs: u64 = get("WAL", "wal_segments").parse().unwrap();
        assert_eq!(used + free, segs * (512 << 10));
        assert_eq!(get("Memstore", "regions"), "3");
        assert!(get("Memstore", "region2").starts_with("active_bytes="));
        let wal0 = get("Devices", "device_wal0");
        assert!(
            wal0.starts_with("role=wal,backend=sim,capacity=16777216,writes="),
            "{wal0}"
        );
        let data1 = get("Devices", "device_data__1_");
        assert!(
            data1.starts_with("role=data,backend=sim,capacity=33554432,free="),
            "{data1}"
        );
        assert!(
            data1.contains(",reads=") && data1.contains(",flushes="),
            "{data1}"
        );
        // The test engine runs no background scrub.
        assert_eq!(get("Scrub", "scrub_rate"), "0");
        assert_eq!(get("Scrub", "scrub_passes"), "0");
        assert_eq!(get("Scrub", "scrub_bad_blocks"), "0");
        let wal = get("Reactors", "reactor_wal");
        assert!(wal.starts_with("set=wal,busy_usec="), "{wal}");
        assert!(get("Reactors", "reactor_flush1").starts_with("set=flush,busy_usec="));
        assert_eq!(
            get("Commandstats", "cmdstat_set"),
            "calls=1,usec=30,usec_per_call=30.00,rejected_calls=0,failed_calls=1"
        );
        assert!(get("Commandstats", "cmdstat_get").starts_with("calls=1,usec=12,"));
        assert_eq!(get("Errorstats", "errorstat_WRONGTYPE"), "count=1");
        assert!(get("Latencystats", "latency_percentiles_usec_get").starts_with("p50="));

        // One section, any case; the aliases of everything; unknown: nothing.
        let clients = engine_sections(&engine, &server, &wanted(&["CLIENTS".into()]));
        assert!(
            clients.starts_with(
                "# Clients\r\nconnected_clients:1\r\nblocked_clients:0\r\ntotal_blocking_keys:0\r\ntotal_blocking_keys_on_nokey:0\r\ntracking_clients:0\r\nreplies_waiting_for_durability:0\r\nreplies_waiting_bytes:0\r\n"
            ),
            "{clients}"
        );
        let wal = engine_sections(&engine, &server, &wanted(&["wal".into()]));
        assert!(wal.starts_with("# WAL\r\nwal_devices:2\r\n"), "{wal}");
        assert_eq!(parse(&wal).len(), 1);
        for alias in ["all", "everything"] {
            let text = engine_sections(&engine, &server, &wanted(&[alias.into()]));
            assert_eq!(parse(&text).len(), SECTIONS.len(), "{alias}");
        }
        let default = engine_sections(&engine, &server, &wanted(&[]));
        assert_eq!(parse(&default).len(), SECTIONS.len() - 2);
        assert!(!default.contains("rejected_calls"));
        assert_eq!(
            wanted(&["cpu".into(), "DEFAULT".into(), "cpu".into()]),
            wanted(&[])
        );
        assert_eq!(wanted(&["cpu".into(), "sentinel".into()]), ["cpu"]);
        assert_eq!(
            engine_sections(&engine, &server, &wanted(&["nosuch".into()])),
            ""
        );
        assert_eq!(engine_sections(&engine, &server, &["server"]), "");
        engine.close().expect("close");
    }

    #[test]
    fn human_sizes_read_like_redis() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(1536), "1.50K");
        assert_eq!(human(3 << 30), "3.00G");
    }
}
