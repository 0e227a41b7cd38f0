//! `format` refuses everything that would destroy data or leave the map half
//! formatted, and a refusal changes nothing.

use std::path::Path;

use stria::admin::{self, AdminError, DeviceState};
use stria::config::Config;

fn map(dir: &Path, wal_path: &str, wal_size: &str, data_path: &str) -> Config {
    let yaml = format!(
        "appliance: t
reactors: {{ wal: [0], flush: [1] }}
devices:
  - {{ name: wal0, backend: psync, path: {wal_path}, size: {wal_size}, role: wal }}
  - {{ name: data0, backend: psync, path: {data_path}, size: 32MiB, role: data }}
wal: {{ segment-size: 1MiB, max-batch: 256KiB }}
",
    );
    let yaml = yaml.replace("DIR", &dir.display().to_string());
    Config::parse(&yaml, "t.yaml").unwrap()
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn refusal(r: Result<admin::FormatReport, AdminError>) -> String {
    match r {
        Err(AdminError::Refused(msg)) => msg,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_grown_map_does_not_bypass_the_refusal() {
    let dir = tempdir();
    let d = dir.path();
    let small = map(d, "DIR/w.img", "4MiB", "DIR/d.img");
    admin::format(&small, false).unwrap();
    let before = std::fs::read(d.join("w.img")).unwrap();
    // The same files, the WAL device now configured larger than its file.
    let grown = map(d, "DIR/w.img", "8MiB", "DIR/d.img");
    let msg = refusal(admin::format(&grown, false));
    assert!(
        msg.contains("device wal0 already holds a Stria superblock"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read(d.join("w.img")).unwrap(),
        before,
        "nothing changed"
    );
    admin::format(&grown, true).unwrap();
    assert_eq!(std::fs::metadata(d.join("w.img")).unwrap().len(), 8 << 20);
}

#[test]
fn data_that_is_not_strias_is_refused() {
    let dir = tempdir();
    let d = dir.path();
    let mut foreign = vec![0u8; 4 << 20];
    foreign[1024..1028].copy_from_slice(b"\x53\xef\x01\x00"); // an ext4 magic, say
    std::fs::write(d.join("w.img"), &foreign).unwrap();
    let cfg = map(d, "DIR/w.img", "4MiB", "DIR/d.img");
    let msg = refusal(admin::format(&cfg, false));
    assert!(msg.contains("data that is not Stria's"), "{msg}");
    assert!(!d.join("d.img").exists(), "nothing was created");
    assert_eq!(std::fs::read(d.join("w.img")).unwrap(), foreign);
}

#[test]
fn two_devices_on_one_file_are_refused_even_with_force() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("sub")).unwrap();
    let cfg = map(d, "DIR/w.img", "20MiB", "DIR/sub/../w.img");
    let msg = refusal(admin::format(&cfg, true));
    assert!(
        msg.contains("devices wal0 and data0 are the same file"),
        "{msg}"
    );
    assert!(
        !d.join("w.img").exists(),
        "the file made for the check is removed"
    );
}

#[test]
fn a_device_that_cannot_be_created_leaves_nothing_behind() {
    let dir = tempdir();
    let d = dir.path();
    let good = map(d, "DIR/w.img", "4MiB", "DIR/d.img");
    let first = admin::format(&good, false).unwrap();
    let before = std::fs::read(d.join("w.img")).unwrap();
    // Re-format with --force, the data device now under a path that cannot exist.
    let bad = map(d, "DIR/w.img", "4MiB", "/proc/self/nonexistent/d.img");
    assert!(admin::format(&bad, true).is_err());
    assert_eq!(
        std::fs::read(d.join("w.img")).unwrap(),
        before,
        "old superblock intact"
    );
    let reports = admin::inspect(&good);
    assert!(
        matches!(&reports[0].state, DeviceState::Ok(sb) if sb.appliance_id == first.appliance_id),
        "{:?}",
        reports[0].state
    );
    // A fresh map whose second device fails: the first device's new file and
    // folder are removed again.
    let fresh = map(d, "DIR/new/w.img", "4MiB", "/proc/self/nonexistent/d.img");
    assert!(admin::format(&fresh, false).is_err());
    assert!(!d.join("new").exists());
}

/// Flips a byte of `path` at `at`.
fn flip(path: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
}

fn state(cfg: &Config, name: &str) -> DeviceState {
    admin::inspect(cfg)
        .into_iter()
        .find(|r| r.device.name == name)
        .unwrap()
        .state
}

#[test]
fn a_damaged_superblock_copy_is_outvoted_reported_and_repaired_at_open() {
    let dir = tempdir();
    let d = dir.path();
    let cfg = map(d, "DIR/w.img", "4MiB", "DIR/d.img");
    admin::format(&cfg, false).unwrap();
    assert!(matches!(state(&cfg, "data0"), DeviceState::Ok(_)));
    // Copy 0 and copy 3 of data0 damaged: two of four still agree.
    flip(&d.join("d.img"), 40);
    flip(&d.join("d.img"), 3 * (256 << 10) + 40);
    let DeviceState::Damaged(sb, why) = state(&cfg, "data0") else {
        panic!("{}", state(&cfg, "data0"))
    };
    assert_eq!(sb.device, "data0");
    assert!(why.contains("copy 0 at byte 0"), "{why}");
    assert!(why.contains("copy 3 at byte 786432"), "{why}");
    assert!(!DeviceState::Damaged(sb, why).is_healthy());
    // The engine opens on the copies that agree and rewrites the others.
    let (e, _) = stria::engine::Engine::open_config(&cfg).unwrap();
    e.close().unwrap();
    assert!(matches!(state(&cfg, "data0"), DeviceState::Ok(_)));
}

#[test]
fn copies_that_split_evenly_make_the_device_corrupt_not_a_guess() {
    let dir = tempdir();
    let d = dir.path();
    let cfg = map(d, "DIR/w.img", "4MiB", "DIR/d.img");
    admin::format(&cfg, false).unwrap();
    // wal0's copies 2 and 3 replaced by data0's (valid, but another device).
    use std::os::unix::fs::FileExt;
    let data = std::fs::File::open(d.join("d.img")).unwrap();
    let wal = std::fs::OpenOptions::new()
        .write(true)
        .open(d.join("w.img"))
        .unwrap();
    let mut block = vec![0u8; 4096];
    data.read_exact_at(&mut block, 0).unwrap();
    for copy in [2u64, 3] {
        wal.write_all_at(&block, copy * (256 << 10)).unwrap();
    }
    match state(&cfg, "wal0") {
        DeviceState::Corrupt(why) => assert!(why.contains("disagree"), "{why}"),
        other => panic!("{other}"),
    }
    let err = stria::engine::Engine::open_config(&cfg).err().unwrap();
    assert!(err.to_string().contains("disagree"), "{err}");
}

#[test]
fn format_refuses_a_device_whose_first_copy_alone_was_lost() {
    let dir = tempdir();
    let d = dir.path();
    let cfg = map(d, "DIR/w.img", "4MiB", "DIR/d.img");
    admin::format(&cfg, false).unwrap();
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(d.join("w.img"))
        .unwrap();
    f.write_all_at(&[0u8; 4096], 0).unwrap();
    let msg = refusal(admin::format(&cfg, false));
    assert!(
        msg.contains("device wal0 already holds a Stria superblock"),
        "{msg}"
    );
}
