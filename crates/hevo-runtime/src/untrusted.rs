//! Reading and copying what an untrusted process wrote (a proposer's candidate, a coding
//! agent's edit or plan), without following a link and without opening anything but
//! regular files and folders.
//!
//! A proposer runs as the same user as hevo. Were hevo to follow a symbolic link it left
//! (`ln -s ../../../hevo.db`, `ln -s /proc/<pid>/environ`), it would copy whatever the link
//! names into the archive, where the next proposer and every harness can read it; were it
//! to open a FIFO or `/dev/zero` it would hang or read forever. So every entry is looked
//! at without following links (`fstatat` with `AT_SYMLINK_NOFOLLOW`), every folder and file
//! is opened relative to its already-open parent with `O_NOFOLLOW | O_NONBLOCK`, and an
//! opened file is checked with `fstat` to be a regular file before a byte is read: a race
//! that swaps in a link or a FIFO between the look and the open is refused, not followed.
//! Sizes and entry counts are capped, and a refusal names the entry and why.

use std::ffi::{CStr, CString, OsStr};
use std::fmt;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{openat, readlinkat, AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};

/// The bounds of one copied tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Files and folders in the tree (its root not counted).
    pub max_entries: u64,
    /// Bytes of all its files together.
    pub max_bytes: u64,
}

/// What a link, FIFO, socket or device in the tree does to the copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsafe {
    /// The copy stops with [`Refused::Link`] or [`Refused::Special`].
    Refuse,
    /// The entry is left out (for keeping a rejected candidate for inspection).
    Skip,
}

/// Why an untrusted tree or file was not (fully) read.
#[derive(Debug)]
pub enum Refused {
    /// A symbolic link (never followed); its target as text.
    Link {
        /// The entry, relative to the tree's root (`.` for the root itself).
        path: String,
        /// What the link names.
        target: String,
    },
    /// A FIFO, socket or device.
    Special {
        /// The entry, relative to the tree's root.
        path: String,
        /// `a FIFO`, `a socket`, `a character device`, `a block device`.
        kind: &'static str,
    },
    /// More files and folders than the limit.
    TooManyEntries {
        /// The limit.
        limit: u64,
    },
    /// More bytes than the limit.
    TooLarge {
        /// The entry whose bytes passed the limit.
        path: String,
        /// The limit.
        limit: u64,
    },
    /// Reading or writing failed.
    Io {
        /// The entry (relative to the tree's root, or the file).
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Link { path, target } => write!(
                f,
                "`{path}` is a symbolic link (to `{target}`); links are never followed: write \
                 regular files and folders only"
            ),
            Refused::Special { path, kind } => write!(
                f,
                "`{path}` is {kind}, not a regular file or folder: write regular files and \
                 folders only"
            ),
            Refused::TooManyEntries { limit } => write!(
                f,
                "it holds more than {limit} files and folders (the limit of a candidate)"
            ),
            Refused::TooLarge { path, limit } => write!(
                f,
                "its files pass {} MiB at `{path}` (the limit of a candidate)",
                limit / (1024 * 1024)
            ),
            Refused::Io { path, source } => write!(f, "cannot read `{path}`: {source}"),
        }
    }
}

impl std::error::Error for Refused {}

impl From<Refused> for std::io::Error {
    fn from(r: Refused) -> std::io::Error {
        match r {
            Refused::Io { source, .. } => source,
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
        }
    }
}

/// What a copy took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Copied {
    /// Files and folders copied.
    pub entries: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Links and special files left out ([`Unsafe::Skip`] only).
    pub skipped: u64,
}

/// Flags of every open of an untrusted entry: no link followed, never block (a FIFO opens
/// at once, and is then refused by `fstat`), no controlling terminal.
fn open_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC
}

fn kind_of(st: &FileStat) -> Option<&'static str> {
    match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG | SFlag::S_IFDIR | SFlag::S_IFLNK => None,
        SFlag::S_IFIFO => Some("a FIFO"),
        SFlag::S_IFSOCK => Some("a socket"),
        SFlag::S_IFCHR => Some("a character device"),
        SFlag::S_IFBLK => Some("a block device"),
        _ => Some("a special file"),
    }
}

fn is(st: &FileStat, t: SFlag) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == t
}

fn io(path: &str, e: impl Into<std::io::Error>) -> Refused {
    Refused::Io {
        path: path.to_string(),
        source: e.into(),
    }
}

fn errno_io(path: &str, e: Errno) -> Refused {
    io(path, std::io::Error::from_raw_os_error(e as i32))
}

/// Opens `name` in the folder `dir` as a regular file (never a link, never blocking) and
/// checks it is one; `rel` names it in errors.
fn open_regular(dir: Option<RawFd>, name: &CStr, rel: &str) -> Result<(File, FileStat), Refused> {
    let fd = match openat(dir, name, open_flags(), Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ELOOP) => {
            let target = readlinkat(dir, name)
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default();
            return Err(Refused::Link {
                path: rel.to_string(),
                target,
            });
        }
        Err(e) => return Err(errno_io(rel, e)),
    };
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let st = fstat(file.as_raw_fd()).map_err(|e| errno_io(rel, e))?;
    if let Some(kind) = kind_of(&st) {
        return Err(Refused::Special {
            path: rel.to_string(),
            kind,
        });
    }
    if !is(&st, SFlag::S_IFREG) {
        return Err(io(
            rel,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "is a folder"),
        ));
    }
    Ok((file, st))
}

/// Reads the regular file at `path` (its last component is never followed; a FIFO, device,
/// socket or link is refused), at most `max_bytes`.
pub fn read_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, Refused> {
    let rel = path.to_string_lossy().into_owned();
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| io(&rel, e))?;
    let (file, st) = match open_regular(None, &c, &rel) {
        Ok(x) => x,
        Err(Refused::Link { target, .. }) => return Err(Refused::Link { path: rel, target }),
        Err(e) => return Err(e),
    };
    let mut out = Vec::with_capacity(st.st_size.clamp(0, 1 << 20) as usize);
    file.take(max_bytes + 1)
        .read_to_end(&mut out)
        .map_err(|e| io(&rel, e))?;
    if out.len() as u64 > max_bytes {
        return Err(Refused::TooLarge {
            path: rel,
            limit: max_bytes,
        });
    }
    Ok(out)
}

/// [`read_file`] as UTF-8 text (invalid bytes replaced).
pub fn read_text(path: &Path, max_bytes: u64) -> Result<String, Refused> {
    read_file(path, max_bytes).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Whether `path` is a folder itself, not a link to one (no link is followed).
pub fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_dir())
}

/// Copies the folder `from` into `to` (created; files in it are replaced): regular files
/// (with their permission bits, never set-id) and folders only, leaving out entries named in
/// `skip` (folders of any depth named so, and files named `.git`). A link or special file
/// is refused or skipped as `on_unsafe` says; `from` itself must be a folder, not a link.
/// Within `limits`, or the copy stops with [`Refused`] (what it copied so far stays).
pub fn copy_tree(
    from: &Path,
    to: &Path,
    skip: &[&str],
    limits: Limits,
    on_unsafe: Unsafe,
) -> Result<Copied, Refused> {
    let root = CString::new(from.as_os_str().as_bytes()).map_err(|e| io(".", e))?;
    let dir = open_dir(None, &root, ".")?;
    let mut walk = Walk {
        skip,
        limits,
        on_unsafe,
        done: Copied::default(),
    };
    walk.copy(dir, Path::new(""), to)?;
    Ok(walk.done)
}

fn open_dir(parent: Option<RawFd>, name: &CStr, rel: &str) -> Result<Dir, Refused> {
    let flags = open_flags() | OFlag::O_DIRECTORY;
    match Dir::openat(parent, name, flags, Mode::empty()) {
        Ok(d) => Ok(d),
        // A link (ELOOP, or ENOTDIR with O_DIRECTORY) or a special file: say which.
        Err(e @ (Errno::ELOOP | Errno::ENOTDIR)) => {
            match fstatat(parent, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) if is(&st, SFlag::S_IFLNK) => Err(Refused::Link {
                    path: rel.to_string(),
                    target: readlinkat(parent, name)
                        .map(|t| t.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                }),
                Ok(st) => match kind_of(&st) {
                    Some(kind) => Err(Refused::Special {
                        path: rel.to_string(),
                        kind,
                    }),
                    None => Err(errno_io(rel, e)),
                },
                Err(_) => Err(errno_io(rel, e)),
            }
        }
        Err(e) => Err(errno_io(rel, e)),
    }
}

struct Walk<'a> {
    skip: &'a [&'a str],
    limits: Limits,
    on_unsafe: Unsafe,
    done: Copied,
}

impl Walk<'_> {
    fn count(&mut self) -> Result<(), Refused> {
        self.done.entries += 1;
        if self.done.entries > self.limits.max_entries {
            return Err(Refused::TooManyEntries {
                limit: self.limits.max_entries,
            });
        }
        Ok(())
    }

    fn unsafe_entry(&mut self, r: Refused) -> Result<(), Refused> {
        match (&r, self.on_unsafe) {
            (Refused::Link { .. } | Refused::Special { .. }, Unsafe::Skip) => {
                self.done.skipped += 1;
                Ok(())
            }
            _ => Err(r),
        }
    }

    fn copy(&mut self, mut dir: Dir, rel: &Path, to: &Path) -> Result<(), Refused> {
        let show = |p: &Path| {
            if p.as_os_str().is_empty() {
                ".".to_string()
            } else {
                p.to_string_lossy().into_owned()
            }
        };
        std::fs::create_dir_all(to).map_err(|e| io(&show(rel), e))?;
        let mut names: Vec<CString> = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(|e| errno_io(&show(rel), e))?;
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            names.push(name.to_owned());
            // Bounded before the list grows without end.
            if names.len() as u64 > self.limits.max_entries {
                return Err(Refused::TooManyEntries {
                    limit: self.limits.max_entries,
                });
            }
        }
        names.sort();
        let fd = dir.as_raw_fd();
        for name in names {
            let os = OsStr::from_bytes(name.to_bytes());
            let child_rel = rel.join(os);
            let shown = show(&child_rel);
            let st = match fstatat(Some(fd), name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(errno_io(&shown, e)),
            };
            let skipped = self.skip.iter().any(|s| os == OsStr::new(s));
            if is(&st, SFlag::S_IFDIR) {
                if skipped {
                    continue;
                }
                self.count()?;
                match open_dir(Some(fd), &name, &shown) {
                    Ok(sub) => self.copy(sub, &child_rel, &to.join(os))?,
                    Err(r) => self.unsafe_entry(r)?,
                }
            } else if is(&st, SFlag::S_IFLNK) {
                let target = readlinkat(Some(fd), name.as_c_str())
                    .map(|t| t.to_string_lossy().into_owned())
                    .unwrap_or_default();
                self.unsafe_entry(Refused::Link {
                    path: shown,
                    target,
                })?;
            } else if let Some(kind) = kind_of(&st) {
                self.unsafe_entry(Refused::Special { path: shown, kind })?;
            } else {
                if skipped && os == OsStr::new(".git") {
                    continue;
                }
                self.count()?;
                match open_regular(Some(fd), &name, &shown) {
                    Ok((file, st)) => self.copy_file(file, &st, &shown, &to.join(os))?,
                    Err(r) => self.unsafe_entry(r)?,
                }
            }
        }
        Ok(())
    }

    fn copy_file(
        &mut self,
        file: File,
        st: &FileStat,
        rel: &str,
        to: &Path,
    ) -> Result<(), Refused> {
        let left = self.limits.max_bytes.saturating_sub(self.done.bytes);
        let mode = st.st_mode & 0o777;
        let _ = std::fs::remove_file(to);
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(to)
            .map_err(|e| io(rel, e))?;
        let n = std::io::copy(&mut file.take(left + 1), &mut out).map_err(|e| io(rel, e))?;
        self.done.bytes += n;
        if n > left {
            drop(out);
            let _ = std::fs::remove_file(to);
            return Err(Refused::TooLarge {
                path: rel.to_string(),
                limit: self.limits.max_bytes,
            });
        }
        out.flush().map_err(|e| io(rel, e))?;
        out.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| io(rel, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    const BIG: Limits = Limits {
        max_entries: 1000,
        max_bytes: 1 << 20,
    };

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir_all(src.join("lib/deep")).unwrap();
        std::fs::write(src.join("run.sh"), "echo hi\n").unwrap();
        std::fs::set_permissions(src.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::write(src.join("lib/deep/x.py"), "x = 1\n").unwrap();
        std::fs::create_dir_all(src.join(".git")).unwrap();
        std::fs::write(src.join(".git/config"), "[core]\n").unwrap();
        (tmp, src)
    }

    #[test]
    fn regular_files_and_folders_are_copied_with_their_modes() {
        let (tmp, src) = tree();
        let to = tmp.path().join("to");
        let done = copy_tree(&src, &to, &[".git"], BIG, Unsafe::Refuse).unwrap();
        assert_eq!(done.entries, 4);
        assert_eq!(
            std::fs::read_to_string(to.join("lib/deep/x.py")).unwrap(),
            "x = 1\n"
        );
        let mode = std::fs::metadata(to.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert!(!to.join(".git").exists());
    }

    #[test]
    fn links_fifos_and_devices_are_refused_or_skipped_never_followed() {
        let (tmp, src) = tree();
        let secret = tmp.path().join("secret");
        std::fs::write(&secret, "SECRET").unwrap();
        symlink(&secret, src.join("lib/leak")).unwrap();
        let err = copy_tree(&src, &tmp.path().join("a"), &[], BIG, Unsafe::Refuse).unwrap_err();
        assert!(
            matches!(&err, Refused::Link { path, .. } if path == "lib/leak"),
            "{err}"
        );
        std::fs::remove_file(src.join("lib/leak")).unwrap();

        nix::unistd::mkfifo(&src.join("pipe"), Mode::S_IRWXU).unwrap();
        let err = copy_tree(&src, &tmp.path().join("b"), &[], BIG, Unsafe::Refuse).unwrap_err();
        assert!(err.to_string().contains("`pipe` is a FIFO"), "{err}");
        symlink("/dev/zero", src.join("zero")).unwrap();
        let done = copy_tree(&src, &tmp.path().join("c"), &[], BIG, Unsafe::Skip).unwrap();
        assert_eq!(done.skipped, 2);
        assert!(!tmp.path().join("c/pipe").exists() && !tmp.path().join("c/zero").exists());

        // The root itself as a link, and a file that is a link or a FIFO.
        symlink(&src, tmp.path().join("root-link")).unwrap();
        let err = copy_tree(
            &tmp.path().join("root-link"),
            &tmp.path().join("d"),
            &[],
            BIG,
            Unsafe::Skip,
        )
        .unwrap_err();
        assert!(matches!(err, Refused::Link { .. }), "{err}");
        assert!(matches!(
            read_file(&src.join("zero"), 10),
            Err(Refused::Link { .. })
        ));
        assert!(matches!(
            read_file(&src.join("pipe"), 10),
            Err(Refused::Special { .. })
        ));
        assert_eq!(read_file(&secret, 10).unwrap(), b"SECRET");
        assert!(matches!(
            read_file(&secret, 3),
            Err(Refused::TooLarge { .. })
        ));
    }

    #[test]
    fn size_and_entry_limits_stop_the_copy() {
        let (tmp, src) = tree();
        std::fs::write(src.join("big"), vec![b'x'; 5000]).unwrap();
        let small = Limits {
            max_entries: 1000,
            max_bytes: 4096,
        };
        let err = copy_tree(&src, &tmp.path().join("a"), &[], small, Unsafe::Refuse).unwrap_err();
        assert!(matches!(err, Refused::TooLarge { .. }), "{err}");
        let few = Limits {
            max_entries: 2,
            max_bytes: 1 << 20,
        };
        let err = copy_tree(&src, &tmp.path().join("b"), &[], few, Unsafe::Refuse).unwrap_err();
        assert!(matches!(err, Refused::TooManyEntries { limit: 2 }), "{err}");
    }
}
