//! A bad `hevo.toml`, or a suite that cannot serve the command, through the real binary,
//! on copies of examples/threshold: exit 2 naming the file, its line and the fix, before
//! any work (no run directory, no phase 0, no trial).

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::threshold_copy;

fn hevo(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
        .args(args)
        .output()
        .unwrap()
}

/// `hevo run DIR` plus `flags`.
fn run(dir: &Path, flags: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
        .arg("run")
        .args(flags)
        .arg(dir)
        .output()
        .unwrap()
}

/// Asserts that `o` is a user error (exit 2) whose stderr holds every one of `needles`;
/// returns its stderr.
fn user_error(o: &Output, needles: &[&str]) -> String {
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{e}");
    for needle in needles {
        assert!(e.contains(needle), "`{needle}` not in: {e}");
    }
    e
}

/// Asserts that `o` is a user error (exit 2) whose stderr holds every one of `needles`
/// and that no work started (nothing printed about a run directory or a phase, no
/// `runs/` beside the config); returns its stderr.
fn refused_before_work(o: &Output, dir: &Path, needles: &[&str]) -> String {
    let e = user_error(o, needles);
    for work in ["run directory:", "phase 0", "hevo: test:"] {
        assert!(!e.contains(work), "work started (`{work}`): {e}");
    }
    assert!(!dir.join("runs").exists(), "a run directory was made: {e}");
    e
}

/// `[search] trials` beyond hevo's bound used to be accepted at load: the run directory was
/// made and phase 0 started before the evaluator refused it. `finalize --trials 0` printed
/// its first test line before its error.
#[test]
fn trials_out_of_range_are_refused_at_load() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    threshold_copy(&dir, &[("[search]\n", "[search]\ntrials = 100000\n")]);
    refused_before_work(
        &run(&dir, &[]),
        &dir,
        &[
            "hevo.toml:11: `search.trials` is 100000",
            "between 1 and 10000 trials per task",
        ],
    );
    let o = hevo(&[
        "finalize".as_ref(),
        "--trials".as_ref(),
        "0".as_ref(),
        dir.as_os_str(),
    ]);
    refused_before_work(&o, &dir, &["--trials", "is 0: give between 1 and 10000"]);
}

/// A typo in `seeds` or `suite` used to surface as `cannot read /…/sed` from inside a run
/// directory already made, naming neither hevo.toml, its line nor the key.
#[test]
fn a_seed_or_suite_that_is_no_folder_is_named_by_its_key_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("seeds");
    threshold_copy(&dir, &[("seeds = [\"seed\"]", "seeds = [\"sed\"]")]);
    refused_before_work(
        &run(&dir, &[]),
        &dir,
        &[
            "hevo.toml:4: `seeds` names `sed`, which does not exist",
            "seeds name folders holding harness.toml, relative to hevo.toml",
        ],
    );
    let dir = tmp.path().join("no-harness");
    threshold_copy(&dir, &[("seeds = [\"seed\"]", "seeds = [\"runs-not\"]")]);
    std::fs::create_dir(dir.join("runs-not")).unwrap();
    refused_before_work(
        &run(&dir, &[]),
        &dir,
        &["`seeds` names `runs-not`, which holds no harness.toml"],
    );
    let dir = tmp.path().join("suite");
    threshold_copy(&dir, &[("suite = \".\"", "suite = \"nosuite\"")]);
    refused_before_work(
        &run(&dir, &[]),
        &dir,
        &[
            "hevo.toml:3: `suite` is `nosuite`, which does not exist",
            "suite names the folder holding suite.toml and tasks.jsonl",
        ],
    );
}

/// A suite without `val` tasks used to be found only after the run directory was made.
#[test]
fn a_suite_without_val_tasks_is_refused_before_a_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    threshold_copy(&dir, &[]);
    keep_tasks(&dir, |l| !l.contains("\"split\": \"val\""));
    refused_before_work(
        &run(&dir, &[]),
        &dir,
        &["has no `val` tasks: the search evaluates candidates on the validation split"],
    );
}

/// Keeps the lines of the copy's tasks.jsonl for which `keep` holds (some are dropped).
fn keep_tasks(dir: &Path, keep: impl Fn(&str) -> bool) {
    let tasks = std::fs::read_to_string(dir.join("tasks.jsonl")).unwrap();
    let kept: String = tasks
        .lines()
        .filter(|l| keep(l))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(kept.len() < tasks.len());
    std::fs::write(dir.join("tasks.jsonl"), kept).unwrap();
}

/// Without `test` tasks, `--finalize` used to run the whole search and then print `NaN`
/// and an interval of [-inf, +inf] with exit 0 (`hevo finalize` too, and `--json` with
/// nulls). Now it is refused before the search; a run without `--finalize` still works,
/// and `hevo finalize` on it is refused before any test line.
#[test]
fn finalize_without_test_tasks_is_refused_before_the_search() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    threshold_copy(&dir, &[]);
    keep_tasks(&dir, |l| !l.contains("\"split\": \"test\""));
    let said = [
        "has no `test` tasks: finalize measures the pick on the test split",
        "add tasks with \"split\": \"test\" to",
        "tasks.jsonl",
    ];
    refused_before_work(&run(&dir, &["--finalize"]), &dir, &said);
    let o = run(&dir, &["--no-progress", "--jobs", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run_dir = dir.join("runs/t");
    for json in [&[][..], &["--json"][..]] {
        let mut args: Vec<&std::ffi::OsStr> = vec!["finalize".as_ref(), run_dir.as_os_str()];
        args.extend(json.iter().map(std::ffi::OsStr::new));
        let o = hevo(&args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{json:?}: {e}");
        assert!(said.iter().all(|s| e.contains(s)), "{json:?}: {e}");
        assert!(
            !e.contains("hevo: test:") && o.stdout.is_empty(),
            "{json:?}: {e}"
        );
        assert!(
            !run_dir.join("test").exists(),
            "{json:?}: a test store was made"
        );
    }
}

/// An empty tasks.jsonl used to be reported as a suite without `val` tasks, with the advice
/// to pick another `--split`: wrong when there is no task at all. Now the file is named,
/// with the format to write, by `hevo eval` and `hevo run` alike.
#[test]
fn an_empty_tasks_file_is_named_with_the_format() {
    let tmp = tempfile::tempdir().unwrap();
    support::one_task(tmp.path(), ("sh", "h.sh", "echo '\"x\"'"), "x");
    std::fs::write(tmp.path().join("suite/tasks.jsonl"), "\n").unwrap();
    let o = support::eval_command(tmp.path())
        .arg("--no-model")
        .output()
        .unwrap();
    let said = [
        "tasks.jsonl: has no tasks: write one JSON object per line",
        "\"split\": \"val\"",
    ];
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(said.iter().all(|s| e.contains(s)), "{e}");
    assert!(!e.contains("--split"), "{e}");
    let dir = tmp.path().join("t");
    threshold_copy(&dir, &[]);
    std::fs::write(dir.join("tasks.jsonl"), "").unwrap();
    let e = refused_before_work(&run(&dir, &[]), &dir, &said);
    assert!(!e.contains("no `val` tasks"), "{e}");
}

/// A backend whose API key variable is not set was found when the backends loaded, after
/// the run directory was made, with no line and no fix; an `anthropic` backend without
/// `api_key_env` reads `ANTHROPIC_API_KEY`.
#[test]
fn a_missing_provider_key_is_named_by_its_line_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    threshold_copy(
        &dir,
        &[(
            "[model]\n",
            "[model]\ndefault_model = \"m\"\n\n[[model.backends]]\nname = \"api\"\n\
             kind = \"openai\"\napi_key_env = \"HEVO_TEST_NO_SUCH_API_KEY\"\n\n\
             [[model.models]]\nname = \"m\"\nbackend = \"api\"\nupstream_model = \"gpt-4o-mini\"\n",
        )],
    );
    let out = Command::new(env!("CARGO_BIN_EXE_hevo"))
        .arg("run")
        .arg(&dir)
        .env_remove("HEVO_TEST_NO_SUCH_API_KEY")
        .output()
        .unwrap();
    refused_before_work(
        &out,
        &dir,
        &[
            "hevo.toml:14: `model.backends.0.api_key_env` (backend `api`)",
            "export HEVO_TEST_NO_SUCH_API_KEY=<your key>",
        ],
    );
    let text = std::fs::read_to_string(dir.join("hevo.toml"))
        .unwrap()
        .replace(
            "kind = \"openai\"\napi_key_env = \"HEVO_TEST_NO_SUCH_API_KEY\"",
            "kind = \"anthropic\"",
        );
    std::fs::write(dir.join("hevo.toml"), text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hevo"))
        .arg("run")
        .arg(&dir)
        .env("ANTHROPIC_API_KEY", " ")
        .output()
        .unwrap();
    refused_before_work(
        &out,
        &dir,
        &[
            "hevo.toml:11: `model.backends.0` (backend `api`)",
            "`ANTHROPIC_API_KEY`",
        ],
    );
}

/// A run directory that is the config's folder or holds it (`run_dir = "."`, `--run-dir ..`)
/// used to be taken: hevo.db, archive/ and traces were written among the suite's and the
/// seeds' files. A `hevo eval --run-dir` given a search's directory added its harness's
/// trials to the search's store (`hevo status` then counted a full evaluation as 490
/// trials where the search's is 280), and a search given an eval's directory took its
/// trials too.
#[test]
fn a_run_directory_holding_the_config_or_another_commands_run_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dot");
    threshold_copy(&dir, &[("seed = 11", "seed = 11\nrun_dir = \".\"")]);
    refused_before_work(
        &run(&dir, &[]),
        &dir,
        &["hevo.toml:6: `run_dir` is or holds the folder of hevo.toml"],
    );
    assert!(!dir.join("hevo.db").exists() && !dir.join("archive").exists());
    let dir = tmp.path().join("flag");
    threshold_copy(&dir, &[]);
    let parent = tmp.path().as_os_str().to_owned();
    refused_before_work(
        &run(&dir, &["--run-dir", parent.to_str().unwrap()]),
        &dir,
        &[
            "is or holds the folder of hevo.toml",
            "give the run a folder of its own",
        ],
    );
    assert!(!tmp.path().join("hevo.db").exists());

    let dir = tmp.path().join("mix");
    threshold_copy(&dir, &[]);
    let done = run(&dir, &["--no-progress"]);
    assert!(done.status.success(), "{done:?}");
    let search = dir.join("runs/mix");
    let trials = |run: &Path| {
        let o = hevo(&["status".as_ref(), run.as_os_str(), "--json".as_ref()]);
        assert!(o.status.success(), "{o:?}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (v["trials"].clone(), v["full_trials"].clone())
    };
    let before = trials(&search);
    let seed = dir.join("seed");
    let o = hevo(&[
        "eval".as_ref(),
        seed.as_os_str(),
        "--suite".as_ref(),
        dir.as_os_str(),
        "--no-model".as_ref(),
        "--no-progress".as_ref(),
        "--run-dir".as_ref(),
        search.as_os_str(),
    ]);
    user_error(
        &o,
        &["holds a `hevo run` search (its hevo.db), and a `hevo eval` run cannot share"],
    );
    assert_eq!(trials(&search), before, "the search's store was written");

    let evaluated = tmp.path().join("an-eval");
    let o = hevo(&[
        "eval".as_ref(),
        seed.as_os_str(),
        "--suite".as_ref(),
        dir.as_os_str(),
        "--no-model".as_ref(),
        "--no-progress".as_ref(),
        "--run-dir".as_ref(),
        evaluated.as_os_str(),
    ]);
    assert!(o.status.success(), "{o:?}");
    let o = run(&dir, &["--run-dir", evaluated.to_str().unwrap()]);
    let e = user_error(
        &o,
        &["holds a `hevo eval` run (its hevo.db), and a `hevo run` search cannot"],
    );
    assert!(
        !evaluated.join("archive").exists(),
        "the search started: {e}"
    );
}

/// Three refusals that named no file or line: two seeds of one name (`two seeds are named
/// `seed``), a failed `setup` (`setup `false` failed (exit status: 1)`), and a `run_dir`
/// that is a file (`cannot create ...: File exists`, exit 2 only by luck of the IO error).
#[test]
fn seeds_setup_and_run_dir_refusals_name_their_line() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            ("seeds = [\"seed\"]", "seeds = [\"seed\", \"./seed\"]"),
            "hevo.toml:4: `seeds` names two harnesses named `seed`",
        ),
        (
            ("suite = \".\"", "suite = \"nope\"\nsetup = [\"false\"]"),
            "hevo.toml:4: `setup` `false` failed (exit status: 1) and the suite",
        ),
        (
            ("seed = 11", "seed = 11\nrun_dir = \"README.md\""),
            "hevo.toml:6: `run_dir` is a file, not a folder",
        ),
    ];
    for (i, (edit, needle)) in cases.into_iter().enumerate() {
        let dir = tmp.path().join(format!("c{i}"));
        threshold_copy(&dir, &[edit]);
        user_error(&run(&dir, &["--no-progress"]), &[needle]);
    }
}

/// A run directory inside a task's `files` folder was accepted by `hevo run` and
/// `hevo eval`: the folder is copied into every trial's working directory, so the run's
/// store (every earlier answer and outcome) reached the harness, sandboxed too (its stderr
/// listed `r/hevo.db`). And `hevo eval --run-dir` was not checked at all: `--run-dir suite`
/// wrote hevo.db into the suite, one inside `tests/s02` broke the suite for good, and the
/// harness's folder itself hid its code from its trials. Each is refused before any work.
#[test]
fn a_run_directory_inside_what_trials_read_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("shell");
    support::example_copy("shell", &dir);
    let eval = |run_dir: &str| {
        hevo(&[
            "eval".as_ref(),
            dir.join("harness-script").as_os_str(),
            "--suite".as_ref(),
            dir.as_os_str(),
            "--no-model".as_ref(),
            "--no-progress".as_ref(),
            "--run-dir".as_ref(),
            dir.join(run_dir).as_os_str(),
        ])
    };
    for (run_dir, needle) in [
        ("files/s02/r", "is inside `"),
        ("tests/s02", "is inside `"),
        (".", "is or holds the suite"),
        ("harness-script", "is or holds the harness `harness-script`"),
    ] {
        let e = user_error(&eval(run_dir), &["the run directory `", needle]);
        assert!(
            !dir.join(run_dir).join("hevo.db").exists() && !dir.join("hevo.db").exists(),
            "{run_dir}: a store was written: {e}"
        );
    }
    user_error(
        &eval("files/s02/r"),
        &[
            "which the suite's tasks or scorer read",
            "would reach the harness",
        ],
    );

    // The same through hevo.toml: a search whose run_dir is inside a task's files.
    let cfg = dir.join("hevo.toml");
    std::fs::write(
        &cfg,
        "suite = \".\"\nseeds = [\"harness-script\"]\nrun_dir = \"files/s03/r\"\n[model]\n",
    )
    .unwrap();
    user_error(
        &run(&dir, &["--no-progress"]),
        &["hevo.toml:3: `run_dir` is inside `", "files/s03"],
    );
    assert!(!dir.join("files/s03/r").exists());
}
