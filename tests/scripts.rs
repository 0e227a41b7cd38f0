//! The bare-metal scripts (`hugepages/reserve.sh`, `spdk-env/bind.sh`), run
//! the way CI can run them: without root, with `--dry-run`, changing nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SCRIPTS: &[&str] = &["hugepages/reserve.sh", "spdk-env/bind.sh"];

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn bash(script: &str, args: &[&str]) -> Output {
    Command::new("bash")
        .arg(repo(script))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run bash")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Writes `yaml` to `dir/name` and returns its path as a string.
fn write(dir: &Path, name: &str, yaml: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn scripts_parse() {
    for script in SCRIPTS {
        let out = Command::new("bash")
            .arg("-n")
            .arg(repo(script))
            .output()
            .expect("run bash -n");
        assert!(out.status.success(), "bash -n {script}: {}", text(&out));
    }
}

#[test]
fn reserve_counts_pages_from_the_map() {
    let dir = tempdir();
    let block = write(
        dir.path(),
        "block.yaml",
        "appliance: scripts-test
spdk:
  mem-size: 3GiB   # DMA memory of the appliance
  hugepages: true
  shm-id: 1
devices: []
",
    );
    let flow = write(
        dir.path(),
        "flow.yaml",
        "appliance: scripts-test\nspdk: { hugepages: true, mem-size: \"3GiB\", shm-id: 1 }\n",
    );
    for map in [&block, &flow] {
        let out = bash(
            "hugepages/reserve.sh",
            &["--dry-run", "--config", map, "--size", "2M"],
        );
        assert!(out.status.success(), "{map}: {}", text(&out));
        assert!(
            text(&out).contains("requested: 1536 pages of 2M (3072 MiB)"),
            "{map}: {}",
            text(&out)
        );
        assert!(text(&out).contains("dry-run:"), "{}", text(&out));
    }

    // 1 GiB pages: 3 GiB is 3 of them.
    let out = bash(
        "hugepages/reserve.sh",
        &["--dry-run", "--config", &block, "--size", "1G"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("requested: 3 pages of 1G"),
        "{}",
        text(&out)
    );
}

#[test]
fn reserve_defaults_and_refusals() {
    let dir = tempdir();
    // No `spdk:` section: 1 GiB, 512 pages of 2 MiB.
    let bare = write(dir.path(), "bare.yaml", "appliance: scripts-test\n");
    let out = bash("hugepages/reserve.sh", &["--dry-run", "--config", &bare]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("requested: 512 pages of 2M") && text(&out).contains("default 1GiB"),
        "{}",
        text(&out)
    );

    // `hugepages: false`: nothing to reserve.
    let nohuge = write(
        dir.path(),
        "nohuge.yaml",
        "appliance: scripts-test\nspdk: { mem-size: 2GiB, hugepages: false }\n",
    );
    let out = bash("hugepages/reserve.sh", &["--dry-run", "--config", &nohuge]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing to reserve"), "{}", text(&out));

    // --mem rounds up to whole pages.
    let out = bash("hugepages/reserve.sh", &["--dry-run", "--mem", "3GB"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("requested: 1431 pages of 2M"),
        "{}",
        text(&out)
    );

    // Usage errors exit 2 with a message.
    for (args, message) in [
        (
            &["--dry-run", "--count", "4", "--mem", "1GiB"][..],
            "give exactly one of --count, --mem, --config",
        ),
        (&["--dry-run", "--mem", "3XB"][..], "\"3XB\" is not a size"),
        (
            &["--dry-run", "--size", "4M", "--count", "1"][..],
            "--size must be 2M or 1G",
        ),
    ] {
        let out = bash("hugepages/reserve.sh", args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(message), "{args:?}: {}", text(&out));
    }

    // A bad size in the map names the map and the key.
    let bad = write(
        dir.path(),
        "bad.yaml",
        "appliance: scripts-test\nspdk:\n  mem-size: lots\n",
    );
    let out = bash("hugepages/reserve.sh", &["--dry-run", "--config", &bad]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("spdk.mem-size: \"lots\" is not a size"),
        "{}",
        text(&out)
    );
}

#[test]
fn bind_refuses_missing_devices() {
    let first = "0000:01:00.0";
    if Path::new("/sys/bus/pci/devices").join(first).exists() {
        println!("NOT RUN bind_refuses_missing_devices: this machine has a PCI device {first}");
        return;
    }
    let out = bash(
        "spdk-env/bind.sh",
        &["--dry-run", "--config", "conf/nvme-4x.yaml"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no such PCI device 0000:01:00.0"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("nothing was changed"), "{}", text(&out));
}

#[test]
fn bind_refuses_what_is_not_nvme() {
    // Any PCI device of this machine that is not an NVMe controller.
    let other = std::fs::read_dir("/sys/bus/pci/devices")
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| {
            std::fs::read_to_string(e.path().join("class"))
                .map(|c| c.trim() != "0x010802")
                .unwrap_or(false)
        });
    let Some(other) = other else {
        println!("NOT RUN bind_refuses_what_is_not_nvme: no PCI devices visible");
        return;
    };
    let addr = other.file_name().to_string_lossy().to_string();
    let dir = tempdir();
    let map = write(
        dir.path(),
        "other.yaml",
        &format!(
            "appliance: scripts-test
devices:
  - name: other
    backend: spdk
    transport: pcie
    address: \"{addr}\"
    role: wal
  - {{ name: remote, backend: spdk, transport: tcp, address: 127.0.0.1, nqn: \"nqn.2016-06.io.spdk:x\", role: data }}
"
        ),
    );
    let out = bash("spdk-env/bind.sh", &["--dry-run", "--config", &map]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{addr} (other): REFUSED: not an NVMe controller")),
        "{}",
        text(&out)
    );
    // The tcp device is not bound.
    assert!(text(&out).contains("binding 1 device(s)"), "{}", text(&out));

    // A map without pcie devices has nothing to bind.
    let out = bash(
        "spdk-env/bind.sh",
        &["--dry-run", "--config", "conf/local.yaml"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing to do"), "{}", text(&out));
}
