//! One hevo per run directory: an exclusive lock on `<run>/hevo.lock`, held by the
//! [`crate::evaluator::Evaluator`] for its whole life and released by the kernel when the
//! process ends (however it ends). The file holds the holder's pid for the message a second
//! process gets.

use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::eval::EvalError;

/// The lock file's name inside a run directory.
pub const LOCK_FILE: &str = "hevo.lock";

/// How long a busy lock is tried again before [`EvalError::Locked`]: long enough for a
/// fork on another thread to reach its exec, short enough for a user who started a second
/// hevo on the same run directory.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(3);

/// A held run-directory lock; dropping it releases the lock.
#[derive(Debug)]
pub struct RunLock {
    _file: std::fs::File,
}

impl RunLock {
    /// Takes the lock of `run_dir`, or fails at once naming the process that holds it.
    pub fn acquire(run_dir: &Path) -> Result<RunLock, EvalError> {
        let path = run_dir.join(LOCK_FILE);
        let io = |source| EvalError::RunDir {
            path: path.clone(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // A lock just released can still be held for a moment by a child this process is
        // forking on another thread (it shares the open file until its exec closes it), so a
        // busy lock is tried again for up to `RETRY_FOR` before the holder is named.
        let started = std::time::Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < RETRY_FOR => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    return Err(EvalError::Locked {
                        run_dir: run_dir.to_path_buf(),
                        holder: holder.trim().to_string(),
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
            }
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        Ok(RunLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid() {
        let d = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(d.path()).unwrap();
        let err = RunLock::acquire(d.path()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&std::process::id().to_string()), "{msg}");
        assert!(err.is_user_error());
        drop(first);
        RunLock::acquire(d.path()).unwrap();
    }

    /// Regression: a search test reopened its run directory right after closing it and was
    /// refused once, because a child being spawned on another thread had inherited the
    /// lock's open file between its fork and its exec. Here a real child does so (its
    /// `pre_exec` waits before the exec): the lock is taken once the child has exec'd.
    #[test]
    fn a_lock_a_forking_child_still_shares_is_taken_after_its_exec() {
        use std::os::unix::process::CommandExt;
        let d = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(d.path()).unwrap();
        let (forked_tx, forked_rx) = std::sync::mpsc::channel();
        let spawner = std::thread::spawn(move || {
            let mut cmd = std::process::Command::new("true");
            // SAFETY: the hook only sleeps (nanosleep is async-signal-safe).
            unsafe {
                cmd.pre_exec(|| {
                    std::thread::sleep(std::time::Duration::from_millis(300));
                    Ok(())
                });
            }
            forked_tx.send(()).unwrap();
            cmd.spawn().unwrap().wait().unwrap()
        });
        forked_rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        drop(first);
        RunLock::acquire(d.path()).expect("the lock, once the child has exec'd");
        assert!(spawner.join().unwrap().success());
    }
}
