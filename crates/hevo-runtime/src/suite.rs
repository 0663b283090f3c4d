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

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::scorer::ScorerConfig;
use crate::task::{Split, Task};
use crate::tests_lock::TestsLock;

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
        Suite::check(dir, config_text.as_deref(), tasks_bytes.as_deref())
    }

    /// Parses and validates a suite from the texts of its `suite.toml` and `tasks.jsonl`, as
    /// if read from `dir` (which names the files in every problem and resolves `files`
    /// folders and scorer paths; nothing is read except those).
    pub fn parse(dir: &Path, suite_toml: &str, tasks_jsonl: &[u8]) -> Result<Suite, SuiteError> {
        Suite::check(dir.to_path_buf(), Some(suite_toml), Some(tasks_jsonl))
    }

    /// The checks of [`Suite::load`] on file contents (`None`: the file is missing).
    fn check(
        dir: PathBuf,
        suite_toml: Option<&str>,
        tasks_jsonl: Option<&[u8]>,
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
                parse_tasks(&text, &tasks_path, &dir, strata.as_deref(), &mut problems)
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
            .and_then(|c| check_lock(&dir, &c.scorer, &tasks, &mut problems));
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

    /// SHA-256 (hex) over what defines the suite's results: `suite.toml`, `tasks.jsonl`, every
    /// task's `files` folder and the scorer's files (`tests` folder, scripts named in
    /// `command`). Other files in the directory (a harness kept beside it, run directories)
    /// do not count.
    pub fn content_hash(&self) -> std::io::Result<String> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for name in ["suite.toml", "tasks.jsonl"] {
            h.update(std::fs::read(self.dir.join(name))?);
            h.update([0]);
        }
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
        for p in parts {
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

/// Reads and checks `[scorer] lock`: every file of the tests folder must match it and
/// every task must have a frozen test; each difference is one problem naming the file.
fn check_lock(
    dir: &Path,
    scorer: &ScorerConfig,
    tasks: &[Task],
    problems: &mut Vec<Problem>,
) -> Option<TestsLock> {
    let ScorerConfig::Command {
        tests: Some(tests),
        lock: Some(lock_name),
        ..
    } = scorer
    else {
        return None;
    };
    let lock_path = dir.join(lock_name);
    let lock = match TestsLock::read(&lock_path) {
        Ok(lock) => lock,
        Err(message) => {
            problems.push(Problem {
                path: lock_path,
                line: None,
                message,
            });
            return None;
        }
    };
    if &lock.tests != tests {
        problems.push(Problem {
            path: lock_path.clone(),
            line: None,
            message: format!(
                "the lock freezes the folder `{}` but `[scorer] tests` is `{tests}`; make them \
                 the same",
                lock.tests
            ),
        });
        return None;
    }
    if !dir.join(tests).is_dir() {
        // `ScorerConfig::validate` has reported the missing folder.
        return None;
    }
    let refreeze = format!("hevo tests freeze {}", dir.display());
    for m in lock.check(dir, &refreeze) {
        problems.push(Problem {
            path: m.path,
            line: None,
            message: m.message,
        });
    }
    for t in tasks {
        if lock.task_files(&t.id).is_empty() {
            problems.push(Problem {
                path: dir.join("tasks.jsonl"),
                line: Some(t.line),
                message: format!(
                    "task `{}` has no frozen test (nothing in `{tests}/{}/` in {}); write \
                     tests for it and re-freeze with `{refreeze}`, or remove the task",
                    t.id,
                    t.id,
                    lock_path.display()
                ),
            });
        }
    }
    Some(lock)
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

const KNOWN_KEYS: [&str; 7] = ["id", "split", "group", "input", "expected", "files", "meta"];

/// The text of `tasks.jsonl` with every line that is not valid UTF-8 (or a leading
/// byte-order mark) reported and blanked, so line numbers stay those of the file.
fn decode_lines(bytes: &[u8], path: &Path, problems: &mut Vec<Problem>) -> String {
    let mut out = String::with_capacity(bytes.len());
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let mut raw = raw;
        if i == 0 {
            if let Some(rest) = raw.strip_prefix(b"\xEF\xBB\xBF") {
                problems.push(Problem {
                    path: path.to_path_buf(),
                    line: Some(1),
                    message: "the file starts with a UTF-8 byte-order mark; save it as UTF-8 \
                              without BOM (e.g. `sed -i '1s/^\\xEF\\xBB\\xBF//' tasks.jsonl`)"
                        .into(),
                });
                raw = rest;
            }
        }
        match std::str::from_utf8(raw) {
            Ok(s) => out.push_str(s),
            Err(e) => problems.push(Problem {
                path: path.to_path_buf(),
                line: Some(i + 1),
                message: format!(
                    "not valid UTF-8 (bad byte at column {}); save the file as UTF-8",
                    e.valid_up_to() + 1
                ),
            }),
        }
        out.push('\n');
    }
    out
}

/// Parses `tasks.jsonl` text, pushing one problem per bad line (a line may have several).
fn parse_tasks(
    text: &str,
    path: &Path,
    suite_dir: &Path,
    strata: Option<&[String]>,
    problems: &mut Vec<Problem>,
) -> Vec<Task> {
    let mut tasks = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut sanitized: HashMap<String, (String, usize)> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let mut bad = |message: String| {
            problems.push(Problem {
                path: path.to_path_buf(),
                line: Some(line),
                message,
            })
        };
        let value: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(err) => {
                bad(format!(
                    "invalid JSON ({err}); each line must be one JSON object such as \
                     {{\"id\": \"t1\", \"split\": \"val\", \"input\": ..., \"expected\": ...}}"
                ));
                continue;
            }
        };
        let Value::Object(obj) = value else {
            bad("not a JSON object; each line must be one task object".into());
            continue;
        };
        let before = problems.len();
        let mut bad = |message: String| {
            problems.push(Problem {
                path: path.to_path_buf(),
                line: Some(line),
                message,
            })
        };
        for key in obj.keys() {
            if !KNOWN_KEYS.contains(&key.as_str()) {
                bad(format!(
                    "unknown field `{key}`; allowed fields are {}",
                    KNOWN_KEYS.join(", ")
                ));
            }
        }
        let id = match obj.get("id") {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(_) => {
                bad("`id` must be a non-empty string".into());
                None
            }
            None => {
                bad("missing field `id` (a unique task id string)".into());
                None
            }
        };
        if let Some(id) = &id {
            if let Some(first) = seen.get(id) {
                bad(format!(
                    "duplicate id `{id}` (first used on line {first}); give each task a unique id"
                ));
            } else {
                let name = crate::task::sanitize(id);
                match sanitized.get(&name) {
                    Some((other, first)) if other != id => bad(format!(
                        "id `{id}` and id `{other}` (line {first}) share the trace directory \
                         name `{name}` (characters other than letters, digits, `-`, `_` and `.` \
                         become `_`); rename one of them"
                    )),
                    _ => {
                        sanitized.insert(name, (id.clone(), line));
                    }
                }
            }
        }
        let split = match obj.get("split") {
            Some(Value::String(s)) => match Split::parse(s) {
                Some(split) => Some(split),
                None => {
                    bad(format!(
                        "unknown split `{s}`; use one of `train`, `val`, `test`"
                    ));
                    None
                }
            },
            Some(_) => {
                bad("`split` must be a string: `train`, `val` or `test`".into());
                None
            }
            None => {
                bad("missing field `split` (`train`, `val` or `test`)".into());
                None
            }
        };
        let group = match obj.get("group") {
            None | Some(Value::Null) => None,
            Some(Value::String(g)) => {
                if let Some(strata) = strata {
                    if !strata.iter().any(|s| s == g) {
                        bad(format!(
                            "group `{g}` is not in the suite's `strata` ({}); add it to \
                             `strata` in suite.toml or fix the group",
                            strata.join(", ")
                        ));
                    }
                }
                Some(g.clone())
            }
            Some(_) => {
                bad("`group` must be a string".into());
                None
            }
        };
        if strata.is_some() && group.is_none() && obj.get("group").is_none() {
            bad(
                "missing field `group`: the suite declares `strata`, so every task needs one"
                    .into(),
            );
        }
        let input = obj.get("input").cloned();
        if input.is_none() {
            bad("missing field `input` (any JSON; it is what the harness reads on stdin)".into());
        }
        let expected = obj.get("expected").cloned();
        if expected.is_none() {
            bad("missing field `expected` (any JSON; what the scorer compares against)".into());
        }
        let files = match obj.get("files") {
            None | Some(Value::Null) => None,
            Some(Value::String(rel)) => match resolve_files(suite_dir, rel) {
                Ok(p) => Some(p),
                Err(msg) => {
                    bad(msg);
                    None
                }
            },
            Some(_) => {
                bad(
                    "`files` must be a string: a folder path relative to the suite directory"
                        .into(),
                );
                None
            }
        };
        if let Some(id) = &id {
            seen.entry(id.clone()).or_insert(line);
        }
        if problems.len() == before {
            tasks.push(Task {
                id: id.unwrap_or_default(),
                split: split.unwrap_or(Split::Val),
                group,
                input: input.unwrap_or(Value::Null),
                expected: expected.unwrap_or(Value::Null),
                files,
                line,
            });
        }
    }
    tasks
}

/// Resolves a task's `files` folder inside the suite directory.
fn resolve_files(suite_dir: &Path, rel: &str) -> Result<PathBuf, String> {
    let p = Path::new(rel);
    if p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "`files` = `{rel}` must be a relative path inside the suite directory (no `..`)"
        ));
    }
    let full = suite_dir.join(p);
    if !full.is_dir() {
        return Err(format!(
            "`files` folder `{rel}` does not exist in the suite directory; create it or remove \
             the field"
        ));
    }
    Ok(full)
}

/// The content key of a task in a suite: SHA-256 over its input, expected answer, the
/// scorer's configuration, its `files` folder and, when the tests are frozen, the lock's
/// hashes of the task's tests. A stored trial counts for the task only while the key is the
/// same, so editing `tasks.jsonl`, `[scorer]` or a frozen test (and re-freezing) re-runs
/// what changed.
pub fn task_key(task: &crate::task::Task, suite: &Suite) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let mut parts = vec![
        task.input.to_string(),
        task.expected.to_string(),
        serde_json::to_string(&suite.config.scorer).unwrap_or_default(),
        task.files
            .as_deref()
            .and_then(|f| crate::harness::content_hash(f).ok())
            .unwrap_or_default(),
    ];
    // Only a locked suite has this part, so the keys of every other suite are unchanged.
    if let Some(lock) = &suite.lock {
        parts.push(lock.task_digest(&task.id));
    }
    for part in parts {
        h.update(part.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_suite(dir: &Path, toml: &str, tasks: &str) {
        std::fs::write(dir.join("suite.toml"), toml).unwrap();
        std::fs::write(dir.join("tasks.jsonl"), tasks).unwrap();
    }

    const TOML: &str = "name = \"t\"\n[scorer]\nkind = \"exact\"\n";

    #[test]
    fn loads_a_valid_suite() {
        let d = tempfile::tempdir().unwrap();
        write_suite(
            d.path(),
            TOML,
            "{\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":2}\n\n\
             {\"id\":\"b\",\"split\":\"train\",\"group\":\"g\",\"input\":{},\"expected\":null}\n",
        );
        let s = Suite::load(d.path()).unwrap();
        assert_eq!(s.tasks.len(), 2);
        assert_eq!(s.split(Split::Val).len(), 1);
        assert_eq!(s.tasks[1].line, 3);
        assert_eq!(s.tasks[1].expected, Value::Null);
    }

    #[test]
    fn reports_every_bad_line_at_once() {
        let d = tempfile::tempdir().unwrap();
        write_suite(
            d.path(),
            TOML,
            "{\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":2}\n\
             {\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":2}\n\
             {\"id\":\"c\",\"split\":\"dev\",\"input\":1,\"expected\":2}\n\
             {not json\n\
             {\"id\":\"e\",\"split\":\"val\",\"expected\":2}\n\
             {\"id\":\"f\",\"split\":\"val\",\"input\":1,\"expected\":2,\"files\":\"nope\"}\n",
        );
        let err = Suite::load(d.path()).unwrap_err();
        let SuiteError::Invalid { problems, .. } = &err else {
            panic!("{err}")
        };
        let lines: Vec<_> = problems.iter().map(|p| p.line.unwrap()).collect();
        assert_eq!(lines, vec![2, 3, 4, 5, 6], "{err}");
        let text = err.to_string();
        assert!(text.contains("tasks.jsonl:2: duplicate id `a`"), "{text}");
        assert!(text.contains("unknown split `dev`"), "{text}");
        assert!(text.contains("invalid JSON"), "{text}");
        assert!(text.contains("missing field `input`"), "{text}");
        assert!(
            text.contains("`files` folder `nope` does not exist"),
            "{text}"
        );
    }

    #[test]
    fn strata_constrain_groups() {
        let d = tempfile::tempdir().unwrap();
        write_suite(
            d.path(),
            "name = \"t\"\nstrata = [\"x\"]\n[scorer]\nkind = \"label\"\n",
            "{\"id\":\"a\",\"split\":\"val\",\"group\":\"y\",\"input\":1,\"expected\":2}\n",
        );
        let err = Suite::load(d.path()).unwrap_err().to_string();
        assert!(
            err.contains("group `y` is not in the suite's `strata`"),
            "{err}"
        );
    }

    #[test]
    fn bad_toml_is_reported_with_the_file() {
        let d = tempfile::tempdir().unwrap();
        write_suite(d.path(), "name = \"t\"\n[scorer]\nkind = \"fuzzy\"\n", "");
        let err = Suite::load(d.path()).unwrap_err().to_string();
        assert!(err.contains("suite.toml"), "{err}");
    }
}
