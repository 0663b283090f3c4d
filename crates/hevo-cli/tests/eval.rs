//! `hevo eval` end to end: the real binary, real harness processes, the real store.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hevo_runtime::store::Store;
use serde_json::Value;

mod support;
use support::{json_of, write};

fn hevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn quick_start_sentiment_example_reports_json() {
    let tmp = tempfile::tempdir().unwrap();
    let out = hevo()
        .arg("eval")
        .arg(examples().join("sentiment/harness-rules"))
        .arg("--suite")
        .arg(examples().join("sentiment"))
        .arg("--run-dir")
        .arg(tmp.path().join("run"))
        .arg("--json")
        .output()
        .unwrap();
    let v = json_of(&out);
    for key in [
        "pass_rate",
        "ci_low",
        "ci_high",
        "trials",
        "status_counts",
        "tokens",
        "cost_usd",
        "tasks",
    ] {
        assert!(v.get(key).is_some(), "missing key {key} in {v}");
    }
    assert_eq!(v["trials"], 30);
    assert_eq!(v["tasks"].as_array().unwrap().len(), 30);
    let p = v["pass_rate"].as_f64().unwrap();
    assert!(
        p > 0.7,
        "the rule harness should do well on its own suite: {p}"
    );
    assert!(v["ci_low"].as_f64().unwrap() <= p && p <= v["ci_high"].as_f64().unwrap());
    assert_eq!(v["tokens"]["input"], 0);
    let t0 = &v["tasks"][0];
    for key in ["id", "outcome", "status", "trials"] {
        assert!(t0.get(key).is_some(), "task entry lacks {key}: {t0}");
    }
    // Human output goes to stdout, progress to stderr.
    let out = hevo()
        .arg("eval")
        .arg(examples().join("sentiment/harness-rules"))
        .arg("--suite")
        .arg(examples().join("sentiment"))
        .arg("--run-dir")
        .arg(tmp.path().join("run"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("pass rate") && stdout.contains("95% CI"),
        "{stdout}"
    );
    assert!(
        stdout.contains("30 reused"),
        "resumed from the store: {stdout}"
    );
}

#[test]
fn shell_example_is_scored_by_tests() {
    let tmp = tempfile::tempdir().unwrap();
    let out = hevo()
        .arg("eval")
        .arg(examples().join("shell/harness-script"))
        .arg("--suite")
        .arg(examples().join("shell"))
        .arg("--run-dir")
        .arg(tmp.path().join("run"))
        .arg("--json")
        .output()
        .unwrap();
    let v = json_of(&out);
    let tasks = v["tasks"].as_array().unwrap();
    let get = |id: &str| tasks.iter().find(|t| t["id"] == id).unwrap().clone();
    assert_eq!(get("s02")["status"], "pass", "files + sum");
    assert_eq!(get("s08")["status"], "fail", "unsupported op");
    assert_eq!(get("s08")["outcome"], 0.0);
}

#[test]
fn bad_suite_exits_2_and_lists_every_bad_line() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    write(
        &suite.join("suite.toml"),
        "name = \"x\"\n[scorer]\nkind = \"exact\"\n",
    );
    write(
        &suite.join("tasks.jsonl"),
        "{\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":1}\n\
         {\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":1}\n\
         {\"id\":\"b\",\"split\":\"dev\",\"input\":1,\"expected\":1}\n\
         oops\n",
    );
    let out = hevo()
        .arg("eval")
        .arg(examples().join("sentiment/harness-rules"))
        .arg("--suite")
        .arg(&suite)
        .arg("--run-dir")
        .arg(tmp.path().join("run"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tasks.jsonl:2: duplicate id"), "{err}");
    assert!(err.contains("tasks.jsonl:3: unknown split `dev`"), "{err}");
    assert!(err.contains("tasks.jsonl:4: invalid JSON"), "{err}");
    assert!(!tmp.path().join("run").exists(), "nothing ran");

    // A harness whose entry program does not exist is a user error, caught before running.
    let h = tmp.path().join("h");
    write(
        &h.join("harness.toml"),
        "entry = [\"no-such-program-hevo\"]\n",
    );
    let out = hevo()
        .arg("eval")
        .arg(&h)
        .arg("--suite")
        .arg(examples().join("sentiment"))
        .arg("--run-dir")
        .arg(tmp.path().join("run"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("harness.toml") && err.contains("no-such-program-hevo"),
        "{err}"
    );

    // A missing harness is a user error too.
    let out = hevo()
        .arg("eval")
        .arg(tmp.path().join("nope"))
        .arg("--suite")
        .arg(examples().join("sentiment"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn harness_gets_a_clean_environment_and_no_provider_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path().join("h");
    write(
        &h.join("harness.toml"),
        "entry = [\"python3\", \"env.py\"]\n[params]\nk = { values = [1, 2], default = 2 }\n",
    );
    write(
        &h.join("env.py"),
        "import json, os, sys\n\
         stdin = sys.stdin.read()\n\
         print(json.dumps({'answer': 1, 'env': dict(os.environ), 'cwd': os.getcwd(),\n\
         \x20 'stdin': stdin, 'params_file': open('params.json').read()}))\n",
    );
    let suite = tmp.path().join("suite");
    write(
        &suite.join("suite.toml"),
        "name = \"x\"\n[scorer]\nkind = \"exact\"\n",
    );
    write(
        &suite.join("tasks.jsonl"),
        "{\"id\":\"t\",\"split\":\"val\",\"input\":{\"q\":1},\"expected\":\"SECRET-EXPECTED\"}\n",
    );
    let run = tmp.path().join("run");
    let out = hevo()
        .arg("eval")
        .arg(&h)
        .arg("--suite")
        .arg(&suite)
        .arg("--run-dir")
        .arg(&run)
        .arg("--json")
        .env("OPENAI_API_KEY", "sk-real-provider-key")
        .env("ANTHROPIC_API_KEY", "sk-ant-real")
        .env("SOME_OTHER_SECRET", "x")
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(
        v["status_counts"]["fail"], 1,
        "it ran and answered (wrongly)"
    );
    let stdout = std::fs::read_to_string(run.join("traces/c1/t/0.stdout")).unwrap();
    let meta: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(v["tasks"][0]["details"][0]["answer"], 1);
    let env = meta["env"].as_object().unwrap();
    let all = serde_json::to_string(env).unwrap();
    assert!(!all.contains("sk-real-provider-key") && !all.contains("sk-ant-real"));
    assert!(!env.contains_key("SOME_OTHER_SECRET"));
    // A per-trial gateway key (or the offline placeholder when no model is pulled).
    let key = env["OPENAI_API_KEY"].as_str().unwrap();
    assert!(key.starts_with("hevo-"), "{key}");
    assert_eq!(env["ANTHROPIC_API_KEY"], env["OPENAI_API_KEY"]);
    assert!(env["OPENAI_BASE_URL"]
        .as_str()
        .unwrap()
        .starts_with("http://127.0.0.1:"));
    assert!(env.contains_key("ANTHROPIC_BASE_URL"));
    assert_eq!(env["HEVO_PARAMS"], "{\"k\":2}");
    assert_eq!(meta["params_file"], "{\"k\":2}");
    // Opaque: unique per trial, naming no task, candidate or run.
    let id = env["HEVO_TRIAL_ID"].as_str().unwrap();
    assert_eq!(id.len(), 16, "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let cwd = meta["cwd"].as_str().unwrap();
    assert_eq!(env["HOME"], cwd, "HOME is the working directory");
    let suite_dir = suite.canonicalize().unwrap();
    assert!(
        !Path::new(cwd).starts_with(&suite_dir),
        "cwd outside the suite"
    );
    assert!(
        !Path::new(cwd).exists(),
        "the working dir is removed afterwards"
    );
    assert!(!meta["stdin"].as_str().unwrap().contains("SECRET-EXPECTED"));
}

#[test]
fn default_run_dir_is_deterministic_and_rerun_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let args = |cmd: &mut Command| {
        cmd.current_dir(tmp.path())
            .arg("eval")
            .arg(examples().join("sentiment/harness-rules"))
            .arg("--suite")
            .arg(examples().join("sentiment"))
            .args(["--split", "test", "--jobs", "2", "--json"]);
    };
    let mut c = hevo();
    args(&mut c);
    let first = c.output().unwrap();
    let v1 = json_of(&first);
    let mut c = hevo();
    args(&mut c);
    let second = c.output().unwrap();
    let v2 = json_of(&second);
    assert_eq!(v1["run_dir"], v2["run_dir"]);
    assert!(v1["run_dir"]
        .as_str()
        .unwrap()
        .contains("runs/eval-harness-rules-"));
    assert_eq!(v2["reused"], 30);
    assert_eq!(v2["ran_now"], 0);
    assert_eq!(v1["pass_rate"], v2["pass_rate"]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("hevo: run dir runs/eval-harness-rules-"),
        "{err}"
    );
}

/// Counts rows per (task, trial) in the store.
fn unit_counts(db: &Path) -> Vec<(String, u32, i64)> {
    let store = Store::open_read_only(db).unwrap();
    let mut st = store
        .connection()
        .prepare(
            "SELECT task_id, trial_index, COUNT(*) FROM trials GROUP BY task_id, trial_index \
             ORDER BY task_id, trial_index",
        )
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

#[test]
fn sigkill_mid_run_then_rerun_resumes_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("starts.log");
    let gate = tmp.path().join("gate");
    let h = tmp.path().join("h");
    write(&h.join("harness.toml"), "entry = [\"bash\", \"h.sh\"]\n");
    // Every start is logged; gated tasks wait for the gate file (at most 30 s).
    write(
        &h.join("h.sh"),
        &format!(
            "input=$(cat)\n\
             echo \"$HEVO_TRIAL_ID $input\" >> '{log}'\n\
             if [[ \"$input\" == *gated* ]]; then\n\
             \x20 for _ in $(seq 300); do [ -e '{gate}' ] && break; sleep 0.1; done\n\
             fi\n\
             echo '\"ok\"'\n",
            log = log.display(),
            gate = gate.display()
        ),
    );
    let suite = tmp.path().join("suite");
    write(
        &suite.join("suite.toml"),
        "name = \"x\"\n[scorer]\nkind = \"exact\"\n",
    );
    let mut lines = vec![
        "{\"id\":\"g\",\"split\":\"val\",\"input\":\"gated\",\"expected\":\"ok\"}".to_string(),
    ];
    for i in 0..6 {
        lines.push(format!(
            "{{\"id\":\"t{i}\",\"split\":\"val\",\"input\":\"free\",\"expected\":\"ok\"}}"
        ));
    }
    write(&suite.join("tasks.jsonl"), &(lines.join("\n") + "\n"));
    let run = tmp.path().join("run");
    let db = run.join("hevo.db");
    let cmd = || {
        let mut c = hevo();
        // Working dirs of the killed trials are left behind: keep them in the temp dir.
        c.env("TMPDIR", tmp.path());
        // The harness logs its starts and waits for a gate outside its working directory,
        // which the sandbox (rightly) forbids; this test is about resume, not containment.
        c.env("HEVO_SANDBOX", "off");
        c.arg("eval")
            .arg(&h)
            .arg("--suite")
            .arg(&suite)
            .arg("--run-dir")
            .arg(&run)
            .args(["--trials", "2", "--jobs", "3", "--json"]);
        c
    };
    // The two gated units can hold at most two of the three workers, so all twelve free
    // units finish while they wait; then hevo is killed mid-run.
    let mut child = cmd()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = db.exists()
            && Store::open_read_only(&db)
                .and_then(|s| s.trial_count())
                .unwrap_or(0)
                >= 12;
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "free units never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let counts = unit_counts(&db);
    assert_eq!(
        counts.len(),
        12,
        "only the free units are recorded: {counts:?}"
    );
    assert!(counts.iter().all(|(t, _, n)| t != "g" && *n == 1));

    // Release the orphaned gated trials of the killed run, then run the same command.
    write(&gate, "");
    let out = cmd().output().unwrap();
    let v = json_of(&out);
    assert_eq!(v["trials"], 14);
    assert_eq!(v["reused"], 12);
    assert_eq!(v["ran_now"], 2);
    assert_eq!(v["status_counts"]["pass"], 14);
    let counts = unit_counts(&db);
    assert_eq!(counts.len(), 14);
    assert!(counts.iter().all(|(_, _, n)| *n == 1), "{counts:?}");

    // Finished trials were not re-run; the two killed ones were (started twice). The
    // opaque trial id is the same for the same unit across runs and differs between units.
    let starts = std::fs::read_to_string(&log).unwrap();
    let mut per_id: std::collections::BTreeMap<&str, (usize, &str)> = Default::default();
    for line in starts.lines() {
        let (id, input) = line.split_once(' ').unwrap();
        let e = per_id.entry(id).or_insert((0, input));
        e.0 += 1;
    }
    let free: Vec<usize> = per_id
        .values()
        .filter(|(_, i)| i.contains("free"))
        .map(|(n, _)| *n)
        .collect();
    let gated: Vec<usize> = per_id
        .values()
        .filter(|(_, i)| i.contains("gated"))
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(free, vec![1; 12], "{starts}");
    assert_eq!(gated, vec![2, 2], "{starts}");
}

#[test]
fn runs_kept_inside_the_suite_directory_do_not_break_resume() {
    // `cd my-suite && hevo eval harness --suite .` puts runs/ inside the suite (and beside
    // the harness): the run dir's hash must not change because of it.
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("sentiment");
    for f in [
        "suite.toml",
        "tasks.jsonl",
        "harness-rules/harness.toml",
        "harness-rules/harness.py",
    ] {
        write(
            &suite.join(f),
            &std::fs::read_to_string(examples().join("sentiment").join(f)).unwrap(),
        );
    }
    let run = || {
        json_of(
            &hevo()
                .current_dir(&suite)
                .args([
                    "eval",
                    "harness-rules",
                    "--suite",
                    ".",
                    "--split",
                    "train",
                    "--json",
                ])
                .output()
                .unwrap(),
        )
    };
    let first = run();
    let second = run();
    assert_eq!(first["run_dir"], second["run_dir"]);
    assert_eq!(second["reused"], 30);
}

/// The text report names the first ten tasks that did not pass and counts the rest, so a
/// reader never takes the ten for all of them.
#[test]
fn the_text_report_counts_the_tasks_it_does_not_list() {
    let d = tempfile::tempdir().unwrap();
    support::one_task(
        d.path(),
        ("sh", "h.sh", "echo '{\"answer\": \"no\"}'\n"),
        "x",
    );
    let tasks: String = (0..12)
        .map(|i| {
            format!("{{\"id\":\"t{i:02}\",\"split\":\"val\",\"input\":1,\"expected\":\"x\"}}\n")
        })
        .collect();
    write(&d.path().join("suite/tasks.jsonl"), &tasks);
    let out = hevo()
        .arg("eval")
        .arg(d.path().join("h"))
        .arg("--suite")
        .arg(d.path().join("suite"))
        .arg("--run-dir")
        .arg(d.path().join("run"))
        .args(["--no-progress", "--no-model"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("not passed"))
        .unwrap_or_else(|| panic!("no `not passed` line in:\n{text}"));
    assert!(
        line.contains("t00 (fail)") && line.contains("t09 (fail)"),
        "{line}"
    );
    assert!(!line.contains("t10"), "{line}");
    assert!(
        line.ends_with("and 2 more (--json lists every task)"),
        "{line}"
    );
}

/// A trial stopped by `--timeout` runs again when the command is repeated with a longer
/// one (same default run directory), while the trial that finished in time is reused; the
/// longer limit's outcome is then kept under a shorter one again.
#[test]
fn a_timed_out_trial_runs_again_under_a_longer_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        &tmp.path().join("h/harness.toml"),
        "entry = [\"sh\", \"h.sh\"]\n",
    );
    // Task `slow` (input 1) sleeps 1.5 s, task `fast` (input 0) answers at once.
    write(
        &tmp.path().join("h/h.sh"),
        "read x\nif [ \"$x\" = 1 ]; then sleep 1.5; fi\necho '\"x\"'\n",
    );
    write(
        &tmp.path().join("suite/suite.toml"),
        "name = \"s\"\n[scorer]\nkind = \"exact\"\n",
    );
    write(
        &tmp.path().join("suite/tasks.jsonl"),
        "{\"id\":\"fast\",\"split\":\"val\",\"input\":0,\"expected\":\"x\"}\n\
         {\"id\":\"slow\",\"split\":\"val\",\"input\":1,\"expected\":\"x\"}\n",
    );
    let eval = |timeout: &str| {
        json_of(
            &hevo()
                .current_dir(tmp.path())
                .args([
                    "eval",
                    "h",
                    "--suite",
                    "suite",
                    "--no-model",
                    "--no-progress",
                ])
                .args(["--json", "--timeout", timeout])
                .output()
                .unwrap(),
        )
    };
    let short = eval("0.5");
    assert_eq!(short["status_counts"]["timeout"], 1, "{short}");
    assert_eq!(short["status_counts"]["pass"], 1, "{short}");
    let long = eval("20");
    assert_eq!(long["run_dir"], short["run_dir"], "the same run directory");
    assert_eq!(
        (&long["ran_now"], &long["reused"]),
        (&1.into(), &1.into()),
        "only the timed-out trial ran again: {long}"
    );
    assert_eq!(long["status_counts"]["pass"], 2, "{long}");
    let again = eval("0.5");
    assert_eq!(again["ran_now"], 0, "{again}");
    assert_eq!(again["status_counts"]["pass"], 2, "{again}");
}
