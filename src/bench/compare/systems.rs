//! The systems `bench compare` runs: Stria on each of its backends (a map
//! each), and the peers RocksDB, Redis and fio, each either ready or "not
//! run" with the reason.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::admin;
use crate::bench::process;
use crate::config::Config;

/// The maps Stria is run with when `--stria` names none: the shipped
/// maps of the kernel backends and of the simulated device.
pub const DEFAULT_MAPS: [(&str, &str); 3] = [
    ("uring", include_str!("../../../conf/uring.yaml")),
    ("psync", include_str!("../../../conf/psync.yaml")),
    ("sim", include_str!("../../../conf/sim.yaml")),
];

/// A Stria system: a name (`stria-<backend>`) and its map.
#[derive(Clone, Debug)]
pub struct StriaMap {
    pub name: String,
    pub cfg: Config,
    /// The file `stria serve` reads it from.
    pub path: PathBuf,
}

/// How a system appears in the report.
#[derive(Clone, Debug, Serialize)]
pub struct SystemInfo {
    pub name: String,
    /// What it is: the map of a Stria system, a peer's version and settings.
    pub detail: String,
    /// `Some(why)` when it is not run.
    pub not_run: Option<String>,
    /// Its log is on simulated devices, not on the disk: its figures are
    /// not fractions of the disk's floor.
    pub simulated: bool,
}

/// Parses `--stria NAME=MAP`.
pub fn parse_stria(arg: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = arg.split_once('=').ok_or_else(|| {
        format!("--stria {arg:?}: expected NAME=MAP, such as uring=conf/uring.yaml")
    })?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(format!(
            "--stria {arg:?}: the name must be letters, digits and dashes"
        ));
    }
    Ok((name.to_string(), PathBuf::from(path)))
}

/// The Stria maps to run: those given, else [`DEFAULT_MAPS`] written to
/// `maps_dir` (so that `stria serve` can read them too).
pub fn stria_maps(given: &[(String, PathBuf)], maps_dir: &Path) -> Result<Vec<StriaMap>, String> {
    let mut maps = Vec::new();
    if given.is_empty() {
        std::fs::create_dir_all(maps_dir)
            .map_err(|e| format!("cannot create {}: {e}", maps_dir.display()))?;
        for (name, text) in DEFAULT_MAPS {
            let path = maps_dir.join(format!("{name}.yaml"));
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            let cfg = Config::parse(
                text,
                &format!("<shipped map of {name}> ({})", path.display()),
            )
            .map_err(|e| e.to_string())?;
            maps.push(StriaMap {
                name: format!("stria-{name}"),
                cfg,
                path,
            });
        }
    } else {
        for (name, path) in given {
            let cfg = Config::load(path).map_err(|e| e.to_string())?;
            maps.push(StriaMap {
                name: format!("stria-{name}"),
                cfg,
                path: path.clone(),
            });
        }
    }
    for (i, m) in maps.iter().enumerate() {
        if maps[..i].iter().any(|o| o.name == m.name) {
            return Err(format!("--stria names {} twice", m.name));
        }
    }
    Ok(maps)
}

/// Makes a map ready for a run: formats file devices that do not exist yet
/// (as a first `stria serve` does), and refuses one whose engine keeps
/// data unless `force`, when it erases that data: every run starts from an
/// empty engine.
pub fn prepare(map: &StriaMap, force: bool) -> Result<Vec<String>, String> {
    let first = map
        .cfg
        .devices
        .iter()
        .all(|d| d.path().is_some_and(|p| !p.exists()));
    if first {
        admin::format(&map.cfg, false).map_err(|e| format!("{}: {e}", map.name))?;
    }
    let found = admin::guard(&map.cfg, "stria bench compare", force)
        .map_err(|e| format!("{}: {e}", map.name))?;
    if !found.is_empty() {
        admin::erase(&map.cfg).map_err(|e| format!("{}: {e}", map.name))?;
    }
    Ok(found)
}

/// Where the peers (RocksDB's database, Redis's append-only file, fio's
/// file) keep their files: `dir` when given, else the folder of the first
/// WAL device file of the first file-backed map, on the same disk as
/// Stria's log.
pub fn peer_dir(dir: Option<&Path>, maps: &[StriaMap]) -> Result<PathBuf, String> {
    if let Some(d) = dir {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        return std::fs::canonicalize(d).map_err(|e| format!("{}: {e}", d.display()));
    }
    for m in maps {
        if let Ok(d) = process::wal_dir(&m.cfg) {
            return std::fs::canonicalize(&d).map_err(|e| format!("{}: {e}", d.display()));
        }
    }
    let d = PathBuf::from("data");
    std::fs::create_dir_all(&d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    std::fs::canonicalize(&d).map_err(|e| format!("{}: {e}", d.display()))
}

/// Why RocksDB cannot run in this build, if it cannot.
pub fn rocksdb_missing() -> Option<String> {
    if cfg!(feature = "peers") {
        None
    } else {
        Some(
            "built without the `peers` feature (cargo build --release --features peers; needs libclang-dev)"
                .into(),
        )
    }
}

/// Why a program cannot run, if it cannot.
pub fn program_missing(program: &Path, package: &str) -> Option<String> {
    if process::installed(program) {
        None
    } else {
        Some(format!(
            "{} is not installed (Debian: apt install {package})",
            program.display()
        ))
    }
}

/// The first line a program prints of its version, for the report.
pub fn version_of(program: &Path, flag: &str) -> String {
    std::process::Command::new(program)
        .arg(flag)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "version unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stria_maps_are_named_and_parsed() {
        assert_eq!(
            parse_stria("uring=conf/uring.yaml").unwrap(),
            ("uring".to_string(), PathBuf::from("conf/uring.yaml"))
        );
        assert!(parse_stria("conf/local.yaml")
            .unwrap_err()
            .contains("NAME=MAP"));
        assert!(parse_stria("a b=x.yaml").unwrap_err().contains("letters"));
    }

    #[test]
    fn the_shipped_maps_are_written_and_valid() {
        let dir = tempfile::tempdir().unwrap();
        let maps = stria_maps(&[], dir.path()).unwrap();
        let names: Vec<&str> = maps.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["stria-uring", "stria-psync", "stria-sim"]);
        for m in &maps {
            assert!(m.path.is_file(), "{}", m.path.display());
        }
    }
}
