//! Removing a folder an untrusted launch wrote: a trial's working directory, a kept copy,
//! what a proposer left in `pending/`.
//!
//! Such a tree can be of any depth, and `std::fs::remove_dir_all` recurses: a stack frame
//! and a descriptor per level. A proposer's 22,500 nested folders ran it out of descriptors
//! (the run stopped at every iteration), and 20,000 overflowed a 2 MiB thread's stack,
//! which aborts hevo. A launch also runs as hevo's own user, so it can take its folders'
//! permissions away from itself (`chmod 000`): a plain removal by anyone but root then
//! fails, and the folder stays on disk for good.
//!
//! [`remove_tree`] runs `remove_dir_all` on a thread whose stack holds as many levels as
//! the process has descriptors (deeper, it fails with `EMFILE` before it can overflow), and
//! when that fails falls back to coreutils: `rm -rf`, which walks a tree of any depth with
//! a bounded number of descriptors and never follows a link, and, when something is left,
//! `chmod -R u+rwx` and `rm -rf` again. No process is started for an ordinary tree (a
//! trial's working directory is removed after every trial: bench/overhead.md).

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Stack bytes per folder level of `remove_dir_all` (measured: about 100 in a debug build).
const STACK_PER_LEVEL: u64 = 512;

/// Removes `path` and everything below it, whatever its depth and whatever permissions its
/// owner left on its folders. A path that does not exist is removed already.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let gone =
        || matches!(std::fs::symlink_metadata(path), Err(e) if e.kind() == io::ErrorKind::NotFound);
    let first = match bounded_remove(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => e,
    };
    // The tree is a trial's: whatever it holds runs next to these helpers, so they get
    // nothing of hevo's environment but PATH (a key under a name custody does not know
    // would be readable in their `/proc/<pid>/environ`).
    let quietly = |program: &str, args: &[&str]| {
        let _ = Command::new(program)
            .env_clear()
            .envs(std::env::var_os("PATH").map(|p| ("PATH", p)))
            .args(args)
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    };
    quietly("rm", &["-rf", "--"]);
    if gone() {
        return Ok(());
    }
    quietly("chmod", &["-R", "u+rwx", "--"]);
    quietly("rm", &["-rf", "--"]);
    if gone() {
        Ok(())
    } else {
        Err(first)
    }
}

/// `remove_dir_all(path)` on a thread with room on its stack for one level per descriptor
/// the process may open.
fn bounded_remove(path: &Path) -> io::Result<()> {
    let levels = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    let stack = levels
        .saturating_mul(STACK_PER_LEVEL)
        .clamp(8 << 20, 1 << 30);
    let owned = path.to_path_buf();
    std::thread::Builder::new()
        .name("remove-tree".into())
        .stack_size(usize::try_from(stack).unwrap_or(8 << 20))
        .spawn(move || std::fs::remove_dir_all(owned))?
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the removal thread panicked")))
}

/// A folder that is removed with [`remove_tree`] when this is dropped, on every path out
/// of the code that made it (a trial's working directory).
#[derive(Debug)]
pub struct RemovedOnDrop(PathBuf);

impl RemovedOnDrop {
    /// Takes `dir` over: from now on it goes when this is dropped.
    pub fn new(dir: tempfile::TempDir) -> RemovedOnDrop {
        RemovedOnDrop(dir.keep())
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = remove_tree(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_path_is_removed_already_and_a_plain_tree_goes() {
        let d = tempfile::tempdir().unwrap();
        assert!(remove_tree(&d.path().join("none")).is_ok());
        let t = d.path().join("t");
        std::fs::create_dir_all(t.join("a/b")).unwrap();
        std::fs::write(t.join("a/b/f"), "x").unwrap();
        remove_tree(&t).unwrap();
        assert!(!t.exists());
    }

    /// A tree deeper than hevo has descriptors: `remove_dir_all` holds one per level and
    /// failed with EMFILE (a proposer left 22,500 nested folders in `pending/`, and the run
    /// stopped at every iteration); the fallback removes it. Run in a child process of this
    /// test binary whose descriptor limit is 256, so that the tree needs only 1,000 levels
    /// (`rm -rf` takes time quadratic in the depth) and no other test's descriptors count.
    #[test]
    fn a_tree_deeper_than_the_descriptor_limit_goes() {
        const CHILD: &str = "HEVO_TEST_DEEP_TREE_CHILD";
        if let Some(dir) = std::env::var_os(CHILD) {
            let t = PathBuf::from(dir).join("deep");
            std::fs::create_dir(&t).unwrap();
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, 256, 256)
                .unwrap();
            deep_chain(&t, 1000);
            // the plain removal cannot: the fallback is what is tested
            assert!(std::fs::remove_dir_all(&t).is_err());
            remove_tree(&t).unwrap();
            assert!(!t.exists());
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "remove::tests::a_tree_deeper_than_the_descriptor_limit_goes",
            ])
            .env(CHILD, d.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
    }

    /// `depth` folders `d/d/d/...` under `root`, made through descriptors (a path that long
    /// is over `PATH_MAX`), one held at a time.
    fn deep_chain(root: &Path, depth: usize) {
        use nix::fcntl::{openat, OFlag};
        use nix::sys::stat::{mkdirat, Mode};
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let mut fd: OwnedFd = std::fs::File::open(root).unwrap().into();
        for _ in 0..depth {
            mkdirat(Some(fd.as_raw_fd()), "d", Mode::S_IRWXU).unwrap();
            let next = openat(
                Some(fd.as_raw_fd()),
                "d",
                OFlag::O_RDONLY | OFlag::O_DIRECTORY,
                Mode::empty(),
            )
            .unwrap();
            fd = unsafe { OwnedFd::from_raw_fd(next) };
        }
    }
}
