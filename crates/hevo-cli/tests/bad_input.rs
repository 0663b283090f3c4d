//! Bad input to `hevo eval` and adversarial harnesses through the real binary: each a
//! clear error (exit 2 naming the file or flag and the fix) or the exact contained outcome.

mod support;

use std::path::Path;
use std::process::Output;

use support::{eval_command, one_task, write};

fn eval(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = eval_command(dir);
    c.arg("--no-model").args(extra);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn setup(dir: &Path, harness_py: &str) {
    one_task(dir, ("python3", "h.py", harness_py), "x");
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_numbers_and_files_are_exit_2_with_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path(), "print('\"x\"')\n");
    for args in [["--timeout", "1e300"], ["--trials", "4294967295"]] {
        let o = eval(d.path(), &args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(args[0]), "{}", stderr(&o));
    }
    write(
        &d.path().join("h/harness.toml"),
        "entry = [\"python3\", \"h.py\"]\ntimeout_s = 1e300\n",
    );
    let o = eval(d.path(), &[], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("harness.toml:2"), "{}", stderr(&o));
    write(
        &d.path().join("h/harness.toml"),
        "entry = [\"python3\", \"h.py\"]\n",
    );
    write(
        &d.path().join("suite/suite.toml"),
        "name = \"s\"\n[scorer]\nkind = \"program\"\ncommand = [\"no-such-scorer-bin\"]\n",
    );
    let o = eval(d.path(), &[], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no-such-scorer-bin"), "{}", stderr(&o));
    write(
        &d.path().join("suite/suite.toml"),
        "name = \"s\"\n[scorer]\nkind = \"exact\"\n",
    );
    let mut bytes =
        b"\xEF\xBB\xBF{\"id\":\"a/b\",\"split\":\"val\",\"input\":1,\"expected\":\"x\"}\n".to_vec();
    bytes.extend_from_slice(b"{\"id\":\"a_b\",\"split\":\"val\",\"input\":1,\"expected\":\"x\"}\n");
    bytes.extend_from_slice(
        b"{\"id\":\"c\",\"split\":\"val\",\"input\":\"\xff\",\"expected\":\"x\"}\n",
    );
    std::fs::write(d.path().join("suite/tasks.jsonl"), bytes).unwrap();
    let o = eval(d.path(), &[], &[]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("tasks.jsonl:1") && e.contains("byte-order mark"),
        "{e}"
    );
    assert!(
        e.contains("tasks.jsonl:2") && e.contains("share the trace directory"),
        "{e}"
    );
    assert!(e.contains("tasks.jsonl:3") && e.contains("UTF-8"), "{e}");
}

#[test]
fn an_evaluation_where_every_trial_errored_exits_non_zero() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path(), "import sys\nsys.exit(3)\n");
    let o = eval(d.path(), &[], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("every trial of this evaluation errored"));
}

/// Scans every /proc/*/environ it can read for the provider key hevo was started with.
const KEY_THIEF: &str = r#"
import json, os, sys
sys.stdin.read()
found = "none"
for pid in os.listdir("/proc"):
    if not pid.isdigit(): continue
    try: env = open("/proc/%s/environ" % pid, "rb").read()
    except Exception: continue
    if b"sk-custody-test-4711" in env: found = "found in " + pid
print(json.dumps(found))
"#;

#[test]
fn provider_keys_are_not_in_any_readable_environ() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path(), KEY_THIEF);
    write(
        &d.path().join("suite/tasks.jsonl"),
        "{\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":\"none\"}\n",
    );
    // Unsandboxed, the harness sees hevo's /proc: the key must not be in its environ.
    for mode in ["off", "auto"] {
        let _ = std::fs::remove_dir_all(d.path().join("run"));
        let o = eval(
            d.path(),
            &[],
            &[
                ("OPENAI_API_KEY", "sk-custody-test-4711"),
                ("HEVO_SANDBOX", mode),
            ],
        );
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{mode}: {}", stderr(&o)));
        assert_eq!(v["status_counts"]["pass"], 1, "{mode}: {v}");
        if mode == "off" {
            assert_eq!(v["sandbox"], "none");
            assert!(stderr(&o).contains("UNSANDBOXED"));
        }
    }
}

/// `hevo eval --pids N` through the real binary: a fork bomb stops at N and its trial's
/// cause says so; `--pids 0` is exit 2 naming the flag. Skips where hevo can make no
/// cgroup (it then warns: checked too), unless `HEVO_TEST_CGROUP=1`.
#[test]
fn a_fork_bomb_under_eval_pids_stops_there_with_its_cause() {
    let d = tempfile::tempdir().unwrap();
    setup(
        d.path(),
        "import os, sys, time\nmade = 0\nfor _ in range(300):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n    made += 1\nprint(made)\nsys.exit(3)\n",
    );
    let o = eval(d.path(), &["--pids", "0"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--pids"), "{}", stderr(&o));
    let o = eval(d.path(), &["--pids", "16"], &[]);
    if stderr(&o).contains("trials get NO CGROUP") {
        assert!(
            std::env::var("HEVO_TEST_CGROUP").as_deref() != Ok("1"),
            "HEVO_TEST_CGROUP=1 but: {}",
            stderr(&o)
        );
        eprintln!("SKIPPED: no cgroups here: {}", stderr(&o));
        return;
    }
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let trial = &report["tasks"][0]["details"][0];
    assert_eq!(trial["status"], "harness_error", "{trial}");
    let cause = trial["error"].as_str().unwrap();
    assert!(
        cause.starts_with("exited with code 3; ")
            && cause.contains("fork(s) refused at the trial's limit of 16 processes"),
        "{cause}"
    );
}
