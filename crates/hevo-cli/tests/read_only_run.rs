//! A run directory the user cannot write (here root's, read by `nobody`): `hevo status`
//! reads its store although SQLite cannot create `hevo.db-shm` beside it, and `hevo
//! report` says to use `--out`, then writes there with links that lead back to the run.
//! Root writes every folder, so these tests need root to switch to `nobody`; as another
//! user they say SKIPPED.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

mod support;

use support::nobody::{as_nobody, copy_hevo, is_root, shared_tempdir};

/// The shared folder: a finished threshold run at `run/` (root's, mode 755, its store
/// checkpointed and without `-shm` or `-wal`, as a finished run copied or archived is),
/// a copy of hevo, and `out/`, which `nobody` may write.
fn setup() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = shared_tempdir();
        support::threshold_copy(&d.path().join("threshold"), &[]);
        let run = d.path().join("run");
        let run_arg = run.to_str().unwrap();
        support::run_json(&d.path().join("threshold"), &["--run-dir", run_arg]);
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
        let db = rusqlite::Connection::open(run.join("hevo.db")).unwrap();
        db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        drop(db);
        for side in ["hevo.db-shm", "hevo.db-wal"] {
            let _ = std::fs::remove_file(run.join(side));
        }
        let _ = std::fs::remove_file(run.join("report.html"));
        copy_hevo(d.path());
        let out = d.path().join("out");
        std::fs::create_dir(&out).unwrap();
        nix::unistd::chown(&out, Some(support::nobody::NOBODY.into()), None).unwrap();
        d
    })
    .path()
}

/// Whether we are root; when not, says SKIPPED on stderr.
fn root_or_skip() -> bool {
    if !is_root() {
        eprintln!("SKIPPED: needs root to run hevo as nobody in a folder nobody cannot write");
    }
    is_root()
}

/// `hevo ARGS` as `nobody`, in the shared folder.
fn as_nobody_in(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(dir.join("bin/hevo"));
    cmd.current_dir(dir).env("HOME", dir.join("out")).args(args);
    as_nobody(&mut cmd).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `hevo status` reads the store where SQLite cannot create its `-shm` (it used to say the
/// store was unreadable and to start a new run), and leaves the directory as it was.
#[test]
fn status_reads_a_store_in_a_folder_it_cannot_write() {
    if !root_or_skip() {
        return;
    }
    let dir = setup();
    let out = as_nobody_in(dir, &["status", "run"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.starts_with("run run: finished\n"), "{stdout}");
    assert!(stdout.contains("\npick: "), "{stdout}");
    assert!(!dir.join("run/hevo.db-shm").exists());
}

/// `hevo report` where it cannot write: exit 2 naming the file and `--out`; with `--out` it
/// writes there, and its links to archive directories and traces lead to them.
#[test]
fn report_in_a_folder_it_cannot_write_names_out_and_writes_there() {
    if !root_or_skip() {
        return;
    }
    let dir = setup();
    let out = as_nobody_in(dir, &["report", "run"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot write `run/report.html`")
            && stderr.contains("`hevo report run --out FILE`"),
        "{stderr}"
    );
    assert!(!dir.join("run/report.html").exists());

    let out = as_nobody_in(dir, &["report", "run", "--out", "out/report.html"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "report: out/report.html\n");
    let html = std::fs::read_to_string(dir.join("out/report.html")).unwrap();
    let links: Vec<PathBuf> = html
        .split("<a href=\"")
        .skip(1)
        .map(|rest| &rest[..rest.find('"').unwrap()])
        .filter(|l| !l.starts_with('#'))
        .map(|l| dir.join("out").join(l))
        .collect();
    assert!(
        links.iter().any(|l| l.ends_with("traces/c1")),
        "no trace link: {links:?}"
    );
    for link in &links {
        assert!(
            link.starts_with(dir.join("out/../run")),
            "{}",
            link.display()
        );
        assert!(link.is_dir(), "{} leads nowhere", link.display());
    }
}

/// A killed run can leave trials in `hevo.db-wal`, which cannot be read without creating
/// `hevo.db-shm`: `hevo status` says so (exit 2) rather than show the store without them.
#[test]
fn trials_left_in_the_wal_are_named_not_skipped() {
    if !root_or_skip() {
        return;
    }
    let dir = setup();
    let killed = dir.join("killed");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(dir.join("run"))
        .arg(&killed)
        .status();
    assert!(cp.unwrap().success());
    // A transaction in the WAL, kept as it was before the last connection folded it in.
    let db = rusqlite::Connection::open(killed.join("hevo.db")).unwrap();
    db.execute_batch("PRAGMA wal_autocheckpoint = 0; CREATE TABLE later (x);")
        .unwrap();
    let wal = std::fs::read(killed.join("hevo.db-wal")).unwrap();
    drop(db);
    assert!(!wal.is_empty());
    std::fs::write(killed.join("hevo.db-wal"), wal).unwrap();
    let _ = std::fs::remove_file(killed.join("hevo.db-shm"));

    let out = as_nobody_in(dir, &["status", "killed"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("its latest trials are in `hevo.db-wal`")
            && stderr.contains("run this as the directory's owner"),
        "{stderr}"
    );
}
