//! A locked suite's frozen tests, checked on load.

use std::path::Path;

use super::Problem;
use crate::scorer::ScorerConfig;
use crate::task::Task;
use crate::tests_lock::TestsLock;

/// Reads and checks `[scorer] lock` (or checks `given` in its place): every file of the
/// tests folder must match it and every task must have a frozen test; each difference is
/// one problem naming the file.
pub(super) fn check_lock(
    dir: &Path,
    scorer: &ScorerConfig,
    tasks: &[Task],
    given: Option<TestsLock>,
    problems: &mut Vec<Problem>,
) -> Option<TestsLock> {
    let ScorerConfig::Command {
        tests: Some(tests),
        lock: Some(lock_name),
        ..
    } = scorer
    else {
        return None;
    };
    let lock_path = dir.join(lock_name);
    let refreeze = format!("hevo tests freeze {}", dir.display());
    let lock = match given.map_or_else(|| TestsLock::read(&lock_path, &refreeze), Ok) {
        Ok(lock) => lock,
        Err(message) => {
            problems.push(Problem {
                path: lock_path,
                line: None,
                message,
            });
            return None;
        }
    };
    if &lock.tests != tests {
        problems.push(Problem {
            path: lock_path.clone(),
            line: None,
            message: format!(
                "the lock freezes the folder `{}` but `[scorer] tests` is `{tests}`; make them \
                 the same",
                lock.tests
            ),
        });
        return None;
    }
    if !dir.join(tests).is_dir() {
        // `ScorerConfig::validate` has reported the missing folder.
        return None;
    }
    for m in lock.check(dir, &refreeze) {
        problems.push(Problem {
            path: m.path,
            line: None,
            message: m.message,
        });
    }
    for t in tasks {
        if lock.task_files(&t.id).is_empty() {
            problems.push(Problem {
                path: dir.join("tasks.jsonl"),
                line: Some(t.line),
                message: format!(
                    "task `{}` has no frozen test (nothing in `{tests}/{}/` in {}); write \
                     tests for it and re-freeze with `{refreeze}`, or remove the task",
                    t.id,
                    t.id,
                    lock_path.display()
                ),
            });
        }
    }
    Some(lock)
}
