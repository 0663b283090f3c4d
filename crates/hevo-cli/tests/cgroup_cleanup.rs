//! A hevo killed with SIGKILL cannot remove its cgroups (`hevo-<pid>/l<n>` in each
//! hierarchy), and a process it launched may still be in one. The next hevo to start kills
//! what is left in the groups of hevo processes that no longer exist and removes them.
//! Skips where this process can make no cgroup (not root), unless `HEVO_TEST_CGROUP=1`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{eval_command, one_task};

/// The directory of this process's group in the v1 `pids` hierarchy, if it is mounted.
fn own_pids_group() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (root, mount) = mountinfo.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let post: Vec<&str> = post.split(' ').collect();
        let pre: Vec<&str> = pre.split(' ').collect();
        (post.first() == Some(&"cgroup") && post.get(2)?.split(',').any(|o| o == "pids"))
            .then(|| (pre[3].to_string(), PathBuf::from(pre[4])))
    })?;
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = membership.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        ctrls
            .split(',')
            .any(|c| c == "pids")
            .then(|| path.to_string())
    })?;
    let rel = path.strip_prefix(root.as_str()).unwrap_or(&path);
    Some(mount.join(rel.trim_start_matches('/')))
}

#[test]
fn a_killed_hevos_leftover_cgroup_is_emptied_and_removed_by_the_next_hevo() {
    let strict = std::env::var("HEVO_TEST_CGROUP").as_deref() == Ok("1");
    let Some(base) = own_pids_group() else {
        assert!(
            !strict,
            "HEVO_TEST_CGROUP=1 but no v1 pids hierarchy is mounted"
        );
        eprintln!("SKIPPED: no v1 pids hierarchy here");
        return;
    };
    // A pid no process has (above the kernel's default pid_max of 4,194,304 is not
    // allowed; this one is far above any pid this short-lived machine hands out).
    let dead = 4_000_001 + std::process::id() % 1000;
    assert!(!Path::new(&format!("/proc/{dead}")).exists());
    let stale = base.join(format!("hevo-{dead}"));
    let group = stale.join("l0");
    if let Err(e) = std::fs::create_dir_all(&group) {
        assert!(!strict, "HEVO_TEST_CGROUP=1 but {}: {e}", group.display());
        eprintln!("SKIPPED: cannot make {}: {e}", group.display());
        return;
    }
    // A process left behind in it, as a SIGKILLed hevo leaves a trial's daemon.
    let mut orphan = Command::new("sleep").arg("300").spawn().unwrap();
    std::fs::write(group.join("cgroup.procs"), orphan.id().to_string()).unwrap();

    // Any command that runs trials probes the cgroups at its start.
    let d = tempfile::tempdir().unwrap();
    one_task(d.path(), ("sh", "h.sh", "echo '\"x\"'\n"), "x");
    let out = eval_command(d.path()).arg("--no-model").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // hevo has exited: the orphan must be dead already (reaped here within a moment).
    let mut status = None;
    for _ in 0..200 {
        status = orphan.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let Some(status) = status else {
        let _ = orphan.kill();
        panic!("the orphan in {} survived the next hevo", group.display());
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(9),
        "the orphan was not killed: {status:?}"
    );
    assert!(!stale.exists(), "{} is still there", stale.display());
}
