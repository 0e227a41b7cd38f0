//! A small engine on simulated devices for the server's tests.

use crate::config::{DeviceLoss, Durability, SimConfig};
use crate::device::sim::SimDevice;
use crate::device::AnyDevice;
use crate::engine::{Engine, EngineDevices, EngineOptions, ScrubOptions};
use crate::reactor::ReactorConfig;
use crate::table::TableOptions;
use crate::wal::WalOptions;

/// An engine on zero-latency simulated devices (two WAL, two data),
/// three regions, unpinned reactors that park when idle.
pub fn engine() -> Engine<SimDevice> {
    Engine::open(sim_devices(&model(0)), options())
        .expect("open")
        .0
}

/// The same engine on devices of any kind (the server's).
pub fn any_engine() -> Engine<AnyDevice> {
    open_any(&sim_devices(&model(0)))
}

/// An engine of [`options`] on `devices`, as the server's devices.
pub fn open_any(devices: &EngineDevices<SimDevice>) -> Engine<AnyDevice> {
    open_any_with(devices, options())
}

/// As [`open_any`], with `opts`.
pub fn open_any_with(devices: &EngineDevices<SimDevice>, opts: EngineOptions) -> Engine<AnyDevice> {
    let any = EngineDevices {
        wal: devices.wal.iter().cloned().map(AnyDevice::from).collect(),
        data: devices.data.iter().cloned().map(AnyDevice::from).collect(),
    };
    Engine::open(any, opts).expect("open").0
}

/// Zero-latency devices with a volatile write cache, faults seeded by `seed`.
pub fn model(seed: u64) -> SimConfig {
    SimConfig {
        write_us: 0,
        read_us: 0,
        flush_us: 0,
        bandwidth: 0,
        seed,
        ..SimConfig::default()
    }
}

/// Two WAL devices of 16 MiB and two data devices of 32 MiB.
pub fn sim_devices(model: &SimConfig) -> EngineDevices<SimDevice> {
    let dev = |name: &str, blocks: u64| SimDevice::new(name, 4096, blocks, 64, model.clone());
    EngineDevices {
        wal: vec![dev("wal0", 4096), dev("wal1", 4096)],
        data: vec![dev("data0", 8192), dev("data \"1\"", 8192)],
    }
}

/// The engine's options in these tests.
pub fn options() -> EngineOptions {
    EngineOptions {
        split_keys: vec![b"g".to_vec(), b"p".to_vec()],
        flush_size: 64 << 10,
        global_limit: 1 << 20,
        low_water: 0.5,
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
        block_cache: 4 << 20,
        log_freeze_at: 0.5,
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

/// Puts `n` keys over the three regions, then flushes everything.
pub fn fill(engine: &Engine<SimDevice>, n: u64) {
    for i in 0..n {
        let lead = [b'a', b'h', b'q'][(i % 3) as usize] as char;
        let key = format!("{lead}{i:08}");
        engine.put(key.as_bytes(), &[b'v'; 200], None).expect("put");
    }
    engine.flush_all().expect("flush");
    assert_eq!(
        engine.get(b"a00000000").expect("get"),
        Some(vec![b'v'; 200])
    );
}
