//! What the agent of one task works from: the initial harness's trials, the task's
//! workspace (README.md, task.json, trajectory/, tests/) and the agent's call.

use crate::proposer::agent::{run_agent, AgentCall, AgentOutcome};
use hevo_runtime::eval::{self, EvalError, EvalOptions};
use hevo_runtime::launch::with_suffix;
use hevo_runtime::store::Store;
use hevo_runtime::suite::Suite;
use hevo_runtime::task::Task;
use hevo_runtime::trial::copy_tree;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use super::{io, render_prompt, render_readme, SynthError, SynthOptions};

/// One trial of the initial harness, as the agent and the checks need it.
#[derive(Clone, Debug)]
pub(super) struct InitialTrial {
    pub(super) task_id: String,
    pub(super) status: String,
    pub(super) error: Option<String>,
    pub(super) wall_ms: u64,
    pub(super) answer: Value,
    /// `<prefix>.stdout`, `.stderr`, `.workdir/`, `<prefix>/model_calls.jsonl`.
    pub(super) trace_prefix: PathBuf,
}

/// Evaluates the initial harness once on every chosen split, keeping its working
/// directories; resumes like `hevo eval` when run again.
pub(super) fn run_initial(
    opts: &SynthOptions,
    suite: &Suite,
    run_dir: &Path,
) -> Result<Vec<InitialTrial>, SynthError> {
    let mut out = Vec::new();
    for &split in &opts.splits {
        if suite.split(split).is_empty() {
            continue;
        }
        let mut o = EvalOptions::new(&opts.harness_dir, &suite.dir);
        o.split = split;
        o.run_dir = Some(run_dir.to_path_buf());
        o.jobs = opts.jobs;
        o.model_access = opts.model_access.clone();
        o.cancel = opts.cancel.clone();
        o.keep_workdirs = true;
        let plan = eval::plan(o)?;
        match eval::run_with(&plan, opts.launcher.clone(), None) {
            Ok(_) => {}
            Err(EvalError::Interrupted { reason, .. }) => {
                return Err(SynthError::Interrupted(reason))
            }
            Err(e) => return Err(e.into()),
        }
        let store = Store::open_read_only(&plan.run_dir.join("hevo.db"))
            .map_err(|e| SynthError::Internal(e.to_string()))?;
        let candidate = store
            .find_candidate(
                &plan.run_id,
                &plan.harness.code_hash,
                &plan.harness.params_json(),
            )
            .map_err(|e| SynthError::Internal(e.to_string()))?
            .ok_or_else(|| SynthError::Internal("the initial harness has no candidate".into()))?;
        let ids: std::collections::HashSet<&str> =
            suite.split(split).iter().map(|t| t.id.as_str()).collect();
        for r in store
            .trials_of(candidate)
            .map_err(|e| SynthError::Internal(e.to_string()))?
        {
            if r.trial_index != 0 || !ids.contains(r.task_id.as_str()) {
                continue;
            }
            out.push(InitialTrial {
                task_id: r.task_id,
                status: r.status,
                error: r.error,
                wall_ms: r.wall_ms,
                answer: r
                    .answer
                    .and_then(|a| serde_json::from_str(&a).ok())
                    .unwrap_or(Value::Null),
                trace_prefix: r.trace_path.map(PathBuf::from).unwrap_or_default(),
            });
        }
    }
    Ok(out)
}

/// Writes a task's workspace: README.md, task.json, trajectory/ and an empty tests/.
pub(super) fn write_workspace(
    ws: &Path,
    task: &Task,
    suite: &Suite,
    trial: Option<&InitialTrial>,
    opts: &SynthOptions,
) -> Result<(), SynthError> {
    let _ = hevo_runtime::remove::remove_tree(ws);
    let traj = ws.join("trajectory");
    std::fs::create_dir_all(traj.join("workdir")).map_err(io("cannot create a workspace"))?;
    std::fs::create_dir_all(ws.join("tests")).map_err(io("cannot create a workspace"))?;
    let write = |name: &Path, text: String| {
        std::fs::write(name, text).map_err(io(format!("cannot write `{}`", name.display())))
    };
    write(
        &ws.join("README.md"),
        render_readme(opts.per_task, opts.test_timeout),
    )?;
    let task_json = json!({
        "id": task.id,
        "group": task.group,
        "input": task.input,
        "description": suite.config.description,
    });
    write(&ws.join("task.json"), pretty(&task_json))?;
    let Some(trial) = trial else {
        write(&traj.join("answer.json"), "null\n".into())?;
        write(
            &traj.join("status.json"),
            pretty(&json!({"answered": false, "error": "the initial harness did not run"})),
        )?;
        return Ok(());
    };
    let answered = matches!(trial.status.as_str(), "pass" | "fail");
    write(&traj.join("answer.json"), pretty(&trial.answer))?;
    // Whether it answered, never the scorer's verdict (that would tell `expected`).
    let error = if answered { None } else { trial.error.clone() };
    write(
        &traj.join("status.json"),
        pretty(&json!({"answered": answered, "error": error, "wall_ms": trial.wall_ms})),
    )?;
    for (from, to) in [
        (with_suffix(&trial.trace_prefix, "stdout"), "stdout.txt"),
        (with_suffix(&trial.trace_prefix, "stderr"), "stderr.txt"),
        (
            trial.trace_prefix.join("model_calls.jsonl"),
            "model_calls.jsonl",
        ),
    ] {
        if from.is_file() {
            std::fs::copy(&from, traj.join(to))
                .map_err(io(format!("cannot copy `{}`", from.display())))?;
        }
    }
    let kept = with_suffix(&trial.trace_prefix, "workdir");
    if kept.is_dir() {
        copy_tree(&kept, &traj.join("workdir"), &[])
            .map_err(io("cannot copy the initial harness's working directory"))?;
    }
    Ok(())
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// Runs the agent in a workspace; returns how it ended, as text.
pub(super) fn call_agent(
    opts: &SynthOptions,
    ws: &Path,
    calls: &Path,
) -> Result<String, SynthError> {
    let call = AgentCall {
        command: opts.agent.command.clone(),
        cwd: ws.to_path_buf(),
        writable: vec![ws.join("tests")],
        prompt: render_prompt(opts.per_task),
        transcript_dir: calls.join("transcript"),
        // One home per task: nothing the agent noted on one task reaches another.
        home: calls.join("home"),
        timeout: opts.agent.timeout,
        model_env: opts.agent.model_env.clone(),
        extra_env: opts.agent.env.clone(),
        cancel: opts.cancel.clone(),
        // Its workspace holds what it may know of the task; the suite and the new suite do
        // not show even where a path it is given holds them.
        hidden: vec![opts.suite_dir.clone(), opts.out.clone()],
    };
    let outcome = hevo_runtime::rt::block_on(run_agent(&*opts.launcher, &call))
        .map_err(io("cannot run the agent"))?;
    Ok(match outcome {
        AgentOutcome::Finished => "finished".into(),
        AgentOutcome::Cancelled(reason) => return Err(SynthError::Interrupted(reason)),
        // Its tests are still checked: an agent that wrote tests and then failed may have
        // written good ones.
        AgentOutcome::Failed(why) => format!("failed ({why})"),
        AgentOutcome::TimedOut => {
            format!("ran past its {} s limit", opts.agent.timeout.as_secs())
        }
    })
}
