//! A task and the split it belongs to: the data every other room of the runtime shares.
//!
//! This module holds types only (no IO): suites load tasks, scorers score them, trials run
//! them.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which part of a suite a task belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Tasks a harness may learn from (`prepare` sees their expected answers).
    Train,
    /// Tasks candidates are scored on during a search.
    Val,
    /// Held-out tasks, scored once at the end.
    Test,
}

impl Split {
    /// The split's name as written in `tasks.jsonl`.
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
            Split::Test => "test",
        }
    }

    /// Parses `train`, `val` or `test`.
    pub fn parse(s: &str) -> Option<Split> {
        match s {
            "train" => Some(Split::Train),
            "val" => Some(Split::Val),
            "test" => Some(Split::Test),
            _ => None,
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One task of a suite.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Task {
    /// Unique id within the suite.
    pub id: String,
    /// The split it belongs to.
    pub split: Split,
    /// Optional stratum (e.g. the dataset it comes from).
    pub group: Option<String>,
    /// What the harness receives on stdin.
    pub input: Value,
    /// What the scorer compares against; never given to a harness.
    pub expected: Value,
    /// Absolute path of a folder copied into the trial's working directory.
    pub files: Option<PathBuf>,
    /// The 1-based line of `tasks.jsonl` the task came from.
    pub line: usize,
}

/// The longest task id, in characters: a task's trace directory is named by its id
/// ([`sanitize`]d, one byte per character), and a file name may have at most 255 bytes;
/// the margin leaves room for what hevo adds to it.
pub const MAX_ID_CHARS: usize = 200;

/// Makes a string safe as one path component: ASCII letters and digits, `-`, `_` and `.`
/// are kept, every other character (any non-ASCII letter too) becomes `_`, and `_` is
/// prefixed to an empty result or one starting with `.`. Run and trace directory names
/// depend on this rule, so it never changes.
pub fn sanitize(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with('.') {
        format!("_{out}")
    } else {
        out
    }
}
