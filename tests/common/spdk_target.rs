//! A local SPDK NVMe/TCP target (`nvmf_tgt`) for the `spdk` tests.
//!
//! One target per test binary, started by the first test that asks and
//! killed when the binary exits (it gets SIGKILL when the thread that
//! spawned it, parked for ever, dies with the process). It serves one
//! subsystem with two namespaces: 1 = `Malloc0` (RAM, 64 MiB), 2 = `AIO0`
//! (a file under target/, 64 MiB), on 127.0.0.1 and a free port. The
//! target polls core 0; the tests' host environment uses core 1.
//!
//! benches/devices.rs starts its own target through [`start`], with a
//! larger AIO file next to its kernel-path device files.
//!
//! When `nvmf_tgt` is missing (not on PATH, no STRIA_NVMF_TGT), [`get`]
//! returns why; the caller prints `NOT RUN <name>: <why>` and passes,
//! unless STRIA_REQUIRE_SPDK=1 makes that a failure.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use stria::config::{BackendConfig, DeviceConfig, Role, SpdkConfig, SpdkEnvConfig};

pub const NQN: &str = "nqn.2016-06.io.spdk:stria-test";
pub const MALLOC_NSID: u32 = 1;
pub const AIO_NSID: u32 = 2;

/// A running target.
pub struct Target {
    pub port: u16,
    pub rpc: PathBuf,
}

static TARGET: OnceLock<Result<Target, String>> = OnceLock::new();
/// Bytes of the file behind `AIO0` in the tests' target.
const TEST_AIO_BYTES: u64 = 64 << 20;
/// Tests that share the target's namespaces run one at a time.
static EXCLUSIVE: Mutex<()> = Mutex::new(());

/// The shared target and exclusive use of it, or why there is none.
pub fn get() -> Result<(&'static Target, MutexGuard<'static, ()>), String> {
    let target = TARGET
        .get_or_init(|| {
            let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
            let dir = tmp.join(format!("spdk-target-{}", std::process::id()));
            start(&dir, TEST_AIO_BYTES)
        })
        .as_ref()
        .map_err(Clone::clone)?;
    Ok((target, EXCLUSIVE.lock().unwrap_or_else(|e| e.into_inner())))
}

/// Runs `case` against the target, or reports it NOT RUN.
pub fn with_target(name: &str, case: impl FnOnce(&'static Target)) {
    match get() {
        Ok((target, _guard)) => case(target),
        Err(why) => {
            if std::env::var("STRIA_REQUIRE_SPDK").is_ok_and(|v| v == "1") {
                panic!(
                    "{name}: SPDK target required (STRIA_REQUIRE_SPDK=1) but unavailable: {why}"
                );
            }
            println!("NOT RUN {name}: {why}");
            eprintln!("NOT RUN {name}: {why}");
        }
    }
}

/// The host environment of the tests: plain pages, core 1 (the target has 0).
pub fn host_env() -> SpdkEnvConfig {
    SpdkEnvConfig {
        mem_size: 256 << 20,
        hugepages: false,
        shm_id: None,
        cores: vec![1],
        pci_allowed: Vec::new(),
    }
}

/// A device map entry for namespace `nsid` of the target.
pub fn device(target: &Target, name: &str, nsid: u32, size: u64, depth: u32) -> DeviceConfig {
    DeviceConfig {
        name: name.into(),
        role: Role::Wal,
        size,
        block_size: 4096,
        queue_depth: depth,
        backend: BackendConfig::Spdk(SpdkConfig::Tcp {
            address: "127.0.0.1".into(),
            port: target.port,
            nqn: NQN.into(),
            namespace: nsid,
        }),
    }
}

fn nvmf_tgt() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("STRIA_NVMF_TGT") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("STRIA_NVMF_TGT={} is not a file", path.display()))
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("nvmf_tgt"))
        .find(|p| p.is_file())
        .ok_or_else(|| "nvmf_tgt is not on PATH (set STRIA_NVMF_TGT to its path)".to_string())
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn config_json(port: u16, aio: &Path) -> String {
    serde_json::json!({ "subsystems": [
        { "subsystem": "bdev", "config": [
            { "method": "bdev_malloc_create",
              "params": { "name": "Malloc0", "num_blocks": 16384, "block_size": 4096 } },
            { "method": "bdev_aio_create",
              "params": { "name": "AIO0", "filename": aio, "block_size": 4096 } }
        ]},
        { "subsystem": "nvmf", "config": [
            { "method": "nvmf_create_transport", "params": { "trtype": "TCP" } },
            { "method": "nvmf_create_subsystem",
              "params": { "nqn": NQN, "allow_any_host": true, "serial_number": "STRIA0001" } },
            { "method": "nvmf_subsystem_add_ns",
              "params": { "nqn": NQN, "namespace": { "bdev_name": "Malloc0", "nsid": MALLOC_NSID } } },
            { "method": "nvmf_subsystem_add_ns",
              "params": { "nqn": NQN, "namespace": { "bdev_name": "AIO0", "nsid": AIO_NSID } } },
            { "method": "nvmf_subsystem_add_listener",
              "params": { "nqn": NQN, "listen_address": {
                  "trtype": "TCP", "adrfam": "IPv4", "traddr": "127.0.0.1",
                  "trsvcid": port.to_string() } } }
        ]}
    ]})
    .to_string()
}

/// Removes what targets of test processes that are gone left behind.
fn remove_stale(tmp: &Path) {
    let dead = |name: &str, prefix: &str| {
        name.strip_prefix(prefix)
            .and_then(|rest| rest.split('.').next())
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
    };
    for (dir, prefix) in [(Path::new("/tmp"), "stria-spdk-"), (tmp, "spdk-target-")] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if dead(&name, prefix) {
                let _ = std::fs::remove_file(entry.path())
                    .or_else(|_| std::fs::remove_dir_all(entry.path()));
            }
        }
    }
}

/// Starts a target whose files (`AIO0`'s, `aio_bytes` long, the config and
/// the log) go in `dir`, which is created. It lives until this process
/// exits.
pub fn start(dir: &Path, aio_bytes: u64) -> Result<Target, String> {
    let bin = nvmf_tgt()?;
    let pid = std::process::id();
    remove_stale(Path::new(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let aio = dir.join("aio.img");
    std::fs::File::create(&aio)
        .and_then(|f| f.set_len(aio_bytes))
        .map_err(|e| format!("{}: {e}", aio.display()))?;
    let port = free_port()?;
    let json = dir.join("nvmf.json");
    std::fs::write(&json, config_json(port, &aio)).map_err(|e| e.to_string())?;
    let rpc = PathBuf::from(format!("/tmp/stria-spdk-{pid}.sock"));
    let _ = std::fs::remove_file(&rpc);
    let log = dir.join("nvmf_tgt.log");
    let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;

    // Spawned from a thread that never ends, so PDEATHSIG fires only when
    // the test process exits.
    let (tx, rx) = mpsc::channel();
    let args = (bin.clone(), rpc.clone(), json.clone());
    std::thread::spawn(move || {
        let (bin, rpc, json) = args;
        let mut cmd = Command::new(&bin);
        cmd.args(["--no-huge", "-s", "512", "-u", "-m", "0x1", "-r"])
            .arg(&rpc)
            .arg("--json")
            .arg(&json)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log"))
            .stderr(log_file);
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn();
        let spawned = child.as_ref().map(|_| ()).map_err(|e| e.to_string());
        let _ = tx.send(spawned);
        if let Ok(mut child) = child {
            let _ = child.wait();
        }
        loop {
            std::thread::park();
        }
    });
    rx.recv()
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if rpc.exists() {
            if let Ok(v) = rpc_call(&rpc, "framework_wait_init", serde_json::json!({})) {
                let _ = v;
                break;
            }
        }
        if Instant::now() > deadline {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!(
                "nvmf_tgt did not come up in 30 s; its log:\n{text}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(Target { port, rpc })
}

/// One JSON-RPC 2.0 call over the target's unix socket.
pub fn rpc_call(
    socket: &Path,
    method: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, String> {
    let mut stream =
        UnixStream::connect(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let req = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    stream
        .write_all(req.to_string().as_bytes())
        .map_err(|e| e.to_string())?;
    // The server sends one JSON object per response; read until it parses.
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        let chunk = reader.fill_buf().map_err(|e| format!("{method}: {e}"))?;
        if chunk.is_empty() {
            return Err(format!("{method}: connection closed"));
        }
        let n = chunk.len();
        buf.extend_from_slice(chunk);
        reader.consume(n);
        let mut de = serde_json::Deserializer::from_slice(&buf).into_iter::<serde_json::Value>();
        if let Some(Ok(resp)) = de.next() {
            if let Some(err) = resp.get("error") {
                return Err(format!("{method}: {err}"));
            }
            return Ok(resp
                .get("result")
                .cloned()
                .unwrap_or(serde_json::Value::Null));
        }
    }
}

/// How many `opc` I/Os the bdev's histogram has counted since it was
/// enabled: the sum of its little-endian u64 buckets.
pub fn histogram_count(socket: &Path, bdev: &str) -> Result<u64, String> {
    let v = rpc_call(
        socket,
        "bdev_get_histogram",
        serde_json::json!({ "name": bdev }),
    )?;
    let b64 = v
        .get("histogram")
        .and_then(|h| h.as_str())
        .ok_or_else(|| format!("no histogram in {v}"))?;
    let bytes = base64_decode(b64)?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .sum())
}

fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let value = |c: u8| -> Result<u32, String> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("bad base64 byte {c:#x}")),
        } as u32)
    };
    let clean: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(clean.len() / 4 * 3);
    for quad in clean.chunks(4) {
        let data: Vec<u8> = quad.iter().copied().filter(|&c| c != b'=').collect();
        let mut acc = 0u32;
        for &c in &data {
            acc = acc << 6 | value(c)?;
        }
        acc <<= 6 * (4 - data.len() as u32);
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..data.len()]);
    }
    Ok(out)
}
