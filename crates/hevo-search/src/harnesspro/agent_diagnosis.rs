//! The agent's diagnosis of one candidate's core-set trajectories (SPEC.md section 3,
//! step 2): its workspace, and the check of what it wrote against the fixed schema.
//!
//! The workspace holds copies of the G trajectories of every core task
//! (`trajectories/<task>/<trial>/{stdout.txt,stderr.txt,model_calls.jsonl}`) and their
//! metrics (`metrics.json`: status, outcome, tokens, dollars, calls, wall time per trial),
//! nothing else: no expected answers, no validation or test task. The agent writes
//! `out/diagnosis.json`:
//!
//! ```json
//! {"findings": [{"kind": "...", "finding": "...", "effect_on_pass_rate": "...",
//!   "effect_on_cost": "...", "source": "...",
//!   "evidence": {"file": "trajectories/r01/0/model_calls.jsonl", "lines": [1, 4]}}]}
//! ```
//!
//! hevo checks every field is there and not empty, and that each evidence file is one of
//! the workspace's trajectory files with the line range inside it; the accepted diagnosis
//! has its evidence pointed back at the real trace files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hevo_runtime::launch::with_suffix;
use hevo_runtime::store::TrialRow;
use serde::Deserialize;

use crate::diagnose::{Diagnosis, Finding};

/// The file the agent writes, relative to its workspace.
pub const OUTPUT: &str = "out/diagnosis.json";

/// The most of [`OUTPUT`] hevo reads.
pub const MAX_OUTPUT_BYTES: u64 = 4 * 1024 * 1024;

/// A diagnosis workspace: the copied trajectory files, by workspace-relative path, with the
/// real trace file each copies.
pub struct Workspace {
    /// Its directory.
    pub dir: PathBuf,
    /// `trajectories/...` path -> the trace file it copies.
    pub files: BTreeMap<String, PathBuf>,
}

/// One trial's metrics as the agent sees them.
#[derive(serde::Serialize)]
struct TrialMetrics<'a> {
    task: &'a str,
    trial: u32,
    status: &'a str,
    outcome: f64,
    input_tokens: u64,
    cached_tokens: u64,
    output_tokens: u64,
    cost_usd: f64,
    model_calls: u64,
    wall_ms: u64,
    files: Vec<String>,
}

/// Writes the workspace of a candidate's core `rows` into `dir` (made afresh).
pub fn write_workspace(dir: &Path, rows: &[TrialRow]) -> std::io::Result<Workspace> {
    if dir.exists() {
        hevo_runtime::remove::remove_tree(dir)?;
    }
    std::fs::create_dir_all(dir.join("out"))?;
    let mut files = BTreeMap::new();
    let mut metrics = Vec::new();
    for r in rows {
        let mut names = Vec::new();
        if let Some(prefix) = &r.trace_path {
            let prefix = Path::new(prefix);
            let sources = [
                (with_suffix(prefix, "stdout"), "stdout.txt"),
                (with_suffix(prefix, "stderr"), "stderr.txt"),
                (prefix.join("model_calls.jsonl"), "model_calls.jsonl"),
            ];
            for (src, name) in sources {
                if !src.is_file() {
                    continue;
                }
                let rel = format!("trajectories/{}/{}/{name}", r.task_id, r.trial_index);
                let dst = dir.join(&rel);
                std::fs::create_dir_all(dst.parent().expect("has a parent"))?;
                std::fs::copy(&src, &dst)?;
                files.insert(rel.clone(), src);
                names.push(rel);
            }
        }
        metrics.push(TrialMetrics {
            task: &r.task_id,
            trial: r.trial_index,
            status: &r.status,
            outcome: r.outcome,
            input_tokens: r.spend.input_tokens,
            cached_tokens: r.spend.cached_tokens,
            output_tokens: r.spend.output_tokens,
            cost_usd: r.spend.cost_usd,
            model_calls: r.spend.calls,
            wall_ms: r.wall_ms,
            files: names,
        });
    }
    let json = serde_json::to_vec_pretty(&metrics).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("metrics.json"), json)?;
    Ok(Workspace {
        dir: dir.to_path_buf(),
        files,
    })
}

/// The prompt of a diagnosis call.
pub fn prompt(candidate: &str, runs: u32) -> String {
    format!(
        "HEVO-HARNESSPRO-DIAGNOSE. You are diagnosing the LLM harness `{candidate}`. The \
         current directory holds its {runs} runs of every core training task: \
         trajectories/<task>/<trial>/ (stdout.txt, stderr.txt, model_calls.jsonl: the model \
         requests and responses) and metrics.json (status, outcome, tokens, dollars, calls \
         and wall time per run). Read the runs of each task together. Find what costs tokens \
         or passes without need, even in passing runs (growing prompts, repeated calls, \
         dumped files, re-run checks), and what makes runs fail. Write {OUTPUT}: \
         {{\"findings\": [{{\"kind\", \"finding\", \"effect_on_pass_rate\", \
         \"effect_on_cost\", \"source\", \"evidence\": {{\"file\": a trajectories/ path, \
         \"lines\": [first, last]}}}}]}}, every field a non-empty string except evidence; \
         lines are 1-based and inclusive. Write nothing else."
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Output {
    findings: Vec<Finding>,
}

/// Reads and checks the agent's `out/diagnosis.json`; the diagnosis with evidence pointing
/// at the real trace files, or what is wrong (naming the file, the finding and the fix).
pub fn read_output(ws: &Workspace, candidate: &str, trials: usize) -> Result<Diagnosis, String> {
    use hevo_runtime::untrusted::{read_text, Refused};
    let path = ws.dir.join(OUTPUT);
    // Only a regular file is read: a link (to a secret, to `/dev/zero`) or a FIFO is refused.
    let text = read_text(&path, MAX_OUTPUT_BYTES).map_err(|e| match e {
        Refused::Io { source, .. } => format!("`{OUTPUT}` was not written ({source})"),
        Refused::Link { target, .. } => {
            format!("`{OUTPUT}` is a symbolic link (to `{target}`), not a file: it is not read")
        }
        Refused::Special { kind, .. } => {
            format!("`{OUTPUT}` is {kind}, not a regular file: it is not read")
        }
        other => format!("`{OUTPUT}`: {other}"),
    })?;
    let out: Output = serde_json::from_str(&text).map_err(|e| {
        format!("`{OUTPUT}` does not match the schema: {e} (expected {{\"findings\": [...]}})")
    })?;
    let mut findings = Vec::with_capacity(out.findings.len());
    for (i, mut f) in out.findings.into_iter().enumerate() {
        let at = format!("`{OUTPUT}`: finding {}", i + 1);
        for (field, value) in [
            ("kind", &f.kind),
            ("finding", &f.finding),
            ("effect_on_pass_rate", &f.effect_on_pass_rate),
            ("effect_on_cost", &f.effect_on_cost),
            ("source", &f.source),
        ] {
            if value.trim().is_empty() {
                return Err(format!("{at}: `{field}` is empty; say what was found"));
            }
        }
        let rel = f.evidence.file.to_string_lossy().into_owned();
        let Some(real) = ws.files.get(&rel) else {
            return Err(format!(
                "{at}: evidence file `{rel}` is not one of the trajectory files (e.g. `{}`)",
                ws.files
                    .keys()
                    .next()
                    .map_or("trajectories/...", String::as_str)
            ));
        };
        let lines = std::fs::read_to_string(ws.dir.join(&rel))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        let [a, b] = f.evidence.lines;
        if a == 0 || a > b || b > lines {
            return Err(format!(
                "{at}: evidence lines [{a}, {b}] are not a range inside `{rel}` ({lines} lines); \
                 use 1-based [first, last] with first <= last <= {lines}"
            ));
        }
        f.evidence.file = real.clone();
        findings.push(f);
    }
    Ok(Diagnosis {
        candidate: candidate.to_string(),
        producer: "agent".into(),
        trials,
        findings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Evidence;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().unwrap();
        let traces = tmp.path().join("traces/c1/r01/0");
        std::fs::create_dir_all(&traces).unwrap();
        std::fs::write(traces.join("model_calls.jsonl"), "{}\n{}\n{}\n").unwrap();
        std::fs::write(
            tmp.path().join("traces/c1/r01/0.stdout"),
            "{\"answer\":1}\n",
        )
        .unwrap();
        let row = TrialRow {
            run_id: "r".into(),
            candidate_id: 1,
            task_id: "r01".into(),
            trial_index: 0,
            outcome: 1.0,
            status: "pass".into(),
            spend: Default::default(),
            wall_ms: 3,
            attempts: 1,
            trace_path: Some(traces.to_string_lossy().into_owned()),
            error: None,
            answer: None,
            task_key: String::new(),
        };
        let ws = write_workspace(&tmp.path().join("ws"), &[row]).unwrap();
        (tmp, ws)
    }

    fn finding(file: &str, lines: [usize; 2]) -> Finding {
        Finding {
            kind: "k".into(),
            finding: "f".into(),
            effect_on_pass_rate: "none".into(),
            effect_on_cost: "3 calls".into(),
            source: "prompt".into(),
            evidence: Evidence {
                file: file.into(),
                lines,
            },
        }
    }

    fn write_out(ws: &Workspace, text: &str) {
        std::fs::write(ws.dir.join(OUTPUT), text).unwrap();
    }

    #[test]
    fn a_valid_diagnosis_points_at_the_real_trace() {
        let (_tmp, ws) = workspace();
        assert!(ws.dir.join("metrics.json").is_file());
        let f = finding("trajectories/r01/0/model_calls.jsonl", [2, 3]);
        write_out(&ws, &serde_json::json!({ "findings": [f] }).to_string());
        let d = read_output(&ws, "c1", 1).unwrap();
        assert_eq!(d.producer, "agent");
        assert!(d.findings[0]
            .evidence
            .file
            .ends_with("traces/c1/r01/0/model_calls.jsonl"));
    }

    #[test]
    fn schema_and_evidence_errors_name_the_finding() {
        let (_tmp, ws) = workspace();
        assert!(read_output(&ws, "c1", 1)
            .unwrap_err()
            .contains("was not written"));
        write_out(&ws, "{\"findings\": [{\"kind\": \"k\"}]}");
        assert!(read_output(&ws, "c1", 1)
            .unwrap_err()
            .contains("does not match the schema"));
        let bad_lines = finding("trajectories/r01/0/model_calls.jsonl", [2, 9]);
        write_out(
            &ws,
            &serde_json::json!({ "findings": [bad_lines] }).to_string(),
        );
        let e = read_output(&ws, "c1", 1).unwrap_err();
        assert!(e.contains("finding 1") && e.contains("3 lines"), "{e}");
        let outside = finding("../../suite/tasks.jsonl", [1, 1]);
        write_out(
            &ws,
            &serde_json::json!({ "findings": [outside] }).to_string(),
        );
        assert!(read_output(&ws, "c1", 1)
            .unwrap_err()
            .contains("not one of the trajectory files"));
        let mut empty = finding("trajectories/r01/0/stdout.txt", [1, 1]);
        empty.source = " ".into();
        write_out(&ws, &serde_json::json!({ "findings": [empty] }).to_string());
        assert!(read_output(&ws, "c1", 1)
            .unwrap_err()
            .contains("`source` is empty"));
    }
}
