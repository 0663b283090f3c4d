//! What holds when hevo runs as an ordinary user, as most users run it. Root reads every
//! folder whatever its permissions, so run as root (the CI) these tests run `hevo` as
//! `nobody`; run by another user, as that user.
//!
//! - A harness runs as hevo's own user, so it can take its folders' permissions away from
//!   itself (`chmod 300`: write, no read) and hide what they hold from hevo's disk limit;
//!   hevo gives the owner's access back before it measures.
//! - `--no-model` points a harness at a closed port; the sandbox used to try a relay for it,
//!   which a non-root sandbox cannot bind (port 9), and every trial's stderr said so.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

const NOBODY: u32 = 65534;

fn write(dir: &Path, path: &str, text: &str) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A folder everyone may use, for a `hevo` that runs as `nobody`.
fn shared_tempdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

/// `hevo eval h --suite suite --no-model --json` in `dir`, as `nobody` when we are root,
/// with its home and temporary folders inside `dir`.
fn eval_as_user(dir: &Path, sandbox: &str, extra: &[&str]) -> Output {
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // Everything the test wrote must be usable by `nobody`.
    let chmod = Command::new("chmod")
        .arg("-R")
        .arg("a+rwX")
        .arg(dir)
        .status();
    assert!(chmod.unwrap().success());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hevo"));
    cmd.current_dir(dir)
        .env("HOME", dir)
        .env("HEVO_HOME", dir.join(".hevo-home"))
        .env("TMPDIR", &tmp)
        .env("HEVO_SANDBOX", sandbox)
        .args([
            "eval",
            "h",
            "--suite",
            "suite",
            "--no-model",
            "--no-progress",
            "--json",
        ])
        .args(["--run-dir", &format!("run-{sandbox}")])
        .args(extra);
    if nix::unistd::geteuid().is_root() {
        // SAFETY: three system calls, no allocation.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setgroups(&[])?;
                nix::unistd::setgid(nix::unistd::Gid::from_raw(NOBODY))?;
                nix::unistd::setuid(nix::unistd::Uid::from_raw(NOBODY))?;
                Ok(())
            });
        }
    }
    cmd.output().unwrap()
}

/// The modes to run in: unsandboxed, and in bubblewrap where it is installed.
fn modes() -> Vec<&'static str> {
    if Path::new("/usr/bin/bwrap").exists() {
        vec!["off", "require"]
    } else {
        assert!(
            std::env::var("HEVO_TEST_SANDBOX").map_or(true, |v| v != "1"),
            "HEVO_TEST_SANDBOX=1 but bubblewrap is not installed"
        );
        eprintln!("SKIPPED (sandboxed half): bubblewrap is not installed");
        vec!["off"]
    }
}

fn one_task(dir: &Path, harness_sh: &str) {
    write(
        dir,
        "suite/suite.toml",
        "name = \"s\"\n[scorer]\nkind = \"exact\"\n",
    );
    write(
        dir,
        "suite/tasks.jsonl",
        "{\"id\": \"a\", \"split\": \"val\", \"input\": 1, \"expected\": \"ok\"}\n",
    );
    write(
        dir,
        "h/harness.toml",
        "entry = [\"sh\", \"h.sh\"]\ntimeout_s = 120\n",
    );
    write(dir, "h/h.sh", harness_sh);
}

/// Writes 300 MB into a folder it can write but not read, under a 64 MB limit, and answers
/// right. It passed before (the walk could not open the folder and counted nothing).
#[test]
fn a_folder_its_owner_made_unreadable_still_counts_toward_the_disk_limit() {
    let d = shared_tempdir();
    one_task(
        d.path(),
        "cat > /dev/null\nmkdir hide\nchmod 300 hide\n\
         for i in $(seq 1 30); do head -c 10000000 /dev/zero > hide/f$i; done\n\
         echo '\"ok\"'\n",
    );
    for mode in modes() {
        let o = eval_as_user(d.path(), mode, &["--disk-mb", "64"]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        let report: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{mode}: {stderr}"));
        let trial = &report["tasks"][0]["details"][0];
        assert_eq!(
            trial["status"], "harness_error",
            "{mode}: {trial}\n{stderr}"
        );
        let cause = trial["error"].as_str().unwrap();
        assert!(
            cause.contains("over the trial's disk limit of 64 MB"),
            "{mode}: {cause}"
        );
        // Its working directory was removed: hevo could read it again.
        let left: Vec<_> = std::fs::read_dir(d.path().join("tmp"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().starts_with("hevo-trial-"))
            .collect();
        assert!(left.is_empty(), "{mode}: left behind {left:?}");
    }
}

/// With `--no-model` the harness's model URLs name a closed port; a call there is refused
/// cleanly, sandboxed or not, and the sandbox says nothing about a relay.
#[test]
fn no_model_calls_are_refused_without_a_relay_error() {
    let d = shared_tempdir();
    one_task(
        d.path(),
        "cat > /dev/null\n\
         python3 -c 'import os, urllib.request\n\
try:\n    urllib.request.urlopen(os.environ[\"OPENAI_BASE_URL\"] + \"/models\", timeout=5)\n\
except Exception as e:\n    print(\"call:\", e)' >&2\n\
         echo '\"ok\"'\n",
    );
    for mode in modes() {
        let o = eval_as_user(d.path(), mode, &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        let report: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{mode}: {stderr}"));
        let trace = report["tasks"][0]["details"][0]["trace"].as_str().unwrap();
        let said = std::fs::read_to_string(d.path().join(format!("{trace}.stderr")))
            .or_else(|_| std::fs::read_to_string(format!("{trace}.stderr")))
            .unwrap();
        assert!(said.contains("Connection refused"), "{mode}: {said}");
        assert!(!said.contains("cannot listen"), "{mode}: {said}");
        assert_eq!(report["pass_rate"], 1.0, "{mode}: {report}");
    }
}
