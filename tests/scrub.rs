//! `stria scrub` end to end: a clean appliance scrubs clean; a flipped bit
//! in a block file is named, and the exit status says so.

#[path = "common/run.rs"]
mod run;

use run::{stria, tempdir, text};

/// `dir/m.yaml`, formatted: small psync files under `dir/data`, with
/// memstores small enough that an ingest leaves block files.
fn formatted_map(dir: &std::path::Path) {
    let yaml = "appliance: scrub
reactors: { wal: [0], flush: [1], idle: park, spin-us: 20 }
devices:
  - { name: wal0, backend: psync, path: ./data/wal0.img, size: 32MiB, role: wal }
  - { name: data0, backend: psync, path: ./data/data0.img, size: 96MiB, role: data }
wal: { segment-size: 2MiB, max-batch: 1MiB }
memstore: { regions: 4, flush-size: 1MiB, global-limit: 4MiB, low-water: 0.9 }
";
    std::fs::write(dir.join("m.yaml"), yaml).unwrap();
    let out = stria(dir, &["format", "--config", "m.yaml"]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn scrub_reads_every_block_file_and_names_a_flipped_bit() {
    let dir = tempdir();
    let d = dir.path();
    formatted_map(d);
    let ok = |args: &[&str]| {
        let out = stria(d, args);
        assert!(out.status.success(), "{}", text(&out));
        text(&out)
    };
    ok(&[
        "bench",
        "ingest",
        "--config",
        "m.yaml",
        "--clients",
        "2",
        "--records",
        "20000",
        "--value-size",
        "100",
    ]);
    let t = ok(&["scrub", "--config", "m.yaml"]);
    assert!(t.contains(" 0 bad"), "{t}");
    assert!(!t.contains("scrub: 0 block files"), "{t}");

    // A flipped bit in the first block file (the first bytes written after
    // the reserved MiB and the 8 MiB manifest area).
    let path = d.join("data/data0.img");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = (9 << 20) + bytes[9 << 20..].iter().position(|&b| b != 0).unwrap() + 10;
    bytes[at] ^= 0x04;
    std::fs::write(&path, &bytes).unwrap();
    let out = stria(d, &["scrub", "--config", "m.yaml"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains(" 1 bad"), "{t}");
    assert!(t.contains("BAD: block file"), "{t}");
    assert!(t.contains(&format!("on data0 at LBA {}", at / 4096)), "{t}");
}

#[test]
fn a_second_engine_on_the_same_devices_is_refused() {
    use std::io::{BufRead, BufReader};
    let dir = tempdir();
    let d = dir.path();
    formatted_map(d);
    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_stria"))
        .args(["serve", "--config", "m.yaml", "--listen", "127.0.0.1:0"])
        .current_dir(d)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    while let Some(Ok(line)) = lines.next() {
        if line.starts_with("listening on") {
            break;
        }
    }
    let out = stria(d, &["scrub", "--config", "m.yaml"]);
    let t = text(&out);
    serve.kill().unwrap();
    serve.wait().unwrap();
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("device wal0 (./data/wal0.img) is in use by another engine"),
        "{t}"
    );
    // Once the server is gone, the devices are free again.
    let out = stria(d, &["scrub", "--config", "m.yaml"]);
    assert!(out.status.success(), "{}", text(&out));
}
