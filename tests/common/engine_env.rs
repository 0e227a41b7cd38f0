//! Engines on simulated devices, for the engine tests and crash checker.
#![allow(dead_code)]

use stria::config::{DeviceLoss, Durability, SimConfig};
use stria::device::sim::SimDevice;
use stria::engine::{Engine, EngineDevices, EngineOptions, OpenReport, ScrubOptions};
use stria::reactor::ReactorConfig;
use stria::table::TableOptions;
use stria::wal::WalOptions;

/// Simulated devices of one engine: they outlive the engine, so a test
/// can close or crash it and open another on what the devices kept.
#[derive(Clone)]
pub struct Devices {
    pub wal: Vec<SimDevice>,
    pub data: Vec<SimDevice>,
}

/// Zero-latency devices with a volatile write cache.
pub fn model(seed: u64) -> SimConfig {
    SimConfig {
        write_us: 0,
        read_us: 0,
        flush_us: 0,
        bandwidth: 0,
        volatile_cache: true,
        seed,
        ..SimConfig::default()
    }
}

impl Devices {
    /// `wal` WAL devices of 16 MiB and `data` data devices of `data_mib` MiB.
    pub fn new(wal: usize, data: usize, data_mib: u64, model: &SimConfig) -> Devices {
        Devices {
            wal: (0..wal)
                .map(|i| SimDevice::new(&format!("wal{i}"), 4096, 4096, 64, model.clone()))
                .collect(),
            data: (0..data)
                .map(|i| {
                    SimDevice::new(&format!("data{i}"), 4096, data_mib * 256, 64, model.clone())
                })
                .collect(),
        }
    }

    pub fn engine_devices(&self) -> EngineDevices<SimDevice> {
        EngineDevices {
            wal: self.wal.clone(),
            data: self.data.clone(),
        }
    }

    pub fn cut_power(&self) {
        for d in self.wal.iter().chain(&self.data) {
            d.cut_power();
        }
    }

    /// The devices as they come back after a power cut.
    pub fn reboot(&self, seed: u64) -> Devices {
        Devices {
            wal: self
                .wal
                .iter()
                .enumerate()
                .map(|(i, d)| d.reboot(seed + i as u64))
                .collect(),
            data: self
                .data
                .iter()
                .enumerate()
                .map(|(i, d)| d.reboot(seed + 100 + i as u64))
                .collect(),
        }
    }

    /// The devices as the next process finds them after a crash.
    pub fn after_process_crash(&self, seed: u64) -> Devices {
        Devices {
            wal: self
                .wal
                .iter()
                .enumerate()
                .map(|(i, d)| d.reboot_after_process_crash(seed + i as u64))
                .collect(),
            data: self
                .data
                .iter()
                .enumerate()
                .map(|(i, d)| d.reboot_after_process_crash(seed + 100 + i as u64))
                .collect(),
        }
    }
}

/// Small everything, so flushes, checkpoints and compactions happen often.
pub fn options() -> EngineOptions {
    EngineOptions {
        split_keys: vec![b"g".to_vec(), b"p".to_vec()],
        flush_size: 64 << 10,
        global_limit: 1 << 20,
        low_water: 0.5,
        log_freeze_at: 0.5,
        max_key: 1024,
        max_value: 64 << 10,
        durability: Durability::Sync,
        table: TableOptions {
            block_bytes: 4096,
            bloom_bits_per_key: 10,
            device_block: 4096,
        },
        compact_at: 4,
        file_copies: 1,
        // On, so that every engine test reads through it; it holds these
        // tests' blocks (its own tests cover eviction).
        block_cache: 4 << 20,
        manifest_bytes: 256 << 10,
        extent_unit: 4096,
        flush_chunk: 64 << 10,
        flush_depth: 4,
        scrub: ScrubOptions::off(),
        lost_data: Vec::new(),
        manifest_watch: None,
        wal: WalOptions {
            appliance_id: 7,
            segment_size: 512 << 10,
            max_batch: 128 << 10,
            in_flight_per_device: 2,
            fua: true,
            ring_capacity: 256,
            replay_from: None,
            truncate_corrupt: false,
            copies: 1,
            lose_unreadable: 0,
            stale: Vec::new(),
            on_loss: None,
            on_device_loss: DeviceLoss::Degrade,
        },
        wal_reactor: ReactorConfig::unpinned("wal"),
        flush_reactors: vec![
            ReactorConfig::unpinned("flush0"),
            ReactorConfig::unpinned("flush1"),
        ],
    }
}

pub fn open(devs: &Devices, opts: &EngineOptions) -> (Engine<SimDevice>, OpenReport) {
    Engine::open(devs.engine_devices(), opts.clone()).unwrap_or_else(|e| panic!("open: {e}"))
}

pub fn key(i: u64) -> Vec<u8> {
    // Spread over the three regions.
    let lead = [b'a', b'h', b'q'][(i % 3) as usize];
    format!("{}{:08}", lead as char, i).into_bytes()
}

pub fn value(i: u64, version: u64, len: usize) -> Vec<u8> {
    let mut v = format!("v{i}.{version}:").into_bytes();
    v.resize(len.max(v.len()), b'x' + (i % 3) as u8);
    v
}
