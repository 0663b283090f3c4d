//! HarnessPro mode end to end: a real search under `[objective] kind = "pareto"` whose
//! harnesses call a scripted OpenAI-compatible upstream on loopback through hevo's real
//! gateway with a price table. More `shots` means more prompt tokens (so more dollars) and a
//! higher accuracy (the upstream answers right on more tasks). The three tiers must be the
//! expected harnesses, finalize's numbers must agree with the store, and the built-in
//! analyzer must find the waste planted in one harness's real traces.

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use hevo_llm::{Caps, Gateway};
use hevo_runtime::cancel::Cancel;
use hevo_runtime::launch::LocalLauncher;
use hevo_runtime::model_access::{GatewayAccess, ModelAccess, ModelEnv, SqliteSink};
use hevo_search::config::RunConfig;
use hevo_search::diagnose::Diagnosis;
use hevo_search::finalize::{finalize, FinalizeOptions, SearchRecord};
use hevo_search::proposer::ParamsProposer;
use hevo_search::run::run_search;
use hevo_search::runner::{LiveRunner, RunnerSettings};

/// The scripted upstream: prompt tokens are the words of all messages, one output token.
/// Task `x` is answered right (`A`) iff `x < RIGHT[shots]`, `shots` being the number of
/// `Example:` lines in the first message.
const UPSTREAM: &str = r#"
import http.server, json, re
RIGHT = {0: 2, 1: 2, 2: 4, 3: 8, 4: 16}
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        msgs = body["messages"]
        first = msgs[0]["content"]
        x = int(re.search(r"x=(\d+)", first).group(1))
        shots = min(first.count("Example:"), 4)
        words = sum(len(m["content"].split()) for m in msgs)
        reply = "A" if x < RIGHT[shots] else "B"
        out = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": words, "completion_tokens": 1, "total_tokens": words + 1}}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// The harness: one call with `shots` examples of 100 words each; `waste = true` plants
/// waste (a growing history, a repeated prompt, calls after the answer, a huge stderr).
const HARNESS: &str = r#"
import json, os, sys, urllib.request
task = json.loads(sys.stdin.read())
p = json.loads(os.environ["HEVO_PARAMS"])
example = "Example: " + " ".join(["word"] * 99)
prompt = "\n".join([f"Task x={task['x']}: answer with one letter."] + [example] * int(p["shots"]))
def call(messages):
    body = json.dumps({"model": "mock", "temperature": 0, "messages": messages}).encode()
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=60).read())["choices"][0]["message"]["content"]
messages = [{"role": "user", "content": prompt}]
answer = call(messages)
if p.get("waste"):
    for _ in range(2):
        messages = messages + [{"role": "assistant", "content": answer}, {"role": "user", "content": prompt}]
        call(messages)
    call(messages)
    sys.stderr.write("debug dump " * 10000)
print(json.dumps({"answer": answer}))
"#;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Seeds in order: the initial harness first (shots 1), then the others.
const SEEDS: [(&str, u32, bool); 6] = [
    ("shots1", 1, false),
    ("shots0", 0, false),
    ("shots2", 2, false),
    ("shots3", 3, false),
    ("shots4", 4, false),
    ("wasteful", 2, true),
];

fn setup(dir: &Path, port: &str) {
    for (name, shots, waste) in SEEDS {
        write(
            &dir.join(format!("{name}/harness.toml")),
            &format!(
                "name = \"{name}\"\nentry = [\"python3\", \"h.py\"]\n[params]\n\
                 shots = {{ values = [0, 1, 2, 3, 4], default = {shots} }}\n\
                 waste = {{ values = [false, true], default = {waste} }}\n"
            ),
        );
        write(&dir.join(format!("{name}/h.py")), HARNESS);
    }
    write(
        &dir.join("suite/suite.toml"),
        "name = \"shots\"\n[scorer]\nkind = \"exact\"\n",
    );
    let mut tasks = String::new();
    for (split, prefix) in [("train", "r"), ("val", "v"), ("test", "t")] {
        let n = if split == "train" { 1 } else { 16 };
        for x in 0..n {
            tasks += &format!(
                "{{\"id\":\"{prefix}{x:02}\",\"split\":\"{split}\",\"input\":{{\"x\":{x}}},\"expected\":\"A\"}}\n"
            );
        }
    }
    write(&dir.join("suite/tasks.jsonl"), &tasks);
    let seeds: Vec<String> = SEEDS.iter().map(|s| format!("\"{}\"", s.0)).collect();
    write(
        &dir.join("hevo.toml"),
        &format!(
            "suite = \"suite\"\nseeds = [{}]\nseed = 3\n\
             [search]\niterations = 0\njobs = 2\n\
             [evaluation]\nstrategy = \"full\"\n\
             [objective]\nkind = \"pareto\"\n\
             [model]\ndefault_model = \"mock\"\nno_cache = true\n\
             [[model.backends]]\nname = \"up\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
             [[model.models]]\nname = \"mock\"\nbackend = \"up\"\n\
             [model.prices.mock]\ninput = 1.0\noutput = 4.0\n",
            seeds.join(", ")
        ),
    );
}

fn sum_cost(db: &Path, candidate: &str) -> (f64, i64, f64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT SUM(t.cost_usd), COUNT(DISTINCT t.task_id), SUM(t.outcome) FROM trials t
         JOIN candidates c ON c.id = t.candidate_id WHERE c.name = ?1",
        [candidate],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

#[test]
fn pareto_search_picks_three_tiers_and_finalize_agrees_with_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(&dir.join("upstream.py"), UPSTREAM);
    let mut server = std::process::Command::new("python3")
        .arg(dir.join("upstream.py"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let _server = KillOnDrop(server);
    let mut port = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut port)
        .unwrap();
    setup(dir, port.trim());

    let (config, file) = RunConfig::load(dir).unwrap();
    let run_dir = dir.join("runs/pro");
    std::fs::create_dir_all(&run_dir).unwrap();
    let layer = config.model.clone().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let start = |db: &Path| {
        let sink = Arc::new(SqliteSink::open(db).unwrap());
        let backends = layer.build_backends().unwrap();
        let gw = layer.gateway_config().unwrap();
        let handle = runtime
            .block_on(async { Gateway::start(gw, backends, sink) })
            .unwrap();
        let access: Arc<dyn ModelAccess> = Arc::new(GatewayAccess::new(
            handle.gateway().clone(),
            handle.openai_base_url(),
            handle.anthropic_base_url(),
            Caps::UNLIMITED,
        ));
        (handle, access)
    };
    let (handle, access) = start(&run_dir.join("hevo.db"));
    let mut runner = LiveRunner::open(RunnerSettings {
        run_dir: run_dir.clone(),
        suite_dir: dir.join("suite"),
        trials: 1,
        jobs: 2,
        model_env: ModelEnv::offline(),
        model_access: Some(access),
        launcher: Arc::new(LocalLauncher),
        cancel: Cancel::new(),
        progress: None,
    })
    .unwrap();
    let report = run_search(
        &config,
        &file,
        &run_dir,
        &mut runner,
        &mut ParamsProposer::default(),
        &mut |_| {},
    )
    .unwrap();
    drop(runner);
    runtime.block_on(handle.shutdown());

    let pareto = report.pareto.as_ref().expect("pareto mode reports tiers");
    assert_eq!(pareto.baseline, "shots1");
    assert!((pareto.baseline_pass_rate - 2.0 / 16.0).abs() < 1e-9);
    // shots1 is dominated by shots0 (same pass rate, cheaper); wasteful by shots2.
    assert_eq!(pareto.survivors, ["shots0", "shots2", "shots3", "shots4"]);
    let tiers: Vec<(String, String)> = pareto.tier_names();
    let expect = |t: &str, n: &str| (t.to_string(), n.to_string());
    assert_eq!(
        tiers,
        [
            expect("lite", "shots0"),
            expect("medium", "shots3"),
            expect("heavy", "shots4")
        ]
    );
    // Every candidate's cost is the store's: its dollars over its 16 val tasks.
    let db = run_dir.join("hevo.db");
    for c in &pareto.candidates {
        let (usd, tasks, _) = sum_cost(&db, &c.name);
        assert_eq!(tasks, 16);
        assert!(usd > 0.0, "{}: priced calls cost money", c.name);
        assert!(
            (c.cost.per_task.value - usd / 16.0).abs() < 1e-12,
            "{}: {} vs {}",
            c.name,
            c.cost.per_task.value,
            usd / 16.0
        );
        assert!(c.cost.per_task.ci_low <= c.cost.per_task.value);
        assert!(c.cost.per_task.ci_high >= c.cost.per_task.value);
    }
    // The trial rows agree with the gateway's ledger.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (rows, ledger): (f64, f64) = conn
        .query_row(
            "SELECT (SELECT SUM(cost_usd) FROM trials), (SELECT SUM(cost_usd) FROM model_calls)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!((rows - ledger).abs() < 1e-12, "{rows} vs {ledger}");

    // Finalize evaluates the tiers on test and reports cost of pass from the test store.
    let record = SearchRecord::from_report(&report, &file, &["shots1".into()]);
    std::fs::create_dir_all(run_dir.join("test")).unwrap();
    let (handle, access) = start(&run_dir.join("test/hevo.db"));
    let opts = FinalizeOptions {
        trials: 1,
        jobs: 2,
        model_env: ModelEnv::offline(),
        model_access: Some(access),
        launcher: Arc::new(LocalLauncher),
        cancel: Cancel::new(),
        frontier: false,
        progress: None,
    };
    let f = finalize(&run_dir, &dir.join("suite"), &record, &opts, &mut |_| {}).unwrap();
    runtime.block_on(handle.shutdown());
    for (tier, name, right) in [
        ("lite", "shots0", 2.0),
        ("medium", "shots3", 8.0),
        ("heavy", "shots4", 16.0),
    ] {
        let t = &f.test[name];
        assert_eq!(t.tiers, [tier]);
        assert!((t.pass_rate - right / 16.0).abs() < 1e-9, "{name}: {t:?}");
        let (usd, tasks, passes) = sum_cost(&run_dir.join("test/hevo.db"), name);
        assert_eq!((tasks, passes), (16, right));
        assert!((t.cost.total - usd).abs() < 1e-12);
        assert!((t.cost.per_task.value - usd / 16.0).abs() < 1e-12);
        assert!((t.cost.cost_of_pass() - usd / right).abs() < 1e-12);
        assert!(t.cost.wall_ms_per_task > 0.0);
    }
    // The cheaper tier costs less per task and per pass on test, too.
    assert!(f.test["shots0"].cost.per_task.value < f.test["shots3"].cost.per_task.value);
    assert!(f.test["shots3"].cost.per_task.value < f.test["shots4"].cost.per_task.value);

    // The analyzer: nothing on the clean harnesses, the planted waste on `wasteful`.
    let archive = run_dir.join("archive/candidates");
    let diagnosis = |name: &str| -> Diagnosis {
        let d = std::fs::read_dir(&archive)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().ends_with(name))
            .unwrap();
        serde_json::from_slice(&std::fs::read(d.join("diagnosis.json")).unwrap()).unwrap()
    };
    for name in ["shots0", "shots1", "shots2", "shots3", "shots4"] {
        let d = diagnosis(name);
        assert_eq!(d.trials, 16);
        assert!(d.findings.is_empty(), "{name}: {:?}", d.findings);
    }
    let d = diagnosis("wasteful");
    for kind in [
        "growing_input",
        "repeated_output",
        "repeated_prompt",
        "calls_after_final",
        "large_dump",
    ] {
        let hits: Vec<_> = d.findings.iter().filter(|f| f.kind == kind).collect();
        let kinds: Vec<&str> = d.findings.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(hits.len(), 16, "{kind} once per trial: {kinds:?}");
        for h in hits {
            let text = std::fs::read_to_string(&h.evidence.file).unwrap();
            let [a, b] = h.evidence.lines;
            assert!(
                a >= 1 && a <= b && b <= text.lines().count().max(1),
                "{h:?}"
            );
        }
    }
    let after = d
        .findings
        .iter()
        .find(|f| f.kind == "calls_after_final")
        .unwrap();
    assert!(after.finding.contains("3 more call(s)"), "{after:?}");
}
