//! The keep rule: each test the agent wrote parses and runs twice against the initial
//! harness's output with the same exit 0 or 1, or it is dropped with the reason.

use hevo_runtime::cancel::CancelReason;
use hevo_runtime::launch::{with_suffix, Exit};
use hevo_runtime::scorer::{run_test, test_argv, ScoreContext, ScoreError};
use hevo_runtime::task::{sanitize, Task};
use hevo_runtime::trial::copy_tree;
use hevo_runtime::untrusted;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

use super::workspace::InitialTrial;
use super::{io, SynthError, SynthOptions, TestVerdict, TESTS_DIR};

/// The largest test script an agent may write (1 MiB).
const MAX_TEST_BYTES: u64 = 1 << 20;

/// Whether `name` is `test_NN.sh` or `test_NN.py`.
fn is_test_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("test_") else {
        return false;
    };
    let Some((num, ext)) = rest.split_once('.') else {
        return false;
    };
    !num.is_empty() && num.len() <= 3 && num.bytes().all(|b| b.is_ascii_digit()) && {
        ext == "sh" || ext == "py"
    }
}

/// Copies the agent's tests into `out/tests/<task id>/`, checks each against the initial
/// harness's output and deletes the dropped ones.
pub(super) fn check_tests(
    opts: &SynthOptions,
    task: &Task,
    trial: Option<&InitialTrial>,
    ws: &Path,
    out: &Path,
    work: &Path,
) -> Result<Vec<TestVerdict>, SynthError> {
    let mut names: Vec<String> = std::fs::read_dir(ws.join("tests"))
        .map_err(io("cannot read the agent's tests"))?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let dest = out.join(TESTS_DIR).join(&task.id);
    let _ = hevo_runtime::remove::remove_tree(&dest);
    std::fs::create_dir_all(&dest).map_err(io("cannot create a task's tests folder"))?;
    let mut verdicts = Vec::new();
    let mut taken = 0;
    for name in names {
        let dropped = |why: String| TestVerdict {
            file: name.clone(),
            kept: false,
            initial_passes: None,
            why: Some(why),
        };
        let src = ws.join("tests").join(&name);
        if !is_test_name(&name) {
            verdicts.push(dropped("not named test_NN.sh or test_NN.py".into()));
            continue;
        }
        if taken == opts.per_task {
            verdicts.push(dropped(format!("more than --per-task {}", opts.per_task)));
            continue;
        }
        // Read once, never through a link and only a regular file, then written by hevo:
        // what is checked is what is kept.
        let text = match untrusted::read_file(&src, MAX_TEST_BYTES) {
            Ok(text) => text,
            Err(untrusted::Refused::TooLarge { .. }) => {
                verdicts.push(dropped(format!(
                    "larger than {} KiB, the limit of a test script",
                    MAX_TEST_BYTES / 1024
                )));
                continue;
            }
            Err(refused) => {
                verdicts.push(dropped(refused.to_string()));
                continue;
            }
        };
        taken += 1;
        let path = dest.join(&name);
        std::fs::write(&path, text).map_err(io(format!("cannot copy `{}`", src.display())))?;
        let check = work.join("check").join(sanitize(&task.id)).join(&name);
        match check_one(opts, task, trial, &path, out, &check)? {
            Ok(passes) => verdicts.push(TestVerdict {
                file: name.clone(),
                kept: true,
                initial_passes: Some(passes),
                why: None,
            }),
            Err(why) => {
                std::fs::remove_file(&path).map_err(io("cannot remove a dropped test"))?;
                verdicts.push(dropped(why));
            }
        }
    }
    Ok(verdicts)
}

/// The keep rule for one test: it parses (`bash -n`, Python's `ast`), then two runs
/// against the initial harness's output (each in a fresh copy of its working directory)
/// both exit 0 or 1, the same, without a Python crash. `Ok(passes)` keeps it.
fn check_one(
    opts: &SynthOptions,
    task: &Task,
    trial: Option<&InitialTrial>,
    test: &Path,
    out: &Path,
    check: &Path,
) -> Result<Result<bool, String>, SynthError> {
    let _ = hevo_runtime::remove::remove_tree(check);
    std::fs::create_dir_all(check).map_err(io("cannot create a check directory"))?;
    let kept = trial.map(|t| with_suffix(&t.trace_prefix, "workdir"));
    let answer = trial.map(|t| t.answer.clone()).unwrap_or(Value::Null);
    let path = test.to_string_lossy().into_owned();
    let syntax: Vec<String> = match test.extension().and_then(|e| e.to_str()) {
        Some("py") => vec![
            "python3".into(),
            "-c".into(),
            "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])".into(),
            path,
        ],
        _ => vec!["bash".into(), "-n".into(), path],
    };
    let mut exits = Vec::new();
    for (i, argv) in [syntax, test_argv(test), test_argv(test)]
        .into_iter()
        .enumerate()
    {
        let wd = check.join(format!("run-{i}"));
        std::fs::create_dir_all(&wd).map_err(io("cannot create a check directory"))?;
        if let Some(kept) = kept.as_ref().filter(|k| k.is_dir()) {
            copy_tree(kept, &wd, &[]).map_err(io("cannot copy the initial working directory"))?;
        }
        let ctx = ScoreContext {
            answer: &answer,
            task,
            workdir: &wd,
            suite_dir: out,
            trace_prefix: &check.join("trace"),
            grace: Duration::from_secs(2),
            output_cap: 1024 * 1024,
            cancel: opts.cancel.clone(),
        };
        let outcome = match hevo_runtime::rt::block_on(run_test(
            &*opts.launcher,
            &ctx,
            argv,
            opts.test_timeout,
            i,
        )) {
            Ok(o) => o,
            Err(ScoreError::Cancelled) => {
                return Err(SynthError::Interrupted(
                    opts.cancel.reason().unwrap_or(CancelReason::Interrupt),
                ))
            }
            Err(e) => return Err(SynthError::Internal(format!("cannot run a test: {e}"))),
        };
        let stderr = std::fs::read_to_string(with_suffix(
            &check.join("trace"),
            &format!("scorer-{i}.stderr"),
        ))
        .unwrap_or_default();
        match outcome.exit {
            Exit::Cancelled => {
                return Err(SynthError::Interrupted(
                    opts.cancel.reason().unwrap_or(CancelReason::Interrupt),
                ))
            }
            Exit::Code(0) if i == 0 => continue,
            _ if i == 0 => return Ok(Err(format!("syntax error: {}", last_line(&stderr)))),
            Exit::TimedOut => {
                return Ok(Err(format!(
                    "ran past the {} s limit",
                    opts.test_timeout.as_secs_f64()
                )))
            }
            Exit::Signal(s) => return Ok(Err(format!("killed by signal {s}"))),
            Exit::Code(c) if c != 0 && c != 1 => {
                return Ok(Err(format!(
                    "exited with code {c} (a test exits 0 or 1): {}",
                    last_line(&stderr)
                )))
            }
            Exit::Code(c) => {
                if c == 1 && python_crash(&stderr) {
                    return Ok(Err(format!("crashed: {}", last_line(&stderr))));
                }
                exits.push(c);
            }
        }
    }
    if exits[0] != exits[1] {
        return Ok(Err(format!(
            "flaky: exited {} then {} on the same output",
            exits[0], exits[1]
        )));
    }
    let _ = hevo_runtime::remove::remove_tree(&check.join("run-0"));
    let _ = hevo_runtime::remove::remove_tree(&check.join("run-1"));
    let _ = hevo_runtime::remove::remove_tree(&check.join("run-2"));
    Ok(Ok(exits[0] == 0))
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no output on stderr")
        .chars()
        .take(300)
        .collect()
}

/// A Python traceback whose exception is not an `AssertionError` (a failed `assert` is a
/// clean failure; a `KeyError` is a broken test).
fn python_crash(stderr: &str) -> bool {
    stderr.contains("Traceback (most recent call last)")
        && !last_line(stderr).starts_with("AssertionError")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_numbered_shell_and_python_files_are_tests() {
        for ok in ["test_01.sh", "test_10.py", "test_1.sh"] {
            assert!(is_test_name(ok), "{ok}");
        }
        for bad in [
            "test_.sh",
            "test_01.rb",
            "helper.py",
            "test_01.sh.bak",
            "test_a1.py",
        ] {
            assert!(!is_test_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_failed_assert_is_a_failure_and_other_tracebacks_are_crashes() {
        let tb = "Traceback (most recent call last):\n  File \"t.py\", line 3\n";
        assert!(!python_crash(&format!("{tb}AssertionError: no\n")));
        assert!(python_crash(&format!("{tb}KeyError: 'answer'\n")));
        assert!(!python_crash("wrong answer\n"));
    }
}
