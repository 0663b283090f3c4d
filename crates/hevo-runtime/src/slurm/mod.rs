//! [`SlurmLauncher`]: trial-side processes as jobs of an existing Slurm cluster.
//!
//! Each launch becomes one Slurm job (a plain job, or an element of a job array when
//! launches arrive together: `batch.rs`) whose script (`script.rs`) runs the command with
//! exactly the [`LaunchSpec`]'s environment, its stdin from a file, its stdout and stderr
//! into the trace files, which must be on a filesystem the compute nodes share with hevo
//! (the run directory and `work_root`), and writes an exit marker when the command ends.
//!
//! ```text
//! launch(spec) ─► spool <spool>/hevo-<hash of the trace path>/ (spool.rs)
//!     ├─ its recorded job still queued or running (hevo was restarted) ─► re-attach
//!     ├─ its exit marker there (the job ended while hevo was down)     ─► read back
//!     └─ else write job.sh, stdin ─► batcher ─► sbatch [--array] ─► job id (`A` or `A_i`)
//! poll `scontrol show job` ─► COMPLETED/FAILED ─► Exit::Code / Exit::Signal (the marker's)
//!                          ─► TIMEOUT (or hevo's own timer, from when the job is first seen
//!                             running, then scancel) ─► Exit::TimedOut
//!                          ─► cancelled by hevo (its token) ─► scancel ─► Exit::Cancelled
//!                          ─► NODE_FAIL, PREEMPTED, BOOT_FAIL, cancelled from outside
//!                             ─► LaunchError::Scheduler (an infra fault: the trial is retried)
//! sbatch refuses the job as configured (batch.rs) ─► LaunchError::Refused (no retry)
//! ```
//!
//! Controller outages (slurmctld down, restarting or failing over; every Slurm command then
//! fails with `Unable to contact slurm controller`, after its own retries) fail no trial:
//! the jobs keep running on the nodes and write their exit markers, so hevo waits. A poll
//! that cannot reach the controller is tried again every [`OUTAGE_POLL`] (a job whose exit
//! marker appears meanwhile has ended, and is read back); the check for a launch's job
//! before it is submitted waits too (asking nothing would submit a job that may still run);
//! a submission that could not connect is sent again (`batch.rs`). The outage is told as
//! it begins, every 30 s while it lasts, and when it ends (`queue.rs`). A trial's timeout
//! still counts, and its `scancel` is sent again until the controller takes it; a
//! cancelled run does not wait: its launches end as cancelled and keep their spool
//! directories, so a resumed hevo re-attaches to the jobs that still run.
//!
//! What the jobs do (submitted, pending, running) is told to a reporter while they wait
//! (`queue.rs`), from the same polls.
//!
//! Before any work, [`Cluster::probe`] checks that the Slurm commands are here and reads
//! the partitions and `MaxArraySize` the configuration is checked against (`cluster.rs`).
//!
//! Resume: a launch's spool directory is named by a hash of its trace path, the same for
//! the same (candidate, task, trial) in the same run directory, so a restarted hevo finds
//! the job it submitted before it was killed. The job ran in the old hevo's working
//! directory; when it has ended, that directory replaces the new trial's (empty) one, so
//! command scorers see what the job left there. Until hevo has read a job's outcome its
//! working directory is reported by [`Launcher::reserved_workdirs`] and kept by the
//! start-up cleaning. Once hevo has read a job's outcome (or its submission failed), its
//! spool directory is removed: only the launches whose outcome is unread keep one.

mod batch;
mod cluster;
mod owned;
mod queue;
mod script;
mod spool;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::process::Command;

use batch::Batcher;
pub use cluster::{Cluster, ProbeError};
pub use owned::hevo_sets;
use queue::Queue;
pub use queue::{QueueNews, QueueReport, EVERY as QUEUE_NEWS_EVERY};
use spool::{Finished, Spool};

use crate::cancel::Cancel;
use crate::launch::{
    Exit, LaunchError, LaunchFuture, LaunchSpec, Launcher, ProcessOutcome, StreamStats,
};

/// How jobs are submitted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlurmOptions {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--cpus-per-task` (default 1).
    pub cpus: Option<u32>,
    /// `--mem` in megabytes.
    pub mem_mb: Option<u64>,
    /// Extra `#SBATCH` lines, written as given (e.g. `--qos=short`); none may set an option
    /// hevo sets itself ([`hevo_sets`]).
    pub extra: Vec<String>,
    /// A command the job's command is wrapped in (e.g. `["apptainer", "exec", "img.sif"]`).
    pub wrapper: Vec<String>,
    /// Where job scripts and stdin files go (must be visible from the compute nodes).
    pub spool: PathBuf,
    /// How often job states are polled.
    pub poll: Duration,
    /// The most launches submitted as one job array (1: every launch its own job).
    pub array_max: u32,
    /// How many elements of one array may run at once (`%N`), if limited.
    pub array_throttle: Option<u32>,
}

/// Runs every launch as a Slurm job (see the module documentation).
#[derive(Clone)]
pub struct SlurmLauncher {
    options: SlurmOptions,
    batcher: Arc<Batcher>,
    queue: Arc<Queue>,
}

impl std::fmt::Debug for SlurmLauncher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlurmLauncher")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl SlurmLauncher {
    /// A launcher submitting with `options` (a zero `poll` becomes 500 ms, a zero
    /// `array_max` 1), telling `report` what its jobs do (`queue.rs`), if given.
    pub fn new(mut options: SlurmOptions, report: Option<QueueReport>) -> SlurmLauncher {
        if options.poll.is_zero() {
            options.poll = Duration::from_millis(500);
        }
        options.array_max = options.array_max.max(1);
        let queue = Arc::new(Queue::new(report));
        SlurmLauncher {
            batcher: Arc::new(Batcher::new(options.clone(), Arc::clone(&queue))),
            options,
            queue,
        }
    }
}

impl Launcher for SlurmLauncher {
    fn launch(&self, spec: LaunchSpec) -> LaunchFuture<'_> {
        Box::pin(run_job(self, spec))
    }

    fn reserved_workdirs(&self) -> Vec<PathBuf> {
        spool::unread_workdirs(&self.options.spool)
    }
}

/// The job name of a launch: stable for the same trace path (see the module docs).
pub fn job_name(spec: &LaunchSpec) -> String {
    let key = match &spec.stdout_path {
        Some(p) => p.to_string_lossy().into_owned(),
        None => format!("{}\0{}", spec.cwd.display(), spec.argv.join("\0")),
    };
    format!(
        "hevo-{}",
        &hex::encode(Sha256::digest(key.as_bytes()))[..16]
    )
}

/// How long hevo waits before asking a controller that could not be reached again.
pub const OUTAGE_POLL: Duration = Duration::from_secs(5);

/// What a Slurm command said, if it failed because the controller could not be reached
/// (down, restarting, in standby, too slow to answer): what it asked may succeed once the
/// controller answers again.
fn unreachable(e: &LaunchError) -> Option<&str> {
    let LaunchError::Scheduler { reason, .. } = e else {
        return None;
    };
    let lower = reason.to_lowercase();
    [
        "unable to contact slurm controller",
        "in standby mode",
        "socket timed out on send/recv",
    ]
    .iter()
    .any(|s| lower.contains(s))
    .then_some(reason.as_str())
}

/// `query` (a Slurm command) until the controller answers it: while it cannot be reached,
/// the outage is told to `queue` and the query is asked again every [`OUTAGE_POLL`];
/// `Err(Stopped)` if `cancel` fires meanwhile.
async fn answered<T, F, Fut>(
    queue: &Queue,
    cancel: &Cancel,
    mut query: F,
) -> Result<Result<T, LaunchError>, Stopped>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, LaunchError>>,
{
    loop {
        let asked = tokio::time::Instant::now();
        let answer = query().await;
        let Some(said) = answer.as_ref().err().and_then(unreachable) else {
            queue.reached(asked);
            return Ok(answer);
        };
        queue.unreachable(said, asked);
        tokio::select! {
            _ = tokio::time::sleep(OUTAGE_POLL) => {}
            _ = cancel.cancelled() => return Err(Stopped),
        }
    }
}

/// A launch cancelled while it waited for the controller or for its submission.
struct Stopped;

/// The outcome of a [`Stopped`] launch: nothing ran on hevo's side. Its spool directory, if
/// any, is the caller's to keep (a job that may still run) or remove.
fn stopped() -> ProcessOutcome {
    ProcessOutcome {
        exit: Exit::Cancelled,
        wall: Duration::ZERO,
        stdout: StreamStats::default(),
        stderr: StreamStats::default(),
        stdout_tail: Vec::new(),
        pid: 0,
        cgroup: None,
        disk: None,
    }
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> LaunchError {
    move |source| LaunchError::Io { what, source }
}

async fn slurm(args: &[&str], what: &'static str) -> Result<String, LaunchError> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .await
        .map_err(|source| LaunchError::Spawn {
            program: args[0].to_string(),
            source,
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        // `scontrol show job` says "Job 12_3 not found" on stdout.
        let said = match stderr.trim() {
            "" => String::from_utf8_lossy(&out.stdout),
            _ => stderr.clone(),
        };
        let reason = format!("{what} failed: {}", said.trim());
        if what == "sbatch" && batch::refused(out.status.code(), &stderr) {
            return Err(LaunchError::Refused { reason });
        }
        return Err(LaunchError::Scheduler { job: None, reason });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The job of this launch that is still queued or running, if any: the one its spool
/// records (checked by name, as job ids restart with a new cluster), else a job of its name.
/// Waits while the controller cannot be reached ([`answered`]).
async fn alive_job(
    queue: &Queue,
    cancel: &Cancel,
    spool: &Spool,
    name: &str,
) -> Result<Option<String>, Stopped> {
    if let Some((id, job_name)) = spool.job() {
        if let Ok(info) = answered(queue, cancel, || job_state(&id)).await? {
            if info.name == job_name && !terminal(&info.state) {
                return Ok(Some(id));
            }
        }
    }
    let squeue = ["squeue", "-h", "--name", name, "-o", "%i %T"];
    let Ok(out) = answered(queue, cancel, || slurm(&squeue, "squeue")).await? else {
        return Ok(None);
    };
    Ok(out.lines().find_map(|l| {
        let (id, state) = l.split_once(' ')?;
        (!terminal(state)).then(|| id.to_string())
    }))
}

fn terminal(state: &str) -> bool {
    !matches!(
        state,
        "PENDING"
            | "CONFIGURING"
            | "RUNNING"
            | "COMPLETING"
            | "SUSPENDED"
            | "RESIZING"
            | "REQUEUED"
            | "STAGE_OUT"
            | "SIGNALING"
    )
}

/// What `scontrol show job -o` says of a job.
struct JobInfo {
    state: String,
    name: String,
    /// `ExitCode` (code, signal).
    code: i32,
    sig: i32,
}

async fn job_state(id: &str) -> Result<JobInfo, LaunchError> {
    let out = slurm(&["scontrol", "show", "job", "-o", id], "scontrol show job").await?;
    let field = |key: &str| {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(str::to_string)
    };
    let (code, sig) = field("ExitCode=")
        .and_then(|e| {
            let (c, s) = e.split_once(':')?;
            Some((c.parse().ok()?, s.parse().ok()?))
        })
        .unwrap_or((0, 0));
    Ok(JobInfo {
        state: field("JobState=").unwrap_or_else(|| "UNKNOWN".into()),
        name: field("JobName=").unwrap_or_default(),
        code,
        sig,
    })
}

/// Writes the launch's script and stdin and hands it to the batcher; returns its job id.
async fn submit(
    launcher: &SlurmLauncher,
    spec: &LaunchSpec,
    name: &str,
    spool: &Spool,
) -> Result<String, LaunchError> {
    std::fs::create_dir_all(&spool.dir).map_err(io("creating the job directory"))?;
    std::fs::write(spool.stdin(), &spec.stdin).map_err(io("writing the job's stdin"))?;
    std::fs::write(
        spool.script(),
        script::element(&launcher.options, spec, spool),
    )
    .map_err(io("writing the job script"))?;
    for p in [&spec.stdout_path, &spec.stderr_path].into_iter().flatten() {
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io("creating the trace directory"))?;
        }
    }
    spool
        .start(&spec.cwd)
        .map_err(io("writing the job's working directory"))?;
    let minutes = (spec.timeout.as_secs_f64() / 60.0).ceil().clamp(1.0, 1e6) as u64 + 1;
    launcher.batcher.submit(name, spool.clone(), minutes).await
}

/// Cancels job `id`; false if the controller could not be reached (the job still runs).
async fn scancel(queue: &Queue, id: &str) -> bool {
    let asked = tokio::time::Instant::now();
    let answer = slurm(&["scancel", id], "scancel").await;
    if let Some(said) = answer.as_ref().err().and_then(unreachable) {
        queue.unreachable(said, asked);
        return false;
    }
    queue.reached(asked);
    true
}

/// Caps a file written by Slurm at `cap` bytes and returns its stats and last `tail` bytes.
fn finish_output(path: Option<&PathBuf>, cap: u64, tail: usize) -> (StreamStats, Vec<u8>) {
    let Some(path) = path else {
        return Default::default();
    };
    let Ok(bytes) = std::fs::read(path) else {
        return Default::default();
    };
    let n = bytes.len() as u64;
    let kept = bytes[bytes.len().saturating_sub(tail)..].to_vec();
    let truncated = n > cap;
    if truncated {
        let _ = std::fs::write(path, &bytes[..cap as usize]);
    }
    (
        StreamStats {
            bytes: n,
            truncated,
        },
        kept,
    )
}

/// Moves the working directory a re-attached or read-back job ran in (the killed hevo's)
/// over the new trial's, so scorers see what the job left.
fn adopt_workdir(spool: &Spool, spec: &LaunchSpec) {
    let Some(old) = spool.cwd() else { return };
    if old != spec.cwd && old.is_dir() {
        let _ = crate::remove::remove_tree(&spec.cwd);
        if std::fs::rename(&old, &spec.cwd).is_err() {
            let _ = std::fs::create_dir_all(&spec.cwd);
        }
    }
}

/// Appends what Slurm wrote of the job itself (a failed `cd`, a cancellation notice), if
/// anything, to the stderr trace: its spool goes, and the trace is where a user looks.
fn keep_job_output(spool: &Spool, spec: &LaunchSpec, id: &str) {
    let (Some(out), Some(stderr)) = (spool.job_output(), &spec.stderr_path) else {
        return;
    };
    let Ok(text) = std::fs::read(out) else { return };
    if text.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let note = format!("\nhevo: Slurm's output of job {id} (its script, not the command):\n");
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(stderr)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(note.as_bytes())?;
            f.write_all(&text)
        });
}

/// The outcome of a launch whose job has ended: its working directory adopted, Slurm's
/// output of the job kept in the stderr trace, its outputs capped, its spool directory
/// removed (a retry submits anew).
fn finish(
    spool: &Spool,
    spec: &LaunchSpec,
    exit: Exit,
    wall: Duration,
    id: &str,
) -> ProcessOutcome {
    adopt_workdir(spool, spec);
    keep_job_output(spool, spec, id);
    spool.remove();
    let (stdout, stdout_tail) =
        finish_output(spec.stdout_path.as_ref(), spec.output_cap, spec.tail_bytes);
    let (stderr, _) = finish_output(spec.stderr_path.as_ref(), spec.output_cap, 0);
    ProcessOutcome {
        exit,
        wall,
        stdout,
        stderr,
        stdout_tail,
        pid: id.parse().unwrap_or(0),
        cgroup: None,
        disk: None,
    }
}

async fn run_job(
    launcher: &SlurmLauncher,
    spec: LaunchSpec,
) -> Result<ProcessOutcome, LaunchError> {
    if spec.argv.is_empty() {
        return Err(LaunchError::EmptyCommand);
    }
    let options = &launcher.options;
    let name = job_name(&spec);
    let spool = Spool::new(&options.spool, &name);
    let tracked = launcher.queue.track(&name);
    let cancel: Cancel = spec.cancel.clone();
    let id = match alive_job(&launcher.queue, &cancel, &spool, &name).await {
        // The controller could not say whether a job of this launch runs: its spool stays.
        Err(Stopped) => return Ok(stopped()),
        Ok(Some(id)) => id,
        Ok(None) => match spool.finished() {
            // The job ended while hevo was down: its result is in the shared run directory.
            Some(Finished { exit, wall }) => {
                let id = spool.job().map(|(id, _)| id).unwrap_or_default();
                return Ok(finish(&spool, &spec, exit, wall, &id));
            }
            None => {
                // A cancelled launch stops waiting for its submission (the batcher cancels
                // the job if it is submitted all the same).
                let submitted = tokio::select! {
                    r = submit(launcher, &spec, &name, &spool) => Ok(r),
                    _ = cancel.cancelled() => Err(Stopped),
                };
                match submitted {
                    Ok(Ok(id)) => id,
                    Ok(Err(e)) => {
                        // No job: nothing to resume (the retry, if any, writes it again).
                        spool.remove();
                        return Err(e);
                    }
                    Err(Stopped) => {
                        spool.remove();
                        return Ok(stopped());
                    }
                }
            }
        },
    };
    let mut forced: Option<Exit> = None;
    // Whether the controller took the `scancel` of a forced end.
    let mut cancel_sent = false;
    // When the job was first seen running: its time limit counts from there, not from its
    // wait in the queue.
    let mut running_since: Option<Instant> = None;
    let info = loop {
        let ended = |state: &str| JobInfo {
            state: state.into(),
            name: String::new(),
            code: 0,
            sig: 0,
        };
        let asked = tokio::time::Instant::now();
        let info = match job_state(&id).await {
            Ok(info) => {
                launcher.queue.reached(asked);
                Some(info)
            }
            // Slurm forgets ended jobs after a while (MinJobAge); the marker remains (and
            // is how a job that ends while the controller is down is seen to end).
            Err(_) if spool.finished().is_some() => Some(ended("COMPLETED")),
            Err(e) => match unreachable(&e) {
                // The job runs on without the controller: ask again later.
                Some(said) => {
                    launcher.queue.unreachable(said, asked);
                    None
                }
                // An array element hevo cancelled while it waited is forgotten at once.
                None if forced.is_some() => Some(ended("CANCELLED")),
                None => return Err(e),
            },
        };
        let heard = info.is_some();
        if let Some(info) = info {
            if terminal(&info.state) {
                break info;
            }
            tracked.set(&info.state);
            if running_since.is_none() && !queue::waiting(&info.state) {
                running_since = Some(Instant::now());
            }
        }
        if forced.is_none() {
            if cancel.is_cancelled() {
                forced = Some(Exit::Cancelled);
            } else if running_since.is_some_and(|t| t.elapsed() > spec.timeout) {
                forced = Some(Exit::TimedOut);
            }
        }
        if forced.is_some() && !cancel_sent {
            // A cancelled run does not wait for the controller: the job may still run, so
            // its spool stays for a resumed hevo to re-attach to.
            if forced == Some(Exit::Cancelled) && !heard {
                return Ok(stopped());
            }
            cancel_sent = scancel(&launcher.queue, &id).await;
            if !cancel_sent && forced == Some(Exit::Cancelled) {
                return Ok(stopped());
            }
        }
        let pause = match heard {
            true => options.poll,
            false => options.poll.max(OUTAGE_POLL),
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = cancel.cancelled(), if forced.is_none() => {}
        }
    };
    let marker = spool.finished();
    let wall = match (marker, running_since) {
        (Some(m), _) => m.wall,
        (None, Some(t)) => t.elapsed(),
        (None, None) => Duration::ZERO,
    };
    let exit = match (forced, info.state.as_str(), marker) {
        (Some(f), _, _) => f,
        (None, "COMPLETED" | "FAILED", Some(m)) => m.exit,
        (None, "COMPLETED", None) => Exit::Code(0),
        (None, "FAILED", None) if info.sig != 0 => Exit::Signal(info.sig),
        (None, "FAILED", None) => Exit::Code(info.code),
        (None, "TIMEOUT", _) => Exit::TimedOut,
        (None, "OUT_OF_MEMORY", _) => Exit::Signal(9),
        (None, other, _) => {
            // Cancelled from outside, a node failure, a preemption: not the harness's fault.
            spool.remove();
            return Err(LaunchError::Scheduler {
                job: Some(id),
                reason: format!("the job ended as {other}"),
            });
        }
    };
    Ok(finish(&spool, &spec, exit, wall, &id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_stable_per_trace_path() {
        let spec = LaunchSpec {
            argv: vec!["true".into()],
            cwd: "/w".into(),
            env: vec![],
            stdin: vec![],
            timeout: Duration::from_secs(5),
            grace: Duration::from_secs(1),
            stdout_path: Some("/t/0.stdout".into()),
            stderr_path: None,
            output_cap: 10,
            tail_bytes: 0,
            cancel: Cancel::new(),
            access: Default::default(),
        };
        let mut other = spec.clone();
        other.cwd = "/elsewhere".into();
        assert_eq!(job_name(&spec), job_name(&other));
        assert!(job_name(&spec).starts_with("hevo-"));
        other.stdout_path = Some("/t/1.stdout".into());
        assert_ne!(job_name(&spec), job_name(&other));
    }
}
