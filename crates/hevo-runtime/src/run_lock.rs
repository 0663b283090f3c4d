//! One hevo per run directory: an exclusive lock on `<run>/hevo.lock`, held by the
//! [`crate::evaluator::Evaluator`] for its whole life and released by the kernel when the
//! process ends (however it ends). The file holds the holder's pid for the message a second
//! process gets.

use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::eval::EvalError;

/// The lock file's name inside a run directory.
pub const LOCK_FILE: &str = "hevo.lock";

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
        match file.try_lock() {
            Ok(()) => {}
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
}
