//! `stria serve`: open (or, on first start, format) and recover the engine,
//! serve until SHUTDOWN, SIGTERM or SIGINT, then stop cleanly.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Instant;

use sd_notify::NotifyState;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::{Server, ServerOptions};
use crate::admin::{self, Formatted};
use crate::config::Config;
use crate::engine::Engine;

/// Whether every device of the map is a file and none exists yet: a first
/// start, which formats them.
fn first_start(cfg: &Config) -> bool {
    cfg.devices
        .iter()
        .all(|d| d.path().is_some_and(|p| !p.exists()))
}

/// Runs the appliance until it is told to stop. Progress goes to stdout:
/// `listening on <addr>` once clients can connect, when a service manager
/// that asked for it (`NOTIFY_SOCKET`, systemd's `Type=notify`) is told
/// `READY=1` too, and `STOPPING=1` when a signal or SHUTDOWN stops it.
pub fn serve(cfg: &Config, listen: Option<SocketAddr>) -> Result<(), String> {
    let mut opts = ServerOptions::from_config(cfg);
    if let Some(l) = listen {
        if !l.ip().is_loopback() && opts.password.is_none() {
            return Err(format!(
                "--listen {l}: not a loopback address and server.password is not set in {}; anyone who can reach it could read and overwrite every key",
                cfg.source
            ));
        }
        opts.listen = l;
    }
    // Signals are caught from here on, so one during recovery stops the
    // server as soon as it is up rather than killing it half way.
    let mut signals = Signals::new([SIGTERM, SIGINT]).map_err(|e| format!("signals: {e}"))?;
    if first_start(cfg) {
        let report = admin::format(cfg, false).map_err(|e| e.to_string())?;
        println!(
            "first start: no device files yet, formatted appliance {} ({:032x})",
            cfg.appliance, report.appliance_id
        );
        for (name, what) in &report.devices {
            if let Formatted::Written(sb) = what {
                println!("  {name}: {sb}");
            }
        }
    }
    let t = Instant::now();
    let (engine, report) = Engine::open_config(cfg).map_err(|e| e.to_string())?;
    println!("recovered in {:.2?}: {report}", t.elapsed());
    let server = Server::start(engine, opts).map_err(|e| e.to_string())?;
    if let Some(m) = server.metrics_addr() {
        println!("metrics on http://{m}/metrics");
    }
    println!("listening on {}", server.local_addr());
    let _ = std::io::stdout().flush();
    // Ready for a service manager that waits for it (systemd's
    // Type=notify); nothing without NOTIFY_SOCKET.
    let status = format!("listening on {}", server.local_addr());
    if let Err(e) = sd_notify::notify(&[NotifyState::Ready, NotifyState::Status(&status)]) {
        tracing::warn!("could not tell the service manager that stria is ready: {e}");
    }
    let shared = server.shared().clone();
    let handle = signals.handle();
    let watcher = std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            // Best effort: a closed stdout (the parent gone) must not
            // panic this thread before it stops the server.
            let name = if sig == SIGTERM { "SIGTERM" } else { "SIGINT" };
            let _ = writeln!(std::io::stdout(), "{name}: stopping");
            shared.request_stop();
        }
    });
    server.wait();
    let _ = sd_notify::notify(&[NotifyState::Stopping]);
    handle.close();
    let _ = watcher.join();
    let t = Instant::now();
    let stats = server.stop()?;
    let _ = writeln!(
        std::io::stdout(),
        "stopped cleanly in {:.2?}: the log is durable and the memstores are flushed ({} writes, {} flushes, {} block-file bytes written)",
        t.elapsed(),
        stats.writes,
        stats.flushes,
        stats.flush_bytes
    );
    Ok(())
}
