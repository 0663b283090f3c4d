//! Foundation issue: real harness processes through `eval::plan` / `eval::run`.
//!
//! Each test writes a small suite and harness into a temp dir, runs them, and checks the
//! statuses, outcomes and store rows. No timing assertions: timeouts are generous relative
//! to what the harnesses do, and the hang test only checks that processes are gone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hevo_runtime::eval::{self, EvalOptions};
use hevo_runtime::launch::{LaunchError, LaunchFuture, LaunchSpec, Launcher, LocalLauncher};
use hevo_runtime::report::EvalReport;
use hevo_runtime::store::Store;
use serde_json::{json, Value};

mod support;
use support::Fixture;

/// A harness whose behaviour is chosen by the task input's `mode`.
const BEHAVE_PY: &str = r#"
import json, os, signal, subprocess, sys, time
task = json.load(sys.stdin)
mode = task["mode"]
if mode == "echo":
    print("some log line")
    print(json.dumps({"answer": task["answer"], "note": "meta"}))
elif mode == "crash":
    print("about to crash", file=sys.stderr)
    sys.exit(3)
elif mode == "badjson":
    print("positive")
elif mode == "huge":
    chunk = "x" * 1023 + "\n"
    for _ in range(4 * 1024):
        sys.stdout.write(chunk)
    sys.stderr.write("e" * (1 << 20))
    print(json.dumps(task["answer"]))
elif mode == "files":
    print(json.dumps(open("data.txt").read().strip()))
elif mode in ("hang", "stubborn"):
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["bash", "-c", "trap '' TERM; while true; do sleep 1; done"])
    else:
        child = subprocess.Popen(["sleep", "300"])
    with open(task["pidfile"], "w") as f:
        f.write(f"{os.getpid()} {child.pid}\n")
    time.sleep(300)
elif mode == "stdin":
    print(json.dumps(sorted(task.keys())))
elif mode == "sleep":
    time.sleep(task["secs"])
    print(json.dumps(task["answer"]))
"#;

impl Fixture {
    fn harness(&self, manifest_extra: &str) -> PathBuf {
        self.write("harness/behave.py", BEHAVE_PY);
        self.write(
            "harness/harness.toml",
            &format!("entry = [\"python3\", \"behave.py\"]\n{manifest_extra}"),
        );
        self.path("harness")
    }

    fn suite(&self, scorer: &str, tasks: &[Value]) -> PathBuf {
        self.write(
            "suite/suite.toml",
            &format!("name = \"t\"\n[scorer]\n{scorer}\n"),
        );
        let lines: Vec<String> = tasks.iter().map(|t| t.to_string()).collect();
        self.write("suite/tasks.jsonl", &(lines.join("\n") + "\n"));
        self.path("suite")
    }

    fn options(&self, harness: &Path, suite: &Path) -> EvalOptions {
        let mut o = EvalOptions::new(harness, suite);
        o.run_dir = Some(self.path("run"));
        o.jobs = 4;
        o.grace = Duration::from_millis(300);
        o
    }
}

fn task(id: &str, input: Value, expected: Value) -> Value {
    json!({"id": id, "split": "val", "input": input, "expected": expected})
}

fn run(opts: EvalOptions) -> EvalReport {
    let plan = eval::plan(opts).expect("plan");
    eval::run(&plan, None).expect("run")
}

fn status_of<'a>(r: &'a EvalReport, id: &str) -> &'a str {
    &r.tasks.iter().find(|t| t.id == id).unwrap().status
}

fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie (state Z) is dead; it waits only for its new parent to reap it.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn statuses_of_real_harness_processes() {
    let f = Fixture::new();
    let h = f.harness("timeout_s = 60\n");
    let pidfile = f.path("pids-hang");
    let pidfile2 = f.path("pids-stubborn");
    f.write("suite/files/f1/data.txt", "from the files folder\n");
    let mut files_task = task(
        "files",
        json!({"mode": "files"}),
        json!("from the files folder"),
    );
    files_task["files"] = json!("files/f1");
    let s = f.suite(
        "kind = \"exact\"",
        &[
            task(
                "pass",
                json!({"mode": "echo", "answer": [1, 2]}),
                json!([1.0, 2]),
            ),
            task("fail", json!({"mode": "echo", "answer": "a"}), json!("b")),
            task("crash", json!({"mode": "crash"}), json!(1)),
            task("badjson", json!({"mode": "badjson"}), json!("positive")),
            task("huge", json!({"mode": "huge", "answer": 7}), json!(7)),
            files_task,
            task(
                "hang",
                json!({"mode": "hang", "pidfile": pidfile}),
                json!(0),
            ),
            task(
                "stubborn",
                json!({"mode": "stubborn", "pidfile": pidfile2}),
                json!(0),
            ),
            task("stdin", json!({"mode": "stdin"}), json!(["mode"])),
        ],
    );
    let mut o = f.options(&h, &s);
    // Long enough for python3 to start on a loaded 2-core machine (2 s was not: a plain
    // `fail` task timed out under load); the hanging tasks still time out.
    o.timeout = Some(Duration::from_secs(8));
    o.output_cap = 64 * 1024;
    let r = run(o);
    assert_eq!(status_of(&r, "pass"), "pass");
    let pass = r.tasks.iter().find(|t| t.id == "pass").unwrap();
    assert_eq!(pass.details[0].answer, Some(json!([1, 2])));
    assert_eq!(status_of(&r, "fail"), "fail");
    assert_eq!(status_of(&r, "crash"), "harness_error");
    assert_eq!(status_of(&r, "badjson"), "harness_error");
    assert_eq!(
        status_of(&r, "huge"),
        "pass",
        "the answer after a huge output is found"
    );
    assert_eq!(status_of(&r, "files"), "pass");
    assert_eq!(status_of(&r, "hang"), "timeout");
    assert_eq!(status_of(&r, "stubborn"), "timeout");
    // The harness gets the input only: no `expected`, no id.
    assert_eq!(status_of(&r, "stdin"), "pass");
    assert_eq!(r.status_counts["timeout"], 2);
    assert_eq!(r.status_counts["harness_error"], 2);
    assert_eq!(r.trials, 9);
    assert!((r.pass_rate.value - 4.0 / 9.0).abs() < 1e-12);

    // Errors name their cause.
    let crash = r.tasks.iter().find(|t| t.id == "crash").unwrap();
    assert!(crash.details[0]
        .error
        .as_deref()
        .unwrap()
        .contains("code 3"));
    let bad = r.tasks.iter().find(|t| t.id == "badjson").unwrap();
    assert!(bad.details[0]
        .error
        .as_deref()
        .unwrap()
        .contains("not JSON"));

    // Output is capped on disk.
    let trace = r.run_dir.join(format!("traces/c{}/huge", r.candidate_id));
    assert_eq!(
        std::fs::metadata(trace.join("0.stdout")).unwrap().len(),
        64 * 1024
    );
    assert_eq!(
        std::fs::metadata(trace.join("0.stderr")).unwrap().len(),
        64 * 1024
    );
    let crash_trace = r
        .run_dir
        .join(format!("traces/c{}/crash/0.stderr", r.candidate_id));
    assert!(std::fs::read_to_string(crash_trace)
        .unwrap()
        .contains("about to crash"));

    // The whole process group is gone after a timeout, grandchildren included, even when
    // they ignore SIGTERM.
    for pf in [&pidfile, &pidfile2] {
        let pids = std::fs::read_to_string(pf).unwrap();
        for pid in pids.split_whitespace() {
            let pid: i32 = pid.parse().unwrap();
            assert!(
                process_gone(pid),
                "pid {pid} from {} survived",
                pf.display()
            );
        }
    }
}

#[test]
fn label_scorer_and_partial_credit_over_trials() {
    let f = Fixture::new();
    let h = f.harness("");
    let s = f.suite(
        "kind = \"label\"",
        &[
            task(
                "a",
                json!({"mode": "echo", "answer": " Positive "}),
                json!("positive"),
            ),
            task(
                "b",
                json!({"mode": "echo", "answer": "neutral"}),
                json!(["neg", "Neutral"]),
            ),
            task("c", json!({"mode": "echo", "answer": "x"}), json!("y")),
        ],
    );
    let mut o = f.options(&h, &s);
    o.trials = 2;
    let r = run(o);
    assert_eq!(r.trials, 6);
    assert_eq!(r.status_counts["pass"], 4);
    assert!((r.pass_rate.value - 2.0 / 3.0).abs() < 1e-12);
    assert!(r.pass_rate.ci_low < r.pass_rate.value && r.pass_rate.value < r.pass_rate.ci_high);
}

#[test]
fn command_scorer_with_a_command_and_with_a_tests_folder() {
    let f = Fixture::new();
    f.write("harness/harness.toml", "entry = [\"bash\", \"w.sh\"]\n");
    // Writes out.txt with the `content` of the input (extracted with python for JSON).
    f.write(
        "harness/w.sh",
        "python3 -c 'import json,sys; open(\"out.txt\",\"w\").write(json.load(sys.stdin)[\"content\"])'\necho '\"ok\"'\n",
    );
    let tasks = [
        task("good", json!({"content": "hello"}), json!("hello")),
        task("bad", json!({"content": "bye"}), json!("hello")),
    ];
    // 1. A command: exit 0 passes. The command reads the expected value from stdin.
    f.write("suite/check.py", "import json,sys\np=json.load(sys.stdin)\nsys.exit(0 if open('out.txt').read()==p['expected'] else 1)\n");
    let s = f.suite(
        "kind = \"command\"\ncommand = [\"python3\", \"{suite}/check.py\"]",
        &tasks,
    );
    let r = run(f.options(&f.path("harness"), &s));
    assert_eq!(status_of(&r, "good"), "pass");
    assert_eq!(status_of(&r, "bad"), "fail");

    // 2. A tests folder: per-task scripts give the fraction that pass.
    f.write("suite/tests/good/1.sh", "test -f out.txt\n");
    f.write("suite/tests/good/2.sh", "[ \"$(cat out.txt)\" = hello ]\n");
    f.write("suite/tests/bad/1.sh", "test -f out.txt\n");
    f.write("suite/tests/bad/2.sh", "[ \"$(cat out.txt)\" = hello ]\n");
    f.write(
        "suite/tests/bad/3.py",
        "import os\nassert os.path.exists('out.txt')\n",
    );
    let s = f.suite("kind = \"command\"\ntests = \"tests\"", &tasks);
    let mut o = f.options(&f.path("harness"), &s);
    o.run_dir = Some(f.path("run2"));
    let r = run(o);
    let bad = r.tasks.iter().find(|t| t.id == "bad").unwrap();
    assert!((bad.outcome.unwrap() - 2.0 / 3.0).abs() < 1e-12, "{bad:?}");
    assert_eq!(bad.status, "fail");
    assert_eq!(status_of(&r, "good"), "pass");
    // The harness never sees the tests: its working dir is a fresh temp dir.
    assert!((r.pass_rate.value - (1.0 + 2.0 / 3.0) / 2.0).abs() < 1e-12);
}

/// A `program` scorer's partial credit is the outcome; a scorer that fails on a task
/// whatever the answer is the suite's fault (`infra_error`, retried, not scored), and one
/// that fails only on the harness's answer (it scores the expected one) makes the trial the
/// harness's failure (`harness_error`, outcome 0, not retried).
#[test]
fn program_scorer_gives_partial_credit_and_its_failures_are_told_apart() {
    let f = Fixture::new();
    let h = f.harness("");
    f.write(
        "suite/score.py",
        "import json,os,sys\np=json.load(sys.stdin)\n\
         if os.environ['HEVO_TASK_ID']=='broken' or p['answer']=='boom': sys.exit(1)\n\
         print('debug line')\nprint(json.dumps({'score': len(set(p['answer'])&set(p['expected']))/len(p['expected'])}))\n",
    );
    let s = f.suite(
        "kind = \"program\"\ncommand = [\"python3\", \"score.py\"]",
        &[
            task(
                "half",
                json!({"mode": "echo", "answer": ["a", "x"]}),
                json!(["a", "b"]),
            ),
            task(
                "full",
                json!({"mode": "echo", "answer": ["a", "b"]}),
                json!(["a", "b"]),
            ),
            task(
                "broken",
                json!({"mode": "echo", "answer": ["a"]}),
                json!(["a"]),
            ),
            task(
                "dodge",
                json!({"mode": "echo", "answer": "boom"}),
                json!(["a"]),
            ),
        ],
    );
    let mut o = f.options(&h, &s);
    o.retries = 1;
    let r = run(o);
    let half = r.tasks.iter().find(|t| t.id == "half").unwrap();
    assert_eq!(half.outcome, Some(0.5));
    assert_eq!(status_of(&r, "full"), "pass");
    assert_eq!(status_of(&r, "broken"), "infra_error");
    assert_eq!(status_of(&r, "dodge"), "harness_error");
    assert_eq!(r.tasks_scored, 3);
    assert!((r.pass_rate.value - 0.5).abs() < 1e-12);
    let store = Store::open(&r.run_dir.join("hevo.db")).unwrap();
    let rows = store.trials_of(r.candidate_id).unwrap();
    let attempts = |id: &str| rows.iter().find(|t| t.task_id == id).unwrap().attempts;
    assert_eq!((attempts("broken"), attempts("dodge")), (2, 1));
}

/// Fails the first `failures` launches as if the spawn failed, then runs normally.
struct FlakyLauncher {
    failures: usize,
    calls: AtomicUsize,
}

impl Launcher for FlakyLauncher {
    fn launch(&self, spec: LaunchSpec) -> LaunchFuture<'_> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n < self.failures {
            Box::pin(async move {
                Err(LaunchError::Spawn {
                    program: spec.argv[0].clone(),
                    source: std::io::Error::other("injected fault"),
                })
            })
        } else {
            static LOCAL: LocalLauncher = LocalLauncher { limits: None };
            LOCAL.launch(spec)
        }
    }
}

#[test]
fn infra_errors_are_retried_and_never_scored_and_resume_retries_them() {
    let f = Fixture::new();
    let h = f.harness("");
    let s = f.suite(
        "kind = \"exact\"",
        &[task("a", json!({"mode": "echo", "answer": 1}), json!(1))],
    );
    let mut o = f.options(&h, &s);
    o.retries = 2;
    // Two failures, then success: one trial, three attempts, a pass.
    let plan = eval::plan(o.clone()).unwrap();
    let launcher = Arc::new(FlakyLauncher {
        failures: 2,
        calls: AtomicUsize::new(0),
    });
    let r = eval::run_with(&plan, launcher, None).unwrap();
    assert_eq!(r.status_counts["pass"], 1);
    let store = Store::open(&r.run_dir.join("hevo.db")).unwrap();
    assert_eq!(store.trials_of(r.candidate_id).unwrap()[0].attempts, 3);

    // Always failing: recorded as infra_error, excluded from the score.
    o.run_dir = Some(f.path("run-b"));
    let plan = eval::plan(o.clone()).unwrap();
    let launcher = Arc::new(FlakyLauncher {
        failures: usize::MAX,
        calls: AtomicUsize::new(0),
    });
    let r = eval::run_with(&plan, launcher, None).unwrap();
    assert_eq!(r.status_counts["infra_error"], 1);
    assert_eq!(r.tasks_scored, 0);
    assert!(r.pass_rate.value.is_nan());
    // Nothing scored: the floor is 0, not -0 (an empty f64 sum), which printed "-0.0%".
    assert!(
        r.pass_rate_floor.value.is_sign_positive(),
        "{:?}",
        r.pass_rate_floor
    );
    assert_eq!(r.to_json()["pass_rate_floor"].to_string(), "0.0");
    // Resuming retries the infra_error unit and replaces its row.
    let r = eval::run(&plan, None).unwrap();
    assert_eq!(r.ran_now, 1);
    assert_eq!(r.status_counts["pass"], 1);
    assert_eq!(r.status_counts["infra_error"], 0);
    assert_eq!(r.trials, 1);
}

/// A task left unscored (`infra_error`) is out of `pass_rate` but a failure in
/// `pass_rate_floor`: a harness that provokes provider errors on the tasks it would fail
/// raises the one, never the other. Once every trial is scored the two agree.
#[test]
fn an_unscored_task_lowers_the_floor_not_the_pass_rate() {
    let f = Fixture::new();
    let h = f.harness("");
    let s = f.suite(
        "kind = \"exact\"",
        &[
            task("a", json!({"mode": "echo", "answer": 1}), json!(1)),
            task("b", json!({"mode": "echo", "answer": 1}), json!(1)),
        ],
    );
    let mut o = f.options(&h, &s);
    o.jobs = 1;
    o.retries = 2;
    let plan = eval::plan(o).unwrap();
    // The first task's three attempts fail; the second passes.
    let launcher = Arc::new(FlakyLauncher {
        failures: 3,
        calls: AtomicUsize::new(0),
    });
    let r = eval::run_with(&plan, launcher, None).unwrap();
    assert_eq!(
        (r.status_counts["pass"], r.status_counts["infra_error"]),
        (1, 1)
    );
    assert_eq!((r.tasks_scored, r.pass_rate.value), (1, 1.0));
    assert_eq!(r.pass_rate_floor.value, 0.5);
    assert_eq!(r.unscored_trials(), 1);
    assert_eq!(r.to_json()["pass_rate_floor"], 0.5);
    let r = eval::run(&plan, None).unwrap();
    assert_eq!((r.pass_rate.value, r.pass_rate_floor.value), (1.0, 1.0));
    assert_eq!(r.unscored_trials(), 0);
}

#[test]
fn a_finished_run_resumes_without_rerunning_and_more_trials_add_only_new_units() {
    let f = Fixture::new();
    let h = f.harness("");
    let log = f.path("starts.log");
    // The harness appends a line per start to a log outside its working dir.
    f.write(
        "harness/logged.sh",
        &format!(
            "echo \"$HEVO_TRIAL_ID\" >> {}\nexec python3 \"$(dirname \"$0\")/behave.py\"\n",
            log.display()
        ),
    );
    f.write(
        "harness/harness.toml",
        "entry = [\"bash\", \"logged.sh\"]\n",
    );
    let s = f.suite(
        "kind = \"exact\"",
        &(0..5)
            .map(|i| {
                task(
                    &format!("t{i}"),
                    json!({"mode": "echo", "answer": i}),
                    json!(i),
                )
            })
            .collect::<Vec<_>>(),
    );
    let mut o = f.options(&h, &s);
    o.trials = 2;
    let r = run(o.clone());
    assert_eq!((r.ran_now, r.reused, r.trials), (10, 0, 10));
    assert_eq!(r.status_counts["pass"], 10);
    let r = run(o.clone());
    assert_eq!((r.ran_now, r.reused, r.trials), (0, 10, 10));
    o.trials = 3;
    let r = run(o);
    assert_eq!((r.ran_now, r.reused, r.trials), (5, 10, 15));
    let starts = std::fs::read_to_string(&log).unwrap();
    assert_eq!(starts.lines().count(), 15);
    let mut unique: Vec<_> = starts.lines().collect();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 15, "no unit ran twice");
}

#[test]
fn bad_suite_reports_every_line_before_running_anything() {
    let f = Fixture::new();
    let h = f.harness("");
    let marker = f.path("ran");
    f.write(
        "harness/harness.toml",
        &format!("entry = [\"touch\", \"{}\"]\n", marker.display()),
    );
    f.write(
        "suite/suite.toml",
        "name = \"t\"\n[scorer]\nkind = \"exact\"\n",
    );
    f.write(
        "suite/tasks.jsonl",
        "{\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":1}\n\
         {\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":1}\n\
         {\"id\":\"b\",\"split\":\"validation\",\"input\":1,\"expected\":1}\n\
         {\"id\":\"c\",\"split\":\"val\",\"input\":1\n\
         {\"id\":\"d\",\"split\":\"val\",\"input\":1}\n",
    );
    let err = eval::plan(f.options(&h, &f.path("suite"))).unwrap_err();
    assert!(err.is_user_error());
    let msg = err.to_string();
    for needle in [
        "tasks.jsonl:2: duplicate id `a`",
        "tasks.jsonl:3: unknown split `validation`",
        "tasks.jsonl:4: invalid JSON",
        "tasks.jsonl:5: missing field `expected`",
    ] {
        assert!(msg.contains(needle), "missing {needle:?} in:\n{msg}");
    }
    assert!(!marker.exists());
}

#[test]
fn prepare_sees_train_split_and_trials_read_its_state() {
    let f = Fixture::new();
    f.write(
        "harness/harness.toml",
        "entry = [\"python3\", \"h.py\"]\nprepare = [\"python3\", \"h.py\", \"--prepare\"]\n",
    );
    f.write(
        "harness/h.py",
        "import json, os, sys\n\
         if sys.argv[1:] == ['--prepare']:\n\
         \x20   rows = [json.loads(l) for l in sys.stdin]\n\
         \x20   json.dump({r['input']: r['expected'] for r in rows}, open('memory.json', 'w'))\n\
         else:\n\
         \x20   mem = json.load(open(os.path.join(os.environ['HEVO_STATE_DIR'], 'memory.json')))\n\
         \x20   print(json.dumps(mem.get(json.load(sys.stdin), 'unknown')))\n",
    );
    let mut tasks = vec![
        json!({"id": "tr1", "split": "train", "input": "q1", "expected": "a1"}),
        json!({"id": "tr2", "split": "train", "input": "q2", "expected": "a2"}),
    ];
    tasks.push(task("v1", json!("q1"), json!("a1")));
    tasks.push(task("v2", json!("q3"), json!("a3")));
    let s = f.suite("kind = \"exact\"", &tasks);
    let r = run(f.options(&f.path("harness"), &s));
    assert_eq!(status_of(&r, "v1"), "pass");
    assert_eq!(status_of(&r, "v2"), "fail");
}

/// `prepare` leaves links in its state to a file of the user's and to a folder outside;
/// hevo used to make the state read-only through them (a private file became readable by
/// every user, the store unwritable). Links are left alone now.
#[test]
fn links_prepare_leaves_in_its_state_change_no_mode_outside_it() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    f.write("victim/id_secret", "secret\n");
    let victim = f.path("victim/id_secret");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(f.path("victim"), std::fs::Permissions::from_mode(0o700)).unwrap();
    f.write(
        "harness/harness.toml",
        "entry = [\"python3\", \"h.py\"]\nprepare = [\"python3\", \"h.py\", \"--prepare\"]\n",
    );
    f.write(
        "harness/h.py",
        &format!(
            "import json, os, sys\n\
             if sys.argv[1:] == ['--prepare']:\n\
             \x20   os.symlink({:?}, 'file_link')\n\
             \x20   os.symlink({:?}, 'dir_link')\n\
             \x20   open('memory.json', 'w').write('{{}}')\n\
             else:\n\
             \x20   json.load(sys.stdin)\n\
             \x20   print(json.dumps('a1'))\n",
            victim.display().to_string(),
            f.path("victim").display().to_string()
        ),
    );
    let tasks = vec![
        json!({"id": "tr1", "split": "train", "input": "q1", "expected": "a1"}),
        task("v1", json!("q1"), json!("a1")),
    ];
    let s = f.suite("kind = \"exact\"", &tasks);
    let r = run(f.options(&f.path("harness"), &s));
    assert_eq!(status_of(&r, "v1"), "pass");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&victim), 0o600);
    assert_eq!(mode(&f.path("victim")), 0o700);
}

#[test]
fn tasks_known_to_be_slow_start_first() {
    let f = Fixture::new();
    let h = f.harness("");
    let log = f.path("starts.log");
    f.write(
        "harness/logged.sh",
        &format!(
            "echo \"$HEVO_TRIAL_ID\" >> {}\nexec python3 \"$(dirname \"$0\")/behave.py\"\n",
            log.display()
        ),
    );
    f.write(
        "harness/harness.toml",
        "entry = [\"bash\", \"logged.sh\"]\n",
    );
    let s = f.suite(
        "kind = \"exact\"",
        &[
            task(
                "fast1",
                json!({"mode": "sleep", "secs": 0, "answer": 1}),
                json!(1),
            ),
            task(
                "fast2",
                json!({"mode": "sleep", "secs": 0, "answer": 1}),
                json!(1),
            ),
            task(
                "slow",
                json!({"mode": "sleep", "secs": 1.0, "answer": 1}),
                json!(1),
            ),
        ],
    );
    let mut o = f.options(&h, &s);
    o.jobs = 1;
    // First run: nothing known, file order.
    run(o.clone());
    // Second run (one more trial each): the task that took longest starts first.
    o.trials = 2;
    let r = run(o);
    let starts = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = starts.lines().collect();
    // The harness sees opaque ids; the ledger id they hash is `<run>/c<cand>/<index>/<task>`.
    let id = |task: &str, i: u32| {
        hevo_runtime::trial::opaque_id(&format!("{}/c{}/{i}/{task}", r.run_id, r.candidate_id))
    };
    assert_eq!(lines[0], id("fast1", 0), "{starts}");
    assert_eq!(lines[3], id("slow", 1), "{starts}");
}

#[test]
fn only_tasks_restricts_the_evaluation_to_a_subset() {
    let f = Fixture::new();
    let h = f.harness("");
    let s = f.suite(
        "kind = \"exact\"",
        &(0..4)
            .map(|i| {
                task(
                    &format!("t{i}"),
                    json!({"mode": "echo", "answer": i}),
                    json!(i),
                )
            })
            .collect::<Vec<_>>(),
    );
    let mut o = f.options(&h, &s);
    o.only_tasks = Some(vec!["t1".into(), "t3".into()]);
    let r = run(o.clone());
    let ids: Vec<_> = r.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, vec!["t1", "t3"]);
    assert_eq!(r.trials, 2);
    o.only_tasks = Some(vec!["t9".into()]);
    let err = eval::plan(o).unwrap_err();
    assert!(
        err.is_user_error() && err.to_string().contains("t9"),
        "{err}"
    );
}
