//! The frozen suite: suite.toml, tasks.jsonl, files and the tests lock, loaded back to
//! check; and `hevo tests freeze`, which re-hashes a reviewed edit.

use hevo_runtime::scorer::ScorerConfig;
use hevo_runtime::suite::{Suite, SuiteConfig};
use hevo_runtime::tests_lock::{TestsLock, LOCK_FILE};
use hevo_runtime::trial::copy_tree;
use serde_json::{json, Value};
use std::path::Path;

use super::{io, SynthError, SynthOptions, SynthReport, TaskSynth, TESTS_DIR, WORK_DIR};

/// Writes the new suite (suite.toml, tasks.jsonl, files, the lock), loads it back and
/// reports.
pub(super) fn freeze(
    opts: &SynthOptions,
    suite: &Suite,
    out: &Path,
    results: Vec<TaskSynth>,
) -> Result<SynthReport, SynthError> {
    let kept_ids: std::collections::HashSet<&str> = results
        .iter()
        .filter(|t| t.kept() > 0)
        .map(|t| t.id.as_str())
        .collect();
    let tasks_without_tests: Vec<String> = results
        .iter()
        .filter(|t| t.kept() == 0)
        .map(|t| t.id.clone())
        .collect();
    for id in &tasks_without_tests {
        let _ = hevo_runtime::remove::remove_tree(&out.join(TESTS_DIR).join(id));
    }
    if kept_ids.is_empty() {
        return Err(SynthError::NothingKept(out.join(WORK_DIR).join("agent")));
    }
    let text = std::fs::read_to_string(suite.dir.join("tasks.jsonl"))
        .map_err(io("cannot read tasks.jsonl"))?;
    let lines: Vec<&str> = text.lines().collect();
    let mut jsonl = String::new();
    for t in suite
        .tasks
        .iter()
        .filter(|t| kept_ids.contains(t.id.as_str()))
    {
        jsonl.push_str(lines.get(t.line - 1).copied().unwrap_or_default());
        jsonl.push('\n');
        if let Some(files) = &t.files {
            let rel = files.strip_prefix(&suite.dir).unwrap_or(files);
            copy_tree(files, &out.join(rel), &[]).map_err(io("cannot copy task files"))?;
        }
    }
    std::fs::write(out.join("tasks.jsonl"), jsonl).map_err(io("cannot write tasks.jsonl"))?;
    let config = SuiteConfig {
        scorer: ScorerConfig::Command {
            command: None,
            tests: Some(TESTS_DIR.into()),
            timeout_s: Some(opts.test_timeout.as_secs_f64()),
            lock: Some(LOCK_FILE.into()),
        },
        ..suite.config.clone()
    };
    let toml = format!(
        "# Written by `hevo tests synth` from `{}`: the scorer runs the frozen generated\n\
         # tests in tests/<task id>/ (see tests.lock.json); editing one is an error until it\n\
         # is re-frozen with `hevo tests freeze`.\n{}",
        suite.dir.display(),
        toml::to_string(&config).map_err(|e| SynthError::Internal(e.to_string()))?
    );
    std::fs::write(out.join("suite.toml"), toml).map_err(io("cannot write suite.toml"))?;
    let kept: usize = results.iter().map(TaskSynth::kept).sum();
    let dropped: usize = results.iter().map(|t| t.tests.len() - t.kept()).sum();
    let provenance = json!({
        "source_suite": suite.dir,
        "harness": opts.harness_dir,
        "agent": opts.agent.command,
        "per_task": opts.per_task,
        "splits": opts.splits.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "tasks": results,
        "tasks_without_tests": tasks_without_tests,
    });
    let lock = TestsLock::freeze(out, TESTS_DIR, provenance)
        .map_err(io("cannot hash the generated tests"))?;
    let lock_path = out.join(LOCK_FILE);
    lock.write(&lock_path)
        .map_err(io("cannot write the lock"))?;
    // The new suite must load (every check of a frozen suite) before it is reported.
    Suite::load(out)?;
    let rates: Vec<f64> = results
        .iter()
        .filter(|t| t.kept() > 0)
        .map(|t| {
            let passed = t
                .tests
                .iter()
                .filter(|v| v.initial_passes == Some(true))
                .count();
            passed as f64 / t.kept() as f64
        })
        .collect();
    Ok(SynthReport {
        out: out.to_path_buf(),
        lock: lock_path,
        kept,
        dropped,
        tasks_without_tests,
        initial_pass_rate: (!rates.is_empty())
            .then(|| rates.iter().sum::<f64>() / rates.len() as f64),
        tasks: results,
    })
}

/// `hevo tests freeze`: re-hashes a locked suite's tests folder after a reviewed edit and
/// rewrites its lock (provenance kept, the re-freeze noted), only once the suite loads with
/// the new lock. Trials scored under the old tests are not reused afterwards (their task
/// keys change).
pub fn refreeze(suite_dir: &Path) -> Result<(TestsLock, usize), SynthError> {
    let dir = suite_dir
        .canonicalize()
        .map_err(|e| SynthError::User(format!("cannot read `{}`: {e}", suite_dir.display())))?;
    let text = std::fs::read_to_string(dir.join("suite.toml"))
        .map_err(|e| SynthError::User(format!("cannot read suite.toml in the suite: {e}")))?;
    let config: SuiteConfig = toml::from_str(&text).map_err(|e| {
        SynthError::User(format!(
            "{}: {}",
            dir.join("suite.toml").display(),
            e.message()
        ))
    })?;
    let ScorerConfig::Command {
        tests: Some(tests),
        lock: Some(lock_name),
        ..
    } = &config.scorer
    else {
        return Err(SynthError::User(format!(
            "{}: the scorer freezes no tests; `hevo tests freeze` needs `[scorer] kind = \
             \"command\"` with `tests = \"tests\"` and `lock = \"{LOCK_FILE}\"`",
            dir.join("suite.toml").display()
        )));
    };
    let lock_path = dir.join(lock_name);
    let old = TestsLock::read(&lock_path, "").ok();
    let changed = old.as_ref().map_or(usize::MAX, |o| o.check(&dir, "").len());
    let mut provenance = old.map(|o| o.provenance).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut provenance {
        let n = map.get("refrozen").and_then(Value::as_u64).unwrap_or(0);
        map.insert("refrozen".into(), json!(n + 1));
    }
    let lock = TestsLock::freeze(&dir, tests, provenance)
        .map_err(|e| SynthError::User(format!("cannot hash `{tests}`: {e}")))?;
    // Every check first: a suite that does not load with the new lock (a task without a
    // test, a bad line) keeps its old lock file, or still has none.
    Suite::load_with_lock(&dir, lock.clone())?;
    lock.write(&lock_path)
        .map_err(io(format!("cannot write `{}`", lock_path.display())))?;
    Ok((lock, changed))
}
