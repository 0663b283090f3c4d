//! `tasks.jsonl`: decoded line by line and parsed into tasks, one problem per bad line.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::Problem;
use crate::task::{Split, Task};

const KNOWN_KEYS: [&str; 7] = ["id", "split", "group", "input", "expected", "files", "meta"];

/// The text of `tasks.jsonl` with every line that is not valid UTF-8 (or a leading
/// byte-order mark) reported and blanked, so line numbers stay those of the file.
pub(super) fn decode_lines(bytes: &[u8], path: &Path, problems: &mut Vec<Problem>) -> String {
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
pub(super) fn parse_tasks(
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
            let chars = id.chars().count();
            if chars > crate::task::MAX_ID_CHARS {
                bad(format!(
                    "id `{}...` is {chars} characters long; a task's id names its trace \
                     directory, so use at most {} characters",
                    id.chars().take(24).collect::<String>(),
                    crate::task::MAX_ID_CHARS
                ));
            }
            if let Some(first) = seen.get(id) {
                bad(format!(
                    "duplicate id `{id}` (first used on line {first}); give each task a unique id"
                ));
            } else {
                let name = crate::task::sanitize(id);
                match sanitized.get(&name) {
                    Some((other, first)) if other != id => bad(format!(
                        "id `{id}` and id `{other}` (line {first}) share the trace directory \
                         name `{name}` (characters other than ASCII letters and digits, `-`, \
                         `_` and `.` become `_`); rename one of them"
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

/// Resolves a task's `files` folder inside the suite directory: it must exist and be a
/// folder (or a link to one), not a file.
fn resolve_files(suite_dir: &Path, rel: &str) -> Result<PathBuf, String> {
    let p = Path::new(rel);
    if p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "`files` = `{rel}` must be a relative path inside the suite directory (no `..`)"
        ));
    }
    let full = suite_dir.join(p);
    if full.is_dir() {
        return Ok(full);
    }
    Err(if full.exists() {
        format!(
            "`files` = `{rel}` is not a folder; name a folder of the suite (its contents are \
             copied into the trial's working directory), e.g. move the file into \
             `files/<task id>/` and name that"
        )
    } else {
        format!(
            "`files` folder `{rel}` does not exist in the suite directory; create it or remove \
             the field"
        )
    })
}
