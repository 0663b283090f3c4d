//! The cgroup of one launch: its processes, its end (kill the whole group, remove it) and
//! what its limits did. [`super::Cgroups::make`] makes it; the layout is in [`super`].

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{CgroupReport, TrialLimits};

/// The cgroup of one launch (the layout is in [`super`]). Dropping it kills whatever is
/// left inside and removes it.
#[derive(Debug)]
pub struct LaunchCgroup {
    /// The limits written.
    pub(super) limits: TrialLimits,
    /// Every directory of this launch (one per hierarchy).
    pub(super) dirs: Vec<PathBuf>,
    /// Their `cgroup.procs`, open for the child to write `0` into between fork and exec.
    pub(super) procs: Vec<fs::File>,
    /// The v2 group: `cgroup.kill`.
    pub(super) v2: Option<PathBuf>,
    /// Without v2, the v1 freezer group (freeze, kill each, thaw).
    pub(super) freezer: Option<PathBuf>,
    /// The memory group (is it v2?), for OOM kills.
    pub(super) memory: Option<(bool, PathBuf)>,
    /// The pids group, for refused forks.
    pub(super) pids: Option<PathBuf>,
}

impl LaunchCgroup {
    /// The open `cgroup.procs` descriptors the child writes `0` into before exec
    /// ([`join_all`]).
    pub fn procs_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// The processes in the group now.
    pub fn members(&self) -> Vec<i32> {
        let Some(dir) = self.dirs.first() else {
            return Vec::new();
        };
        read_pids(dir)
    }

    /// Kills every process in the group (all at once where the kernel can) and waits, at
    /// most `wait`, until the group is empty. Returns how many processes there were.
    pub fn kill(&self, wait: Duration) -> u64 {
        let before = self.members().len() as u64;
        if before == 0 {
            return 0;
        }
        if let Some(dir) = &self.v2 {
            if fs::write(dir.join("cgroup.kill"), "1").is_err() {
                kill_by_signal(dir);
            }
        } else if let Some(dir) = &self.freezer {
            let frozen = fs::write(dir.join("freezer.state"), "FROZEN").is_ok();
            if frozen {
                let deadline = Instant::now() + Duration::from_secs(1);
                while Instant::now() < deadline
                    && fs::read_to_string(dir.join("freezer.state"))
                        .ok()
                        .as_deref()
                        .map(str::trim)
                        != Some("FROZEN")
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            kill_by_signal(dir);
            let _ = fs::write(dir.join("freezer.state"), "THAWED");
        } else if let Some(dir) = self.dirs.first() {
            kill_by_signal(dir);
        }
        let deadline = Instant::now() + wait;
        while !self.members().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            if let Some(dir) = self.dirs.first() {
                kill_by_signal(dir);
            }
        }
        before
    }

    /// What the group's limits did so far.
    pub fn report(&self) -> CgroupReport {
        let oom_kills = match &self.memory {
            Some((true, dir)) => counter(&dir.join("memory.events"), "oom_kill"),
            Some((false, dir)) => counter(&dir.join("memory.oom_control"), "oom_kill"),
            None => 0,
        };
        let forks_refused = self
            .pids
            .as_ref()
            .map(|d| counter(&d.join("pids.events"), "max"))
            .unwrap_or(0);
        CgroupReport {
            limits: self.limits,
            oom_kills,
            forks_refused,
            left_behind: 0,
        }
    }
}

impl Drop for LaunchCgroup {
    fn drop(&mut self) {
        self.kill(Duration::from_secs(2));
        self.procs.clear();
        for dir in &self.dirs {
            if let Err(e) = remove_when_empty(dir, Duration::from_secs(1)) {
                tracing::warn!("cannot remove the launch cgroup `{}`: {e}", dir.display());
            }
        }
    }
}

/// Called in the child between fork and exec: joins every group by writing `0` (this
/// process) into each `cgroup.procs`. Allocates nothing (async-signal-safe).
pub fn join_all(fds: &[RawFd]) -> io::Result<()> {
    for &fd in fds {
        // SAFETY: the descriptors were opened by the parent and stay open until after
        // the spawn returns; the child only writes into them.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        nix::unistd::write(fd, b"0").map_err(io::Error::from)?;
    }
    Ok(())
}

pub(super) fn read_pids(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// SIGKILL to every process listed in the group.
pub(super) fn kill_by_signal(dir: &Path) {
    for pid in read_pids(dir) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Removes an empty group, waiting at most `wait` for its last processes to be reaped.
pub(super) fn remove_when_empty(dir: &Path, wait: Duration) -> io::Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// The value of `key` in a flat-keyed file (`memory.events`, `pids.events`).
pub(super) fn counter(file: &Path, key: &str) -> u64 {
    fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("memory.events");
        fs::write(&f, "low 0\nhigh 0\nmax 3\noom 2\noom_kill 1\n").unwrap();
        assert_eq!(counter(&f, "oom_kill"), 1);
        assert_eq!(counter(&f, "max"), 3);
        assert_eq!(counter(&f, "absent"), 0);
    }
}
