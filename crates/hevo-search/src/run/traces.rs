//! Each candidate's validation traces, copied into the archive (`candidates/NNN-name/
//! traces/<task>/`) where the proposer reads them: what the harness printed (`<n>.stdout`,
//! `<n>.stderr`) and every model request and response (`<n>/model_calls.jsonl`) of its
//! trial `n` on that task. Meta-Harness's proposer learns from traces; an agent proposer
//! sees only the archive, and its `traces/` folders stayed empty.
//!
//! Only the search's own store's traces are copied (`runs/<run>/traces/`: validation
//! trials; smoke and test trials live apart), and never a scorer's output
//! (`<n>.scorer-*`, which can quote the expected answer) or a kept working directory. A file
//! over [`FILE_BYTES`] keeps its end, and a candidate's copies stop at [`CANDIDATE_BYTES`].

use std::path::Path;

use super::{io_err, SearchError};
use crate::archive::{Archive, Candidate};
use hevo_runtime::store::Store;

/// The most bytes copied of one trace file (its end: where a failure shows).
pub const FILE_BYTES: u64 = 1 << 20;

/// The most bytes copied of one candidate's traces.
pub const CANDIDATE_BYTES: u64 = 32 << 20;

/// Copies the traces of every one of `candidates` not copied yet (or grown since).
pub(super) fn copy_traces(archive: &Archive, candidates: &[Candidate]) -> Result<(), SearchError> {
    let Some(run_dir) = archive.root().parent() else {
        return Ok(());
    };
    let db = run_dir.join("hevo.db");
    if !db.is_file() {
        return Ok(());
    }
    let store = Store::open_read_only(&db).map_err(|e| SearchError::Io {
        what: "cannot read",
        path: db.clone(),
        source: std::io::Error::other(e.to_string()),
    })?;
    for c in candidates {
        let ids = store.ids_of(&c.meta.name).unwrap_or_default();
        let mut budget = CANDIDATE_BYTES;
        for id in ids {
            let from = run_dir.join("traces").join(format!("c{id}"));
            copy_candidate(&from, &c.dir.join("traces"), &mut budget)
                .map_err(io_err("cannot copy traces into", &c.dir))?;
        }
    }
    Ok(())
}

/// Copies `from` (a candidate's `traces/c<id>`) into `to`, within `budget` bytes.
fn copy_candidate(from: &Path, to: &Path, budget: &mut u64) -> std::io::Result<()> {
    let Ok(tasks) = std::fs::read_dir(from) else {
        return Ok(());
    };
    for task in tasks.flatten() {
        if !task.file_type()?.is_dir() {
            continue;
        }
        let into = to.join(task.file_name());
        for entry in std::fs::read_dir(task.path())?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type()?;
            let (source, dest) = if kind.is_file() && is_output(&name) {
                (entry.path(), into.join(&name))
            } else if kind.is_dir() && name.bytes().all(|b| b.is_ascii_digit()) {
                let calls = entry.path().join("model_calls.jsonl");
                (calls, into.join(&name).join("model_calls.jsonl"))
            } else {
                continue;
            };
            copy_file(&source, &dest, budget)?;
        }
    }
    Ok(())
}

/// `<n>.stdout` or `<n>.stderr` of trial `n` (not a scorer's `<n>.scorer-<i>.stdout`).
fn is_output(name: &str) -> bool {
    [".stdout", ".stderr"].iter().any(|ext| {
        name.strip_suffix(ext)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Copies the regular file `from` to `to` unless `to` already has its size; its last
/// [`FILE_BYTES`] when it is longer, within `budget`.
fn copy_file(from: &Path, to: &Path, budget: &mut u64) -> std::io::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(from) else {
        return Ok(());
    };
    if !meta.is_file() {
        return Ok(());
    }
    let len = meta.len();
    let kept = len.min(FILE_BYTES);
    if let Ok(have) = std::fs::symlink_metadata(to) {
        if have.len() == kept || (len > FILE_BYTES && have.len() > kept) {
            return Ok(());
        }
    }
    if kept > *budget {
        return Ok(());
    }
    *budget -= kept;
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if len <= FILE_BYTES {
        std::fs::copy(from, to)?;
        return Ok(());
    }
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut src = std::fs::File::open(from)?;
    src.seek(SeekFrom::Start(len - FILE_BYTES))?;
    let mut tail = Vec::with_capacity(FILE_BYTES as usize);
    src.take(FILE_BYTES).read_to_end(&mut tail)?;
    let mut out = std::fs::File::create(to)?;
    writeln!(
        out,
        "[... the first {} bytes are cut ...]",
        len - FILE_BYTES
    )?;
    out.write_all(&tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trials_output_is_copied_and_a_scorers_is_not() {
        for name in ["0.stdout", "12.stderr"] {
            assert!(is_output(name), "{name}");
        }
        for name in [
            "0.scorer-0.stdout",
            "x.stdout",
            ".stdout",
            "0.stdout.bak",
            "0.workdir",
        ] {
            assert!(!is_output(name), "{name}");
        }
    }

    #[test]
    fn a_long_file_keeps_its_end_and_the_budget_holds() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("0.stdout");
        let mut text = "x".repeat(FILE_BYTES as usize);
        text.push_str("THE END\n");
        std::fs::write(&from, &text).unwrap();
        let to = d.path().join("out/0.stdout");
        let mut budget = CANDIDATE_BYTES;
        copy_file(&from, &to, &mut budget).unwrap();
        let copied = std::fs::read_to_string(&to).unwrap();
        assert!(
            copied.starts_with("[... the first 8 bytes are cut ...]"),
            "{}",
            &copied[..60]
        );
        assert!(copied.ends_with("THE END\n"));
        assert_eq!(budget, CANDIDATE_BYTES - FILE_BYTES);
        // copied already: not again
        copy_file(&from, &to, &mut budget).unwrap();
        assert_eq!(budget, CANDIDATE_BYTES - FILE_BYTES);
        let mut small = 10;
        let other = d.path().join("out/1.stdout");
        copy_file(&from, &other, &mut small).unwrap();
        assert!(!other.exists(), "over the budget: not copied");
    }
}
