//! The one place where hevo starts a trial-side process (harness, prepare, scorer command).
//!
//! Every process goes through a [`Launcher`], so a sandbox can later wrap all of them by
//! providing another implementation. [`LocalLauncher`] runs the command directly:
//!
//! ```text
//! spawn (own session and process group, no terminal, cleared env + given vars, stdin piped)
//!   ├─ stdin writer: input bytes, then close
//!   ├─ stdout/stderr readers: stream to trace files up to the cap, drain past it,
//!   │                         keep a bounded tail of stdout
//!   └─ wait ──exit──────────────► SIGKILL leftover group members ─► outcome
//!          └─timeout/cancel──► SIGTERM group ─ grace ─► SIGKILL group ─► outcome
//! ```
//!
//! With [`TrialLimits`], the child joins a cgroup of its own before exec
//! ([`crate::cgroup`]); when it ends, whatever is left in that cgroup (`setsid` children,
//! daemons) is killed with it, and the outcome says what its limits did. Its disk limit
//! ([`crate::disk`]) holds with or without a cgroup: a file-size limit set before exec, and
//! a watch on its writable folders that kills the group (SIGKILL, no grace) past the limit.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::cancel::{Cancel, CancelReason};
use crate::cgroup::{CgroupReport, Cgroups, TrialLimits};
use crate::disk::DiskReport;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// What to run and under which limits.
#[derive(Clone, Debug)]
pub struct LaunchSpec {
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The complete environment (nothing else is inherited).
    pub env: Vec<(String, String)>,
    /// Bytes written to stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// Wall-clock limit; past it the process group is terminated.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL of the group.
    pub grace: Duration,
    /// Where stdout is streamed (up to `output_cap` bytes), if anywhere. The file is created
    /// only when the stream is not empty.
    pub stdout_path: Option<PathBuf>,
    /// Where stderr is streamed (up to `output_cap` bytes), like `stdout_path`.
    pub stderr_path: Option<PathBuf>,
    /// Maximum bytes kept per stream on disk; the rest is read and dropped.
    pub output_cap: u64,
    /// How many bytes at the end of stdout are kept in memory (to find the answer line).
    pub tail_bytes: usize,
    /// When this turns `true` the process group is terminated as on a timeout.
    pub cancel: Cancel,
    /// What a sandboxing launcher lets the process see besides the system (ignored by
    /// [`LocalLauncher`]).
    pub access: Access,
}

/// The file-system view a sandboxing launcher gives a process: the system directories
/// read-only, plus exactly these paths (each at its own path), and nothing else.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Whether the working directory is writable (a trial's is; an agent's archive is not).
    pub cwd_read_only: bool,
    /// Paths visible read-only (a harness directory, a `prepare` state directory).
    pub read_only: Vec<PathBuf>,
    /// Paths visible and writable besides the working directory (an agent's `pending/`).
    pub writable: Vec<PathBuf>,
    /// Paths that must stay invisible even when they lie inside a visible one (the run
    /// directory and the suite, should a harness directory contain them).
    pub hidden: Vec<PathBuf>,
    /// A private, empty, writable `/tmp` that vanishes with the process (agent CLIs write
    /// there whatever `TMPDIR` says; trials get none, their `TMPDIR` is their working
    /// directory).
    pub private_tmp: bool,
}

/// How a launched process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It was killed by this signal (not by us).
    Signal(i32),
    /// It ran past its timeout and its group was killed.
    TimedOut,
    /// The run was cancelled and its group was killed.
    Cancelled,
}

impl std::fmt::Display for Exit {
    /// How a cause says it: `exited with code 3`, `killed by signal 9`, `timed out`,
    /// `cancelled`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exited with code {c}"),
            Exit::Signal(s) => write!(f, "killed by signal {s}"),
            Exit::TimedOut => write!(f, "timed out"),
            Exit::Cancelled => write!(f, "cancelled"),
        }
    }
}

/// Byte counts of one output stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Bytes the process wrote.
    pub bytes: u64,
    /// Whether the file on disk was cut at the cap.
    pub truncated: bool,
}

/// The result of a launched process.
#[derive(Clone, Debug)]
pub struct ProcessOutcome {
    /// How it ended.
    pub exit: Exit,
    /// Wall time from spawn to exit.
    pub wall: Duration,
    /// stdout byte counts.
    pub stdout: StreamStats,
    /// stderr byte counts.
    pub stderr: StreamStats,
    /// The last `tail_bytes` bytes of stdout.
    pub stdout_tail: Vec<u8>,
    /// The process id (also its process group id).
    pub pid: u32,
    /// What its cgroup saw, when it ran in one.
    pub cgroup: Option<CgroupReport>,
    /// What its disk limit saw, when it had one.
    pub disk: Option<DiskReport>,
}

impl ProcessOutcome {
    /// What its limits did, for a cause (`None` when they did nothing): an OOM kill, a
    /// refused fork, a disk limit passed. The real reason behind a `killed by signal 9`.
    pub fn limits_cause(&self) -> Option<String> {
        let parts: Vec<String> = [
            self.cgroup.as_ref().and_then(CgroupReport::cause),
            self.disk.as_ref().and_then(DiskReport::cause),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Why a process could not be run at all (an infrastructure fault, not the harness's).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The command is empty.
    #[error("empty command")]
    EmptyCommand,
    /// The process could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A cluster scheduler lost or refused the job (a node failure, a preemption, a job
    /// cancelled from outside, `sbatch` failing): an infrastructure fault, retried.
    #[error("the scheduler{}: {reason}", job.as_deref().map(|j| format!(" (job {j})")).unwrap_or_default())]
    Scheduler {
        /// The job id, if one was assigned.
        job: Option<String>,
        /// What happened.
        reason: String,
    },
    /// The scheduler refused the job as it is configured (an option, partition, account or
    /// QOS it does not accept): no retry cures it, so the trial is not retried.
    #[error("the scheduler refused the job: {reason}")]
    Refused {
        /// What the scheduler said.
        reason: String,
    },
    /// Waiting for the process or writing its output failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl LaunchError {
    /// Whether retrying the same launch cannot help ([`LaunchError::Refused`]).
    pub fn is_permanent(&self) -> bool {
        matches!(self, LaunchError::Refused { .. })
    }
}

/// A boxed future returned by [`Launcher::launch`].
pub type LaunchFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ProcessOutcome, LaunchError>> + Send + 'a>>;

/// Starts trial-side processes; the seam a sandbox implementation plugs into.
pub trait Launcher: Send + Sync {
    /// Runs `spec` to completion (or until its timeout or cancellation).
    fn launch(&self, spec: LaunchSpec) -> LaunchFuture<'_>;

    /// How processes are isolated, as reported to the user (`eval --json`'s `sandbox`).
    fn isolation(&self) -> String {
        "none".into()
    }

    /// Working directories of processes that outlive a killed hevo (Slurm jobs) and whose
    /// outcome is still to be read: the start-up cleaning of leftovers keeps them.
    fn reserved_workdirs(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}

/// Runs processes directly on this machine, each in its own process group, and with
/// limits, each in its own cgroup.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalLauncher {
    /// The limits of every launch's cgroup; `None`: no cgroup.
    pub limits: Option<TrialLimits>,
}

impl Launcher for LocalLauncher {
    fn launch(&self, spec: LaunchSpec) -> LaunchFuture<'_> {
        Box::pin(run_local(spec, self.limits, crate::stop::Stop::Group))
    }
}

/// Process groups of the processes [`LocalLauncher`] is running right now.
static RUNNING_GROUPS: std::sync::Mutex<std::collections::BTreeSet<i32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Sends SIGKILL to the process group of every process [`LocalLauncher`] is running (the
/// second Ctrl-C: stop now, without the grace period). Returns how many groups were hit.
pub fn kill_all_running() -> usize {
    let groups = RUNNING_GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    for &g in groups.iter() {
        let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
    }
    groups.len()
}

fn track_group(pgid: i32, running: bool) {
    let mut groups = RUNNING_GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    if running {
        groups.insert(pgid);
    } else {
        groups.remove(&pgid);
    }
}

/// How long readers may keep draining after the process group is gone (a member that left
/// the group can hold a pipe open forever).
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// Runs `spec`; with `limits` (and a cgroup hierarchy here, [`Cgroups::get`]) inside a
/// cgroup of its own that is killed as a whole when the process ends.
pub(crate) async fn run_local(
    spec: LaunchSpec,
    limits: Option<TrialLimits>,
    stop: crate::stop::Stop,
) -> Result<ProcessOutcome, LaunchError> {
    let Some(program) = spec.argv.first() else {
        return Err(LaunchError::EmptyCommand);
    };
    let group = match (limits, Cgroups::get()) {
        (Some(limits), Ok(cgroups)) => Some(cgroups.make(&limits, &spec.cwd).map_err(
            |source| LaunchError::Io {
                what: "making the launch's cgroup",
                source,
            },
        )?),
        _ => None,
    };
    // A bare program name is looked up on the launch's own PATH here, so which program runs
    // never depends on hevo's PATH or on how std searches a cleared environment.
    let resolved = resolve_program(program, &spec.env);
    let mut cmd = tokio::process::Command::new(&resolved);
    cmd.args(&spec.argv[1..])
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let disk_limit = limits.and_then(|l| l.disk_mb);
    let file_size = disk_limit.map(crate::cgroup::mb_bytes);
    let fds = group.as_ref().map(|g| g.procs_fds());
    // SAFETY: `setsid` and `limit_file_size` are one system call each; `join_all` only
    // writes to descriptors that stay open until the spawn returns. None allocates.
    unsafe {
        cmd.pre_exec(move || {
            // A session of its own, so also a process group of its own (the group the
            // timeout and the cancel kill), and no controlling terminal: nothing the launch
            // starts can open hevo's terminal (`/dev/tty`) to push keystrokes into the
            // user's shell (`TIOCSTI`) or write past hevo's output.
            nix::unistd::setsid()?;
            if let Some(bytes) = file_size {
                crate::disk::limit_file_size(bytes)?;
            }
            match &fds {
                Some(fds) => crate::cgroup::join_all(fds),
                None => Ok(()),
            }
        });
    }
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        program: program.clone(),
        source,
    })?;
    let pid = child.id().unwrap_or(0);
    let pgid = Pid::from_raw(pid as i32);
    track_group(pid as i32, true);

    let stdin = child.stdin.take();
    let input = spec.stdin;
    let writer = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            // A harness that exits without reading its input is not our failure.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        }
    });
    let cap = spec.output_cap;
    let out_reader = child
        .stdout
        .take()
        .map(|s| tokio::spawn(capture(s, spec.stdout_path.clone(), cap, spec.tail_bytes)));
    let err_reader = child
        .stderr
        .take()
        .map(|s| tokio::spawn(capture(s, spec.stderr_path.clone(), cap, 0)));

    let cancel = spec.cancel.clone();
    let cancelled = cancel.cancelled();
    let dirs = crate::disk::writable_dirs(&spec.cwd, &spec.access);
    let watch = async {
        match (disk_limit, dirs.is_empty()) {
            (Some(mb), false) => {
                crate::disk::over_limit(dirs.clone(), crate::cgroup::mb_bytes(mb)).await
            }
            _ => std::future::pending().await,
        }
    };
    let mut forced: Option<Exit> = None;
    let mut over_disk: Option<crate::disk::Usage> = None;
    let status = tokio::select! {
        status = child.wait() => Some(status),
        _ = tokio::time::sleep(spec.timeout) => { forced = Some(Exit::TimedOut); None }
        _ = cancelled => { forced = Some(Exit::Cancelled); None }
        used = watch => { over_disk = Some(used); None }
    };
    let status = match status {
        Some(status) => status,
        // Past its disk limit it dies at once: a grace period is more time to write.
        None if over_disk.is_some() => {
            let _ = killpg(pgid, Signal::SIGKILL);
            child.wait().await
        }
        None => {
            crate::stop::ask(pid, stop);
            // The grace period ends early on a second signal (`CancelReason::Kill`).
            let graceful = tokio::select! {
                r = tokio::time::timeout(spec.grace, child.wait()) => r.ok(),
                _ = cancel.reached(CancelReason::Kill) => None,
            };
            match graceful {
                Some(status) => status,
                None => {
                    let _ = killpg(pgid, Signal::SIGKILL);
                    child.wait().await
                }
            }
        }
    };
    let wall = start.elapsed();
    // Leftover members of the group (background jobs) die with the trial, and so does
    // everything left in its cgroup, whatever process group or session it moved to.
    let _ = killpg(pgid, Signal::SIGKILL);
    let cgroup = match group {
        Some(group) => tokio::task::spawn_blocking(move || {
            let left_behind = group.kill(Duration::from_secs(2));
            CgroupReport {
                left_behind,
                ..group.report()
            }
        })
        .await
        .ok(),
        None => None,
    };
    track_group(pid as i32, false);
    let status = status.map_err(|source| LaunchError::Io {
        what: "waiting for the process",
        source,
    })?;
    writer.abort();
    let stdout = finish_reader(out_reader).await;
    let stderr = finish_reader(err_reader).await;
    let disk = match disk_limit {
        // Measured again once the group is gone.
        Some(limit_mb) => {
            let at_end = tokio::task::spawn_blocking(move || crate::disk::usage(&dirs))
                .await
                .unwrap_or_default();
            Some(DiskReport::new(limit_mb, over_disk, at_end))
        }
        None => None,
    };
    let exit = match forced {
        Some(f) => f,
        None => {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => Exit::Code(code),
                (None, Some(sig)) => Exit::Signal(sig),
                (None, None) => Exit::Code(-1),
            }
        }
    };
    Ok(ProcessOutcome {
        exit,
        wall,
        stdout: stdout.0,
        stderr: stderr.0,
        stdout_tail: stdout.1,
        pid,
        cgroup,
        disk,
    })
}

/// Finds a bare program name on the child's `PATH`; anything else is returned unchanged.
pub fn resolve_program(program: &str, env: &[(String, String)]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return PathBuf::from(program);
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("/usr/local/bin:/usr/bin:/bin");
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(program);
        if let Ok(meta) = std::fs::metadata(&candidate) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return candidate;
            }
        }
    }
    PathBuf::from(program)
}

async fn finish_reader(
    reader: Option<tokio::task::JoinHandle<(StreamStats, Vec<u8>)>>,
) -> (StreamStats, Vec<u8>) {
    let Some(mut reader) = reader else {
        return Default::default();
    };
    match tokio::time::timeout(DRAIN_LIMIT, &mut reader).await {
        Ok(Ok(r)) => r,
        _ => {
            reader.abort();
            (
                StreamStats {
                    bytes: 0,
                    truncated: true,
                },
                Vec::new(),
            )
        }
    }
}

/// Streams `src` into the file at `path` (created on the first byte) up to `cap` bytes,
/// drains the rest, keeps the last `tail` bytes.
async fn capture(
    mut src: impl AsyncRead + Unpin,
    mut path: Option<PathBuf>,
    cap: u64,
    tail: usize,
) -> (StreamStats, Vec<u8>) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut stats = StreamStats::default();
    let mut kept: Vec<u8> = Vec::new();
    let mut file: Option<std::fs::File> = None;
    loop {
        let n = match src.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if let Some(p) = path.take() {
            // Creating files costs more than the rest of a trial's bookkeeping on some file
            // systems, so empty streams leave no file.
            file = std::fs::File::create(p).ok();
        }
        if let Some(f) = file.as_mut() {
            let room = cap.saturating_sub(stats.bytes) as usize;
            let take = room.min(n);
            if take > 0 && f.write_all(&chunk[..take]).is_err() {
                file = None;
            }
            if take < n {
                stats.truncated = true;
            }
        }
        stats.bytes += n as u64;
        if tail > 0 {
            kept.extend_from_slice(chunk);
            if kept.len() > 2 * tail {
                kept.drain(..kept.len() - tail);
            }
        }
    }
    if kept.len() > tail {
        kept.drain(..kept.len() - tail);
    }
    (stats, kept)
}

/// The variables every trial-side process inherits from hevo's own environment: `PATH`,
/// `LANG`, `LC_*`, `TZ` and `TMPDIR`; `HOME` is set to `home`. Nothing else passes
/// (in particular no provider key).
pub fn base_env(home: &Path) -> Vec<(String, String)> {
    let mut env = Vec::new();
    let mut has_path = false;
    for (k, v) in std::env::vars_os() {
        let (Some(k), Some(v)) = (k.to_str(), v.to_str()) else {
            continue;
        };
        if k == "PATH" || k == "LANG" || k == "TZ" || k == "TMPDIR" || k.starts_with("LC_") {
            has_path |= k == "PATH";
            env.push((k.to_string(), v.to_string()));
        }
    }
    if !has_path {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    env.push(("HOME".into(), home.to_string_lossy().into_owned()));
    env
}

/// `prefix` with `.suffix` appended to its file name (`traces/t1/0` -> `traces/t1/0.stdout`).
pub fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push(".");
    s.push(suffix);
    PathBuf::from(s)
}
