//! The disk limit of one launch ([`TrialLimits::disk_mb`]): how much a trial, `prepare`,
//! scorer or agent may store in the folders it can write.
//!
//! Two bounds, neither needing root, a cgroup or a filesystem with quotas:
//! - every process of the launch runs with `RLIMIT_FSIZE` at the limit (soft and hard), so
//!   no one file grows past it: the writer gets `SIGXFSZ`, or `EFBIG` if it ignores that
//!   signal, and a `truncate` or `fallocate` past it fails;
//! - hevo measures what the launch's writable folders hold ([`usage`]: allocated blocks,
//!   links not followed, each inode once, not crossing into another filesystem) every
//!   [`MIN_INTERVAL`] or so, and kills the launch's process group (and its cgroup) once
//!   they hold more than the limit.
//!
//! What is not bounded, stated in docs/security.md: between two measurements a launch can
//! write past the limit by what its disk takes in that time (`io_mbps` bounds that), and a
//! file deleted while still open is not in any folder (each such file is still bounded by
//! the first rule, and dies with the launch).
//!
//! [`TrialLimits::disk_mb`]: crate::cgroup::TrialLimits::disk_mb

use std::collections::HashSet;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{fstatat, FileStat, Mode, SFlag};

use crate::cgroup::mb_bytes;

/// The shortest time between two measurements of a launch's folders.
pub const MIN_INTERVAL: Duration = Duration::from_millis(250);

/// How deep a walk goes; a tree nested deeper counts as over any limit (no tool needs a
/// thousand nested folders, and a walk must not run out of descriptors or stack).
pub const MAX_DEPTH: usize = 1000;

/// What the folders of a launch hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes allocated on disk to their files and folders (`st_blocks`), each inode once.
    pub bytes: u64,
    /// The apparent size of the largest regular file.
    pub largest_file: u64,
    /// Whether some folder lies deeper than [`MAX_DEPTH`] (not measured below it).
    pub too_deep: bool,
    /// Whether some folder could not be read, even after hevo gave its owner access back
    /// (see [`usage`]): what it holds is not counted.
    pub unreadable: bool,
}

impl Usage {
    /// Whether this is over a limit of `limit` bytes: more bytes, or a tree hevo could not
    /// measure whole (too deep, or a folder it cannot read).
    pub fn over(&self, limit: u64) -> bool {
        self.bytes > limit || self.too_deep || self.unreadable
    }
}

/// What a launch's disk limit saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskReport {
    /// The limit, in MB.
    pub limit_mb: u64,
    /// The launch was killed because its folders held this many bytes, over the limit.
    pub killed_at: Option<u64>,
    /// Its folders were nested deeper than [`MAX_DEPTH`] when it was killed.
    pub too_deep: bool,
    /// A folder of it could not be read when it was killed (or when it ended).
    pub unreadable: bool,
    /// A file had reached the limit (`RLIMIT_FSIZE`) when the launch ended.
    pub file_at_limit: bool,
    /// Its folders held this many bytes when it ended, over the limit (written faster than
    /// the watch measures): it ended over its limit all the same.
    pub held_at_end: Option<u64>,
}

impl DiskReport {
    /// The report of a launch limited to `limit_mb`: killed by the watch at `killed` (if it
    /// was), and holding `at_end` once its processes were gone.
    pub fn new(limit_mb: u64, killed: Option<Usage>, at_end: Usage) -> DiskReport {
        let limit = mb_bytes(limit_mb);
        DiskReport {
            limit_mb,
            killed_at: killed.map(|u| u.bytes),
            too_deep: killed.map_or(at_end.too_deep, |u| u.too_deep),
            unreadable: killed.map_or(at_end.unreadable, |u| u.unreadable),
            // A file at the limit is what `RLIMIT_FSIZE` stopped, whichever process wrote
            // it and however it handled the signal.
            file_at_limit: at_end.largest_file >= limit,
            held_at_end: (killed.is_none() && at_end.over(limit)).then_some(at_end.bytes),
        }
    }

    /// Whether the launch went over its limit (killed for it, or over it at its end): its
    /// result does not count, whatever it printed.
    pub fn over(&self) -> bool {
        self.killed_at.is_some() || self.too_deep || self.unreadable || self.held_at_end.is_some()
    }

    /// What the limit did, for a trial's cause (`None` when it did nothing), e.g.
    /// `its folders held 130.0 MB, over the trial's disk limit of 64 MB ([executor] disk_mb,
    /// --disk-mb); the trial was killed`.
    pub fn cause(&self) -> Option<String> {
        let limit = format!(
            "the trial's disk limit of {} MB ([executor] disk_mb, --disk-mb)",
            self.limit_mb
        );
        let mut parts = Vec::new();
        let killed = if self.killed_at.is_some() {
            "; the trial was killed"
        } else {
            ""
        };
        if self.too_deep {
            parts.push(format!(
                "its folders were nested more than {MAX_DEPTH} deep, which counts as over \
                 {limit}{killed}"
            ));
        } else if self.unreadable {
            parts.push(format!(
                "a folder of it could not be read, even with its owner's access given back, \
                 which counts as over {limit}{killed}"
            ));
        } else if let Some(bytes) = self.killed_at {
            parts.push(format!(
                "its folders held {:.1} MB, over {limit}; the trial was killed",
                bytes as f64 / mb_bytes(1) as f64
            ));
        } else if let Some(bytes) = self.held_at_end {
            parts.push(format!(
                "its folders held {:.1} MB when it ended, over {limit}",
                bytes as f64 / mb_bytes(1) as f64
            ));
        }
        if self.file_at_limit {
            parts.push(format!(
                "a file reached {limit}: writing past it fails (SIGXFSZ, or EFBIG where the \
                 signal is ignored)"
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// What `dirs` hold together: every file and folder below each (the roots themselves not
/// counted), found without following a link or leaving the root's filesystem. Entries that
/// vanish while the walk runs are skipped.
///
/// A launch runs as hevo's own user, so it can take its folders' permissions away from
/// itself (`chmod 000`, or `300`: write, no read) to hide what they hold from any reader but
/// root. Unless hevo runs as root, a folder its owner cannot list and search is given back
/// `u+rwx` before it is read (which also lets hevo remove it later); a folder that still
/// cannot be read is [`Usage::unreadable`], over any limit.
pub fn usage(dirs: &[PathBuf]) -> Usage {
    let mut walk = Walker {
        usage: Usage::default(),
        seen: HashSet::new(),
        // SAFETY: geteuid cannot fail and touches no memory.
        restore: unsafe { nix::libc::geteuid() } != 0,
    };
    for dir in dirs {
        let Ok(path) = CString::new(dir.as_os_str().as_encoded_bytes()) else {
            continue;
        };
        // A root's mode is not known yet: `give_owner_access` looks.
        let Some(root) = walk.open(None, &path, true) else {
            continue;
        };
        let Ok(st) = nix::sys::stat::fstat(root.as_raw_fd()) else {
            continue;
        };
        walk.tree(root, st.st_dev);
    }
    walk.usage
}

/// How a walk opens a folder: never through a link, never blocking, never inherited.
fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC
}

/// A subfolder still to visit, as its parent's listing saw it.
struct Folder {
    name: CString,
    /// Its owner lacks read, write or search permission on it.
    locked: bool,
}

struct Walker {
    usage: Usage,
    /// Inodes with more than one link already counted.
    seen: HashSet<(u64, u64)>,
    /// Whether to give a folder's owner back the access hevo needs (not as root).
    restore: bool,
}

impl Walker {
    /// Counts everything below `root` on device `dev`, depth first without recursion (a
    /// stack of the open folders, each with the subfolders it has left to visit), so a deep
    /// tree costs descriptors up to [`MAX_DEPTH`], never the thread's stack.
    fn tree(&mut self, mut root: Dir, dev: u64) {
        let folders = self.entries(&mut root, dev);
        let mut open: Vec<(Dir, Vec<Folder>)> = vec![(root, folders)];
        loop {
            let depth = open.len();
            let Some((dir, left)) = open.last_mut() else {
                break;
            };
            let Some(Folder { name, locked }) = left.pop() else {
                open.pop();
                continue;
            };
            // `name` lies at depth `depth` (the root's folders at 1).
            if depth > MAX_DEPTH {
                self.usage.too_deep = true;
                continue;
            }
            let fd: RawFd = dir.as_raw_fd();
            if let Some(mut child) = self.open(Some(fd), &name, locked) {
                let folders = self.entries(&mut child, dev);
                open.push((child, folders));
            }
        }
    }

    /// Counts the entries of `dir` on device `dev`; returns its subfolders' names.
    fn entries(&mut self, dir: &mut Dir, dev: u64) -> Vec<Folder> {
        let fd: RawFd = dir.as_raw_fd();
        let mut folders: Vec<Folder> = Vec::new();
        for entry in dir.iter().flatten() {
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            let st = match fstatat(Some(fd), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::ENOENT) => continue,
                Err(e) if hevo_short(e) => continue,
                Err(_) => {
                    self.usage.unreadable = true;
                    continue;
                }
            };
            if st.st_dev != dev {
                continue;
            }
            self.count(&st);
            if is(&st, SFlag::S_IFDIR) {
                folders.push(Folder {
                    name: name.to_owned(),
                    locked: st.st_mode & 0o700 != 0o700,
                });
            }
        }
        folders
    }

    /// Opens the folder `name` (relative to `at`, or a path), first giving its owner back
    /// `u+rwx` when it is `locked` (its owner lacks one of them) and [`Walker::restore`] is
    /// on. `None` when it vanished, or could not be opened ([`Usage::unreadable`]) or is not
    /// a folder (a link, say).
    fn open(&mut self, at: Option<RawFd>, name: &CString, locked: bool) -> Option<Dir> {
        if self.restore && locked {
            give_owner_access(at, name);
        }
        match Dir::openat(at, name.as_c_str(), dir_flags(), Mode::empty()) {
            Ok(dir) => Some(dir),
            Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => None,
            Err(e) if hevo_short(e) => None,
            Err(_) => {
                self.usage.unreadable = true;
                None
            }
        }
    }

    fn count(&mut self, st: &FileStat) {
        if st.st_nlink > 1 && !is(st, SFlag::S_IFDIR) && !self.seen.insert((st.st_dev, st.st_ino)) {
            return;
        }
        self.usage.bytes = self
            .usage
            .bytes
            .saturating_add((st.st_blocks as u64).saturating_mul(512));
        if is(st, SFlag::S_IFREG) {
            self.usage.largest_file = self.usage.largest_file.max(st.st_size as u64);
        }
    }
}

/// Adds `u+rwx` to the folder `name` (relative to `at`) when its owner lacks any of them.
/// Race-free against a swap for a link: the folder is opened with `O_PATH | O_NOFOLLOW`
/// (which needs no permission on it), checked to be a folder, and changed through that
/// descriptor. Does nothing when it is not a folder or the change is refused.
fn give_owner_access(at: Option<RawFd>, name: &CString) {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let Ok(fd) = nix::fcntl::openat(at, name.as_c_str(), flags, Mode::empty()) else {
        return;
    };
    // SAFETY: `fd` was just opened here and nothing else owns it.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let Ok(st) = nix::sys::stat::fstat(fd.as_raw_fd()) else {
        return;
    };
    let mode = st.st_mode & 0o7777;
    if is(&st, SFlag::S_IFDIR) && mode & 0o700 != 0o700 {
        // fchmod refuses an O_PATH descriptor; its /proc link names the same folder.
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let _ = nix::sys::stat::fchmodat(
            None,
            path.as_str(),
            Mode::from_bits_truncate(mode | 0o700),
            nix::sys::stat::FchmodatFlags::FollowSymlink,
        );
    }
}

fn is(st: &FileStat, t: SFlag) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == t
}

/// Whether `e` says hevo itself ran short (of file descriptors, of memory), not that the
/// folder is unreadable: a folder hevo could not open then is skipped for this
/// measurement, not counted as over the limit. Before, a harness that used up hevo's
/// descriptors (thousands of gateway connections) got its sibling trials killed as "over
/// the trial's disk limit".
fn hevo_short(e: Errno) -> bool {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let short = matches!(e, Errno::EMFILE | Errno::ENFILE | Errno::ENOMEM);
    // Once per process: a walk short of descriptors meets this at every folder.
    if short && !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!(error = %e, "the disk measurement skipped folders: hevo ran short");
    }
    short
}

/// Measures `dirs` every [`MIN_INTERVAL`] (or twenty times as long as the last measurement
/// took, so a huge tree costs at most a twentieth of a core) until they hold more than
/// `limit` bytes or lie deeper than [`MAX_DEPTH`]; returns that measurement. Never returns
/// while they stay within it.
pub async fn over_limit(dirs: Vec<PathBuf>, limit: u64) -> Usage {
    let dirs = std::sync::Arc::new(dirs);
    loop {
        let started = Instant::now();
        let measured = {
            let dirs = dirs.clone();
            tokio::task::spawn_blocking(move || usage(&dirs)).await
        };
        if let Ok(u) = measured {
            if u.over(limit) {
                return u;
            }
        }
        tokio::time::sleep(MIN_INTERVAL.max(started.elapsed() * 20)).await;
    }
}

/// The folders a launch can write, as hevo sees them: its working directory unless that is
/// read-only, and its other writable paths.
pub fn writable_dirs(cwd: &Path, access: &crate::launch::Access) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if !access.cwd_read_only {
        dirs.push(cwd.to_path_buf());
    }
    dirs.extend(access.writable.iter().cloned());
    dirs
}

/// Sets `RLIMIT_FSIZE` (soft and hard) to `bytes` in the calling process: for a `pre_exec`
/// hook, between fork and exec (one system call, no allocation).
pub fn limit_file_size(bytes: u64) -> std::io::Result<()> {
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE, bytes, bytes)
        .map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(path: &Path, bytes: usize) {
        let mut f = std::fs::File::create(path).unwrap();
        f.write_all(&vec![7u8; bytes]).unwrap();
        f.sync_all().unwrap();
    }

    #[test]
    fn usage_counts_files_below_the_roots_once_and_follows_no_link() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("work");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        write(&root.join("a/b/big"), 3 << 20);
        write(&root.join("small"), 10);
        // A hard link is the same blocks: counted once.
        std::fs::hard_link(root.join("a/b/big"), root.join("again")).unwrap();
        // A link to a big file outside is not followed.
        let outside = t.path().join("outside");
        write(&outside, 5 << 20);
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let u = usage(std::slice::from_ref(&root));
        assert!(u.bytes >= 3 << 20, "{u:?}");
        assert!(
            u.bytes < 4 << 20,
            "{u:?}: the hard link or the outside file was counted"
        );
        assert_eq!(u.largest_file, 3 << 20);
        assert!(!u.too_deep);
        // Two roots add up; a missing root adds nothing.
        let u2 = usage(&[
            root,
            outside.parent().unwrap().join("missing"),
            t.path().into(),
        ]);
        assert!(u2.bytes >= u.bytes + (5 << 20), "{u2:?}");
    }

    #[test]
    fn a_sparse_file_counts_its_blocks_and_its_size() {
        let t = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(t.path().join("sparse")).unwrap();
        f.set_len(1 << 30).unwrap();
        let u = usage(&[t.path().into()]);
        assert!(u.bytes < 1 << 20, "{u:?}");
        assert_eq!(u.largest_file, 1 << 30);
    }

    #[test]
    fn a_tree_deeper_than_the_walk_goes_is_reported() {
        let t = tempfile::tempdir().unwrap();
        // Built with relative paths: the full path passes PATH_MAX long before the depth.
        let mut fd = nix::fcntl::open(
            t.path(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        for _ in 0..MAX_DEPTH + 2 {
            nix::sys::stat::mkdirat(Some(fd), "d", Mode::S_IRWXU).unwrap();
            let next = nix::fcntl::openat(
                Some(fd),
                "d",
                OFlag::O_RDONLY | OFlag::O_DIRECTORY,
                Mode::empty(),
            )
            .unwrap();
            nix::unistd::close(fd).unwrap();
            fd = next;
        }
        nix::unistd::close(fd).unwrap();
        assert!(usage(&[t.path().into()]).too_deep);
        // A tree exactly at the depth limit is measured whole, one folder more is too deep.
        let at_limit = tempfile::tempdir().unwrap();
        let chain = "d/".repeat(MAX_DEPTH);
        std::fs::create_dir_all(at_limit.path().join(&chain)).unwrap();
        std::fs::write(at_limit.path().join(&chain).join("f"), vec![1u8; 8192]).unwrap();
        let u = usage(&[at_limit.path().into()]);
        assert!(!u.too_deep, "{MAX_DEPTH} folders deep is not too deep");
        assert_eq!(u.largest_file, 8192, "the file at the bottom is counted");
        std::fs::create_dir(at_limit.path().join(&chain).join("d")).unwrap();
        assert!(usage(&[at_limit.path().into()]).too_deep);
        // (std removes the deep tree with `unlinkat`, relative to each open folder.)
    }

    #[test]
    fn a_launch_over_its_limit_at_its_end_is_over_even_if_the_watch_never_saw_it() {
        let at_end = Usage {
            bytes: 100 << 20,
            largest_file: 64 << 20,
            too_deep: false,
            unreadable: false,
        };
        // Written faster than the watch measures: only the end shows it.
        let late = DiskReport::new(64, None, at_end);
        assert_eq!((late.killed_at, late.held_at_end), (None, Some(100 << 20)));
        assert!(late.over() && late.file_at_limit);
        // Killed by the watch: the kill is the report, not what was left at the end.
        let seen = Usage {
            bytes: 70 << 20,
            ..Usage::default()
        };
        let killed = DiskReport::new(64, Some(seen), at_end);
        assert_eq!(
            (killed.killed_at, killed.held_at_end),
            (Some(70 << 20), None)
        );
        // Within the limit, no file at it: nothing to say.
        let fine = DiskReport::new(64, None, Usage::default());
        assert!(!fine.over() && fine.cause().is_none());
        let deep = Usage {
            too_deep: true,
            ..Usage::default()
        };
        assert!(DiskReport::new(64, None, deep).over());
    }

    #[test]
    fn the_cause_names_the_limit_and_what_was_seen() {
        let r = DiskReport {
            limit_mb: 64,
            killed_at: Some(130 << 20),
            too_deep: false,
            unreadable: false,
            file_at_limit: true,
            held_at_end: None,
        };
        let cause = r.cause().unwrap();
        assert!(cause.contains("held 130.0 MB"), "{cause}");
        assert!(
            cause.contains("64 MB ([executor] disk_mb, --disk-mb)"),
            "{cause}"
        );
        assert!(cause.contains("a file reached"), "{cause}");
        let quiet = DiskReport {
            limit_mb: 64,
            killed_at: None,
            too_deep: false,
            unreadable: false,
            file_at_limit: false,
            held_at_end: None,
        };
        assert_eq!(quiet.cause(), None);
        assert!(!quiet.over());
        let late = DiskReport {
            held_at_end: Some(100 << 20),
            ..quiet
        };
        assert!(late.over());
        assert!(late
            .cause()
            .unwrap()
            .contains("held 100.0 MB when it ended"));
    }
}
