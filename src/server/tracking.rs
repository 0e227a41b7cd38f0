//! CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO: client-side
//! caching as Redis gives it, the connection's half (the shard keeps the
//! table, [`super::shard::tracking`]). Invalidations go to the connection
//! itself in RESP3 (`>2 invalidate [keys]`), or to the connection named by
//! REDIRECT: as a push in RESP3, as a `__redis__:invalidate` message when
//! it is a subscribed RESP2 connection.

use std::sync::atomic::Ordering;

use super::cmd::{integer, not_integer, syntax_error};
use super::conn::Conn;
use super::resp::Reply;
use super::shard::tracking::Mode;

/// CLIENT LIST's flags of a tracking client: `t`, and `B` for BCAST, `R`
/// for a redirect that broke.
pub const FLAG_TRACKING: u8 = 1;
pub const FLAG_BCAST: u8 = 2;
pub const FLAG_BROKEN: u8 = 4;

impl<'a> Conn<'a> {
    /// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p]... [OPTIN]
    /// [OPTOUT] [NOLOOP], with Redis's checks and errors.
    pub fn client_tracking(&mut self, args: &[Vec<u8>]) -> Reply {
        let mut mode = Mode::default();
        let mut i = 1;
        while i < args.len() {
            let more = i + 1 < args.len();
            match args[i].to_ascii_lowercase().as_slice() {
                b"redirect" if more => {
                    i += 1;
                    if mode.redirect != 0 {
                        return Reply::err("A client can only redirect to a single other client");
                    }
                    let Some(id) = integer(&args[i]) else {
                        return not_integer();
                    };
                    if !self.shared.clients().iter().any(|c| c.id as i64 == id) {
                        return Reply::err("The client ID you want redirect to does not exist");
                    }
                    mode.redirect = id as u64;
                }
                b"bcast" => mode.bcast = true,
                b"optin" => mode.optin = true,
                b"optout" => mode.optout = true,
                b"noloop" => mode.noloop = true,
                b"prefix" if more => {
                    i += 1;
                    mode.prefixes.push(args[i].clone());
                }
                _ => return syntax_error(),
            }
            i += 1;
        }
        match args[0].to_ascii_lowercase().as_slice() {
            b"on" => {
                if let Err(why) = self.check_tracking(&mode) {
                    return Reply::err(why);
                }
                self.shard
                    .tracking()
                    .enable(self.token, self.client.id, mode);
            }
            b"off" => self.shard.tracking().disable(self.token),
            _ => return syntax_error(),
        }
        self.show_tracking();
        Reply::ok()
    }

    /// Why `mode` cannot be turned on now.
    fn check_tracking(&self, mode: &Mode) -> Result<(), String> {
        if !mode.bcast && !mode.prefixes.is_empty() {
            return Err("PREFIX option requires BCAST mode to be enabled".into());
        }
        let tracking = self.shard.tracking();
        if let Some(t) = tracking.get(self.token) {
            if t.mode.bcast != mode.bcast {
                return Err("You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.".into());
            }
        }
        if mode.bcast && (mode.optin || mode.optout) {
            return Err("OPTIN and OPTOUT are not compatible with BCAST".into());
        }
        if mode.optin && mode.optout {
            return Err("You can't specify both OPTIN mode and OPTOUT mode".into());
        }
        if let Some(t) = tracking.get(self.token) {
            if (mode.optin && t.mode.optout) || (mode.optout && t.mode.optin) {
                return Err("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.".into());
            }
        }
        if mode.bcast {
            if let Some(why) = tracking.prefix_collision(self.token, mode) {
                return Err(why);
            }
        }
        Ok(())
    }

    /// CLIENT CACHING YES|NO: whether the next command's keys are tracked
    /// (OPTIN) or not (OPTOUT).
    pub fn client_caching(&mut self, arg: &[u8]) -> Reply {
        let mut tracking = self.shard.tracking();
        let Some(t) = tracking.get_mut(self.token) else {
            return Reply::err(
                "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
            );
        };
        match arg.to_ascii_lowercase().as_slice() {
            b"yes" if t.mode.optin => t.caching = true,
            b"yes" => {
                return Reply::err(
                    "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
                )
            }
            b"no" if t.mode.optout => t.caching = true,
            b"no" => {
                return Reply::err(
                    "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
                )
            }
            _ => return syntax_error(),
        }
        Reply::ok()
    }

    /// CLIENT GETREDIR: the client id invalidations go to, 0 for itself,
    /// -1 when not tracking.
    pub fn client_getredir(&self) -> Reply {
        Reply::Int(
            self.shard
                .tracking()
                .get(self.token)
                .map_or(-1, |t| t.mode.redirect as i64),
        )
    }

    /// CLIENT TRACKINGINFO: flags, redirect and prefixes.
    pub fn client_trackinginfo(&self) -> Reply {
        let tracking = self.shard.tracking();
        let t = tracking.get(self.token);
        let mut flags = vec![if t.is_some() { "on" } else { "off" }];
        let mut prefixes = Vec::new();
        if let Some(t) = t {
            let m = &t.mode;
            let named = [
                (m.bcast, "bcast"),
                (m.optin, "optin"),
                (m.optin && t.caching, "caching-yes"),
                (m.optout, "optout"),
                (m.optout && t.caching, "caching-no"),
                (m.noloop, "noloop"),
                (t.broken, "broken_redirect"),
            ];
            flags.extend(named.iter().filter(|(on, _)| *on).map(|(_, n)| *n));
            prefixes = m.prefixes.iter().cloned().map(Reply::Bulk).collect();
        }
        Reply::Map(vec![
            (
                Reply::bulk("flags"),
                Reply::Array(flags.into_iter().map(Reply::bulk).collect()),
            ),
            (
                Reply::bulk("redirect"),
                Reply::Int(t.map_or(-1, |t| t.mode.redirect as i64)),
            ),
            (Reply::bulk("prefixes"), Reply::Array(prefixes)),
        ])
    }

    /// Keeps CLIENT LIST's flags in step with the tracking state.
    pub fn show_tracking(&self) {
        let flags = self.shard.tracking().get(self.token).map_or(0, |t| {
            FLAG_TRACKING
                | if t.mode.bcast { FLAG_BCAST } else { 0 }
                | if t.broken { FLAG_BROKEN } else { 0 }
        });
        let monitor = self.client.flags.load(Ordering::Relaxed) & super::monitor::FLAG_MONITOR;
        self.client.flags.store(flags | monitor, Ordering::Relaxed);
    }

    /// A read-only command looked `key` up: a tracking connection is
    /// told when it changes.
    pub(crate) fn track_read(&self, key: &[u8]) {
        let mut tracking = self.shard.tracking();
        if tracking.get(self.token).is_some() {
            tracking.remember(self.token, key);
        }
    }

    /// A request has run: CLIENT CACHING held for it alone (a transaction
    /// keeps it to its EXEC; CLIENT commands do not use it up).
    pub(crate) fn tracking_command_done(&self, name: &str) {
        if name != "client" && !self.in_multi() {
            self.shard.tracking().command_done(self.token);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::server::cmd::tests::{conn_on, run_command, shared_on, words};
    use crate::server::conn::Conn;
    use crate::server::metrics::testing;
    use crate::server::resp::Reply;
    use crate::server::Client;

    /// An invalidation tells of a write: it waits for that write as the
    /// writer's reply does.
    #[test]
    fn an_invalidation_waits_for_the_write_it_tells_of() {
        let devs = testing::sim_devices(&testing::model(5));
        let shared = shared_on(&devs).unwrap();
        let (shard, mut reader) = conn_on(&shared, 1);
        let mut writer = Conn::new(&shared, Arc::new(Client::detached(2)), shard.clone());
        writer.token = 1;
        let (r, _) = run_command(&mut reader, &words("CLIENT TRACKING on"));
        assert_eq!(r, Reply::ok());
        run_command(&mut reader, &words("GET k"));
        let (_, deps) = run_command(&mut writer, &words("SET k v"));
        let out = shard.tracking().take_outbox();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].token, 0);
        assert_eq!(out[0].keys, Some(vec![b"k".to_vec()]));
        assert!(!out[0].deps.is_empty() && !out[0].deps.ready());
        assert!(!deps.ready());
        std::mem::forget(writer);
        std::mem::forget(reader);
        std::mem::forget(shard);
    }
}
