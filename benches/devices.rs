//! Kernel path against the simulated NVMe: the same device cases on `uring`,
//! `psync` and `sim`, under both reactor idle policies, side by side.
//!
//! ```text
//! cargo bench --bench devices -- --seconds 1
//! cargo bench --features spdk --bench devices -- --seconds 1
//! ```
//!
//! With `--features spdk` and `nvmf_tgt` on PATH (or STRIA_NVMF_TGT) the
//! bench also starts a local NVMe/TCP target (tests/common/spdk_target.rs)
//! and adds an `spdk` map: its AIO namespace, over a file on the same disk
//! as the `uring` and `psync` files, so kernel path and bypass stand side
//! by side. The target polls core 0; the `spdk` map's reactor runs on core 1
//! (the kernel-path maps use core 0). Without the target it says why and
//! runs the rest.
//!
//! File devices live in a temporary folder under `target/`; nothing else is
//! touched. `stria devbench` runs the same cases on the devices of a map.

use std::time::Duration;

use clap::Parser;
use stria::bench::devbench::{self, DevbenchOptions};
use stria::config::{Config, IdlePolicy};
use stria::device::AnyDevice;

#[cfg(feature = "spdk")]
#[path = "../tests/common/spdk_target.rs"]
mod spdk_target;

/// Bytes of each WAL device the bench writes to.
const DEVICE_BYTES: u64 = 512 << 20;

#[derive(Parser, Debug)]
struct Args {
    /// Seconds each case runs.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Run only this idle policy (default: park, then poll).
    #[arg(long)]
    idle: Option<String>,
    /// Accepted for `cargo bench` compatibility.
    #[arg(long, hide = true)]
    bench: bool,
}

fn map(dir: &std::path::Path, backend: &str) -> String {
    let device = match backend {
        "sim" => "backend: sim, sim: { write-us: 15, read-us: 80, flush-us: 20, bandwidth: 3GB }"
            .to_string(),
        _ => format!("backend: {backend}, path: {}/{backend}.img", dir.display()),
    };
    format!(
        "appliance: {backend}
reactors: {{ wal: [0], flush: [1] }}
devices:
  - {{ name: wal0, {device}, size: {DEVICE_BYTES}, role: wal }}
  - {{ name: data0, backend: sim, size: 32MiB, role: data }}
"
    )
}

/// The `spdk` map: the AIO namespace of a target started for the bench,
/// `DEVICE_BYTES` of a file in `dir`, over NVMe/TCP on 127.0.0.1.
#[cfg(feature = "spdk")]
fn spdk_map(dir: &std::path::Path) -> Result<Config, String> {
    let target = spdk_target::start(&dir.join("spdk-target"), DEVICE_BYTES)?;
    let text = format!(
        "appliance: spdk
reactors: {{ wal: [1], flush: [0] }}
spdk: {{ mem-size: 256MiB, hugepages: false }}
devices:
  - {{ name: wal0, backend: spdk, transport: tcp, address: 127.0.0.1, port: {port},
      nqn: \"{nqn}\", namespace: {ns}, role: wal }}
  - {{ name: data0, backend: sim, size: 32MiB, role: data }}
",
        port = target.port,
        nqn = spdk_target::NQN,
        ns = spdk_target::AIO_NSID,
    );
    let mut cfg = Config::parse(&text, "spdk").map_err(|e| e.to_string())?;
    // The host environment stays off the target's core 0.
    cfg.spdk = spdk_target::host_env();
    Ok(cfg)
}

fn main() {
    let args = Args::parse();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let configs: Vec<Config> = ["uring", "psync", "sim"]
        .iter()
        .map(|b| Config::parse(&map(dir.path(), b), b).expect("bench map"))
        .collect();
    for cfg in &configs {
        for dev in &cfg.devices {
            AnyDevice::create(dev).expect("create device file");
        }
    }
    // Next to the kernel-path maps, before the simulated device.
    #[cfg(feature = "spdk")]
    let configs = {
        let mut configs = configs;
        match spdk_map(dir.path()) {
            Ok(cfg) => configs.insert(2, cfg),
            Err(why) => eprintln!("NOT RUN spdk map: {why}"),
        }
        configs
    };
    let policies = match args.idle.as_deref() {
        Some("poll") => vec![IdlePolicy::Poll],
        Some("park") => vec![IdlePolicy::Park],
        Some(other) => panic!("--idle {other}: poll or park"),
        None => vec![IdlePolicy::Park, IdlePolicy::Poll],
    };
    for idle in policies {
        let opts = DevbenchOptions {
            duration: Duration::from_secs_f64(args.seconds),
            idle: Some(idle),
            devices: vec!["wal0".into()],
            force: false,
        };
        match devbench::run(&configs, &opts) {
            Ok(report) => println!("{report}"),
            Err(e) => {
                eprintln!("devices bench: {e}");
                std::process::exit(1);
            }
        }
    }
}
