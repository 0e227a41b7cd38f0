//! Kernel path against the simulated NVMe: the same device cases on `uring`,
//! `psync` and `sim`, under both reactor idle policies, side by side.
//!
//! ```text
//! cargo bench --bench devices -- --seconds 1
//! ```
//!
//! File devices live in a temporary folder under `target/`; nothing else is
//! touched. `stria devbench` runs the same cases on the devices of a map.

use std::time::Duration;

use clap::Parser;
use stria::bench::devbench::{self, DevbenchOptions};
use stria::config::{Config, IdlePolicy};
use stria::device::AnyDevice;

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
  - {{ name: wal0, {device}, size: 512MiB, role: wal }}
  - {{ name: data0, backend: sim, size: 32MiB, role: data }}
"
    )
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
