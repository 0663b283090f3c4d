//! The content key of a task: what a stored trial must match to count.

use super::Suite;

/// The content key of a task in a suite: SHA-256 over its input, expected answer, the
/// scorer's configuration, its `files` folder and, when the tests are frozen, the lock's
/// hashes of the task's tests. A stored trial counts for the task only while the key is the
/// same, so editing `tasks.jsonl`, `[scorer]` or a frozen test (and re-freezing) re-runs
/// what changed. The scorer's code is not in it: a script `[scorer] command` names, a module
/// that script imports, the tests of a suite without a lock (docs/suites.md, "Run
/// directories and resume").
pub fn task_key(task: &crate::task::Task, suite: &Suite) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let mut parts = vec![
        task.input.to_string(),
        task.expected.to_string(),
        serde_json::to_string(&suite.config.scorer).unwrap_or_default(),
        task.files
            .as_deref()
            .and_then(|f| crate::harness::content_hash(f).ok())
            .unwrap_or_default(),
    ];
    // Only a locked suite has this part, so the keys of every other suite are unchanged.
    if let Some(lock) = &suite.lock {
        parts.push(lock.task_digest(&task.id));
    }
    for part in parts {
        h.update(part.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..16])
}
