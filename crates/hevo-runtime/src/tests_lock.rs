//! `tests.lock.json`: the frozen test scripts of a `command` scorer, each by its SHA-256.
//!
//! A suite whose `[scorer]` names a lock (`lock = "tests.lock.json"`) is measured with the
//! same ruler for the whole run: loading it ([`crate::suite::Suite::load`]) checks every file
//! of the `tests` folder against the lock, and a changed, missing or extra file is an error
//! naming the file and how to re-freeze. The lock's entries for a task are part of that
//! task's content key ([`crate::suite::task_key`]), so trials scored under other tests are
//! never reused. `hevo tests synth` writes the lock; `hevo tests freeze` rewrites it after a
//! reviewed edit.
//!
//! ```json
//! {"version": 1, "tests": "tests",
//!  "files": {"t1/test_01.sh": "9f86d08...", "t1/test_02.py": "60303ae..."},
//!  "provenance": {"harness": "...", "agent": ["claude", "-p", "{prompt}"], "dropped": [...]}}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The lock file's usual name, beside `suite.toml`.
pub const LOCK_FILE: &str = "tests.lock.json";

/// The version this build writes and reads.
pub const LOCK_VERSION: u32 = 1;

/// The parsed lock file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TestsLock {
    /// Format version ([`LOCK_VERSION`]).
    pub version: u32,
    /// The tests folder the lock covers, relative to the suite (the scorer's `tests`).
    pub tests: String,
    /// Every file of the tests folder, by its path inside it (`<task id>/test_01.sh`), with
    /// its SHA-256 in hex.
    pub files: BTreeMap<String, String>,
    /// How the tests were made (harness, agent, kept and dropped tests); informative only,
    /// never checked.
    #[serde(default)]
    pub provenance: Value,
}

/// One way the tests folder differs from its lock: the file and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The file (in the tests folder, or the lock itself).
    pub path: PathBuf,
    /// What differs and how to fix it.
    pub message: String,
}

impl TestsLock {
    /// A lock of the files now in `suite_dir/tests`.
    pub fn freeze(suite_dir: &Path, tests: &str, provenance: Value) -> std::io::Result<TestsLock> {
        Ok(TestsLock {
            version: LOCK_VERSION,
            tests: tests.into(),
            files: scan(&suite_dir.join(tests))?,
            provenance,
        })
    }

    /// Reads a lock file; the error says what is wrong with it and how to re-freeze
    /// (`refreeze`, the command).
    pub fn read(path: &Path, refreeze: &str) -> Result<TestsLock, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!("cannot read the tests lock ({e}); restore it or re-freeze with `{refreeze}`")
        })?;
        let lock: TestsLock = serde_json::from_str(&text).map_err(|e| {
            format!("not a valid tests lock ({e}); restore it or re-freeze with `{refreeze}`")
        })?;
        if lock.version != LOCK_VERSION {
            return Err(format!(
                "tests lock version {} is not {LOCK_VERSION}, the one this hevo reads",
                lock.version
            ));
        }
        Ok(lock)
    }

    /// Writes the lock as pretty JSON.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut text = serde_json::to_string_pretty(self).map_err(std::io::Error::from)?;
        text.push('\n');
        std::fs::write(path, text)
    }

    /// Every difference between the files now in the suite's tests folder and the lock;
    /// empty when they match. `refreeze` is the command that re-freezes (for the messages).
    pub fn check(&self, suite_dir: &Path, refreeze: &str) -> Vec<Mismatch> {
        let dir = suite_dir.join(&self.tests);
        let now = match scan(&dir) {
            Ok(now) => now,
            Err(e) => {
                return vec![Mismatch {
                    path: dir,
                    message: format!("cannot read the frozen tests folder: {e}"),
                }]
            }
        };
        let mut out = Vec::new();
        for (name, hash) in &self.files {
            let path = dir.join(name);
            match now.get(name) {
                None => out.push(Mismatch {
                    path,
                    message: format!(
                        "missing: this frozen test is gone; restore it (SHA-256 {}) or \
                         re-freeze with `{refreeze}`",
                        short(hash)
                    ),
                }),
                Some(h) if h != hash => out.push(Mismatch {
                    path,
                    message: format!(
                        "changed since it was frozen (SHA-256 {} in {LOCK_FILE}, now {}); \
                         restore it, or review the edit and re-freeze with `{refreeze}` (a \
                         re-frozen test re-runs every trial it scores)",
                        short(hash),
                        short(h)
                    ),
                }),
                Some(_) => {}
            }
        }
        for name in now.keys().filter(|n| !self.files.contains_key(*n)) {
            out.push(Mismatch {
                path: dir.join(name),
                message: format!(
                    "not in {LOCK_FILE}: a file was added after the tests were frozen; \
                     delete it or re-freeze with `{refreeze}`"
                ),
            });
        }
        out
    }

    /// The frozen files a task's scorer runs: `<task id>/...` if the task has its own
    /// folder in the lock, else the files directly in the tests folder (the scorer's rule).
    pub fn task_files(&self, task_id: &str) -> Vec<(&str, &str)> {
        let prefix = format!("{task_id}/");
        let own: Vec<(&str, &str)> = self
            .files
            .iter()
            .filter(|(n, _)| n.starts_with(&prefix))
            .map(|(n, h)| (n.as_str(), h.as_str()))
            .collect();
        if !own.is_empty() {
            return own;
        }
        self.files
            .iter()
            .filter(|(n, _)| !n.contains('/'))
            .map(|(n, h)| (n.as_str(), h.as_str()))
            .collect()
    }

    /// SHA-256 (hex) of a task's frozen files, names and hashes: part of its content key.
    pub fn task_digest(&self, task_id: &str) -> String {
        let mut h = Sha256::new();
        for (name, hash) in self.task_files(task_id) {
            h.update(name.as_bytes());
            h.update([0]);
            h.update(hash.as_bytes());
            h.update([0]);
        }
        hex::encode(h.finalize())
    }
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// Every file under `dir` (recursively) by its `/`-separated path inside `dir`, with its
/// SHA-256. Names starting with `.` and `__pycache__` folders are skipped (editor and
/// interpreter droppings, which the scorer never runs); a symlink is hashed as its target
/// text, never followed.
pub fn scan(dir: &Path) -> std::io::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    scan_into(dir, "", &mut out)?;
    Ok(out)
}

fn scan_into(dir: &Path, rel: &str, out: &mut BTreeMap<String, String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "__pycache__" {
            continue;
        }
        let path = format!("{rel}{name}");
        let kind = entry.file_type()?;
        if kind.is_dir() {
            scan_into(&entry.path(), &format!("{path}/"), out)?;
        } else if kind.is_symlink() {
            let target = std::fs::read_link(entry.path())?;
            let digest = Sha256::digest(target.to_string_lossy().as_bytes());
            out.insert(path, format!("link:{}", hex::encode(digest)));
        } else {
            let digest = Sha256::digest(std::fs::read(entry.path())?);
            out.insert(path, hex::encode(digest));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_catches_changed_missing_and_extra_files() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("tests");
        std::fs::create_dir_all(t.join("a/__pycache__")).unwrap();
        std::fs::write(t.join("a/test_01.sh"), "exit 0\n").unwrap();
        std::fs::write(t.join("a/test_02.sh"), "exit 1\n").unwrap();
        std::fs::write(t.join("a/__pycache__/x.pyc"), "junk").unwrap();
        std::fs::write(t.join("a/.swp"), "junk").unwrap();
        let lock = TestsLock::freeze(d.path(), "tests", Value::Null).unwrap();
        assert_eq!(lock.files.len(), 2);
        assert!(lock.check(d.path(), "re").is_empty());
        let before = lock.task_digest("a");
        std::fs::write(t.join("a/test_01.sh"), "exit 1\n").unwrap();
        std::fs::remove_file(t.join("a/test_02.sh")).unwrap();
        std::fs::write(t.join("a/test_03.sh"), "exit 0\n").unwrap();
        let found = lock.check(d.path(), "hevo tests freeze S");
        let text: Vec<String> = found
            .iter()
            .map(|m| format!("{}: {}", m.path.display(), m.message))
            .collect();
        assert_eq!(found.len(), 3, "{text:?}");
        assert!(text[0].contains("a/test_01.sh: changed"), "{text:?}");
        assert!(text[1].contains("a/test_02.sh: missing"), "{text:?}");
        assert!(text[2].contains("a/test_03.sh: not in tests.lock.json"));
        assert!(text.iter().all(|t| t.contains("hevo tests freeze S")));
        let refrozen = TestsLock::freeze(d.path(), "tests", Value::Null).unwrap();
        assert_ne!(refrozen.task_digest("a"), before);
        assert_eq!(refrozen.task_files("b"), Vec::<(&str, &str)>::new());
    }

    /// A missing or damaged lock names the command that re-freezes, as a changed one does.
    #[test]
    fn a_missing_or_damaged_lock_names_the_refreeze_command() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("tests.lock.json");
        let missing = TestsLock::read(&path, "hevo tests freeze S").unwrap_err();
        assert!(
            missing.starts_with("cannot read the tests lock"),
            "{missing}"
        );
        std::fs::write(&path, "{not json").unwrap();
        let damaged = TestsLock::read(&path, "hevo tests freeze S").unwrap_err();
        assert!(damaged.starts_with("not a valid tests lock"), "{damaged}");
        for e in [missing, damaged] {
            assert!(e.ends_with("re-freeze with `hevo tests freeze S`"), "{e}");
        }
    }
}
