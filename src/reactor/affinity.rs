//! Which cores a thread may run on, and pinning a thread to one of them.
//!
//! The only place in the reactor layer that touches the kernel's CPU
//! affinity calls; everything above works with plain core numbers.

use std::fmt::Write as _;
use std::io;
use std::mem;

/// A `cpu_set_t` with safe accessors. Core numbers at or past
/// [`CpuSet::CAPACITY`] cannot be represented and are refused by the callers.
struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// Cores a `cpu_set_t` can hold (1024 with glibc's fixed-size set).
    const CAPACITY: usize = libc::CPU_SETSIZE as usize;

    fn empty() -> CpuSet {
        // SAFETY: cpu_set_t is a plain array of integers; all zero bits is a
        // valid set, the empty one (what CPU_ZERO produces).
        CpuSet(unsafe { mem::zeroed() })
    }

    fn insert(&mut self, core: usize) {
        assert!(
            core < Self::CAPACITY,
            "core {core} does not fit a cpu_set_t"
        );
        // SAFETY: CPU_SET only writes the bit for `core` inside the set, and
        // the assert above keeps that bit inside the array.
        unsafe { libc::CPU_SET(core, &mut self.0) }
    }

    fn contains(&self, core: usize) -> bool {
        // SAFETY: CPU_ISSET only reads the bit for `core`, which the bound
        // check keeps inside the array.
        core < Self::CAPACITY && unsafe { libc::CPU_ISSET(core, &self.0) }
    }

    fn cores(&self) -> Vec<usize> {
        (0..Self::CAPACITY).filter(|&c| self.contains(c)).collect()
    }
}

/// The cores the calling thread may run on, lowest first.
///
/// This is the affinity mask the process was started with (`taskset`,
/// a cgroup cpuset, a container's CPU list) as long as the calling thread has
/// not been pinned itself; config validation calls it from the main thread
/// so that a configuration naming a core the appliance cannot use is refused
/// at start instead of failing when the reactor starts.
///
/// If the kernel refuses to report the mask (it only does so for a bad
/// pointer or size, neither possible here) this falls back to every core the
/// standard library counts, and logs it: pinning will still report any core
/// that is not really available.
pub fn allowed_cores() -> Vec<usize> {
    match thread_affinity() {
        Ok(cores) if !cores.is_empty() => cores,
        other => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            tracing::warn!(
                result = ?other,
                "cannot read this thread's CPU affinity; assuming cores 0..{n}"
            );
            (0..n).collect()
        }
    }
}

/// The calling thread's affinity mask, as core numbers.
pub fn thread_affinity() -> io::Result<Vec<usize>> {
    let mut set = CpuSet::empty();
    // SAFETY: pid 0 names the calling thread; the size and pointer describe
    // `set`, which is live and writable for the whole call.
    let rc = unsafe { libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set.0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(set.cores())
}

/// Pins the calling thread to `core` alone.
///
/// Fails with the kernel's error when the core does not exist, is offline or
/// is outside the thread's cpuset; fails with `InvalidInput` for a core
/// number a `cpu_set_t` cannot hold. There is no fallback: a reactor that is
/// not where the configuration says would share a core without anyone
/// noticing.
pub fn pin_to_core(core: usize) -> io::Result<()> {
    confine_thread(0, &[core])
}

/// Confines thread `tid` (of any process; 0 for the calling thread) to
/// `cores`. Fails as [`pin_to_core`] does, and for an empty list.
pub fn confine_thread(tid: libc::pid_t, cores: &[usize]) -> io::Result<()> {
    if cores.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no cores to run on",
        ));
    }
    let mut set = CpuSet::empty();
    for &core in cores {
        if core >= CpuSet::CAPACITY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("core numbers stop at {}", CpuSet::CAPACITY - 1),
            ));
        }
        set.insert(core);
    }
    // SAFETY: `tid` is only a number to the kernel (a thread that is gone
    // is an error, ESRCH); the size and pointer describe `set`, which is
    // live for the whole call and only read by the kernel.
    let rc = unsafe { libc::sched_setaffinity(tid, mem::size_of::<libc::cpu_set_t>(), &set.0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Confines every thread of process `pid`, as `/proc` lists them now, to
/// `cores` (what `taskset -a -p -c` does). Threads it starts later inherit
/// the mask of the thread that starts them, except io_uring's kernel
/// workers (`iou-wrk-*`): the kernel places those by the ring's cpuset, and
/// kernels before 6.9 refuse to move them at all (such a refusal is
/// skipped). Returns how many threads it confined; one that ends meanwhile
/// is skipped.
pub fn confine_process(pid: u32, cores: &[usize]) -> io::Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let Some(tid) = entry?
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        match confine_thread(tid, cores) {
            Ok(()) => n += 1,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e)
                if e.raw_os_error() == Some(libc::EINVAL)
                    && std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                        .is_ok_and(|c| c.starts_with("iou-")) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The core the calling thread is running on right now (for a pinned thread,
/// the core it is pinned to).
pub fn current_core() -> io::Result<usize> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).map_err(|_| io::Error::last_os_error())
}

/// Formats cores as a kernel cpu list (`0-3,6,8-9`), for messages.
pub fn core_list(cores: &[usize]) -> String {
    let mut sorted = cores.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        // Writing to a String cannot fail.
        let _ = if start == end {
            write!(out, "{start}")
        } else {
            write!(out, "{start}-{end}")
        };
        i += 1;
    }
    if out.is_empty() {
        out.push_str("none");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_lists_collapse_runs() {
        assert_eq!(core_list(&[3, 0, 1, 2, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(core_list(&[5]), "5");
        assert_eq!(core_list(&[]), "none");
    }

    #[test]
    fn the_current_thread_has_allowed_cores() {
        let cores = thread_affinity().unwrap();
        assert!(!cores.is_empty());
        assert_eq!(allowed_cores(), cores);
        assert!(cores.contains(&current_core().unwrap()));
    }

    #[test]
    fn core_numbers_past_a_cpu_set_are_refused() {
        let err = pin_to_core(CpuSet::CAPACITY).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let err = confine_thread(0, &[]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    /// Every thread of another process gets the mask, as the kernel then
    /// reports it for each; a process that is gone is an error.
    #[test]
    fn a_process_is_confined_thread_by_thread() {
        let core = *thread_affinity().unwrap().last().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let n = confine_process(pid, &[core]).unwrap();
        assert!(n >= 1);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_string();
        assert_eq!(list, core.to_string());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(confine_process(pid, &[core]).is_err());
    }
}
