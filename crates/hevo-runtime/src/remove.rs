//! Removing a folder an untrusted launch wrote: a trial's working directory, a kept copy.
//!
//! A launch runs as hevo's own user, so it can take its folders' permissions away from
//! itself (`chmod 000`), deep in a tree no walk reaches whole: a plain `remove_dir_all` run
//! by anyone but root then fails, and the folder (up to the launch's disk limit) stays on
//! disk for good. [`remove_tree`] tries that first, then gives every folder its owner's
//! `u+rwx` back and removes again. The second pass is coreutils' `chmod -R` and `rm -rf`,
//! which walk a tree of any depth with a bounded number of descriptors and never follow a
//! link.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Removes `path` and everything below it, whatever permissions its owner left on its
/// folders. A path that does not exist is removed already.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let first = match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => e,
        _ => return Ok(()),
    };
    let quietly = |program: &str, args: &[&str]| {
        let _ = Command::new(program)
            .args(args)
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    };
    quietly("chmod", &["-R", "u+rwx", "--"]);
    quietly("rm", &["-rf", "--"]);
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        _ => Err(first),
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
}
