//! Failures shown where they happen: real harnesses that crash, time out and print
//! garbage, run through `hevo eval` and `hevo run`; the first trial of each failure class
//! is in the human output, in `--json` and inline on stderr (insta snapshots, volatile
//! fields filtered).

use std::path::Path;
use std::process::{Command, Output};

fn hevo(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hevo"));
    cmd.current_dir(dir)
        .env("HEVO_HOME", dir.join(".hevo-home"));
    cmd
}

fn write(dir: &Path, path: &str, text: &str) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A suite whose val tasks each provoke one behaviour of the harnesses below.
fn suite(dir: &Path) {
    write(
        dir,
        "suite/suite.toml",
        "name = \"faults\"\n[scorer]\nkind = \"label\"\n",
    );
    let tasks = [
        ("t1", "train", "fine"),
        ("v1", "val", "crash"),
        ("v2", "val", "sleep"),
        ("v3", "val", "garbage"),
        ("v4", "val", "fine"),
        ("v5", "val", "crash"),
        ("s1", "test", "fine"),
    ];
    let lines: String = tasks
        .iter()
        .map(|(id, split, what)| {
            format!(
                "{{\"id\": \"{id}\", \"split\": \"{split}\", \"input\": {{\"do\": \"{what}\"}}, \"expected\": \"ok\"}}\n"
            )
        })
        .collect();
    write(dir, "suite/tasks.jsonl", &lines);
}

/// A shell harness that crashes, hangs or prints a non-JSON line when the task asks it
/// to (and `mode` lets it), and answers correctly otherwise.
fn faulty_harness(dir: &Path, name: &str, params: &str) {
    write(
        dir,
        &format!("{name}/harness.toml"),
        &format!("name = \"{name}\"\nentry = [\"sh\", \"harness.sh\"]\ntimeout_s = 1\n{params}"),
    );
    write(
        dir,
        &format!("{name}/harness.sh"),
        r#"read -r line
mode=$(grep -o '"mode": *"[a-z]*"' params.json 2>/dev/null | grep -o '[a-z]*"$' | tr -d '"')
[ -n "$mode" ] || mode=faulty
if [ "$mode" = faulty ]; then
  case "$line" in
    *crash*) echo "working on it" >&2; echo "Traceback: ValueError: boom" >&2; exit 3;;
    *sleep*) sleep 30;;
    *garbage*) echo 'ok, I think'; exit 0;;
  esac
fi
echo '"ok"'
"#,
    );
}

fn filtered(dir: &Path, text: &str) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut s = text.replace(&dir.to_string_lossy().into_owned(), "[TMP]");
    let hash = regex_like_hash(&s);
    for h in hash {
        s = s.replace(&h, "[HASH]");
    }
    s.lines()
        .map(|l| match l.strip_prefix("wall time ") {
            Some(_) => "wall time   [SECONDS] s mean per trial\n".to_string(),
            None => format!("{l}\n"),
        })
        .collect()
}

/// The 10-hex-digit run hashes in `eval-<name>-<hash>` directory names.
fn regex_like_hash(s: &str) -> Vec<String> {
    s.match_indices("eval-")
        .filter_map(|(at, _)| {
            let rest = &s[at..];
            let end = rest.find(['/', ' ', '\n', '"'])?;
            let name = &rest[..end];
            let hash = name.rsplit('-').next()?;
            (hash.len() == 10 && hash.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| hash.to_string())
        })
        .collect()
}

/// The suite `name` of `n` val tasks (`v1`, `v2`, ...) each expecting `"ok"`, scored by the
/// program `command` (`sh score.sh`, `python3 score.py`) whose file holds `score`, and the
/// harness `ok` that answers `"ok"`.
fn ok_suite(dir: &Path, name: &str, n: usize, command: &str, score: &str) {
    let (program, file) = command.split_once(' ').expect("a program and its file");
    write(
        dir,
        "suite/suite.toml",
        &format!(
            "name = \"{name}\"\n[scorer]\nkind = \"program\"\ncommand = [\"{program}\", \"{file}\"]\n"
        ),
    );
    write(dir, &format!("suite/{file}"), score);
    let lines: String = (1..=n)
        .map(|i| {
            format!(
                "{{\"id\": \"v{i}\", \"split\": \"val\", \"input\": {{}}, \"expected\": \"ok\"}}\n"
            )
        })
        .collect();
    write(dir, "suite/tasks.jsonl", &lines);
    write(dir, "ok/harness.toml", "entry = [\"sh\", \"harness.sh\"]\n");
    write(dir, "ok/harness.sh", "cat > /dev/null\necho '\"ok\"'\n");
}

fn eval(dir: &Path, harness: &str, extra: &[&str]) -> Output {
    hevo(dir)
        .args([
            "eval",
            harness,
            "--suite",
            "suite",
            "--no-model",
            "--jobs",
            "2",
        ])
        .args(["--kill-grace", "0.2"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn eval_shows_the_first_trial_of_each_failure_class() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    suite(dir);
    faulty_harness(dir, "faulty", "");
    let out = eval(dir, "faulty", &["--no-progress"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // one task passed, so this is an evaluation, not an error
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    insta::assert_snapshot!(
        "eval_failures_table",
        filtered(dir, &String::from_utf8_lossy(&out.stdout))
    );

    // The same classes in --json (the stored trials are reused: nothing runs again).
    let out = eval(dir, "faulty", &["--no-progress", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["ran_now"], 0);
    insta::assert_snapshot!(
        "eval_failures_json",
        filtered(
            dir,
            &serde_json::to_string_pretty(&doc["failures"]).unwrap()
        )
    );
}

#[test]
fn eval_prints_each_class_inline_once_as_it_happens() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    suite(dir);
    faulty_harness(dir, "faulty", "");
    let out = eval(dir, "faulty", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for class in ["crash", "timeout", "bad_output"] {
        let heads: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with(&format!("hevo: first {class} ")))
            .collect();
        assert_eq!(heads.len(), 1, "one inline `{class}` head:\n{stderr}");
    }
    assert!(
        stderr.contains("Traceback: ValueError: boom"),
        "the crash's stderr tail is shown:\n{stderr}"
    );
    // --no-progress: nothing inline, the result still lists them
    let quiet = eval(dir, "faulty", &["--no-progress"]);
    let stderr = String::from_utf8_lossy(&quiet.stderr);
    assert!(!stderr.contains("hevo: first "), "{stderr}");
    assert!(!stderr.contains("trials done"), "{stderr}");
}

#[test]
fn eval_exits_1_when_every_trial_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    suite(dir);
    write(
        dir,
        "garbage/harness.toml",
        "entry = [\"sh\", \"harness.sh\"]\n",
    );
    write(
        dir,
        "garbage/harness.sh",
        "echo 'I refuse to answer in JSON'\n",
    );
    let out = eval(dir, "garbage", &["--no-progress"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("every trial of this evaluation errored"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("bad_output x5 (harness_error): first garbage on task v1 trial 0"),
        "{stdout}"
    );
    assert!(stdout.contains("`I refuse to answer in JSON`"), "{stdout}");
}

/// A search in `dir` (run `faults`) whose seed answers right and whose one proposed
/// candidate (the params proposer's `faulty` mode) crashes, hangs and prints garbage.
fn faulty_search(dir: &Path) {
    suite(dir);
    faulty_harness(
        dir,
        "seed",
        "[params]\nmode = { values = [\"fine\", \"faulty\"], default = \"fine\" }\n",
    );
    write(
        dir,
        "hevo.toml",
        "name = \"faults\"\nsuite = \"suite\"\nseeds = [\"seed\"]\nseed = 3\n[model]\n[search]\niterations = 1\n\
         candidates_per_iteration = 1\n[evaluation]\nstrategy = \"full\"\n",
    );
}

#[test]
fn a_search_shows_failures_per_batch_and_in_its_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    faulty_search(dir);
    let out = hevo(dir)
        .args(["run", ".", "--finalize", "--jobs", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // inline, after the batch of the faulty candidate
    assert!(
        stderr.contains("of 5 trial(s) failed (crash x2, timeout x1, bad_output x1)"),
        "{stderr}"
    );
    assert!(stderr.contains("Traceback: ValueError: boom"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let from = stdout
        .find("failures in validation trials")
        .expect("a failures section");
    let to = stdout.find("\ntest split").unwrap_or(stdout.len());
    insta::assert_snapshot!("run_failures_summary", filtered(dir, &stdout[from..to]));
    assert!(
        !stdout.contains("failures in test trials"),
        "the pick and the seed pass the test task:\n{stdout}"
    );

    let json = hevo(dir)
        .args(["run", ".", "--json", "--no-progress"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let classes: Vec<&str> = doc["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect();
    assert_eq!(classes, ["crash", "timeout", "bad_output"]);
}

/// `hevo status` of a moved run read its failures' stderr from the traces where the run
/// used to be: after a move the tail was gone (and had another run taken the old place,
/// its stderr would have been shown). The traces are found in the run as it is now.
#[test]
fn status_of_a_moved_run_reads_its_failures_from_where_the_run_is_now() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    faulty_search(dir);
    let out = hevo(dir)
        .args(["run", ".", "--jobs", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let moved = dir.join("moved");
    std::fs::rename(dir.join("runs/faults"), &moved).unwrap();
    let status = hevo(dir).arg("status").arg(&moved).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{text}");
    let traces = format!("trace: {}/traces/c", moved.display());
    assert!(text.contains(&traces), "{text}");
    assert!(!text.contains("runs/faults"), "{text}");
    assert!(text.contains("stderr, last lines:"), "{text}");
    assert!(text.contains("working on it"), "{text}");
}

/// A task the suite's scorer cannot score is out of the pass rate, and the table says what
/// the pass rate would be had its trial failed: a harness that provokes errors on the tasks
/// it would fail cannot hide them.
#[test]
fn eval_shows_the_pass_rate_with_unscored_trials_as_failures() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The scorer fails on v2 whatever the answer: a fault of the suite, not of the harness.
    ok_suite(
        dir,
        "unscorable",
        4,
        "sh score.sh",
        "cat > /dev/null\n[ \"$HEVO_TASK_ID\" = v2 ] && exit 9\necho 1\n",
    );
    let out = eval(dir, "ok", &["--no-progress"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("counted as failures the pass rate is 75.0%"),
        "{stderr}"
    );
    insta::assert_snapshot!(
        "eval_unscored_table",
        filtered(dir, &String::from_utf8_lossy(&out.stdout))
    );
    let out = eval(dir, "ok", &["--no-progress", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (doc["pass_rate"].as_f64(), doc["pass_rate_floor"].as_f64()),
        (Some(1.0), Some(0.75))
    );
}

/// A harness whose stderr and last stdout line carry terminal controls (clear the screen,
/// set the window title, a carriage return to write a fake `pass rate` over hevo's line):
/// hevo's failure block and inline lines show them escaped, never raw.
#[test]
fn a_harness_cannot_drive_the_terminal_through_its_failures() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    suite(dir);
    write(
        dir,
        "ansi/harness.toml",
        "entry = [\"sh\", \"harness.sh\"]\n",
    );
    write(
        dir,
        "ansi/harness.sh",
        r#"read -r line
case "$line" in
  *crash*) printf 'boom\033[2J\033]0;pwned\007\rpass rate  100.0%%\n' >&2; exit 3;;
  *garbage*) printf 'ok\033[H\302\233\342\200\256fake\n'; exit 0;;
esac
echo '"ok"'
"#,
    );
    let out = eval(dir, "ansi", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        let raw: Vec<char> = text
            .chars()
            .filter(|c| (c.is_control() && *c != '\n' && *c != '\t') || *c == '\u{202e}')
            .collect();
        assert!(
            raw.is_empty(),
            "raw controls {raw:?} on hevo's {name}:\n{text}"
        );
    }
    assert!(
        stdout.contains(r"boom\u{1b}[2J\u{1b}]0;pwned\u{7}\u{d}pass rate  100.0%"),
        "{stdout}"
    );
    assert!(
        stdout.contains(r"`ok\u{1b}[H\u{9b}\u{202e}fake`"),
        "{stdout}"
    );
    assert!(stderr.contains(r"boom\u{1b}[2J"), "inline too:\n{stderr}");
}

/// A `program` scorer that fails said only `exited with code 2`, and the failure block
/// pointed at the harness's trace: the cause (its traceback) was in the scorer's own stderr
/// file, named nowhere. The cause now quotes its last line and names the file.
#[test]
fn a_failing_scorer_program_names_its_own_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    suite(dir);
    write(
        dir,
        "suite/suite.toml",
        "name = \"faults\"\n[scorer]\nkind = \"program\"\ncommand = [\"python3\", \"score.py\"]\n",
    );
    write(
        dir,
        "suite/score.py",
        "import sys\nsys.stderr.write('Traceback: KeyError: rubric\\n')\nsys.exit(2)\n",
    );
    faulty_harness(dir, "h", "");
    let out = eval(dir, "h", &["--json", "--split", "train"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = doc["tasks"][0]["details"][0]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        error.contains("exited with code 2")
            && error.contains("its stderr ending `Traceback: KeyError: rubric`")
            && error.contains(".scorer-0.stderr`"),
        "{doc}"
    );
}

/// A harness that answers `"?"` whenever it does not know, to a `program` scorer that calls
/// `float` on the answer: the scorer crashed on those tasks, they became `infra_error`
/// (retried, never scored), and the harness's pass rate was 100% on the two tasks it knew
/// instead of 50% on four. The scorer is now run once more on the task's expected answer
/// and, since it scores that, once more on the answer; failing again, the crash was the
/// answer's doing: the trial is a `bad_output` failure with outcome 0 and the cause. A scorer that fails on every answer stays the suite's fault
/// (`eval_shows_the_pass_rate_with_unscored_trials_as_failures`).
#[test]
fn an_answer_that_crashes_the_scorer_counts_as_a_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(
        dir,
        "suite/suite.toml",
        "name = \"numbers\"\n[scorer]\nkind = \"program\"\ncommand = [\"python3\", \"score.py\"]\n",
    );
    write(
        dir,
        "suite/score.py",
        "import json, sys\nd = json.load(sys.stdin)\n\
         print(1 if float(d['answer']) == float(d['expected']) else 0)\n",
    );
    let lines: String = (1..=4)
        .map(|i| {
            format!(
                "{{\"id\": \"v{i}\", \"split\": \"val\", \"input\": {{\"n\": {i}}}, \"expected\": {}}}\n",
                2 * i
            )
        })
        .collect();
    write(dir, "suite/tasks.jsonl", &lines);
    // Knows how to double 1 and 2; for anything else it answers what the scorer cannot read.
    write(
        dir,
        "dodger/harness.toml",
        "entry = [\"sh\", \"harness.sh\"]\n",
    );
    write(
        dir,
        "dodger/harness.sh",
        "read -r line\ncase \"$line\" in\n  *'\"n\": 1'*|*'\"n\":1'*) echo 2 ;;\n  \
         *'\"n\": 2'*|*'\"n\":2'*) echo 4 ;;\n  *) echo '\"?\"' ;;\nesac\n",
    );
    let out = eval(dir, "dodger", &["--no-progress", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (doc["pass_rate"].as_f64(), doc["pass_rate_floor"].as_f64()),
        (Some(0.5), Some(0.5)),
        "{doc}"
    );
    let classes = doc["failures"].as_array().unwrap();
    assert_eq!(classes.len(), 1, "{doc}");
    assert_eq!(
        (classes[0]["class"].as_str(), classes[0]["count"].as_u64()),
        (Some("bad_output"), Some(2))
    );
    assert!(
        classes[0]["first"]["error"]
            .as_str()
            .unwrap()
            .starts_with("its answer could not be scored (scoring program: exited with code 1"),
        "{doc}"
    );
    let v3 = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "v3")
        .unwrap_or_else(|| panic!("{doc}"));
    let error = v3["details"][0]["error"].as_str().unwrap();
    assert!(
        error.contains("ValueError: could not convert string to float")
            && error.ends_with(
                "it scores the task's expected answer, so this answer counts as a failure"
            ),
        "{error}"
    );
    assert_eq!(
        doc["status_counts"]["infra_error"].as_u64(),
        Some(0),
        "{doc}"
    );
}

/// A judge that fails once in a while (an API timing out) is not the harness's doing: a
/// `program` scorer that fails on an answer, then scores the expected answer, is run on the
/// answer once more before the harness is blamed. This scorer fails the first time it sees
/// each task and scores every later run (a marker file outside the suite, so unsandboxed).
#[test]
fn a_scorer_that_fails_once_does_not_blame_the_harness() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let marks = dir.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    ok_suite(
        dir,
        "flaky",
        3,
        "python3 score.py",
        &format!(
            "import json, os, sys\nd = json.load(sys.stdin)\n\
             m = os.path.join({marks:?}, os.environ['HEVO_TASK_ID'])\n\
             if not os.path.exists(m):\n    open(m, 'w').close()\n    sys.exit('judge timed out')\n\
             print(1 if d['answer'] == d['expected'] else 0)\n",
            marks = marks.display().to_string()
        ),
    );
    let out = hevo(dir)
        .args([
            "eval",
            "ok",
            "--suite",
            "suite",
            "--no-model",
            "--no-progress",
            "--json",
        ])
        .env("HEVO_SANDBOX", "off")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["pass_rate"].as_f64(), Some(1.0), "{doc}");
    assert_eq!(doc["status_counts"]["pass"].as_u64(), Some(3), "{doc}");
    // Every task's scorer did fail once: the test is not vacuous.
    assert_eq!(std::fs::read_dir(&marks).unwrap().count(), 3);
}

/// A harness that removes its working directory and then answers (it can, unsandboxed):
/// the scorer, which runs there, could not start (`scorer: cannot start ...: No such file
/// or directory`), so the trial was an `infra_error` of the suite's, retried and left out
/// of the pass rate: a way for a harness to drop the tasks it would fail. It is now the
/// harness's failure, with the cause.
#[test]
fn a_harness_that_removes_its_working_directory_fails_the_task() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    ok_suite(dir, "gone", 2, "sh score.sh", "cat > /dev/null\necho 1\n");
    write(dir, "rm/harness.toml", "entry = [\"sh\", \"harness.sh\"]\n");
    write(
        dir,
        "rm/harness.sh",
        "cat > /dev/null\nrm -rf \"$PWD\"\necho '\"ok\"'\n",
    );
    let out = hevo(dir)
        .args([
            "eval",
            "rm",
            "--suite",
            "suite",
            "--no-model",
            "--no-progress",
        ])
        .env("HEVO_SANDBOX", "off")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stderr}\n{stdout}");
    assert!(
        stdout.contains("bad_output x2 (harness_error)")
            && stdout.contains("it removed or replaced its working directory"),
        "{stdout}"
    );
    assert!(!stdout.contains("scorer_error"), "{stdout}");
}

/// A harness with `prepare` learns from the train split with its expected answers; scored
/// on the train split, one that stored them answered every task right (100% where it
/// scores 53% on val), with no warning. `hevo eval --split train` refuses it.
#[test]
fn a_harness_with_prepare_is_not_scored_on_the_train_split() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    suite(dir);
    write(
        dir,
        "learner/harness.toml",
        "entry = [\"sh\", \"harness.sh\"]\nprepare = [\"sh\", \"prepare.sh\"]\n",
    );
    write(dir, "learner/prepare.sh", "cat > answers.jsonl\n");
    write(
        dir,
        "learner/harness.sh",
        "cat > /dev/null\necho '\"ok\"'\n",
    );
    let out = eval(dir, "learner", &["--split", "train", "--no-progress"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("harness `learner` declares `prepare`")
            && stderr.contains("evaluate it on `--split val` or `--split test`"),
        "{stderr}"
    );
    assert!(!dir.join("runs").exists(), "work started: {stderr}");
    let out = eval(dir, "learner", &["--split", "val", "--no-progress"]);
    assert!(
        out.status.code() != Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
