//! The `devices:` list: each device's backend, size, queue and the keys
//! its backend takes (SPDK's, the simulator's); the `spdk:` section the
//! map implies; and the device sets that WAL and flush sections name.

use super::*;

/// Which keys each backend takes, beyond name, backend, role, size,
/// block-size and queue-depth.
fn check_backend_keys(c: &Checker, dev: &RawDevice, i: usize, backend: &str) -> Result<()> {
    let keys: [(&str, Option<&Leaf>, &[&str]); 7] = [
        ("path", dev.path.as_ref(), &["psync", "uring"]),
        ("direct", dev.direct.as_ref(), &["uring"]),
        ("transport", dev.transport.as_ref(), &["spdk"]),
        ("address", dev.address.as_ref(), &["spdk"]),
        ("port", dev.port.as_ref(), &["spdk"]),
        ("nqn", dev.nqn.as_ref(), &["spdk"]),
        ("namespace", dev.namespace.as_ref(), &["spdk"]),
    ];
    for (key, leaf, backends) in keys {
        if let Some(leaf) = leaf {
            if !backends.contains(&backend) {
                return Err(c.at(
                    leaf,
                    &format!("devices[{i}].{key}"),
                    format!(
                        "`{key}` does not apply to the {backend} backend (only to {})",
                        backends.join(", ")
                    ),
                ));
            }
        }
    }
    if dev.sim.is_some() && backend != "sim" {
        return Err(c.at(
            &dev.backend,
            &format!("devices[{i}].sim"),
            format!("`sim` does not apply to the {backend} backend"),
        ));
    }
    Ok(())
}

pub(super) fn device(c: &Checker, dev: &RawDevice, i: usize) -> Result<DeviceConfig> {
    let field = |key: &str| format!("devices[{i}].{key}");
    check_name(c, &dev.name, &field("name"))?;
    let name = dev.name.value.trim().to_string();
    let backend_name = dev.backend.value.trim();
    c.choice(
        &dev.backend,
        &field("backend"),
        "backend",
        &[("sim", ()), ("psync", ()), ("uring", ()), ("spdk", ())],
    )?;
    check_backend_keys(c, dev, i, backend_name)?;
    let role = c.choice(
        &dev.role,
        &field("role"),
        "role",
        &[("wal", Role::Wal), ("data", Role::Data)],
    )?;

    let block_size: u32 = c.or(&dev.block_size, 4096, |l| {
        let bs = c.size(l, &field("block-size"))?;
        if !bs.is_power_of_two() || !(512..=65536).contains(&bs) {
            return Err(c.at(
                l,
                &field("block-size"),
                format!("{bs} is not a power of two from 512 to 65536"),
            ));
        }
        Ok(bs as u32)
    })?;
    let queue_depth: u32 = c.or(&dev.queue_depth, 128, |l| {
        let qd: u32 = c.uint(l, &field("queue-depth"), "a queue depth")?;
        if !(1..=4096).contains(&qd) {
            return Err(c.at(
                l,
                &field("queue-depth"),
                format!("{qd} is outside 1 to 4096"),
            ));
        }
        Ok(qd)
    })?;

    let size = match &dev.size {
        Some(l) => {
            let size = c.size(l, &field("size"))?;
            if size == 0 && backend_name != "spdk" {
                return Err(c.at(l, &field("size"), "must be more than 0 bytes"));
            }
            if size % u64::from(block_size) != 0 {
                return Err(c.at(
                    l,
                    &field("size"),
                    format!("{size} bytes is not a whole number of {block_size}-byte blocks"),
                ));
            }
            size
        }
        None if backend_name == "spdk" => 0,
        None => {
            return Err(c.missing(
                &dev.name,
                &field("size"),
                format!("device {name:?} needs a size"),
            ))
        }
    };

    let path = |dev: &RawDevice| -> Result<PathBuf> {
        let leaf = dev.path.as_ref().ok_or_else(|| {
            c.missing(
                &dev.name,
                &field("path"),
                format!("device {name:?} needs a path (a file or block device)"),
            )
        })?;
        if leaf.value.trim().is_empty() {
            return Err(c.at(leaf, &field("path"), "is empty"));
        }
        Ok(PathBuf::from(leaf.value.trim()))
    };
    let backend = match backend_name {
        "sim" => BackendConfig::Sim(sim(c, dev.sim.as_ref(), i)?),
        "psync" => BackendConfig::Psync { path: path(dev)? },
        "uring" => BackendConfig::Uring {
            path: path(dev)?,
            direct: c.or(&dev.direct, true, |l| c.boolean(l, &field("direct")))?,
        },
        _ => BackendConfig::Spdk(spdk(c, dev, i)?),
    };
    Ok(DeviceConfig {
        name,
        role,
        size,
        block_size,
        queue_depth,
        backend,
    })
}

fn spdk(c: &Checker, dev: &RawDevice, i: usize) -> Result<SpdkConfig> {
    let field = |key: &str| format!("devices[{i}].{key}");
    let transport = dev.transport.as_ref().ok_or_else(|| {
        c.missing(
            &dev.name,
            &field("transport"),
            "an spdk device needs a transport (pcie or tcp)",
        )
    })?;
    let kind = c.choice(
        transport,
        &field("transport"),
        "transport",
        &[("pcie", false), ("tcp", true)],
    )?;
    let address = dev.address.as_ref().ok_or_else(|| {
        c.missing(
            transport,
            &field("address"),
            "an spdk device needs an address",
        )
    })?;
    let addr = address.value.trim().to_string();
    let namespace: u32 = c.or(&dev.namespace, 1, |l| {
        let ns: u32 = c.uint(l, &field("namespace"), "a namespace ID")?;
        if ns == 0 || ns == u32::MAX {
            return Err(c.at(
                l,
                &field("namespace"),
                format!("{ns} is not a namespace ID (1 to 4294967294)"),
            ));
        }
        Ok(ns)
    })?;
    if !kind {
        if !is_pci_address(&addr) {
            return Err(c.at(
                address,
                &field("address"),
                format!("{addr:?} is not a PCI address like 0000:01:00.0"),
            ));
        }
        for (key, leaf) in [("port", &dev.port), ("nqn", &dev.nqn)] {
            if let Some(leaf) = leaf {
                return Err(c.at(
                    leaf,
                    &field(key),
                    format!("`{key}` applies to the tcp transport only"),
                ));
            }
        }
        return Ok(SpdkConfig::Pcie {
            address: addr,
            namespace,
        });
    }
    if addr.parse::<std::net::IpAddr>().is_err() {
        return Err(c.at(
            address,
            &field("address"),
            format!("{addr:?} is not an IP address"),
        ));
    }
    let port = c.or(&dev.port, 4420, |l| c.uint(l, &field("port"), "a TCP port"))?;
    let nqn = dev.nqn.as_ref().ok_or_else(|| {
        c.missing(
            address,
            &field("nqn"),
            "a tcp device needs the subsystem nqn",
        )
    })?;
    if !nqn.value.trim().starts_with("nqn.") {
        return Err(c.at(
            nqn,
            &field("nqn"),
            format!("{:?} is not an NQN (nqn.YYYY-MM.domain:name)", nqn.value),
        ));
    }
    Ok(SpdkConfig::Tcp {
        address: addr,
        port,
        nqn: nqn.value.trim().to_string(),
        namespace,
    })
}

/// The smallest `spdk.mem-size`: the queue pairs and a few buffers.
const MIN_SPDK_MEM: u64 = 64 << 20;

/// The `spdk:` section, with the cores and PCI addresses the map implies.
pub(super) fn spdk_env(
    c: &Checker,
    raw: &RawConfig,
    reactors: &ReactorsConfig,
    devices: &[DeviceConfig],
) -> Result<SpdkEnvConfig> {
    let s = &raw.spdk;
    let mem_size = c.or(&s.mem_size, SpdkEnvConfig::DEFAULT_MEM_SIZE, |l| {
        let size = c.size(l, "spdk.mem-size")?;
        if size < MIN_SPDK_MEM || size % (1 << 20) != 0 || size >> 20 > i32::MAX as u64 {
            return Err(c.at(
                l,
                "spdk.mem-size",
                format!("{size} bytes is not a whole number of MiB from 64MiB up"),
            ));
        }
        Ok(size)
    })?;
    let hugepages = c.or(&s.hugepages, true, |l| c.boolean(l, "spdk.hugepages"))?;
    let shm_id = s
        .shm_id
        .as_ref()
        .map(|l| {
            let id: u32 = c.uint(l, "spdk.shm-id", "a shared-memory ID (0 or more)")?;
            if id > i32::MAX as u32 {
                return Err(c.at(l, "spdk.shm-id", format!("{id} is more than {}", i32::MAX)));
            }
            Ok(id)
        })
        .transpose()?;
    let mut cores: Vec<usize> = reactors
        .wal
        .iter()
        .chain(&reactors.flush)
        .copied()
        .collect();
    cores.sort_unstable();
    let any_spdk = devices
        .iter()
        .any(|d| d.kind() == crate::device::BackendKind::Spdk);
    if let Some(&core) = cores.iter().find(|&&core| any_spdk && core >= 128) {
        return Err(c.at_opt(
            None,
            "reactors",
            format!("core {core} is beyond the 128 cores SPDK's core mask can name"),
        ));
    }
    let mut pci_allowed = Vec::new();
    for dev in devices {
        if let BackendConfig::Spdk(SpdkConfig::Pcie { address, .. }) = &dev.backend {
            if !pci_allowed.contains(address) {
                pci_allowed.push(address.clone());
            }
        }
    }
    Ok(SpdkEnvConfig {
        mem_size,
        hugepages,
        shm_id,
        cores,
        pci_allowed,
    })
}

/// `DDDD:BB:DD.F`, hexadecimal.
fn is_pci_address(s: &str) -> bool {
    let parts: Vec<&str> = s.split([':', '.']).collect();
    let widths = [4, 2, 2, 1];
    parts.len() == 4
        && parts
            .iter()
            .zip(widths)
            .all(|(p, w)| p.len() == w && p.chars().all(|ch| ch.is_ascii_hexdigit()))
}

fn sim(c: &Checker, raw: Option<&RawSim>, i: usize) -> Result<SimConfig> {
    let d = SimConfig::default();
    let Some(s) = raw else { return Ok(d) };
    let field = |key: &str| format!("devices[{i}].sim.{key}");
    let us = |leaf: &Option<Leaf>, key: &str, default: u64| {
        c.or(leaf, default, |l| {
            let us: u64 = c.uint(l, &field(key), "a number of microseconds")?;
            if us > MAX_SIM_US {
                return Err(c.at(
                    l,
                    &field(key),
                    format!("{us} is more than {MAX_SIM_US} (ten seconds)"),
                ));
            }
            Ok(us)
        })
    };
    let rate =
        |leaf: &Option<Leaf>, key: &str| c.or(leaf, 0.0, |l| c.fraction(l, &field(key), false));
    let sector_size: u32 = c.or(&s.sector_size, d.sector_size, |l| {
        let v = c.size(l, &field("sector-size"))?;
        if !v.is_power_of_two() || !(512..=65536).contains(&v) {
            return Err(c.at(
                l,
                &field("sector-size"),
                format!("{v} is not a power of two from 512 to 65536"),
            ));
        }
        Ok(v as u32)
    })?;
    let mut fail_ops = Vec::with_capacity(s.fail_ops.len());
    for (j, leaf) in s.fail_ops.iter().enumerate() {
        fail_ops.push(c.uint(
            leaf,
            &field(&format!("fail-ops[{j}]")),
            "an operation number",
        )?);
    }
    let mut latent_errors = Vec::with_capacity(s.latent_errors.len());
    for (j, leaf) in s.latent_errors.iter().enumerate() {
        latent_errors.push(c.uint(
            leaf,
            &field(&format!("latent-errors[{j}]")),
            "a block number (LBA)",
        )?);
    }
    let op = |leaf: &Option<Leaf>, key: &str| {
        leaf.as_ref()
            .map(|l| c.uint(l, &field(key), "an operation number"))
            .transpose()
    };
    let slow_factor = c.or(&s.slow_factor, 100, |l| {
        let v: u64 = c.uint(l, &field("slow-factor"), "a factor (unsigned integer)")?;
        if !(1..=1_000_000).contains(&v) {
            return Err(c.at(
                l,
                &field("slow-factor"),
                format!("{v} is not from 1 to 1000000"),
            ));
        }
        Ok(v)
    })?;
    Ok(SimConfig {
        write_us: us(&s.write_us, "write-us", d.write_us)?,
        read_us: us(&s.read_us, "read-us", d.read_us)?,
        flush_us: us(&s.flush_us, "flush-us", d.flush_us)?,
        bandwidth: c.or(&s.bandwidth, d.bandwidth, |l| {
            c.size(l, &field("bandwidth"))
        })?,
        sector_size,
        volatile_cache: c.or(&s.volatile_cache, d.volatile_cache, |l| {
            c.boolean(l, &field("volatile-cache"))
        })?,
        seed: c.or(&s.seed, d.seed, |l| {
            c.uint(l, &field("seed"), "a seed (unsigned integer)")
        })?,
        faults: SimFaults {
            read_error_rate: rate(&s.read_error_rate, "read-error-rate")?,
            write_error_rate: rate(&s.write_error_rate, "write-error-rate")?,
            flush_error_rate: rate(&s.flush_error_rate, "flush-error-rate")?,
            fail_ops,
            power_cut_at_op: op(&s.power_cut_at_op, "power-cut-at-op")?,
            misdirect_rate: rate(&s.misdirect_rate, "misdirect-rate")?,
            lost_write_rate: rate(&s.lost_write_rate, "lost-write-rate")?,
            corrupt_read_rate: rate(&s.corrupt_read_rate, "corrupt-read-rate")?,
            latent_errors,
            slow_from_op: op(&s.slow_from_op, "slow-from-op")?,
            slow_ops: c.or(&s.slow_ops, 0, |l| {
                c.uint(l, &field("slow-ops"), "a number of operations")
            })?,
            slow_factor,
            vanish_at_op: op(&s.vanish_at_op, "vanish-at-op")?,
        },
    })
}

/// The devices a section names, or every device of `role` when it names none.
pub(super) fn device_set(
    c: &Checker,
    named: Option<&[Leaf]>,
    field: &str,
    role: Role,
    devices: &[DeviceConfig],
) -> Result<Vec<String>> {
    let Some(named) = named else {
        let all: Vec<String> = devices
            .iter()
            .filter(|d| d.role == role)
            .map(|d| d.name.clone())
            .collect();
        if all.is_empty() {
            return Err(c.at_opt(
                None,
                "devices",
                format!("needs at least one device with role {role}"),
            ));
        }
        return Ok(all);
    };
    let mut out: Vec<String> = Vec::with_capacity(named.len());
    for (i, leaf) in named.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let name = leaf.value.trim();
        let Some(dev) = devices.iter().find(|d| d.name == name) else {
            return Err(c.at(leaf, &f, format!("no device named {name:?} in `devices`")));
        };
        if dev.role != role {
            return Err(c.at(
                leaf,
                &f,
                format!("device {name:?} has role {}, not {role}", dev.role),
            ));
        }
        if out.iter().any(|n| n == name) {
            return Err(c.at(leaf, &f, format!("device {name:?} is listed twice")));
        }
        out.push(name.to_string());
    }
    if out.is_empty() {
        return Err(c.at_opt(
            None,
            field,
            format!("names no device; leave it out to use every {role} device"),
        ));
    }
    Ok(out)
}
