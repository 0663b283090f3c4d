//! Running `hevo` as an ordinary user from a test. Root reads and writes every folder
//! whatever its permissions, so a test run as root (the CI) runs `hevo` as `nobody`, from
//! a copy of the binary in a folder `nobody` can enter: the checkout may lie where it
//! cannot (under /root, say).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `nobody`'s user and group id.
pub const NOBODY: u32 = 65534;

/// Whether the test runs as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A folder everyone may enter, for a `hevo` that runs as `nobody`.
pub fn shared_tempdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// A copy of the `hevo` under test at `dir/bin/hevo` (also the sandbox's init); its path.
pub fn copy_hevo(dir: &Path) -> PathBuf {
    let bin = dir.join("bin/hevo");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_hevo"), &bin).unwrap();
    bin
}

/// Makes `cmd` run as `nobody`, with no supplementary groups (we must be root).
pub fn as_nobody(cmd: &mut Command) -> &mut Command {
    // SAFETY: three system calls, no allocation.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setgroups(&[])?;
            nix::unistd::setgid(nix::unistd::Gid::from_raw(NOBODY))?;
            nix::unistd::setuid(nix::unistd::Uid::from_raw(NOBODY))?;
            Ok(())
        })
    }
}
