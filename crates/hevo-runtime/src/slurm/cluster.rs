//! [`Cluster`]: what hevo learns of the Slurm cluster before any work, so that a
//! configuration the cluster cannot run is refused at start (naming its `hevo.toml` line)
//! instead of failing every trial.
//!
//! ```text
//! sbatch, squeue, scontrol, scancel on PATH?  ─ no ─► Missing(the first one)
//! sinfo -h -o %P   ─ fails or lists nothing  ─────► NoController
//!                  ─► partitions (`*` marks the default)
//! scontrol show config ─► MaxArraySize (unknown when not listed)
//! ```

use std::path::Path;
use std::process::Command;

/// The commands hevo runs besides `sinfo`: submitting, listing, polling and cancelling jobs.
pub const COMMANDS: [&str; 4] = ["sbatch", "squeue", "scontrol", "scancel"];

/// What hevo needs to know of the cluster it submits to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cluster {
    /// The partitions `sinfo` lists, the default one first.
    pub partitions: Vec<String>,
    /// `MaxArraySize` of `scontrol show config`: array indices run from 0 to this minus 1.
    pub max_array_size: Option<u32>,
}

/// Why hevo cannot submit to a cluster from here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// A Slurm command is not on `PATH`.
    #[error("`{0}` is not on PATH")]
    Missing(&'static str),
    /// `sinfo` failed or lists no partition.
    #[error("no Slurm controller answers (`sinfo` failed or lists no partition{0})")]
    NoController(String),
}

impl Cluster {
    /// Asks the cluster (see the module documentation).
    pub fn probe() -> Result<Cluster, ProbeError> {
        if let Some(missing) = COMMANDS.into_iter().find(|c| !on_path(c)) {
            return Err(ProbeError::Missing(missing));
        }
        let out = Command::new("sinfo")
            .args(["-h", "-o", "%P"])
            .output()
            .map_err(|e| ProbeError::NoController(format!(": {e}")))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.trim();
        let partitions = partitions(&String::from_utf8_lossy(&out.stdout));
        if !out.status.success() || partitions.is_empty() {
            let why = if stderr.is_empty() {
                String::new()
            } else {
                format!(": {stderr}")
            };
            return Err(ProbeError::NoController(why));
        }
        let max_array_size = Command::new("scontrol")
            .args(["show", "config"])
            .output()
            .ok()
            .and_then(|o| max_array_size(&String::from_utf8_lossy(&o.stdout)));
        Ok(Cluster {
            partitions,
            max_array_size,
        })
    }

    /// The names of `partition` (one name, or a comma-separated list as `--partition`
    /// takes) that the cluster does not have.
    pub fn unknown_partitions<'a>(&self, partition: &'a str) -> Vec<&'a str> {
        partition
            .split(',')
            .map(str::trim)
            .filter(|p| !self.partitions.iter().any(|q| q == p))
            .collect()
    }
}

/// Whether `program` is an executable file in a directory of `PATH`.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| executable(&d.join(program))))
}

/// The partitions of `sinfo -h -o %P`, the default (marked `*`) first, each once.
fn partitions(sinfo: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in sinfo.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, default) = match line.strip_suffix('*') {
            Some(name) => (name.to_string(), true),
            None => (line.to_string(), false),
        };
        if out.contains(&name) {
            continue;
        }
        if default {
            out.insert(0, name);
        } else {
            out.push(name);
        }
    }
    out
}

/// `MaxArraySize` in the text of `scontrol show config`.
fn max_array_size(config: &str) -> Option<u32> {
    config.lines().find_map(|l| {
        let (key, value) = l.split_once('=')?;
        (key.trim() == "MaxArraySize")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_partitions_default_first_and_the_array_limit() {
        assert_eq!(
            partitions("cpu\ndebug*\ngpu\ncpu\n"),
            ["debug", "cpu", "gpu"]
        );
        let config = "Configuration data as of x\nMaxArraySize            = 1001\n\
                      MaxJobCount             = 10000\n";
        assert_eq!(max_array_size(config), Some(1001));
        assert_eq!(max_array_size("MaxJobCount = 1\n"), None);
        let c = Cluster {
            partitions: vec!["debug".into(), "cpu".into()],
            max_array_size: None,
        };
        assert!(c.unknown_partitions("cpu").is_empty());
        assert_eq!(c.unknown_partitions("cpu, gpu,big"), ["gpu", "big"]);
    }
}
