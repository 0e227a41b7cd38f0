//! The machine a comparison ran on, read from `/proc` and `/sys`, so that
//! every figure in the JSON says where it was measured.

use std::path::Path;

use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    /// The disk of the peers' folder (and of Stria's log): the mounted
    /// device, its file system and whether it is rotational.
    pub disk: String,
    pub load_before: [f64; 3],
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut out = [0.0; 3];
    for (o, v) in out.iter_mut().zip(text.split_whitespace()) {
        *o = v.parse().unwrap_or(0.0);
    }
    out
}

impl Machine {
    /// This machine, with the disk that holds `dir`.
    pub fn read(dir: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let memory_gib = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / f64::from(1 << 20));
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_gib: (memory_gib * 10.0).round() / 10.0,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            disk: disk_of(dir),
            load_before: load_average(),
        }
    }
}

/// The mount that holds `dir` (longest mount point that prefixes it).
fn disk_of(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let best = mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (dev, at, fs) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(at).then_some((at.len(), dev, at, fs))
        })
        .max_by_key(|m| m.0);
    let Some((_, dev, at, fs)) = best else {
        return "unknown".into();
    };
    let name = dev.rsplit('/').next().unwrap_or(dev);
    // A partition's queue is its disk's: vda1 -> vda, nvme0n1p2 -> nvme0n1.
    let rotational = [name.to_string(), disk_name(name)]
        .iter()
        .find_map(|n| std::fs::read_to_string(format!("/sys/block/{n}/queue/rotational")).ok())
        .map(|r| {
            if r.trim() == "1" {
                "rotational"
            } else {
                "non-rotational"
            }
        });
    format!(
        "{dev} on {at} ({fs}{})",
        rotational.map(|r| format!(", {r}")).unwrap_or_default()
    )
}

fn disk_name(part: &str) -> String {
    if part.starts_with("nvme") {
        part.rsplit_once('p')
            .filter(|(_, n)| n.chars().all(|c| c.is_ascii_digit()))
            .map_or(part.to_string(), |(d, _)| d.to_string())
    } else {
        part.trim_end_matches(|c: char| c.is_ascii_digit())
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_is_described() {
        let m = Machine::read(Path::new("."));
        assert!(m.cores >= 1);
        assert!(m.memory_gib > 0.0);
        assert_ne!(m.kernel, "unknown");
        assert_ne!(m.disk, "unknown");
    }

    #[test]
    fn a_partition_names_its_disk() {
        assert_eq!(disk_name("vda1"), "vda");
        assert_eq!(disk_name("nvme0n1p2"), "nvme0n1");
        assert_eq!(disk_name("nvme0n1"), "nvme0n1");
    }
}
