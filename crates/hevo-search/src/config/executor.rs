//! `[executor]`: where trials run (this machine or a Slurm cluster), the limits of each
//! trial, and the launcher built from them (`docs/scale-out.md`).

use std::path::Path;

use serde::Deserialize;

use super::ConfigError;

/// `[executor]`: where trials run (`docs/scale-out.md`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExecutorConfig {
    /// `local` (the default) or `slurm`.
    #[serde(default)]
    pub kind: ExecutorKind,
    /// Slurm `--partition`.
    #[serde(default)]
    pub partition: Option<String>,
    /// Slurm `--account`.
    #[serde(default)]
    pub account: Option<String>,
    /// CPUs of each trial: Slurm `--cpus-per-task` (default 1); on this machine its
    /// cgroup's CPU quota (default none: trials share the machine).
    #[serde(default)]
    pub cpus: Option<u32>,
    /// Memory of each trial in megabytes: Slurm `--mem`; on this machine its cgroup's
    /// memory limit, all its processes together (default none).
    #[serde(default)]
    pub mem_mb: Option<u64>,
    /// On this machine: processes and threads of each trial at once, its cgroup's limit
    /// (default 1024; a fork bomb stops there).
    #[serde(default)]
    pub pids: Option<u64>,
    /// On this machine: read and write bandwidth of each trial on the disk of its working
    /// directory, in MB/s each (default none).
    #[serde(default)]
    pub io_mbps: Option<u64>,
    /// On this machine: what each trial may store in the folders it can write, in MB, and
    /// the largest file it may write anywhere (default 10240; hevo kills a trial past it).
    #[serde(default)]
    pub disk_mb: Option<u64>,
    /// Extra `#SBATCH` lines, e.g. `["--qos=short"]`; an option hevo sets itself (`--time`,
    /// `--cpus-per-task`, ...: `hevo_runtime::slurm::hevo_sets`) is refused.
    #[serde(default)]
    pub sbatch: Vec<String>,
    /// A command each job's command runs inside, e.g. `["apptainer", "exec", "img.sif"]`.
    #[serde(default)]
    pub wrapper: Vec<String>,
    /// The most launches submitted together as one job array (`sbatch --array`); 1 submits
    /// every launch as its own job. Default 100, or the cluster's `MaxArraySize` when lower;
    /// more than `MaxArraySize` is refused at start.
    #[serde(default)]
    pub array_max: Option<u32>,
    /// How many elements of one array may run at once (`--array=...%N`); default no limit.
    #[serde(default)]
    pub array_throttle: Option<u32>,
}

impl ExecutorConfig {
    /// The limits of each local launch's cgroup (trial, `prepare`, scorer, agent).
    pub fn limits(&self) -> hevo_runtime::cgroup::TrialLimits {
        hevo_runtime::cgroup::TrialLimits::configured(
            self.mem_mb,
            self.cpus,
            self.pids,
            self.io_mbps,
            self.disk_mb,
        )
    }

    /// The launcher every trial-side process of a run in `run_dir` goes through. A Slurm
    /// executor is first checked against the cluster (`cluster.rs`; errors name a line of
    /// `file`), spools its job scripts in `run_dir/slurm/` (the run directory must be on a
    /// filesystem the compute nodes share) and tells `queue` what its jobs do, if given.
    pub fn launcher(
        &self,
        run_dir: &Path,
        file: &Path,
        queue: Option<hevo_runtime::slurm::QueueReport>,
    ) -> Result<std::sync::Arc<dyn hevo_runtime::launch::Launcher>, ConfigError> {
        use hevo_runtime::slurm::{SlurmLauncher, SlurmOptions};
        Ok(match self.kind {
            ExecutorKind::Local => {
                std::sync::Arc::new(hevo_runtime::launch::LocalLauncher::default())
            }
            ExecutorKind::Slurm => {
                let array_max = self.check_cluster(file)?;
                std::sync::Arc::new(SlurmLauncher::new(
                    SlurmOptions {
                        partition: self.partition.clone(),
                        account: self.account.clone(),
                        cpus: self.cpus,
                        mem_mb: self.mem_mb,
                        extra: self.sbatch.clone(),
                        wrapper: self.wrapper.clone(),
                        spool: run_dir.join("slurm"),
                        poll: std::time::Duration::from_millis(500),
                        array_max,
                        array_throttle: self.array_throttle,
                    },
                    queue,
                ))
            }
        })
    }
}

/// Where trials run.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// Processes on this machine.
    #[default]
    Local,
    /// Jobs of a Slurm cluster (`sbatch`, `squeue`, `scontrol`, `scancel` on `PATH`).
    Slurm,
}
