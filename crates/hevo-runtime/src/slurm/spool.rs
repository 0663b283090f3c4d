//! A launch's spool directory, `<spool>/<job name>/`: what a job needs (its script and
//! stdin) and what outlives hevo (the job's id and name, its working directory, and the exit
//! marker the job writes when its command ends), so a restarted hevo can re-attach to the
//! job or read back its result instead of submitting it again. Once hevo has read the
//! job's outcome none of it is needed: the directory is removed ([`Spool::remove`]).
//!
//! ```text
//! <spool>/<name>/job.sh     the job's script (see script.rs)
//!               /stdin      the command's stdin
//!               /job_id     `1234` or, for an array element, `1234_5`
//!               /job_name   the Slurm job name (an array's name for an element)
//!               /cwd        the working directory, until hevo has read the outcome
//!               /exit       `<code> <start ms> <end ms>`, written by the job at the end
//!               /slurm.out  Slurm's output of a plain job (its script's own messages)
//! <spool>/arrays/<A>_<i>.out  the same of array element `A_i`
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::launch::Exit;

/// The spool directory of one launch.
#[derive(Clone, Debug)]
pub(crate) struct Spool {
    /// `<spool>/<job name>`.
    pub dir: PathBuf,
}

/// What the exit marker of a finished job says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Finished {
    /// How the command ended (a code above 128 is a signal, as the shell reports it).
    pub exit: Exit,
    /// The command's wall time on the node.
    pub wall: Duration,
}

impl Spool {
    /// The spool directory of the job named `name` under `root`.
    pub fn new(root: &Path, name: &str) -> Spool {
        Spool {
            dir: root.join(name),
        }
    }

    /// The job script.
    pub fn script(&self) -> PathBuf {
        self.dir.join("job.sh")
    }

    /// The command's stdin.
    pub fn stdin(&self) -> PathBuf {
        self.dir.join("stdin")
    }

    /// The exit marker.
    pub fn exit(&self) -> PathBuf {
        self.dir.join("exit")
    }

    /// The job id and Slurm job name recorded at submission, if any.
    pub fn job(&self) -> Option<(String, String)> {
        let id = std::fs::read_to_string(self.dir.join("job_id")).ok()?;
        let name = std::fs::read_to_string(self.dir.join("job_name")).ok()?;
        Some((id.trim().to_string(), name.trim().to_string()))
    }

    /// Records the job's id and Slurm name.
    pub fn set_job(&self, id: &str, name: &str) {
        let _ = std::fs::write(self.dir.join("job_name"), name);
        let _ = std::fs::write(self.dir.join("job_id"), id);
    }

    /// The working directory the job runs in (until [`Spool::remove`]).
    pub fn cwd(&self) -> Option<PathBuf> {
        std::fs::read_to_string(self.dir.join("cwd"))
            .ok()
            .map(PathBuf::from)
    }

    /// Records the working directory and clears a previous attempt's marker.
    pub fn start(&self, cwd: &Path) -> std::io::Result<()> {
        let _ = std::fs::remove_file(self.exit());
        std::fs::write(self.dir.join("cwd"), cwd.to_string_lossy().as_bytes())
    }

    /// The exit marker, if the job's command has ended and hevo has not read it yet.
    pub fn finished(&self) -> Option<Finished> {
        let text = std::fs::read_to_string(self.exit()).ok()?;
        let mut it = text.split_whitespace().map(|w| w.parse::<i64>().ok());
        let (code, start, end) = (it.next()??, it.next()??, it.next()??);
        let exit = if (129..=192).contains(&code) {
            Exit::Signal((code - 128) as i32)
        } else {
            Exit::Code(code as i32)
        };
        let wall = Duration::from_millis(end.saturating_sub(start).max(0) as u64);
        Some(Finished { exit, wall })
    }

    /// Where Slurm writes the job's own output (what its script says besides the command,
    /// e.g. a `cd` that failed, and Slurm's notes such as a cancellation): `slurm.out` of a
    /// plain job, `<spool>/arrays/<A>_<i>.out` of array element `A_i` (`batch.rs`).
    pub fn job_output(&self) -> Option<PathBuf> {
        let (id, _) = self.job()?;
        if id.contains('_') {
            Some(self.dir.parent()?.join("arrays").join(format!("{id}.out")))
        } else {
            Some(self.dir.join("slurm.out"))
        }
    }

    /// Removes the directory (and an array element's output) once hevo has the outcome, or
    /// the submission failed: nothing in it is needed any more, and a retry of the same
    /// launch submits a new job.
    pub fn remove(&self) {
        if let Some(out) = self.job_output() {
            let _ = std::fs::remove_file(out);
        }
        let _ = crate::remove::remove_tree(&self.dir);
    }
}

/// The working directories of every job under `root` whose outcome hevo has not read: a
/// job still running after hevo was killed, or one that finished meanwhile.
pub(crate) fn unread_workdirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| Spool { dir: e.path() }.cwd())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_gives_code_signal_and_wall_and_is_gone_once_read() {
        let root = tempfile::tempdir().unwrap();
        let s = Spool::new(root.path(), "hevo-x");
        std::fs::create_dir_all(&s.dir).unwrap();
        s.start(Path::new("/w/trial")).unwrap();
        assert_eq!(
            unread_workdirs(root.path()),
            vec![PathBuf::from("/w/trial")]
        );
        assert_eq!(s.finished(), None);
        std::fs::write(s.exit(), "3 1000 1250\n").unwrap();
        let f = s.finished().unwrap();
        assert_eq!(
            (f.exit, f.wall),
            (Exit::Code(3), Duration::from_millis(250))
        );
        std::fs::write(s.exit(), "137 1000 1000\n").unwrap();
        assert_eq!(s.finished().unwrap().exit, Exit::Signal(9));
        s.remove();
        assert_eq!(s.finished(), None);
        assert!(unread_workdirs(root.path()).is_empty());
        assert!(!s.dir.exists());
    }

    #[test]
    fn an_array_elements_output_is_beside_the_array_and_removed_with_it() {
        let root = tempfile::tempdir().unwrap();
        let plain = Spool::new(root.path(), "hevo-p");
        let element = Spool::new(root.path(), "hevo-e");
        for s in [&plain, &element] {
            std::fs::create_dir_all(&s.dir).unwrap();
        }
        plain.set_job("12", "hevo-p");
        element.set_job("13_4", "hevo-array-x");
        assert_eq!(plain.job_output(), Some(plain.dir.join("slurm.out")));
        let out = root.path().join("arrays/13_4.out");
        assert_eq!(element.job_output(), Some(out.clone()));
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(&out, "x").unwrap();
        element.remove();
        assert!(!out.exists() && !element.dir.exists());
    }
}
