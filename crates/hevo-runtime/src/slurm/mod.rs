//! [`SlurmLauncher`]: trial-side processes as jobs of an existing Slurm cluster.
//!
//! Each launch becomes one `sbatch` job whose script runs the command with exactly the
//! [`LaunchSpec`]'s environment (`--export=NONE` and `env -i`), its stdin from a file, and
//! its stdout and stderr written by Slurm straight into the trace files, which must be on a
//! filesystem the compute nodes share with hevo (the run directory and `work_root`).
//!
//! ```text
//! launch(spec) ─► job name hevo-<hash of the trace path>
//!     ├─ a job of that name still queued or running (hevo was restarted) ─► re-attach
//!     └─ else write <spool>/<name>/{job.sh, stdin} ─► sbatch --parsable ─► job id
//! poll `scontrol show job` ─► COMPLETED/FAILED ─► Exit::Code / Exit::Signal
//!                          ─► TIMEOUT (or hevo's own timer, then scancel) ─► Exit::TimedOut
//!                          ─► cancelled by hevo (its token) ─► scancel ─► Exit::Cancelled
//!                          ─► NODE_FAIL, PREEMPTED, BOOT_FAIL, cancelled from outside
//!                             ─► LaunchError::Scheduler (an infra fault: the trial is retried)
//! ```
//!
//! Resume: a trial's job name is a hash of its trace path, which is the same for the same
//! (candidate, task, trial) in the same run directory, so a restarted hevo finds the job it
//! submitted before it was killed and waits for it instead of submitting a duplicate.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::process::Command;

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
    /// Extra `#SBATCH` lines, written as given (e.g. `--qos=short`).
    pub extra: Vec<String>,
    /// A command the job's command is wrapped in (e.g. `["apptainer", "exec", "img.sif"]`).
    pub wrapper: Vec<String>,
    /// Where job scripts and stdin files go (must be visible from the compute nodes).
    pub spool: PathBuf,
    /// How often job states are polled.
    pub poll: Duration,
}

/// Runs every launch as a Slurm job (see the module documentation).
#[derive(Clone, Debug)]
pub struct SlurmLauncher {
    options: SlurmOptions,
}

impl SlurmLauncher {
    /// A launcher submitting with `options` (a zero `poll` becomes 500 ms).
    pub fn new(mut options: SlurmOptions) -> SlurmLauncher {
        if options.poll.is_zero() {
            options.poll = Duration::from_millis(500);
        }
        SlurmLauncher { options }
    }

    /// Whether a Slurm controller answers here (`sinfo` runs and lists a partition).
    pub fn available() -> bool {
        std::process::Command::new("sinfo")
            .args(["-h", "-o", "%P"])
            .output()
            .map(|o| o.status.success() && !o.stdout.is_empty())
            .unwrap_or(false)
    }
}

impl Launcher for SlurmLauncher {
    fn launch(&self, spec: LaunchSpec) -> LaunchFuture<'_> {
        Box::pin(run_job(&self.options, spec))
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

/// Quotes `s` for bash (single quotes, `'` written as `'\''`).
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> LaunchError {
    move |source| LaunchError::Io { what, source }
}

fn script(options: &SlurmOptions, spec: &LaunchSpec, stdin: &Path) -> String {
    let mut s = String::from("#!/bin/bash\n");
    for line in &options.extra {
        s += &format!("#SBATCH {line}\n");
    }
    s += "exec env -i";
    for (k, v) in &spec.env {
        s += &format!(" {}", quote(&format!("{k}={v}")));
    }
    for a in options.wrapper.iter().chain(&spec.argv) {
        s += &format!(" {}", quote(a));
    }
    s += &format!(" < {}\n", quote(&stdin.to_string_lossy()));
    s
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
        return Err(LaunchError::Scheduler {
            job: None,
            reason: format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A queued or running job of this name, if any.
async fn existing_job(name: &str) -> Option<String> {
    let out = slurm(&["squeue", "-h", "--name", name, "-o", "%i %T"], "squeue")
        .await
        .ok()?;
    out.lines().find_map(|l| {
        let (id, state) = l.split_once(' ')?;
        (!terminal(state)).then(|| id.to_string())
    })
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

/// `JobState` and `ExitCode` (code, signal) of a job, from `scontrol show job -o`.
async fn job_state(id: &str) -> Result<(String, i32, i32), LaunchError> {
    let out = slurm(&["scontrol", "show", "job", "-o", id], "scontrol show job").await?;
    let field = |key: &str| {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(str::to_string)
    };
    let state = field("JobState=").unwrap_or_else(|| "UNKNOWN".into());
    let (code, sig) = field("ExitCode=")
        .and_then(|e| {
            let (c, s) = e.split_once(':')?;
            Some((c.parse().ok()?, s.parse().ok()?))
        })
        .unwrap_or((0, 0));
    Ok((state, code, sig))
}

async fn submit(
    options: &SlurmOptions,
    spec: &LaunchSpec,
    name: &str,
) -> Result<String, LaunchError> {
    let dir = options.spool.join(name);
    std::fs::create_dir_all(&dir).map_err(io("creating the job directory"))?;
    let stdin = dir.join("stdin");
    std::fs::write(&stdin, &spec.stdin).map_err(io("writing the job's stdin"))?;
    let job = dir.join("job.sh");
    std::fs::write(&job, script(options, spec, &stdin)).map_err(io("writing the job script"))?;
    let null = PathBuf::from("/dev/null");
    for p in [&spec.stdout_path, &spec.stderr_path].into_iter().flatten() {
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io("creating the trace directory"))?;
        }
    }
    let minutes = (spec.timeout.as_secs_f64() / 60.0).ceil().clamp(1.0, 1e6) as u64 + 1;
    let mut args: Vec<String> = vec![
        "sbatch".into(),
        "--parsable".into(),
        "--export=NONE".into(),
        format!("--job-name={name}"),
        format!("--chdir={}", spec.cwd.display()),
        format!(
            "--output={}",
            spec.stdout_path.as_ref().unwrap_or(&null).display()
        ),
        format!(
            "--error={}",
            spec.stderr_path.as_ref().unwrap_or(&null).display()
        ),
        format!("--time={minutes}"),
        format!("--cpus-per-task={}", options.cpus.unwrap_or(1)),
    ];
    if let Some(p) = &options.partition {
        args.push(format!("--partition={p}"));
    }
    if let Some(a) = &options.account {
        args.push(format!("--account={a}"));
    }
    if let Some(m) = options.mem_mb {
        args.push(format!("--mem={m}M"));
    }
    args.push(job.to_string_lossy().into_owned());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = slurm(&argv, "sbatch").await?;
    let id = out.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() {
        return Err(LaunchError::Scheduler {
            job: None,
            reason: "sbatch printed no job id".into(),
        });
    }
    let _ = std::fs::write(dir.join("job_id"), &id);
    Ok(id)
}

async fn scancel(id: &str) {
    let _ = slurm(&["scancel", id], "scancel").await;
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

async fn run_job(options: &SlurmOptions, spec: LaunchSpec) -> Result<ProcessOutcome, LaunchError> {
    if spec.argv.is_empty() {
        return Err(LaunchError::EmptyCommand);
    }
    let name = job_name(&spec);
    let start = Instant::now();
    let id = match existing_job(&name).await {
        Some(id) => id,
        None => submit(options, &spec, &name).await?,
    };
    let cancel: Cancel = spec.cancel.clone();
    let mut forced: Option<Exit> = None;
    let (state, code, sig) = loop {
        let (state, code, sig) = job_state(&id).await?;
        if terminal(&state) {
            break (state, code, sig);
        }
        if forced.is_none() {
            if cancel.is_cancelled() {
                forced = Some(Exit::Cancelled);
                scancel(&id).await;
            } else if start.elapsed() > spec.timeout {
                forced = Some(Exit::TimedOut);
                scancel(&id).await;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(options.poll) => {}
            _ = cancel.cancelled(), if forced.is_none() => {}
        }
    };
    let exit = match (forced, state.as_str()) {
        (Some(f), _) => f,
        (None, "COMPLETED") => Exit::Code(0),
        (None, "FAILED") if sig != 0 => Exit::Signal(sig),
        (None, "FAILED") => Exit::Code(code),
        (None, "TIMEOUT") => Exit::TimedOut,
        (None, "OUT_OF_MEMORY") => Exit::Signal(9),
        (None, other) => {
            // Cancelled from outside, a node failure, a preemption: not the harness's fault.
            return Err(LaunchError::Scheduler {
                job: Some(id),
                reason: format!("the job ended as {other}"),
            });
        }
    };
    let (stdout, stdout_tail) =
        finish_output(spec.stdout_path.as_ref(), spec.output_cap, spec.tail_bytes);
    let (stderr, _) = finish_output(spec.stderr_path.as_ref(), spec.output_cap, 0);
    Ok(ProcessOutcome {
        exit,
        wall: start.elapsed(),
        stdout,
        stderr,
        stdout_tail,
        pid: id.parse().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_passes_exactly_the_environment_and_quotes_everything() {
        let spec = LaunchSpec {
            argv: vec!["python3".into(), "it's.py".into()],
            cwd: "/w".into(),
            env: vec![("A".into(), "x y'z".into())],
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
        let opts = SlurmOptions {
            extra: vec!["--qos=short".into()],
            ..Default::default()
        };
        let s = script(&opts, &spec, Path::new("/s/stdin"));
        assert!(s.contains("#SBATCH --qos=short\n"), "{s}");
        assert!(
            s.contains(r"exec env -i 'A=x y'\''z' 'python3' 'it'\''s.py' < '/s/stdin'"),
            "{s}"
        );
        assert_eq!(job_name(&spec), job_name(&spec.clone()));
        assert!(job_name(&spec).starts_with("hevo-"));
    }
}
