//! The folders a `hevo.toml` names: each seed must be a harness folder, the suite a folder
//! and the run directory a folder of its own, checked before a run starts, so a typo is
//! named by its key and line (not by the read that failed later, inside a run directory
//! already made).

use std::path::Path;

use super::{ConfigError, RunConfig};

impl RunConfig {
    /// Checks that every `seeds` entry is a folder holding `harness.toml`.
    pub fn check_seeds(&self, file: &Path) -> Result<(), ConfigError> {
        for seed in &self.seeds {
            let dir = self.resolve(file, seed);
            let missing = if dir.is_dir() {
                (!dir.join("harness.toml").is_file()).then_some("holds no harness.toml")
            } else {
                Some(absent(&dir))
            };
            if let Some(missing) = missing {
                return Err(ConfigError::invalid_at_line(
                    file,
                    "seeds",
                    format!(
                        "names `{}`, which {missing} ({}): seeds name folders holding \
                         harness.toml, relative to hevo.toml (docs/harness-protocol.md)",
                        seed.display(),
                        dir.display()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks that `suite` is a folder (after `setup`, which may have made it).
    pub fn check_suite(&self, file: &Path) -> Result<(), ConfigError> {
        let dir = self.resolve(file, &self.suite);
        if dir.is_dir() {
            return Ok(());
        }
        let build = match &self.setup {
            Some(_) => " (`setup` ran and did not make it)",
            None => "",
        };
        Err(ConfigError::invalid_at_line(
            file,
            "suite",
            format!(
                "is `{}`, which {} ({}){build}: suite names the folder holding suite.toml \
                 and tasks.jsonl, relative to hevo.toml (docs/suites.md)",
                self.suite.display(),
                absent(&dir),
                dir.display()
            ),
        ))
    }

    /// Why `run_dir` cannot hold this config's run on `suite` (its loaded suite), if it
    /// cannot: [`hevo_runtime::run_place::problem`] with the seeds and hevo.toml's folder.
    /// The message follows the key or flag that named it.
    pub fn run_dir_problem(
        &self,
        file: &Path,
        run_dir: &Path,
        suite: &hevo_runtime::suite::Suite,
    ) -> Option<String> {
        let seeds: Vec<(String, std::path::PathBuf)> = self
            .seeds
            .iter()
            .map(|s| (s.display().to_string(), self.resolve(file, s)))
            .collect();
        let harnesses: Vec<(&str, &Path)> = seeds
            .iter()
            .map(|(name, dir)| (name.as_str(), dir.as_path()))
            .collect();
        let config_dir = file.parent().unwrap_or(Path::new("."));
        hevo_runtime::run_place::problem(run_dir, suite, &harnesses, Some(config_dir))
    }
}

/// Why `path` is not a folder.
fn absent(path: &Path) -> &'static str {
    if path.exists() {
        "is not a folder"
    } else {
        "does not exist"
    }
}
