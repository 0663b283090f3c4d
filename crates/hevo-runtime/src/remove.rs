//! Removing a folder an untrusted launch wrote: a trial's working directory, a kept copy,
//! what a proposer left in `pending/`.
//!
//! Such a tree can be of any depth, and `std::fs::remove_dir_all` recurses: a stack frame
//! and a descriptor per level. A proposer's 22,500 nested folders ran it out of descriptors
//! (the run stopped at every iteration), and 20,000 overflowed a 2 MiB thread's stack,
//! which aborts hevo. A launch also runs as hevo's own user, so it can take its folders'
//! permissions away from itself (`chmod 000`): a plain removal by anyone but root then
//! fails, and the folder stays on disk for good. [`remove_tree`] therefore removes with
//! coreutils' `rm -rf`, which walks a tree of any depth with a bounded number of
//! descriptors and never follows a link, and, when something is left, gives every folder
//! its owner's `u+rwx` back (`chmod -R`) and removes again.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Removes `path` and everything below it, whatever its depth and whatever permissions its
/// owner left on its folders. A path that does not exist is removed already.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let gone =
        || matches!(std::fs::symlink_metadata(path), Err(e) if e.kind() == io::ErrorKind::NotFound);
    if gone() {
        return Ok(());
    }
    let quietly = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
    };
    let spawned = quietly("rm", &["-rf", "--"]);
    if gone() {
        return Ok(());
    }
    if spawned.is_err() {
        // No `rm` on this machine: the standard library's removal, for shallow trees.
        std::fs::remove_dir_all(path)?;
        return Ok(());
    }
    let _ = quietly("chmod", &["-R", "u+rwx", "--"]);
    let _ = quietly("rm", &["-rf", "--"]);
    if gone() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "`rm -rf` left `{}` behind",
            path.display()
        )))
    }
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
    /// stopped at every iteration); the second pass removes it.
    #[test]
    fn a_tree_deeper_than_the_descriptor_limit_goes() {
        use nix::fcntl::{openat, OFlag};
        use nix::sys::stat::{mkdirat, Mode};
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("deep");
        std::fs::create_dir(&t).unwrap();
        let (soft, _) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
        let depth = usize::try_from(soft).unwrap_or(usize::MAX).min(60_000) + 500;
        let mut fd: std::os::fd::OwnedFd = std::fs::File::open(&t).unwrap().into();
        for _ in 0..depth {
            use std::os::fd::{AsRawFd, FromRawFd};
            mkdirat(Some(fd.as_raw_fd()), "d", Mode::S_IRWXU).unwrap();
            let next = openat(
                Some(fd.as_raw_fd()),
                "d",
                OFlag::O_RDONLY | OFlag::O_DIRECTORY,
                Mode::empty(),
            )
            .unwrap();
            fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(next) };
        }
        drop(fd);
        remove_tree(&t).unwrap();
        assert!(!t.exists());
    }
}
