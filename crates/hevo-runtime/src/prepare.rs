//! `prepare`: a harness learning from the train split, once per candidate and run.
//!
//! The harness's `prepare` command gets the train split (id, group, input, expected) as
//! JSONL on stdin and an empty state directory as its working directory; what it writes
//! there becomes read-only and is given to every trial of that candidate
//! (`HEVO_STATE_DIR`). A marker file makes it run once per run directory, resumably.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::eval::EvalError;
use crate::evaluator::Evaluator;
use crate::harness::Harness;
use crate::launch::{base_env, Access, Exit, LaunchSpec};
use crate::task::Split;
use crate::trial::opaque_id;

/// Runs the harness's `prepare` once per candidate (skipped when already done in this run
/// directory) and returns the read-only state directory.
pub(crate) async fn prepare(
    ev: &Evaluator,
    harness: &Harness,
    candidate_id: i64,
    argv: Vec<String>,
    trace_root: &Path,
) -> Result<PathBuf, EvalError> {
    let run_dir = ev.run_dir();
    let settings = &ev.config;
    let key = format!(
        "{}-{}",
        &harness.code_hash[..12],
        &hex::encode(Sha256::digest(harness.params_json().as_bytes()))[..8]
    );
    let state = run_dir.join("state").join(&key);
    let marker = run_dir.join("state").join(format!("{key}.done"));
    if marker.exists() {
        return Ok(state);
    }
    let io_err = |source| EvalError::RunDir {
        path: state.clone(),
        source,
    };
    if state.exists() {
        make_writable(&state);
        crate::remove::remove_tree(&state).map_err(io_err)?;
    }
    std::fs::create_dir_all(&state).map_err(io_err)?;
    let trace = trace_root.join("prepare");
    std::fs::create_dir_all(&trace).map_err(io_err)?;
    let mut stdin = Vec::new();
    for t in settings.suite.split(Split::Train) {
        let line = json!({"id": t.id, "group": t.group, "input": t.input, "expected": t.expected});
        stdin.extend_from_slice(line.to_string().as_bytes());
        stdin.push(b'\n');
    }
    let mut env = base_env(&state);
    env.push(("HEVO_PARAMS".into(), harness.params_json()));
    let prepare_id = format!(
        "{}prepare",
        crate::model_access::TrialRef::prefix(&settings.run_id, candidate_id)
    );
    env.push(("HEVO_TRIAL_ID".into(), opaque_id(&prepare_id)));
    // Model calls made in prepare are the candidate's cost too: they get their own key and
    // land in the ledger like a trial's.
    let ticket = match &settings.model_access {
        Some(access) => {
            let (model_env, ticket) = access
                .open(&prepare_id, &trace, &Default::default())
                .map_err(|e| EvalError::Prepare {
                    harness: harness.name.clone(),
                    message: format!("cannot open a gateway key: {e}"),
                    trace: trace.clone(),
                })?;
            env.extend(model_env.vars());
            Some(ticket)
        }
        None => {
            env.extend(settings.model_env.vars());
            None
        }
    };
    let spec = LaunchSpec {
        argv,
        cwd: state.clone(),
        env,
        stdin,
        timeout: ev.timeout_of(harness).max(Duration::from_secs(600)),
        grace: settings.grace,
        stdout_path: Some(trace.join("stdout")),
        stderr_path: Some(trace.join("stderr")),
        output_cap: settings.output_cap,
        tail_bytes: 0,
        cancel: settings.cancel.clone(),
        access: Access {
            read_only: vec![harness.dir.clone()],
            hidden: vec![run_dir.to_path_buf(), settings.suite.dir.clone()],
            ..Access::default()
        },
    };
    let fail = |message: String| EvalError::Prepare {
        harness: harness.name.clone(),
        message,
        trace: trace.clone(),
    };
    let launched = settings.launcher.launch(spec).await;
    if let (Some(access), Some(ticket)) = (&settings.model_access, ticket) {
        access.close(ticket).await;
    }
    let out = launched.map_err(|e| fail(e.to_string()))?;
    if let Some(reason) = settings.cancel.reason() {
        return Err(EvalError::Interrupted { done: 0, reason });
    }
    match out.exit {
        Exit::Code(0) if !out.disk.is_some_and(|d| d.over()) => {}
        other => {
            let limits = out
                .limits_cause()
                .map(|c| format!("; {c}"))
                .unwrap_or_default();
            return Err(fail(format!("it {other}{limits}")));
        }
    }
    make_read_only(&state);
    std::fs::write(&marker, b"").map_err(io_err)?;
    Ok(state)
}

/// Sets the mode of every file and folder under `path`, never following a link: the
/// state is written by the harness's `prepare`, which could leave a link to the store, the
/// traces or any file of the user's (made world-readable, or unwritable, through it).
fn set_mode(path: &Path, file_mode: u32, dir_mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => set_mode(&p, file_mode, dir_mode),
                Ok(t) if t.is_file() => {
                    let _ =
                        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(file_mode));
                }
                // Links, sockets, FIFOs: left as they are.
                _ => {}
            }
        }
    }
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(dir_mode));
}

fn make_read_only(path: &Path) {
    set_mode(path, 0o444, 0o555);
}

fn make_writable(path: &Path) {
    // Directories first, so their entries can be listed and changed.
    let _ = std::fs::set_permissions(
        path,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    );
    set_mode(path, 0o644, 0o755);
}
