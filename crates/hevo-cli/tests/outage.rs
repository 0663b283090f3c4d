//! A provider outage told from a candidate's own upstream errors (search.md, "A candidate
//! that cannot be evaluated"): a proposed candidate whose calls fail upstream loses its
//! tasks only when the provider still answers hevo's own request; when that fails too, the
//! run stops with nothing counted against it, and the same command finishes it once the
//! provider is back. The harness calls the model with the real `openai` SDK through the
//! gateway, in front of a scripted upstream on loopback.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::upstream::PythonServer;
use support::write;

/// The scripted provider. Answers a chat completion `ROLE:x` with `high` when x >= 6, else
/// `low` (the suite's right answer). A `child`'s second request (its first after its smoke
/// trial) or an `early`'s first (its smoke trial's) starts an outage: every request (hevo's
/// own too) gets 503 until the file `up` exists beside the log. A
/// `provoke` request after its first gets 503, a `fail` one always, and nothing else does. Logs each request's
/// content and status. Prints its port first.
const UPSTREAM: &str = r#"
import http.server, json, os, sys, threading
log = sys.argv[1]
up = os.path.join(os.path.dirname(log), "up")
lock = threading.Lock()
seen = {"child": 0, "early": 0, "provoke": 0}
down = [False]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][-1]["content"]
        role, _, x = text.partition(":")
        with lock:
            if role in seen:
                seen[role] += 1
            if (role == "child" and seen["child"] == 2) or (role == "early" and seen["early"] == 1):
                down[0] = True
            failing = ((down[0] and not os.path.exists(up)) or (role == "provoke" and seen["provoke"] > 1)
                       or role == "fail")
            with open(log, "a") as f:
                f.write(f"{text} {503 if failing else 200}\n")
        if failing:
            out = json.dumps({"error": {"message": "scripted outage", "type": "overloaded"}}).encode()
            self.send_response(503)
        else:
            answer = "high" if x.isdigit() and int(x) >= 6 else "low"
            out = json.dumps({"id": "c1", "object": "chat.completion", "created": 0,
                "model": body["model"], "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// The harness: asks the model `ROLE:x` with the official SDK (no retries of its own, so
/// the gateway's are the only ones) and answers its reply; ROLE is in its `role.txt`.
const HARNESS: &str = r#"
import json, os, sys
from openai import OpenAI
task = json.loads(sys.stdin.readline())
role = open(os.path.join(os.path.dirname(__file__), "role.txt")).read().strip()
r = OpenAI(max_retries=0).chat.completions.create(
    model="m", messages=[{"role": "user", "content": f"{role}:{task['x']}"}])
print(json.dumps({"answer": r.choices[0].message.content}))
"#;

/// The agent proposer: one candidate, the seed with the role `ROLE`.
const AGENT: &str = r#"#!/bin/sh
mkdir -p pending/c
cp candidates/*-seed/code/* pending/c/
echo ROLE > pending/c/role.txt
printf 'name = "ROLE"\nparent = "seed"\n' > pending/c/candidate.toml
"#;

/// The scripted upstream ([`UPSTREAM`]) and its log.
struct Upstream {
    /// Kept for its lifetime: dropping it stops the server.
    _server: PythonServer,
    port: u16,
    log: PathBuf,
}

impl Upstream {
    fn start(dir: &Path) -> Upstream {
        let log = dir.join("upstream.log");
        let server = PythonServer::start(UPSTREAM, &[log.as_os_str()]);
        Upstream {
            port: server.port,
            _server: server,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A search in `dir`: 2 train, 8 val and 2 test tasks, the seed `seed` (role `seed`), one
/// iteration whose agent proposes the candidate `role`, every call to model `m` routed to
/// the upstream on `port` without retries.
fn search(dir: &Path, port: u16, role: &str) {
    let mut tasks = String::new();
    for (i, split) in [
        "train", "train", "val", "val", "val", "val", "val", "val", "val", "val", "test", "test",
    ]
    .iter()
    .enumerate()
    {
        let x = i % 10 + 1;
        let expected = if x >= 6 { "high" } else { "low" };
        tasks += &format!(
            "{{\"id\":\"t{i:02}\",\"split\":\"{split}\",\"input\":{{\"x\":{x}}},\"expected\":\"{expected}\"}}\n"
        );
    }
    write(&dir.join("tasks.jsonl"), &tasks);
    write(
        &dir.join("suite.toml"),
        "name = \"outage\"\n[scorer]\nkind = \"label\"\n",
    );
    write(
        &dir.join("seed/harness.toml"),
        "name = \"seed\"\nentry = [\"python3\", \"h.py\"]\n",
    );
    write(&dir.join("seed/h.py"), HARNESS);
    write(&dir.join("seed/role.txt"), "seed\n");
    write(&dir.join("agent.sh"), &AGENT.replace("ROLE", role));
    write(
        &dir.join("hevo.toml"),
        &format!(
            "suite = \".\"\nseeds = [\"seed\"]\nseed = 3\n\
             [search]\niterations = 1\ncandidates_per_iteration = 1\n\
             [proposer]\nkind = \"agent\"\ncommand = [\"sh\", \"{agent}\"]\n\
             [model]\ndefault_model = \"m\"\n\
             [[model.backends]]\nname = \"scripted\"\nkind = \"openai\"\n\
             base_url = \"http://127.0.0.1:{port}/v1\"\napi_key_env = \"HEVO_TEST_SCRIPTED_API_KEY\"\n\
             max_retries = 0\n\
             [[model.models]]\nname = \"m\"\nbackend = \"scripted\"\nupstream_model = \"up\"\n\
             [model.prices.\"up\"]\nfree = true\n",
            agent = dir.join("agent.sh").display()
        ),
    );
}

/// `hevo run --json DIR` (unsandboxed: this is about the search, not containment).
fn run(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
        .args(["run", "--json", "--jobs", "2"])
        .arg(dir)
        .env("HEVO_SANDBOX", "off")
        .env("HEVO_TEST_SCRIPTED_API_KEY", "upstream-secret")
        .output()
        .unwrap()
}

/// Each `(trial key, status)` of the run's ledger.
fn ledger(dir: &Path) -> Vec<(String, String)> {
    let db = rusqlite::Connection::open(dir.join("runs/outage/hevo.db")).unwrap();
    let mut st = db
        .prepare("SELECT trial_key, status FROM model_calls ORDER BY id")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The candidate's scored val trials, by task.
fn scored_tasks(dir: &Path, name: &str) -> Vec<String> {
    let db = rusqlite::Connection::open(dir.join("runs/outage/hevo.db")).unwrap();
    let mut st = db
        .prepare(
            "SELECT DISTINCT t.task_id FROM trials t JOIN candidates c ON c.id = t.candidate_id
             WHERE c.name = ?1 AND t.status IN ('pass', 'fail') ORDER BY t.task_id",
        )
        .unwrap();
    st.query_map([name], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn an_outage_while_a_candidate_is_evaluated_stops_the_run_and_counts_nothing_against_it() {
    outage_then_resume("child");
}

/// The same during its smoke trial: it was rejected for good.
#[test]
fn an_outage_during_a_smoke_trial_stops_the_run_and_rejects_nothing() {
    outage_then_resume("early");
}

/// A search whose candidate `role` meets an outage: the run stops, naming it, with nothing
/// counted or rejected; once the provider is back the same command finishes it.
fn outage_then_resume(role: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let up = Upstream::start(tmp.path());
    let dir = tmp.path().join("outage");
    search(&dir, up.port, role);

    let out = run(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the model provider is failing")
            && stderr.contains("model `m`")
            && stderr.contains("Nothing was counted against the candidate"),
        "{stderr}"
    );
    assert!(!stderr.contains("counted as a failure"), "{stderr}");
    assert!(!stderr.contains("rejected"), "{stderr}");
    // hevo asked the model itself, through the gateway, and that failed too.
    let probes: Vec<_> = ledger(&dir)
        .into_iter()
        .filter(|(key, _)| key == "probe")
        .collect();
    assert!(
        !probes.is_empty() && probes.iter().all(|(_, s)| s == "backend_error"),
        "{probes:?}"
    );
    assert!(up.log().contains("Reply with OK. 503"), "{}", up.log());

    // The provider is back: the same command finishes the run, the candidate scored on
    // every task it was asked for.
    write(&tmp.path().join("up"), "");
    let out = run(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("counted as a failure"), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let child = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == role)
        .unwrap_or_else(|| panic!("no {role} in {doc}"));
    assert!(child["estimate"].is_number(), "{doc}");
    assert!(!scored_tasks(&dir, role).is_empty());
    // It answers right wherever it was asked: the outage left no failure behind.
    assert_eq!(child["estimate"].as_f64(), Some(1.0), "{doc}");
}

#[test]
fn upstream_errors_a_candidate_provokes_while_the_provider_answers_count_against_it() {
    let tmp = tempfile::tempdir().unwrap();
    let up = Upstream::start(tmp.path());
    let dir = tmp.path().join("outage");
    search(&dir, up.port, "provoke");

    let out = run(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("`provoke` has no scored trial on task")
            && stderr.contains("counted as a failure"),
        "{stderr}"
    );
    // hevo's own request was answered, so the failures are the candidate's.
    let probes: Vec<_> = ledger(&dir)
        .into_iter()
        .filter(|(key, _)| key == "probe")
        .collect();
    assert!(
        !probes.is_empty() && probes.iter().all(|(_, s)| s == "ok"),
        "{probes:?}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["pick"]["name"], "seed", "{doc}");
    // Its one answered call was its smoke trial's (in the smoke store, not counted).
    assert!(scored_tasks(&dir, "provoke").is_empty());
    // The proposer finds the seed's trials in the archive: output and model calls.
    let traces = dir.join("runs/outage/archive/candidates/000-seed/traces");
    let calls = std::fs::read_dir(&traces)
        .unwrap_or_else(|e| panic!("{}: {e}", traces.display()))
        .flatten()
        .filter(|t| {
            t.path().join("0/model_calls.jsonl").is_file() && t.path().join("0.stdout").is_file()
        })
        .count();
    assert_eq!(calls, 8, "one trace per val task in {}", traces.display());
}

/// A search whose run directory is named `test`, as a user's test search often is: its
/// store's ledger also holds the calls of its smoke trials and of `--finalize`'s test
/// split, and those must not read as its own candidates' (the test split's were
/// `test/c<n>/...`, the ids of the run `test` itself, and were given its candidates).
#[test]
fn a_run_named_test_keeps_its_smoke_and_test_split_calls_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let up = Upstream::start(tmp.path());
    let dir = tmp.path().join("outage");
    search(&dir, up.port, "plain");
    let run_dir = tmp.path().join("test");
    let out = Command::new(env!("CARGO_BIN_EXE_hevo"))
        .args(["run", "--json", "--jobs", "2", "--finalize", "--run-dir"])
        .arg(&run_dir)
        .arg(&dir)
        .env("HEVO_SANDBOX", "off")
        .env("HEVO_TEST_SCRIPTED_API_KEY", "upstream-secret")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let db = rusqlite::Connection::open(run_dir.join("hevo.db")).unwrap();
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    let (attributed, own): (i64, i64) = (
        count("SELECT COUNT(*) FROM model_calls WHERE candidate_id IS NOT NULL"),
        count("SELECT SUM(model_calls) FROM trials"),
    );
    assert_eq!(
        attributed, own,
        "the calls given a candidate are its trials' calls"
    );
    let strays = count(
        "SELECT COUNT(*) FROM model_calls WHERE candidate_id IS NOT NULL \
         AND trial_key NOT GLOB 'test/c[0-9]*'",
    );
    assert_eq!(strays, 0);
    let smoke = count("SELECT COUNT(*) FROM model_calls WHERE trial_key LIKE 'test/smoke/c%'");
    let test = count("SELECT COUNT(*) FROM model_calls WHERE trial_key LIKE 'test/test/c%'");
    // The smoke trial of `plain`, and the pick's two test tasks.
    assert!(smoke >= 1 && test >= 2, "{smoke} smoke, {test} test calls");
    // The test split's own store numbers its candidates under its own run.
    assert_eq!(
        support::runs_of(&run_dir.join("test/hevo.db")),
        ["test/test"]
    );
}

/// A harness that makes one answered call, then one that fails upstream, and exits 1: an
/// `infra_error` hevo retries twice. Every attempt's answered call was billed and is in
/// the ledger; the trial row counted only the last attempt's.
const TWO_CALLS: &str = r#"
import json, sys
from openai import OpenAI
sys.stdin.readline()
client = OpenAI(max_retries=0)
client.chat.completions.create(model="m", messages=[{"role": "user", "content": "seed:1"}])
client.chat.completions.create(model="m", messages=[{"role": "user", "content": "fail:1"}])
"#;

#[test]
fn a_retried_trials_row_counts_every_attempts_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let up = Upstream::start(tmp.path());
    let dir = tmp.path().join("outage");
    search(&dir, up.port, "unused");
    write(&dir.join("seed/h.py"), TWO_CALLS);
    let out = eval_two_calls(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let db = rusqlite::Connection::open(dir.join("ev/hevo.db")).unwrap();
    let (rows, attempts, row_tokens): (i64, i64, i64) = db
        .query_row(
            "SELECT COUNT(*), SUM(attempts), SUM(input_tokens + cached_tokens + output_tokens)
             FROM trials WHERE status = 'infra_error'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert!(
        rows > 0 && attempts == 3 * rows,
        "{rows} rows, {attempts} attempts: {stderr}"
    );
    let (answered, ledger_tokens): (i64, i64) = db
        .query_row(
            "SELECT COUNT(*), SUM(input_tokens + cached_tokens + output_tokens)
             FROM model_calls WHERE status = 'ok'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(answered, attempts, "one answered call per attempt");
    assert_eq!(row_tokens, ledger_tokens, "the rows are the ledger's sums");
}

/// `hevo eval` of the search's seed (the [`TWO_CALLS`] harness) on its val tasks, one at a
/// time, into `DIR/ev`.
fn eval_two_calls(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
        .arg("eval")
        .arg(dir.join("seed"))
        .arg("--suite")
        .arg(dir)
        .arg("--model-config")
        .arg(dir.join("hevo.toml"))
        .arg("--run-dir")
        .arg(dir.join("ev"))
        .args(["--no-progress", "--json", "--jobs", "1"])
        .env("HEVO_SANDBOX", "off")
        .env("HEVO_TEST_SCRIPTED_API_KEY", "upstream-secret")
        .output()
        .unwrap()
}

/// A trial's caps hold across its attempts: each retry after an infrastructure error had
/// a fresh key with the whole per-trial cap again, so a harness provoking upstream errors
/// could spend three times its cap.
#[test]
fn a_trials_cap_holds_across_its_retried_attempts() {
    let tmp = tempfile::tempdir().unwrap();
    let up = Upstream::start(tmp.path());
    let dir = tmp.path().join("outage");
    search(&dir, up.port, "unused");
    write(&dir.join("seed/h.py"), TWO_CALLS);
    let config = std::fs::read_to_string(dir.join("hevo.toml")).unwrap()
        + "[model.caps.trial]\nmax_calls = 2\n";
    write(&dir.join("hevo.toml"), &config);
    let out = eval_two_calls(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let db = rusqlite::Connection::open(dir.join("ev/hevo.db")).unwrap();
    let most: i64 = db
        .query_row(
            "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM model_calls WHERE status = 'ok'
             GROUP BY trial_key)",
            [],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(
        most, 2,
        "answered calls of one trial over its attempts: {stderr}"
    );
    let refused: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM model_calls WHERE status = 'budget_exceeded'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(refused > 0, "{stderr}");
}
