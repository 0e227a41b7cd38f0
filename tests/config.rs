//! Configuration: the shipped maps parse, and every kind of bad input gets its
//! one-line error naming the file, the line and column, and the field.

use std::time::Duration;
use stria::config::{
    BackendConfig, Config, DeviceLoss, Durability, IdlePolicy, Origin, Role, SpdkConfig,
};

const CORES: &[usize] = &[0, 1];

/// A valid map that each case below breaks in one place.
const GOOD: &str = "\
appliance: test
reactors:
  wal: [0]
  flush: [1]
  idle: park
  spin-us: 20
devices:
  - { name: wal0, backend: psync, path: ./data/w0.img, size: 8MiB, role: wal }
  - { name: wal1, backend: uring, path: ./data/w1.img, size: 8MiB, role: wal }
  - { name: data0, backend: sim, size: 64MiB, role: data }
wal:
  segment-size: 2MiB
  max-batch: 256KiB
";

fn parse(text: &str) -> Result<Config, String> {
    Config::parse_with_cores(text, "test.yaml", CORES).map_err(|e| e.to_string())
}

/// Parses `GOOD` with `from` replaced by `to`, expecting an error; returns it.
fn error_of(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "test bug: {from:?} not in GOOD");
    let text = GOOD.replacen(from, to, 1);
    let err = parse(&text).expect_err("the broken config must be refused");
    assert!(!err.contains('\n'), "error must be one line: {err}");
    assert!(
        err.starts_with("test.yaml:"),
        "error must name the file: {err}"
    );
    err
}

#[test]
fn good_config_parses_with_defaults() {
    let cfg = parse(GOOD).unwrap();
    assert_eq!(cfg.appliance, "test");
    assert_eq!(cfg.reactors.wal, vec![0]);
    assert_eq!(cfg.reactors.idle, IdlePolicy::Park);
    assert_eq!(cfg.reactors.spin_us, 20);
    assert_eq!(cfg.devices.len(), 3);
    assert_eq!(cfg.devices[0].size, 8 << 20);
    assert_eq!(cfg.devices[0].block_size, 4096);
    assert_eq!(
        cfg.devices[1].backend,
        BackendConfig::Uring {
            path: "./data/w1.img".into(),
            direct: true
        }
    );
    assert_eq!(cfg.devices[2].role, Role::Data);
    assert_eq!(cfg.wal.devices, vec!["wal0", "wal1"]);
    assert_eq!(cfg.wal.durability, Durability::Sync);
    assert!(cfg.wal.fua, "FUA is on unless the map turns it off");
    assert_eq!(cfg.flush.devices, vec!["data0"]);
    assert_eq!(cfg.server.listen.to_string(), "127.0.0.1:6380");
}

#[test]
fn wal_fua_is_a_boolean() {
    let text = GOOD.replacen(
        "  max-batch: 256KiB\n",
        "  max-batch: 256KiB\n  fua: false\n",
        1,
    );
    assert!(!parse(&text).unwrap().wal.fua);
    let err = error_of(
        "  max-batch: 256KiB\n",
        "  max-batch: 256KiB\n  fua: sometimes\n",
    );
    assert!(
        err.contains("wal.fua: \"sometimes\" is not true or false"),
        "{err}"
    );
}

#[test]
fn wal_copies_are_at_most_the_stripe_and_the_loss_policy_is_named() {
    let cfg = parse(GOOD).unwrap();
    assert_eq!(
        (cfg.wal.copies, cfg.wal.on_device_loss),
        (1, DeviceLoss::Degrade)
    );
    let text = GOOD.replacen(
        "  max-batch: 256KiB\n",
        "  max-batch: 256KiB\n  copies: 2\n  on-device-loss: refuse-writes\n",
        1,
    );
    let cfg = parse(&text).unwrap();
    assert_eq!(
        (cfg.wal.copies, cfg.wal.on_device_loss),
        (2, DeviceLoss::RefuseWrites)
    );
    for (bad, says) in [
        (
            "0",
            "0 copies of each batch need as many WAL devices, and the stripe has 2",
        ),
        ("3", "3 copies of each batch need as many WAL devices"),
        ("two", "wal.copies: \"two\" is not a number of copies"),
    ] {
        let err = error_of(
            "  max-batch: 256KiB\n",
            &format!("  max-batch: 256KiB\n  copies: {bad}\n"),
        );
        assert!(err.contains(says), "{bad}: {err}");
    }
    let err = error_of(
        "  max-batch: 256KiB\n",
        "  max-batch: 256KiB\n  on-device-loss: panic\n",
    );
    assert!(
        err.contains(
            "unknown device-loss policy \"panic\" (expected one of: degrade, refuse-writes)"
        ),
        "{err}"
    );
}

#[test]
fn the_shard_submits_the_log_unless_the_map_gives_it_to_the_reactor() {
    use stria::config::WalSubmit;
    assert_eq!(parse(GOOD).unwrap().wal.submit, WalSubmit::Shard);
    let with = |v: &str| {
        GOOD.replacen(
            "  max-batch: 256KiB\n",
            &format!("  max-batch: 256KiB\n  submit: {v}\n"),
            1,
        )
    };
    assert_eq!(
        parse(&with("reactor")).unwrap().wal.submit,
        WalSubmit::Reactor
    );
    assert_eq!(parse(&with("shard")).unwrap().wal.submit, WalSubmit::Shard);
    let err = error_of(
        "  max-batch: 256KiB\n",
        "  max-batch: 256KiB\n  submit: flush\n",
    );
    assert!(
        err.contains("unknown submitting thread \"flush\" (expected one of: shard, reactor)"),
        "{err}"
    );
}

#[test]
fn the_row_cache_is_off_or_at_least_a_mebibyte() {
    assert_eq!(parse(GOOD).unwrap().server.row_cache, 256 << 20);
    let with = |v: &str| GOOD.to_string() + &format!("server:\n  row-cache: {v}\n");
    assert_eq!(parse(&with("0")).unwrap().server.row_cache, 0);
    assert_eq!(parse(&with("1GiB")).unwrap().server.row_cache, 1 << 30);
    let err = parse(&with("64KiB")).expect_err("too small");
    assert!(
        err.contains("server.row-cache: 65536 bytes is below 1MiB: give at least 1MiB, or 0 to turn the cache off"),
        "{err}"
    );
    let err = parse(&with("lots")).expect_err("not a size");
    assert!(err.contains("server.row-cache"), "{err}");
}

#[test]
fn the_background_scrub_has_a_rate_and_a_period() {
    let cfg = parse(GOOD).unwrap();
    assert_eq!(cfg.flush.scrub_rate, 16 << 20);
    assert_eq!(cfg.flush.scrub_every, Duration::from_secs(24 * 3600));
    let with = |v: &str| GOOD.to_string() + &format!("flush:\n{v}");
    let cfg = parse(&with("  scrub-rate: 0\n  scrub-every: 6h\n")).unwrap();
    assert_eq!(cfg.flush.scrub_rate, 0);
    assert_eq!(cfg.flush.scrub_every, Duration::from_secs(6 * 3600));
    assert_eq!(
        parse(&with("  scrub-rate: 1MiB\n"))
            .unwrap()
            .without_background_scrub()
            .flush
            .scrub_rate,
        0
    );
    for (bad, says) in [
        (
            "  scrub-rate: 1KiB\n",
            "flush.scrub-rate: 1024 bytes a second is below 64KiB",
        ),
        (
            "  scrub-rate: fast\n",
            "flush.scrub-rate: \"fast\" is not a size",
        ),
        (
            "  scrub-every: often\n",
            "flush.scrub-every: \"often\" is not a duration",
        ),
        (
            "  scrub-every: 10ms\n",
            "flush.scrub-every: \"10ms\" is below one second",
        ),
    ] {
        let err = parse(&with(bad)).expect_err(bad);
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn shipped_configs_parse() {
    let root = env!("CARGO_MANIFEST_DIR");
    for name in ["local", "sim", "sim-stripe", "psync"] {
        let path = std::path::PathBuf::from(format!("{root}/conf/{name}.yaml"));
        Config::parse_with_cores(&std::fs::read_to_string(&path).unwrap(), name, CORES)
            .unwrap_or_else(|e| panic!("conf/{name}.yaml: {e}"));
    }
    // The bare-metal example names cores 2-5, which a small machine lacks.
    let text = std::fs::read_to_string(format!("{root}/conf/nvme-4x.yaml")).unwrap();
    let cfg = Config::parse_with_cores(&text, "nvme-4x", &[0, 1, 2, 3, 4, 5]).unwrap();
    assert_eq!(cfg.reactors.idle, IdlePolicy::Poll);
    assert_eq!(
        cfg.devices[0].backend,
        BackendConfig::Spdk(SpdkConfig::Pcie {
            address: "0000:01:00.0".into(),
            namespace: 1,
        })
    );
    // The environment follows the map: reactor cores 2-5, the four SSDs.
    assert_eq!(cfg.spdk.core_mask(), "0x3c");
    assert_eq!(cfg.spdk.pci_allowed.len(), 4);
    assert_eq!(cfg.spdk.pci_allowed[3], "0000:04:00.0");
    assert!(cfg.spdk.hugepages);
    let err = Config::parse_with_cores(&text, "nvme-4x", CORES)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("reactors.wal[0]") && err.contains("core 2"),
        "{err}"
    );
}

#[test]
fn embedded_default_is_conf_local() {
    let cfg = Config::embedded_default();
    assert_eq!(cfg.appliance, "local");
    // The log through psync (a blocking flush in the shard, as Redis's),
    // block files through io_uring.
    for d in &cfg.devices {
        match d.role {
            Role::Wal => assert!(matches!(d.backend, BackendConfig::Psync { .. }), "{d:?}"),
            _ => assert!(matches!(d.backend, BackendConfig::Uring { .. }), "{d:?}"),
        }
    }
    assert_eq!(
        cfg.devices.iter().filter(|d| d.role == Role::Wal).count(),
        2
    );
    assert_eq!(cfg.reactors.idle, IdlePolicy::Park);
}

#[test]
fn unknown_key() {
    let err = error_of("  spin-us: 20\n", "  spin-us: 20\n  spinn: 3\n");
    assert!(err.starts_with("test.yaml:7:3: "), "{err}");
    assert!(err.contains("unknown field `spinn`"), "{err}");
}

#[test]
fn unknown_key_in_a_device() {
    let err = error_of(
        "size: 8MiB, role: wal }",
        "size: 8MiB, role: wal, colour: red }",
    );
    assert!(err.starts_with("test.yaml:8:"), "{err}");
    assert!(err.contains("unknown field `colour`"), "{err}");
}

#[test]
fn bad_size_string() {
    let err = error_of(
        "path: ./data/w1.img, size: 8MiB",
        "path: ./data/w1.img, size: 8MX",
    );
    assert!(err.starts_with("test.yaml:9:"), "{err}");
    assert!(
        err.contains("devices[1].size: \"8MX\" is not a size"),
        "{err}"
    );
}

#[test]
fn size_not_whole_blocks() {
    let err = error_of("size: 64MiB", "size: 67108865");
    assert!(
        err.contains("devices[2].size") && err.contains("4096-byte blocks"),
        "{err}"
    );
}

#[test]
fn duplicate_device_name() {
    let err = error_of("name: wal1", "name: wal0");
    assert!(err.starts_with("test.yaml:9:"), "{err}");
    assert!(
        err.contains("devices[1].name: duplicate device name \"wal0\" (first used at line 8)"),
        "{err}"
    );
}

#[test]
fn duplicate_path() {
    let err = error_of("./data/w1.img", "./data/w0.img");
    assert!(
        err.contains("devices[1].path") && err.contains("already used"),
        "{err}"
    );
}

#[test]
fn role_that_does_not_exist() {
    let err = error_of("size: 64MiB, role: data", "size: 64MiB, role: journal");
    assert!(err.starts_with("test.yaml:10:"), "{err}");
    assert!(
        err.contains("devices[2].role: unknown role \"journal\" (expected one of: wal, data)"),
        "{err}"
    );
}

#[test]
fn backend_that_does_not_exist() {
    let err = error_of("backend: psync", "backend: aio");
    assert!(err.starts_with("test.yaml:8:"), "{err}");
    assert!(err.contains("devices[0].backend: unknown backend \"aio\" (expected one of: sim, psync, uring, spdk)"), "{err}");
}

#[test]
fn key_of_another_backend() {
    let err = error_of("backend: sim,", "backend: sim, path: ./x.img,");
    assert!(
        err.contains("devices[2].path: `path` does not apply to the sim backend"),
        "{err}"
    );
}

#[test]
fn wal_set_naming_a_missing_device() {
    let err = error_of(
        "wal:\n  segment-size",
        "wal:\n  devices: [wal0, wal7]\n  segment-size",
    );
    assert!(err.starts_with("test.yaml:12:"), "{err}");
    assert!(
        err.contains("wal.devices[1]: no device named \"wal7\""),
        "{err}"
    );
}

#[test]
fn flush_set_naming_a_device_of_the_wrong_role() {
    let err = error_of("wal:\n", "flush:\n  devices: [wal0]\nwal:\n");
    assert!(
        err.contains("flush.devices[0]: device \"wal0\" has role wal, not data"),
        "{err}"
    );
}

#[test]
fn no_wal_device() {
    let err = error_of("role: wal }\n  - { name: wal1, backend: uring, path: ./data/w1.img, size: 8MiB, role: wal }", "role: data }\n  - { name: wal1, backend: uring, path: ./data/w1.img, size: 8MiB, role: data }");
    assert!(
        err.contains("needs at least one device with role wal"),
        "{err}"
    );
}

#[test]
fn core_the_machine_does_not_have() {
    let err = error_of("flush: [1]", "flush: [1, 64]");
    assert!(err.starts_with("test.yaml:4:14: "), "{err}");
    assert!(err.contains("reactors.flush[1]: core 64 does not exist or is not available to this process (available: 0, 1)"), "{err}");
}

#[test]
fn core_given_twice() {
    let err = error_of("flush: [1]", "flush: [0]");
    assert!(
        err.contains("reactors.flush[0]: core 0 is already given to reactors.wal[0]"),
        "{err}"
    );
}

#[test]
fn size_smaller_than_the_layout_needs() {
    let err = error_of(
        "path: ./data/w0.img, size: 8MiB",
        "path: ./data/w0.img, size: 4MiB",
    );
    assert!(err.starts_with("test.yaml:8:"), "{err}");
    assert!(
        err.contains("devices[0].size: 4194304 bytes is smaller than the layout needs"),
        "{err}"
    );
    let err = error_of("size: 64MiB", "size: 8MiB");
    assert!(
        err.contains("devices[2].size") && err.contains("smaller than the layout needs"),
        "{err}"
    );
}

#[test]
fn missing_size_and_path() {
    let err = error_of("path: ./data/w0.img, size: 8MiB, ", "path: ./data/w0.img, ");
    assert!(
        err.contains("missing field") || err.contains("devices[0].size"),
        "{err}"
    );
    let err = error_of("path: ./data/w0.img, ", "");
    assert!(
        err.contains("devices[0].path: device \"wal0\" needs a path"),
        "{err}"
    );
}

#[test]
fn bad_idle_policy_and_numbers() {
    let err = error_of("idle: park", "idle: nap");
    assert!(
        err.contains("reactors.idle: unknown idle policy \"nap\""),
        "{err}"
    );
    let err = error_of("spin-us: 20", "spin-us: -3");
    assert!(
        err.contains("reactors.spin-us: \"-3\" is not a number of microseconds"),
        "{err}"
    );
    let err = error_of(
        "segment-size: 2MiB",
        "segment-size: 2MiB\n  durability: maybe",
    );
    assert!(
        err.contains("wal.durability: unknown durability \"maybe\""),
        "{err}"
    );
}

#[test]
fn max_batch_larger_than_a_segment() {
    let err = error_of("max-batch: 256KiB", "max-batch: 4MiB");
    assert!(err.contains("wal.max-batch"), "{err}");
}

#[test]
fn malformed_yaml() {
    let err = error_of("flush: [1]", "flush: [1");
    assert!(err.starts_with("test.yaml:"), "{err}");
}

#[test]
fn spdk_addresses_are_checked() {
    let err = error_of(
        "{ name: data0, backend: sim, size: 64MiB, role: data }",
        "{ name: data0, backend: spdk, transport: pcie, address: \"01:00.0\", role: data }",
    );
    assert!(
        err.contains("devices[2].address: \"01:00.0\" is not a PCI address"),
        "{err}"
    );
    let err = error_of(
        "{ name: data0, backend: sim, size: 64MiB, role: data }",
        "{ name: data0, backend: spdk, transport: tcp, address: 127.0.0.1, role: data }",
    );
    assert!(
        err.contains("devices[2].nqn: a tcp device needs the subsystem nqn"),
        "{err}"
    );
}

#[test]
fn sim_model_is_validated() {
    let err = error_of(
        "{ name: data0, backend: sim, size: 64MiB, role: data }",
        "{ name: data0, backend: sim, size: 64MiB, role: data, sim: { write-error-rate: 1.5 } }",
    );
    assert!(
        err.contains("devices[2].sim.write-error-rate: 1.5 is outside [0, 1]"),
        "{err}"
    );
}

#[test]
fn sim_fault_classes_are_read_and_validated() {
    let line = "{ name: data0, backend: sim, size: 64MiB, role: data }";
    let faults =
        "{ name: data0, backend: sim, size: 64MiB, role: data, sim: { misdirect-rate: 0.01, \
                  lost-write-rate: 0.02, corrupt-read-rate: 0.03, latent-errors: [300, 301], \
                  slow-from-op: 10, slow-ops: 5, slow-factor: 1000, vanish-at-op: 99 } }";
    let cfg = parse(&GOOD.replacen(line, faults, 1)).unwrap();
    let stria::config::BackendConfig::Sim(sim) = &cfg.device("data0").unwrap().backend else {
        panic!("a sim device");
    };
    let f = &sim.faults;
    assert_eq!(
        (f.misdirect_rate, f.lost_write_rate, f.corrupt_read_rate),
        (0.01, 0.02, 0.03)
    );
    assert_eq!(f.latent_errors, vec![300, 301]);
    assert_eq!(
        (f.slow_from_op, f.slow_ops, f.slow_factor, f.vanish_at_op),
        (Some(10), 5, 1000, Some(99))
    );
    for (bad, says) in [
        (
            "misdirect-rate: 2",
            "devices[2].sim.misdirect-rate: 2 is outside [0, 1]",
        ),
        (
            "slow-factor: 0",
            "devices[2].sim.slow-factor: 0 is not from 1 to 1000000",
        ),
        ("latent-errors: [x]", "devices[2].sim.latent-errors[0]"),
        ("vanish-at-op: -1", "devices[2].sim.vanish-at-op"),
    ] {
        let err = error_of(line, &line.replace(" }", &format!(", sim: {{ {bad} }} }}")));
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn missing_file_is_reported() {
    let err = Config::load(std::path::Path::new("/nonexistent/stria.yaml"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("/nonexistent/stria.yaml: cannot read:"),
        "{err}"
    );
}

#[test]
fn wrong_shape_names_the_key() {
    let err = error_of("spin-us: 20", "spin-us: [1]");
    assert!(err.starts_with("test.yaml:6:12: spin-us: "), "{err}");
}

#[test]
fn huge_segment_size_is_an_error_not_an_overflow() {
    let err = error_of("segment-size: 2MiB", "segment-size: 8EiB");
    assert!(
        err.contains("wal.max-batch") || err.contains("smaller than the layout needs"),
        "{err}"
    );
    let err = error_of(
        "segment-size: 2MiB\n  max-batch: 256KiB",
        "segment-size: 4EiB\n  max-batch: 256KiB",
    );
    assert!(
        err.contains("devices[0].size") && err.contains("smaller than the layout needs"),
        "{err}"
    );
}

#[test]
fn zero_size_is_refused_for_file_and_sim_devices() {
    let err = error_of(
        "path: ./data/w0.img, size: 8MiB",
        "path: ./data/w0.img, size: 0",
    );
    assert!(
        err.contains("devices[0].size: must be more than 0 bytes"),
        "{err}"
    );
}

#[test]
fn max_batch_must_be_whole_blocks() {
    let err = error_of("max-batch: 256KiB", "max-batch: 5000");
    assert!(
        err.starts_with(
            "test.yaml:13:14: wal.max-batch: 5000 bytes must be whole 4096-byte blocks"
        ),
        "{err}"
    );
}

#[test]
fn unbounded_times_are_refused() {
    let err = error_of("spin-us: 20", "spin-us: 5000000");
    assert!(
        err.contains("reactors.spin-us: 5000000 is more than 1000000"),
        "{err}"
    );
    let err = error_of(
        "{ name: data0, backend: sim, size: 64MiB, role: data }",
        "{ name: data0, backend: sim, size: 64MiB, role: data, sim: { write-us: 18446744073709551615 } }",
    );
    assert!(
        err.contains("devices[2].sim.write-us") && err.contains("ten seconds"),
        "{err}"
    );
}

#[test]
fn an_error_in_a_default_names_no_line() {
    // The default max-batch (1 MiB) does not fit a 512 KiB segment: there
    // is no line to point at.
    let err = Config::parse_with_cores(
        &GOOD.replace(
            "wal:\n  segment-size: 2MiB\n  max-batch: 256KiB\n",
            "wal:\n  segment-size: 512KiB\n",
        ),
        "test.yaml",
        CORES,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "test.yaml: wal.max-batch: 9437184 bytes must be whole 4096-byte blocks of device \"wal0\", at least one and at most a segment (524288)"
    );
}

#[test]
fn spdk_section_defaults_follow_the_map() {
    let cfg = parse(GOOD).unwrap();
    assert_eq!(cfg.spdk.mem_size, 1 << 30);
    assert!(cfg.spdk.hugepages);
    assert_eq!(cfg.spdk.shm_id, None);
    assert_eq!(cfg.spdk.cores, vec![0, 1], "every reactor core");
    assert_eq!(cfg.spdk.core_mask(), "0x3");
    assert!(cfg.spdk.pci_allowed.is_empty(), "no pcie device");
}

#[test]
fn spdk_section_is_read() {
    let text = format!(
        "{}spdk:\n  mem-size: 256MiB\n  hugepages: false\n  shm-id: 3\n",
        GOOD.replacen(
            "{ name: data0, backend: sim, size: 64MiB, role: data }",
            "{ name: data0, backend: spdk, transport: tcp, address: 127.0.0.1, port: 4421, \
             nqn: \"nqn.2016-06.io.spdk:cnode1\", namespace: 2, role: data }",
            1
        )
    );
    let cfg = parse(&text).unwrap();
    assert_eq!(cfg.spdk.mem_size, 256 << 20);
    assert!(!cfg.spdk.hugepages);
    assert_eq!(cfg.spdk.shm_id, Some(3));
    let BackendConfig::Spdk(spdk) = &cfg.devices[2].backend else {
        panic!("spdk device expected");
    };
    assert_eq!(spdk.namespace(), 2);
    assert_eq!(
        spdk.transport_id(),
        "trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:4421 subnqn:nqn.2016-06.io.spdk:cnode1"
    );
    assert!(cfg.spdk.pci_allowed.is_empty(), "tcp devices need no PCI");
}

#[test]
fn spdk_section_errors_are_one_line() {
    let with = |section: &str| {
        let text = format!("{GOOD}spdk:\n{section}\n");
        let err = parse(&text).expect_err("must be refused");
        assert!(
            !err.contains('\n') && err.starts_with("test.yaml:"),
            "{err}"
        );
        err
    };
    let err = with("  mem-size: 10MiB");
    assert!(
        err.contains("spdk.mem-size: 10485760 bytes is not a whole number of MiB from 64MiB up"),
        "{err}"
    );
    let err = with("  mem-size: lots");
    assert!(
        err.contains("spdk.mem-size: \"lots\" is not a size"),
        "{err}"
    );
    let err = with("  hugepages: maybe");
    assert!(
        err.contains("spdk.hugepages: \"maybe\" is not true or false"),
        "{err}"
    );
    let err = with("  shm-id: -1");
    assert!(err.contains("spdk.shm-id"), "{err}");
    let err = with("  core-mask: 0x3");
    assert!(err.contains("core-mask"), "derived, not a key: {err}");
}

#[test]
fn spdk_namespace_is_checked() {
    let err = error_of(
        "{ name: data0, backend: sim, size: 64MiB, role: data }",
        "{ name: data0, backend: spdk, transport: pcie, address: \"0000:01:00.0\", namespace: 0, role: data }",
    );
    assert!(
        err.contains("devices[2].namespace: 0 is not a namespace ID"),
        "{err}"
    );
    let err = error_of(
        "{ name: data0, backend: sim, size: 64MiB, role: data }",
        "{ name: data0, backend: sim, size: 64MiB, namespace: 1, role: data }",
    );
    assert!(
        err.contains("`namespace` does not apply to the sim backend"),
        "{err}"
    );
}

#[test]
fn regions_split_the_key_space_evenly_or_at_the_given_keys() {
    let cfg = parse(GOOD).unwrap();
    assert_eq!(cfg.memstore.regions, 16);
    assert_eq!(cfg.memstore.split_keys.len(), 15);
    assert_eq!(cfg.memstore.split_keys[0], vec![0x10, 0x00]);
    // The default value limit is what fits in a 256 KiB WAL batch.
    assert_eq!(cfg.memstore.max_key, 64 << 10);
    assert_eq!(cfg.memstore.max_value, (256 << 10) - (64 << 10) - 128);
    let cfg = parse(&format!(
        "{GOOD}memstore: {{ split-keys: [g, p], max-key: 1KiB, max-value: 64KiB }}\n"
    ))
    .unwrap();
    assert_eq!(cfg.memstore.regions, 3);
    assert_eq!(cfg.memstore.split_keys, vec![b"g".to_vec(), b"p".to_vec()]);
    assert_eq!(
        (cfg.memstore.max_key, cfg.memstore.max_value),
        (1024, 64 << 10)
    );
    let cfg = parse(&format!(
        "{GOOD}flush: {{ block-size: 16KiB, bloom-bits: 12, compact-at: 6, manifest-size: 1MiB }}\n"
    ))
    .unwrap();
    assert_eq!(cfg.flush.block_size, 16 << 10);
    assert_eq!((cfg.flush.bloom_bits, cfg.flush.compact_at), (12, 6));
    assert_eq!(cfg.flush.manifest_size, 1 << 20);
    assert_eq!(cfg.flush.block_cache, 256 << 20);
    let cfg = parse(&format!("{GOOD}flush: {{ block-cache: 0 }}\n")).unwrap();
    assert_eq!(cfg.flush.block_cache, 0);
    let cfg = parse(&format!("{GOOD}flush: {{ block-cache: 2GiB }}\n")).unwrap();
    assert_eq!(cfg.flush.block_cache, 2 << 30);
}

#[test]
fn split_keys_out_of_order() {
    let err = parse(&format!("{GOOD}memstore: {{ split-keys: [p, g] }}\n")).unwrap_err();
    assert_eq!(
        err,
        "test.yaml:14:29: memstore.split-keys[1]: \"g\" is not after the split key before it (\"p\"); split keys must be strictly increasing"
    );
}

#[test]
fn regions_and_split_keys_together() {
    let err = parse(&format!(
        "{GOOD}memstore: {{ regions: 4, split-keys: [g] }}\n"
    ))
    .unwrap_err();
    assert_eq!(
        err,
        "test.yaml:14:22: memstore.regions: give regions or split-keys, not both"
    );
}

#[test]
fn a_value_limit_that_does_not_fit_a_wal_batch() {
    let err = parse(&format!("{GOOD}memstore: {{ max-value: 1MiB }}\n")).unwrap_err();
    assert_eq!(
        err,
        "test.yaml:14:24: memstore.max-value: a 65536-byte key and a 1048576-byte value do not fit in one WAL batch (wal.max-batch is 262144 bytes; raise it to at least 1118208 or lower the limits)"
    );
}

#[test]
fn bad_flush_settings() {
    let err = parse(&format!("{GOOD}flush: {{ compact-at: 1 }}\n")).unwrap_err();
    assert_eq!(
        err,
        "test.yaml:14:22: flush.compact-at: 1 is outside 2 to 1000"
    );
    let err = parse(&format!("{GOOD}flush: {{ block-cache: lots }}\n")).unwrap_err();
    assert!(err.contains("flush.block-cache"), "{err}");
    let err = parse(&format!("{GOOD}flush: {{ block-cache: 64KiB }}\n")).unwrap_err();
    assert_eq!(
        err,
        "test.yaml:14:23: flush.block-cache: 65536 bytes is below 2097152 (64 blocks of flush.block-size, at least 1MiB); give 0 to turn the cache off"
    );
    let err = parse(&format!("{GOOD}flush: {{ manifest-size: 100KiB }}\n")).unwrap_err();
    assert!(
        err.contains("flush.manifest-size: 102400 bytes is not a multiple of 64KiB"),
        "{err}"
    );
    let err = parse(&format!("{GOOD}flush: {{ manifest-size: 64MiB }}\n")).unwrap_err();
    assert!(err.contains("devices[2].size"), "{err}");
    assert!(err.contains("the manifest (67108864 bytes)"), "{err}");
}

#[test]
fn an_appliance_command_finds_its_map_flag_then_env_then_installed_then_embedded() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let write = |name: &str, appliance: &str| {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            GOOD.replace("appliance: test", &format!("appliance: {appliance}")),
        )
        .unwrap();
        p
    };
    let (flag, env, installed) = (
        write("f.yaml", "flag"),
        write("e.yaml", "env"),
        write("i.yaml", "inst"),
    );
    let none = dir.path().join("absent.yaml");
    let locate = |f: Option<&std::path::Path>, e: Option<&std::path::Path>, i: &std::path::Path| {
        let (cfg, origin) = Config::locate(f, e.map(|e| e.as_os_str()), i).unwrap();
        (cfg.appliance, origin)
    };
    assert_eq!(
        locate(Some(&flag), Some(&env), &installed),
        ("flag".into(), Origin::Flag)
    );
    assert_eq!(
        locate(None, Some(&env), &installed),
        ("env".into(), Origin::Env)
    );
    assert_eq!(
        locate(None, None, &installed),
        ("inst".into(), Origin::Installed)
    );
    assert_eq!(
        locate(None, Some(std::path::Path::new("")), &installed).1,
        Origin::Installed
    );
    assert_eq!(
        locate(None, None, &none),
        ("local".into(), Origin::Embedded)
    );
    // A map that is named but missing is an error, never a fallback.
    assert!(Config::locate(None, Some(none.as_os_str()), &installed).is_err());
}

#[test]
fn data_dir_places_relative_device_paths() {
    let cfg = parse(&format!("data-dir: /var/lib/stria\n{GOOD}")).unwrap();
    assert_eq!(cfg.data_dir, Some("/var/lib/stria".into()));
    assert_eq!(
        cfg.devices[0].path(),
        Some(std::path::Path::new("/var/lib/stria/./data/w0.img"))
    );
    let abs = GOOD.replace("./data/w1.img", "/dev/nvme1n1");
    let cfg = parse(&format!("data-dir: /var/lib/stria\n{abs}")).unwrap();
    assert_eq!(
        cfg.devices[1].path(),
        Some(std::path::Path::new("/dev/nvme1n1"))
    );
    assert_eq!(parse(GOOD).unwrap().data_dir, None);
    let err = error_of("appliance: test", "data-dir: ''\nappliance: test");
    assert!(err.contains("data-dir: is empty"), "{err}");
}

#[test]
fn block_file_copies_are_at_most_the_data_devices() {
    assert_eq!(parse(GOOD).unwrap().flush.copies, 1);
    for (bad, says) in [
        (
            "2",
            "flush.copies: 2 copies of each block file need as many data devices, and flush.devices has 1",
        ),
        ("0", "0 copies of each block file need as many data devices"),
        ("many", "flush.copies: \"many\" is not a number of copies"),
    ] {
        let err = parse(&format!("{GOOD}flush:\n  copies: {bad}\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
}
