//! `hevo run` with `preset = "claude"` and `preset = "codex"`: the real CLIs (npm
//! `@anthropic-ai/claude-code@2.1.332`, `@openai/codex@0.171.0`) as proposers through hevo's
//! gateway, in front of a scripted upstream on loopback (`tests/agents/scripted_upstream.py`)
//! that answers the agent's first turn with a call to its shell tool writing a candidate.
//! The candidate must land, validate and be evaluated, and every request of the agent must
//! be in the ledger. A test whose CLI is not installed skips with a loud message; a missing
//! agent is refused before Phase 0 with exit 2.

use std::path::{Path, PathBuf};
use std::process::Command;

mod support;
use support::upstream::upstream;

const INSTALL: &str = "npm install -g @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0";

fn hevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
}

fn on_path(name: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|d| d.join(name).is_file());
    if !found {
        eprintln!("\n\n*** SKIPPED: `{name}` is not on PATH; install it with `{INSTALL}` ***\n\n");
    }
    found
}

/// The shell command the scripted agent runs in the archive: a copy of the seed with the
/// threshold that scores best.
const WRITE_CANDIDATE: &str = "mkdir -p pending/better && cp -r candidates/000-seed/code/. \
    pending/better/ && sed -i 's/default = 2 }/default = 6 }/' pending/better/harness.toml && \
    printf 'name = \"better\"\\nparent = \"seed\"\\nhypothesis = \"threshold 6\"\\n\
axis = \"exploitation\"\\ncomponents = [\"params\"]\\n' > pending/better/candidate.toml";

/// A copy of `examples/threshold` whose proposer is `preset`, its model layer the scripted
/// upstream. Not under /tmp: Codex refuses to set up its sandbox helper below a temp dir.
fn search_dir(preset: &str, port: u16) -> (tempfile::TempDir, PathBuf) {
    let tmp = agent_scratch();
    let dir = tmp.path().join("threshold");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/threshold");
    std::fs::create_dir_all(dir.join("seed")).unwrap();
    for file in [
        "suite.toml",
        "tasks.jsonl",
        "seed/harness.sh",
        "seed/harness.toml",
    ] {
        std::fs::copy(example.join(file), dir.join(file)).unwrap();
    }
    let (kind, base, model) = match preset {
        "claude" => (
            "anthropic",
            format!("http://127.0.0.1:{port}"),
            "claude-test",
        ),
        _ => ("openai", format!("http://127.0.0.1:{port}/v1"), "gpt-test"),
    };
    let config = format!(
        r#"suite = "."
seeds = ["seed"]
seed = 11

[model]
default_model = "{model}"
[[model.backends]]
name = "scripted"
kind = "{kind}"
base_url = "{base}"
api_key_env = "HEVO_TEST_SCRIPTED_API_KEY"
[[model.models]]
name = "{model}"
backend = "scripted"
upstream_model = "up-model"
[model.prices."up-model"]
free = true

[search]
iterations = 1
candidates_per_iteration = 1

[proposer]
kind = "agent"
preset = "{preset}"
model = "{model}"
timeout_s = 300
"#
    );
    std::fs::write(dir.join("hevo.toml"), config).unwrap();
    (tmp, dir)
}

fn run_preset(preset: &str) {
    if !on_path(preset) {
        return;
    }
    let work = agent_scratch();
    let up = upstream(work.path(), WRITE_CANDIDATE);
    let (_tmp, dir) = search_dir(preset, up.port);
    let out = hevo()
        .args(["run", "--json", "--no-progress", "--jobs", "2"])
        .arg(&dir)
        .env("HEVO_TEST_SCRIPTED_API_KEY", "upstream-secret")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let run = dir.join("runs/threshold");
    let transcript =
        std::fs::read_to_string(run.join("proposer/iter-001/stdout.txt")).unwrap_or_default();
    assert!(
        out.status.success(),
        "{stderr}\nagent transcript:\n{transcript}"
    );
    // the candidate landed, validated and was evaluated
    let summary = std::fs::read_to_string(run.join("archive/summary.jsonl")).unwrap();
    let better = summary
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|l| l["name"] == "better")
        .unwrap_or_else(|| {
            let err = std::fs::read_to_string(run.join("proposer/iter-001/stderr.txt"))
                .unwrap_or_default();
            panic!("no line for the candidate:\n{summary}\n{stderr}\nagent stderr:\n{err}")
        });
    assert_eq!(better["outcome"], "evaluated", "{better}");
    assert!(better["estimate"].as_f64().unwrap() > 0.9, "{better}");
    // every request of the agent is in the ledger, under the proposer's key
    let requests = up.requests() as i64;
    assert!(requests >= 2, "a tool call and a final turn: {requests}");
    let db = rusqlite::Connection::open(run.join("hevo.db")).unwrap();
    let rows: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM model_calls WHERE trial_key = 'proposer' AND status = 'ok'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, requests, "{stderr}");
    // the agent's own state lives outside the archive
    assert!(run.join("proposer/home").is_dir());
    for leaked in [".claude", ".codex", ".claude.json"] {
        assert!(
            !run.join("archive").join(leaked).exists(),
            "{leaked} in the archive"
        );
    }
}

#[test]
fn claude_preset_proposes_a_candidate_that_is_evaluated() {
    run_preset("claude");
}

#[test]
fn codex_preset_proposes_a_candidate_that_is_evaluated() {
    run_preset("codex");
}

#[test]
fn a_missing_agent_is_refused_before_phase_0() {
    let tmp = tempfile::tempdir().unwrap();
    let (_keep, dir) = search_dir("claude", 9);
    let out = hevo()
        .args(["run", "--no-progress"])
        .arg(&dir)
        .env("PATH", tmp.path())
        .env("HEVO_TEST_SCRIPTED_API_KEY", "k")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`claude` is not found"), "{stderr}");
    assert!(
        stderr.contains("npm install -g @anthropic-ai/claude-code"),
        "{stderr}"
    );
    assert!(
        !dir.join("runs/threshold/hevo.db").exists() || {
            let db = rusqlite::Connection::open(dir.join("runs/threshold/hevo.db")).unwrap();
            db.query_row("SELECT COUNT(*) FROM trials", [], |r| r.get::<_, i64>(0))
                .unwrap()
                == 0
        }
    );
}

/// A scratch directory for the agent CLIs that is not under the system temp directory:
/// Codex refuses to set up its sandbox helper there, and a checkout (so `target/tmp`) may
/// itself live under `/tmp`. Falls back to `$HOME/.cache/hevo-test-scratch`.
fn agent_scratch() -> tempfile::TempDir {
    let target = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let sys = std::env::temp_dir();
    let base = if target.starts_with(&sys) || target.starts_with("/tmp") {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let base = home
            .unwrap_or_else(|| "/var/tmp".into())
            .join(".cache/hevo-test-scratch");
        std::fs::create_dir_all(&base).unwrap();
        base
    } else {
        target
    };
    tempfile::tempdir_in(base).unwrap()
}
