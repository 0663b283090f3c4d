//! Helpers shared by this crate's test binaries (`mod support;` in each).
#![allow(dead_code)]

/// Host processes whose command line contains `marker` (e.g. the seconds of a `sleep`
/// an attacker harness left running).
pub fn survivors(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(marker) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// SIGKILL to each of `pids` (clean-up after a test that showed they escaped).
pub fn kill_all(pids: &[i32]) {
    for pid in pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A `sleep` argument unique to this test process (`<base + pid % 1000>.<pid>` seconds),
/// so [`survivors`] finds exactly the processes this test's harness started.
pub fn marker(base: u32) -> String {
    let pid = std::process::id();
    format!("{}.{pid}", base + pid % 1000)
}

/// A temporary directory the test writes its suite and harness files into (removed on
/// drop). Each test binary adds its own builders (`impl Fixture { fn suite(..) }`): this
/// module is part of each binary, so the type is local to it.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// `rel` under the fixture's directory.
    pub fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes `text` to `rel` (parents created) and returns its path.
    pub fn write(&self, rel: &str, text: &str) -> std::path::PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
}
