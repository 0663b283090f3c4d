//! File descriptors: the ones hevo inherits from whoever started it, and how many it may
//! hold.
//!
//! Inherited descriptors (a shell's `exec 7<file`, a pipe of the tool that runs hevo)
//! without `FD_CLOEXEC` would pass into every trial, sandbox and proposer hevo starts, which
//! could read the suite or anything else they lead to. hevo's own descriptors are
//! close-on-exec already (Rust opens every file that way).

use nix::fcntl::{fcntl, FcntlArg, FdFlag};

/// Marks every descriptor above stderr close-on-exec, so no process hevo starts inherits it.
/// Call it first thing in `main` (after [`crate::custody::protect_keys`], whose pipe must
/// survive its re-exec). Returns how many descriptors it marked.
pub fn close_inherited_on_exec() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    let mut marked = 0;
    for fd in fds {
        // A descriptor that closed since the listing (the listing's own) makes fcntl fail,
        // which is ignored; fcntl on a raw number touches no memory.
        let Ok(flags) = fcntl(fd, FcntlArg::F_GETFD) else {
            continue;
        };
        let flags = FdFlag::from_bits_truncate(flags);
        if !flags.contains(FdFlag::FD_CLOEXEC)
            && fcntl(fd, FcntlArg::F_SETFD(flags | FdFlag::FD_CLOEXEC)).is_ok()
        {
            marked += 1;
        }
    }
    marked
}

/// Raises this process's soft limit on open descriptors to its hard limit. A run holds a
/// few per trial (pipes, the gateway's connections, the store), and the common soft
/// default of 1024 is reached by a handful of trials that each hold many gateway
/// connections open: the gateway then failed every accept ("Too many open files") and
/// honest trials' model calls failed with it. Returns the new soft limit, if it changed.
pub fn raise_open_file_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft >= hard {
        return None;
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).ok()?;
    Some(hard)
}
