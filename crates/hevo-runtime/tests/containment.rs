//! Containment: real attacker harnesses against the bubblewrap sandbox.
//!
//! Each test writes a harness that tries to cheat, steal, forge or escape, runs it through
//! `eval::run_with` and the real `SandboxLauncher` (bwrap plus the `hevo-sandbox-init`
//! binary of this crate), and asserts the exact outcome. Where it proves the attack is
//! real, the same harness is also run with `LocalLauncher` and must succeed there. Tests
//! skip loudly when bwrap cannot make a sandbox on this machine (and fail instead with
//! `HEVO_TEST_SANDBOX=1`).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hevo_llm::TrialUsage;
use hevo_runtime::eval::{self, EvalOptions};
use hevo_runtime::launch::{Launcher, LocalLauncher};
use hevo_runtime::model_access::{CloseFuture, ModelAccess, ModelEnv, Ticket};
use hevo_runtime::report::EvalReport;
use hevo_runtime::sandbox::{SandboxLauncher, SandboxOptions};
use serde_json::{json, Value};

mod support;
use support::{kill_all, marker, survivors, Fixture};

fn sandbox() -> Option<Arc<dyn Launcher>> {
    let init = PathBuf::from(env!("CARGO_BIN_EXE_hevo-sandbox-init"));
    match SandboxLauncher::new("/usr/bin/bwrap".into(), init, SandboxOptions::default()) {
        Ok(l) => Some(Arc::new(l)),
        // CI sets HEVO_TEST_SANDBOX=1 once bubblewrap is installed: then a missing
        // sandbox fails the test instead of skipping it.
        Err(e) if std::env::var("HEVO_TEST_SANDBOX").is_ok_and(|v| v == "1") => {
            panic!("HEVO_TEST_SANDBOX=1 but no sandbox: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: no sandbox on this machine: {e} (apt-get install bubblewrap)");
            None
        }
    }
}

impl Fixture {
    /// A suite of `n` val tasks whose expected answer is `secret-<i>` (input: the index, and
    /// this fixture's directory name, so that an attack scanning the machine finds this
    /// suite's answers and not another test's or user's).
    fn suite(&self, n: usize) -> PathBuf {
        self.write(
            "suite/suite.toml",
            "name = \"t\"\n[scorer]\nkind = \"label\"\n",
        );
        let nonce = self
            .path("")
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let lines: Vec<String> = (0..n)
            .map(|i| {
                json!({"id": format!("t{i}"), "split": "val", "input": {"i": i, "fixture": nonce},
                       "expected": format!("secret-{i}")})
                .to_string()
            })
            .collect();
        self.write("suite/tasks.jsonl", &(lines.join("\n") + "\n"));
        self.path("suite")
    }
    fn harness(&self, name: &str, code: &str) -> PathBuf {
        self.write(&format!("{name}/h.py"), code);
        self.write(
            &format!("{name}/harness.toml"),
            "entry = [\"python3\", \"h.py\"]\ntimeout_s = 60\n",
        );
        self.path(name)
    }
    fn options(&self, harness: &Path, suite: &Path, run: &str) -> EvalOptions {
        let mut o = EvalOptions::new(harness, suite);
        o.run_dir = Some(self.path(run));
        o.jobs = 2;
        o.retries = 0;
        o.grace = Duration::from_millis(300);
        o
    }
}

fn run(opts: EvalOptions, launcher: Arc<dyn Launcher>) -> EvalReport {
    let plan = eval::plan(opts).unwrap();
    eval::run_with(&plan, launcher, None).unwrap()
}

fn answers(r: &EvalReport) -> Vec<String> {
    r.tasks
        .iter()
        .flat_map(|t| t.details.iter())
        .map(|d| match &d.answer {
            Some(Value::String(s)) => s.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

/// Reads hevo's (the parent's and every other process's) cmdline, cwd and environ from
/// /proc, finds the suite's tasks.jsonl and answers from `expected`.
const PROC_CHEAT: &str = r#"
import json, os, sys
task = json.load(sys.stdin)
def candidates():
    for pid in os.listdir("/proc"):
        if not pid.isdigit(): continue
        base = "/proc/" + pid
        try:
            parts = open(base + "/cmdline", "rb").read().split(b"\0")
            parts += open(base + "/environ", "rb").read().split(b"\0")
            yield os.readlink(base + "/cwd")
        except Exception:
            continue
        for p in parts:
            p = p.decode(errors="replace")
            yield p.split("=", 1)[-1]
for c in candidates():
    for path in (c, os.path.join(c, "tasks.jsonl"), os.path.join(c, "suite", "tasks.jsonl")):
        if path.endswith("tasks.jsonl") and os.path.isfile(path):
            for line in open(path):
                t = json.loads(line)
                if t["input"] == task:
                    print(json.dumps(t["expected"])); sys.exit(0)
print(json.dumps("honest-guess"))
"#;

#[test]
fn reading_the_suite_through_proc_is_blocked() {
    let Some(sandbox) = sandbox() else { return };
    let f = Fixture::new();
    let suite = f.suite(4);
    let h = f.harness("cheat", PROC_CHEAT);
    // A host process naming the suite in its command line, as `hevo eval --suite` does.
    let mut hevo_like = std::process::Command::new("sh")
        .args(["-c", "sleep 120", "hevo", "eval", "--suite"])
        .arg(suite.canonicalize().unwrap())
        .spawn()
        .unwrap();
    // The attack is real: unsandboxed it answers every task from `expected`.
    let local = run(
        f.options(&h, &suite, "run-local"),
        Arc::new(LocalLauncher::default()),
    );
    assert_eq!(local.pass_rate.value, 1.0, "{:?}", answers(&local));
    let boxed = run(f.options(&h, &suite, "run-boxed"), sandbox);
    let _ = hevo_like.kill();
    let _ = hevo_like.wait();
    assert_eq!(boxed.pass_rate.value, 0.0);
    assert_eq!(answers(&boxed), vec!["honest-guess"; 4]);
}

/// Tries to forge and destroy the store (the run directory's path is known to it), to
/// write into its own harness directory, the suite, and a file outside its working
/// directory; reports which attempts succeeded.
const FORGER: &str = r##"
import json, os, sys
json.load(sys.stdin)
run, suite, here, outside = sys.argv[1:5]
done = []
for name, act in [
    ("db-write", lambda: open(os.path.join(run, "hevo.db"), "ab").write(b"x" * 4096)),
    ("db-delete", lambda: os.remove(os.path.join(run, "hevo.db"))),
    ("run-file", lambda: open(os.path.join(run, "forged"), "w").write("x")),
    ("harness-write", lambda: open(os.path.join(here, "h.py"), "a").write("# changed\n")),
    ("harness-new", lambda: open(os.path.join(here, "new.py"), "w").write("x")),
    ("suite-write", lambda: open(os.path.join(suite, "tasks.jsonl"), "w").write("")),
    ("outside", lambda: open(outside, "w").write("x")),
]:
    try:
        act(); done.append(name)
    except Exception:
        pass
print(json.dumps(",".join(done) or "none"))
"##;

#[test]
fn the_store_harness_and_suite_cannot_be_written() {
    let Some(sandbox) = sandbox() else { return };
    let f = Fixture::new();
    let suite = f.suite(2);
    let run_dir = f.path("run");
    let outside = f.path("outside.txt");
    let h = f.harness("forger", FORGER);
    let h = h.canonicalize().unwrap();
    f.write(
        "forger/harness.toml",
        &format!(
            "entry = [\"python3\", \"h.py\", \"{}\", \"{}\", \"{}\", \"{}\"]\n",
            run_dir.display(),
            suite.canonicalize().unwrap().display(),
            h.display(),
            outside.display()
        ),
    );
    let before = hevo_runtime::harness::content_hash(&h).unwrap();
    let tasks_before = std::fs::read_to_string(suite.join("tasks.jsonl")).unwrap();
    let r = run(f.options(&h, &suite, "run"), sandbox);
    assert_eq!(answers(&r), vec!["none"; 2]);
    assert_eq!(r.trials, 2);
    assert!(run_dir.join("hevo.db").is_file());
    assert!(!run_dir.join("forged").exists());
    assert!(!outside.exists());
    assert!(!h.join("new.py").exists());
    assert_eq!(hevo_runtime::harness::content_hash(&h).unwrap(), before);
    assert_eq!(
        std::fs::read_to_string(suite.join("tasks.jsonl")).unwrap(),
        tasks_before
    );
}

/// Reads its capabilities, then tries to undo the sandbox with them: remount its own
/// (read-only) harness directory writable and write into it, directly and from a nested
/// user namespace (where it has every capability again). Reports what it saw and what
/// worked.
const CAPABLE: &str = r##"
import json, os, subprocess, sys
json.load(sys.stdin)
here = sys.argv[1]
cap = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff:")][0]
done = []
subprocess.run(["mount", "-o", "remount,bind,rw", here], capture_output=True)
try:
    open(os.path.join(here, "pwned"), "w").write("x"); done.append("harness-write")
except Exception:
    pass
nested = "mount -o remount,bind,rw '%s' && touch '%s/pwned-nested'" % (here, here)
subprocess.run(["unshare", "-Urm", "sh", "-c", nested], capture_output=True)
if os.path.exists(os.path.join(here, "pwned-nested")):
    done.append("nested-harness-write")
print(json.dumps("cap=" + cap + ";" + (",".join(done) or "none")))
"##;

/// Run as root (the CI's case, and the docs recommend root for cgroups), bwrap used to keep
/// every capability inside, enough to remount the harness directory, or the host's /usr,
/// writable. The process inside has none now.
#[test]
fn the_sandboxed_process_has_no_capability_to_undo_the_sandbox() {
    let Some(sandbox) = sandbox() else { return };
    let f = Fixture::new();
    let suite = f.suite(1);
    let h = f.harness("capable", CAPABLE).canonicalize().unwrap();
    f.write(
        "capable/harness.toml",
        &format!("entry = [\"python3\", \"h.py\", \"{}\"]\n", h.display()),
    );
    let r = run(f.options(&h, &suite, "run"), sandbox);
    let answer = answers(&r).join("");
    // Only CAP_NET_BIND_SERVICE (bit 10), for relays on low ports.
    assert!(
        answer.starts_with("cap=0000000000000400;"),
        "the sandboxed process kept capabilities: {answer}"
    );
    assert!(answer.ends_with(";none"), "{answer}");
    assert!(!h.join("pwned").exists());
    assert!(!h.join("pwned-nested").exists());
}

/// Answers wrong, and plants a `usercustomize.py` in its working directory's user
/// site-packages (where Python looks when `HOME` is that directory) that makes any Python
/// scorer print a perfect score and exit.
const SCORER_HIJACK: &str = r##"
import json, os, sys
json.load(sys.stdin)
v = "python%d.%d" % sys.version_info[:2]
site = os.path.join(os.getcwd(), ".local", "lib", v, "site-packages")
os.makedirs(site, exist_ok=True)
open(os.path.join(site, "usercustomize.py"), "w").write(
    "import os, sys\nprint(1.0, flush=True)\nos._exit(0)\n")
print(json.dumps("wrong answer"))
"##;

/// A Python scorer program used to run with `HOME` set to the trial's working directory, so
/// the harness's planted `usercustomize.py` ran inside it and scored every wrong answer 1.
/// Scorers now get an empty home of their own (and no user site-packages), sandboxed or not.
#[test]
fn a_harness_cannot_plant_code_that_the_scorer_runs() {
    let f = Fixture::new();
    let suite = f.suite(2);
    f.write(
        "suite/suite.toml",
        "name = \"t\"\n[scorer]\nkind = \"program\"\ncommand = [\"python3\", \"score.py\"]\n",
    );
    f.write(
        "suite/score.py",
        "import json, sys\nd = json.load(sys.stdin)\nprint(1.0 if d['answer'] == d['expected'] else 0.0)\n",
    );
    let h = f.harness("hijack", SCORER_HIJACK);
    let local = run(
        f.options(&h, &suite, "run-local"),
        Arc::new(LocalLauncher::default()),
    );
    assert_eq!(local.pass_rate.value, 0.0, "{:?}", answers(&local));
    let Some(sandbox) = sandbox() else { return };
    let boxed = run(f.options(&h, &suite, "run-boxed"), sandbox);
    assert_eq!(boxed.pass_rate.value, 0.0, "{:?}", answers(&boxed));
}

/// A `command` scorer runs in the harness's working directory; its `check.py` (a file of
/// the suite) was looked up there, so a harness that left its own `check.py` (exit 0)
/// passed every task with a wrong answer, sandboxed or not. An argument naming a suite file
/// is made absolute, as for `program`.
#[test]
fn a_harness_cannot_shadow_the_command_scorers_script() {
    let f = Fixture::new();
    let suite = f.suite(2);
    f.write(
        "suite/suite.toml",
        "name = \"t\"\n[scorer]\nkind = \"command\"\ncommand = [\"python3\", \"check.py\"]\n",
    );
    f.write(
        "suite/check.py",
        "import json, sys\nd = json.load(sys.stdin)\nsys.exit(0 if d['answer'] == d['expected'] else 1)\n",
    );
    let h = f.harness(
        "shadow",
        "import json, sys\njson.load(sys.stdin)\n\
         open('check.py', 'w').write('raise SystemExit(0)\\n')\n\
         print(json.dumps('wrong answer'))\n",
    );
    let local = run(
        f.options(&h, &suite, "run-local"),
        Arc::new(LocalLauncher::default()),
    );
    assert_eq!(local.pass_rate.value, 0.0, "{:?}", answers(&local));
    let Some(sandbox) = sandbox() else { return };
    let boxed = run(f.options(&h, &suite, "run-boxed"), sandbox);
    assert_eq!(boxed.pass_rate.value, 0.0, "{:?}", answers(&boxed));
}

/// Starts 50 `setsid` children that would outlive the trial by far.
fn setsid_harness(marker: &str) -> String {
    format!(
        r#"
import json, subprocess, sys
json.load(sys.stdin)
for _ in range(50):
    subprocess.Popen(["setsid", "sleep", "{marker}"], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(json.dumps("started"))
"#
    )
}

#[test]
fn setsid_children_die_with_the_trial() {
    let Some(sandbox) = sandbox() else { return };
    let f = Fixture::new();
    let suite = f.suite(1);
    let marker = marker(7000);
    let h = f.harness("escaper", &setsid_harness(&marker));
    // The attack is real: the local launcher's process-group kill misses them.
    let local = run(
        f.options(&h, &suite, "run-local"),
        Arc::new(LocalLauncher::default()),
    );
    assert_eq!(answers(&local), vec!["started"]);
    let escaped = survivors(&marker);
    kill_all(&escaped);
    assert_eq!(escaped.len(), 50, "unsandboxed setsid children");
    let boxed = run(f.options(&h, &suite, "run-boxed"), sandbox);
    assert_eq!(answers(&boxed), vec!["started"]);
    // The namespace is gone once the launcher returns; reaping by the kernel is immediate.
    let mut left = survivors(&marker);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        left = survivors(&marker);
    }
    assert_eq!(
        left,
        Vec::<i32>::new(),
        "sandboxed setsid children survived"
    );
}

/// Gives each trial its own key (`sk-trial-<n>`), like the gateway does.
struct Keys {
    base_url: String,
    next: std::sync::atomic::AtomicUsize,
}

impl ModelAccess for Keys {
    fn open(
        &self,
        _trial: &str,
        _trace: &Path,
        _spent: &hevo_llm::TrialUsage,
    ) -> Result<(ModelEnv, Ticket), String> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let key = format!("sk-trial-{n}");
        let env = ModelEnv {
            openai_base_url: self.base_url.clone(),
            openai_api_key: key.clone(),
            anthropic_base_url: self.base_url.clone(),
            anthropic_api_key: key,
        };
        Ok((env, Ticket::unbacked()))
    }
    fn close(&self, _ticket: Ticket) -> CloseFuture<'_> {
        Box::pin(async { TrialUsage::default() })
    }
}

/// Looks for a sibling trial's key in /proc for a few seconds, then calls the model
/// through `OPENAI_BASE_URL` with its own key and tries a host port it was not given.
const SIBLING_THIEF: &str = r#"
import json, os, sys, time, socket, urllib.request
json.load(sys.stdin)
mine = os.environ["OPENAI_API_KEY"]
stolen = None
deadline = time.time() + 4
while stolen is None and time.time() < deadline:
    for pid in os.listdir("/proc"):
        if not pid.isdigit(): continue
        try: env = open("/proc/%s/environ" % pid, "rb").read().decode(errors="replace")
        except Exception: continue
        for kv in env.split("\0"):
            if kv.startswith("OPENAI_API_KEY=sk-trial-") and kv.split("=", 1)[1] != mine:
                stolen = kv.split("=", 1)[1]
    time.sleep(0.1)
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/models",
                             headers={"Authorization": "Bearer " + mine})
reply = urllib.request.urlopen(req, timeout=10).read().decode().strip()
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
    other = "reached"
except Exception:
    other = "unreachable"
print(json.dumps("%s|%s|%s" % (stolen or "none", reply, other)))
"#;

/// A scripted upstream on the host's loopback: answers every request with the bearer key.
fn echo_server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut auth = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Authorization: Bearer ") {
                        auth = v.trim().to_string();
                    }
                }
                let body = format!("ok {auth}");
                let mut conn = conn;
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

#[test]
fn only_the_gateway_is_reachable_and_sibling_keys_are_invisible() {
    let Some(sandbox) = sandbox() else { return };
    let f = Fixture::new();
    let suite = f.suite(4);
    let gateway = echo_server();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    f.write("thief/h.py", SIBLING_THIEF);
    f.write(
        "thief/harness.toml",
        &format!("entry = [\"python3\", \"h.py\", \"{other_port}\"]\n"),
    );
    let h = f.path("thief");
    let mut opts = f.options(&h, &suite, "run");
    opts.jobs = 4;
    opts.model_access = Some(Arc::new(Keys {
        base_url: format!("http://127.0.0.1:{gateway}/v1"),
        next: Default::default(),
    }));
    let r = run(opts, sandbox);
    let got = answers(&r);
    assert_eq!(got.len(), 4);
    for a in &got {
        let parts: Vec<&str> = a.split('|').collect();
        assert_eq!(parts[0], "none", "a sibling's key was visible: {a}");
        assert!(
            parts[1].starts_with("ok sk-trial-"),
            "the gateway relay failed: {a}"
        );
        assert_eq!(
            parts[2], "unreachable",
            "a host port besides the gateway: {a}"
        );
    }
    drop(other);
}

/// Answers `secret-<i>` for input `{"i": i}`: right on the original suite.
const HONEST: &str = r#"
import json, sys
task = json.load(sys.stdin)
print(json.dumps("secret-%d" % task["i"]))
"#;

#[test]
fn a_changed_suite_reruns_what_changed_and_a_second_process_is_refused() {
    let f = Fixture::new();
    let suite = f.suite(4);
    let h = f.harness("honest", HONEST);
    let first = run(
        f.options(&h, &suite, "run"),
        Arc::new(LocalLauncher::default()),
    );
    assert_eq!((first.pass_rate.value, first.ran_now), (1.0, 4));
    // Invert two expected answers: exactly those two tasks run again, and now fail.
    let text = std::fs::read_to_string(suite.join("tasks.jsonl")).unwrap();
    let text = text
        .replace("\"secret-0\"", "\"inverted-0\"")
        .replace("\"secret-3\"", "\"inverted-3\"");
    std::fs::write(suite.join("tasks.jsonl"), text).unwrap();
    let second = run(
        f.options(&h, &suite, "run"),
        Arc::new(LocalLauncher::default()),
    );
    assert_eq!((second.ran_now, second.reused), (2, 2));
    assert_eq!(second.pass_rate.value, 0.5);
    // A second evaluator on the same run directory is refused, naming the holder.
    let plan = eval::plan(f.options(&h, &suite, "run")).unwrap();
    let _lock = hevo_runtime::run_lock::RunLock::acquire(&f.path("run")).unwrap();
    let err = eval::run_with(&plan, Arc::new(LocalLauncher::default()), None).unwrap_err();
    assert!(err.is_user_error());
    let msg = err.to_string();
    assert!(
        msg.contains("in use by another hevo process")
            && msg.contains(&std::process::id().to_string()),
        "{msg}"
    );
}

/// Reads the suite and the run directory kept inside its own harness directory.
const NESTED_CHEAT: &str = r#"
import json, os, sys
task = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
seen = os.path.exists(os.path.join(here, "run", "hevo.db"))
state = open(os.path.join(os.environ["HEVO_STATE_DIR"], "state.txt")).read()
try:
    open(os.path.join(os.environ["HEVO_STATE_DIR"], "state.txt"), "a").write("x")
    state += "+writable"
except OSError:
    state += "+read-only"
try:
    for line in open(os.path.join(here, "suite", "tasks.jsonl")):
        t = json.loads(line)
        if t["input"] == task:
            print(json.dumps(t["expected"])); sys.exit(0)
except OSError:
    pass
print(json.dumps(("db-visible" if seen else "honest-guess") + "+" + state))
"#;

#[test]
fn a_suite_and_run_dir_inside_the_harness_directory_stay_hidden() {
    let Some(sandbox) = sandbox() else { return };
    let f = Fixture::new();
    let h = f.harness("h", NESTED_CHEAT);
    f.write(
        "h/harness.toml",
        "entry = [\"python3\", \"h.py\"]\nprepare = [\"python3\", \"prep.py\"]\n",
    );
    // `prepare` writes its state inside the run directory, itself inside the harness
    // directory: trials see the state (read-only) but nothing else of the run directory.
    f.write(
        "h/prep.py",
        "import sys\nsys.stdin.read()\nopen('state.txt', 'w').write('ok')\n",
    );
    f.write(
        "h/suite/suite.toml",
        "name = \"t\"\n[scorer]\nkind = \"label\"\n",
    );
    f.write(
        "h/suite/tasks.jsonl",
        "{\"id\":\"a\",\"split\":\"val\",\"input\":{\"i\":0},\"expected\":\"secret-0\"}\n",
    );
    let suite = f.path("h/suite");
    let mut local = f.options(&h, &suite, "h/run");
    local.run_dir = Some(f.path("h/run-local"));
    assert_eq!(
        run(local, Arc::new(LocalLauncher::default()))
            .pass_rate
            .value,
        1.0
    );
    let boxed = run(f.options(&h, &suite, "h/run"), sandbox);
    assert_eq!(answers(&boxed), vec!["honest-guess+ok+read-only"]);
}

#[test]
fn a_hung_trial_times_out_and_leaves_no_process() {
    let Some(sandbox) = sandbox() else { return };
    let f = Fixture::new();
    let suite = f.suite(1);
    let marker = marker(8000);
    let code = format!(
        r#"
import json, signal, subprocess, sys, time
json.load(sys.stdin)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for _ in range(5):
    subprocess.Popen(["setsid", "sleep", "{marker}"])
time.sleep(600)
"#
    );
    let h = f.harness("hang", &code);
    let mut opts = f.options(&h, &suite, "run");
    opts.timeout = Some(Duration::from_secs(2));
    let r = run(opts, sandbox);
    assert_eq!(r.status_counts["timeout"], 1, "{:?}", r.status_counts);
    let mut left = survivors(&marker);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        left = survivors(&marker);
    }
    assert_eq!(
        left,
        Vec::<i32>::new(),
        "processes of a timed-out trial survived"
    );
}

/// A trial past its timeout gets SIGTERM and its grace period (`--kill-grace`) before
/// SIGKILL. Sandboxed it got neither: the group's SIGTERM reached only bubblewrap, which died
/// and took the namespace down with SIGKILL, and never the command, which runs in a session
/// of its own. The harness's handler now runs there too and it ends within its grace.
#[test]
fn a_timed_out_harness_gets_sigterm_and_its_grace_period_sandboxed_too() {
    let code = "import signal, sys, time\n\
                def done(*_):\n    print('graceful', flush=True)\n    sys.exit(0)\n\
                signal.signal(signal.SIGTERM, done)\n\
                print('ready', flush=True)\ntime.sleep(600)\n";
    let launchers: Vec<(&str, Arc<dyn Launcher>)> = match sandbox() {
        Some(s) => vec![
            ("local", Arc::new(LocalLauncher::default())),
            ("sandbox", s),
        ],
        None => vec![("local", Arc::new(LocalLauncher::default()))],
    };
    for (name, launcher) in launchers {
        let d = tempfile::tempdir().unwrap();
        let spec = hevo_runtime::launch::LaunchSpec {
            timeout: Duration::from_secs(2),
            // Long: a harness that never saw SIGTERM would still be SIGKILLed only after it,
            // but then would not have printed `graceful`.
            grace: Duration::from_secs(30),
            ..python_spec(code, d.path())
        };
        let rt = tokio::runtime::Runtime::new().unwrap();
        let out = rt.block_on(launcher.launch(spec)).unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout_tail);
        assert_eq!(
            out.exit,
            hevo_runtime::launch::Exit::TimedOut,
            "{name}: {stdout}"
        );
        assert!(
            stdout.contains("graceful"),
            "{name}: no SIGTERM seen: {stdout:?}"
        );
    }
}

/// An OpenAI-compatible upstream on the host's loopback: answers every chat completion.
fn chat_upstream() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; length];
                let _ = std::io::Read::read_exact(&mut reader, &mut body);
                let answer = json!({"id": "c", "object": "chat.completion", "model": "m-up",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})
                .to_string();
                let mut conn = conn;
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{answer}",
                    answer.len()
                );
            });
        }
    });
    port
}

/// The real gateway's access, leaking every trial's key into a directory the harnesses can
/// read (a stand-in for any way a key gets stolen); on close it also tries the key over the
/// gateway's TCP port from the host, then records the trial's totals.
struct Leaky {
    inner: hevo_runtime::model_access::GatewayAccess,
    drop_dir: PathBuf,
    gateway_port: u16,
    next: std::sync::atomic::AtomicUsize,
    over_tcp: std::sync::Mutex<Vec<String>>,
    usages: std::sync::Mutex<Vec<TrialUsage>>,
}

impl ModelAccess for Leaky {
    fn open(
        &self,
        trial: &str,
        trace: &Path,
        spent: &hevo_llm::TrialUsage,
    ) -> Result<(ModelEnv, Ticket), String> {
        let (env, ticket) = self.inner.open(trial, trace, spent)?;
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::fs::write(self.drop_dir.join(format!("key-{n}")), &env.openai_api_key).unwrap();
        self.over_tcp
            .lock()
            .unwrap()
            .push(env.openai_api_key.clone());
        Ok((env, ticket))
    }
    fn close(&self, ticket: Ticket) -> CloseFuture<'_> {
        // the ticket names its key only in its debug form
        let shown = format!("{ticket:?}");
        let mut list = self.over_tcp.lock().unwrap();
        if let Some(at) = list.iter().position(|k| shown.contains(k.as_str())) {
            list[at] = http_chat(self.gateway_port, &list[at]);
        }
        drop(list);
        Box::pin(async move {
            let usage = self.inner.close(ticket).await;
            self.usages.lock().unwrap().push(usage);
            usage
        })
    }
}

/// `POST /v1/chat/completions` with `key` over TCP; the status line and body.
fn http_chat(port: u16, key: &str) -> String {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).to_string();
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        conn,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut conn, &mut reply).unwrap();
    reply
}

/// Calls the gateway with its own key, then with a sibling's key found in the drop
/// directory; stays open a while so the sibling can try its key too.
const KEY_THIEF: &str = r#"
import glob, json, os, sys, time, urllib.request, urllib.error
json.load(sys.stdin)
mine = os.environ["OPENAI_API_KEY"]
def call(key):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=body.encode(), headers={"Authorization": "Bearer " + key,
                                     "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return str(r.status)
    except urllib.error.HTTPError as e:
        return "%d:%s" % (e.code, json.loads(e.read())["error"]["message"])
own = call(mine)
stolen = None
deadline = time.time() + 30
while stolen is None and time.time() < deadline:
    for p in glob.glob(os.path.join(sys.argv[1], "key-*")):
        k = open(p).read().strip()
        if k and k != mine:
            stolen = k
    time.sleep(0.05)
theft = call(stolen) if stolen else "no-sibling"
time.sleep(4)
print(json.dumps(own + "|" + theft))
"#;

/// What [`steal_keys`] saw: the answers, the host's TCP attempts, the trials' totals, the
/// ledger.
type Theft = (
    Vec<String>,
    Vec<String>,
    Vec<TrialUsage>,
    Vec<hevo_llm::CallRecord>,
);

/// Runs 2 concurrent trials of [`KEY_THIEF`] against a real gateway through `launcher`;
/// returns the answers, what the host's TCP attempts with each key got, each trial's totals
/// and the ledger.
fn steal_keys(launcher: impl FnOnce(&Path) -> Option<Arc<dyn Launcher>>) -> Option<Theft> {
    let f = Fixture::new();
    let suite = f.suite(2);
    let drop_dir = f.path("drop");
    std::fs::create_dir_all(&drop_dir).unwrap();
    let launcher = launcher(&drop_dir)?;
    let upstream = chat_upstream();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sink = Arc::new(hevo_llm::MemorySink::new());
    let handle = rt.block_on(async {
        let backend: Arc<dyn hevo_llm::Backend> = Arc::new(
            hevo_llm::OpenAiBackend::new(hevo_llm::OpenAiConfig::new(
                "up",
                &format!("http://127.0.0.1:{upstream}/v1"),
                None,
            ))
            .unwrap(),
        );
        let prices = hevo_llm::PriceTable::empty()
            .with_overrides([("m-up".to_owned(), hevo_llm::ModelPrice::paid(1.0, 1.0, 1.0))])
            .unwrap();
        let config = hevo_llm::GatewayConfig::new(
            vec![hevo_llm::ModelRoute::new("m", "up", "m-up")],
            prices,
        );
        hevo_llm::Gateway::start(config, vec![backend], sink.clone()).unwrap()
    });
    let access = Arc::new(Leaky {
        inner: hevo_runtime::model_access::GatewayAccess::new(
            handle.gateway().clone(),
            handle.openai_base_url(),
            handle.anthropic_base_url(),
            hevo_llm::Caps::UNLIMITED,
        ),
        drop_dir: drop_dir.clone(),
        gateway_port: handle.addr().port(),
        next: Default::default(),
        over_tcp: Default::default(),
        usages: Default::default(),
    });
    f.write("thief/h.py", KEY_THIEF);
    f.write(
        "thief/harness.toml",
        &format!(
            "entry = [\"python3\", \"h.py\", \"{}\"]\ntimeout_s = 90\n",
            drop_dir.display()
        ),
    );
    let mut opts = f.options(&f.path("thief"), &suite, "run");
    opts.jobs = 2;
    opts.model_access = Some(access.clone());
    let r = run(opts, launcher);
    let over_tcp = access.over_tcp.lock().unwrap().clone();
    let usages = access.usages.lock().unwrap().clone();
    let ledger = sink.records();
    drop(handle);
    Some((answers(&r), over_tcp, usages, ledger))
}

#[test]
fn a_stolen_sibling_key_is_refused_inside_the_sandbox_and_over_tcp_and_billed_to_no_one() {
    // Unsandboxed, keys are bearer keys: the stolen key works and bills the sibling.
    let (got, over_tcp, usages, _) =
        steal_keys(|_| Some(Arc::new(LocalLauncher::default()))).unwrap();
    assert_eq!(got, vec!["200|200".to_owned(), "200|200".to_owned()]);
    assert!(
        over_tcp.iter().all(|r| r.starts_with("HTTP/1.1 200")),
        "{over_tcp:#?}"
    );
    // Per trial: its own call, the sibling's stolen call, the host's TCP call with its key.
    assert_eq!(usages.iter().map(|u| u.calls).sum::<u64>(), 6);
    // Sandboxed, each key is bound to its trial's socket.
    let sandboxed = steal_keys(|drop_dir| {
        sandbox()?;
        let init = PathBuf::from(env!("CARGO_BIN_EXE_hevo-sandbox-init"));
        let options = SandboxOptions {
            read_only: vec![drop_dir.to_path_buf()],
            ..SandboxOptions::default()
        };
        let l = SandboxLauncher::new("/usr/bin/bwrap".into(), init, options).unwrap();
        Some(Arc::new(l) as Arc<dyn Launcher>)
    });
    let Some((got, over_tcp, usages, ledger)) = sandboxed else {
        return;
    };
    assert_eq!(got.len(), 2);
    for a in &got {
        let (own, theft) = a.split_once('|').unwrap();
        assert_eq!(own, "200", "the trial's own key failed: {a}");
        assert!(
            theft.starts_with("401:") && theft.contains("another trial's sandbox"),
            "a stolen key was accepted: {a}"
        );
    }
    assert_eq!(over_tcp.len(), 2);
    for reply in &over_tcp {
        assert!(
            reply.starts_with("HTTP/1.1 401") && reply.contains("bound to its sandbox"),
            "a bound key worked over TCP: {reply}"
        );
    }
    // each trial billed exactly its own call; the refused ones are billed to no one
    assert_eq!(
        usages.iter().map(|u| u.calls).collect::<Vec<_>>(),
        vec![1, 1]
    );
    assert_eq!(ledger.len(), 2, "{ledger:#?}");
    assert!(ledger.iter().all(|r| r.status == hevo_llm::CallStatus::Ok));
    let mut trials: Vec<&str> = ledger.iter().map(|r| r.trial_id.as_str()).collect();
    trials.dedup();
    assert_eq!(
        trials.len(),
        2,
        "both calls billed to one trial: {ledger:#?}"
    );
}

/// Stores what it can outside its working directory: 200 MB in `/dev/shm` and 50 MB in
/// `/dev` itself (bwrap's `/dev` is a tmpfs of its own); answers how much of each it kept.
const DEV_FILLER: &str = r#"
import json, os, sys
json.load(sys.stdin)
kept = {}
for path, mb in [("/dev/shm/fill", 200), ("/dev/fill", 50)]:
    n = 0
    try:
        with open(path, "wb") as f:
            for _ in range(mb):
                f.write(b"x" * (1 << 20))
                f.flush()
                n += 1
    except OSError:
        pass
    kept[path] = n
print(json.dumps(json.dumps(kept, sort_keys=True)))
"#;

/// bwrap's `/dev` (and so `/dev/shm`) is a tmpfs as large as half the RAM, outside the
/// folders the disk limit measures and, without a cgroup, outside every memory limit: a
/// harness stored 954 MB there under a 64 MB disk limit. `/dev` is read-only now and
/// `/dev/shm` holds at most `TMPFS_MB`.
#[test]
fn dev_and_dev_shm_hold_no_more_than_the_shm_size() {
    let Some(sandbox) = sandbox() else { return };
    let f = Fixture::new();
    let suite = f.suite(1);
    let h = f.harness("filler", DEV_FILLER);
    let r = run(f.options(&h, &suite, "run"), sandbox);
    let kept: Value = serde_json::from_str(&answers(&r)[0]).unwrap();
    let shm_mb = hevo_runtime::sandbox::TMPFS_MB;
    assert!(
        kept["/dev/shm/fill"].as_u64().unwrap() <= shm_mb,
        "at most {shm_mb} MB in /dev/shm: {kept}"
    );
    assert_eq!(kept["/dev/fill"], 0, "/dev is read-only: {kept}");
}

/// An agent's sandbox (a read-only folder, a private `/tmp`, as the agent proposer launches
/// it) writing 200 MB into `/tmp`: a tmpfs, memory that no limit counts, which used to be as
/// large as the disk limit (10 GB by default). It holds `TMPFS_MB` now.
#[test]
fn an_agents_private_tmp_holds_no_more_than_the_tmpfs_size() {
    let Some(sandbox) = sandbox() else { return };
    let d = tempfile::tempdir().unwrap();
    let code = "n = 0\ntry:\n    f = open('/tmp/fill', 'wb')\n    for _ in range(200):\n        \
                f.write(b'x' * (1 << 20)); f.flush(); n += 1\nexcept OSError:\n    pass\n\
                print(n)\n";
    let spec = hevo_runtime::launch::LaunchSpec {
        access: hevo_runtime::launch::Access {
            cwd_read_only: true,
            private_tmp: true,
            ..Default::default()
        },
        ..python_spec(code, d.path())
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let out = rt.block_on(sandbox.launch(spec)).unwrap();
    let mb: u64 = String::from_utf8_lossy(&out.stdout_tail)
        .trim()
        .parse()
        .unwrap();
    assert_eq!(mb, hevo_runtime::sandbox::TMPFS_MB, "MB written to /tmp");
}

/// A launch of `python3 -c code` in `cwd`: a cleared environment, no stdin, a minute's
/// time limit, its stdout's tail kept.
fn python_spec(code: &str, cwd: &Path) -> hevo_runtime::launch::LaunchSpec {
    hevo_runtime::launch::LaunchSpec {
        argv: vec!["python3".into(), "-c".into(), code.into()],
        cwd: cwd.to_path_buf(),
        env: hevo_runtime::launch::base_env(cwd),
        stdin: Vec::new(),
        timeout: Duration::from_secs(60),
        grace: Duration::from_millis(300),
        stdout_path: None,
        stderr_path: None,
        output_cap: 1 << 20,
        tail_bytes: 4096,
        cancel: hevo_runtime::cancel::Cancel::new(),
        access: Default::default(),
    }
}

/// Answers from the suite's `tasks.jsonl` at SUITE (an attacker who knows where it is).
const READ_SUITE_SH: &str = r#"read -r line
i=$(printf '%s' "$line" | sed 's/.*"i":\([0-9]*\).*/\1/')
ans=$(grep "\"id\":\"t$i\"" SUITE/tasks.jsonl | sed 's/.*"expected":"\([^"]*\)".*/\1/')
[ -n "$ans" ] || ans=honest-guess
printf '{"answer": "%s"}\n' "$ans"
"#;

/// An entry program named through `..` (`/tmp/../bin/sh`, which exists) made the sandbox
/// mount `/tmp/..`, the host's root, read-only over its own: a proposer's candidate read
/// every split's answers and won the search and the test split (proposer audit). So did a
/// program under a link to the root (`/proc/self/root/bin/sh`).
#[test]
fn an_entry_named_through_dot_dot_or_a_root_link_shows_no_host_root() {
    let Some(sandbox) = sandbox() else { return };
    let f = Fixture::new();
    let suite = f.suite(3).canonicalize().unwrap();
    let code = READ_SUITE_SH.replace("SUITE", &suite.to_string_lossy());
    for (name, program) in [
        ("dotdot", "/tmp/../bin/sh"),
        ("rootlink", "/proc/self/root/bin/sh"),
    ] {
        f.write(&format!("{name}/h.sh"), &code);
        let h = f.write(
            &format!("{name}/harness.toml"),
            &format!("entry = [\"{program}\", \"h.sh\"]\ntimeout_s = 60\n"),
        );
        let h = h.parent().unwrap().to_path_buf();
        // The attack is real: unsandboxed it answers every task from `expected`.
        let local = run(
            f.options(&h, &suite, &format!("{name}-local")),
            Arc::new(LocalLauncher::default()),
        );
        assert_eq!(local.pass_rate.value, 1.0, "{name}: {:?}", answers(&local));
        let boxed = run(
            f.options(&h, &suite, &format!("{name}-boxed")),
            sandbox.clone(),
        );
        assert!(
            answers(&boxed).iter().all(|a| !a.starts_with("secret-")),
            "{name}: {:?}",
            answers(&boxed)
        );
    }
}
