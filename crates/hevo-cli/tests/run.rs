//! `hevo run` and `hevo finalize` as a user runs them: the JSON contract, and a search
//! killed with SIGKILL at random points that resumes to the same pick.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::run_json;

fn hevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
}

/// A copy of `examples/threshold` with a longer search, so kills land mid-run.
fn search_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("threshold");
    support::threshold_copy(&dir, &[("iterations = 3", "iterations = 5")]);
    dir
}

fn trial_count(dir: &Path) -> i64 {
    trial_count_in(&dir.join("runs/threshold"))
}

#[test]
fn run_and_finalize_print_the_documented_json() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let doc = run_json(&dir, &[]);
    for key in ["name", "estimate", "ci_low", "ci_high"] {
        assert!(
            doc["pick"][key].is_string() || doc["pick"][key].is_number(),
            "pick.{key}: {doc}"
        );
    }
    assert!(doc["evaluations"].as_u64().unwrap() > 0, "{doc}");
    for key in ["input", "cached", "output"] {
        assert!(doc["tokens"][key].is_u64(), "tokens.{key}: {doc}");
    }
    assert!(doc["cost_usd"].is_number());
    let fin = support::json_of(
        &hevo()
            .args(["finalize", "--json"])
            .arg(dir.join("runs/threshold"))
            .output()
            .unwrap(),
    );
    let pick = doc["pick"]["name"].as_str().unwrap();
    assert!(fin["test"][pick]["pass_rate"].is_number(), "{fin}");
    assert!(fin["test"]["seed"]["pass_rate"].is_number(), "{fin}");
    assert_eq!(fin["pick"]["name"], doc["pick"]["name"]);
    assert_eq!(fin["test"]["seed"]["role"], "seed");
    assert_eq!(fin["test"][pick]["role"], "pick");
    // The table ends with the pick against the best seed, in points.
    let text = hevo()
        .arg("finalize")
        .arg(dir.join("runs/threshold"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let diff = 100.0
        * (fin["test"][pick]["pass_rate"].as_f64().unwrap()
            - fin["test"]["seed"]["pass_rate"].as_f64().unwrap());
    assert!(
        text.contains(&format!(
            "pick vs best seed (seed) on test: {diff:+.1} points"
        )),
        "{text}"
    );
    // Then the pick minus the seed, paired by task, with its interval (in --json too).
    let paired = &fin["paired"][0];
    assert_eq!(paired["seed"], "seed", "{fin}");
    let n = paired["tasks"].as_u64().unwrap();
    let wins = ["pick_better", "seed_better", "ties"].map(|k| paired[k].as_u64().unwrap());
    assert_eq!(wins.iter().sum::<u64>(), n, "{fin}");
    let d = paired["difference"].as_f64().unwrap();
    assert!((100.0 * d - diff).abs() < 1e-9, "{fin}");
    assert!(paired["ci_low"].as_f64().unwrap() <= d && d <= paired["ci_high"].as_f64().unwrap());
    assert!(
        text.contains(&format!(
            "pick minus seed, paired by task: {:+.1} points, 95% interval [{:+.1}, {:+.1}] ({n} tasks",
            100.0 * d,
            100.0 * paired["ci_low"].as_f64().unwrap(),
            100.0 * paired["ci_high"].as_f64().unwrap()
        )),
        "{text}"
    );
    // Test results live outside the archive.
    assert!(dir.join("runs/threshold/test/hevo.db").exists());
    assert!(!dir.join("runs/threshold/archive/test").exists());
}

#[test]
fn a_search_killed_at_random_points_resumes_to_the_same_pick() {
    let tmp = tempfile::tempdir().unwrap();
    let reference_dir = search_dir(&tmp.path().join("a"));
    let reference = run_json(&reference_dir, &[]);
    let reference_trials = trial_count(&reference_dir);

    let dir = search_dir(&tmp.path().join("b"));
    // Seeded "random" kill points, from early (phase 0) to late (iterations).
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..4 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let delay = Duration::from_millis(150 + state % 1200);
        let mut child = hevo()
            .args(["run", "--json", "--no-progress", "--jobs", "2"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
    }
    let resumed = run_json(&dir, &[]);
    assert_eq!(
        resumed["pick"]["name"], reference["pick"]["name"],
        "{resumed}\n{reference}"
    );
    assert_eq!(resumed["pick"]["estimate"], reference["pick"]["estimate"]);
    assert_eq!(resumed["candidates"], reference["candidates"]);
    // Nothing lost, nothing counted twice.
    assert_eq!(trial_count(&dir), reference_trials);
}

/// A run directory moved (or renamed) and resumed there finds its candidates and trials
/// again: the run keeps the id its store was created with. Before, the id was the folder's
/// name, every candidate was stored again under the new one and all its trials, paid for
/// once, ran a second time (116 trials of 5 candidates became 312), and `hevo finalize`
/// ran the test split again.
#[test]
fn a_moved_run_resumes_without_running_its_trials_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let old = tmp.path().join("old");
    let first = run_json(
        &dir,
        &[
            "--iterations",
            "2",
            "--finalize",
            "--run-dir",
            old.to_str().unwrap(),
        ],
    );
    assert!(first["test"].is_object(), "{first}");
    let test_trials = |run: &Path| -> i64 {
        let c = rusqlite::Connection::open(run.join("test/hevo.db")).unwrap();
        c.query_row("SELECT COUNT(*) FROM trials", [], |r| r.get(0))
            .unwrap()
    };
    let tested = test_trials(&old);
    let moved = tmp.path().join("moved");
    std::fs::rename(&old, &moved).unwrap();

    let fin = support::json_of(
        &hevo()
            .args(["finalize", "--json", "--jobs", "2"])
            .arg(&moved)
            .output()
            .unwrap(),
    );
    assert_eq!(fin["test"], first["test"]);
    assert_eq!(test_trials(&moved), tested, "the test split ran again");

    run_json(
        &dir,
        &["--iterations", "3", "--run-dir", moved.to_str().unwrap()],
    );
    let db = rusqlite::Connection::open(moved.join("hevo.db")).unwrap();
    let twice: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM (SELECT name FROM candidates GROUP BY name HAVING COUNT(*) > 1)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        twice, 0,
        "candidates stored again under the new folder's name"
    );
    assert_eq!(support::runs_of(&moved.join("hevo.db")), ["old"]);
}

/// A resumed run whose archive lost the folder of a candidate it had evaluated (the last
/// one) used to take that iteration as done without it and go on: its pick changed from
/// `seed.i3c1` at 1.000 to `seed.i1c0` at 0.850 without a word, where `hevo finalize` on
/// the same run asks "was the archive edited?". It is now refused, naming the candidate.
#[test]
fn a_resumed_run_whose_archive_lost_a_candidate_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let run = tmp.path().join("r");
    let flags = ["--iterations", "2", "--run-dir", run.to_str().unwrap()];
    let first = run_json(&dir, &flags);
    let mut folders: Vec<PathBuf> = std::fs::read_dir(run.join("archive/candidates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    folders.sort();
    let last = folders.pop().unwrap();
    let meta = std::fs::read_to_string(last.join("candidate.toml")).unwrap();
    let name = meta
        .lines()
        .find_map(|l| l.strip_prefix("name = "))
        .unwrap()
        .trim_matches('"')
        .to_string();
    std::fs::remove_dir_all(&last).unwrap();
    let before = trial_count_in(&run);
    let out = hevo()
        .args(["run", "--no-progress", "--jobs", "2"])
        .args(flags)
        .arg(&dir)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}\nfirst run: {first}");
    assert!(
        e.contains(&format!("is missing candidate(s) `{name}`"))
            && e.contains("was the archive edited?"),
        "{e}"
    );
    assert_eq!(
        trial_count_in(&run),
        before,
        "the resumed run ran trials: {e}"
    );
}

fn trial_count_in(run: &Path) -> i64 {
    let c = rusqlite::Connection::open(run.join("hevo.db")).unwrap();
    c.query_row("SELECT COUNT(*) FROM trials", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_bad_config_names_the_file_line_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    std::fs::write(
        dir.join("hevo.toml"),
        "suite = \".\"\nseeds = [\"seed\"]\n[search]\niteratons = 3\n",
    )
    .unwrap();
    let out = hevo().arg("run").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("hevo.toml:4:") && err.contains("iteratons"),
        "{err}"
    );
}

#[test]
fn a_missing_config_or_an_unfinished_run_says_what_to_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let err = |args: &[&std::ffi::OsStr]| {
        let out = hevo().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let empty = tmp.path().as_os_str();
    let e = err(&["run".as_ref(), empty]);
    assert!(
        e.contains("hevo.toml") && e.contains("examples/threshold"),
        "{e}"
    );
    let e = err(&["finalize".as_ref(), empty]);
    assert!(e.contains("is not a run directory"), "{e}");
    // A run directory whose search never finished: no search.json yet.
    let run = tmp.path().join("runs/r");
    std::fs::create_dir_all(run.join("archive")).unwrap();
    std::fs::write(run.join("hevo.db"), b"").unwrap();
    let e = err(&["finalize".as_ref(), run.as_os_str()]);
    assert!(
        e.contains("has not finished") && e.contains("resumes"),
        "{e}"
    );
}

/// A bad flag is named as the flag, not as a key of hevo.toml; asking a finished run for
/// fewer iterations than it ran is refused (it would rewrite the record and the pick without
/// the later candidates), and the record is left as it was.
#[test]
fn bad_flags_and_fewer_iterations_than_run_are_refused_naming_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let done = run_json(&dir, &[]);
    let err = |flags: &[&str]| {
        let out = hevo().arg("run").args(flags).arg(&dir).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = err(&["--strategy", "nope"]);
    assert!(e.contains("--strategy: unknown strategy `nope`"), "{e}");
    let e = err(&["--jobs", "0"]);
    assert!(e.starts_with("error: --jobs: is 0"), "{e}");
    let e = err(&["--iterations", "2"]);
    assert!(
        e.contains("has already run 5 iterations, more than the 2 asked for")
            && e.contains("--run-dir"),
        "{e}"
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("runs/threshold/search.json")).unwrap())
            .unwrap();
    assert_eq!(record["pick"], done["pick"]["name"], "{record}");
}

/// Regression (issue 10): an agent proposer used to run without the cancellation token, so
/// a `hevo run` whose agent slept ignored SIGINT and exited 0 after it. Now SIGINT stops the
/// agent's process group, the run exits 130 with how to resume, and the iteration is asked
/// again on the next run (it was not marked as taken).
#[test]
fn sigint_stops_a_sleeping_agent_proposer_and_the_run_resumes() {
    use std::io::{BufRead, BufReader};
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let marker = tmp.path().join("agent-started");
    let script = dir.join("slow-agent.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch '{}'\nexec sleep 120\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = std::fs::read_to_string(dir.join("hevo.toml")).unwrap()
        + &format!(
            "\n[proposer]\nkind = \"agent\"\ncommand = [\"{}\"]\n",
            script.display()
        );
    std::fs::write(dir.join("hevo.toml"), config).unwrap();
    let mut child = hevo()
        .args(["run", "--no-progress", "--jobs", "2"])
        .arg(&dir)
        // The agent signals through a marker outside the archive, which the sandbox
        // (rightly) forbids; this test is about cancellation, not containment.
        .env("HEVO_SANDBOX", "off")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let lines = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    // Wait (bounded) until the agent runs, then interrupt.
    for _ in 0..600 {
        if marker.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(marker.exists(), "the agent never started");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let mut status = None;
    for _ in 0..300 {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let Some(status) = status else {
        let _ = child.kill();
        panic!("hevo run did not stop within 30 s of SIGINT (the agent sleeps 120 s)");
    };
    let stderr = lines.join().unwrap().join("\n");
    assert_eq!(status.code(), Some(130), "{stderr}");
    // The whole command line, flags too (it used to print `hevo run DIR` only, so
    // `--finalize` was lost by whoever followed it).
    assert!(
        stderr.contains(&format!(
            "Resume with the same command: {} run --no-progress --jobs 2 {}",
            env!("CARGO_BIN_EXE_hevo"),
            dir.display()
        )),
        "{stderr}"
    );
    // The iteration was not marked as taken: a rerun asks the agent again.
    std::fs::remove_file(&marker).unwrap();
    let proposed = dir.join("runs/threshold/archive/pending/.proposed");
    assert!(
        !proposed.exists(),
        "the interrupted iteration was marked as proposed"
    );
}

/// Makes the search in `dir` run `iterations` with the agent proposer `sh agent.sh`, the
/// script written there from `script`.
fn use_agent(dir: &Path, script: &str, iterations: u32) {
    let path = dir.join("agent.sh");
    std::fs::write(&path, script).unwrap();
    let config = std::fs::read_to_string(dir.join("hevo.toml"))
        .unwrap()
        .replace("iterations = 5", &format!("iterations = {iterations}"))
        + &format!(
            "\n[proposer]\nkind = \"agent\"\ncommand = [\"sh\", \"{}\"]\n",
            path.display()
        );
    std::fs::write(dir.join("hevo.toml"), config).unwrap();
}

/// `hevo run --json` of the search in `dir` with `iterations` and the agent proposer
/// `script` ([`use_agent`]; unsandboxed: these tests are about the search, not
/// containment); asserts it finished (exit 0) and returns its output and stderr.
fn run_with_agent(dir: &Path, script: &str, iterations: u32) -> (std::process::Output, String) {
    use_agent(dir, script, iterations);
    run_finished(dir, "off")
}

/// `hevo run --json --jobs 2` of the search in `dir` with `HEVO_SANDBOX=sandbox`; asserts it
/// finished (exit 0) and returns its output and stderr.
fn run_finished(dir: &Path, sandbox: &str) -> (std::process::Output, String) {
    let out = hevo()
        .args(["run", "--json", "--jobs", "2"])
        .arg(dir)
        .env("HEVO_SANDBOX", sandbox)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    (out, stderr)
}

/// `hevo run --json` of the search in `dir` for one iteration with the agent proposer
/// `agent` (an executable script, given the prompt), sandboxed (`HEVO_SANDBOX=require`:
/// these tests are about containment); asserts it finished and returns its output and
/// stderr.
fn run_with_sandboxed_agent(dir: &Path, agent: &Path) -> (std::process::Output, String) {
    std::fs::set_permissions(agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = std::fs::read_to_string(dir.join("hevo.toml"))
        .unwrap()
        .replace("iterations = 5", "iterations = 1")
        + &format!(
            "\n[proposer]\nkind = \"agent\"\ncommand = [\"{}\", \"{{prompt}}\"]\n",
            agent.display()
        );
    std::fs::write(dir.join("hevo.toml"), config).unwrap();
    run_finished(dir, "require")
}

/// An agent proposes a candidate whose `prepare` passes the smoke check and fails in the
/// real evaluation (it tells them apart by its folder), the trick the non-root audit used
/// to stop a search for good: every run ended `evaluating ...: prepare ... failed`. The
/// candidate now fails its tasks, the run says so and finishes with a seed as its pick.
#[test]
fn a_candidate_whose_prepare_fails_fails_its_tasks_and_the_search_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let script = r#"#!/bin/sh
# Writes one candidate per call: the seed's harness with a prepare that fails outside the
# smoke check.
n=$(ls -d candidates/* | wc -l)
c=pending/stall$n
mkdir -p "$c"
cp candidates/*-seed/code/harness.sh "$c/"
cat > "$c/harness.toml" <<'EOF2'
entry = ["bash", "harness.sh"]
prepare = ["bash", "-c", "case $PWD in */smoke/*) exit 0;; *) exit 1;; esac"]
[params]
threshold = { values = [6], default = 6 }
EOF2
printf 'name = "stall%s"\nparent = "seed"\n' "$n" > "$c/candidate.toml"
"#;
    let (out, stderr) = run_with_agent(&dir, script, 2);
    assert!(
        stderr.contains("its `prepare` failed") && stderr.contains("counted as failures"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["pick"]["name"], "seed", "{report}");
    assert_eq!(report["iterations_done"], 2, "{report}");
    // The smoke check's `prepare` states are gone once each candidate is judged.
    let smoke_state = dir.join("runs/threshold/smoke/state");
    let left: Vec<_> = std::fs::read_dir(&smoke_state)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in smoke/state: {left:?}");
}

/// A suite scored by a program that crashes on an answer that is not a string, and an agent
/// whose candidate answers `null` on the tasks it would get wrong: those trials cannot be
/// scored. They used to stop the search for good (`has no scored trial on task`, every
/// rerun alike) and the candidate's score ignored them; then the search counted such a task
/// as failed after the fact. Now the trial itself is the harness's failure (the scorer
/// scores the expected answer), with the cause, in the search as in `hevo eval`.
#[test]
fn a_candidate_whose_answers_crash_the_scorer_fails_those_tasks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let suite_toml = std::fs::read_to_string(dir.join("suite.toml")).unwrap();
    std::fs::write(
        dir.join("suite.toml"),
        suite_toml.replace(
            "kind = \"label\"",
            "kind = \"program\"\ncommand = [\"python3\", \"score.py\"]",
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("score.py"),
        "import json, sys\nd = json.load(sys.stdin)\n\
         print(1 if d['answer'].strip() == d['expected'] else 0)\n",
    )
    .unwrap();
    let script = r#"#!/bin/sh
# One candidate per call: right on x >= 6 and below 4, `null` on 4 and 5.
n=$(ls -d candidates/* | wc -l)
c=pending/nulls$n
mkdir -p "$c"
cat > "$c/harness.sh" <<'EOF2'
read -r line
x=${line//[^0-9]/}
if [ "$x" -ge 6 ]; then echo '"high"'; elif [ "$x" -ge 4 ]; then echo null; else echo '"low"'; fi
EOF2
printf 'entry = ["bash", "harness.sh"]\n' > "$c/harness.toml"
printf 'name = "nulls%s"\nparent = "seed"\n' "$n" > "$c/candidate.toml"
"#;
    let (out, stderr) = run_with_agent(&dir, script, 1);
    assert!(
        stderr.contains("bad_output")
            && stderr.contains("its answer could not be scored")
            && !stderr.contains("has no scored trial on task"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nulls = report["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "nulls1")
        .unwrap_or_else(|| panic!("{report}"));
    // Its true score with the null tasks as failures is below 1; it was exactly 1 on the
    // tasks it answered.
    assert!(nulls["estimate"].as_f64().unwrap() < 0.95, "{nulls}");
}

/// A proposer that starts from a copy of its parent (as the skill file tells agents to, and
/// as the `llm` proposer does) leaves the parent's `name` in `harness.toml`. The store
/// registered candidates under that manifest name, so every view (status, show, report,
/// finalize's test rows) credited the copy's trials and test score to the seed and showed
/// the copy with none. Each candidate is now stored under its archive name.
#[test]
fn a_copy_of_its_parent_keeps_its_own_name_in_the_store_and_every_view() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let script = r#"#!/bin/sh
# The seed's whole code, its harness.toml (name = "seed") unchanged but the threshold.
n=$(ls -d candidates/* | wc -l)
c=pending/copy$n
cp -r candidates/*-seed/code "$c"
sed -i 's/default = 2/default = 6/' "$c/harness.toml"
printf 'name = "copy%s"\nparent = "seed"\n' "$n" > "$c/candidate.toml"
"#;
    run_with_agent(&dir, script, 1);
    let run = dir.join("runs/threshold");
    let db = rusqlite::Connection::open(run.join("hevo.db")).unwrap();
    let mut names: Vec<String> = db
        .prepare("SELECT name FROM candidates ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    names.sort();
    assert_eq!(names, ["copy1", "seed"]);
    let finalize = hevo()
        .arg("finalize")
        .arg(&run)
        .arg("--json")
        .output()
        .unwrap();
    let fin = support::json_of(&finalize);
    let status = support::json_of(
        &hevo()
            .args(["status", "--json"])
            .arg(&run)
            .output()
            .unwrap(),
    );
    let trials_of = |name: &str| -> i64 {
        db.query_row(
            "SELECT COUNT(*) FROM trials t JOIN candidates c ON c.id = t.candidate_id
             WHERE c.name = ?1",
            [name],
            |r| r.get(0),
        )
        .unwrap()
    };
    for name in ["seed", "copy1"] {
        let row = status["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {status}"));
        assert!(trials_of(name) > 0, "{name}");
        assert_eq!(row["trials"], trials_of(name), "{name}: {status}");
        let show = support::json_of(
            &hevo()
                .args(["show", "--json"])
                .arg(&run)
                .arg(name)
                .output()
                .unwrap(),
        );
        assert_eq!(show["trials"], trials_of(name), "{name}: {show}");
    }
    // The copy (threshold 6) is perfect on test, the seed (2) is not; each test row keeps
    // its own harness's score.
    let finalized = |name: &str| fin["test"][name]["pass_rate"].as_f64().unwrap();
    let shown = |name: &str| {
        status["test"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not tested: {status}"))["pass_rate"]["value"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(finalized("copy1"), 1.0, "{fin}");
    assert!(finalized("seed") < 1.0, "{fin}");
    for name in ["seed", "copy1"] {
        assert_eq!(shown(name), finalized(name), "{name}: {status}");
    }
}

/// Text a proposer writes in `candidate.toml` (parent, axis, hypothesis; a rejected entry's
/// name) was printed raw by `hevo status`, `show` and the run's log: a window title, a
/// screen clear, and a line break that forged `pick: evil 1.000`. None reaches them raw now.
#[test]
fn a_proposer_cannot_drive_the_terminal_through_what_it_names() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let script = r#"#!/bin/sh
python3 - <<'EOF2'
import os, shutil
def write(name, meta):
    d = os.path.join("pending", name)
    shutil.copytree([os.path.join("candidates", c, "code") for c in os.listdir("candidates") if c.endswith("-seed")][0], d)
    open(os.path.join(d, "candidate.toml"), "w").write(meta)
write("evil", 'name = "evil"\nparent = "seed\\npick: evil 1.000"\naxis = "\\u001b]0;TITLE\\u0007\\u001b[2J"\nhypothesis = "one\\rpick: evil 1.000\\u001b[2J\\n\\u202etwo"\n')
write("bad", 'name = "bad\\u001b[2J\\npick: evil 1.000"\nparent = "seed"\n')
EOF2
"#;
    let (_, stderr) = run_with_agent(&dir, script, 1);
    let run = dir.join("runs/threshold");
    let status = hevo().arg("status").arg(&run).output().unwrap();
    let show = hevo()
        .args(["show"])
        .arg(&run)
        .arg("evil")
        .output()
        .unwrap();
    for (what, text) in [
        ("run log", stderr),
        (
            "status",
            String::from_utf8_lossy(&status.stdout).into_owned(),
        ),
        ("show", String::from_utf8_lossy(&show.stdout).into_owned()),
    ] {
        assert!(text.contains("evil"), "{what}: {text}");
        assert!(
            !text.contains(['\x1b', '\x07', '\r', '\u{202e}']),
            "{what} printed a control character raw: {text:?}"
        );
        assert!(
            !text
                .lines()
                .any(|l| l.trim_start().starts_with("pick: evil")),
            "{what} printed a forged line: {text}"
        );
    }
}

/// A signal while a proposed candidate's smoke trial ran rejected the candidate for good
/// (`rejected: stopped by SIGTERM ...`) and every later one too, and the search went on to
/// a "finished" run with the seed as its pick, exit 0. The run now stops (143) with the
/// candidate still pending, and the same command checks it again and finishes as if never
/// stopped.
#[test]
fn a_signal_during_a_smoke_trial_stops_the_run_and_rejects_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let mark = tmp.path().join("smoke-started");
    let script = format!(
        r#"#!/bin/sh
# One candidate, threshold 6, whose very first trial (its smoke trial) waits to be stopped.
n=$(ls -d candidates/* | wc -l)
c=pending/six$n
cp -r candidates/*-seed/code "$c"
sed -i 's/default = 2/default = 6/' "$c/harness.toml"
printf 'if [ ! -e "{mark}" ]; then touch "{mark}"; sleep 60; fi\n' > "$c/wait.sh"
cat "$c/wait.sh" "$c/harness.sh" > "$c/h2" && mv "$c/h2" "$c/harness.sh"
printf 'name = "six%s"\nparent = "seed"\n' "$n" > "$c/candidate.toml"
"#,
        mark = mark.display()
    );
    use_agent(&dir, &script, 1);
    let run = || {
        let mut c = hevo();
        c.args(["run", "--json", "--jobs", "2"])
            .arg(&dir)
            .env("HEVO_SANDBOX", "off")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let child = run().spawn().unwrap();
    let out = signal_once(
        child,
        &mark,
        nix::sys::signal::Signal::SIGTERM,
        "the smoke trial never started",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(!stderr.contains("rejected"), "{stderr}");
    // --json says why it stopped and how to resume (stdout was empty).
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(
        (&doc["stopped"], &doc["exit_code"]),
        (&serde_json::json!("SIGTERM"), &serde_json::json!(143)),
        "{doc}"
    );
    assert!(
        doc["resume"].as_str().unwrap().contains("run --json"),
        "{doc}"
    );
    let run_dir = dir.join("runs/threshold");
    assert!(!run_dir.join("search.json").exists(), "{stderr}");

    let out = run().output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["rejected"], 0, "{doc}");
    assert_eq!(doc["pick"]["name"], "six1", "{doc}");
}

/// A finalize stopped by a signal exited 1 (`error: testing ...: stopped by SIGINT`), the
/// code of an internal failure; it exits 130 like every other stopped command, with the
/// resume hint.
#[test]
fn a_finalize_stopped_by_a_signal_exits_130() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    // Every harness waits in its first trial once `armed` exists (after the search: the
    // archived code stays what the search evaluated, as finalize requires), and is stopped
    // there.
    let mark = tmp.path().join("testing");
    let armed = tmp.path().join("armed");
    let script = dir.join("seed/harness.sh");
    let code = std::fs::read_to_string(&script).unwrap();
    let wait = format!(
        "if [ -e '{}' ]; then touch '{}'; sleep 60; fi\n",
        armed.display(),
        mark.display()
    );
    std::fs::write(&script, wait + &code).unwrap();
    run_json(&dir, &[]);
    let run = dir.join("runs/threshold");
    std::fs::write(&armed, "").unwrap();
    let child = hevo()
        .arg("finalize")
        .arg(&run)
        .env("HEVO_SANDBOX", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = signal_once(
        child,
        &mark,
        nix::sys::signal::Signal::SIGINT,
        "no test trial started",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopped by SIGINT"), "{stderr}");
    assert!(stderr.contains("run the same command again"), "{stderr}");
    assert!(!stderr.contains("error:"), "{stderr}");
}

/// Waits (at most two minutes) until `mark` exists, then sends `signal` to `child` and
/// returns its output; `what` says what never happened when `mark` never appears.
fn signal_once(
    child: std::process::Child,
    mark: &Path,
    signal: nix::sys::signal::Signal,
    what: &str,
) -> std::process::Output {
    let start = std::time::Instant::now();
    while !mark.exists() && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(mark.exists(), "{what}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    child.wait_with_output().unwrap()
}

/// A search the evaluation budget stops reports its candidates' running estimates. A
/// candidate that agreed with the anchor on each of its few sampled tasks had a plug-in
/// standard error of 0 and showed `0.850 [0.850, 0.850]` after 4 trials (its full
/// validation score: 0.700). Only a candidate evaluated on every val task may have a
/// zero-width interval.
#[test]
fn a_sampled_candidate_never_shows_a_zero_width_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("threshold");
    support::threshold_copy(
        &dir,
        &[
            ("iterations = 3", "iterations = 6"),
            (
                "[evaluation]",
                "[budget]\nmax_evaluations = 150\n[evaluation]",
            ),
        ],
    );
    let doc = run_json(&dir, &[]);
    assert!(doc["stopped_early"].is_string(), "{doc}");
    let status = support::json_of(
        &hevo()
            .args(["status", "--json"])
            .arg(dir.join("runs/threshold"))
            .output()
            .unwrap(),
    );
    let val_tasks = status["val_tasks"].as_u64().unwrap();
    let mut sampled = 0;
    for c in status["candidates"].as_array().unwrap() {
        let e = &c["estimate"];
        let (Some(lo), Some(hi)) = (e["ci_low"].as_f64(), e["ci_high"].as_f64()) else {
            continue;
        };
        if c["trials"].as_u64().unwrap() < val_tasks {
            sampled += 1;
            assert!(hi - lo > 0.1, "{c}");
        }
    }
    assert!(sampled > 0, "{status}");
    // One candidate, one interval: `run --json` and `status --json` agree on every one
    // (the pick's is selection-adjusted in both, and in `pick`).
    for c in doc["candidates"].as_array().unwrap() {
        let s = status["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == c["name"])
            .unwrap_or_else(|| panic!("{c} not in {status}"));
        for k in ["ci_low", "ci_high"] {
            assert_eq!(c[k], s["estimate"][k], "{k}: {c} {s}");
        }
        if c["name"] == doc["pick"]["name"] {
            assert_eq!(c["ci_low"], doc["pick"]["ci_low"], "{c} {doc}");
        }
    }
}

/// A finalized search run further can pick another candidate: `status` then says that the
/// test rows are of an earlier finalize and how to test the new pick (it showed the old
/// table alone). The sentiment example's pick changes from iteration 3 to 6.
#[test]
fn status_says_when_the_pick_has_no_test_score_after_the_search_went_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sentiment");
    support::example_copy("sentiment", &dir);
    let first = run_json(&dir, &["--finalize"]);
    let later = run_json(&dir, &["--iterations", "6"]);
    let run_dir = dir.join("runs/sentiment");
    let status = hevo().arg("status").arg(&run_dir).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    let new_pick = later["pick"]["name"].as_str().unwrap();
    assert_ne!(
        new_pick,
        first["pick"]["name"].as_str().unwrap(),
        "the sentiment example's pick no longer changes from iteration 3 to 6: find \
         another setting where it does"
    );
    assert!(
        text.contains(&format!("the pick `{new_pick}` has no test score yet"))
            && text.contains("hevo finalize"),
        "{text}"
    );
    // Finalize tests the new pick; the note goes.
    let fin = hevo().arg("finalize").arg(&run_dir).output().unwrap();
    assert!(
        fin.status.success(),
        "{}",
        String::from_utf8_lossy(&fin.stderr)
    );
    let status = hevo().arg("status").arg(&run_dir).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(!text.contains("has no test score yet"), "{text}");
    assert!(text.contains(new_pick), "{text}");
}

/// A search finalized after one iteration and searched on to three has a new pick; the old
/// pick's test result was shown with a blank role (`test (): 0.850`). It says what it is.
#[test]
fn an_earlier_picks_test_result_says_it_is_no_longer_the_pick() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("threshold");
    support::threshold_copy(&dir, &[("iterations = 3", "iterations = 1")]);
    let first = run_json(&dir, &["--finalize"]);
    let later = run_json(&dir, &["--iterations", "3"]);
    let old_pick = first["pick"]["name"].as_str().unwrap();
    assert_ne!(
        later["pick"]["name"], first["pick"]["name"],
        "the threshold example's pick no longer changes from iteration 1 to 3: find \
         another setting where it does"
    );
    let run_dir = dir.join("runs/threshold");
    let doc = support::json_of(
        &hevo()
            .args(["status", "--json"])
            .arg(&run_dir)
            .output()
            .unwrap(),
    );
    let test = doc["test"].as_array().unwrap();
    let old = test
        .iter()
        .find(|t| t["name"] == old_pick)
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(old["role"], "no longer pick or frontier", "{doc}");
    assert!(test.iter().all(|t| t["role"] != ""), "{doc}");
    let show = hevo()
        .arg("show")
        .arg(&run_dir)
        .arg(old_pick)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("test (no longer pick or frontier): "),
        "{text}"
    );
}

/// The sentiment example's runner-up estimates above its pick (a seed known exactly) from
/// 7 sampled tasks: the output says why the pick stands and how to settle it (it printed
/// the two lines alone, which read as a wrong pick).
#[test]
fn a_runner_up_estimated_above_the_pick_is_explained() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sentiment");
    support::example_copy("sentiment", &dir);
    let out = hevo()
        .args(["run", "--no-progress", "--jobs", "2"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let estimate = |line: &str| -> f64 {
        let at = line.find("estimate ").unwrap() + "estimate ".len();
        line[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let pick = text.lines().find(|l| l.starts_with("pick: ")).unwrap();
    let runner_up = text.lines().find(|l| l.starts_with("runner-up: ")).unwrap();
    assert!(estimate(runner_up) > estimate(pick), "{text}");
    assert!(
        text.contains("rests on a sample of tasks") && text.contains("hevo show "),
        "{text}"
    );
}

/// An agent proposer whose program lives beside the suite (`command =
/// ["/.../search/agent.sh", "{prompt}"]`, `suite = "."`): the sandbox showed it the program's
/// whole folder, so the suite's tasks with their answers (the test split's too) and the
/// run's `hevo.db` (proposer audit). It is now shown its program alone, and the run's own
/// folders only where it is given them.
#[test]
fn a_sandboxed_agent_beside_the_suite_sees_neither_the_suite_nor_the_store() {
    if !support::has_bwrap() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let agent = dir.join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            r#"#!/bin/sh
{{ ls "{dir}"; cat "{dir}/tasks.jsonl"; ls "{dir}/runs/threshold"; }} > "$HOME/seen.txt" 2>&1
n=$(ls -d candidates/* | wc -l)
c=pending/six$n
cp -r candidates/*-seed/code "$c"
sed -i 's/default = 2/default = 6/' "$c/harness.toml"
printf 'name = "six%s"\nparent = "seed"\n' "$n" > "$c/candidate.toml"
"#,
            dir = dir.display()
        ),
    )
    .unwrap();
    let (out, stderr) = run_with_sandboxed_agent(&dir, &agent);
    let seen = std::fs::read_to_string(dir.join("runs/threshold/proposer/home/seen.txt"))
        .unwrap_or_else(|e| panic!("the agent did not run ({e}): {stderr}"));
    assert!(
        !seen.contains("\"expected\""),
        "the agent read the answers: {seen}"
    );
    assert!(!seen.contains("hevo.db"), "the agent saw the store: {seen}");
    assert!(
        !seen.contains("suite.toml"),
        "the agent saw the suite: {seen}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"].as_str().is_some_and(|n| n.starts_with("six"))),
        "its candidate was not taken: {stderr}"
    );
}

/// A proposer's candidate names its entry program in a host folder of the user's
/// (`<tmp>/host-tools/bin/bash`, a link to bash beside a secret file). The sandbox shows an
/// entry program's install prefix, so that candidate's harness read `host-tools/secret.txt`
/// and put it in its trace, where the next proposer reads; and the rejection of a missing
/// program (`<tmp>/nothing/bin/bash`) differed from the acceptance of an existing one, so a
/// proposer learned which host paths exist. Both are now refused, alike, by how they are
/// written: a proposed harness runs a program on PATH, in its own folder, or one a seed runs.
#[test]
fn a_proposed_entry_program_outside_its_folder_is_refused_without_looking() {
    if !support::has_bwrap() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let host = tmp.path().join("host-tools");
    std::fs::create_dir_all(host.join("bin")).unwrap();
    std::os::unix::fs::symlink("/bin/bash", host.join("bin/bash")).unwrap();
    std::fs::write(host.join("secret.txt"), "sk-HOST-SECRET-777\n").unwrap();
    let agent = dir.join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            r#"#!/bin/sh
for pair in "far:{host}" "gone:{gone}"; do
  name=${{pair%%:*}}; prefix=${{pair#*:}}
  c=pending/$name
  cp -r candidates/*-seed/code "$c"
  sed -i "s|^entry = .*|entry = [\"$prefix/bin/bash\", \"harness.sh\"]|" "$c/harness.toml"
  printf 'cat "%s/secret.txt" >&2\n' "$prefix" | cat - "$c/harness.sh" > "$c/h" && mv "$c/h" "$c/harness.sh"
  printf 'name = "%s"\nparent = "seed"\n' "$name" > "$c/candidate.toml"
done
"#,
            host = host.display(),
            gone = tmp.path().join("nothing").display(),
        ),
    )
    .unwrap();
    let (_, stderr) = run_with_sandboxed_agent(&dir, &agent);
    let run = dir.join("runs/threshold");
    let summary = std::fs::read_to_string(run.join("archive/summary.jsonl")).unwrap();
    let outcome = |name: &str| -> String {
        summary
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["name"] == name)
            .and_then(|v| v["outcome"].as_str().map(String::from))
            .unwrap_or_else(|| panic!("{name} is not in the summary:\n{summary}\n{stderr}"))
    };
    // The secret reached nothing the run keeps.
    let mut stack = vec![run.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                let bytes = std::fs::read(e.path()).unwrap();
                assert!(
                    !bytes.windows(18).any(|w| w == b"sk-HOST-SECRET-777"),
                    "the host secret reached {}",
                    e.path().display()
                );
            }
        }
    }
    let (far, gone) = (outcome("far"), outcome("gone"));
    assert!(
        far.starts_with("rejected: its `entry` program `")
            && far.contains("is outside the candidate's folder")
            && far.contains("a program on PATH"),
        "{far}"
    );
    // The two reasons differ only in the path the proposer wrote.
    assert_eq!(
        far.replace(&host.display().to_string(), "P"),
        gone.replace(&tmp.path().join("nothing").display().to_string(), "P")
    );
}

/// The seeds measure with a 2 s time limit; a proposer's candidate sets `timeout_s = 600`
/// and takes 3 s a task. It was taken, passed every task a seed would have timed out on,
/// and became the pick by being slow (and a candidate asking for 7 days while it hung held
/// its job slot as long). A proposed candidate may not give itself more time than the seeds.
#[test]
fn a_proposed_candidate_cannot_give_itself_more_time_than_the_seeds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let seed_toml = dir.join("seed/harness.toml");
    let text = std::fs::read_to_string(&seed_toml).unwrap();
    std::fs::write(
        &seed_toml,
        text.replace("entry =", "timeout_s = 2\nentry ="),
    )
    .unwrap();
    let script = r#"#!/bin/sh
c=pending/patient
cp -r candidates/*-seed/code "$c"
sed -i -e 's/^timeout_s = 2/timeout_s = 600/' -e 's/default = 2/default = 6/' "$c/harness.toml"
{ echo 'sleep 3'; cat candidates/*-seed/code/harness.sh; } > "$c/harness.sh"
printf 'name = "patient"\nparent = "seed"\n' > "$c/candidate.toml"
"#;
    let (out, stderr) = run_with_agent(&dir, script, 1);
    assert!(
        stderr.contains(
            "rejected `patient`: its `timeout_s = 600` is longer than the seeds' 2 s: a proposed \
             harness may not give itself more time than the run's seeds; set `timeout_s` to at \
             most 2"
        ),
        "{stderr}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["pick"]["name"], "seed", "{doc}");
    // The proposer was told the limit beforehand.
    let skill = std::fs::read_to_string(dir.join("runs/threshold/archive/SKILL.md")).unwrap();
    assert!(
        skill.contains("must be at most 2 s (the seeds')"),
        "{skill}"
    );
}

/// A proposer asked for 2 candidates that writes 4 gets 2 read and evaluated; the rest are
/// rejected unread (before: all were copied, smoke-tested and evaluated, so an agent could
/// multiply the run's spend, and its copies multiplied its disk use).
#[test]
fn a_proposer_that_writes_more_than_asked_gets_only_what_it_was_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let script = r#"#!/bin/sh
for n in 1 2 3 4; do
  c=pending/extra$n
  cp -r candidates/*-seed/code "$c"
  printf 'name = "extra%s"\nparent = "seed"\n' "$n" > "$c/candidate.toml"
done
"#;
    let (out, stderr) = run_with_agent(&dir, script, 1);
    assert!(
        stderr.contains("was asked for 2 candidate(s) and wrote 4"),
        "{stderr}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .filter(|n| n.starts_with("extra"))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names.contains(&"extra1") && names.contains(&"extra2"),
        "{names:?}"
    );
    assert_eq!(doc["rejected"], 2, "{doc}");
    // nothing of the unread ones was copied
    let rejected = dir.join("runs/threshold/archive/rejected");
    let kept: Vec<_> = std::fs::read_dir(&rejected)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(kept.is_empty(), "{kept:?}");
}

/// Two pending folders whose names are not UTF-8 and read alike (`a\xfe`, `a\xff`) were
/// staged under one name: the second replaced the first's checked copy, and unchecked code
/// was archived. Such names are rejected.
#[test]
fn pending_folders_whose_names_are_not_utf8_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let script = r#"#!/bin/sh
for b in '\376' '\377'; do
  c="pending/a$(printf "$b")"
  cp -r candidates/*-seed/code "$c"
  printf 'name = "swapped"\nparent = "seed"\n' > "$c/candidate.toml"
done
"#;
    let (out, stderr) = run_with_agent(&dir, script, 1);
    assert_eq!(stderr.matches("is not UTF-8").count(), 2, "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!doc.to_string().contains("swapped"), "{doc}");
}

/// An agent that leaves its home over its disk limit and exits 0 was taken as finished, and
/// every later call was killed at once for what it had left there: the run failed at every
/// iteration until the home was deleted by hand. The call now fails and its home is emptied.
#[test]
fn an_agent_over_its_disk_limit_fails_and_its_home_is_emptied() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    let script = r#"#!/bin/sh
n=$(ls -d candidates/* | wc -l)
if [ "$n" -eq 1 ]; then
  for i in 1 2 3; do head -c 40000000 /dev/zero > "$HOME/fill$i"; done
fi
c=pending/six$n
cp -r candidates/*-seed/code "$c"
sed -i 's/default = 2/default = 6/' "$c/harness.toml"
printf 'name = "six%s"\nparent = "seed"\n' "$n" > "$c/candidate.toml"
"#;
    use_agent(&dir, script, 2);
    let config =
        std::fs::read_to_string(dir.join("hevo.toml")).unwrap() + "\n[executor]\ndisk_mb = 50\n";
    std::fs::write(dir.join("hevo.toml"), config).unwrap();
    let out = hevo()
        .args(["run", "--json", "--jobs", "2"])
        .arg(&dir)
        .env("HEVO_SANDBOX", "off")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("over its disk limit"), "{stderr}");
    assert!(stderr.contains("its home was emptied"), "{stderr}");
    let home = dir.join("runs/threshold/proposer/home");
    assert!(!home.join("fill1").exists());
    // The next iteration's agent ran within its limit and its candidate was taken.
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["iteration"] == 2),
        "{doc}"
    );
}

/// Finalize tested whatever the archive held: code edited after the search (by hand, or by
/// anything that could write the archive) was tested on the test split under the searched
/// candidate's name. It now refuses, naming the candidate and its folder.
#[test]
fn finalize_refuses_archived_code_that_changed_since_the_search() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = search_dir(tmp.path());
    run_json(&dir, &[]);
    let run_dir = dir.join("runs/threshold");
    let code = run_dir.join("archive/candidates/000-seed/code/harness.sh");
    let original = std::fs::read_to_string(&code).unwrap();
    std::fs::write(&code, "echo '{\"answer\": \"high\"}'\n").unwrap();
    let out = hevo().arg("finalize").arg(&run_dir).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the code of `seed`")
            && stderr.contains("is not what the search evaluated"),
        "{stderr}"
    );
    assert!(
        !run_dir.join("test/hevo.db").exists() || {
            let db = rusqlite::Connection::open(run_dir.join("test/hevo.db")).unwrap();
            db.query_row("SELECT COUNT(*) FROM trials", [], |r| r.get::<_, i64>(0))
                .unwrap()
                == 0
        }
    );
    std::fs::write(&code, original).unwrap();
    let out = hevo().arg("finalize").arg(&run_dir).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
