//! `hevo tests synth` and `hevo tests freeze` end to end: the real binary, a scripted
//! stand-in agent (a real executable, `tests/agents/synth_agent.py`) run through the same
//! launch seam as the agent proposer, real harness and test processes, the real store.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod support;
use support::{json_of, write};

fn hevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
}

fn agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/synth_agent.py")
}

/// A suite of file-writing tasks (the original scorer is `exact` against planted markers
/// the agent must never see) and a harness that gets task `c` wrong.
fn fixture(root: &Path) -> (PathBuf, PathBuf) {
    let suite = root.join("suite");
    write(
        &suite.join("suite.toml"),
        "name = \"files\"\ndescription = \"Write a file with the given content.\"\n\
         [scorer]\nkind = \"exact\"\n",
    );
    let mut tasks = String::new();
    for (id, split) in [("a", "train"), ("b", "val"), ("c", "val")] {
        tasks.push_str(&format!(
            "{{\"id\": \"{id}\", \"split\": \"{split}\", \"input\": {{\"target\": \"{id}.txt\", \
             \"content\": \"hello {id}\"}}, \"expected\": \"EXPECTED-MARKER-{id}\"}}\n"
        ));
    }
    write(&suite.join("tasks.jsonl"), &tasks);
    let harness = root.join("harness");
    write(
        &harness.join("harness.toml"),
        "name = \"writer\"\nentry = [\"python3\", \"solve.py\"]\n",
    );
    write(
        &harness.join("solve.py"),
        "import json, sys\n\
         t = json.loads(sys.stdin.readline())\n\
         text = t['content'].upper() if t['target'] == 'c.txt' else t['content']\n\
         open(t['target'], 'w').write(text + '\\n')\n\
         print(json.dumps({'answer': 'wrote ' + t['target']}))\n",
    );
    (suite, harness)
}

fn synth(suite: &Path, harness: &Path, out: &Path) -> Output {
    hevo()
        .args(["tests", "synth"])
        .arg(suite)
        .arg("--harness")
        .arg(harness)
        .arg("--out")
        .arg(out)
        .args(["--test-timeout", "2", "--no-model", "--json", "--jobs", "2"])
        // The script's text, not its path: the sandboxed agent sees only its workspace.
        .args(["--agent-cmd", "python3", "-c"])
        .arg(std::fs::read_to_string(agent()).unwrap())
        .output()
        .unwrap()
}

fn eval(harness: &Path, suite: &Path, run_dir: &Path) -> Output {
    hevo()
        .arg("eval")
        .arg(harness)
        .arg("--suite")
        .arg(suite)
        .args(["--split", "val", "--no-model", "--no-progress", "--json"])
        .arg("--run-dir")
        .arg(run_dir)
        .output()
        .unwrap()
}

#[test]
fn broken_tests_are_dropped_and_the_frozen_suite_scores_a_harness() {
    let tmp = tempfile::tempdir().unwrap();
    let (suite, harness) = fixture(tmp.path());
    let out = tmp.path().join("suite-tests");
    let report = json_of(&synth(&suite, &harness, &out));

    // Every task kept exactly its two good tests; each broken one was dropped for its cause.
    let tasks = report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3, "{report:#}");
    for t in tasks {
        assert_eq!(t["agent"], "finished", "{t:#}");
        let verdict = |file: &str| {
            t["tests"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["file"] == file)
                .unwrap_or_else(|| panic!("no verdict for {file}: {t:#}"))
                .clone()
        };
        assert_eq!(verdict("test_01.sh")["kept"], true, "{t:#}");
        assert_eq!(verdict("test_02.py")["kept"], true, "{t:#}");
        for (file, why) in [
            ("test_03.sh", "syntax error"),
            ("test_04.sh", "ran past the 2 s limit"),
            ("test_05.py", "crashed: KeyError"),
            ("test_06.sh", "exited with code 3"),
            ("notes.txt", "not named test_NN"),
            ("test_07.sh", "link"),
            ("test_09.sh", "larger than"),
        ] {
            let v = verdict(file);
            assert_eq!(v["kept"], false, "{v}");
            assert!(v["why"].as_str().unwrap().contains(why), "{file}: {v}");
        }
    }
    assert_eq!(report["kept"], 6);
    assert_eq!(report["dropped"], 21);
    // The harness passes both tests of a and b, one of c's two: (1 + 1 + 0.5) / 3.
    let rate = report["initial_pass_rate"].as_f64().unwrap();
    assert!((rate - 2.5 / 3.0).abs() < 1e-9, "{rate}");
    let c = tasks[2]["tests"].as_array().unwrap();
    let passes =
        |file: &str| c.iter().find(|v| v["file"] == file).unwrap()["initial_passes"].clone();
    assert_eq!(passes("test_01.sh"), true);
    assert_eq!(passes("test_02.py"), false);

    // The new suite: a locked command scorer, only the kept tests, every hash recorded.
    let toml = std::fs::read_to_string(out.join("suite.toml")).unwrap();
    assert!(toml.contains("kind = \"command\""), "{toml}");
    assert!(toml.contains("lock = \"tests.lock.json\""), "{toml}");
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tests.lock.json")).unwrap())
            .unwrap();
    let files: Vec<&String> = lock["files"].as_object().unwrap().keys().collect();
    assert_eq!(
        files,
        [
            "a/test_01.sh",
            "a/test_02.py",
            "b/test_01.sh",
            "b/test_02.py",
            "c/test_01.sh",
            "c/test_02.py"
        ]
    );
    // The agent saw neither `expected` nor the verdict: it would have refused (exit 1) and
    // its workspaces hold no marker.
    let grep = Command::new("grep")
        .args(["-r", "-l", "EXPECTED-MARKER"])
        .arg(out.join(".synth/tasks"))
        .output()
        .unwrap();
    assert!(
        grep.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&grep.stdout)
    );

    // `hevo eval` on the frozen suite scores by the fraction of tests passed.
    let run = tmp.path().join("run");
    let v = json_of(&eval(&harness, &out, &run));
    assert_eq!(v["pass_rate"], 0.75, "{v:#}");
    assert_eq!(v["ran_now"], 2);

    // Editing a frozen test makes the suite fail to load (exit 2, the file and the fix).
    let edited = out.join("tests/c/test_02.py");
    std::fs::write(&edited, "import sys\nsys.exit(0)\n").unwrap();
    std::fs::write(out.join("tests/b/test_03.sh"), "exit 0\n").unwrap();
    std::fs::remove_file(out.join("tests/a/test_01.sh")).unwrap();
    let bad = eval(&harness, &out, &run);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("tests/c/test_02.py: changed since it was frozen"),
        "{err}"
    );
    assert!(
        err.contains("tests/b/test_03.sh: not in tests.lock.json"),
        "{err}"
    );
    assert!(err.contains("tests/a/test_01.sh: missing"), "{err}");
    assert!(err.contains("hevo tests freeze"), "{err}");

    // Re-frozen, the same run directory does not reuse the trial scored under c's old test:
    // c runs again (and now passes); b's tests are unchanged, so its trial is reused.
    std::fs::remove_file(out.join("tests/b/test_03.sh")).unwrap();
    let froze = hevo().args(["tests", "freeze"]).arg(&out).output().unwrap();
    assert!(froze.status.success(), "{froze:?}");
    assert!(
        String::from_utf8_lossy(&froze.stdout).contains("froze 5 test file(s)"),
        "{froze:?}"
    );
    let v = json_of(&eval(&harness, &out, &run));
    assert_eq!(v["pass_rate"], 1.0, "{v:#}");
    assert_eq!(v["ran_now"], 1, "only c's tests changed: {v:#}");
    assert_eq!(v["reused"], 1, "{v:#}");
}

/// `hevo tests freeze` checks the suite with the new lock before it writes it: a freeze
/// that fails (exit 2: a task without a test) leaves no lock where there was none, and the
/// old lock unchanged where there was one.
#[test]
fn a_freeze_that_fails_writes_no_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    write(
        &suite.join("suite.toml"),
        "name = \"s\"\n[scorer]\nkind = \"command\"\ntests = \"tests\"\n\
         lock = \"tests.lock.json\"\n",
    );
    let task =
        |id: &str| format!("{{\"id\":\"{id}\",\"split\":\"val\",\"input\":1,\"expected\":null}}\n");
    write(&suite.join("tasks.jsonl"), &(task("a") + &task("b")));
    write(&suite.join("tests/a/test_01.sh"), "exit 0\n");
    let lock = suite.join("tests.lock.json");
    let freeze = || {
        hevo()
            .args(["tests", "freeze"])
            .arg(&suite)
            .output()
            .unwrap()
    };

    let o = freeze();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("task `b` has no frozen test"),
        "{o:?}"
    );
    assert!(!lock.exists(), "a failed freeze wrote {}", lock.display());

    write(&suite.join("tests/b/test_01.sh"), "exit 0\n");
    let o = freeze();
    assert!(o.status.success(), "{o:?}");
    let frozen = std::fs::read(&lock).unwrap();

    // An edited test and a new task without one: refused, the old lock kept as it was.
    write(&suite.join("tests/a/test_01.sh"), "exit 1\n");
    write(
        &suite.join("tasks.jsonl"),
        &(task("a") + &task("b") + &task("c")),
    );
    let o = freeze();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("task `c` has no frozen test"),
        "{o:?}"
    );
    assert_eq!(
        std::fs::read(&lock).unwrap(),
        frozen,
        "the old lock was rewritten"
    );
}

#[test]
fn a_bad_output_directory_or_agent_is_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let (suite, harness) = fixture(tmp.path());
    // the suite itself is not empty: refused before anything runs
    let o = synth(&suite, &harness, &suite);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not empty"),
        "{o:?}"
    );
    let o = hevo()
        .args(["tests", "synth"])
        .arg(&suite)
        .arg("--harness")
        .arg(&harness)
        .args(["--no-model", "--agent-cmd", "hevo-no-such-agent"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("`hevo-no-such-agent` is not found"),
        "{o:?}"
    );
}

/// One 5 MB file and 100 hard links to it (the disk limit counts 5 MB), and a file its
/// owner cannot read: the kept working directory used to be written out in full (500 MB
/// twice over under a 64 MB limit), and an unreadable file made the trial `infra_error`.
/// Now the copy stops at the trial's disk limit and keeps nothing, and the trial's stderr
/// trace says why.
#[test]
fn a_kept_working_directory_is_bounded_by_the_disk_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let (suite, harness) = fixture(tmp.path());
    write(
        &harness.join("solve.py"),
        "import json, os, sys\n\
         t = json.loads(sys.stdin.readline())\n\
         open(t['target'], 'w').write(t['content'] + '\\n')\n\
         open('big', 'wb').write(b'x' * (5 << 20))\n\
         for i in range(100):\n    os.link('big', 'link%d' % i)\n\
         print(json.dumps({'answer': 'wrote ' + t['target']}))\n",
    );
    let out = tmp.path().join("suite-tests");
    let o = hevo()
        .args(["tests", "synth"])
        .arg(&suite)
        .arg("--harness")
        .arg(&harness)
        .arg("--out")
        .arg(&out)
        .args(["--test-timeout", "2", "--no-model", "--json", "--jobs", "2"])
        .args(["--disk-mb", "64"])
        .args(["--agent-cmd", "python3", "-c"])
        .arg(std::fs::read_to_string(agent()).unwrap())
        .output()
        .unwrap();
    // The stand-in agent insists on the harness's file in the kept folder, so every task's
    // agent fails here (exit 1); what matters is what was written to disk.
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let du = Command::new("du").arg("-sm").arg(&out).output().unwrap();
    let mb: u64 = String::from_utf8_lossy(&du.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(mb < 64, "{mb} MB in {}", out.display());
    let notes = Command::new("grep")
        .args([
            "-rl",
            "the working directory was not kept: its files pass the trial's disk limit of 64 MB",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!notes.stdout.is_empty(), "no stderr trace says why");
}

/// `--agent-cmd ./agent.sh`, the form `--help` shows, failed on every task (`cannot start
/// ./agent.sh`: the agent runs in a workspace of its own), and those failed calls were then
/// reused as done when the command ran again with the path mended. The path is made
/// absolute; a call is reused only for the same agent command.
#[test]
fn a_relative_agent_path_runs_and_another_command_asks_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (suite, harness) = fixture(tmp.path());
    write(
        &tmp.path().join("agent.sh"),
        "#!/bin/sh\nmkdir -p tests\nprintf '#!/bin/sh\\nexit 0\\n' > tests/test_01.sh\n",
    );
    let script = tmp.path().join("agent.sh");
    let mut mode = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&script, mode).unwrap();
    let run = |agent: &[&str]| {
        let o = hevo()
            .current_dir(tmp.path())
            .args(["tests", "synth"])
            .arg(&suite)
            .arg("--harness")
            .arg(&harness)
            .arg("--out")
            .arg(tmp.path().join("out"))
            .args(["--no-model", "--json", "--agent-cmd"])
            .args(agent)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{agent:?}: {e}");
        e
    };
    let first = run(&["./agent.sh"]);
    assert!(!first.contains("cannot start"), "{first}");
    assert!(!first.contains("in an earlier run"), "{first}");
    let again = run(&["./agent.sh"]);
    assert!(again.contains("(in an earlier run)"), "{again}");
    let other = run(&["./agent.sh", "--again"]);
    assert!(!other.contains("in an earlier run"), "{other}");
}
