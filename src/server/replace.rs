//! `STRIA.DEVICE REPLACE name`: a WAL device the running appliance lost,
//! replaced without a stop (what `stria device replace` sends when the
//! appliance is running).
//!
//! Writing the new device (created, written through, an empty log, the
//! superblock: [`admin::prepare_online`]) takes as long as writing the
//! whole device, so a thread of its own does it while the shard serves.
//! The shard's turn then hands the device to the engine
//! ([`ServerEngine::replace_wal_device`]): every batch from then on has its
//! copy there, and once the flushes move the replay point past the LSN it
//! joined at, the manifest's mark that it lacks batches goes. INFO's WAL
//! section says where it stands (`wal_replace`, `wal_devices_lost`,
//! `wal_devices_catching_up`).

use std::sync::{Arc, Mutex};

use super::ServerEngine;
use crate::admin;
use crate::config::Config;
use crate::device::AnyDevice;

/// Where the last replacement stands.
#[derive(Default)]
enum State {
    #[default]
    None,
    /// The new device is being written.
    Writing {
        device: String,
    },
    /// Written: the shard's next turn takes it into the stripe.
    Ready {
        device: String,
        stripe: usize,
        new: AnyDevice,
    },
    /// In the stripe from this LSN on.
    Joined {
        device: String,
        stripe: usize,
        from: u64,
    },
    Failed {
        device: String,
        why: String,
    },
}

/// The replacements of a server: one at a time.
#[derive(Default, Clone)]
pub struct Replacements(Arc<Mutex<State>>);

impl Replacements {
    /// Starts replacing `name`, which must be a WAL device of `map` that
    /// `engine`'s WAL lost. Returns at once: a thread writes the device.
    pub fn start(
        &self,
        map: Option<&Arc<Config>>,
        engine: &ServerEngine,
        name: &str,
    ) -> Result<(), String> {
        let Some(map) = map else {
            return Err(
                "this server was not started from a device map: there is no device to write".into(),
            );
        };
        let Some(stripe) = map.wal.devices.iter().position(|d| d == name) else {
            if map.flush.devices.iter().any(|d| d == name) {
                return Err(format!(
                    "{name} is a data device: stop the appliance and run `stria device replace --device {name}`; online, only a WAL device is replaced"
                ));
            }
            return Err(format!("the map has no WAL device named {name:?}"));
        };
        if engine.options().wal.copies < 2 {
            return Err(format!(
                "wal.copies is 1: a lost WAL device failed the log, which a new device cannot take back; restart the appliance after `stria device replace --device {name} --force`"
            ));
        }
        if engine
            .stats()
            .wal
            .device_lost
            .get(stripe)
            .copied()
            .unwrap_or(0)
            == 0
        {
            return Err(format!(
                "WAL device {name} is in service: only a device the WAL lost is replaced while the appliance runs"
            ));
        }
        let mut st = self.0.lock().expect("replace lock");
        if let State::Writing { device } | State::Ready { device, .. } = &*st {
            return Err(format!("{device} is being replaced already"));
        }
        *st = State::Writing {
            device: name.to_string(),
        };
        drop(st);
        let (slot, map, name) = (self.0.clone(), map.clone(), name.to_string());
        let spawned = std::thread::Builder::new()
            .name("stria-replace".into())
            .spawn(move || {
                tracing::warn!("replacing WAL device {name} online: writing the new device");
                let next = match admin::prepare_online(&map, &name) {
                    Ok((stripe, new)) => State::Ready {
                        device: name,
                        stripe,
                        new,
                    },
                    Err(e) => State::Failed {
                        device: name,
                        why: e.to_string(),
                    },
                };
                *slot.lock().expect("replace lock") = next;
            });
        if let Err(e) = spawned {
            *self.0.lock().expect("replace lock") = State::None;
            return Err(format!("cannot start the replacement's thread: {e}"));
        }
        Ok(())
    }

    /// On the shard's turn: a device written is taken into the WAL's
    /// stripe. True when one joined (its queue is new: a host of the log
    /// watches it from then on).
    pub fn poll(&self, engine: &ServerEngine) -> bool {
        let mut st = self.0.lock().expect("replace lock");
        if !matches!(*st, State::Ready { .. }) {
            return false;
        }
        let State::Ready {
            device,
            stripe,
            new,
        } = std::mem::take(&mut *st)
        else {
            unreachable!("matched above")
        };
        *st = match engine.replace_wal_device(stripe, new) {
            Ok(from) => {
                if let Err(e) = crate::engine::rewatch_wal(engine) {
                    tracing::error!("WAL device {device}: the manifest's marks: {e}");
                }
                State::Joined {
                    device,
                    stripe,
                    from,
                }
            }
            Err(e) => {
                tracing::error!("replacing WAL device {device} online: {e}");
                State::Failed {
                    device,
                    why: e.to_string(),
                }
            }
        };
        matches!(*st, State::Joined { .. })
    }

    /// INFO's `wal_replace`: `none`, `writing:NAME`, `joined:NAME:LSN`,
    /// `lost-again:NAME` (the WAL lost the new device: `lost` says which
    /// devices it goes on without), `failed:NAME:why`.
    pub fn describe(&self, lost: &[u64]) -> String {
        match &*self.0.lock().expect("replace lock") {
            State::None => "none".into(),
            State::Writing { device } | State::Ready { device, .. } => format!("writing:{device}"),
            State::Joined { device, stripe, .. } if lost.get(*stripe).copied().unwrap_or(0) > 0 => {
                format!("lost-again:{device}")
            }
            State::Joined { device, from, .. } => format!("joined:{device}:{from}"),
            State::Failed { device, why } => format!("failed:{device}:{why}"),
        }
    }
}
