//! [`SandboxLauncher`]: every trial-side process inside bubblewrap (`bwrap`).
//!
//! Each launch gets its own user, mount, PID, network, IPC and UTS namespaces:
//!
//! ```text
//! hevo ── bwrap (own process group) ── bwrap as PID 1 ── hevo init (relay) ── harness ...
//!   │                                                         │
//!   └─ per-launch Unix socket <─────── bound at /run/hevo ────┘ 127.0.0.1:<gateway port>
//!      └─ relay to the gateway on the host's 127.0.0.1
//! ```
//!
//! - File system: `/usr`, `/etc`, `/opt` and the `/bin`, `/lib*`, `/sbin` links read-only;
//!   a fresh `/proc` (only the sandbox's processes), a minimal `/dev`, no writable `/tmp`
//!   (`TMPDIR` is the working directory);
//!   the working directory writable (unless [`crate::launch::Access::cwd_read_only`]); the launch's
//!   [`crate::launch::Access`] paths and the entry program's installation prefix read-only; the root
//!   read-only. The suite, the run directory, `HEVO_HOME` and the home directory are not
//!   mounted, so they do not exist inside.
//! - Processes: PID 1 of the namespace is bwrap; when the harness's init exits (or hevo
//!   kills the outer bwrap, or hevo dies: `--die-with-parent`) the kernel kills every
//!   process left in the namespace, `setsid` or not.
//! - Network: only the sandbox's loopback. Every `*_BASE_URL` variable naming a port on
//!   `127.0.0.1`/`localhost` (the gateway) gets a relay: the init listens on that port
//!   inside and forwards each connection through a per-launch Unix socket to hevo, which
//!   serves the gateway there with the trial's key bound to that socket (or forwards to
//!   the host's port; see `sandbox_relay.rs`). Nothing else is reachable.
//! - Limits: [`SandboxOptions::limits`] go to a cgroup per launch ([`crate::cgroup`]:
//!   memory, processes, CPU and IO of the whole sandbox, killed as a whole at its end);
//!   [`SandboxOptions::memory_mb`] (address space per process, `RLIMIT_AS`) and
//!   [`SandboxOptions::max_files`] are applied by the init.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::cgroup::{Cgroups, TrialLimits};
use crate::launch::{run_local, LaunchFuture, LaunchSpec, Launcher, LocalLauncher};

/// The argument that turns a hevo binary into the sandbox's init (see [`crate::sandbox_init`]).
pub const INIT_ARG: &str = "__hevo-sandbox-init";

/// Where the per-launch gateway sockets appear inside the sandbox.
const SOCKET_DIR_INSIDE: &str = "/run/hevo";

/// Limits and extra paths of every sandboxed process.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SandboxOptions {
    /// The limits of each launch's cgroup (the whole sandbox); `None`: no cgroup.
    pub limits: Option<TrialLimits>,
    /// Extra read-only paths visible in every sandbox (e.g. a Python installation outside
    /// `/usr`). From `HEVO_SANDBOX_READ_ONLY` (`:`-separated) in [`SandboxOptions::from_env`].
    pub read_only: Vec<PathBuf>,
    /// Address-space limit per process in MiB (`HEVO_SANDBOX_MEMORY_MB`).
    pub memory_mb: Option<u64>,
    /// Limit on open files per process (`HEVO_SANDBOX_MAX_FILES`).
    pub max_files: Option<u64>,
}

impl SandboxOptions {
    /// Options from `HEVO_SANDBOX_READ_ONLY`, `HEVO_SANDBOX_MEMORY_MB` and
    /// `HEVO_SANDBOX_MAX_FILES`; a malformed number is an error naming the variable.
    pub fn from_env() -> Result<SandboxOptions, String> {
        let num = |name: &str| -> Result<Option<u64>, String> {
            match std::env::var(name) {
                Ok(v) if !v.trim().is_empty() => v.trim().parse().map(Some).map_err(|_| {
                    format!("`{name}={v}` is not a whole number; unset it or give e.g. 2048")
                }),
                _ => Ok(None),
            }
        };
        let read_only = std::env::var("HEVO_SANDBOX_READ_ONLY")
            .map(|v| {
                v.split(':')
                    .filter(|p| !p.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default();
        Ok(SandboxOptions {
            limits: None,
            read_only,
            memory_mb: num("HEVO_SANDBOX_MEMORY_MB")?,
            max_files: num("HEVO_SANDBOX_MAX_FILES")?,
        })
    }
}

/// Runs every process in a bubblewrap sandbox (see the module documentation).
#[derive(Clone, Debug)]
pub struct SandboxLauncher {
    bwrap: PathBuf,
    init: PathBuf,
    options: SandboxOptions,
}

impl SandboxLauncher {
    /// A launcher using `bwrap` and the init binary `init` (a hevo binary that handles
    /// [`INIT_ARG`]: `hevo` itself, or `hevo-sandbox-init`). Checks that a sandbox can be
    /// made here by making one; the error says why not.
    pub fn new(
        bwrap: PathBuf,
        init: PathBuf,
        options: SandboxOptions,
    ) -> Result<SandboxLauncher, String> {
        let launcher = SandboxLauncher {
            bwrap,
            init,
            options,
        };
        launcher.probe()?;
        Ok(launcher)
    }

    fn probe(&self) -> Result<(), String> {
        let cwd = std::env::temp_dir();
        let argv = self.bwrap_argv(
            &["true".to_string()],
            &cwd,
            &crate::launch::Access::default(),
            &[],
            None,
        );
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot run `{}`: {e}", self.bwrap.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(format!(
                "`{}` cannot make a sandbox here ({}): {}",
                self.bwrap.display(),
                out.status,
                err.trim()
            ))
        }
    }

    /// The full command line: bwrap's options, then the init with its relays, then `argv`.
    fn bwrap_argv(
        &self,
        argv: &[String],
        cwd: &Path,
        access: &crate::launch::Access,
        relays: &[u16],
        socket_dir: Option<&Path>,
    ) -> Vec<String> {
        let mut a: Vec<String> = [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            // No controlling terminal inside (bwrap's fix for CVE-2017-5226), even if a
            // launch ever starts in hevo's session: `/dev/tty` is bound by `--dev`.
            "--new-session",
            "--hostname",
            "hevo-sandbox",
            // Started as root, the process inside keeps every capability of the new user
            // namespace, enough to remount the read-only binds writable (the host's /usr,
            // the harness) or unmount the tmpfs that hides the suite: none are kept but
            // binding a low port in its own network namespace (a relay for a base URL on
            // port 80). A nested user namespace gets capabilities back, but over mounts
            // the kernel then locks, so it cannot undo them either (tested below; bwrap's
            // `--disable-userns` would put the process in a namespace apart from its
            // network's, and relays could no longer bind low ports).
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CAP_NET_BIND_SERVICE",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let bind = |a: &mut Vec<String>, flag: &str, p: &Path| {
            a.extend([flag.to_string(), s(p), s(p)]);
        };
        for sys in ["/usr", "/etc", "/opt"] {
            if Path::new(sys).is_dir() {
                bind(&mut a, "--ro-bind", Path::new(sys));
            }
        }
        for link in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
            let p = Path::new(link);
            match std::fs::read_link(p) {
                Ok(target) => a.extend(["--symlink".into(), s(&target), link.into()]),
                Err(_) if p.is_dir() => bind(&mut a, "--ro-bind", p),
                Err(_) => {}
            }
        }
        // No writable /tmp: the root (and so /tmp) is remounted read-only below, and
        // `TMPDIR` points into the working directory.
        // bwrap's /dev is a tmpfs of its own, writable and as large as half the RAM: a
        // launch could store past its disk limit there, and (without a cgroup) past its
        // memory limit too, since tmpfs pages are no process's. It is made read-only below;
        // /dev/shm, and an agent's private /tmp, get a tmpfs of TMPFS_MB each (an agent's
        // `TMPDIR` is on disk, in its home, where the disk limit measures it).
        a.extend(["--proc", "/proc", "--dev", "/dev"].map(String::from));
        let size = [
            "--size".to_string(),
            crate::cgroup::mb_bytes(TMPFS_MB).to_string(),
        ];
        a.extend(size.clone());
        a.extend(["--tmpfs", "/dev/shm"].map(String::from));
        if access.private_tmp {
            a.extend(size);
            a.extend(["--tmpfs", "/tmp"].map(String::from));
        }
        let mut ro: Vec<PathBuf> = self.options.read_only.clone();
        ro.extend(access.read_only.iter().cloned());
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let program = argv.first().map(String::as_str);
        for prefix in program_prefixes(program, home.as_deref()) {
            // A program kept beside what must stay hidden (an agent's script next to the
            // suite's tasks.jsonl) is shown alone, not with its folder.
            if holds_any(&prefix, &access.hidden) {
                ro.extend(program.map(PathBuf::from));
            } else {
                ro.push(prefix);
            }
        }
        ro.push(self.init.clone());
        ro.retain(|p| p.exists() && shareable(p));
        // Parents before children, so a path inside another is mounted on top of it.
        ro.sort_by_key(|p| p.components().count());
        // A hidden path inside a visible one is covered by an empty tmpfs (before anything
        // mounted inside it, such as a state directory), made read-only at the end: at
        // every place it shows, the visible path's own or, through a link, another.
        let hidden: Vec<PathBuf> = hidden_places(&access.hidden, &ro);
        let hidden: Vec<&PathBuf> = hidden.iter().collect();
        let mut covered = vec![false; hidden.len()];
        for p in &ro {
            for (h, done) in hidden.iter().zip(covered.iter_mut()) {
                if !*done && p.starts_with(h) && p != *h {
                    a.extend(["--tmpfs".into(), s(h)]);
                    *done = true;
                }
            }
            bind(&mut a, "--ro-bind", p);
        }
        for (h, done) in hidden.iter().zip(&covered) {
            if !done {
                a.extend(["--tmpfs".into(), s(h)]);
            }
        }
        bind(
            &mut a,
            if access.cwd_read_only {
                "--ro-bind"
            } else {
                "--bind"
            },
            cwd,
        );
        for p in access.writable.iter().filter(|p| p.exists()) {
            bind(&mut a, "--bind", p);
        }
        if let Some(dir) = socket_dir {
            a.extend(["--ro-bind".into(), s(dir), SOCKET_DIR_INSIDE.into()]);
        }
        for h in &hidden {
            a.extend(["--remount-ro".into(), s(h)]);
        }
        a.extend(["--remount-ro", "/dev", "--remount-ro", "/"].map(String::from));
        a.extend(["--chdir".into(), s(cwd)]);
        a.extend(["--".into(), s(&self.init), INIT_ARG.into()]);
        for port in relays {
            a.extend([
                "--relay".into(),
                format!("{port}={SOCKET_DIR_INSIDE}/{port}.sock"),
            ]);
        }
        if let Some(mb) = self.options.memory_mb {
            a.extend(["--memory-mb".into(), mb.to_string()]);
        }
        if let Some(n) = self.options.max_files {
            a.extend(["--max-files".into(), n.to_string()]);
        }
        a.push("--".into());
        a.extend(argv.iter().cloned());
        a.insert(0, s(&self.bwrap));
        a
    }

    async fn run(
        &self,
        mut spec: LaunchSpec,
    ) -> Result<crate::launch::ProcessOutcome, crate::launch::LaunchError> {
        let ports = gateway_ports(&spec.env);
        let sockets = if ports.is_empty() {
            None
        } else {
            Some(
                crate::sandbox_relay::Relays::start(&ports, &spec.env).map_err(|source| {
                    crate::launch::LaunchError::Io {
                        what: "starting the gateway relay",
                        source,
                    }
                })?,
            )
        };
        // The init resolves the program inside; give it the name it would find outside.
        if let Some(first) = spec.argv.first_mut() {
            let resolved = crate::launch::resolve_program(first, &spec.env);
            *first = resolved.to_string_lossy().into_owned();
        }
        if !spec.access.cwd_read_only {
            spec.env
                .push(("TMPDIR".into(), spec.cwd.to_string_lossy().into_owned()));
        }
        spec.argv = self.bwrap_argv(
            &spec.argv,
            &spec.cwd,
            &spec.access,
            &ports,
            sockets.as_ref().map(|r| r.dir()),
        );
        let out = run_local(spec, self.options.limits, crate::stop::Stop::InsideSandbox).await;
        drop(sockets);
        out
    }
}

impl Launcher for SandboxLauncher {
    fn launch(&self, spec: LaunchSpec) -> LaunchFuture<'_> {
        Box::pin(self.run(spec))
    }

    fn isolation(&self) -> String {
        "bwrap".into()
    }
}

/// The size of each tmpfs a sandbox gets (`/dev/shm`, an agent's private `/tmp`), in MB:
/// Docker's default for `/dev/shm`, enough for the semaphores and small buffers of Python's
/// `multiprocessing` and the like. A tmpfs is memory that no process's limit counts, so it
/// stays small; files a program puts in `TMPDIR` go to disk.
pub const TMPFS_MB: u64 = 64;

/// Loopback ports named by `*_BASE_URL` variables (`http://127.0.0.1:PORT/...`), but not
/// [`crate::model_access::OFFLINE_PORT`].
fn gateway_ports(env: &[(String, String)]) -> Vec<u16> {
    let mut ports: Vec<u16> = env
        .iter()
        .filter(|(k, _)| k.ends_with("_BASE_URL"))
        .filter_map(|(_, v)| loopback_port(v))
        // Nothing listens there: a relay would only fail to bind a low port as non-root.
        .filter(|p| *p != crate::model_access::OFFLINE_PORT)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// The port of a `http://127.0.0.1:PORT/...` or `http://localhost:PORT/...` URL.
pub(crate) fn loopback_port(url: &str) -> Option<u16> {
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .or_else(|| url.strip_prefix("http://localhost:"))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The installation prefixes of a program outside the system directories (the directory
/// above its `bin/`, for the path found on `PATH` and for the file it links to), so a
/// Python in a virtualenv or under pyenv runs inside.
///
/// The harness names the program, so a prefix that is the home directory `home` or lies
/// directly in it is shown whole only when it is a runtime's own tree ([`runtime_tree`]:
/// `~/.pyenv`, `~/miniconda3`, `~/.venv`). Otherwise (`~/bin`, `~/.cargo` with its
/// `credentials.toml`, `~/.local` with `share/keyrings`) only the program's `bin/` and the
/// prefix's `lib/` (a `pip --user` script's packages) are shown, or the program file alone
/// when it is not in a `bin/`.
fn program_prefixes(program: Option<&str>, home: Option<&Path>) -> Vec<PathBuf> {
    let Some(program) = program else {
        return Vec::new();
    };
    let path = Path::new(program);
    let mut out = Vec::new();
    for p in [Some(path.to_path_buf()), path.canonicalize().ok()]
        .into_iter()
        .flatten()
    {
        let Some(dir) = p.parent() else { continue };
        let prefix = if dir.file_name().is_some_and(|n| n == "bin" || n == "shims") {
            dir.parent().unwrap_or(dir)
        } else {
            dir
        };
        let near_home = home.is_some_and(|h| h.starts_with(prefix) || prefix.parent() == Some(h));
        let shown = if !near_home || runtime_tree(prefix) {
            vec![prefix.to_path_buf()]
        } else if dir != prefix && !home.is_some_and(|h| h.starts_with(dir)) {
            vec![dir.to_path_buf(), prefix.join("lib")]
        } else {
            // Not in a `bin/`: the program file alone.
            vec![p.clone()]
        };
        for p in shown {
            let system = ["/usr", "/etc", "/opt", "/bin", "/sbin", "/lib"]
                .iter()
                .any(|s| p.starts_with(s));
            if !system && p != Path::new("/") && p.is_absolute() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Whether `p` may be shown to a sandbox at all: an absolute path with no `.` or `..` in it
/// (`/tmp/..` is the host's root under another name, which bubblewrap would mount whole)
/// that is not the root itself, under any name.
fn shareable(p: &Path) -> bool {
    use std::path::Component;
    p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && p.canonicalize().map_or(true, |c| c != Path::new("/"))
}

/// Whether `dir` holds (or is) one of `hidden`, by their real locations too.
fn holds_any(dir: &Path, hidden: &[PathBuf]) -> bool {
    let real_dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    hidden.iter().any(|h| {
        let real_h = h.canonicalize().unwrap_or_else(|_| h.clone());
        h.starts_with(dir) || real_h.starts_with(&real_dir)
    })
}

/// Where each folder of `hidden` shows inside the sandbox through the visible paths `ro`:
/// below a visible path `p` whose real location (links resolved) holds it, at `p` joined
/// with the rest of its path. A hidden folder is compared by its real location too.
fn hidden_places(hidden: &[PathBuf], ro: &[PathBuf]) -> Vec<PathBuf> {
    let mut places: Vec<PathBuf> = Vec::new();
    for h in hidden.iter().filter(|h| h.is_dir()) {
        let real_h = h.canonicalize().unwrap_or_else(|_| h.clone());
        for p in ro {
            let real_p = p.canonicalize().unwrap_or_else(|_| p.clone());
            let inside = real_h
                .strip_prefix(&real_p)
                .ok()
                .or_else(|| h.strip_prefix(p).ok());
            if let Some(rest) = inside {
                let place = p.join(rest);
                if !places.contains(&place) {
                    places.push(place);
                }
            }
        }
    }
    places
}

/// Whether `dir` is a language runtime's or environment's own tree, which a program in it
/// needs whole: a virtualenv (`pyvenv.cfg`), a conda install (`conda-meta/`), or a version
/// manager (`libexec/` and `versions/`: pyenv, rbenv, nodenv).
fn runtime_tree(dir: &Path) -> bool {
    dir.join("pyvenv.cfg").is_file()
        || dir.join("conda-meta").is_dir()
        || (dir.join("libexec").is_dir() && dir.join("versions").is_dir())
}

/// Which launcher the CLI uses, and why.
#[derive(Clone)]
pub struct LauncherChoice {
    /// The launcher.
    pub launcher: std::sync::Arc<dyn Launcher>,
    /// Set when trials run unsandboxed: the reason, for a loud warning.
    pub unsandboxed_reason: Option<String>,
    /// Set when launches get no cgroup, or not every limit asked for: the reason, for a
    /// loud warning.
    pub uncontained_reason: Option<String>,
}

/// The default launcher: the sandbox when `bwrap` can make one here (probed once per
/// process), else [`LocalLauncher`] with the reason; either puts every launch in a cgroup
/// with `limits` where this process can make cgroups ([`Cgroups::get`]).
/// `HEVO_SANDBOX=off` chooses the local launcher on purpose; `HEVO_SANDBOX=require` makes
/// an unavailable sandbox an error, and `HEVO_CGROUP=require` unavailable cgroups.
pub fn default_launcher(init: &Path, limits: TrialLimits) -> Result<LauncherChoice, String> {
    let uncontained_reason = match Cgroups::get() {
        Ok(c) => {
            let missing = c.unsupported(&limits);
            (!missing.is_empty()).then(|| {
                format!(
                    "no cgroup controller here limits {} (cgroups: {})",
                    missing.join(", "),
                    c.describe()
                )
            })
        }
        Err(e) => Some(e.to_string()),
    };
    if let Some(why) = &uncontained_reason {
        if std::env::var("HEVO_CGROUP").as_deref() == Ok("require") {
            return Err(format!(
                "HEVO_CGROUP=require, but {why}; run hevo as root, in a cgroup delegated to \
                 this user (systemd-run --user --scope -p Delegate=yes ...), or unset it"
            ));
        }
    }
    /// The sandbox, or why there is none; an error when the sandbox is required.
    type Probed = Result<(Option<SandboxLauncher>, Option<String>), String>;
    static CHOICE: OnceLock<Probed> = OnceLock::new();
    let choice = CHOICE.get_or_init(|| {
        let mode = std::env::var("HEVO_SANDBOX").unwrap_or_default();
        if mode == "off" {
            return Ok((None, Some("HEVO_SANDBOX=off".into())));
        }
        let options = SandboxOptions::from_env()?;
        let bwrap = crate::launch::resolve_program(
            "bwrap",
            &[("PATH".into(), "/usr/bin:/bin:/usr/local/bin".into())],
        );
        match SandboxLauncher::new(bwrap, init.to_path_buf(), options) {
            Ok(l) => Ok((Some(l), None)),
            Err(e) if mode == "require" => Err(format!(
                "HEVO_SANDBOX=require, but {e}; install bubblewrap (`apt-get install bubblewrap`) \
                 or allow unprivileged user namespaces"
            )),
            Err(e) => Ok((None, Some(e))),
        }
    });
    match choice {
        Ok((Some(l), _)) => {
            let mut l = l.clone();
            l.options.limits = Some(limits);
            Ok(LauncherChoice {
                launcher: std::sync::Arc::new(l),
                unsandboxed_reason: None,
                uncontained_reason,
            })
        }
        Ok((None, reason)) => Ok(LauncherChoice {
            launcher: std::sync::Arc::new(LocalLauncher {
                limits: Some(limits),
            }),
            unsandboxed_reason: reason.clone(),
            uncontained_reason,
        }),
        Err(e) => Err(e.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_ports_come_from_loopback_base_urls() {
        let env = vec![
            ("OPENAI_BASE_URL".into(), "http://127.0.0.1:4100/v1".into()),
            ("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:4100".into()),
            ("OTHER_BASE_URL".into(), "https://example.com:1/".into()),
            ("X".into(), "http://127.0.0.1:5".into()),
        ];
        assert_eq!(gateway_ports(&env), vec![4100]);
        let offline = crate::model_access::ModelEnv::offline().vars().to_vec();
        assert!(
            gateway_ports(&offline).is_empty(),
            "no relay to a closed port"
        );
    }

    #[test]
    fn prefixes_skip_system_programs() {
        let home = Some(Path::new("/home/u"));
        assert!(program_prefixes(Some("/usr/bin/python3"), home).is_empty());
        assert_eq!(
            program_prefixes(Some("/home/u/work/venv/bin/python3"), home)[0],
            PathBuf::from("/home/u/work/venv")
        );
    }

    /// A harness that names a program in `~/bin` or `~/.cargo/bin` would otherwise have
    /// the whole home directory or `~/.cargo` (with `credentials.toml`) mounted.
    #[test]
    fn prefixes_never_show_the_home_directory_or_a_directory_directly_in_it() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(
            program_prefixes(Some("/home/u/bin/tool"), home),
            vec![PathBuf::from("/home/u/bin"), PathBuf::from("/home/u/lib")]
        );
        assert_eq!(
            program_prefixes(Some("/home/u/.cargo/bin/hevo"), home),
            vec![
                PathBuf::from("/home/u/.cargo/bin"),
                PathBuf::from("/home/u/.cargo/lib")
            ]
        );
        for alone in ["/home/u/tool", "/home/tool", "/home/u/work/tool", "/tool"] {
            assert_eq!(
                program_prefixes(Some(alone), home),
                vec![PathBuf::from(alone)]
            );
        }
        assert_eq!(
            program_prefixes(Some("/srv/tools/tool"), home),
            vec![PathBuf::from("/srv/tools")]
        );
        // A virtualenv directly in the home directory keeps its packages visible.
        let tmp = tempfile::tempdir().unwrap();
        let venv = tmp.path().join(".venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        assert_eq!(
            program_prefixes(
                Some(&venv.join("bin/python3").to_string_lossy()),
                Some(tmp.path())
            ),
            vec![venv.clone()]
        );
        std::fs::remove_file(venv.join("pyvenv.cfg")).unwrap();
        assert_eq!(
            program_prefixes(
                Some(&venv.join("bin/python3").to_string_lossy()),
                Some(tmp.path())
            ),
            vec![venv.join("bin"), venv.join("lib")]
        );
        // pyenv's shims need its whole tree.
        let pyenv = tmp.path().join(".pyenv");
        std::fs::create_dir_all(pyenv.join("libexec")).unwrap();
        std::fs::create_dir_all(pyenv.join("versions")).unwrap();
        assert_eq!(
            program_prefixes(
                Some(&pyenv.join("shims/python3").to_string_lossy()),
                Some(tmp.path())
            ),
            vec![pyenv]
        );
    }
}
