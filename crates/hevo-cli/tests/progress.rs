//! Progress modes of `hevo eval` on a real terminal (a pty from util-linux `script`): a bar
//! on a terminal, plain lines with `CI` set or stderr not a terminal, nothing with
//! `--no-progress`, and no color codes with `NO_COLOR`. No timing is asserted: only which
//! kind of output each mode may print.

use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// `hevo eval` of the sentiment example, with `extra` flags, as a shell command line.
fn eval_line(run_dir: &Path, extra: &str) -> String {
    format!(
        "{} eval {} --suite {} --no-model --jobs 2 --run-dir {} {extra}",
        env!("CARGO_BIN_EXE_hevo"),
        examples().join("sentiment/harness-rules").display(),
        examples().join("sentiment").display(),
        run_dir.display()
    )
}

/// Runs `line` with stdout and stderr on a pty; returns the terminal's transcript.
fn on_a_terminal(line: &str, ci: Option<&str>) -> String {
    let mut cmd = Command::new("script");
    cmd.args(["-qec", line, "/dev/null"])
        .env("NO_COLOR", "1")
        .env_remove("CI");
    if let Some(v) = ci {
        cmd.env("CI", v);
    }
    let out = cmd.output().expect("util-linux `script` runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether `text` holds an SGR (color) escape sequence `ESC [ digits m`.
fn has_color(text: &str) -> bool {
    text.split("\x1b[").skip(1).any(|rest| {
        let code: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ';')
            .collect();
        rest[code.len()..].starts_with('m')
    })
}

#[test]
fn a_terminal_gets_a_bar_ci_gets_lines_and_no_progress_gets_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let bar = on_a_terminal(&eval_line(&tmp.path().join("bar"), ""), None);
    assert!(bar.contains("pass rate"), "{bar}");
    assert!(bar.contains("trial(s) to run on"), "{bar}");
    assert!(!bar.contains("trials done"), "a bar, not lines:\n{bar}");
    assert!(!has_color(&bar), "NO_COLOR: no color codes:\n{bar:?}");

    let ci = on_a_terminal(&eval_line(&tmp.path().join("ci"), ""), Some("true"));
    assert!(ci.contains("trials done"), "plain lines in CI:\n{ci}");
    assert!(
        ci.contains(" elapsed, ETA "),
        "a plain line has the elapsed time and an ETA:\n{ci}"
    );
    assert!(!has_color(&ci), "{ci:?}");

    let quiet = on_a_terminal(&eval_line(&tmp.path().join("quiet"), "--no-progress"), None);
    assert!(quiet.contains("pass rate"), "{quiet}");
    assert!(
        !quiet.contains("trials done") && !quiet.contains("trial(s) to run"),
        "--no-progress prints no progress:\n{quiet}"
    );
}

#[test]
fn a_pipe_gets_plain_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new("sh")
        .args(["-c", &eval_line(&tmp.path().join("pipe"), "")])
        .env_remove("CI")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("trials done"), "{stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "no escape codes on a pipe: {stderr:?}"
    );
}

#[test]
fn color_codes_are_recognized() {
    assert!(has_color("a \x1b[1;31mred\x1b[0m"));
    assert!(!has_color("a \x1b[2K cleared line"));
}
