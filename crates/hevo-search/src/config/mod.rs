//! `hevo.toml`: the configuration of one search run, typed and validated.
//!
//! Every key is documented in `docs/config.md`. Unknown keys and bad values are errors that
//! name the file, the key and the fix (exit code 2), before anything runs. Relative paths
//! are resolved against the directory that holds `hevo.toml`.
//!
//! One file per part of the schema: this one holds [`RunConfig`] (the whole file) and its
//! loading; `validate.rs` the checks of every value; `paths.rs` those of the seed and
//! suite folders (run before a search starts); `error.rs` [`ConfigError`]; the
//! sections live in `proposer.rs`, `search.rs` (`[search]`, `[budget]`), `evaluation.rs`,
//! `objective.rs` (`[objective]`, `[harnesspro]`), `executor.rs` (with `cluster.rs`, its
//! checks against the Slurm cluster at start) and `gateway.rs`.

mod cluster;
mod error;
mod evaluation;
mod executor;
mod gateway;
mod keys;
pub mod locate;
mod objective;
mod paths;
mod proposer;
mod search;
#[cfg(test)]
mod tests;
mod validate;

use std::path::{Path, PathBuf};

use hevo_llm::ModelLayerConfig;
use serde::Deserialize;

pub use error::ConfigError;
pub use evaluation::EvaluationConfig;
pub use executor::{ExecutorConfig, ExecutorKind};
pub use gateway::ListenConfig;
pub use objective::{HarnessProConfig, ObjectiveConfig, ObjectiveKind};
pub use proposer::ProposerConfig;
pub use search::{BudgetConfig, SearchConfig};

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
            // toml names the line but often not the key: name it, and where keys are listed.
            let message = e.message().trim();
            let message = match e.span().and_then(|s| locate::key_at(text, s.start)) {
                Some(key) if !message.contains(&format!("`{key}`")) => {
                    format!("`{key}`: {message} (docs/config.md lists every key with its type)")
                }
                _ => message.to_string(),
            };
            ConfigError::Parse {
                path: file.to_path_buf(),
                location,
                message,
            }
        })?;
        config.validate(file).map_err(|e| e.located(text))?;
        Ok(config)
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
