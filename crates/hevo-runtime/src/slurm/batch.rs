//! [`Batcher`]: launches that arrive together are submitted as one job array.
//!
//! The executor's workers start trials at the same moment (a batch begins, or several
//! trials end in the same poll and their workers take the next ones), so the first launch
//! of a quiet period waits [`WINDOW`] for others; then everything waiting is submitted, at
//! most `array_max` elements per `sbatch --array=0-(n-1)[%throttle]` call. A lone launch is
//! a plain job. Element `i` of array `A` is Slurm job `A_i`: it is polled, cancelled and
//! re-attached to by that id like any job. The array's script (`<spool>/arrays/<name>.sh`,
//! running each element's `job.sh`) is removed once sbatch has sent it to the controller;
//! element `A_i`'s Slurm output is `<spool>/arrays/A_i.out` until hevo reads its outcome.
//!
//! ```text
//! launch ─► pending ─┬─ first of a quiet period: wait WINDOW (or until array_max wait)
//!                    └─ others: wait for their id
//!         ─► 1 waiting: sbatch job.sh                         ─► id
//!         ─► n waiting: sbatch --array=0-(n-1) <array>.sh     ─► A_0 .. A_(n-1)
//!         ─► sbatch could not connect to the controller: sent again every OUTAGE_POLL
//!            for the launches still waiting (a cancelled launch stops waiting)
//! ```
//!
//! Only a failure to connect is sent again: a submission that timed out may have reached
//! the controller, so it fails its launch (the trial is retried as an infra fault). A job
//! submitted for a launch that stopped waiting meanwhile is cancelled at once.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::{oneshot, Notify};

use super::queue::Queue;
use super::spool::Spool;
use super::{scancel, script, slurm, unreachable, SlurmOptions, OUTAGE_POLL};
use crate::launch::LaunchError;

/// How long the first launch of a quiet period waits for others to join its array.
pub const WINDOW: Duration = Duration::from_millis(200);

/// One launch waiting to be submitted.
struct Pending {
    name: String,
    spool: Spool,
    /// `--time` in minutes.
    minutes: u64,
    tx: oneshot::Sender<Result<String, LaunchError>>,
}

/// Coalesces launches into arrays (see the module documentation).
pub(crate) struct Batcher {
    options: SlurmOptions,
    pending: Mutex<Vec<Pending>>,
    full: Notify,
    /// Told of each submission.
    queue: Arc<Queue>,
}

impl Batcher {
    pub fn new(options: SlurmOptions, queue: Arc<Queue>) -> Batcher {
        Batcher {
            options,
            pending: Mutex::new(Vec::new()),
            full: Notify::new(),
            queue,
        }
    }

    /// Submits the launch whose script is in `spool` (named `name`, `minutes` long) with
    /// whatever else arrives meanwhile; returns its job id.
    pub async fn submit(
        self: &Arc<Self>,
        name: &str,
        spool: Spool,
        minutes: u64,
    ) -> Result<String, LaunchError> {
        let (tx, rx) = oneshot::channel();
        let first = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            pending.push(Pending {
                name: name.to_string(),
                spool,
                minutes,
                tx,
            });
            if pending.len() >= self.options.array_max.max(1) as usize {
                self.full.notify_one();
            }
            pending.len() == 1
        };
        if first {
            let me = Arc::clone(self);
            tokio::spawn(async move { me.flush().await });
        }
        rx.await.unwrap_or_else(|_| {
            Err(LaunchError::Scheduler {
                job: None,
                reason: "the submission was dropped".into(),
            })
        })
    }

    async fn flush(&self) {
        if self.options.array_max > 1 {
            tokio::select! {
                _ = tokio::time::sleep(WINDOW) => {}
                _ = self.full.notified() => {}
            }
        }
        let waiting: Vec<Pending> = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *pending)
        };
        let mut rest = waiting.into_iter().peekable();
        while rest.peek().is_some() {
            let chunk: Vec<Pending> = rest
                .by_ref()
                .take(self.options.array_max.max(1) as usize)
                .collect();
            self.send(chunk).await;
        }
    }

    /// Submits `chunk` and tells each launch its id or the error; while sbatch cannot
    /// connect to the controller, sends it again (see the module documentation).
    async fn send(&self, mut chunk: Vec<Pending>) {
        loop {
            let asked = tokio::time::Instant::now();
            match self.sbatch(&chunk).await {
                Ok(ids) => {
                    for (p, id) in chunk.into_iter().zip(ids) {
                        if p.tx.send(Ok(id.clone())).is_err() {
                            // Its launch was cancelled while it was being submitted.
                            scancel(&self.queue, &id).await;
                        }
                    }
                    return;
                }
                Err(e) if not_sent(&e) => {
                    self.queue
                        .unreachable(unreachable(&e).unwrap_or_default(), asked);
                    tokio::time::sleep(OUTAGE_POLL).await;
                    chunk.retain(|p| !p.tx.is_closed());
                    if chunk.is_empty() {
                        return;
                    }
                }
                Err(e) => {
                    for p in chunk {
                        let _ = p.tx.send(Err(each(&e)));
                    }
                    return;
                }
            }
        }
    }

    /// One `sbatch` for `chunk`: a plain job for one launch, an array for more. Records each
    /// launch's id and job name in its spool. Every option passed here is listed in
    /// `owned.rs`, so `[executor] sbatch` cannot set it where it would be ignored.
    async fn sbatch(&self, chunk: &[Pending]) -> Result<Vec<String>, LaunchError> {
        let asked = tokio::time::Instant::now();
        let o = &self.options;
        let minutes = chunk.iter().map(|p| p.minutes).max().unwrap_or(1);
        let mut args: Vec<String> = vec![
            "sbatch".into(),
            "--parsable".into(),
            "--export=NONE".into(),
            format!("--time={minutes}"),
            format!("--cpus-per-task={}", o.cpus.unwrap_or(1)),
        ];
        if let Some(p) = &o.partition {
            args.push(format!("--partition={p}"));
        }
        if let Some(a) = &o.account {
            args.push(format!("--account={a}"));
        }
        if let Some(m) = o.mem_mb {
            args.push(format!("--mem={m}M"));
        }
        let (name, script_path) = if let [one] = chunk {
            args.push(format!("--chdir={}", one.spool.dir.display()));
            args.push(format!(
                "--output={}",
                one.spool.dir.join("slurm.out").display()
            ));
            (one.name.clone(), one.spool.script())
        } else {
            let mut h = Sha256::new();
            for p in chunk {
                h.update(p.name.as_bytes());
            }
            let name = format!("hevo-array-{}", &hex::encode(h.finalize())[..12]);
            let dir = o.spool.join("arrays");
            std::fs::create_dir_all(&dir).map_err(|source| LaunchError::Io {
                what: "creating the array directory",
                source,
            })?;
            let elements: Vec<PathBuf> = chunk.iter().map(|p| p.spool.script()).collect();
            let path = dir.join(format!("{name}.sh"));
            std::fs::write(&path, script::array(o, &elements)).map_err(|source| {
                LaunchError::Io {
                    what: "writing the array script",
                    source,
                }
            })?;
            let throttle = o
                .array_throttle
                .map(|t| format!("%{t}"))
                .unwrap_or_default();
            args.push(format!("--array=0-{}{throttle}", chunk.len() - 1));
            args.push(format!("--chdir={}", dir.display()));
            // Element `A_i`'s output: `Spool::job_output`.
            args.push(format!("--output={}", dir.join("%A_%a.out").display()));
            (name, path)
        };
        args.push(format!("--job-name={name}"));
        args.push(script_path.to_string_lossy().into_owned());
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = slurm(&argv, "sbatch").await;
        if chunk.len() > 1 {
            // sbatch sent the array's script to the controller, which keeps it.
            let _ = std::fs::remove_file(&script_path);
        }
        let out = out?;
        let id = out.trim().split(';').next().unwrap_or("").to_string();
        if id.is_empty() {
            return Err(LaunchError::Scheduler {
                job: None,
                reason: "sbatch printed no job id".into(),
            });
        }
        let ids: Vec<String> = if chunk.len() == 1 {
            vec![id.clone()]
        } else {
            (0..chunk.len()).map(|i| format!("{id}_{i}")).collect()
        };
        for (p, id) in chunk.iter().zip(&ids) {
            p.spool.set_job(id, &name);
        }
        self.queue.reached(asked);
        self.queue.submitted(ids.len(), &id);
        Ok(ids)
    }
}

/// What `sbatch` says when it refuses a job for its options (partition, account, QOS,
/// array, resources the cluster does not have): submitting it again cannot succeed.
const REFUSALS: [&str; 11] = [
    "unrecognized option",
    "invalid option",
    "invalid partition",
    "invalid account",
    "invalid qos",
    "invalid job array specification",
    "invalid generic resource",
    "invalid feature specification",
    "invalid wckey",
    "requested node configuration is not available",
    "access/permission denied",
];

/// Whether a failed `sbatch` (its exit code and stderr) refused the job for how it is
/// configured, rather than failing for a while (a controller that does not answer, a
/// timeout): exit code 255 (sbatch's own check of its options, e.g. `Invalid --time
/// specification`) or one of [`REFUSALS`].
pub(crate) fn refused(code: Option<i32>, stderr: &str) -> bool {
    let stderr = stderr.to_lowercase();
    code == Some(255) || REFUSALS.iter().any(|r| stderr.contains(r))
}

/// Whether a failed `sbatch` never reached the controller (it could not connect), so
/// sending it again cannot submit the job twice.
fn not_sent(e: &LaunchError) -> bool {
    unreachable(e).is_some_and(|said| said.to_lowercase().contains("(connect failure)"))
}

/// The error of one `sbatch` call, for one launch of its chunk: a scheduler error or
/// refusal as it is (wrapping its text again would say "the scheduler" twice), anything
/// else as its text.
fn each(e: &LaunchError) -> LaunchError {
    match e {
        LaunchError::Refused { reason } => LaunchError::Refused {
            reason: reason.clone(),
        },
        LaunchError::Scheduler { job, reason } => LaunchError::Scheduler {
            job: job.clone(),
            reason: reason.clone(),
        },
        other => LaunchError::Scheduler {
            job: None,
            reason: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_from_passing_failures() {
        let partition = "sbatch: error: invalid partition specified: gpu\n\
                         sbatch: error: Batch job submission failed: Invalid partition name specified";
        assert!(refused(Some(1), partition));
        assert!(refused(
            Some(255),
            "sbatch: error: Invalid --time specification"
        ));
        assert!(refused(
            Some(1),
            "sbatch: error: Batch job submission failed: Invalid qos specification"
        ));
        assert!(!refused(
            Some(1),
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller \
             (connect failure)"
        ));
        assert!(!refused(
            Some(1),
            "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
        ));
    }

    #[test]
    fn only_a_submission_that_could_not_connect_is_sent_again() {
        let failed = |said: &str| LaunchError::Scheduler {
            job: None,
            reason: format!("sbatch failed: sbatch: error: Batch job submission failed: {said}"),
        };
        assert!(not_sent(&failed(
            "Unable to contact slurm controller (connect failure)"
        )));
        // These may have reached the controller: sending again could run the job twice.
        assert!(!not_sent(&failed(
            "Unable to contact slurm controller (receive failure)"
        )));
        assert!(!not_sent(&failed(
            "Socket timed out on send/recv operation"
        )));
        assert!(!not_sent(&LaunchError::Refused {
            reason: "Unable to contact slurm controller (connect failure)".into()
        }));
    }
}
