//! Helpers shared by hevo-cli's test binaries (`mod support;` in each): files, a one-task
//! suite beside a harness, the `hevo eval` command line over them, `hevo run --json`,
//! reading a command's JSON document, a copy of examples/threshold, the scripted upstream
//! (`upstream`), the runs a store records, and running hevo as `nobody` (`nobody`).
#![allow(dead_code)]

pub mod nobody;
pub mod upstream;

use std::path::Path;
use std::process::{Command, Output};

/// Writes `text` to `path`, making its directories.
pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Under `dir`: the harness `h/` that runs `program` with the file `h/<file>` holding
/// `code` (e.g. `("sh", "h.sh", "echo ...")`), and the suite `suite/` with one val task `a`
/// whose expected answer is `expected` (exact scorer).
pub fn one_task(dir: &Path, (program, file, code): (&str, &str, &str), expected: &str) {
    write(
        &dir.join("h/harness.toml"),
        &format!("entry = [\"{program}\", \"{file}\"]\n"),
    );
    write(&dir.join("h").join(file), code);
    write(
        &dir.join("suite/suite.toml"),
        "name = \"s\"\n[scorer]\nkind = \"exact\"\n",
    );
    write(
        &dir.join("suite/tasks.jsonl"),
        &format!("{{\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":\"{expected}\"}}\n"),
    );
}

/// `hevo eval DIR/h --suite DIR/suite --run-dir DIR/run --no-progress --json`; add flags
/// and environment before running it.
pub fn eval_command(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hevo"));
    c.arg("eval")
        .arg(dir.join("h"))
        .arg("--suite")
        .arg(dir.join("suite"))
        .arg("--run-dir")
        .arg(dir.join("run"))
        .args(["--no-progress", "--json"]);
    c
}

/// A copy of `examples/threshold` (a search in seconds, no model) at `to`, without its
/// `runs/`, with each `(from, to)` of `edits` replaced once in its `hevo.toml`.
pub fn threshold_copy(to: &Path, edits: &[(&str, &str)]) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/threshold");
    copy_tree(&from, to);
    let file = to.join("hevo.toml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    for (old, new) in edits {
        assert!(
            text.contains(old),
            "`{old}` is not in examples/threshold/hevo.toml"
        );
        text = text.replacen(old, new, 1);
    }
    std::fs::write(file, text).unwrap();
}

/// A copy of `examples/<name>` at `to`, without its `runs/`.
pub fn example_copy(name: &str, to: &Path) {
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples")
            .join(name),
        to,
    );
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() == "runs" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// `hevo run --json --no-progress --jobs 2 FLAGS DIR` (e.g. `&["--finalize"]` for the test
/// split too), as a user runs it. Panics with hevo's stderr unless it succeeds; returns the
/// document.
pub fn run_json(dir: &Path, flags: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_hevo"))
        .args(["run", "--json", "--no-progress", "--jobs", "2"])
        .args(flags)
        .arg(dir)
        .output()
        .unwrap();
    json_of(&out)
}

/// The JSON document a `--json` command printed; panics with its exit status and stderr
/// unless it succeeded.
pub fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "hevo failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

/// Whether bubblewrap is installed, for a test that needs the sandbox. When it is not, says
/// SKIPPED on stderr; under `HEVO_TEST_SANDBOX=1` (the CI sets it once it has installed
/// bubblewrap) it fails instead, so a sandbox test is never skipped there.
pub fn has_bwrap() -> bool {
    if Path::new("/usr/bin/bwrap").exists() {
        return true;
    }
    assert!(
        std::env::var("HEVO_TEST_SANDBOX").map_or(true, |v| v != "1"),
        "HEVO_TEST_SANDBOX=1 but bubblewrap is not installed"
    );
    eprintln!("SKIPPED: bubblewrap is not installed (apt-get install bubblewrap)");
    false
}

/// The ids of the runs the store `db` records (`runs.id`), in the order they were created.
pub fn runs_of(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn.prepare("SELECT id FROM runs ORDER BY rowid").unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}
