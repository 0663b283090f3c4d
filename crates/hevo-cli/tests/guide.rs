//! docs/guide.md cannot rot: every command in it runs here, with the `hevo` just built.
//!
//! The guide marks what the test uses:
//!
//! - a fenced block with `title=PATH` in its info string (```` ```toml title=reviews/hevo.toml ````)
//!   is a file: it is written to `PATH` in an empty work directory before anything runs;
//! - a ```` ```console ```` block holds commands: each line starting with `$ ` is run with
//!   `sh -c` in the work directory (a trailing `# exit N` is the expected exit code,
//!   default 0), and the lines after it, up to the next `$ `, are output lines that must
//!   appear: in order on stdout, or anywhere on stderr; `...` inside a line matches any
//!   text, and a line that is only `...` matches nothing in particular;
//! - ```` ```console skip="REASON" ```` is shown, not run; the reason must be given.
//!
//! The work directory also gets a copy of `examples/threshold`, as the guide's commands run
//! from a checkout's root.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One fenced block of the guide.
struct Block {
    /// The info string after the opening fence.
    info: String,
    /// The line of the opening fence (1-based), for messages.
    line: usize,
    /// The lines between the fences.
    body: Vec<String>,
}

/// One command of a console block with what it must print.
struct Step {
    line: usize,
    command: String,
    exit: i32,
    expected: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_string(),
                    line: i + 1,
                    body: Vec::new(),
                })
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => out.push(open.take().unwrap()),
            (Some(b), _) => b.body.push(line.to_string()),
            (None, None) => {}
        }
    }
    assert!(
        open.is_none(),
        "docs/guide.md: a fenced block is not closed"
    );
    out
}

/// The value of `key=...` in an info string (quotes removed).
fn attr(info: &str, key: &str) -> Option<String> {
    let start = info.find(&format!("{key}="))? + key.len() + 1;
    let rest = &info[start..];
    if let Some(quoted) = rest.strip_prefix('"') {
        quoted.split('"').next().map(str::to_string)
    } else {
        rest.split_whitespace().next().map(str::to_string)
    }
}

fn steps(b: &Block) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    for (i, line) in b.body.iter().enumerate() {
        if let Some(cmd) = line.strip_prefix("$ ") {
            let (command, exit) = match cmd.rsplit_once("# exit ") {
                Some((c, n)) => (c.trim().to_string(), n.trim().parse().expect("exit code")),
                None => (cmd.trim().to_string(), 0),
            };
            out.push(Step {
                line: b.line + 1 + i,
                command,
                exit,
                expected: Vec::new(),
            });
        } else if let Some(step) = out.last_mut() {
            if !line.trim().is_empty() && line.trim() != "..." {
                step.expected.push(line.trim().to_string());
            }
        } else {
            panic!(
                "docs/guide.md:{}: output before the first `$ ` command",
                b.line + 1 + i
            );
        }
    }
    out
}

/// Whether `line` contains the parts of `pattern` split at `...`, in order.
fn matches(line: &str, pattern: &str) -> bool {
    let mut rest = line;
    for part in pattern.split("...").filter(|p| !p.is_empty()) {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "runs" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_command_of_the_guide_runs_as_shown() {
    let guide = std::fs::read_to_string(repo().join("docs/guide.md")).unwrap();
    let blocks = blocks(&guide);
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    copy_dir(
        &repo().join("examples/threshold"),
        &dir.join("examples/threshold"),
    );
    let mut files = 0;
    for b in &blocks {
        if let Some(path) = attr(&b.info, "title") {
            let target = dir.join(&path);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::write(&target, b.body.join("\n") + "\n").unwrap();
            files += 1;
        }
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_hevo"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (mut ran, mut skipped) = (0, 0);
    for b in blocks.iter().filter(|b| b.info.starts_with("console")) {
        if b.info.contains("skip") {
            let reason = attr(&b.info, "skip").unwrap_or_default();
            assert!(
                !reason.trim().is_empty(),
                "docs/guide.md:{}: a skipped block must say why: skip=\"REASON\"",
                b.line
            );
            skipped += 1;
            continue;
        }
        for step in steps(b) {
            let out = Command::new("sh")
                .arg("-c")
                .arg(&step.command)
                .current_dir(dir)
                .env("PATH", &path)
                .env("HEVO_HOME", dir.join(".hevo-home"))
                .env_remove("CI")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let shown = format!("--- stdout\n{stdout}--- stderr\n{stderr}");
            assert_eq!(
                out.status.code(),
                Some(step.exit),
                "docs/guide.md:{}: `{}` exited with {:?}, the guide says {}\n{shown}",
                step.line,
                step.command,
                out.status.code(),
                step.exit
            );
            let mut rest: Vec<&str> = stdout.lines().collect();
            for want in &step.expected {
                if let Some(at) = rest.iter().position(|l| matches(l, want)) {
                    rest.drain(..=at);
                } else {
                    assert!(
                        stderr.lines().any(|l| matches(l, want)),
                        "docs/guide.md:{}: `{}` did not print `{want}` (in order on stdout, \
                         or on stderr)\n{shown}",
                        step.line,
                        step.command
                    );
                }
            }
            ran += 1;
        }
    }
    assert!(
        files >= 8 && ran >= 10 && skipped >= 1,
        "the guide lost its examples: {files} files, {ran} commands, {skipped} skipped"
    );
}

#[test]
fn the_guide_links_only_pages_that_exist() {
    let guide = std::fs::read_to_string(repo().join("docs/guide.md")).unwrap();
    for (i, line) in guide.lines().enumerate() {
        for part in line.split("](").skip(1) {
            let target = part.split(')').next().unwrap_or("");
            if target.starts_with("http") || target.starts_with('#') {
                continue;
            }
            assert!(
                repo().join("docs").join(target).exists(),
                "docs/guide.md:{}: the link `{target}` names no file",
                i + 1
            );
        }
    }
}

#[test]
fn patterns_match_with_ellipses() {
    assert!(matches(
        "pass rate   58.3%  95% CI [1, 2]",
        "pass rate   58.3%  95% CI [...]"
    ));
    assert!(matches("abc", "..."));
    assert!(!matches("pick: x estimate 0.9", "pick: ... estimate 1.000"));
    assert!(!matches("ba", "a...b"));
}
