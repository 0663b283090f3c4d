//! Task suites: a directory with `suite.toml` and `tasks.jsonl`, loaded and validated.
//!
//! Loading checks everything up front and reports every bad line at once (file, line,
//! reason and fix), so a user never learns about a broken task after trials started. This
//! module only reads files: it never runs a process and never touches the store.
//!
//! ```text
//! suite.toml    name = "sentiment"
//!               strata = ["movies", "products"]      # optional: the allowed `group`s
//!               [scorer]
//!               kind = "label"                        # label | exact | command | program
//! tasks.jsonl   {"id": "m01", "split": "val", "group": "movies",
//!                "input": {"text": "..."}, "expected": "positive", "files": "files/m01"}
//! ```

mod key;
mod lock;
mod tasks;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::scorer::ScorerConfig;
use crate::task::{Split, Task};
use crate::tests_lock::TestsLock;

pub use self::key::task_key;
use self::lock::check_lock;
use self::tasks::{decode_lines, parse_tasks};

/// The parsed `suite.toml`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteConfig {
    /// The suite's name.
    pub name: String,
    /// How answers are scored.
    pub scorer: ScorerConfig,
    /// Optional list of allowed task groups (strata).
    #[serde(default)]
    pub strata: Option<Vec<String>>,
    /// Optional free-text description.
    #[serde(default)]
    pub description: Option<String>,
}

/// A loaded and validated suite.
#[derive(Clone, Debug)]
pub struct Suite {
    /// Canonical path of the suite directory.
    pub dir: PathBuf,
    /// The parsed `suite.toml`.
    pub config: SuiteConfig,
    /// All tasks, in file order.
    pub tasks: Vec<Task>,
    /// The frozen tests (`[scorer] lock`), checked against the files when loaded.
    pub lock: Option<TestsLock>,
}

/// One problem found while loading a suite: where, what, and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file the problem is in.
    pub path: PathBuf,
    /// The 1-based line, when the problem is on one line.
    pub line: Option<usize>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// Why a suite could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SuiteError {
    /// The suite directory or one of its files could not be read.
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// One or more problems in `suite.toml` or `tasks.jsonl`; all of them are listed.
    #[error("{} problem(s) in suite `{}`:\n{}", problems.len(), dir.display(), list(problems))]
    Invalid {
        /// The suite directory.
        dir: PathBuf,
        /// Every problem found.
        problems: Vec<Problem>,
    },
}

/// The problem of a `tasks.jsonl` with no task in it (empty, or blank lines only): the
/// whole file, so no line, and the format to write.
fn no_tasks(path: &Path) -> Problem {
    Problem {
        path: path.to_path_buf(),
        line: None,
        message: "has no tasks: write one JSON object per line, such as {\"id\": \"t1\", \
                  \"split\": \"val\", \"input\": ..., \"expected\": ...} (docs/suites.md)"
            .into(),
    }
}

fn list(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Suite {
    /// Loads `suite.toml` and `tasks.jsonl` from `dir`, reporting every problem at once.
    pub fn load(dir: &Path) -> Result<Suite, SuiteError> {
        Suite::read_and_check(dir, None)
    }

    /// Loads the suite as [`Suite::load`] does, with `lock` in place of the `[scorer] lock`
    /// file: the suite as it will be once `lock` is written there. `hevo tests freeze` checks
    /// with it first, so it never writes a lock the suite does not load with.
    pub fn load_with_lock(dir: &Path, lock: TestsLock) -> Result<Suite, SuiteError> {
        Suite::read_and_check(dir, Some(lock))
    }

    /// Reads the suite's files and checks them ([`Suite::check`]).
    fn read_and_check(dir: &Path, lock: Option<TestsLock>) -> Result<Suite, SuiteError> {
        let dir = dir.canonicalize().map_err(|source| SuiteError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let read = |name: &str| {
            let path = dir.join(name);
            match std::fs::read(&path) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(source) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(source) => Err(SuiteError::Read { path, source }),
            }
        };
        let config_bytes = read("suite.toml")?;
        let config_text = match config_bytes.map(String::from_utf8) {
            None => None,
            Some(Ok(text)) => Some(text),
            Some(Err(e)) => {
                return Err(SuiteError::Read {
                    path: dir.join("suite.toml"),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
                })
            }
        };
        let tasks_bytes = read("tasks.jsonl")?;
        Suite::check(dir, config_text.as_deref(), tasks_bytes.as_deref(), lock)
    }

    /// Parses and validates a suite from the texts of its `suite.toml` and `tasks.jsonl`, as
    /// if read from `dir` (which names the files in every problem and resolves `files`
    /// folders and scorer paths; nothing is read except those).
    pub fn parse(dir: &Path, suite_toml: &str, tasks_jsonl: &[u8]) -> Result<Suite, SuiteError> {
        Suite::check(dir.to_path_buf(), Some(suite_toml), Some(tasks_jsonl), None)
    }

    /// The checks of [`Suite::load`] on file contents (`None`: the file is missing), against
    /// `lock` when given instead of the lock file.
    fn check(
        dir: PathBuf,
        suite_toml: Option<&str>,
        tasks_jsonl: Option<&[u8]>,
        lock: Option<TestsLock>,
    ) -> Result<Suite, SuiteError> {
        let mut problems = Vec::new();
        let config_path = dir.join("suite.toml");
        let config = match suite_toml {
            Some(text) => match toml::from_str::<SuiteConfig>(text) {
                Ok(config) => {
                    for message in config.scorer.validate(&dir) {
                        problems.push(Problem {
                            path: config_path.clone(),
                            line: None,
                            message,
                        });
                    }
                    Some(config)
                }
                Err(err) => {
                    problems.push(Problem {
                        path: config_path.clone(),
                        line: err.span().map(|span| line_of(text, span.start)),
                        message: format!(
                            "{} (expected `name = \"...\"` and a `[scorer]` table with \
                             `kind = \"label\" | \"exact\" | \"command\" | \"program\"`)",
                            err.message()
                        ),
                    });
                    None
                }
            },
            None => {
                problems.push(Problem {
                    path: config_path.clone(),
                    line: None,
                    message: "missing: a suite directory needs `suite.toml` (name, [scorer]) \
                              beside `tasks.jsonl`"
                        .into(),
                });
                None
            }
        };
        let strata = config.as_ref().and_then(|c| c.strata.clone());
        let tasks_path = dir.join("tasks.jsonl");
        let tasks = match tasks_jsonl {
            Some(bytes) => {
                let text = decode_lines(bytes, &tasks_path, &mut problems);
                let tasks = parse_tasks(&text, &tasks_path, &dir, strata.as_deref(), &mut problems);
                if tasks.is_empty() && !problems.iter().any(|p| p.path == tasks_path) {
                    problems.push(no_tasks(&tasks_path));
                }
                tasks
            }
            None => {
                problems.push(Problem {
                    path: tasks_path.clone(),
                    line: None,
                    message: "missing: a suite directory needs `tasks.jsonl`, one JSON task \
                              per line"
                        .into(),
                });
                Vec::new()
            }
        };
        let lock = config
            .as_ref()
            .and_then(|c| check_lock(&dir, &c.scorer, &tasks, lock, &mut problems));
        match config {
            Some(config) if problems.is_empty() => Ok(Suite {
                dir,
                config,
                tasks,
                lock,
            }),
            _ => Err(SuiteError::Invalid { dir, problems }),
        }
    }

    /// The files and folders besides `suite.toml` and `tasks.jsonl` that define the suite's
    /// results: every task's `files` folder and the scorer's files (`tests` folder, scripts
    /// named in `command`), sorted, once each. They are read by scorers or copied into
    /// trials' working directories, so nothing of a run may be kept inside them.
    pub fn content_paths(&self) -> Vec<PathBuf> {
        let mut parts: Vec<PathBuf> = self.tasks.iter().filter_map(|t| t.files.clone()).collect();
        match &self.config.scorer {
            ScorerConfig::Command { command, tests, .. } => {
                if let Some(t) = tests {
                    parts.push(self.dir.join(t));
                }
                parts.extend(
                    command
                        .iter()
                        .flatten()
                        .map(|a| PathBuf::from(a.replace("{suite}", &self.dir.to_string_lossy()))),
                );
            }
            ScorerConfig::Program { command, .. } => {
                parts.extend(
                    crate::harness::resolve_argv(command, &self.dir)
                        .iter()
                        .map(PathBuf::from),
                );
            }
            _ => {}
        }
        parts.sort();
        parts.dedup();
        parts
    }

    /// SHA-256 (hex) over what defines the suite's results: `suite.toml`, `tasks.jsonl` and
    /// its [`Suite::content_paths`]. Other files in the directory (a harness kept beside it,
    /// run directories) do not count.
    pub fn content_hash(&self) -> std::io::Result<String> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for name in ["suite.toml", "tasks.jsonl"] {
            h.update(std::fs::read(self.dir.join(name))?);
            h.update([0]);
        }
        for p in self.content_paths() {
            if !p.starts_with(&self.dir) {
                continue;
            }
            if p.is_dir() {
                h.update(crate::harness::content_hash(&p)?.as_bytes());
            } else if p.is_file() {
                h.update(std::fs::read(&p)?);
            } else {
                continue;
            }
            h.update(
                p.strip_prefix(&self.dir)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .as_bytes(),
            );
            h.update([0]);
        }
        Ok(hex::encode(h.finalize()))
    }

    /// The tasks of one split, in file order.
    pub fn split(&self, split: Split) -> Vec<&Task> {
        self.tasks.iter().filter(|t| t.split == split).collect()
    }

    /// The number of tasks per split.
    pub fn split_counts(&self) -> BTreeMap<Split, usize> {
        let mut counts = BTreeMap::new();
        for t in &self.tasks {
            *counts.entry(t.split).or_default() += 1;
        }
        counts
    }
}

/// The 1-based line of byte offset `at` in `text` (clamped to the text, on any byte).
pub fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
