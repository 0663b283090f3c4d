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
use std::path::Path;
use std::process::Command;

mod support;

use support::nobody::{as_nobody, is_root, shared_tempdir, NOBODY};

/// `hevo eval h --suite suite --no-model --json` in `dir`, as `nobody` when we are root,
/// with its home and temporary folders inside `dir`: its report and its stderr.
fn eval_as_user(dir: &Path, sandbox: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let tmp = dir.join("tmp");
    let mut cmd = Command::new(dir.join("bin/hevo"));
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
    if is_root() {
        as_nobody(&mut cmd);
    }
    let o = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let report = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| panic!("HEVO_SANDBOX={sandbox}: {stderr}"));
    (report, stderr)
}

/// The modes to run in: unsandboxed, and in bubblewrap where it is installed.
fn modes() -> Vec<&'static str> {
    if support::has_bwrap() {
        vec!["off", "require"]
    } else {
        vec!["off"]
    }
}

/// The user hevo runs as here: `nobody` when we are root.
fn as_user() -> u32 {
    if is_root() {
        NOBODY
    } else {
        nix::unistd::geteuid().as_raw()
    }
}

/// Gives `path` and everything below it to the user hevo runs as.
fn give(path: &Path) {
    let chown = Command::new("chown")
        .arg("-R")
        .arg(as_user().to_string())
        .arg(path)
        .status();
    assert!(chown.unwrap().success());
}

/// A suite of one task (expected answer `"ok"`), the harness `h` running `harness_sh`, an
/// empty `tmp/` and a copy of `hevo`, all given to the user hevo runs as.
fn one_task(dir: &Path, harness_sh: &str) {
    support::one_task(dir, ("sh", "h.sh", harness_sh), "ok");
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    support::nobody::copy_hevo(dir);
    give(dir);
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
        let (report, stderr) = eval_as_user(d.path(), mode, &["--disk-mb", "64"]);
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
        let (report, _) = eval_as_user(d.path(), mode, &[]);
        let trace = report["tasks"][0]["details"][0]["trace"].as_str().unwrap();
        let said = std::fs::read_to_string(d.path().join(format!("{trace}.stderr")))
            .or_else(|_| std::fs::read_to_string(format!("{trace}.stderr")))
            .unwrap();
        assert!(said.contains("Connection refused"), "{mode}: {said}");
        assert!(!said.contains("cannot listen"), "{mode}: {said}");
        assert_eq!(report["pass_rate"], 1.0, "{mode}: {report}");
    }
}

/// A working directory the harness made unremovable (a folder at `chmod 000` under a tree
/// deeper than the disk walk goes), and one a killed hevo left (a dead pid in its name, a
/// `chmod 000` folder inside): both are removed, by the trial's end and by the next
/// evaluation. Both stayed for good before (`remove_dir_all` cannot enter them).
#[test]
fn working_directories_with_folders_at_chmod_000_are_removed() {
    let d = shared_tempdir();
    one_task(
        d.path(),
        "cat > /dev/null\n\
         python3 -c 'import os\n\
for i in range(1100):\n    os.mkdir(\"d\"); os.chdir(\"d\")\n\
os.mkdir(\"z\"); open(\"z/f\", \"w\").write(\"x\" * 100000); os.chmod(\"z\", 0)'\n\
         echo '\"ok\"'\n",
    );
    let tmp = d.path().join("tmp");
    // What a SIGKILLed hevo (pid 2^22 + 1: above any pid_max, so never alive) left, owned
    // by the user hevo runs as.
    let left = tmp.join("hevo-trial-4194305-xyz");
    std::fs::create_dir_all(left.join("hide")).unwrap();
    std::fs::write(left.join("hide/f"), "x").unwrap();
    // A link in it to a folder of the user's, which the removal must neither change nor
    // empty.
    let victim = d.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep"), "x").unwrap();
    std::os::unix::fs::symlink(&victim, left.join("hide/link")).unwrap();
    give(&left);
    give(&victim);
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o500)).unwrap();
    std::fs::set_permissions(left.join("hide"), std::fs::Permissions::from_mode(0o000)).unwrap();
    for mode in modes() {
        let (report, _) = eval_as_user(d.path(), mode, &[]);
        let trial = &report["tasks"][0]["details"][0];
        assert_eq!(
            trial["status"], "harness_error",
            "{mode}: too deep: {trial}"
        );
        let now: Vec<_> = std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("hevo-trial-") && !n.ends_with("-xyz"))
            .collect();
        assert!(now.is_empty(), "{mode}: the trial's folder stayed: {now:?}");
    }
    assert!(!left.exists(), "the dead hevo's folder stayed");
    let mode = std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o500, "the link's target was changed");
    assert!(
        victim.join("keep").exists(),
        "the link's target was emptied"
    );
}
