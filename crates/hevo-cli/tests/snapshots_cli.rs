//! Snapshots of the CLI's human output (insta), with volatile fields (paths, times, run
//! hashes) filtered, so a change to what users read shows up in review.

use std::path::{Path, PathBuf};
use std::process::Command;

fn hevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn filters(tmp: &Path) -> Vec<(String, String)> {
    vec![
        (regex_escape(&tmp.to_string_lossy()), "[TMP]".into()),
        (
            r"eval-([a-z_\-]+)-[0-9a-f]{10}".into(),
            "eval-$1-[HASH]".into(),
        ),
        (r"\d+\.\d+ s".into(), "[SECONDS] s".into()),
        (r"\d+(\.\d+)? ms".into(), "[MS] ms".into()),
    ]
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                format!("\\{c}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Runs `hevo` with `args` (a temp dir passed to `dir_arg` as its last argument) and
/// snapshots its stdout with the volatile fields filtered.
fn snapshot_stdout(name: &str, args: &[&str], dir_arg: &str, last: Option<PathBuf>) {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = hevo();
    cmd.args(args).arg(dir_arg).arg(tmp.path().join("out"));
    if let Some(l) = last {
        cmd.arg(l);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut settings = insta::Settings::clone_current();
    for (re, with) in filters(tmp.path()) {
        settings.add_filter(&re, with);
    }
    settings.bind(|| {
        insta::assert_snapshot!(name, String::from_utf8_lossy(&out.stdout));
    });
}

#[test]
fn eval_table_of_the_sentiment_example() {
    let harness = examples().join("sentiment/harness-rules");
    let suite = examples().join("sentiment");
    snapshot_stdout(
        "eval_table_of_the_sentiment_example",
        &[
            "eval",
            &harness.to_string_lossy(),
            "--suite",
            &suite.to_string_lossy(),
            "--no-progress",
            "--no-model",
            "--jobs",
            "2",
        ],
        "--run-dir",
        None,
    );
}

#[test]
fn run_summary_of_the_threshold_example() {
    snapshot_stdout(
        "run_summary_of_the_threshold_example",
        &["run", "--no-progress", "--jobs", "2"],
        "--run-dir",
        Some(examples().join("threshold")),
    );
}

/// The `--help` of the commands whose help was corrected (examples, descriptions, what
/// finalize evaluates), in one snapshot: a change to any of them shows up in review.
#[test]
fn help_of_finalize_replay_ls_model_and_tests_freeze() {
    let mut text = String::new();
    for args in [
        &["finalize", "--help"][..],
        &["run", "--help"][..],
        &["replay", "--help"][..],
        &["ls", "--help"][..],
        &["model", "--help"][..],
        &["model", "pull", "--help"][..],
        &["model", "list", "--help"][..],
        &["model", "run", "--help"][..],
        &["tests", "freeze", "--help"][..],
    ] {
        let out = hevo().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        text += &format!(
            "$ hevo {}\n{}\n",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    insta::assert_snapshot!(text);
}
