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
use hevo_search::harnesspro::EpochRecord;
use hevo_search::proposer::{AgentProposer, ParamsProposer};
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
/// waste (a growing history, a repeated prompt, calls after the answer, a test tool re-run
/// after it passed, a huge stderr).
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
    # A test tool run twice: the second run after the first said it passed.
    def run(i):
        return [{"role": "assistant", "content": "", "tool_calls": [{"id": f"t{i}", "type": "function",
                 "function": {"name": "run_tests", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"t{i}", "content": "3 passed in 0.01s"}]
    call(messages + run(1))
    call(messages + run(1) + run(2))
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

/// Starts the scripted upstream in `dir`: the process (killed on drop) and its port.
fn start_upstream(dir: &Path) -> (KillOnDrop, String) {
    write(&dir.join("upstream.py"), UPSTREAM);
    let mut server = std::process::Command::new("python3")
        .arg(dir.join("upstream.py"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let server = KillOnDrop(server);
    let mut port = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut port)
        .unwrap();
    (server, port.trim().to_string())
}

/// Starts hevo's real gateway for `layer` with its ledger in the store `db`.
fn start_gateway(
    runtime: &tokio::runtime::Runtime,
    layer: &hevo_llm::ModelLayerConfig,
    db: &Path,
) -> (hevo_llm::GatewayHandle, Arc<dyn ModelAccess>) {
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
}

fn two_threads() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn pareto_search_picks_three_tiers_and_finalize_agrees_with_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_server, port) = start_upstream(dir);
    setup(dir, &port);

    let (config, file) = RunConfig::load(dir).unwrap();
    let run_dir = dir.join("runs/pro");
    std::fs::create_dir_all(&run_dir).unwrap();
    let layer = config.model.clone().unwrap();
    let runtime = two_threads();
    let start = |db: &Path| start_gateway(&runtime, &layer, db);
    let (handle, access) = start(&run_dir.join("hevo.db"));
    let mut runner = LiveRunner::open(RunnerSettings {
        run_dir: run_dir.clone(),
        suite_dir: dir.join("suite"),
        trials: 1,
        jobs: 2,
        model_env: ModelEnv::offline(),
        model_access: Some(access),
        launcher: Arc::new(LocalLauncher::default()),
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
        launcher: Arc::new(LocalLauncher::default()),
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
        "rerun_passed_check",
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
    assert!(after.finding.contains("5 more call(s)"), "{after:?}");
}

/// The epoch loop's suite and config: seeds `shots1` (the initial harness) and `shots2`, 6
/// train, 16 val and 16 test tasks; 2 epochs, core sets of 4 tasks run 3 times.
fn setup_epochs(dir: &Path, port: &str) {
    for (name, shots) in [("shots1", 1), ("shots2", 2)] {
        write(
            &dir.join(format!("{name}/harness.toml")),
            &format!(
                "name = \"{name}\"\nentry = [\"python3\", \"h.py\"]\n[params]\n\
                 shots = {{ values = [0, 1, 2, 3, 4], default = {shots} }}\n"
            ),
        );
        write(&dir.join(format!("{name}/h.py")), HARNESS);
    }
    write(
        &dir.join("suite/suite.toml"),
        "name = \"shots\"\n[scorer]\nkind = \"exact\"\n",
    );
    let mut tasks = String::new();
    for (split, prefix, n) in [("train", "r", 6), ("val", "v", 16), ("test", "t", 16)] {
        for x in 0..n {
            tasks += &format!(
                "{{\"id\":\"{prefix}{x:02}\",\"split\":\"{split}\",\"input\":{{\"x\":{x}}},\"expected\":\"A\"}}\n"
            );
        }
    }
    write(&dir.join("suite/tasks.jsonl"), &tasks);
    write(
        &dir.join("hevo.toml"),
        &format!(
            "suite = \"suite\"\nseeds = [\"shots1\", \"shots2\"]\nseed = 5\n\
             [search]\njobs = 2\n\
             [evaluation]\nstrategy = \"full\"\n\
             [objective]\nkind = \"pareto\"\n\
             [harnesspro]\nepochs = 2\ncore_size = 4\ncore_runs = 3\n\
             [model]\ndefault_model = \"mock\"\nno_cache = true\n\
             [[model.backends]]\nname = \"up\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
             [[model.models]]\nname = \"mock\"\nbackend = \"up\"\n\
             [model.prices.mock]\ninput = 1.0\noutput = 4.0\n"
        ),
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn epoch_loop_diagnoses_selects_and_commits_three_children_per_survivor() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_server, port) = start_upstream(dir);
    setup_epochs(dir, &port);
    let (config, file) = RunConfig::load(dir).unwrap();
    let run_dir = dir.join("runs/epochs");
    std::fs::create_dir_all(&run_dir).unwrap();
    let layer = config.model.clone().unwrap();
    let runtime = two_threads();
    let (handle, access) = start_gateway(&runtime, &layer, &run_dir.join("hevo.db"));
    let launcher: Arc<dyn hevo_runtime::launch::Launcher> = Arc::new(LocalLauncher::default());
    let mut runner = LiveRunner::open(RunnerSettings {
        run_dir: run_dir.clone(),
        suite_dir: dir.join("suite"),
        trials: 1,
        jobs: 2,
        model_env: ModelEnv::offline(),
        model_access: Some(access),
        launcher: launcher.clone(),
        cancel: Cancel::new(),
        progress: None,
    })
    .unwrap();
    let agent_script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/harnesspro_agent.py");
    let home = run_dir.join("proposer/home");
    let probe = [
        dir.join("suite/tasks.jsonl"),
        run_dir.join("hevo.db"),
        run_dir.join("archive"),
        run_dir.join("harnesspro/repo"),
    ];
    let probe: Vec<String> = probe
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let mut agent = AgentProposer {
        command: vec![
            "python3".into(),
            agent_script.to_string_lossy().into_owned(),
            "{prompt}".into(),
        ],
        timeout: std::time::Duration::from_secs(60),
        transcripts: run_dir.join("proposer"),
        home: home.clone(),
        env: vec![("HEVO_PROBE".into(), probe.join(":"))],
        model_env: ModelEnv::offline(),
        launcher,
        cancel: Cancel::new(),
        hidden: Vec::new(),
    };
    let mut lines = Vec::new();
    let result = run_search(
        &config,
        &file,
        &run_dir,
        &mut runner,
        &mut agent,
        &mut |l| lines.push(l.to_string()),
    );
    let report = result.unwrap_or_else(|e| panic!("{e}\n{}", lines.join("\n")));
    drop(runner);
    runtime.block_on(handle.shutdown());
    let log = lines.join("\n");
    assert_eq!(report.iterations_done, 2, "{log}");
    assert!(report.pareto.as_ref().is_some_and(|p| !p.tiers.is_empty()));

    let archive = run_dir.join("archive");
    let cand_dir = |name: &str| {
        std::fs::read_dir(archive.join("candidates"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                let f = p.file_name().unwrap().to_string_lossy().into_owned();
                f.len() > 4 && &f[4..] == name
            })
            .unwrap_or_else(|| panic!("{name} is not archived\n{log}"))
    };
    let repo = run_dir.join("harnesspro/repo");
    let conn = rusqlite::Connection::open(run_dir.join("hevo.db")).unwrap();
    for epoch in 1..=2u32 {
        let record: EpochRecord = serde_json::from_slice(
            &std::fs::read(archive.join(format!("harnesspro/epoch-{epoch:03}.json"))).unwrap(),
        )
        .unwrap();
        // The core set: 4 distinct train tasks, each run 3 times by every pool candidate
        // (the builtin diagnosis reads exactly those 12 trials, below).
        assert_eq!(record.core_set.len(), 4);
        assert!(record.core_set.iter().all(|t| t.starts_with('r')));
        assert_eq!(record.budget.core_trials, record.pool.len() * 4 * 3);
        assert_eq!(record.budget.core_trials_full, record.pool.len() * 6 * 3);
        assert!(record.pool.contains(&"shots1".to_string()));
        for name in &record.pool {
            // Both diagnoses beside the candidate; the agent's passed the schema check.
            let d = cand_dir(name).join("diagnosis");
            let builtin: Diagnosis = serde_json::from_slice(
                &std::fs::read(d.join(format!("epoch-{epoch:03}.builtin.json"))).unwrap(),
            )
            .unwrap();
            assert_eq!((builtin.producer.as_str(), builtin.trials), ("builtin", 12));
            let agent: Diagnosis = serde_json::from_slice(
                &std::fs::read(d.join(format!("epoch-{epoch:03}.agent.json"))).unwrap(),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}\n{log}"));
            assert_eq!(agent.producer, "agent");
            assert_eq!(
                agent.findings.len(),
                3,
                "{name}: one per run of the first task"
            );
            for f in &agent.findings {
                let text = std::fs::read_to_string(&f.evidence.file).unwrap();
                assert!(f.evidence.file.starts_with(run_dir.join("traces")), "{f:?}");
                assert_eq!(f.evidence.lines, [1, text.lines().count()]);
            }
        }
        // At most three survivors, each with the three instructions' children.
        assert!(!record.survivors.is_empty() && record.survivors.len() <= 3);
        assert_eq!(record.plans.len(), 3 * record.survivors.len(), "{log}");
        for s in &record.survivors {
            let ins: Vec<&str> = record
                .plans
                .iter()
                .filter(|p| &p.parent == s)
                .map(|p| p.instruction.as_str())
                .collect();
            assert_eq!(ins, ["I1", "I2", "I3"]);
        }
        for p in &record.plans {
            let parent_toml =
                std::fs::read_to_string(cand_dir(&p.parent).join("code/harness.toml")).unwrap();
            if p.outcome != "committed" {
                // Only an edit past the end of `values` changes nothing.
                assert_eq!(p.outcome, "rejected: the agent changed no file in harness/");
                let at_end = if p.instruction == "I1" {
                    "default = 0"
                } else {
                    "default = 4"
                };
                assert!(parent_toml.contains(at_end), "{p:?}");
                continue;
            }
            // The child's branch: the plan committed on top of its parent's branch.
            let branch = format!("cand/{}", p.child);
            let subjects = git(&repo, &["log", "--format=%s", &branch]);
            assert!(subjects.starts_with(&p.summary), "{subjects}");
            let parents = git(&repo, &["rev-parse", &format!("{branch}^")]);
            let parent_head = git(&repo, &["rev-parse", &format!("cand/{}", p.parent)]);
            assert_eq!(parents, parent_head);
            // Its diff against the parent is the plan's edit, and is archived beside it.
            let diff = git(&repo, &["diff", &format!("cand/{}", p.parent), &branch]);
            let child = cand_dir(&p.child);
            assert_eq!(
                std::fs::read_to_string(child.join("diff.patch")).unwrap(),
                diff
            );
            let changed: Vec<&str> = diff
                .lines()
                .filter(|l| {
                    (l.starts_with('+') || l.starts_with('-'))
                        && !l.starts_with("+++")
                        && !l.starts_with("---")
                })
                .collect();
            match p.instruction.as_str() {
                "I2" => assert_eq!(changed, ["+# I2: balanced, behaviour unchanged"]),
                _ => {
                    assert_eq!(changed.len(), 2, "{diff}");
                    assert!(changed[0].starts_with("-shots") && changed[1].starts_with("+shots"));
                }
            }
            let code = std::fs::read_to_string(child.join("code/harness.toml")).unwrap();
            let meta = std::fs::read_to_string(child.join("candidate.toml")).unwrap();
            assert!(
                meta.contains(&format!("parent = \"{}\"", p.parent)),
                "{meta}"
            );
            assert_ne!(code, parent_toml);
        }
        // Every decision is in the store.
        let kinds: Vec<String> = conn
            .prepare("SELECT kind FROM decisions WHERE epoch = ?1 ORDER BY id")
            .unwrap()
            .query_map([epoch], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(kinds, ["core_set", "survivors", "plans"]);
    }

    // What the agent saw: its workspaces only, never a val or test task, an expected
    // answer or a score (the sandbox's own confinement is tested through `hevo run`).
    let seen = std::fs::read_to_string(home.join("seen.jsonl")).unwrap();
    let calls: Vec<serde_json::Value> = seen
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(calls.iter().any(|c| c["role"] == "diagnose"));
    assert!(calls.iter().any(|c| c["role"] == "edit I3"));
    for c in &calls {
        let cwd = c["cwd"].as_str().unwrap();
        assert!(
            cwd.starts_with(run_dir.join("harnesspro").to_str().unwrap()),
            "{cwd}"
        );
        for (path, text) in c["files"].as_object().unwrap() {
            let text = text.as_str().unwrap();
            for id in (0..16).flat_map(|x| [format!("\"v{x:02}\""), format!("\"t{x:02}\"")]) {
                assert!(!text.contains(&id), "{path} in {cwd} shows task {id}");
            }
            assert!(
                !text.contains("\"expected\""),
                "{path} shows an expected answer"
            );
            assert!(
                !path.ends_with("scores.json") && !path.ends_with("tasks.jsonl"),
                "{path}"
            );
        }
    }
}
