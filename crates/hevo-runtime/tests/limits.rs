//! Per-launch limits against attacker harnesses: `setsid` escapes, a fork bomb, a memory
//! hog, a CPU burner and a disk writer under the launch's cgroup, and harnesses that fill
//! their folder, write one huge file or nest folders without end under its disk limit. Each
//! runs through `eval::run_with` with the real launchers (unsandboxed and in bubblewrap),
//! asserting the exact outcome and the trial's cause. Where the attack is real without the
//! limit, that is shown first.
//!
//! The cgroup tests skip loudly where this process can make no cgroup (a non-root user
//! without a delegated cgroup); `HEVO_TEST_CGROUP=1` (set by CI, which runs as root) makes
//! that a failure instead. The disk limit needs no cgroup: its tests always run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hevo_runtime::cgroup::{Cgroups, TrialLimits};
use hevo_runtime::eval::{self, EvalOptions};
use hevo_runtime::launch::{Launcher, LocalLauncher};
use hevo_runtime::report::{EvalReport, TrialReport};
use hevo_runtime::sandbox::{SandboxLauncher, SandboxOptions};
use serde_json::{json, Value};

mod support;
use support::{kill_all, marker, survivors, Fixture};

/// Whether cgroups can be made here; panics under `HEVO_TEST_CGROUP=1` when they cannot.
fn have_cgroups() -> bool {
    match Cgroups::get() {
        Ok(c) => {
            eprintln!("cgroups: {}", c.describe());
            true
        }
        Err(e) if std::env::var("HEVO_TEST_CGROUP").is_ok_and(|v| v == "1") => {
            panic!("HEVO_TEST_CGROUP=1 but no cgroups: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: no cgroups for this process: {e} (run as root)");
            false
        }
    }
}

/// The unsandboxed launcher with `limits`, and the sandboxed one when bwrap works here.
fn launchers(limits: TrialLimits) -> Vec<(&'static str, Arc<dyn Launcher>)> {
    let mut out: Vec<(&'static str, Arc<dyn Launcher>)> = vec![(
        "local",
        Arc::new(LocalLauncher {
            limits: Some(limits),
        }),
    )];
    let init = PathBuf::from(env!("CARGO_BIN_EXE_hevo-sandbox-init"));
    let options = SandboxOptions {
        limits: Some(limits),
        ..SandboxOptions::default()
    };
    match SandboxLauncher::new("/usr/bin/bwrap".into(), init, options) {
        Ok(l) => out.push(("bwrap", Arc::new(l))),
        Err(e) if std::env::var("HEVO_TEST_SANDBOX").is_ok_and(|v| v == "1") => {
            panic!("HEVO_TEST_SANDBOX=1 but no sandbox: {e}")
        }
        Err(e) => eprintln!("SKIPPED the sandboxed half: {e}"),
    }
    out
}

impl Fixture {
    /// One val task whose expected answer is `"ok"`.
    fn suite(&self) -> PathBuf {
        self.write(
            "suite/suite.toml",
            "name = \"t\"\n[scorer]\nkind = \"label\"\n",
        );
        let task = json!({"id": "t0", "split": "val", "input": {}, "expected": "ok"});
        self.write("suite/tasks.jsonl", &format!("{task}\n"));
        self.dir.path().join("suite")
    }
    fn harness(&self, name: &str, code: &str) -> PathBuf {
        self.write(&format!("{name}/h.py"), code);
        self.write(
            &format!("{name}/harness.toml"),
            "entry = [\"python3\", \"h.py\"]\ntimeout_s = 120\n",
        )
        .parent()
        .unwrap()
        .to_path_buf()
    }
    /// Runs `harness` once on the suite with `launcher`; returns its one trial.
    fn trial(&self, harness: &Path, run: &str, launcher: Arc<dyn Launcher>) -> TrialReport {
        self.trial_with(harness, run, launcher, |_| {})
    }
    /// [`Fixture::trial`] with the options `adjust` sets.
    fn trial_with(
        &self,
        harness: &Path,
        run: &str,
        launcher: Arc<dyn Launcher>,
        adjust: impl FnOnce(&mut EvalOptions),
    ) -> TrialReport {
        let mut o = EvalOptions::new(harness, self.suite());
        o.run_dir = Some(self.dir.path().join(run));
        o.jobs = 1;
        o.retries = 0;
        o.grace = Duration::from_millis(300);
        adjust(&mut o);
        let plan = eval::plan(o).unwrap();
        let report: EvalReport = eval::run_with(&plan, launcher, None).unwrap();
        report.tasks[0].details[0].clone()
    }
}

fn answer(t: &TrialReport) -> String {
    match &t.answer {
        Some(Value::String(s)) => s.clone(),
        other => format!("{other:?}"),
    }
}

#[test]
fn setsid_and_double_forked_children_die_with_the_trial_even_unsandboxed() {
    if !have_cgroups() {
        return;
    }
    let f = Fixture::new();
    let marker = marker(8000);
    // 25 `setsid` children and 25 double-forked daemons (reparented to init at once).
    let code = format!(
        r#"
import json, os, subprocess, sys
json.load(sys.stdin)
for _ in range(25):
    subprocess.Popen(["setsid", "sleep", "{marker}"], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(25):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execvp("sleep", ["sleep", "{marker}"])
        os._exit(0)
    os.wait()
print(json.dumps("ok"))
"#
    );
    let h = f.harness("escaper", &code);
    // The attack is real: without a cgroup the process-group kill misses all 50.
    let bare = f.trial(&h, "run-bare", Arc::new(LocalLauncher::default()));
    assert_eq!(
        (bare.status.as_str(), answer(&bare).as_str()),
        ("pass", "ok"),
        "{:?}",
        bare.error
    );
    let escaped = survivors(&marker);
    kill_all(&escaped);
    assert_eq!(escaped.len(), 50, "without a cgroup: escaped children");
    for (name, launcher) in launchers(TrialLimits::default()) {
        let t = f.trial(&h, &format!("run-{name}"), launcher);
        assert_eq!(
            (t.status.as_str(), answer(&t).as_str()),
            ("pass", "ok"),
            "{name}: {:?}",
            t.error
        );
        // The launch returns only after its cgroup is empty: nothing to wait for.
        let left = survivors(&marker);
        kill_all(&left);
        assert_eq!(
            left,
            Vec::<i32>::new(),
            "{name}: children outlived the trial"
        );
    }
}

#[test]
fn a_fork_bomb_stops_at_the_process_limit_with_a_clear_cause() {
    if !have_cgroups() {
        return;
    }
    let f = Fixture::new();
    let marker = marker(9000);
    // Forks sleeping children until fork fails (at most 400), reports how many it made,
    // then exits 3 leaving them all behind.
    let code = format!(
        r#"
import json, os, sys
json.load(sys.stdin)
made = 0
for _ in range(400):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.execvp("sleep", ["sleep", "{marker}"])
    made += 1
sys.stderr.write("made %d\n" % made)
print(json.dumps(made))
sys.exit(3)
"#
    );
    let h = f.harness("bomb", &code);
    let limits = TrialLimits {
        pids: Some(32),
        ..TrialLimits::default()
    };
    for (name, launcher) in launchers(limits) {
        let t = f.trial(&h, &format!("run-{name}"), launcher);
        assert_eq!(t.status, "harness_error", "{name}");
        let cause = t.error.clone().unwrap_or_default();
        assert!(
            cause.starts_with("exited with code 3; ")
                && cause.contains("fork(s) refused at the trial's limit of 32 processes"),
            "{name}: {cause}"
        );
        let left = survivors(&marker);
        kill_all(&left);
        assert_eq!(
            left,
            Vec::<i32>::new(),
            "{name}: the bomb's children outlived it"
        );
    }
}

#[test]
fn a_memory_hog_is_killed_at_its_limit_with_a_clear_cause() {
    if !have_cgroups() {
        return;
    }
    let f = Fixture::new();
    // 1 GiB in 16 MiB pieces, each touched; a child process does the allocating, so the
    // limit is shown to hold for the trial's processes together.
    let code = r#"
import json, subprocess, sys
json.load(sys.stdin)
hog = "b = []\nfor _ in range(64): b.append(bytearray(16 << 20))\nprint('survived')"
r = subprocess.run([sys.executable, "-c", hog], capture_output=True, text=True)
print(json.dumps(r.stdout.strip() or "killed %d" % r.returncode))
"#;
    let h = f.harness("hog", code);
    // The attack is real: without a limit the child gets its gigabyte.
    let bare = f.trial(&h, "run-bare", Arc::new(LocalLauncher::default()));
    assert_eq!(answer(&bare), "survived");
    let limits = TrialLimits {
        memory_mb: Some(128),
        ..TrialLimits::default()
    };
    for (name, launcher) in launchers(limits) {
        let t = f.trial(&h, &format!("run-{name}"), launcher);
        // The harness itself survives to report that its child was killed (SIGKILL = 9).
        assert_eq!(answer(&t), "killed -9", "{name}");
        assert_eq!(t.status, "fail", "{name}");
    }
    // A harness that is itself the hog gets the cause on its trial.
    let h = f.harness(
        "hog-self",
        "import json, sys\njson.load(sys.stdin)\nb = []\nfor _ in range(64): b.append(bytearray(16 << 20))\nprint(json.dumps('ok'))\n",
    );
    for (name, launcher) in launchers(limits) {
        let t = f.trial(&h, &format!("run-self-{name}"), launcher);
        assert_eq!(t.status, "harness_error", "{name}");
        let cause = t.error.clone().unwrap_or_default();
        assert!(
            cause.contains("out of memory: the kernel killed")
                && cause.contains("at the trial's limit of 128 MB"),
            "{name}: {cause}"
        );
    }
}

#[test]
fn a_cpu_quota_bounds_the_cpu_time_of_all_the_trials_processes() {
    if !have_cgroups() {
        return;
    }
    let f = Fixture::new();
    // Two processes spin for 1.5 s of wall time each and report their CPU seconds together.
    // With a quota of 0.1 CPU they can get at most 0.1 s per wall second (plus a period of
    // slack); a busy machine only lowers that, so the bound cannot fail by noise.
    let code = r#"
import json, os, sys, time
json.load(sys.stdin)
def spin():
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        pass
start = time.monotonic()
pid = os.fork()
spin()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
t = os.times()
wall = time.monotonic() - start
print(json.dumps("%f %f" % (t.user + t.system + t.children_user + t.children_system, wall)))
"#;
    let h = f.harness("burner", code);
    let limits = TrialLimits {
        cpus: Some(0.1),
        ..TrialLimits::default()
    };
    for (name, launcher) in launchers(limits) {
        let t = f.trial(&h, &format!("run-{name}"), launcher);
        // It ran to its end (its answer is its measurement, so the label scorer fails it).
        assert_eq!(t.status, "fail", "{name}: {:?}", t.error);
        let measured: Vec<f64> = answer(&t).split(' ').map(|x| x.parse().unwrap()).collect();
        let (cpu, wall) = (measured[0], measured[1]);
        assert!(
            cpu <= 0.1 * wall + 0.2,
            "{name}: {cpu:.2} CPU-s in {wall:.2} s under a 0.1-CPU quota"
        );
    }
}

#[test]
fn an_io_limit_bounds_the_trials_disk_writes() {
    if !have_cgroups() {
        return;
    }
    let f = Fixture::new();
    // 6 MB written with O_DIRECT (the page cache would hide the disk) into the working
    // directory; under 2 MB/s that takes about 3 s at least (the kernel allows a short
    // burst), and a busy machine only makes it slower.
    let code = r#"
import json, subprocess, sys, time
json.load(sys.stdin)
start = time.monotonic()
r = subprocess.run(["dd", "if=/dev/zero", "of=io.bin", "bs=1M", "count=6", "oflag=direct"],
                   capture_output=True, text=True)
print(json.dumps("%d %f" % (r.returncode, time.monotonic() - start)))
"#;
    let h = f.harness("writer", code);
    let limits = TrialLimits {
        io_mbps: Some(2),
        ..TrialLimits::default()
    };
    for (name, launcher) in launchers(limits) {
        let t = f.trial(&h, &format!("run-{name}"), launcher);
        let measured = answer(&t);
        let (code, secs) = measured.split_once(' ').unwrap();
        let secs: f64 = secs.parse().unwrap();
        eprintln!("{name}: 6 MB in {secs:.2} s under 2 MB/s");
        if code != "0" {
            // O_DIRECT is refused by some file systems (tmpfs): then there is nothing
            // to throttle on this disk.
            eprintln!("SKIPPED {name}: dd with O_DIRECT failed in the working directory");
            continue;
        }
        assert!(
            secs >= 2.0,
            "{name}: 6 MB in {secs:.2} s under a 2 MB/s limit"
        );
    }
}

/// The limits of the disk tests: 64 MB, nothing else beyond the defaults.
fn disk_64() -> TrialLimits {
    TrialLimits {
        disk_mb: Some(64),
        ..TrialLimits::default()
    }
}

#[test]
fn a_harness_that_fills_its_folder_is_killed_at_its_disk_limit() {
    let f = Fixture::new();
    // 300 MB in 1 MB files, a little at a time: the watch sees it pass 64 MB.
    let code = r#"
import json, sys, time
json.load(sys.stdin)
chunk = b"x" * (1 << 20)
for i in range(300):
    with open("f%03d" % i, "wb") as f:
        f.write(chunk)
    time.sleep(0.01)
print(json.dumps("ok"))
"#;
    let h = f.harness("filler", code);
    // The attack is real: without a disk limit all 300 MB are written and it passes.
    let unlimited = TrialLimits {
        disk_mb: None,
        ..TrialLimits::default()
    };
    let bare = f.trial(&h, "run-bare", launchers(unlimited)[0].1.clone());
    assert_eq!(bare.status, "pass", "{:?}", bare.error);
    for (name, launcher) in launchers(disk_64()) {
        let t = f.trial(&h, &format!("run-{name}"), launcher);
        assert_eq!(t.status, "harness_error", "{name}: {:?}", t.error);
        let cause = t.error.clone().unwrap_or_default();
        assert!(
            cause.starts_with("killed by signal 9; its folders held ")
                && cause.contains(
                    "MB, over the trial's disk limit of 64 MB ([executor] disk_mb, --disk-mb); \
                     the trial was killed"
                ),
            "{name}: {cause}"
        );
    }
}

#[test]
fn a_harness_that_writes_past_its_limit_and_exits_at_once_does_not_pass() {
    let f = Fixture::new();
    // 100 MB as fast as the disk takes it, then the right answer: the watch may not see
    // it in time, the measurement at the end does.
    let code = r#"
import json, sys
json.load(sys.stdin)
chunk = b"x" * (1 << 20)
for i in range(100):
    with open("f%03d" % i, "wb") as f:
        f.write(chunk)
print(json.dumps("ok"))
"#;
    let h = f.harness("burst", code);
    for (name, launcher) in launchers(disk_64()) {
        // Kept working directories (`hevo tests synth` keeps them) are not kept past the
        // limit: the copy would hold as much again.
        let t = f.trial_with(&h, &format!("run-{name}"), launcher, |o| {
            o.keep_workdirs = true;
        });
        let kept = format!("{}.workdir", t.trace.clone().unwrap());
        assert!(!Path::new(&kept).exists(), "{name}: {kept} was kept");
        assert_eq!(t.status, "harness_error", "{name}: {:?}", t.error);
        let cause = t.error.clone().unwrap_or_default();
        assert!(
            cause.contains("over the trial's disk limit of 64 MB"),
            "{name}: {cause}"
        );
    }
}

#[test]
fn no_file_grows_past_the_disk_limit() {
    let f = Fixture::new();
    // It ignores SIGXFSZ, so it sees the errors: a truncate past the limit and a write at
    // it are refused with EFBIG (27), and the file stops at exactly 64 MiB.
    let ignorer = r#"
import json, os, signal, sys
json.load(sys.stdin)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
out = []
try:
    with open("sparse", "wb") as f:
        f.truncate(200 << 20)
    out.append("truncated")
except OSError as e:
    out.append("truncate %d" % e.errno)
try:
    with open("big", "wb", buffering=0) as f:
        for _ in range(100):
            f.write(b"y" * (1 << 20))
    out.append("wrote 100 MB")
except OSError as e:
    out.append("write %d at %d" % (e.errno, os.path.getsize("big")))
os.remove("big")
print(json.dumps(" ".join(out)))
"#;
    // It takes the signal's default (Python ignores SIGXFSZ unless told otherwise): the
    // kernel kills it at the limit.
    let direct = r#"
import json, signal, sys
json.load(sys.stdin)
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
with open("big", "wb", buffering=0) as f:
    for _ in range(100):
        f.write(b"y" * (1 << 20))
print(json.dumps("ok"))
"#;
    let (hi, hd) = (f.harness("ignorer", ignorer), f.harness("direct", direct));
    let unlimited = TrialLimits {
        disk_mb: None,
        ..TrialLimits::default()
    };
    let bare = f.trial(&hi, "run-bare", launchers(unlimited)[0].1.clone());
    assert_eq!(answer(&bare), "truncated wrote 100 MB");
    for (name, launcher) in launchers(disk_64()) {
        let t = f.trial(&hi, &format!("run-ignorer-{name}"), launcher.clone());
        assert_eq!(answer(&t), "truncate 27 write 27 at 67108864", "{name}");
        let t = f.trial(&hd, &format!("run-direct-{name}"), launcher);
        assert_eq!(t.status, "harness_error", "{name}: {:?}", t.error);
        let cause = t.error.clone().unwrap_or_default();
        // Unsandboxed the harness is the launch (signal 25, SIGXFSZ); in the sandbox the
        // init reports its death as 128 + 25.
        assert!(
            (cause.starts_with("killed by signal 25;")
                || cause.starts_with("exited with code 153;"))
                && cause.contains("a file reached the trial's disk limit of 64 MB"),
            "{name}: {cause}"
        );
    }
}

#[test]
fn folders_nested_past_what_the_walk_measures_count_as_over_the_limit() {
    let f = Fixture::new();
    // 1,100 nested folders (made one `chdir` at a time, so no path is ever long), with
    // files hidden at the bottom where a walk that stopped at PATH_MAX would not look.
    let code = r#"
import json, os, sys
json.load(sys.stdin)
for _ in range(1100):
    os.mkdir("d")
    os.chdir("d")
with open("hidden", "wb") as f:
    f.write(b"z" * (1 << 20))
print(json.dumps("ok"))
"#;
    let h = f.harness("nester", code);
    for (name, launcher) in launchers(disk_64()) {
        let t = f.trial(&h, &format!("run-{name}"), launcher);
        assert_eq!(t.status, "harness_error", "{name}: {:?}", t.error);
        let cause = t.error.clone().unwrap_or_default();
        assert!(
            cause.contains(
                "its folders were nested more than 1000 deep, which counts as over \
                            the trial's disk limit of 64 MB"
            ),
            "{name}: {cause}"
        );
    }
}
