//! `hevo.toml`: the configuration of one search run, typed and validated.
//!
//! Every key is documented in `docs/config.md`. Unknown keys and bad values are errors that
//! name the file, the key and the fix (exit code 2), before anything runs. Relative paths
//! are resolved against the directory that holds `hevo.toml`.

use hevo_strategy::strategy::StrategyKind;
use hevo_strategy::vocab::{parse_estimator, StrategyName, StrategyOptions, UnknownName};
use std::path::{Path, PathBuf};

use hevo_llm::ModelLayerConfig;
use serde::Deserialize;

/// The name of the configuration file looked for in a run directory.
pub const CONFIG_FILE: &str = "hevo.toml";

/// The whole `hevo.toml`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Run name (default: the name of the directory holding `hevo.toml`).
    #[serde(default)]
    pub name: Option<String>,
    /// The task suite directory.
    pub suite: PathBuf,
    /// The starting harness directories (Phase 0 evaluates each on the whole val split).
    pub seeds: Vec<PathBuf>,
    /// Seed of every random choice (subsets, proposals); the same seed gives the same run.
    #[serde(default)]
    pub seed: u64,
    /// Where runs are written (default: `runs/<name>` next to `hevo.toml`).
    #[serde(default)]
    pub run_dir: Option<PathBuf>,
    /// A command run once (in the config's directory) when the suite is missing, to build it.
    #[serde(default)]
    pub setup: Option<Vec<String>>,
    /// The model layer: backends, model routes, prices, caps and the response cache
    /// (`docs/models.md`). Absent: the embedded local model. An empty `[model]` table: no
    /// model at all (for harnesses that call none).
    #[serde(default)]
    pub model: Option<ModelLayerConfig>,
    /// Who proposes new candidates.
    #[serde(default)]
    pub proposer: ProposerConfig,
    /// The size of the search.
    #[serde(default)]
    pub search: SearchConfig,
    /// How candidates are evaluated.
    #[serde(default)]
    pub evaluation: EvaluationConfig,
    /// Hard limits on the whole run.
    #[serde(default)]
    pub budget: BudgetConfig,
    /// Where trials run: this machine (the default) or a Slurm cluster.
    #[serde(default)]
    pub executor: ExecutorConfig,
    /// Where the model gateway listens and the URL Slurm trials are given.
    #[serde(default)]
    pub gateway: ListenConfig,
    /// What the search optimizes: pass rate alone, or pass rate and cost (HarnessPro).
    #[serde(default)]
    pub objective: ObjectiveConfig,
    /// HarnessPro's epoch loop (needs `[objective] kind = "pareto"`; `docs/harnesspro.md`).
    /// Absent: the usual iterations, tiers chosen at the end.
    #[serde(default)]
    pub harnesspro: Option<HarnessProConfig>,
}

/// `[harnesspro]`: the epoch loop of HarnessPro (`docs/harnesspro.md`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HarnessProConfig {
    /// Epochs after epoch 0 (the seeds); replaces `[search] iterations`.
    #[serde(default = "default_epochs")]
    pub epochs: u32,
    /// Training tasks in each epoch's core set (chosen by greedy DPP).
    #[serde(default = "default_core_size")]
    pub core_size: u32,
    /// Runs of every core task per candidate (G).
    #[serde(default = "default_core_runs")]
    pub core_runs: u32,
}

fn default_epochs() -> u32 {
    3
}

fn default_core_size() -> u32 {
    10
}

fn default_core_runs() -> u32 {
    3
}

impl Default for HarnessProConfig {
    fn default() -> Self {
        HarnessProConfig {
            epochs: default_epochs(),
            core_size: default_core_size(),
            core_runs: default_core_runs(),
        }
    }
}

/// `[objective]`: what the search optimizes (`docs/harnesspro.md`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveConfig {
    /// `pass_rate` (the default: one pick) or `pareto` (lite, medium and heavy tiers).
    #[serde(default)]
    pub kind: ObjectiveKind,
    /// `[alpha, beta]` (weights of pass rate and cost) of the lite tier.
    #[serde(default = "default_lite")]
    pub lite: [f64; 2],
    /// `[alpha, beta]` of the medium tier.
    #[serde(default = "default_medium")]
    pub medium: [f64; 2],
    /// `[alpha, beta]` of the heavy tier.
    #[serde(default = "default_heavy")]
    pub heavy: [f64; 2],
}

fn default_lite() -> [f64; 2] {
    [1.0, 2.0]
}

fn default_medium() -> [f64; 2] {
    [1.0, 1.0]
}

fn default_heavy() -> [f64; 2] {
    [2.0, 1.0]
}

impl Default for ObjectiveConfig {
    fn default() -> Self {
        ObjectiveConfig {
            kind: ObjectiveKind::default(),
            lite: default_lite(),
            medium: default_medium(),
            heavy: default_heavy(),
        }
    }
}

/// What the search optimizes.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ObjectiveKind {
    /// The validation pass rate alone.
    #[default]
    PassRate,
    /// Pass rate and mean cost per task together: three tiers (SPEC section 3).
    Pareto,
}

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
    /// Extra `#SBATCH` lines, e.g. `["--qos=short"]`.
    #[serde(default)]
    pub sbatch: Vec<String>,
    /// A command each job's command runs inside, e.g. `["apptainer", "exec", "img.sif"]`.
    #[serde(default)]
    pub wrapper: Vec<String>,
    /// The most launches submitted together as one job array (`sbatch --array`); 1 submits
    /// every launch as its own job. Default 100.
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
        )
    }

    /// The launcher every trial-side process of a run in `run_dir` goes through. A Slurm
    /// executor spools its job scripts in `run_dir/slurm/` (the run directory must be on a
    /// filesystem the compute nodes share).
    pub fn launcher(
        &self,
        run_dir: &Path,
    ) -> Result<std::sync::Arc<dyn hevo_runtime::launch::Launcher>, String> {
        use hevo_runtime::slurm::{SlurmLauncher, SlurmOptions};
        Ok(match self.kind {
            ExecutorKind::Local => {
                std::sync::Arc::new(hevo_runtime::launch::LocalLauncher::default())
            }
            ExecutorKind::Slurm => {
                if !SlurmLauncher::available() {
                    return Err(
                        "`[executor] kind = \"slurm\"` but no Slurm controller answers \
                                (`sinfo` failed or lists no partition): start the cluster, put \
                                its commands on PATH, or use `kind = \"local\"`"
                            .into(),
                    );
                }
                std::sync::Arc::new(SlurmLauncher::new(SlurmOptions {
                    partition: self.partition.clone(),
                    account: self.account.clone(),
                    cpus: self.cpus,
                    mem_mb: self.mem_mb,
                    extra: self.sbatch.clone(),
                    wrapper: self.wrapper.clone(),
                    spool: run_dir.join("slurm"),
                    poll: std::time::Duration::from_millis(500),
                    array_max: self.array_max.unwrap_or(100),
                    array_throttle: self.array_throttle,
                }))
            }
        })
    }
}

/// `[gateway]`: where the model gateway listens (`docs/config.md`, `docs/scale-out.md`).
/// Checked while parsing, so a bad value is reported with its line.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(try_from = "ListenTable")]
pub struct ListenConfig {
    /// `bind` and `advertise`; `None`: loopback at a free port (the default).
    pub listen: Option<hevo_llm::Listen>,
}

impl ListenConfig {
    /// The listener the gateway is served on.
    pub fn listen(&self) -> hevo_llm::Listen {
        self.listen.clone().unwrap_or_default()
    }
}

/// `[gateway]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListenTable {
    bind: Option<String>,
    advertise: Option<String>,
}

impl TryFrom<ListenTable> for ListenConfig {
    type Error = String;

    fn try_from(t: ListenTable) -> Result<ListenConfig, String> {
        let Some(bind) = t.bind else {
            return match t.advertise {
                Some(_) => Err(
                    "`gateway.advertise` is set without `gateway.bind`: the gateway \
                                listens on 127.0.0.1 only, which other machines cannot reach; add \
                                e.g. `bind = \"0.0.0.0:8400\"`"
                        .into(),
                ),
                None => Ok(ListenConfig::default()),
            };
        };
        let addr: std::net::SocketAddr = bind.parse().map_err(|_| {
            format!(
                "`gateway.bind` is `{bind}`: give an IP address and a port, e.g. \
                 \"0.0.0.0:8400\" or \"10.0.0.5:0\" (port 0: a free one)"
            )
        })?;
        if let Some(url) = &t.advertise {
            hevo_llm::check_advertise(url)
                .map_err(|p| format!("`gateway.advertise` is `{url}`: it {p}"))?;
        } else if addr.ip().is_unspecified() {
            return Err(format!(
                "`gateway.bind` is `{bind}` (every interface) but no `gateway.advertise` says \
                 which address the compute nodes use: add e.g. \
                 `advertise = \"http://<this host's name or IP>\"`"
            ));
        }
        Ok(ListenConfig {
            listen: Some(hevo_llm::Listen {
                bind: addr,
                advertise: t.advertise,
            }),
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

/// `[proposer]`: where new candidates come from.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProposerConfig {
    /// `params` (built in, offline), `agent` (a coding-agent CLI) or `llm` (one model call).
    #[serde(default = "default_proposer")]
    pub kind: String,
    /// `agent` preset: `claude` or `codex`.
    #[serde(default)]
    pub preset: Option<String>,
    /// `agent` command line (overrides the preset); `{prompt}` is replaced by the prompt,
    /// `{openai_base_url}` / `{anthropic_base_url}` by the gateway's URLs.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// `agent`: extra environment variables of the agent (after its preset's; `{agent_home}`
    /// in a value is the agent's own home, outside the archive). The gateway's URL and key
    /// variables and `HOME` are hevo's and cannot be set here.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Time limit of one proposer call, in seconds.
    #[serde(default = "default_proposer_timeout")]
    pub timeout_s: u64,
    /// `llm`: the model (a route of `[model]`) that writes the new harness file
    /// (default: the model layer's default model).
    #[serde(default)]
    pub model: Option<String>,
    /// `llm`: most tokens of the reply.
    #[serde(default = "default_proposer_max_tokens")]
    pub max_tokens: u32,
}

/// Variables of the agent's environment that hevo owns: `[proposer] env` cannot set them.
const RESERVED_AGENT_VARS: &[&str] = &[
    "HOME",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
];

fn default_proposer_max_tokens() -> u32 {
    8192
}

fn default_proposer() -> String {
    "params".into()
}

fn default_proposer_timeout() -> u64 {
    1800
}

impl Default for ProposerConfig {
    fn default() -> Self {
        ProposerConfig {
            kind: default_proposer(),
            preset: None,
            command: None,
            env: Default::default(),
            timeout_s: default_proposer_timeout(),
            model: None,
            max_tokens: default_proposer_max_tokens(),
        }
    }
}

/// `[search]`: how long the outer loop runs.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// Number of proposal iterations after Phase 0.
    #[serde(default = "default_iterations")]
    pub iterations: u32,
    /// Candidates the proposer writes per iteration (k).
    #[serde(default = "default_k")]
    pub candidates_per_iteration: u32,
    /// Trials per (candidate, task) (r).
    #[serde(default = "default_trials")]
    pub trials: u32,
    /// Concurrent trials (default: number of cores).
    #[serde(default)]
    pub jobs: Option<usize>,
}

fn default_iterations() -> u32 {
    10
}

fn default_k() -> u32 {
    3
}

fn default_trials() -> u32 {
    1
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            iterations: default_iterations(),
            candidates_per_iteration: default_k(),
            trials: default_trials(),
            jobs: None,
        }
    }
}

/// `[evaluation]`: which tasks each candidate sees and how its score is estimated.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EvaluationConfig {
    /// A strategy name of [`hevo_strategy::vocab::StrategyName`]; `recommended` (the
    /// default) is `default`.
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// Share of the validation tasks a sampling strategy evaluates per candidate.
    #[serde(default = "default_rho")]
    pub rho: f64,
    /// Estimator for `coevolve`: a name of [`hevo_strategy::vocab::ESTIMATORS`].
    #[serde(default = "default_estimator")]
    pub estimator: String,
}

fn default_strategy() -> String {
    "recommended".into()
}

fn default_rho() -> f64 {
    0.2
}

fn default_estimator() -> String {
    "auto".into()
}

impl EvaluationConfig {
    /// The strategy this section names, with its options (validated names; an unknown name
    /// is an error naming what is accepted).
    pub fn kind(&self) -> Result<StrategyKind, UnknownName> {
        let name: StrategyName = self.strategy.parse()?;
        let options = StrategyOptions {
            estimator: parse_estimator(&self.estimator)?,
            ..StrategyOptions::default()
        };
        Ok(name.kind(&options))
    }
}

impl Default for EvaluationConfig {
    fn default() -> Self {
        EvaluationConfig {
            strategy: default_strategy(),
            rho: default_rho(),
            estimator: default_estimator(),
        }
    }
}

/// `[budget]`: hard limits; the run stops cleanly (resumable) when one is reached.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// Maximum number of trials (evaluations) in the whole run.
    #[serde(default)]
    pub max_evaluations: Option<u64>,
    /// Maximum dollars spent on model calls (harnesses and proposer).
    #[serde(default)]
    pub max_usd: Option<f64>,
    /// Maximum wall time of the run, in seconds.
    #[serde(default)]
    pub max_wall_s: Option<u64>,
}

/// Why a configuration could not be used (always the user's to fix).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error(
        "cannot read `{}`: {source}; pass a directory holding hevo.toml, or the file itself \
         (examples/threshold is a complete one; every key: docs/config.md)",
        path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The TOML is malformed, has an unknown key or a value of the wrong type.
    #[error("{}{location}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// `:line:column` when known.
        location: String,
        /// What is wrong (toml's message names the key).
        message: String,
    },
    /// A value is out of its allowed range.
    #[error("`{}`: `{key}` {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The dotted key.
        key: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
}

impl RunConfig {
    /// Finds `hevo.toml` at `path` (a file, or a directory holding one) and loads it.
    pub fn load(path: &Path) -> Result<(RunConfig, PathBuf), ConfigError> {
        let file = if path.is_dir() {
            path.join(CONFIG_FILE)
        } else {
            path.to_path_buf()
        };
        let text = std::fs::read_to_string(&file).map_err(|source| ConfigError::Read {
            path: file.clone(),
            source,
        })?;
        let config = RunConfig::parse(&text, &file)?;
        Ok((config, file))
    }

    /// Parses and validates the text of a `hevo.toml` read from `file`.
    pub fn parse(text: &str, file: &Path) -> Result<RunConfig, ConfigError> {
        let config: RunConfig = toml::from_str(text).map_err(|e| {
            let location = e
                .span()
                .map(|span| {
                    let at = span.start.min(text.len());
                    let line = hevo_runtime::suite::line_of(text, at);
                    let line_start = text.as_bytes()[..at]
                        .iter()
                        .rposition(|&b| b == b'\n')
                        .map_or(0, |i| i + 1);
                    format!(":{line}:{}", at - line_start + 1)
                })
                .unwrap_or_default();
            ConfigError::Parse {
                path: file.to_path_buf(),
                location,
                message: e.message().trim().to_string(),
            }
        })?;
        config.validate(file)?;
        Ok(config)
    }

    /// Checks every value (after command-line overrides, too).
    pub fn validate(&self, file: &Path) -> Result<(), ConfigError> {
        let bad = |key: &str, problem: String| ConfigError::Invalid {
            path: file.to_path_buf(),
            key: key.into(),
            problem,
        };
        if self.seeds.is_empty() {
            return Err(bad(
                "seeds",
                "is empty: list at least one starting harness directory".into(),
            ));
        }
        if !["params", "agent", "llm"].contains(&self.proposer.kind.as_str()) {
            return Err(bad(
                "proposer.kind",
                format!(
                    "is `{}`: use `params`, `agent` or `llm`",
                    self.proposer.kind
                ),
            ));
        }
        if self.proposer.kind == "agent" {
            match (&self.proposer.preset, &self.proposer.command) {
                (None, None) => {
                    return Err(bad("proposer.preset", "is missing: an `agent` proposer needs `preset = \"claude\"` or `\"codex\"`, or a `command`".into()))
                }
                (Some(p), None) if p != "claude" && p != "codex" => {
                    return Err(bad("proposer.preset", format!("is `{p}`: use `claude` or `codex`, or give a `command`")))
                }
                (_, Some(c)) if c.is_empty() => return Err(bad("proposer.command", "is empty: give the program and its arguments".into())),
                _ => {}
            }
        }
        for name in self.proposer.env.keys() {
            if RESERVED_AGENT_VARS.contains(&name.as_str()) {
                return Err(bad(
                    "proposer.env",
                    format!("sets `{name}`, which hevo sets for the agent: remove it"),
                ));
            }
        }
        if self.search.candidates_per_iteration == 0 {
            return Err(bad(
                "search.candidates_per_iteration",
                "is 0: use at least 1".into(),
            ));
        }
        if self.search.trials == 0 {
            return Err(bad("search.trials", "is 0: use at least 1".into()));
        }
        if self.search.jobs == Some(0) {
            return Err(bad(
                "search.jobs",
                "is 0: use at least 1, or leave it out for the number of cores".into(),
            ));
        }
        if let Err(e) = self.evaluation.strategy.parse::<StrategyName>() {
            return Err(bad("evaluation.strategy", e.to_string()));
        }
        if !(self.evaluation.rho > 0.0 && self.evaluation.rho <= 1.0) {
            return Err(bad(
                "evaluation.rho",
                format!(
                    "is {}: use a share in (0, 1], e.g. 0.2",
                    self.evaluation.rho
                ),
            ));
        }
        if let Err(e) = parse_estimator(&self.evaluation.estimator) {
            return Err(bad("evaluation.estimator", e.to_string()));
        }
        for (tier, w) in [
            ("lite", self.objective.lite),
            ("medium", self.objective.medium),
            ("heavy", self.objective.heavy),
        ] {
            if !w.iter().all(|x| x.is_finite() && *x >= 0.0) || w == [0.0, 0.0] {
                return Err(bad(
                    &format!("objective.{tier}"),
                    format!("is {w:?}: use two weights >= 0, not both 0, e.g. [1.0, 2.0]"),
                ));
            }
        }
        if self.executor.array_max == Some(0) || self.executor.array_max > Some(100_000) {
            return Err(bad(
                "executor.array_max",
                "is out of range: use 1 (no arrays) up to the cluster's MaxArraySize - 1 \
                 (Slurm's default allows 1000)"
                    .into(),
            ));
        }
        for (key, v) in [
            ("executor.cpus", self.executor.cpus.map(u64::from)),
            ("executor.mem_mb", self.executor.mem_mb),
            ("executor.pids", self.executor.pids),
            ("executor.io_mbps", self.executor.io_mbps),
        ] {
            if v == Some(0) {
                return Err(bad(
                    key,
                    "is 0, which no trial can run with: use at least 1, or leave it out for \
                     the default"
                        .into(),
                ));
            }
        }
        if self.executor.mem_mb.is_some_and(|mb| mb < 16) {
            return Err(bad(
                "executor.mem_mb",
                "is below 16 MB, too little for any interpreter to start: use e.g. 2048".into(),
            ));
        }
        if self.executor.array_throttle == Some(0) {
            return Err(bad(
                "executor.array_throttle",
                "is 0: use at least 1, or leave it out for no limit".into(),
            ));
        }
        if let Some(h) = &self.harnesspro {
            if self.objective.kind != ObjectiveKind::Pareto {
                return Err(bad(
                    "harnesspro",
                    "needs `[objective] kind = \"pareto\"`: add it, or remove `[harnesspro]`"
                        .into(),
                ));
            }
            for (key, v) in [
                ("harnesspro.core_size", h.core_size),
                ("harnesspro.core_runs", h.core_runs),
            ] {
                if v == 0 {
                    return Err(bad(key, "is 0: use at least 1".into()));
                }
            }
        }
        if let Some(v) = self.budget.max_usd {
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(
                    "budget.max_usd",
                    format!("is {v}: use a positive number of dollars"),
                ));
            }
        }
        Ok(())
    }

    /// The run's name: `name`, or the name of the directory holding the config file.
    pub fn run_name(&self, config_file: &Path) -> String {
        self.name.clone().unwrap_or_else(|| {
            config_file
                .parent()
                .and_then(|d| std::fs::canonicalize(d).ok())
                .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "run".into())
        })
    }

    /// A path from the config, resolved against the config file's directory.
    pub fn resolve(&self, config_file: &Path, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            config_file.parent().unwrap_or(Path::new(".")).join(path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RunConfig, ConfigError> {
        RunConfig::parse(text, Path::new("dir/hevo.toml"))
    }

    #[test]
    fn minimal_config_gets_documented_defaults() {
        let c = parse("suite = \"suite\"\nseeds = [\"a\"]\n").unwrap();
        assert!(
            c.model.is_none(),
            "no [model] means the embedded local model"
        );
        assert_eq!(c.proposer.kind, "params");
        assert_eq!(c.search.iterations, 10);
        assert_eq!(c.search.candidates_per_iteration, 3);
        assert_eq!(c.evaluation.strategy, "recommended");
        assert_eq!(c.evaluation.rho, 0.2);
        assert_eq!(c.objective.kind, ObjectiveKind::PassRate);
        assert_eq!(
            (c.objective.lite, c.objective.medium, c.objective.heavy),
            ([1.0, 2.0], [1.0, 1.0], [2.0, 1.0])
        );
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let err = parse("suite = \"s\"\nseeds = [\"a\"]\n[search]\niteratons = 3\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("dir/hevo.toml:4:"), "{msg}");
        assert!(msg.contains("iteratons"), "{msg}");
    }

    #[test]
    fn executor_limits_default_to_a_process_bound_only() {
        let c = parse("suite = \"s\"\nseeds = [\"a\"]\n").unwrap();
        assert_eq!(
            c.executor.limits(),
            hevo_runtime::cgroup::TrialLimits::default()
        );
        assert_eq!(c.executor.limits().pids, Some(1024));
        let c = parse(
            "suite = \"s\"\nseeds = [\"a\"]\n[executor]\nmem_mb = 512\ncpus = 2\npids = 64\nio_mbps = 50\n",
        )
        .unwrap();
        let l = c.executor.limits();
        assert_eq!(
            (l.memory_mb, l.cpus, l.pids, l.io_mbps),
            (Some(512), Some(2.0), Some(64), Some(50))
        );
    }

    #[test]
    fn bad_values_name_the_key_and_the_fix() {
        let cases = [
            ("[evaluation]\nstrategy = \"fast\"", "evaluation.strategy"),
            ("[evaluation]\nrho = 1.5", "evaluation.rho"),
            ("[proposer]\nkind = \"agent\"", "proposer.preset"),
            (
                "[proposer]\nkind = \"agent\"\npreset = \"claude\"\nenv = { HOME = \"/x\" }",
                "proposer.env",
            ),
            ("[search]\ntrials = 0", "search.trials"),
            ("[model]\nbackend = \"openai\"", "backend"),
            ("[budget]\nmax_usd = -1.0", "budget.max_usd"),
            (
                "[objective]\nkind = \"cost\"",
                "expected `pass_rate` or `pareto`",
            ),
            ("[objective]\nlite = [-1.0, 2.0]", "objective.lite"),
            ("[executor]\npids = 0", "executor.pids"),
            ("[executor]\ncpus = 0", "executor.cpus"),
            ("[executor]\nio_mbps = 0", "executor.io_mbps"),
            ("[executor]\nmem_mb = 8", "executor.mem_mb"),
            ("[executor]\npids = -1", "hevo.toml:4:8"),
        ];
        for (extra, key) in cases {
            let text = format!("suite = \"s\"\nseeds = [\"a\"]\n{extra}\n");
            let msg = parse(&text).unwrap_err().to_string();
            assert!(msg.contains(key), "{extra}: {msg}");
        }
    }

    #[test]
    fn gateway_listeners_are_checked_with_their_line() {
        let at = |gw: &str| {
            parse(&format!(
                "suite = \"s\"\nseeds = [\"a\"]\n[gateway]\n{gw}\n"
            ))
            .map(|c| c.gateway.listen())
            .map_err(|e| e.to_string())
        };
        assert_eq!(at("").unwrap(), hevo_llm::Listen::default());
        let l = at("bind = \"0.0.0.0:0\"\nadvertise = \"http://login\"").unwrap();
        assert!(l.is_exposed());
        assert_eq!(l.advertise.as_deref(), Some("http://login"));
        assert!(at("bind = \"10.0.0.5:8400\"").is_ok());
        for (gw, says) in [
            ("bind = \"login:8400\"", "gateway.bind"),
            ("bind = \"0.0.0.0:8400\"", "gateway.advertise"),
            (
                "advertise = \"http://login:8400\"",
                "without `gateway.bind`",
            ),
            (
                "bind = \"0.0.0.0:1\"\nadvertise = \"login:8400\"",
                "http://",
            ),
            ("bnd = \"0.0.0.0:1\"", "bnd"),
        ] {
            let msg = at(gw).unwrap_err();
            assert!(msg.contains("dir/hevo.toml:"), "{gw}: {msg}");
            assert!(msg.contains(says), "{gw}: {msg}");
        }
        // The location is the `[gateway]` table's line (the checks span its keys).
        let msg = at("bind = \"nope\"").unwrap_err();
        assert!(msg.contains("dir/hevo.toml:3:"), "{msg}");
    }

    #[test]
    fn empty_seeds_are_rejected() {
        let msg = parse("suite = \"s\"\nseeds = []\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("seeds"), "{msg}");
    }
}
