//! The folders a `hevo.toml` names: each seed must be a harness folder and the suite a
//! folder, checked before a run starts, so a typo is named by its key and line (not by the
//! read that failed later, inside a run directory already made).

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
}

impl RunConfig {
    /// Why `run_dir` cannot hold this config's run, if it cannot: it is a file, or the
    /// folder of `hevo.toml` or one holding it, the suite or a seed (the run's hevo.db,
    /// archive/ and traces would be written among them). The message follows the key or
    /// flag that named it.
    pub fn run_dir_problem(&self, file: &Path, run_dir: &Path) -> Option<String> {
        if run_dir.exists() && !run_dir.is_dir() {
            return Some(
                "is a file, not a folder: give the folder the run is kept in (it is made \
                 when missing), e.g. runs/<name>"
                    .into(),
            );
        }
        // A folder that does not exist yet holds nothing.
        let run = run_dir.canonicalize().ok()?;
        let config_dir = file.parent().unwrap_or(Path::new("."));
        let (what, dir) = std::iter::once(("the folder of hevo.toml", config_dir.to_path_buf()))
            .chain(std::iter::once((
                "the suite",
                self.resolve(file, &self.suite),
            )))
            .chain(self.seeds.iter().map(|s| ("a seed", self.resolve(file, s))))
            .find(|(_, dir)| dir.canonicalize().is_ok_and(|d| d.starts_with(&run)))?;
        Some(format!(
            "is or holds {what} (`{}`): a run writes hevo.db, archive/ and traces into its \
             directory, so give it a folder of its own, e.g. runs/<name> beside hevo.toml \
             (the default when run_dir is left out)",
            dir.display()
        ))
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
