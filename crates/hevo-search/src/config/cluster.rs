//! `[executor] kind = "slurm"` checked against the cluster before any work: its commands on
//! `PATH`, a controller that answers, `partition` among the partitions `sinfo` lists, and
//! `array_max` within the cluster's `MaxArraySize`. Each refusal names the `hevo.toml` line
//! and the fix, as load-time errors do (exit code 2).

use std::path::Path;

use hevo_runtime::slurm::{Cluster, ProbeError};

use super::{ConfigError, ExecutorConfig};

/// `array_max` when `hevo.toml` does not set it (lowered to the cluster's `MaxArraySize`).
pub const DEFAULT_ARRAY_MAX: u32 = 100;

impl ExecutorConfig {
    /// Probes the cluster and checks this executor against it; returns the `array_max` to
    /// submit with.
    pub(super) fn check_cluster(&self, file: &Path) -> Result<u32, ConfigError> {
        let cluster = Cluster::probe().map_err(|e| {
            let fix = match e {
                ProbeError::Missing(_) => {
                    "run hevo where jobs can be submitted (a login node), with sbatch, squeue, \
                     scontrol and scancel on PATH"
                }
                ProbeError::NoController(_) => "start the cluster, or put its commands on PATH",
            };
            ConfigError::invalid_at_line(
                file,
                "executor.kind",
                format!("is \"slurm\", but {e}: {fix}, or use kind = \"local\""),
            )
        })?;
        self.fits(&cluster, file)
    }

    /// Checks `partition` and `array_max` against `cluster`; returns the `array_max` to use.
    fn fits(&self, cluster: &Cluster, file: &Path) -> Result<u32, ConfigError> {
        let bad = |key: &str, problem: String| ConfigError::invalid_at_line(file, key, problem);
        if let Some(partition) = &self.partition {
            let unknown = cluster.unknown_partitions(partition);
            if !unknown.is_empty() {
                return Err(bad(
                    "executor.partition",
                    format!(
                        "is `{partition}`, but the cluster has no partition `{}`: use one `sinfo` \
                         lists ({}), or leave it out for the cluster's default (`{}`)",
                        unknown.join("`, `"),
                        cluster.partitions.join(", "),
                        cluster.partitions[0]
                    ),
                ));
            }
        }
        // An array of n launches has indices 0..n-1, each below MaxArraySize.
        let most = cluster.max_array_size.unwrap_or(u32::MAX).max(1);
        match self.array_max {
            Some(n) if n > most => Err(bad(
                "executor.array_max",
                format!(
                    "is {n}, but the cluster's MaxArraySize is {most} (`scontrol show config`; \
                     array indices run from 0 to {}): use at most {most}, or 1 for no arrays",
                    most - 1
                ),
            )),
            Some(n) => Ok(n),
            None => Ok(DEFAULT_ARRAY_MAX.min(most)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(max_array_size: Option<u32>) -> Cluster {
        Cluster {
            partitions: vec!["debug".into(), "cpu".into()],
            max_array_size,
        }
    }

    fn executor(text: &str) -> ExecutorConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn partition_and_array_max_are_checked_against_the_cluster() {
        let file = Path::new("no/hevo.toml");
        let c = cluster(Some(1001));
        let msg = executor("partition = \"cpu,gpu\"")
            .fits(&c, file)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("`executor.partition` is `cpu,gpu`"), "{msg}");
        assert!(msg.contains("no partition `gpu`"), "{msg}");
        assert!(msg.contains("(debug, cpu)"), "{msg}");
        assert_eq!(executor("partition = \"cpu\"").fits(&c, file).unwrap(), 100);
        assert_eq!(executor("array_max = 1001").fits(&c, file).unwrap(), 1001);
        let msg = executor("array_max = 1002")
            .fits(&c, file)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("MaxArraySize is 1001"), "{msg}");
        assert!(msg.contains("use at most 1001"), "{msg}");
        // The default follows a smaller limit; without arrays (0) every launch is a job.
        assert_eq!(executor("").fits(&cluster(Some(50)), file).unwrap(), 50);
        assert_eq!(executor("").fits(&cluster(Some(0)), file).unwrap(), 1);
        assert!(executor("array_max = 2")
            .fits(&cluster(Some(0)), file)
            .is_err());
        assert_eq!(executor("").fits(&cluster(None), file).unwrap(), 100);
    }
}
