//! Trials behind the real gateway and the embedded local model: every call is attributed
//! to its trial, counted on the trial row and in the ledger table, a cap marks the trial
//! `budget_exceeded`, and no provider key reaches the harness.
//!
//! Needs the local model (`hevo model pull`; CI pulls it before the tests).

use std::path::Path;
use std::sync::Arc;

use hevo_llm::{Caps, Gateway, ModelLayerConfig};
use hevo_runtime::eval::{self, EvalOptions};
use hevo_runtime::model_access::{GatewayAccess, ModelAccess, SqliteSink};

/// A harness that makes `calls` chat calls (continuing past errors), then answers "x".
const HARNESS: &str = r#"
import json, os, sys, urllib.request, urllib.error
sys.stdin.read()
calls = int(json.loads(os.environ["HEVO_PARAMS"])["calls"])
seen = []
for i in range(calls):
    body = json.dumps({"model": "smollm2", "temperature": 0, "max_tokens": 4,
                       "messages": [{"role": "user", "content": f"Say a number {i}"}]}).encode()
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                 headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                          "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=120).read()
        seen.append(200)
    except urllib.error.HTTPError as e:
        seen.append(e.code)
leak = any(v.startswith("sk-") for v in os.environ.values())
print(json.dumps({"answer": "x", "codes": seen, "leak": leak}))
"#;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn setup(dir: &Path) {
    write(&dir.join("h/harness.toml"), "name = \"caller\"\nentry = [\"python3\", \"h.py\"]\n[params]\ncalls = { values = [3], default = 3 }\n");
    write(&dir.join("h/h.py"), HARNESS);
    write(
        &dir.join("suite/suite.toml"),
        "name = \"s\"\n[scorer]\nkind = \"exact\"\n",
    );
    write(
        &dir.join("suite/tasks.jsonl"),
        "{\"id\":\"a\",\"split\":\"val\",\"input\":{},\"expected\":\"x\"}\n\
         {\"id\":\"b\",\"split\":\"val\",\"input\":{},\"expected\":\"x\"}\n",
    );
}

/// Runs the suite through a fresh gateway whose trials are capped by `caps`.
fn run(
    dir: &Path,
    run_name: &str,
    caps: Caps,
) -> (hevo_runtime::report::EvalReport, rusqlite::Connection) {
    let run_dir = dir.join(run_name);
    std::fs::create_dir_all(&run_dir).unwrap();
    let mut layer = ModelLayerConfig::local_default();
    layer.no_cache = true;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let sink = Arc::new(SqliteSink::open(&run_dir.join("hevo.db")).unwrap());
    let backends = layer
        .build_backends()
        .expect("the local model is missing: run `hevo model pull`");
    let config = layer.gateway_config().unwrap();
    let handle = runtime
        .block_on(async { Gateway::start(config, backends, sink) })
        .unwrap();
    let access: Arc<dyn ModelAccess> = Arc::new(GatewayAccess::new(
        handle.gateway().clone(),
        handle.openai_base_url(),
        handle.anthropic_base_url(),
        caps,
    ));
    let mut o = EvalOptions::new(dir.join("h"), dir.join("suite"));
    o.run_dir = Some(run_dir.clone());
    o.jobs = 2;
    o.model_access = Some(access);
    let plan = eval::plan(o).unwrap();
    let report = eval::run(&plan, None).unwrap();
    runtime.block_on(handle.shutdown());
    (
        report,
        rusqlite::Connection::open(run_dir.join("hevo.db")).unwrap(),
    )
}

#[test]
fn calls_are_attributed_counted_and_capped() {
    std::env::set_var("OPENAI_API_KEY", "sk-provider-secret");
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());

    // No cap: both trials pass, 3 calls each, counted on the rows and in the ledger.
    let (report, db) = run(tmp.path(), "free", Caps::UNLIMITED);
    assert_eq!(
        report.status_counts["pass"], 2,
        "{:?}",
        report.status_counts
    );
    assert_eq!(report.spend.calls, 6);
    assert!(
        report.spend.input_tokens + report.spend.cached_tokens > 0
            && report.spend.output_tokens > 0
    );
    // Every ledger row names its candidate, task and trial.
    type LedgerRow = (Option<i64>, Option<String>, Option<i64>, i64);
    let per_trial: Vec<LedgerRow> = db
        .prepare(
            "SELECT candidate_id, task_id, trial_index, COUNT(*) FROM model_calls
             GROUP BY trial_key ORDER BY task_id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        per_trial,
        vec![
            (Some(report.candidate_id), Some("a".into()), Some(0), 3),
            (Some(report.candidate_id), Some("b".into()), Some(0), 3),
        ]
    );
    let row_tokens: i64 = db
        .query_row(
            "SELECT SUM(input_tokens + cached_tokens + output_tokens) FROM trials",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let ledger_tokens: i64 = db
        .query_row(
            "SELECT SUM(input_tokens + cached_tokens + output_tokens) FROM model_calls",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        row_tokens, ledger_tokens,
        "trial rows and the ledger must agree"
    );
    for t in &report.tasks {
        let stdout =
            std::fs::read_to_string(report.run_dir.join(format!("traces/c1/{}/0.stdout", t.id)))
                .unwrap();
        let answer: serde_json::Value =
            serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert_eq!(answer["codes"], serde_json::json!([200, 200, 200]));
        assert_eq!(answer["leak"], false, "a provider key reached the harness");
    }
    // Every request and response is traced, in order, next to the trial's output.
    let trace =
        std::fs::read_to_string(report.run_dir.join("traces/c1/a/0/model_calls.jsonl")).unwrap();
    let kinds: Vec<String> = trace
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(kinds.len(), 6, "{trace}");

    // A tight per-trial token cap: the call that crosses it is answered, the next gets 429,
    // and the trial is budget_exceeded (outcome 0) although the harness answered right.
    let cap = Caps {
        max_tokens: Some(30),
        ..Caps::UNLIMITED
    };
    let (report, _db) = run(tmp.path(), "capped", cap);
    assert_eq!(
        report.status_counts["budget_exceeded"], 2,
        "{:?}",
        report.status_counts
    );
    assert_eq!(report.pass_rate.value, 0.0);
}
