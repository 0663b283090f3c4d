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

#[test]
fn eval_table_of_the_sentiment_example() {
    let tmp = tempfile::tempdir().unwrap();
    let out = hevo()
        .arg("eval")
        .arg(examples().join("sentiment/harness-rules"))
        .arg("--suite")
        .arg(examples().join("sentiment"))
        .args(["--no-progress", "--no-model", "--jobs", "2", "--run-dir"])
        .arg(tmp.path().join("eval"))
        .output()
        .unwrap();
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
        insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout));
    });
}

#[test]
fn run_summary_of_the_threshold_example() {
    let tmp = tempfile::tempdir().unwrap();
    let out = hevo()
        .args(["run", "--no-progress", "--jobs", "2", "--run-dir"])
        .arg(tmp.path().join("run"))
        .arg(examples().join("threshold"))
        .output()
        .unwrap();
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
        insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout));
    });
}
