//! One cgroup per launch: every process a trial, `prepare`, scorer or agent starts
//! (`setsid` and double-forked ones included) lives in its launch's cgroup, under its
//! memory, process, CPU and IO limits, and is killed as a whole when the launch ends.
//!
//! ```text
//! <own cgroup>/hevo-<hevo pid>/          made once per hevo process (v2, and each v1 controller)
//!     └─ l<n>/                           one per launch; the child joins it before exec
//!          memory.max | memory.limit_in_bytes    TrialLimits::memory_mb
//!          pids.max                               TrialLimits::pids
//!          cpu.max | cpu.cfs_quota_us             TrialLimits::cpus
//!          io.max | blkio.throttle.*_bps_device   TrialLimits::io_mbps (the working directory's disk)
//!     end of launch: cgroup.kill (v2), or freeze + SIGKILL each + thaw (v1), then rmdir
//! ```
//!
//! Both cgroup versions are used, each for what it has: the v2 group (when this process's
//! v2 group is writable) for membership and `cgroup.kill`, and for every controller
//! delegated to it; the v1 hierarchies for the controllers v2 lacks (a hybrid machine
//! mounts memory, pids, cpu and blkio as v1 and nothing in v2). A machine where no
//! hierarchy is writable (a non-root user without delegation) has no cgroups: [`Cgroups::get`]
//! says why, and the CLI warns.
//!
//! Joining happens in the child between fork and exec (it writes `0` to each group's
//! `cgroup.procs`), so not even bwrap's first fork happens outside the group.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

mod group;
pub use group::{join_all, LaunchCgroup};
use group::{kill_by_signal, remove_when_empty};

/// Resource limits of one launch, enforced by its cgroup. `None` leaves a resource
/// unlimited (bounded only by the machine and hevo's own cgroup).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrialLimits {
    /// Memory of all its processes together, in MiB (swap included where the kernel
    /// counts it); past it the kernel's OOM killer kills inside the group.
    pub memory_mb: Option<u64>,
    /// Processes and threads at once; past it `fork` fails inside the group.
    pub pids: Option<u64>,
    /// CPU time per wall second, in CPUs (a quota, not a pinning).
    pub cpus: Option<f64>,
    /// Read and write bandwidth each, in MB/s, on the disk of its working directory.
    pub io_mbps: Option<u64>,
    /// What the folders it can write may hold, in MB, and the largest file it may write
    /// anywhere. Not a cgroup limit: hevo enforces it itself ([`crate::disk`]), with or
    /// without cgroups.
    pub disk_mb: Option<u64>,
}

/// The bytes of `mb` MB as every limit of a trial counts them (`mem_mb`, `disk_mb`, the
/// sandbox's address-space limit): 1 MB = 2^20 bytes, saturating.
pub fn mb_bytes(mb: u64) -> u64 {
    mb.saturating_mul(1 << 20)
}

impl TrialLimits {
    /// The process limit when none is configured: a fork bomb stops there.
    pub const DEFAULT_PIDS: u64 = 1024;

    /// The disk limit when none is configured, in MB (10 GiB): a harness that writes
    /// without end stops there, long before it fills a disk, and a real tool's caches and
    /// checkouts fit.
    pub const DEFAULT_DISK_MB: u64 = 10 * 1024;

    /// The most processes a trial may be given: the kernel's `PID_MAX_LIMIT` (2^22), above
    /// which `pids.max` refuses the value and every trial would fail to start.
    pub const MAX_PIDS: u64 = 1 << 22;

    /// The most CPUs a trial may be given: far above any machine's, and within the CPU
    /// quota the kernel accepts (about 175,000 CPUs at hevo's 100 ms period).
    pub const MAX_CPUS: u32 = 4096;

    /// The limits a user configured (`[executor]` keys or the matching flags), with the
    /// defaults where one is not given: MB, whole CPUs, processes, MB/s, MB.
    pub fn configured(
        mem_mb: Option<u64>,
        cpus: Option<u32>,
        pids: Option<u64>,
        io_mbps: Option<u64>,
        disk_mb: Option<u64>,
    ) -> TrialLimits {
        TrialLimits {
            memory_mb: mem_mb,
            pids: pids.or(Some(TrialLimits::DEFAULT_PIDS)),
            cpus: cpus.map(f64::from),
            io_mbps,
            disk_mb: disk_mb.or(Some(TrialLimits::DEFAULT_DISK_MB)),
        }
    }
}

impl Default for TrialLimits {
    /// Processes bounded by [`TrialLimits::DEFAULT_PIDS`] and disk by
    /// [`TrialLimits::DEFAULT_DISK_MB`]; memory, CPU and IO unlimited.
    fn default() -> TrialLimits {
        TrialLimits::configured(None, None, None, None, None)
    }
}

/// What a launch's cgroup saw: the limits that acted, and processes left behind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CgroupReport {
    /// The limits the group had.
    pub limits: TrialLimits,
    /// Processes the kernel's OOM killer killed because the group hit its memory limit.
    pub oom_kills: u64,
    /// Forks refused because the group hit its process limit.
    pub forks_refused: u64,
    /// Processes still in the group after the launch's main process ended (`setsid`
    /// children, daemons), all killed with the group.
    pub left_behind: u64,
}

impl CgroupReport {
    /// What the limits did, for a trial's cause (`None` when they did nothing), e.g.
    /// `out of memory: the kernel killed 1 process at the limit of 64 MB (mem_mb)`.
    pub fn cause(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.oom_kills > 0 {
            parts.push(format!(
                "out of memory: the kernel killed {} process(es) at the trial's limit of {} \
                 ([executor] mem_mb, --mem-mb)",
                self.oom_kills,
                self.limits
                    .memory_mb
                    .map(|mb| format!("{mb} MB"))
                    .unwrap_or_else(|| "hevo's own cgroup".into())
            ));
        }
        if self.forks_refused > 0 {
            parts.push(format!(
                "{} fork(s) refused at the trial's limit of {} processes ([executor] pids, --pids)",
                self.forks_refused,
                self.limits
                    .pids
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "?".into())
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// The cgroup hierarchies this process makes launch groups in (probed once per process).
#[derive(Debug)]
pub struct Cgroups {
    /// The v2 parent `<own group>/hevo-<pid>`, if writable.
    v2: Option<PathBuf>,
    /// The controllers enabled for the v2 parent's children.
    v2_controllers: Vec<String>,
    /// v1 controller name (`memory`, `pids`, `cpu`, `blkio`, `freezer`) and its parent.
    v1: Vec<(String, PathBuf)>,
}

/// The controllers hevo uses, by their v2 names (`io` is `blkio` in v1).
const RESOURCES: [&str; 4] = ["memory", "pids", "cpu", "io"];

impl Cgroups {
    /// The hierarchies of this process, or why it can make no cgroup. `HEVO_CGROUP=off`
    /// turns them off on purpose.
    pub fn get() -> Result<&'static Cgroups, &'static str> {
        static PROBED: OnceLock<Result<Cgroups, String>> = OnceLock::new();
        PROBED
            .get_or_init(|| {
                if std::env::var("HEVO_CGROUP").as_deref() == Ok("off") {
                    return Err("HEVO_CGROUP=off".into());
                }
                Cgroups::probe(
                    Path::new("/proc/self"),
                    &format!("hevo-{}", std::process::id()),
                )
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// Finds the mounted hierarchies and this process's group in each (from `proc`'s
    /// `mountinfo` and `cgroup`), and makes `name` under each writable one.
    fn probe(proc_self: &Path, name: &str) -> Result<Cgroups, String> {
        let mountinfo = fs::read_to_string(proc_self.join("mountinfo"))
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let membership = fs::read_to_string(proc_self.join("cgroup"))
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let own = |key: &str| -> Option<String> {
            membership.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
                let hit = if key.is_empty() {
                    ctrls.is_empty()
                } else {
                    ctrls.split(',').any(|c| c == key)
                };
                hit.then(|| path.to_string())
            })
        };
        let mut v2 = None;
        let mut v2_controllers = Vec::new();
        let mut v1 = Vec::new();
        let mut refused = Vec::new();
        for line in mountinfo.lines() {
            let Some((pre, post)) = line.split_once(" - ") else {
                continue;
            };
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            if pre.len() < 5 || post.len() < 3 {
                continue;
            }
            let (root, mount) = (pre[3], Path::new(pre[4]));
            match post[0] {
                "cgroup2" if v2.is_none() => {
                    let Some(path) = own("") else { continue };
                    let base = group_dir(mount, root, &path);
                    match make_parent(&base, name) {
                        Ok(dir) => {
                            let delegated = fs::read_to_string(base.join("cgroup.subtree_control"))
                                .unwrap_or_default();
                            for c in delegated.split_whitespace() {
                                if RESOURCES.contains(&c)
                                    && fs::write(
                                        dir.join("cgroup.subtree_control"),
                                        format!("+{c}"),
                                    )
                                    .is_ok()
                                {
                                    v2_controllers.push(c.to_string());
                                }
                            }
                            v2 = Some(dir);
                        }
                        Err(e) => refused.push(format!("{}: {e}", base.display())),
                    }
                }
                "cgroup" => {
                    for ctrl in ["memory", "pids", "cpu", "blkio", "freezer"] {
                        if !post[2].split(',').any(|o| o == ctrl)
                            || v1.iter().any(|(c, _)| c == ctrl)
                        {
                            continue;
                        }
                        let Some(path) = own(ctrl) else { continue };
                        let base = group_dir(mount, root, &path);
                        match make_parent(&base, name) {
                            Ok(dir) => v1.push((ctrl.to_string(), dir)),
                            Err(e) => refused.push(format!("{}: {e}", base.display())),
                        }
                    }
                }
                _ => {}
            }
        }
        if v2.is_none() && v1.is_empty() {
            return Err(match refused.len() {
                0 => "no cgroup hierarchy is mounted".into(),
                1 => format!(
                    "no cgroup hierarchy is writable by this user: {}",
                    refused[0]
                ),
                n => format!(
                    "no cgroup hierarchy is writable by this user: {} (and {} more)",
                    refused[0],
                    n - 1
                ),
            });
        }
        let cgroups = Cgroups {
            v2,
            v2_controllers,
            v1,
        };
        cgroups.remove_stale();
        Ok(cgroups)
    }

    /// How the groups are made, for the user: e.g. `v2 (kill) + v1 (memory, pids, cpu, blkio)`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.v2.is_some() {
            let mut what = vec!["kill".to_string()];
            what.extend(self.v2_controllers.iter().cloned());
            parts.push(format!("v2 ({})", what.join(", ")));
        }
        let v1: Vec<&str> = self
            .v1
            .iter()
            .filter(|(c, _)| c != "freezer" || self.v2.is_none())
            .map(|(c, _)| c.as_str())
            .collect();
        if !v1.is_empty() {
            parts.push(format!("v1 ({})", v1.join(", ")));
        }
        parts.join(" + ")
    }

    /// The resources `limits` asks for that no hierarchy here can limit (e.g. `io` where
    /// neither v2 nor v1 has it).
    pub fn unsupported(&self, limits: &TrialLimits) -> Vec<&'static str> {
        let asked = [
            ("memory", limits.memory_mb.is_some()),
            ("pids", limits.pids.is_some()),
            ("cpu", limits.cpus.is_some()),
            ("io", limits.io_mbps.is_some()),
        ];
        asked
            .into_iter()
            .filter(|(r, on)| *on && self.place(r).is_none())
            .map(|(r, _)| r)
            .collect()
    }

    /// Where resource `r` (v2 name) is limited: in v2, or in its v1 hierarchy.
    fn place(&self, r: &str) -> Option<(bool, &Path)> {
        if let Some(dir) = &self.v2 {
            if self.v2_controllers.iter().any(|c| c == r) {
                return Some((true, dir));
            }
        }
        let v1 = if r == "io" { "blkio" } else { r };
        self.v1
            .iter()
            .find(|(c, _)| c == v1)
            .map(|(_, d)| (false, d.as_path()))
    }

    /// Makes the group of one launch, with `limits` written; `cwd` names the disk an IO
    /// limit applies to. The returned group is empty until a child joins it.
    pub fn make(&'static self, limits: &TrialLimits, cwd: &Path) -> io::Result<LaunchCgroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!("l{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let mut group = LaunchCgroup {
            limits: *limits,
            dirs: Vec::new(),
            procs: Vec::new(),
            v2: None,
            freezer: None,
            memory: None,
            pids: None,
        };
        let join = |parent: &Path, group: &mut LaunchCgroup| -> io::Result<PathBuf> {
            let dir = parent.join(&name);
            if let Some(i) = group.dirs.iter().position(|d| d == &dir) {
                return Ok(group.dirs[i].clone());
            }
            fs::create_dir(&dir).map_err(|e| annotate(e, "making", &dir))?;
            group.dirs.push(dir.clone());
            let procs = fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
                .map_err(|e| annotate(e, "opening", &dir.join("cgroup.procs")))?;
            group.procs.push(procs);
            Ok(dir)
        };
        if let Some(parent) = &self.v2 {
            group.v2 = Some(join(parent, &mut group)?);
        } else if let Some((_, parent)) = self.v1.iter().find(|(c, _)| c == "freezer") {
            group.freezer = Some(join(parent, &mut group)?);
        }
        // Every controller present is joined (its usage is then counted per launch), limits
        // are written only where asked.
        for r in RESOURCES {
            let Some((is_v2, parent)) = self.place(r) else {
                continue;
            };
            let dir = join(parent, &mut group)?;
            match r {
                "memory" => {
                    group.memory = Some((is_v2, dir.clone()));
                    if let Some(mb) = limits.memory_mb {
                        let bytes = mb_bytes(mb).to_string();
                        if is_v2 {
                            write(&dir, "memory.max", &bytes)?;
                            let _ = fs::write(dir.join("memory.swap.max"), "0");
                        } else {
                            write(&dir, "memory.limit_in_bytes", &bytes)?;
                            let _ = fs::write(dir.join("memory.memsw.limit_in_bytes"), &bytes);
                        }
                    }
                }
                "pids" => {
                    group.pids = Some(dir.clone());
                    if let Some(n) = limits.pids {
                        write(&dir, "pids.max", &n.to_string())?;
                    }
                }
                "cpu" => {
                    if let Some(cpus) = limits.cpus {
                        let quota = ((cpus * 100_000.0).round() as u64).max(1_000);
                        if is_v2 {
                            write(&dir, "cpu.max", &format!("{quota} 100000"))?;
                        } else {
                            write(&dir, "cpu.cfs_period_us", "100000")?;
                            write(&dir, "cpu.cfs_quota_us", &quota.to_string())?;
                        }
                    }
                }
                _ => {
                    if let (Some(mbps), Some(dev)) = (limits.io_mbps, disk_of(cwd)) {
                        let bps = mbps.saturating_mul(1_000_000);
                        if is_v2 {
                            write(&dir, "io.max", &format!("{dev} rbps={bps} wbps={bps}"))?;
                        } else {
                            write(
                                &dir,
                                "blkio.throttle.read_bps_device",
                                &format!("{dev} {bps}"),
                            )?;
                            write(
                                &dir,
                                "blkio.throttle.write_bps_device",
                                &format!("{dev} {bps}"),
                            )?;
                        }
                    }
                }
            }
        }
        Ok(group)
    }

    /// Removes the parents of hevo processes that no longer exist (a killed hevo cannot
    /// clean up), killing anything still inside them.
    fn remove_stale(&self) {
        let parents = self.v2.iter().chain(self.v1.iter().map(|(_, d)| d));
        for own in parents {
            let Some(base) = own.parent() else { continue };
            let Ok(entries) = fs::read_dir(base) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("hevo-")) else {
                    continue;
                };
                let Ok(pid) = pid.parse::<i32>() else {
                    continue;
                };
                if Path::new(&format!("/proc/{pid}")).exists() {
                    continue;
                }
                let Ok(children) = fs::read_dir(e.path()) else {
                    continue;
                };
                for c in children.flatten().filter(|c| c.path().is_dir()) {
                    kill_by_signal(&c.path());
                    let _ = remove_when_empty(&c.path(), Duration::from_secs(1));
                }
                let _ = fs::remove_dir(e.path());
            }
        }
    }
}

/// `<mount>/<path relative to the mount's root>`: where a group of the mounted hierarchy is.
fn group_dir(mount: &Path, root: &str, path: &str) -> PathBuf {
    let rel = if root == "/" {
        path
    } else {
        path.strip_prefix(root).unwrap_or("")
    };
    let rel = rel.trim_start_matches('/');
    if rel.is_empty() {
        mount.to_path_buf()
    } else {
        mount.join(rel)
    }
}

/// Makes `base/name` (or takes it, when a previous hevo with this pid left it).
fn make_parent(base: &Path, name: &str) -> io::Result<PathBuf> {
    let dir = base.join(name);
    match fs::create_dir(&dir) {
        Ok(()) => Ok(dir),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(dir),
        Err(e) => Err(e),
    }
}

fn write(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    fs::write(dir.join(file), value).map_err(|e| annotate(e, "writing", &dir.join(file)))
}

fn annotate(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} `{}`: {e}", path.display()))
}

/// `MAJOR:MINOR` of the block device holding `path`, if it is on one (not tmpfs or overlay).
fn disk_of(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = fs::metadata(path).ok()?.dev();
    // Linux's `dev_t` layout (glibc's `gnu_dev_major` / `gnu_dev_minor`).
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (major != 0).then(|| format!("{major}:{minor}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_in_mb_counts_mebibytes_and_saturates() {
        assert_eq!(mb_bytes(64), 64 * 1024 * 1024);
        assert_eq!(mb_bytes(0), 0);
        // A limit too large to count in bytes is no limit, not a small one after a wrap.
        assert_eq!(mb_bytes(u64::MAX / 1000), u64::MAX);
    }

    #[test]
    fn group_dirs_follow_the_mount_root() {
        let m = Path::new("/sys/fs/cgroup/memory");
        assert_eq!(group_dir(m, "/", "/a/b"), m.join("a/b"));
        assert_eq!(group_dir(m, "/", "/"), m.to_path_buf());
        assert_eq!(group_dir(m, "/a", "/a/b"), m.join("b"));
    }

    #[test]
    fn a_machine_without_cgroups_says_so() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("mountinfo"),
            "22 27 0:21 / /proc rw - proc proc rw\n",
        )
        .unwrap();
        fs::write(dir.path().join("cgroup"), "0::/\n").unwrap();
        let err = Cgroups::probe(dir.path(), "hevo-test").unwrap_err();
        assert_eq!(err, "no cgroup hierarchy is mounted");
    }
}
