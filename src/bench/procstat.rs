//! A process's CPU time and context switches, read from `/proc`: the
//! figures that stay stable on two shared vCPUs where throughput does not.

use std::path::Path;

/// CPU time (user + system) and context switches of a process so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcSample {
    pub cpu_secs: f64,
    /// Voluntary and involuntary, summed over every thread.
    pub switches: u64,
}

impl ProcSample {
    /// What was used from `earlier` to `self`.
    pub fn since(&self, earlier: &ProcSample) -> ProcSample {
        ProcSample {
            cpu_secs: (self.cpu_secs - earlier.cpu_secs).max(0.0),
            switches: self.switches.saturating_sub(earlier.switches),
        }
    }

    /// What the process used from `self` to `later`, per operation of `ops`.
    pub fn per_op(&self, later: &ProcSample, ops: u64) -> (f64, f64) {
        let ops = ops.max(1) as f64;
        (
            (later.cpu_secs - self.cpu_secs) * 1e6 / ops,
            later.switches.saturating_sub(self.switches) as f64 / ops,
        )
    }
}

/// What this process has used so far, dead threads included (getrusage
/// `RUSAGE_SELF`): the CPU time and context switches of an in-process
/// system, such as the engine or RocksDB, measured around a run.
pub fn own() -> ProcSample {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage for the call to fill.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    if rc != 0 {
        return ProcSample::default();
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    ProcSample {
        cpu_secs: secs(u.ru_utime) + secs(u.ru_stime),
        switches: (u.ru_nvcsw + u.ru_nivcsw).max(0) as u64,
    }
}

/// Reads process `pid`'s figures: utime and stime of `/proc/<pid>/stat`,
/// and the context switches of `/proc/<pid>/task/*/status`.
pub fn sample(pid: u32) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut switches = 0;
    let tasks = std::fs::read_dir(Path::new(&format!("/proc/{pid}/task"))).ok()?;
    for t in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        for line in status.lines() {
            if let Some(v) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                switches += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Some(ProcSample {
        cpu_secs: ticks as f64 / hz,
        switches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_has_cpu_time_and_switches_that_grow() {
        // A child of its own: the test binary's threads come and go with
        // other tests, and a thread that ends takes its switches along.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done; exec sleep 30",
            ])
            .spawn()
            .expect("sh");
        let a = sample(child.id()).expect("a Linux /proc");
        std::thread::sleep(std::time::Duration::from_millis(400));
        let b = sample(child.id()).unwrap();
        child.kill().ok();
        child.wait().ok();
        assert!(
            b.cpu_secs >= a.cpu_secs && b.switches > a.switches,
            "{a:?} {b:?}"
        );
        let (cpu, sw) = a.per_op(&b, 1);
        assert!(cpu >= 0.0 && sw >= 1.0);
    }

    #[test]
    fn own_usage_counts_threads_that_have_ended() {
        let a = own();
        std::thread::spawn(|| {
            let mut x = 0u64;
            for i in 0..50_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
        })
        .join()
        .unwrap();
        let b = own();
        assert!(b.cpu_secs > a.cpu_secs, "{a:?} {b:?}");
        assert!(b.switches >= a.switches, "{a:?} {b:?}");
    }
}
