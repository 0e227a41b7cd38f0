//! The Prometheus text format (version 0.0.4).

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::counters::*;
use super::*;
use crate::device::Device;
use crate::engine::{Engine, EngineStats};
use crate::wal::stats::WRITE_LATENCY_BOUNDS_NS;

/// Escapes a label value: backslash, double quote and line feed.
pub(super) fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for ch in v.chars() {
        match ch {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A sample value as Prometheus reads it.
pub(super) fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// Builds the exposition text family by family.
pub(super) struct Text {
    out: String,
}

impl Text {
    /// Starts family `stria_<name>`.
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP stria_{name} {help}");
        let _ = writeln!(self.out, "# TYPE stria_{name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
        self.out.push_str("stria_");
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = match value.into() {
            Value::Int(v) => writeln!(self.out, " {v}"),
            Value::Float(v) => writeln!(self.out, " {}", float(v)),
        };
    }

    /// A family of one unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl Into<Value>) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// The samples of one histogram: `cumulative[i]` observations at or
    /// below `bounds[i]` (seconds), then `count` and `sum` (seconds).
    fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        bounds: &[f64],
        cumulative: &[u64],
        count: u64,
        sum: f64,
    ) {
        let bucket = format!("{name}_bucket");
        for (b, &n) in bounds.iter().zip(cumulative) {
            let le = float(*b);
            let mut l = labels.to_vec();
            l.push(("le", &le));
            self.sample(&bucket, &l, n);
        }
        let mut l = labels.to_vec();
        l.push(("le", "+Inf"));
        self.sample(&bucket, &l, count);
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(&format!("{name}_count"), labels, count);
    }
}

pub(super) enum Value {
    Int(u64),
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(v)
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::Int(v as u64)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

pub(super) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

pub(super) fn ns_secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The server's and the engine's figures in the Prometheus text format
/// (version 0.0.4).
pub fn render_prometheus<D: Device<Queue: Send> + Clone>(
    engine: &Engine<D>,
    server: &ServerMetrics,
) -> String {
    let mut t = Text {
        out: String::with_capacity(32 << 10),
    };
    render_server(&mut t, server);
    let stats = engine.stats();
    let data_names: Vec<String> = engine
        .data_devices()
        .iter()
        .map(|d| d.info().name.clone())
        .collect();
    render_engine(&mut t, &stats, &data_names);
    render_devices(&mut t, &device_figures(engine, &stats));
    t.out
}

pub(super) fn render_server(t: &mut Text, s: &ServerMetrics) {
    t.single(
        "uptime_seconds",
        "gauge",
        "Seconds since the server started.",
        secs(s.uptime()),
    );
    t.single(
        "connected_clients",
        "gauge",
        "Client connections open now.",
        s.connected(),
    );
    t.single(
        "blocked_clients",
        "gauge",
        "Clients waiting in a blocking command (BLPOP and the like).",
        s.blocked_clients(),
    );
    t.single(
        "replies_waiting",
        "gauge",
        "Replies held until the writes they depend on are acknowledged at their levels.",
        s.replies_waiting(),
    );
    t.single(
        "replies_waiting_bytes",
        "gauge",
        "What the replies held take in memory, about.",
        s.replies_waiting_bytes(),
    );
    let (dirty_keys, dirty_bytes) = s.dirty();
    t.single(
        "shard_dirty_keys",
        "gauge",
        "Keys written on the shard whose writes are not yet acknowledged and in the memstores.",
        dirty_keys,
    );
    t.single(
        "shard_dirty_bytes",
        "gauge",
        "Bytes the shard's dirty keys hold (keys, values and 64 bytes each).",
        dirty_bytes,
    );
    let r = s.rows();
    t.single(
        "row_cache_bytes",
        "gauge",
        "Bytes of keys and values in the shard's row cache (64 bytes each beside).",
        r.bytes,
    );
    t.single(
        "row_cache_limit_bytes",
        "gauge",
        "What the row cache may hold (server.row-cache).",
        r.capacity,
    );
    t.single(
        "row_cache_keys",
        "gauge",
        "Keys in the row cache, with a value or known to have none.",
        r.entries,
    );
    t.single(
        "row_cache_hits_total",
        "counter",
        "Reads of a clean key the row cache answered.",
        r.hits,
    );
    t.single(
        "row_cache_misses_total",
        "counter",
        "Reads of a clean key the row cache did not hold, which the engine answered.",
        r.misses,
    );
    t.single(
        "read_ahead_windows_total",
        "counter",
        "Runs of list elements a pop read from the block files ahead of the next pops.",
        r.ahead_reads,
    );
    t.single(
        "read_ahead_hits_total",
        "counter",
        "Pops whose element a window read ahead held.",
        r.ahead_hits,
    );
    t.single(
        "gathered_connections_total",
        "counter",
        "Connections a turn served after its first poll, whose writes joined its group commit.",
        s.gathered_total(),
    );
    t.single(
        "connections_received_total",
        "counter",
        "Client connections accepted.",
        s.total_connections(),
    );
    t.single(
        "connections_rejected_total",
        "counter",
        "Client connections refused because the server had max-clients.",
        s.rejected(),
    );
    t.single(
        "net_input_bytes_total",
        "counter",
        "Bytes read from clients.",
        s.bytes_in_total(),
    );
    t.single(
        "net_output_bytes_total",
        "counter",
        "Bytes written to clients.",
        s.bytes_out_total(),
    );
    t.single(
        "protocol_errors_total",
        "counter",
        "Requests that were not valid RESP.",
        s.protocol_errors(),
    );
    t.single(
        "auth_failures_total",
        "counter",
        "Failed authentications.",
        s.auth_failures(),
    );
    t.single(
        "expired_keys_total",
        "counter",
        "Keys deleted because they expired.",
        s.expired_keys(),
    );
    t.single(
        "commands_processed_total",
        "counter",
        "Commands run, all commands together.",
        s.total_commands(),
    );
    let called: Vec<&CommandCounters> = s
        .commands
        .iter()
        .filter(|c| c.calls.load(Relaxed) > 0)
        .collect();
    t.family(
        "commands_total",
        "counter",
        "Calls per command (commands outside the server's table count as unknown).",
    );
    for c in &called {
        t.sample(
            "commands_total",
            &[("command", c.name)],
            c.calls.load(Relaxed),
        );
    }
    t.family(
        "command_errors_total",
        "counter",
        "Calls per command that answered with an error.",
    );
    for c in &called {
        t.sample(
            "command_errors_total",
            &[("command", c.name)],
            c.errors.load(Relaxed),
        );
    }
    t.family(
        "command_duration_seconds",
        "histogram",
        "Time to run a command, from its request parsed to its reply queued.",
    );
    let bounds: Vec<f64> = COMMAND_BOUNDS_NS.iter().map(|&b| ns_secs(b)).collect();
    for c in &called {
        let counts = c.latency.counts();
        let cumulative: Vec<u64> = COMMAND_BOUNDS_NS
            .iter()
            .map(|&b| count_below(&counts, b))
            .collect();
        // The buckets and the count come from one read of the histogram, so
        // they agree even while calls are recorded.
        let count = counts.iter().sum();
        t.histogram(
            "command_duration_seconds",
            &[("command", c.name)],
            &bounds,
            &cumulative,
            count,
            ns_secs(c.ns.load(Relaxed)),
        );
    }
}

pub(super) fn render_engine(t: &mut Text, s: &EngineStats, data_names: &[String]) {
    t.single(
        "engine_failed",
        "gauge",
        "1 once a flush or the WAL failed and the engine refuses writes.",
        u64::from(s.failed.is_some()),
    );
    t.single(
        "engine_writes_total",
        "counter",
        "Puts and deletes.",
        s.writes,
    );
    t.single("engine_gets_total", "counter", "Gets.", s.gets);
    t.single("engine_scans_total", "counter", "Scans.", s.scans);
    t.single(
        "bloom_false_positives_total",
        "counter",
        "Block files looked in for a key their bloom filter let through but did not hold.",
        s.bloom_false_positives,
    );
    let c = &s.block_cache;
    t.single(
        "block_cache_bytes",
        "gauge",
        "Bytes of data blocks in the block cache of point lookups.",
        c.bytes,
    );
    t.single(
        "block_cache_limit_bytes",
        "gauge",
        "What the block cache may hold (flush.block-cache).",
        c.capacity,
    );
    t.single(
        "block_cache_blocks",
        "gauge",
        "Data blocks in the block cache.",
        c.blocks,
    );
    t.single(
        "block_cache_hits_total",
        "counter",
        "Data blocks a lookup or scan found in the block cache.",
        c.hits,
    );
    t.single(
        "block_cache_misses_total",
        "counter",
        "Data blocks a lookup or scan looked for in the block cache and read from a device.",
        c.misses,
    );

    let p = &s.scrub;
    t.single(
        "scrub_rate_bytes",
        "gauge",
        "Bytes a second the background scrub reads (flush.scrub-rate; 0: off).",
        p.rate,
    );
    t.single(
        "scrub_passes_total",
        "counter",
        "Passes of the background scrub over every block file.",
        p.passes,
    );
    t.single(
        "scrub_pass_progress_bytes",
        "gauge",
        "Bytes of block files the pass under way (or the last) has checked.",
        p.bytes_done,
    );
    t.single(
        "scrub_pass_bytes",
        "gauge",
        "Bytes of block files the pass under way (or the last) checks.",
        p.pass_bytes,
    );
    t.single(
        "scrub_read_bytes_total",
        "counter",
        "Bytes of data blocks the background scrub read back and checked.",
        p.bytes,
    );
    t.single(
        "scrub_bad_blocks_total",
        "counter",
        "Bad blocks the background scrub found (again in each pass that finds them).",
        p.bad_blocks,
    );
    t.single(
        "scrub_repaired_blocks_total",
        "counter",
        "Bad blocks the background scrub rewrote from another copy of their file.",
        p.repaired_blocks,
    );
    t.single(
        "block_copy_reads_total",
        "counter",
        "Data blocks read from another copy of their file because the first copy read was bad.",
        s.copy_reads,
    );

    // Memory and memstores.
    let m = &s.memory;
    t.single(
        "memstore_bytes",
        "gauge",
        "Bytes of all memstores (active and frozen) together.",
        m.total,
    );
    t.single(
        "memstore_peak_bytes",
        "gauge",
        "Highest memstore total since open.",
        m.peak,
    );
    t.single(
        "memory_limit_bytes",
        "gauge",
        "The global memstore limit: writers wait at or above it.",
        m.limit,
    );
    t.single(
        "memory_low_water_bytes",
        "gauge",
        "Waiting writers resume below this.",
        m.low,
    );
    t.single(
        "writer_stalls_total",
        "counter",
        "Times a writer waited above the global memstore limit.",
        m.blocks,
    );
    t.single(
        "writer_stall_seconds_total",
        "counter",
        "Time writers waited above the global memstore limit, summed over writers.",
        secs(m.blocked),
    );
    t.family(
        "region_memstore_bytes",
        "gauge",
        "Memstore bytes per region: the active memstore and the frozen ones waiting for a flush.",
    );
    for (r, (&a, &f)) in s
        .region_active_bytes
        .iter()
        .zip(&s.region_frozen_bytes)
        .enumerate()
    {
        let r = r.to_string();
        t.sample(
            "region_memstore_bytes",
            &[("region", &r), ("state", "active")],
            a,
        );
        t.sample(
            "region_memstore_bytes",
            &[("region", &r), ("state", "frozen")],
            f,
        );
    }
    t.family(
        "region_frozen_memstores",
        "gauge",
        "Frozen memstores per region.",
    );
    for (r, &n) in s.region_frozen.iter().enumerate() {
        t.sample("region_frozen_memstores", &[("region", &r.to_string())], n);
    }
    t.family("region_files", "gauge", "Block files per region.");
    for (r, &n) in s.region_files.iter().enumerate() {
        t.sample("region_files", &[("region", &r.to_string())], n);
    }
    t.single(
        "memstore_freezes_total",
        "counter",
        "Memstores frozen.",
        s.freezes,
    );
    t.single(
        "delete_purges_total",
        "counter",
        "Regions flushed and compacted because their scans kept passing deletes.",
        s.purges,
    );
    t.single(
        "memstore_unfolded_keys",
        "gauge",
        "Keys the active memstores hold outside their B-trees: the next range read of one folds them first.",
        s.unfolded,
    );
    t.single(
        "memstore_folded_ahead_total",
        "counter",
        "Keys folded into memstores' B-trees while the server idled.",
        s.folded_ahead,
    );

    // Flushes and compactions.
    t.family(
        "flushes_total",
        "counter",
        "Memstore flushes written, per data device.",
    );
    t.family_per_data_device("flushes_total", &s.device_flushes, data_names);
    t.family(
        "flush_bytes_total",
        "counter",
        "Bytes of block files written by memstore flushes, per data device.",
    );
    t.family_per_data_device("flush_bytes_total", &s.device_flush_bytes, data_names);
    t.single(
        "flush_seconds_total",
        "counter",
        "Time spent in flushes, summed over flushes (they overlap on several reactors).",
        secs(s.flush_time),
    );
    t.single(
        "compactions_total",
        "counter",
        "Compactions done.",
        s.compactions,
    );
    t.single(
        "compaction_bytes_total",
        "counter",
        "Bytes of block files written by compactions.",
        s.compaction_bytes,
    );
    t.single(
        "compaction_filtered_total",
        "counter",
        "Entries compactions dropped as dead: elements of deleted or replaced collections.",
        s.compaction_filtered,
    );
    t.family(
        "jobs_queued",
        "gauge",
        "Flushes and compactions waiting for a flush reactor.",
    );
    t.sample("jobs_queued", &[("kind", "flush")], s.queued_flushes);
    t.sample(
        "jobs_queued",
        &[("kind", "compaction")],
        s.queued_compactions,
    );
    t.single(
        "jobs_running",
        "gauge",
        "Flushes and compactions running.",
        s.running_jobs,
    );
    t.single(
        "last_flush_timestamp_seconds",
        "gauge",
        "When the last flush was recorded (0: none since open).",
        s.last_flush.map_or(0, unix_secs),
    );
    t.single(
        "manifest_edits_total",
        "counter",
        "Manifest edit records written.",
        s.manifest.edits,
    );
    t.single(
        "manifest_checkpoints_total",
        "counter",
        "Manifest checkpoints written.",
        s.manifest.checkpoints,
    );

    // WAL.
    let w = &s.wal;
    t.single(
        "wal_appends_total",
        "counter",
        "Records appended to the WAL.",
        w.appends,
    );
    t.single(
        "wal_batches_total",
        "counter",
        "WAL batches written.",
        w.batches,
    );
    t.single(
        "wal_records_total",
        "counter",
        "Records in the WAL batches written.",
        w.records,
    );
    t.single(
        "wal_bytes_total",
        "counter",
        "Bytes of WAL batches written, padded to blocks.",
        w.bytes,
    );
    t.single(
        "wal_syncs_total",
        "counter",
        "Flush commands sent to the WAL devices, all devices together.",
        w.flushes.iter().sum::<u64>(),
    );
    t.family(
        "wal_batch_write_seconds",
        "histogram",
        "Time from submitting a WAL batch write to its completion.",
    );
    let bounds: Vec<f64> = WRITE_LATENCY_BOUNDS_NS
        .iter()
        .map(|&b| ns_secs(b))
        .collect();
    let cumulative: Vec<u64> = w
        .write_latency
        .iter()
        .take(bounds.len())
        .scan(0, |acc, &n| {
            *acc += n;
            Some(*acc)
        })
        .collect();
    t.histogram(
        "wal_batch_write_seconds",
        &[],
        &bounds,
        &cumulative,
        w.writes_completed(),
        ns_secs(w.write_ns),
    );
    t.single(
        "wal_writer_wait_seconds_total",
        "counter",
        "Time writers waited for room in the WAL's ring, summed over writers.",
        ns_secs(w.writer_wait_ns),
    );
    t.single(
        "wal_log_full_total",
        "counter",
        "Times the WAL found no free segment for a batch.",
        w.log_full,
    );
    t.single(
        "wal_segments_reclaimed_total",
        "counter",
        "WAL segments reclaimed.",
        w.segments_reclaimed,
    );
    t.single(
        "wal_segments_live",
        "gauge",
        "WAL segments holding log not yet released.",
        s.wal_live_segments,
    );
    t.single(
        "wal_segments",
        "gauge",
        "WAL segments in all devices together.",
        s.wal_segments,
    );
    t.single(
        "wal_segment_size_bytes",
        "gauge",
        "Bytes per WAL segment.",
        s.wal_segment_size,
    );
    t.single(
        "wal_written_lsn",
        "gauge",
        "Every LSN at or below this is written.",
        s.wal_written_lsn,
    );
    t.single(
        "wal_durable_lsn",
        "gauge",
        "Every LSN at or below this is durable.",
        s.wal_durable_lsn,
    );
    t.single(
        "replay_point",
        "gauge",
        "The first LSN recovery would replay now.",
        s.replay_point,
    );

    // Reactors.
    let mut reactors: Vec<(&str, &str, u64, u64, Option<u64>)> = Vec::new();
    if let Some(r) = &s.wal_reactor {
        reactors.push(("wal", &r.name, r.busy_ns, r.idle_ns, Some(r.parked_ns)));
    }
    for r in &s.flush_reactors {
        reactors.push((
            "flush",
            &r.name,
            r.busy.as_nanos() as u64,
            r.idle.as_nanos() as u64,
            None,
        ));
    }
    t.family(
        "reactor_busy_seconds_total",
        "counter",
        "Time a reactor spent working (handling messages, completions, flushes, compactions).",
    );
    for (set, name, busy, _, _) in &reactors {
        t.sample(
            "reactor_busy_seconds_total",
            &[("set", set), ("reactor", name)],
            ns_secs(*busy),
        );
    }
    t.family(
        "reactor_idle_seconds_total",
        "counter",
        "Time a reactor found nothing to do, parked or waiting time included.",
    );
    for (set, name, _, idle, _) in &reactors {
        t.sample(
            "reactor_idle_seconds_total",
            &[("set", set), ("reactor", name)],
            ns_secs(*idle),
        );
    }
    t.family(
        "reactor_parked_seconds_total",
        "counter",
        "The part of a poll-mode reactor's idle time spent asleep.",
    );
    for (set, name, _, _, parked) in &reactors {
        if let Some(p) = parked {
            t.sample(
                "reactor_parked_seconds_total",
                &[("set", set), ("reactor", name)],
                ns_secs(*p),
            );
        }
    }
}

impl Text {
    /// One sample per data device of `values`, labelled by device name.
    fn family_per_data_device(&mut self, name: &str, values: &[u64], names: &[String]) {
        for (v, n) in values.iter().zip(names) {
            self.sample(name, &[("device", n)], *v);
        }
    }
}

pub(super) fn render_devices(t: &mut Text, devices: &[DeviceFigures]) {
    fn each(
        t: &mut Text,
        devices: &[DeviceFigures],
        name: &str,
        kind: &str,
        help: &str,
        f: impl Fn(&DeviceFigures) -> Option<u64>,
    ) {
        t.family(name, kind, help);
        for d in devices {
            if let Some(v) = f(d) {
                t.sample(name, &[("device", &d.name), ("role", d.role)], v);
            }
        }
    }
    each(
        t,
        devices,
        "device_capacity_bytes",
        "gauge",
        "Device capacity.",
        |d| Some(d.capacity),
    );
    each(
        t,
        devices,
        "device_free_bytes",
        "gauge",
        "Free bytes of a data device's extent allocator.",
        |d| d.free,
    );
    each(
        t,
        devices,
        "device_reads_total",
        "counter",
        "Read requests to a data device.",
        |d| d.reads.map(|r| r.0),
    );
    each(
        t,
        devices,
        "device_read_bytes_total",
        "counter",
        "Bytes read from a data device.",
        |d| d.reads.map(|r| r.1),
    );
    each(
        t,
        devices,
        "device_writes_total",
        "counter",
        "Write requests (WAL batches; block-file chunks and manifest records).",
        |d| Some(d.writes),
    );
    each(
        t,
        devices,
        "device_written_bytes_total",
        "counter",
        "Bytes written.",
        |d| Some(d.written),
    );
    each(
        t,
        devices,
        "device_flushes_total",
        "counter",
        "Flush commands sent.",
        |d| Some(d.flushes),
    );
    each(
        t,
        devices,
        "device_fua_writes_total",
        "counter",
        "WAL batches written with forced unit access (durable without a flush after them).",
        |d| d.fua_writes,
    );
    each(
        t,
        devices,
        "device_errors_total",
        "counter",
        "Requests (reads, writes, flushes) that completed with an error.",
        |d| Some(d.errors),
    );
    each(
        t,
        devices,
        "device_lost",
        "gauge",
        "1 when the WAL lost the device and goes on without it (degraded, with wal.copies above 1).",
        |d| (d.role == "wal").then_some(u64::from(d.lost)),
    );
}
