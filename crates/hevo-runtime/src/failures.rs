//! Failures shown where they happen: the trials of an evaluation or a search that did not
//! end in `pass` or `fail`, grouped by class, each class with its count and its first
//! trial (candidate, task, the first lines of the error and of the harness's stderr, the
//! trace path), so `hevo eval`, `hevo run` and `hevo finalize` can print why instead of a
//! bare count.
//!
//! The class refines the stored status with the cause [`crate::trial`] wrote in `error`:
//!
//! | class | status | when |
//! |---|---|---|
//! | `over_limit` | `harness_error` | stopped by one of its limits: memory, processes, disk |
//! | `crash` | `harness_error` | non-zero exit or killed by a signal |
//! | `bad_output` | `harness_error` | empty stdout, a last line that is not JSON, or an answer the scorer fails on (it scores the expected one) |
//! | `timeout` | `timeout` | past the time limit |
//! | `budget_exceeded` | `budget_exceeded` | a model call over a cap |
//! | `model_error` | `infra_error` | the model backend failed (after the gateway's retries) |
//! | `scorer_error` | `infra_error` | the suite's scorer could not score |
//! | `infra_error` | `infra_error` | anything else of ours (spawn, IO, sandbox set-up) |

use std::path::Path;

use crate::printable::one_line;
use serde::Serialize;
use serde_json::{json, Value};

/// Lines of an error message (and of the stderr tail) shown per class.
pub const SHOWN_LINES: usize = 3;
/// Characters of one shown line.
const SHOWN_CHARS: usize = 240;

/// The first trial of a failure class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FirstFailure {
    /// The candidate (harness) name.
    pub candidate: String,
    /// The task id.
    pub task: String,
    /// The trial index.
    pub trial: u32,
    /// The first [`SHOWN_LINES`] lines of the stored error.
    pub error: String,
    /// The last [`SHOWN_LINES`] non-empty lines of the trial's stderr, when it wrote any.
    pub stderr_tail: Vec<String>,
    /// The trace prefix (`<trace>.stdout`, `<trace>.stderr`).
    pub trace: Option<String>,
}

/// One failure class: how many trials, and the first one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailureClass {
    /// The class (see the module table).
    pub class: &'static str,
    /// The stored status of its trials.
    pub status: String,
    /// Trials of the class.
    pub count: usize,
    /// The first trial of the class, in the order trials were added.
    pub first: FirstFailure,
}

/// What every cause a trial's limits write contains, the key that sets the limit
/// (`([executor] mem_mb, --mem-mb)`, `pids`, `disk_mb`): how a trial its limits stopped is
/// told from a crash.
const LIMIT_NAMED: &str = "([executor] ";

/// The class of a trial's stored status and error; `None` for `pass` and `fail`.
pub fn class_of(status: &str, error: Option<&str>) -> Option<&'static str> {
    let error = error.unwrap_or("");
    match status {
        "pass" | "fail" => None,
        "harness_error" if error.contains(LIMIT_NAMED) => Some("over_limit"),
        "harness_error" if error.starts_with("exited with") || error.starts_with("killed by") => {
            Some("crash")
        }
        "harness_error" => Some("bad_output"),
        "timeout" => Some("timeout"),
        "budget_exceeded" => Some("budget_exceeded"),
        "infra_error" if error.contains("failed upstream") => Some("model_error"),
        "infra_error" if error.starts_with("scorer:") => Some("scorer_error"),
        _ => Some("infra_error"),
    }
}

/// Failure classes in the order they first appeared.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Failures {
    /// One entry per class seen.
    pub classes: Vec<FailureClass>,
}

/// One trial as [`Failures::add`] takes it.
pub struct TrialRef<'a> {
    /// The candidate name.
    pub candidate: &'a str,
    /// The task id.
    pub task: &'a str,
    /// The trial index.
    pub trial: u32,
    /// The stored status.
    pub status: &'a str,
    /// The stored error.
    pub error: Option<&'a str>,
    /// The trace prefix.
    pub trace: Option<&'a str>,
}

impl Failures {
    /// Counts one trial; the first trial of a class is kept with its stderr tail.
    pub fn add(&mut self, t: TrialRef<'_>) {
        let Some(class) = class_of(t.status, t.error) else {
            return;
        };
        if let Some(c) = self.classes.iter_mut().find(|c| c.class == class) {
            c.count += 1;
            return;
        }
        self.classes.push(FailureClass {
            class,
            status: t.status.to_string(),
            count: 1,
            first: FirstFailure {
                candidate: t.candidate.to_string(),
                task: t.task.to_string(),
                trial: t.trial,
                error: first_lines(t.error.unwrap_or("(no message)")),
                stderr_tail: t.trace.map(stderr_tail).unwrap_or_default(),
                trace: t.trace.map(str::to_string),
            },
        });
    }

    /// Adds every class of `other` (counts summed, the earlier first trial kept).
    pub fn merge(&mut self, other: &Failures) {
        for c in &other.classes {
            match self.classes.iter_mut().find(|m| m.class == c.class) {
                Some(m) => m.count += c.count,
                None => self.classes.push(c.clone()),
            }
        }
    }

    /// Whether no trial failed.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// Trials that failed, over every class.
    pub fn total(&self) -> usize {
        self.classes.iter().map(|c| c.count).sum()
    }

    /// The `failures` list of a `--json` document.
    pub fn to_json(&self) -> Value {
        json!(self.classes)
    }

    /// The human lines: per class its count and status, where its first trial failed and
    /// why, and the trace files to read; `indent` goes before each line.
    pub fn lines(&self, indent: &str) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.classes {
            let f = &c.first;
            out.push(format!(
                "{indent}{} x{} ({}): first {} on task {} trial {}",
                c.class,
                c.count,
                c.status,
                one_line(&f.candidate),
                one_line(&f.task),
                f.trial
            ));
            for line in f.error.lines() {
                out.push(format!("{indent}    {line}"));
            }
            if !f.stderr_tail.is_empty() {
                out.push(format!("{indent}    stderr, last lines:"));
                for line in &f.stderr_tail {
                    out.push(format!("{indent}      {line}"));
                }
            }
            if let Some(trace) = &f.trace {
                out.push(format!("{indent}    trace: {trace}.stdout, .stderr"));
            }
        }
        out
    }
}

/// At most [`SHOWN_LINES`] lines of `text`, each cut at [`SHOWN_CHARS`] characters.
fn first_lines(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(SHOWN_LINES)
        .map(cut)
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line as shown: cut at [`SHOWN_CHARS`], its control characters escaped (it can be a
/// harness's output; see [`crate::printable`]).
fn cut(line: &str) -> String {
    let line = crate::printable::printable(line.trim_end());
    let line = line.as_ref();
    if line.chars().count() > SHOWN_CHARS {
        let mut s: String = line.chars().take(SHOWN_CHARS).collect();
        s.push_str("...");
        s
    } else {
        line.to_string()
    }
}

/// The last [`SHOWN_LINES`] non-empty lines of `<trace>.stderr` (none if absent).
pub(crate) fn stderr_tail(trace: &str) -> Vec<String> {
    let path = format!("{trace}.stderr");
    let Ok(bytes) = std::fs::read(Path::new(&path)) else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(SHOWN_LINES);
    lines[start..].iter().map(|l| cut(l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial<'a>(task: &'a str, status: &'a str, error: Option<&'a str>) -> TrialRef<'a> {
        TrialRef {
            candidate: "h",
            task,
            trial: 0,
            status,
            error,
            trace: None,
        }
    }

    #[test]
    fn classes_follow_the_messages_trial_writes() {
        assert_eq!(class_of("pass", None), None);
        assert_eq!(class_of("fail", None), None);
        assert_eq!(
            class_of("harness_error", Some("exited with code 3")),
            Some("crash")
        );
        assert_eq!(
            class_of("harness_error", Some("killed by signal 9")),
            Some("crash")
        );
        assert_eq!(
            class_of("harness_error", Some("the last stdout line is not JSON")),
            Some("bad_output")
        );
        assert_eq!(class_of("timeout", None), Some("timeout"));
        // Every cause the limits write (crate::launch::ProcessOutcome::limits_cause), after
        // the exit the trial reports.
        let cgroup = crate::cgroup::CgroupReport {
            oom_kills: 1,
            forks_refused: 3,
            ..Default::default()
        };
        let disk = crate::disk::DiskReport {
            limit_mb: 64,
            killed_at: Some(70 << 20),
            too_deep: false,
            unreadable: false,
            file_at_limit: true,
            held_at_end: None,
        };
        let late = crate::disk::DiskReport {
            killed_at: None,
            file_at_limit: false,
            held_at_end: Some(70 << 20),
            ..disk
        };
        for cause in [cgroup.cause(), disk.cause(), late.cause()] {
            let error = format!("killed by signal 9; {}", cause.unwrap());
            assert_eq!(
                class_of("harness_error", Some(&error)),
                Some("over_limit"),
                "{error}"
            );
        }
        assert_eq!(
            class_of(
                "infra_error",
                Some("2 model call(s) failed upstream (refused, unreachable or timed out, after any retries); the harness then failed: x")
            ),
            Some("model_error")
        );
        assert_eq!(
            class_of("infra_error", Some("scorer: exit 2")),
            Some("scorer_error")
        );
        assert_eq!(
            class_of("infra_error", Some("cannot spawn")),
            Some("infra_error")
        );
    }

    #[test]
    fn each_class_keeps_its_count_and_its_first_trial() {
        let mut f = Failures::default();
        f.add(trial("a", "pass", None));
        f.add(trial("b", "timeout", Some("timed out after 1.0 s")));
        f.add(trial("c", "harness_error", Some("exited with code 1")));
        f.add(trial("d", "timeout", Some("timed out after 1.0 s")));
        assert_eq!(f.total(), 3);
        assert_eq!(f.classes.len(), 2);
        assert_eq!(f.classes[0].class, "timeout");
        assert_eq!(f.classes[0].count, 2);
        assert_eq!(f.classes[0].first.task, "b");
        let mut g = Failures::default();
        g.add(trial("e", "harness_error", Some("exited with code 2")));
        f.merge(&g);
        assert_eq!(f.classes[1].count, 2);
        assert_eq!(f.classes[1].first.task, "c");
    }

    #[test]
    fn long_messages_are_cut_to_a_few_short_lines() {
        let long = format!("{}\nsecond\nthird\nfourth", "x".repeat(1000));
        let shown = first_lines(&long);
        assert_eq!(shown.lines().count(), SHOWN_LINES);
        assert!(shown.lines().next().unwrap().len() < 300);
    }
}
