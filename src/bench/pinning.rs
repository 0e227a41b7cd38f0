//! Keeping a comparison's servers and its load generator on cores of
//! their own (`--server-cpus`, `--client-cpus`).
//!
//! On a small machine the bench's clients take a core the server would
//! otherwise have: a server's rate then follows its CPU per request and the
//! client's together, not how it overlaps its log writes with its work.
//! Confined to disjoint cores, each server (every thread of it, as
//! `taskset -a -p -c` would) and the load generator run side by side as
//! they would with the clients on other machines. Both servers of a
//! comparison get the same cores. io_uring's kernel workers that a server
//! starts later (on file-backed devices, the synchronous log writes) are
//! placed by the kernel, not by this mask.

use crate::reactor::{allowed_cores, confine_process, confine_thread, core_list, thread_affinity};

/// The cores given to the servers and to the load, when asked.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CoreSplit {
    /// Cores every thread of each server is confined to, comma-separated
    /// (with --client-cpus; both or neither).
    #[arg(long, value_delimiter = ',', value_name = "CORES")]
    pub server_cpus: Vec<usize>,
    /// Cores the bench's own client threads are confined to,
    /// comma-separated (with --server-cpus).
    #[arg(long, value_delimiter = ',', value_name = "CORES")]
    pub client_cpus: Vec<usize>,
}

/// The calling thread's cores before [`CoreSplit::apply`], given back
/// when dropped.
pub struct Restore(Option<Vec<usize>>);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some(cores) = self.0.take() {
            let _ = confine_thread(0, &cores);
        }
    }
}

impl CoreSplit {
    /// Refuses half a split, one whose sides share a core, or a core this
    /// process may not run on.
    pub fn check(&self) -> Result<(), String> {
        let allowed = allowed_cores();
        if let Some(c) = self
            .server_cpus
            .iter()
            .chain(&self.client_cpus)
            .find(|c| !allowed.contains(c))
        {
            return Err(format!(
                "core {c} is not one this process may run on (cores {})",
                core_list(&allowed)
            ));
        }
        match (self.server_cpus.is_empty(), self.client_cpus.is_empty()) {
            (true, true) => Ok(()),
            (false, false) => match self
                .server_cpus
                .iter()
                .find(|c| self.client_cpus.contains(c))
            {
                Some(c) => Err(format!(
                    "--server-cpus and --client-cpus both name core {c}: the point is that they share none"
                )),
                None => Ok(()),
            },
            _ => Err("--server-cpus and --client-cpus go together".into()),
        }
    }

    pub fn is_set(&self) -> bool {
        !self.server_cpus.is_empty()
    }

    /// Confines the servers `pids` to the server cores and the calling
    /// thread (and the threads it starts from now on) to the client cores,
    /// until the returned guard is dropped. Nothing when no split was
    /// asked for.
    pub fn apply(&self, pids: &[u32]) -> Result<Restore, String> {
        self.check()?;
        if !self.is_set() {
            return Ok(Restore(None));
        }
        let before = thread_affinity().map_err(|e| format!("reading this thread's cores: {e}"))?;
        for &pid in pids {
            confine_process(pid, &self.server_cpus).map_err(|e| {
                format!(
                    "confining server {pid} to cores {}: {e}",
                    core_list(&self.server_cpus)
                )
            })?;
        }
        confine_thread(0, &self.client_cpus).map_err(|e| {
            format!(
                "confining the load to cores {}: {e}",
                core_list(&self.client_cpus)
            )
        })?;
        Ok(Restore(Some(before)))
    }

    /// The split, for a report: `None` when there is none.
    pub fn describe(&self) -> Option<String> {
        self.is_set().then(|| {
            format!(
                "servers confined to cores {}, the load to cores {}",
                core_list(&self.server_cpus),
                core_list(&self.client_cpus)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(server: &[usize], client: &[usize]) -> CoreSplit {
        CoreSplit {
            server_cpus: server.to_vec(),
            client_cpus: client.to_vec(),
        }
    }

    #[test]
    fn half_a_split_or_a_shared_core_is_refused() {
        assert!(split(&[], &[]).check().is_ok());
        let mine = thread_affinity().unwrap();
        if let [a, b, ..] = mine[..] {
            assert!(split(&[a], &[b]).check().is_ok());
        }
        let e = split(&[0], &[]).check().unwrap_err();
        assert!(e.contains("go together"), "{e}");
        let e = split(&[0, 1], &[1]).check().unwrap_err();
        assert!(e.contains("core 1"), "{e}");
        let e = split(&[0], &[1023]).check().unwrap_err();
        assert!(e.contains("core 1023 is not one"), "{e}");
    }

    /// The server's threads get the server cores; this thread the client
    /// cores until the guard goes, then its own again.
    #[test]
    fn a_split_confines_both_sides_and_gives_the_cores_back() {
        let mine = thread_affinity().unwrap();
        let (server, client) = if mine.len() >= 2 {
            (vec![mine[0]], vec![mine[1]])
        } else {
            // One core: a split cannot be disjoint; check what can be.
            assert!(split(&mine, &mine).check().is_err());
            return;
        };
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let s = split(&server, &client);
        let guard = s.apply(&[child.id()]).unwrap();
        assert_eq!(thread_affinity().unwrap(), client);
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim();
        assert_eq!(list, server[0].to_string());
        drop(guard);
        assert_eq!(thread_affinity().unwrap(), mine);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(s.describe().unwrap().contains("cores"));
        assert!(split(&[], &[]).describe().is_none());
    }
}
