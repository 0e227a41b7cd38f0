//! A seed's fault plan: the devices, how many copies of each WAL batch
//! and of each block file, and at most one device that misbehaves, in one
//! way (the fault model in ARCHITECTURE.md).
//!
//! What a run may see follows from the plan ([`Plan::may_lose`],
//! [`Plan::may_err`]): a gray device costs time and nothing else; a WAL
//! device that fails with a second copy elsewhere costs nothing; so does
//! a data device whose blocks go bad (misdirected, lost or corrupt
//! writes, bits flipped on the way or at rest, latent errors) when every
//! block file has a copy on the other one. A data device that vanishes or
//! fails writes stops flushes and starts, with an error that names it, as
//! does every fault under one copy of each block file, and every fault
//! under a single copy of the log, which may also lose an acknowledged
//! batch it cannot tell from a torn tail. No plan may ever return a wrong
//! value.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::config::{SimConfig, SimFaults};
use crate::device::sim::SimDevice;
use crate::engine::EngineDevices;

/// What goes wrong with the faulty device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Nothing: crashes alone.
    None,
    /// Some writes land at another LBA while reporting success.
    Misdirect,
    /// Some writes are dropped while reporting success.
    LostWrite,
    /// Some reads come back with a bit flipped.
    CorruptRead,
    /// Bits flipped and blocks copied over others at rest, between runs.
    AtRest,
    /// A range whose reads fail until it is rewritten.
    Latent,
    /// Requests turn 100-1000 times slower for a while.
    Gray,
    /// The device vanishes at some request, for good.
    Vanish,
    /// Some requests fail with an I/O error.
    IoError,
}

const FAULTS: [Fault; 9] = [
    Fault::None,
    Fault::Misdirect,
    Fault::LostWrite,
    Fault::CorruptRead,
    Fault::AtRest,
    Fault::Latent,
    Fault::Gray,
    Fault::Vanish,
    Fault::IoError,
];

/// The devices' names, WAL first.
pub const NAMES: [&str; 4] = ["wal0", "wal1", "data0", "data1"];

/// One seed's plan.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Copies of each WAL batch and of each block file.
    pub copies: usize,
    pub fault: Fault,
    /// Index into [`NAMES`] of the faulty device.
    pub target: usize,
    /// The request number the fault starts at (vanish, gray window).
    pub at_op: u64,
    /// The seed every device's own choices come from.
    pub seed: u64,
}

impl Plan {
    pub fn draw(rng: &mut ChaCha8Rng) -> Plan {
        Plan {
            copies: rng.random_range(1..=2),
            fault: FAULTS[rng.random_range(0..FAULTS.len())],
            target: rng.random_range(0..NAMES.len()),
            at_op: rng.random_range(0..400),
            seed: rng.random(),
        }
    }

    fn on_wal(&self) -> bool {
        self.target < 2
    }

    /// Whether a fault that reaches data may go wrong at all.
    fn harmful(&self) -> bool {
        !matches!(self.fault, Fault::None | Fault::Gray)
    }

    /// Whether an acknowledged write may be missing after a crash: only
    /// under one copy of the log, which cannot tell a lost or damaged
    /// last batch from a torn tail.
    pub fn may_lose(&self) -> bool {
        self.harmful() && self.on_wal() && self.copies == 1
    }

    /// Whether a command or an open may fail, naming the faulty device:
    /// a harmful fault under one copy, or a data device that vanishes or
    /// fails requests (its flushes fail, and a start needs every data
    /// device).
    pub fn may_err(&self) -> bool {
        self.harmful()
            && (self.copies == 1
                || (!self.on_wal() && matches!(self.fault, Fault::Vanish | Fault::IoError)))
    }

    /// Whether the faulty device has a second copy of what it holds
    /// elsewhere (each WAL batch, or each block file): when it stops a
    /// start, the operator replaces it.
    pub fn replaces(&self) -> bool {
        self.harmful() && self.copies == 2
    }

    /// Whether the faulty device is a WAL device with a second copy of
    /// each batch elsewhere: once the WAL loses it while running, the
    /// operator may replace it online.
    pub fn replaces_online(&self) -> bool {
        self.replaces() && self.on_wal()
    }

    /// Whether the faulty device is a data device.
    pub fn on_data(&self) -> bool {
        !self.on_wal()
    }

    /// The faulty device's name.
    pub fn target_name(&self) -> &'static str {
        NAMES[self.target]
    }

    /// The model of device `i`.
    pub fn model(&self, i: usize) -> SimConfig {
        let mut m = SimConfig {
            write_us: 0,
            read_us: 0,
            flush_us: 0,
            bandwidth: 0,
            seed: self.seed.wrapping_add(i as u64),
            ..SimConfig::default()
        };
        if i != self.target {
            return m;
        }
        let f = &mut m.faults;
        match self.fault {
            Fault::Misdirect => f.misdirect_rate = 0.01,
            Fault::LostWrite => f.lost_write_rate = 0.01,
            Fault::CorruptRead => f.corrupt_read_rate = 0.02,
            Fault::Gray => {
                m.write_us = 5;
                m.read_us = 5;
                m.flush_us = 10;
                f.slow_from_op = Some(self.at_op);
                f.slow_ops = 40;
                f.slow_factor = 100 + (self.seed % 900);
            }
            Fault::Vanish => f.vanish_at_op = Some(self.at_op),
            Fault::IoError => {
                f.write_error_rate = 0.005;
                f.read_error_rate = 0.005;
                f.flush_error_rate = 0.005;
            }
            Fault::None | Fault::AtRest | Fault::Latent => {}
        }
        m
    }

    /// Two WAL devices of 16 MiB and two data devices of 32 MiB, faults
    /// as planned.
    pub fn devices(&self) -> EngineDevices<SimDevice> {
        let dev = |i: usize, blocks: u64| SimDevice::new(NAMES[i], 4096, blocks, 64, self.model(i));
        EngineDevices {
            wal: vec![dev(0, 4096), dev(1, 4096)],
            data: vec![dev(2, 8192), dev(3, 8192)],
        }
    }

    /// A new, blank device in place of the faulty one, as `stria device
    /// replace` leaves it.
    pub fn replacement(&self) -> SimDevice {
        let mut m = self.model(self.target + 100);
        m.faults = SimFaults::default();
        let blocks = if self.on_wal() { 4096 } else { 8192 };
        SimDevice::new(self.target_name(), 4096, blocks, 64, m)
    }

    /// Faults that strike between runs, on the devices as a crash left
    /// them: bits flipped and blocks copied over others at rest, or a
    /// latent range, in the first 2 MiB (superblocks, the log's first
    /// segments, the manifest and the first block files).
    pub fn between_runs(&self, devs: &EngineDevices<SimDevice>, rng: &mut ChaCha8Rng) {
        let dev = if self.on_wal() {
            &devs.wal[self.target]
        } else {
            &devs.data[self.target - 2]
        };
        match self.fault {
            Fault::AtRest => {
                for _ in 0..rng.random_range(1..4) {
                    let lba = rng.random_range(0..512);
                    if rng.random_bool(0.5) {
                        dev.corrupt_at_rest(lba, rng.random_range(0..4096), rng.random_range(0..8));
                    } else {
                        dev.misdirect_at_rest(rng.random_range(0..512), lba);
                    }
                }
            }
            Fault::Latent => {
                dev.add_latent_errors(rng.random_range(0..512), rng.random_range(1..8))
            }
            _ => {}
        }
    }
}
