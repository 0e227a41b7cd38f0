//! The `stria` binary end to end, on file devices in a temporary folder.

use std::path::{Path, PathBuf};

#[path = "common/run.rs"]
mod run;

use run::{stria, stria_env, tempdir, text};

/// A small map of `backend` devices under `dir/data`, written to `dir/NAME.yaml`.
fn map(dir: &Path, name: &str, appliance: &str, backend: &str) -> PathBuf {
    let yaml = format!(
        "appliance: {appliance}
reactors: {{ wal: [0], flush: [1], idle: park, spin-us: 20 }}
devices:
  - {{ name: wal0, backend: {backend}, path: ./data/{name}-wal0.img, size: 4MiB, role: wal, queue-depth: 32 }}
  - {{ name: data0, backend: {backend}, path: ./data/{name}-data0.img, size: 32MiB, role: data, queue-depth: 32 }}
wal: {{ segment-size: 1MiB, max-batch: 256KiB }}
"
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    path
}

fn block0(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()[..4096].to_vec()
}

#[test]
fn format_inspect_and_refusal() {
    let dir = tempdir();
    let d = dir.path();
    map(d, "a", "appl", "psync");

    let out = stria(d, &["format", "--config", "a.yaml"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("formatted appliance appl"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::metadata(d.join("data/a-data0.img")).unwrap().len(),
        32 << 20
    );

    let out = stria(d, &["inspect", "--config", "a.yaml"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("wal0 (wal psync, 4194304 bytes"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("all 2 devices ok"), "{}", text(&out));

    // A second format is refused and changes nothing.
    let before = block0(&d.join("data/a-wal0.img"));
    let out = stria(d, &["format", "--config", "a.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("refusing to format: device wal0 already holds a Stria superblock (appliance appl, device wal0); pass --force"), "{}", text(&out));
    assert_eq!(block0(&d.join("data/a-wal0.img")), before);

    // --force rewrites it, under a new appliance id.
    let out = stria(d, &["format", "--config", "a.yaml", "--force"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_ne!(block0(&d.join("data/a-wal0.img")), before);
}

#[test]
fn inspect_names_missing_unformatted_foreign_and_corrupt_devices() {
    let dir = tempdir();
    let d = dir.path();
    map(d, "a", "appl", "uring");

    let out = stria(d, &["inspect", "--config", "a.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("wal0") && text(&out).contains("MISSING"),
        "{}",
        text(&out)
    );

    // Present but never formatted.
    std::fs::create_dir_all(d.join("data")).unwrap();
    for (f, size) in [("a-wal0.img", 4u64 << 20), ("a-data0.img", 20 << 20)] {
        std::fs::File::create(d.join("data").join(f))
            .unwrap()
            .set_len(size)
            .unwrap();
    }
    let out = stria(d, &["inspect", "--config", "a.yaml"]);
    assert!(text(&out).contains("UNFORMATTED"), "{}", text(&out));

    assert!(stria(d, &["format", "--config", "a.yaml"]).status.success());
    // The same files seen through a map of another appliance.
    let other = std::fs::read_to_string(d.join("a.yaml"))
        .unwrap()
        .replace("appliance: appl", "appliance: other");
    std::fs::write(d.join("b.yaml"), other).unwrap();
    let out = stria(d, &["inspect", "--config", "b.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("FROM ANOTHER APPLIANCE: appliance appl"),
        "{}",
        text(&out)
    );

    // Flip one byte of one superblock copy: the other three outvote it.
    let path = d.join("data/a-wal0.img");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[40] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let out = stria(d, &["inspect", "--config", "a.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains(
            "wal0 (wal uring, 4194304 bytes, 4096-byte blocks, ./data/a-wal0.img): DAMAGED \
             SUPERBLOCK COPIES (copy 0 at byte 0: corrupt superblock: checksum"
        ),
        "{}",
        text(&out)
    );
    // And of every copy: nothing to choose.
    for copy in 1..4 {
        bytes[copy * (256 << 10) + 40] ^= 0xff;
    }
    std::fs::write(&path, &bytes).unwrap();
    let out = stria(d, &["inspect", "--config", "a.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("CORRUPT: corrupt superblock: no superblock copy is valid (corrupt superblock: checksum"),
        "{}",
        text(&out)
    );
    // A damaged superblock is still a superblock: format refuses it too.
    let out = stria(d, &["format", "--config", "a.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("device wal0 already holds a Stria superblock that does not decode"),
        "{}",
        text(&out)
    );
}

#[test]
fn devbench_puts_two_maps_side_by_side() {
    let dir = tempdir();
    let d = dir.path();
    map(d, "u", "uring-map", "uring");
    map(d, "p", "psync-map", "psync");
    for m in ["u.yaml", "p.yaml"] {
        let out = stria(d, &["format", "--config", m]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = stria(
        d,
        &[
            "devbench",
            "--config",
            "u.yaml",
            "--config",
            "p.yaml",
            "--seconds",
            "0.05",
        ],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("stria devbench: 0.05s per case"), "{t}");
    for case in [
        "seq-write 4KiB",
        "seq-write 64KiB",
        "write+flush 4KiB",
        "rand-read 4KiB",
    ] {
        // qd 1 and 32, two devices, two maps.
        assert_eq!(
            t.lines().filter(|l| l.starts_with(case)).count(),
            8,
            "{case}:\n{t}"
        );
    }
    // Rows of the same device from both maps are adjacent, the second with its ratio.
    let lines: Vec<&str> = t.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.starts_with("write+flush 4KiB") && l.contains("uring"))
        .unwrap();
    assert!(
        lines[i + 1].contains("psync") && lines[i + 1].contains('x'),
        "{t}"
    );
    assert!(lines[i].contains("1.00x"), "{t}");
}

#[test]
fn bad_config_is_one_line_and_changes_nothing() {
    let dir = tempdir();
    let d = dir.path();
    let path = map(d, "a", "appl", "psync");
    let yaml = std::fs::read_to_string(&path)
        .unwrap()
        .replace("size: 32MiB", "size: 20MX");
    std::fs::write(&path, yaml).unwrap();
    let out = stria(d, &["format", "--config", "a.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("stria: a.yaml:5:"), "{err}");
    assert!(
        err.contains("devices[1].size: \"20MX\" is not a size"),
        "{err}"
    );
    assert!(!d.join("data").exists(), "nothing was created");
}

#[test]
fn embedded_default_is_used_without_config() {
    let dir = tempdir();
    let out = stria(dir.path(), &["inspect"]);
    let t = text(&out);
    // Where the package is installed, its map comes before the default.
    let installed = Path::new(stria::config::INSTALLED_PATH);
    let from = if installed.exists() {
        "/etc/stria/stria.yaml"
    } else {
        "<embedded conf/local.yaml>"
    };
    assert!(t.contains(&format!("appliance local from {from}")), "{t}");
    assert!(t.contains("MISSING"), "{t}");
}

#[test]
fn stria_config_names_the_map_and_data_dir_places_its_devices() {
    let dir = tempdir();
    let d = dir.path();
    let yaml = std::fs::read_to_string(map(d, "e", "envmap", "psync")).unwrap();
    std::fs::write(
        d.join("e.yaml"),
        format!("data-dir: {}/var\n{yaml}", d.display()),
    )
    .unwrap();
    std::fs::create_dir(d.join("run")).unwrap();
    let run = d.join("run");
    let named = d.join("e.yaml");
    let named = named.to_str().unwrap();
    let out = stria_env(&run, &["format"], "STRIA_CONFIG", named);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("appliance envmap"), "{}", text(&out));
    // Relative device paths are under data-dir, not where stria runs.
    assert!(d.join("var/data/e-wal0.img").exists(), "{}", text(&out));
    assert!(!run.join("data").exists());
    // --config comes before STRIA_CONFIG.
    map(d, "other", "other", "psync");
    let out = stria_env(
        &run,
        &["inspect", "--config", "../other.yaml"],
        "STRIA_CONFIG",
        named,
    );
    assert!(
        text(&out).contains("appliance other from ../other.yaml"),
        "{}",
        text(&out)
    );
    // A STRIA_CONFIG naming no file is an error, not a fallback.
    let out = stria_env(
        &run,
        &["inspect"],
        "STRIA_CONFIG",
        "/nonexistent/stria.yaml",
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("/nonexistent/stria.yaml"),
        "{}",
        text(&out)
    );
}

#[test]
fn bad_arguments_are_refused() {
    let dir = tempdir();
    let out = stria(dir.path(), &["devbench", "--seconds", "0"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--seconds"), "{}", text(&out));
    let out = stria(dir.path(), &["inspect", "--log-level", "[[bad"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn manual_pages_and_completions_come_from_the_command_definitions() {
    let dir = tempdir();
    let out = stria(dir.path(), &["man", "--out", "man"]);
    assert!(out.status.success(), "{}", text(&out));
    for page in [
        "stria.1",
        "stria-serve.1",
        "stria-format.1",
        "stria-bench-wal-pe.1",
    ] {
        let roff = std::fs::read_to_string(dir.path().join("man").join(page)).unwrap();
        assert!(roff.contains(".SH NAME"), "{page}: {roff}");
    }
    let serve = std::fs::read_to_string(dir.path().join("man/stria-serve.1")).unwrap();
    assert!(serve.contains("STRIA_CONFIG"), "{serve}");
    for (shell, mark) in [
        ("bash", "_stria()"),
        ("zsh", "#compdef stria"),
        ("fish", "complete -c stria"),
    ] {
        let out = stria(dir.path(), &["completions", shell]);
        assert!(out.status.success(), "{}", text(&out));
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains(mark) && script.contains("serve"),
            "{shell}: {script}"
        );
    }
    let out = stria(dir.path(), &["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn serve_tells_a_service_manager_when_it_is_ready_and_when_it_stops() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempdir();
    let d = dir.path();
    map(d, "n", "notified", "psync");
    let sock_path = d.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_stria"))
        .args(["serve", "--config", "n.yaml", "--listen", "127.0.0.1:0"])
        .current_dir(d)
        .env_remove("RUST_LOG")
        .env("NOTIFY_SOCKET", &sock_path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 512];
    let n = sock.recv(&mut buf).expect("READY=1 within a minute");
    let msg = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(msg.contains("READY=1\n"), "{msg}");
    assert!(msg.contains("STATUS=listening on 127.0.0.1:"), "{msg}");
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let n = sock.recv(&mut buf).expect("STOPPING=1");
    assert_eq!(&buf[..n], b"STOPPING=1\n");
    assert!(child.wait().unwrap().success());
}
