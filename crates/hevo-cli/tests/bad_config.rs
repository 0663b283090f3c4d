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

/// Asserts that `o` is a user error (exit 2) whose stderr holds every one of `needles`
/// and that no work started (nothing printed about a run directory or a phase, no
/// `runs/` beside the config); returns its stderr.
fn refused_before_work(o: &Output, dir: &Path, needles: &[&str]) -> String {
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{e}");
    for needle in needles {
        assert!(e.contains(needle), "`{needle}` not in: {e}");
    }
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
