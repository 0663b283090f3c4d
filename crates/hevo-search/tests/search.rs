//! The search loop end to end on the hand-written sentiment suite (no model needed):
//! every strategy, the params proposer, a scripted stand-in agent, bad proposers, and the
//! rule that no test outcome is reachable from the archive.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hevo_runtime::cancel::Cancel;
use hevo_runtime::launch::LocalLauncher;
use hevo_runtime::model_access::ModelEnv;
use hevo_search::config::RunConfig;
use hevo_search::proposer::Proposer;
use hevo_search::proposer::{AgentProposer, ParamsProposer};
use hevo_search::run::{run_search, SearchReport};
use hevo_search::runner::{LiveRunner, RunnerSettings};

mod support;
use support::{copy, repo_root};

/// A search directory: the sentiment suite, its rule-based seed, and a `hevo.toml`.
fn setup(extra: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let src = repo_root().join("examples/sentiment");
    let dir = tmp.path().join("search");
    copy(&src, &dir);
    let config = format!(
        "suite = \".\"\nseeds = [\"harness-rules\"]\nseed = 7\n[model]\n\
         [search]\niterations = 2\ncandidates_per_iteration = 2\njobs = 2\n{extra}\n"
    );
    std::fs::write(dir.join("hevo.toml"), config).unwrap();
    (tmp, dir)
}

/// A fast search directory: `examples/threshold` (a bash seed harness with a `threshold`
/// parameter; 6 is perfect), so every strategy can run in seconds.
fn setup_fast(extra: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("search");
    copy(&repo_root().join("examples/threshold"), &dir);
    let _ = std::fs::remove_dir_all(dir.join("runs"));
    let config = format!(
        "suite = \".\"\nseeds = [\"seed\"]\nseed = 11\n[model]\n\
         [search]\niterations = 3\ncandidates_per_iteration = 2\njobs = 2\n{extra}\n"
    );
    std::fs::write(dir.join("hevo.toml"), config).unwrap();
    (tmp, dir)
}

fn search(dir: &Path, proposer: &mut dyn Proposer) -> SearchReport {
    try_search(dir, proposer).unwrap()
}

fn try_search(
    dir: &Path,
    proposer: &mut dyn Proposer,
) -> Result<SearchReport, hevo_search::run::SearchError> {
    let (config, file) = RunConfig::load(dir).unwrap();
    let run_dir = dir.join("runs/test-run");
    let mut runner = LiveRunner::open(RunnerSettings {
        run_dir: run_dir.clone(),
        suite_dir: dir.to_path_buf(),
        trials: 1,
        jobs: 2,
        model_env: ModelEnv::offline(),
        model_access: None,
        launcher: Arc::new(LocalLauncher::default()),
        cancel: Cancel::new(),
        progress: None,
    })
    .unwrap();
    run_search(&config, &file, &run_dir, &mut runner, proposer, &mut |_| {})
}

fn test_ids(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("tasks.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["split"] == "test")
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect()
}

/// Every file under `root`, as text.
fn all_text(root: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out += &all_text(&p);
        } else if let Ok(t) = std::fs::read_to_string(&p) {
            out += &t;
        }
    }
    out
}

#[test]
fn params_search_runs_with_every_strategy_and_keeps_the_archive_clean() {
    for strategy in [
        "full",
        "fixed",
        "resample",
        "coevolve",
        "race",
        "recommended",
    ] {
        let (_tmp, dir) = setup_fast(&format!(
            "[evaluation]\nstrategy = \"{strategy}\"\nrho = 0.3\n"
        ));
        let report = search(&dir, &mut ParamsProposer::default());
        // 1 seed + 3 iterations x 2 candidates, none rejected (the params proposer writes
        // valid candidates, and the 10-configuration space has room).
        assert_eq!(report.candidates.len(), 7, "{strategy}: {report:?}");
        assert_eq!(report.rejected, 0, "{strategy}");
        assert!(
            (0.0..=1.0).contains(&report.pick.estimate.value),
            "{strategy}: {:?}",
            report.pick
        );
        // The seed (threshold 2) scores about 0.6; the search must find something better.
        let seed = report.candidates.iter().find(|c| c.name == "seed").unwrap();
        assert!(
            report.pick.estimate.value > seed.estimate.value,
            "{strategy}: {report:?}"
        );
        let archive = dir.join("runs/test-run/archive");
        let summary = std::fs::read_to_string(archive.join("summary.jsonl")).unwrap();
        assert_eq!(summary.lines().count(), 7, "{strategy}: {summary}");
        assert!(archive.join("frontier.json").exists());
        assert!(archive.join("SKILL.md").exists());
        for c in std::fs::read_dir(archive.join("candidates")).unwrap() {
            let c = c.unwrap().path();
            assert!(c.join("code/harness.toml").exists(), "{}", c.display());
            assert!(c.join("candidate.toml").exists());
            assert!(c.join("scores.json").exists());
        }
        // Only validation tasks were evaluated: no test task id appears in the archive.
        let text = all_text(&archive);
        for id in test_ids(&dir) {
            assert!(
                !text.contains(&format!("\"{id}\"")),
                "{strategy}: test task {id} in the archive"
            );
        }
        if strategy == "full" {
            // Full search: every candidate on all 40 val tasks.
            assert_eq!(report.evaluations, 7 * 40);
        } else {
            assert!(
                report.evaluations < 7 * 40,
                "{strategy} spent {}",
                report.evaluations
            );
        }
    }
}

#[test]
fn a_candidate_the_budget_never_reached_is_marked_not_sampled() {
    // rho 0.02 of 40 val tasks: one racing batch or so for the whole run.
    let (_tmp, dir) = setup_fast("[evaluation]\nstrategy = \"race\"\nrho = 0.02\n");
    let report = search(&dir, &mut ParamsProposer::default());
    let archive = dir.join("runs/test-run/archive");
    let summary = std::fs::read_to_string(archive.join("summary.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = summary
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), report.candidates.len());
    let unsampled: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["outcome"].as_str().unwrap().starts_with("not sampled"))
        .collect();
    assert!(!unsampled.is_empty(), "{summary}");
    for line in &lines {
        let name = line["name"].as_str().unwrap();
        let scores: serde_json::Value = std::fs::read_dir(archive.join("candidates"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .ends_with(&format!("-{name}"))
            })
            .map(|p| {
                serde_json::from_slice(&std::fs::read(p.join("scores.json")).unwrap()).unwrap()
            })
            .unwrap();
        let sampled = line["outcome"] == "evaluated";
        let tasks = scores["tasks_used"].as_u64().unwrap();
        assert_eq!(sampled, tasks > 0, "{name}: {line} vs {scores}");
    }
}

#[test]
fn a_second_run_reuses_every_trial_and_gives_the_same_pick() {
    let (_tmp, dir) = setup_fast("[evaluation]\nstrategy = \"recommended\"\nrho = 0.3\n");
    let first = search(&dir, &mut ParamsProposer::default());
    let db = dir.join("runs/test-run/hevo.db");
    let count = |db: &Path| -> i64 {
        let c = rusqlite::Connection::open(db).unwrap();
        c.query_row("SELECT COUNT(*) FROM trials", [], |r| r.get(0))
            .unwrap()
    };
    let before = count(&db);
    let second = search(&dir, &mut ParamsProposer::default());
    assert_eq!(
        count(&db),
        before,
        "a finished run must not run trials again"
    );
    assert_eq!(first.pick.name, second.pick.name);
    assert_eq!(first.pick.estimate, second.pick.estimate);
}

fn agent(dir: &Path, script: &str) -> AgentProposer {
    let path = dir.join("agent.sh");
    std::fs::write(&path, script).unwrap();
    AgentProposer {
        command: vec!["bash".into(), path.to_string_lossy().into_owned()],
        timeout: Duration::from_secs(60),
        transcripts: dir.join("runs/test-run/proposer"),
        home: dir.join("runs/test-run/proposer/home"),
        env: vec![],
        model_env: ModelEnv::offline(),
        launcher: Arc::new(LocalLauncher::default()),
        cancel: Cancel::new(),
        hidden: Vec::new(),
    }
}

/// A stand-in coding agent: copies the best candidate in frontier.json and flips a parameter.
const COPY_BEST_AGENT: &str = r#"
set -e
best=$(python3 -c 'import json; print(json.load(open("frontier.json"))[0]["dir"])')
it=$(ls candidates | wc -l)
name="agent-$it"
mkdir -p "pending/$name"
cp -r "$best/code/." "pending/$name/"
sed -i 's/^name = .*/name = "'"$name"'"/' "pending/$name/harness.toml"
if grep -q 'tie = { values = \["positive", "negative"\], default = "negative" }' "pending/$name/harness.toml"; then
  sed -i 's/default = "negative" }/default = "positive" }/' "pending/$name/harness.toml"
else
  sed -i 's/default = "positive" }/default = "negative" }/' "pending/$name/harness.toml"
fi
printf 'name = "%s"\nparent = "x"\nhypothesis = "flip the tie rule"\naxis = "exploitation"\ncomponents = ["params"]\n' "$name" > "pending/$name/candidate.toml"
echo "wrote $name"
"#;

#[test]
fn a_scripted_agent_proposes_through_the_real_agent_protocol() {
    let (_tmp, dir) = setup("[evaluation]\nstrategy = \"full\"\n");
    let mut proposer = agent(&dir, COPY_BEST_AGENT);
    let report = search(&dir, &mut proposer);
    assert_eq!(report.candidates.len(), 3, "{report:?}");
    assert_eq!(report.rejected, 0);
    let transcript = dir.join("runs/test-run/proposer/iter-001/stdout.txt");
    assert!(std::fs::read_to_string(transcript)
        .unwrap()
        .contains("wrote agent-1"));
}

#[test]
fn garbage_duplicates_and_silence_are_rejected_with_reasons() {
    let script = r#"
mkdir -p pending/garbage pending/dup pending/noentry
echo 'this is not toml [' > pending/garbage/harness.toml
printf 'name = "garbage"\n' > pending/garbage/candidate.toml
cp -r candidates/000-*/code/. pending/dup/
printf 'name = "harness-rules"\n' > pending/dup/candidate.toml
printf 'entry = ["python3", "missing.py"]\n' > pending/noentry/harness.toml
printf 'name = "noentry"\n' > pending/noentry/candidate.toml
"#;
    let (_tmp, dir) = setup("[evaluation]\nstrategy = \"full\"\n");
    // asked for as many as it writes, so that each is read and rejected for its own fault
    let config = std::fs::read_to_string(dir.join("hevo.toml")).unwrap();
    std::fs::write(
        dir.join("hevo.toml"),
        config.replace(
            "candidates_per_iteration = 2",
            "candidates_per_iteration = 3",
        ),
    )
    .unwrap();
    let mut proposer = agent(&dir, script);
    let report = search(&dir, &mut proposer);
    // Iteration 1 rejects all three; iteration 2 rejects the same kinds again.
    assert_eq!(report.candidates.len(), 1);
    assert_eq!(report.rejected, 6);
    let summary = std::fs::read_to_string(dir.join("runs/test-run/archive/summary.jsonl")).unwrap();
    assert!(summary.contains("already taken"), "{summary}");
    assert!(summary.contains("does not load"), "{summary}");
    assert!(summary.contains("missing.py"), "{summary}");

    // A proposer that writes nothing: the run still finishes, with the seed as the pick.
    let (_tmp2, dir2) = setup("[evaluation]\nstrategy = \"full\"\n");
    let mut silent = agent(&dir2, "echo nothing to add\n");
    let report = search(&dir2, &mut silent);
    assert_eq!(report.candidates.len(), 1);
    assert_eq!(report.pick.name, "harness-rules");
}

/// A proposer that fails without a candidate stops the run with the cause, is recorded in
/// `summary.jsonl` with the end of its transcript, and is asked again by the next run.
#[test]
fn a_failed_proposal_is_recorded_not_taken_and_retried() {
    let (_tmp, dir) = setup("[evaluation]\nstrategy = \"full\"\n");
    let mut failing = agent(
        &dir,
        "echo 'API Error: 400 tools are not supported' >&2\nexit 1\n",
    );
    let err = try_search(&dir, &mut failing).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("iteration 1: the proposer failed"),
        "{message}"
    );
    assert!(message.contains("API Error: 400"), "{message}");
    assert!(!err.is_user_error());
    let archive = dir.join("runs/test-run/archive");
    let summary = std::fs::read_to_string(archive.join("summary.jsonl")).unwrap();
    let line = summary
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|l| l["name"] == hevo_search::run::PROPOSER_LINE)
        .unwrap_or_else(|| panic!("{summary}"));
    assert_eq!(line["iteration"], 1);
    assert!(line["outcome"]
        .as_str()
        .unwrap()
        .contains("stderr.txt: API Error: 400 tools are not supported"));
    assert!(!archive.join("pending/.proposed").exists());
    // the same run with a working agent asks again for iteration 1 and finishes
    let mut working = agent(&dir, COPY_BEST_AGENT);
    let report = search(&dir, &mut working);
    assert_eq!(report.candidates.len(), 3, "{report:?}");
}

/// A real OpenAI-compatible HTTP server (Python, on loopback) that records each prompt and
/// answers with a harness file fixed at threshold 6.
const MOCK_MODEL: &str = r#"
import http.server, json, sys, threading
log = sys.argv[1]
reply = "HYPOTHESIS: the boundary sits at 6\n```bash\nread -r line\nx=${line//[^0-9]/}\nif [ \"$x\" -ge 6 ]; then echo '{\"answer\": \"high\"}'; else echo '{\"answer\": \"low\"}'; fi\n```\n"
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with open(log, "a") as f:
            f.write(json.dumps({"auth": self.headers.get("Authorization"), "prompt": body["messages"][0]["content"]}) + "\n")
        out = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// Kills the mock server even when an assertion fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_llm_proposer_rewrites_the_best_harness_from_scores_and_failures() {
    use hevo_search::proposer::llm::LlmProposer;
    use std::io::BufRead;
    let (_tmp, dir) = setup_fast("[evaluation]\nstrategy = \"full\"\n");
    let log = dir.join("prompts.jsonl");
    std::fs::write(dir.join("mock.py"), MOCK_MODEL).unwrap();
    let mut server = std::process::Command::new("python3")
        .arg(dir.join("mock.py"))
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let _server = KillOnDrop(server);
    let mut port = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut port)
        .unwrap();
    let mut proposer = LlmProposer {
        model: "m".into(),
        model_env: ModelEnv {
            openai_base_url: format!("http://127.0.0.1:{}/v1", port.trim()),
            openai_api_key: "hevo-proposer-key".into(),
            anthropic_base_url: String::new(),
            anthropic_api_key: String::new(),
        },
        run_dir: dir.join("runs/test-run"),
        timeout: Duration::from_secs(30),
        max_tokens: 1000,
    };
    let report = search(&dir, &mut proposer);
    // The first rewrite is perfect: it becomes the pick.
    assert_eq!(report.pick.estimate.value, 1.0, "{report:?}");
    assert!(report.pick.name.contains(".llm1c"), "{report:?}");
    let summary = std::fs::read_to_string(dir.join("runs/test-run/archive/summary.jsonl")).unwrap();
    assert!(summary.contains("the boundary sits at 6"), "{summary}");
    // What the model saw: scores, the code, failing inputs and traces; no test task, no
    // expected answer field.
    let first: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["auth"], "Bearer hevo-proposer-key");
    let prompt = first["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("seed: 0.") && prompt.contains("harness.sh"),
        "{prompt}"
    );
    assert!(
        prompt.contains("### task t"),
        "no failing task shown:\n{prompt}"
    );
    assert!(!prompt.contains("expected"), "{prompt}");
    for id in test_ids(&dir) {
        assert!(
            !prompt.contains(&format!("task {id}\n")),
            "test task {id} in the prompt"
        );
    }
}

#[test]
fn the_evaluation_budget_stops_the_search_cleanly() {
    let (_tmp, dir) =
        setup_fast("[evaluation]\nstrategy = \"full\"\n[budget]\nmax_evaluations = 100\n");
    let report = search(&dir, &mut ParamsProposer::default());
    // Phase 0 (40) and one iteration of 2 full candidates (80) would be 120 > 100: the run
    // stops before the batch that would cross the budget, and still reports its pick.
    assert!(report.evaluations <= 100, "{report:?}");
    let why = report.stopped_early.as_deref().unwrap_or("");
    assert!(why.contains("budget of 100"), "{report:?}");
    assert!(report.pick.estimate.value.is_finite());
}

/// A budget reached half-way through an iteration: the pick rests on the finished
/// iterations (the stopped one's candidates have no estimate and rank last), the record
/// reads back (it once held a NaN pick that broke `status` and `report`), and raising the
/// budget resumes to exactly what a fresh run with that budget finds.
#[test]
fn a_budget_reached_mid_iteration_keeps_a_clean_pick_and_resumes_exactly() {
    let config = |max: u64| budgeted(0.3, max);
    let (_tmp, dir) = setup_fast(&config(50));
    let report = search(&dir, &mut ParamsProposer::default());
    assert!(report.evaluations <= 50, "{report:?}");
    assert!(report.stopped_early.is_some(), "{report:?}");
    assert!(report.pick.estimate.value.is_finite(), "{report:?}");
    let (estimated, left_out): (Vec<_>, Vec<_>) = report
        .candidates
        .iter()
        .partition(|c| c.estimate.value.is_finite());
    assert!(
        !left_out.is_empty(),
        "the budget stopped no candidate: {report:?}"
    );
    assert!(left_out.iter().all(|c| c.iteration == 1), "{report:?}");
    assert!(estimated.iter().all(|c| c.name != left_out[0].name));
    assert!(report.candidates[..estimated.len()]
        .iter()
        .all(|c| c.estimate.value.is_finite()));
    assert_record_reads_back(&report, &dir);

    let resumed = resume_with_budget(&dir, 50, 5000);
    let (_tmp2, fresh_dir) = setup_fast(&config(5000));
    let fresh = search(&fresh_dir, &mut ParamsProposer::default());
    assert_eq!(resumed.stopped_early, None);
    assert_eq!(resumed.pick.name, fresh.pick.name);
    assert_eq!(estimates(&resumed), estimates(&fresh));
}

/// The search record of a budget-stopped `report` (search.json) reads back with its pick,
/// the pick's estimate, and an estimate for every frontier member.
fn assert_record_reads_back(report: &SearchReport, dir: &Path) {
    let record = hevo_search::finalize::SearchRecord::from_report(
        report,
        &dir.join("hevo.toml"),
        &["seed".into()],
    );
    let back: hevo_search::finalize::SearchRecord =
        serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
    assert_eq!(back.pick, report.pick.name);
    assert!(back.pick_estimate.is_some());
    assert!(back.frontier.iter().all(|n| back.estimates.contains_key(n)));
}

/// Raises `[budget] max_evaluations` in `dir`'s hevo.toml from `old` to `new` and runs the
/// search again (a resume).
fn resume_with_budget(dir: &Path, old: u64, new: u64) -> SearchReport {
    let path = dir.join("hevo.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let from = format!("max_evaluations = {old}");
    assert!(text.contains(&from), "{text}");
    std::fs::write(
        &path,
        text.replace(&from, &format!("max_evaluations = {new}")),
    )
    .unwrap();
    search(dir, &mut ParamsProposer::default())
}

/// The `[evaluation]` and `[budget]` tables of a `recommended` run at `rho` with
/// `max_evaluations = max`.
fn budgeted(rho: f64, max: u64) -> String {
    format!("[evaluation]\nstrategy = \"recommended\"\nrho = {rho}\n[budget]\nmax_evaluations = {max}\n")
}

/// Every candidate's name and estimate, in the report's order.
fn estimates(r: &SearchReport) -> Vec<(String, f64)> {
    r.candidates
        .iter()
        .map(|c| (c.name.clone(), c.estimate.value))
        .collect()
}

/// A budget below phase 0 (every seed on every val task) could pick nothing: the user's
/// error, naming the line and the least budget that works.
#[test]
fn a_budget_below_phase_0_is_the_users_error_with_its_line() {
    let (_tmp, dir) = setup_fast("[budget]\nmax_evaluations = 30\n");
    let err = try_search(&dir, &mut ParamsProposer::default()).unwrap_err();
    assert!(err.is_user_error(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("hevo.toml:10: `budget.max_evaluations` is 30"),
        "{msg}"
    );
    assert!(msg.contains("at least 40"), "{msg}");
}

/// Resuming a run with another seed or strategy would replay its decisions differently and
/// rewrite its pick under its archive and test results: refused, naming what differs.
#[test]
fn resuming_with_another_seed_or_strategy_is_refused() {
    let (_tmp, dir) = setup_fast("[evaluation]\nstrategy = \"recommended\"\n");
    let first = search(&dir, &mut ParamsProposer::default());
    let text = std::fs::read_to_string(dir.join("hevo.toml")).unwrap();
    for (from, to, says) in [
        ("seed = 11", "seed = 12", "seed 11"),
        ("\"recommended\"", "\"screen\"", "strategy `recommended`"),
    ] {
        std::fs::write(dir.join("hevo.toml"), text.replace(from, to)).unwrap();
        let err = try_search(&dir, &mut ParamsProposer::default()).unwrap_err();
        assert!(err.is_user_error(), "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    std::fs::write(dir.join("hevo.toml"), &text).unwrap();
    let again = search(&dir, &mut ParamsProposer::default());
    assert_eq!(again.pick.name, first.pick.name);
}

/// The store tells the truth (issue 10): its `estimates` hold the strategy's final estimate
/// of every candidate (one row each, no per-batch placeholder), and under `full` each is
/// recomputed exactly from the store's own trial rows: the mean over val tasks of each
/// task's mean outcome.
#[test]
fn the_store_holds_the_estimates_the_strategy_made_and_they_recompute_from_its_trials() {
    let (_tmp, dir) = setup_fast("[evaluation]\nstrategy = \"full\"\n");
    let report = search(&dir, &mut ParamsProposer::default());
    let db = rusqlite::Connection::open(dir.join("runs/test-run/hevo.db")).unwrap();
    let rows: Vec<(i64, String, f64, String)> = db
        .prepare(
            "SELECT e.candidate_id, c.name, e.value, e.estimator FROM estimates e
             JOIN candidates c ON c.id = e.candidate_id ORDER BY e.candidate_id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows.len(),
        report.candidates.len(),
        "one estimate per candidate"
    );
    for (id, name, value, estimator) in &rows {
        assert_eq!(estimator, "full");
        let recomputed: f64 = db
            .query_row(
                "SELECT AVG(m) FROM (SELECT AVG(t.outcome) AS m FROM trials t
                 JOIN tasks k ON k.id = t.task_id
                 WHERE t.candidate_id = ?1 AND k.split = 'val' GROUP BY t.task_id)",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            (recomputed - value).abs() < 1e-12,
            "{name}: store says {value}, its trials say {recomputed}"
        );
        let shown = report.candidates.iter().find(|c| &c.name == name).unwrap();
        assert!((shown.estimate.value - value.clamp(0.0, 1.0)).abs() < 1e-12);
    }
}

/// The store keeps what the strategy drew (issue 10): under `coevolve/hajek` each
/// candidate's `draws` (task, inclusion probability) and its trial rows give back the
/// estimate the store and the archive report, by the Hajek formula per stratum
/// `sum(y/pi) / sum(1/pi)`, strata averaged.
#[test]
fn the_picks_estimate_recomputes_from_the_draws_and_trials_in_the_store() {
    let (_tmp, dir) =
        setup_fast("[evaluation]\nstrategy = \"coevolve\"\nestimator = \"hajek\"\nrho = 0.3\n");
    let report = search(&dir, &mut ParamsProposer::default());
    let db = rusqlite::Connection::open(dir.join("runs/test-run/hevo.db")).unwrap();
    let estimates: Vec<(i64, String, f64)> = db
        .prepare(
            "SELECT e.candidate_id, c.name, e.value FROM estimates e
             JOIN candidates c ON c.id = e.candidate_id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(estimates.len(), report.candidates.len());
    let mut sampled = 0;
    for (id, name, value) in &estimates {
        // (group, y, pi) of every drawn task.
        let rows: Vec<(Option<String>, f64, f64)> = db
            .prepare(
                "SELECT k.grp, AVG(t.outcome), d.inclusion_prob FROM draws d
                 JOIN trials t ON t.candidate_id = d.candidate_id AND t.task_id = d.task_id
                 JOIN tasks k ON k.id = d.task_id
                 WHERE d.candidate_id = ?1 AND d.label = 'val' GROUP BY d.task_id",
            )
            .unwrap()
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(!rows.is_empty(), "{name} has no draws");
        if rows.iter().any(|r| r.2 < 1.0) {
            sampled += 1;
        }
        let mut groups: std::collections::BTreeMap<Option<String>, (f64, f64)> = Default::default();
        for (g, y, pi) in &rows {
            let e = groups.entry(g.clone()).or_default();
            e.0 += y / pi;
            e.1 += 1.0 / pi;
        }
        let recomputed = groups.values().map(|(a, b)| a / b).sum::<f64>() / groups.len() as f64;
        assert!(
            (recomputed - value).abs() < 1e-9,
            "{name}: the store says {value}, its draws and trials say {recomputed}"
        );
    }
    assert!(
        sampled > 0,
        "no candidate was sampled: the test shows nothing"
    );
    let pick = report.pick.name.clone();
    assert!(estimates.iter().any(|(_, n, _)| *n == pick));
}

/// A budget met by the strategy's own finish (its verification of the pick): every
/// iteration is done and every candidate keeps its estimate, the run is marked as stopped
/// early with no trial past the budget, and raising the budget resumes to exactly what a
/// fresh run with that budget finds. At rho 0.7 on this example the finish buys trials,
/// so one trial less than the full run's is met inside the finish.
#[test]
fn a_budget_met_by_the_finish_keeps_every_estimate_and_resumes_exactly() {
    let config = |max: u64| budgeted(0.7, max);
    let (_tmp, full_dir) = setup_fast(&config(5000));
    let full = search(&full_dir, &mut ParamsProposer::default());
    assert_eq!(full.stopped_early, None, "{full:?}");
    let budget = full.evaluations - 1;
    let (_tmp2, dir) = setup_fast(&config(budget));
    let cut = search(&dir, &mut ParamsProposer::default());
    assert!(cut.evaluations <= budget, "{cut:?}");
    assert!(
        cut.stopped_early
            .as_deref()
            .is_some_and(|why| why.contains(&format!("budget of {budget} trials"))),
        "{cut:?}"
    );
    // Met in the finish, not in an iteration: no candidate is left without an estimate.
    assert_eq!(cut.iterations_done, full.iterations_done, "{cut:?}");
    assert_eq!(cut.candidates.len(), full.candidates.len());
    assert!(
        cut.candidates.iter().all(|c| c.estimate.value.is_finite()),
        "{cut:?}"
    );
    assert!(cut.pick.estimate.value.is_finite(), "{cut:?}");
    assert_record_reads_back(&cut, &dir);

    let resumed = resume_with_budget(&dir, budget, 5000);
    assert_eq!(resumed.stopped_early, None);
    assert_eq!(resumed.pick.name, full.pick.name);
    assert_eq!(resumed.evaluations, full.evaluations);
    assert_eq!(estimates(&resumed), estimates(&full));
}
