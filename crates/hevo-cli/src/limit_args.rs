//! `--mem-mb`, `--cpus`, `--pids`, `--io-mbps`, `--disk-mb`: the per-trial limits of
//! commands without a `hevo.toml` (`hevo eval`, `hevo tests synth`); `hevo run` reads the
//! same limits from `[executor]`.

use hevo_runtime::cgroup::TrialLimits;

/// The limits of each launch's cgroup (docs/security.md).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LimitArgs {
    /// Memory of each trial, all its processes together, in MB [default: no limit].
    #[arg(long, value_name = "MB", value_parser = clap::value_parser!(u64).range(16..))]
    pub mem_mb: Option<u64>,
    /// CPU time of each trial per second of wall time, in CPUs [default: no limit].
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(TrialLimits::MAX_CPUS)))]
    pub cpus: Option<u32>,
    /// Processes and threads of each trial at once [default: 1024].
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=TrialLimits::MAX_PIDS))]
    pub pids: Option<u64>,
    /// Read and write bandwidth of each trial on its working directory's disk, in MB/s
    /// [default: no limit].
    #[arg(long, value_name = "MBPS", value_parser = clap::value_parser!(u64).range(1..))]
    pub io_mbps: Option<u64>,
    /// What each trial may store in its working directory, in MB, and the largest file it
    /// may write anywhere [default: 10240].
    #[arg(long, value_name = "MB", value_parser = clap::value_parser!(u64).range(1..))]
    pub disk_mb: Option<u64>,
}

impl LimitArgs {
    /// The limits, with the defaults where a flag is not given.
    pub fn limits(&self) -> TrialLimits {
        TrialLimits::configured(
            self.mem_mb,
            self.cpus,
            self.pids,
            self.io_mbps,
            self.disk_mb,
        )
    }
}
