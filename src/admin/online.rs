//! `stria device replace` of a running appliance: the running server is
//! asked to do it (`STRIA.DEVICE REPLACE name` on its listen address) and
//! watched until the new device holds the log.

use std::net::SocketAddr;
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::AdminError;
use crate::bench::resp_client::{Reply, RespClient};
use crate::config::Config;
use crate::device;

/// True when an engine (a running `stria serve`) holds a lock on one of
/// the map's file devices.
pub fn serving(cfg: &Config) -> bool {
    cfg.devices
        .iter()
        .filter_map(|d| d.path())
        .any(|p| matches!(device::lock_exclusive(p), Ok(None)))
}

/// Asks the server running `cfg` (listening on `addr`) to replace WAL
/// device `name`, then waits
/// (up to `timeout`) until the new device holds the log, telling
/// `progress` what INFO says as it changes. Returns the LSN the device
/// joined the log at.
pub fn replace_online(
    cfg: &Config,
    addr: SocketAddr,
    name: &str,
    timeout: Duration,
    mut progress: impl FnMut(&str),
) -> Result<u64, AdminError> {
    let refuse = |why: String| AdminError::Replace(why);
    let mut c = RespClient::connect_retry(addr, Duration::from_secs(5)).map_err(|e| {
        refuse(format!(
            "the appliance is running (its devices are locked), but its server on {addr} cannot be reached: {e}"
        ))
    })?;
    let mut ask = |args: &[&str]| {
        c.command(args)
            .map_err(|e| refuse(format!("the server on {addr}: {e}")))
    };
    if let Some(pw) = &cfg.server.password {
        ask(&["AUTH", pw])?;
    }
    ask(&["STRIA.DEVICE", "REPLACE", name])?;
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let info = match ask(&["INFO", "wal"])? {
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
            other => return Err(refuse(format!("INFO wal answered {other:?}"))),
        };
        let field = |k: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(':'))
                .unwrap_or("")
                .trim()
                .to_string()
        };
        let state = field("wal_replace");
        let waiting = field("wal_devices_catching_up");
        let now = format!("{state} (devices catching up: {waiting})");
        if now != last {
            progress(&now);
            last = now;
        }
        if let Some(why) = state.strip_prefix(&format!("failed:{name}:")) {
            return Err(refuse(why.to_string()));
        }
        if state == format!("lost-again:{name}") {
            return Err(refuse(format!(
                "the WAL lost the new {name} too (see the server's log); the appliance goes on without it"
            )));
        }
        if let Some(from) = state.strip_prefix(&format!("joined:{name}:")) {
            if waiting == "0" {
                return from
                    .parse()
                    .map_err(|_| refuse(format!("INFO says wal_replace:{state}")));
            }
        }
        if Instant::now() >= deadline {
            return Err(refuse(format!(
                "{name} does not hold the log yet after {timeout:?}: {state}"
            )));
        }
        sleep(Duration::from_millis(100));
    }
}
