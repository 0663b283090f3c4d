//! The built-in analyzer of HarnessPro (SPEC section 3, step 2), without a model: it reads a
//! candidate's trial traces and reports measurable waste in a fixed JSON schema.
//!
//! Per trial it reads `<trace prefix>.stdout` and `.stderr` and the gateway's
//! `<trace prefix>/model_calls.jsonl` (one `request` and one `response` line per call) and
//! flags:
//!
//! - `growing_input`: input tokens per call growing within a trial (at least 3 calls, none
//!   smaller than the one before, the last at least twice the first): the prompt carries a
//!   growing history;
//! - `repeated_output` / `repeated_prompt`: identical model answers or identical requests
//!   within a trial;
//! - `calls_after_final`: calls made after a response that already was the trial's final
//!   answer;
//! - `large_dump`: a stdout or stderr above [`LARGE_OUTPUT_BYTES`], or one request message
//!   above [`LARGE_MESSAGE_CHARS`] characters (a whole file pasted into a prompt);
//! - `rerun_passed_check` / `repeated_tool_output`: a tool call repeated after its first
//!   result said it passed, or repeated with the same arguments and the same result
//!   (`tools.rs`).
//!
//! Every finding names its evidence: the file and the 1-based line range. The result is
//! saved as `diagnosis.json` beside the candidate in the archive.

use std::path::{Path, PathBuf};

use hevo_runtime::launch::with_suffix;
use hevo_runtime::store::TrialRow;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod calls;
#[cfg(test)]
mod tests;
mod tools;

pub(crate) use self::calls::content_text;
use self::calls::{read_calls, Call};

/// A stdout or stderr larger than this (bytes) is a large dump.
pub const LARGE_OUTPUT_BYTES: u64 = 64 * 1024;

/// One request message longer than this (characters) is a large dump into the prompt.
pub const LARGE_MESSAGE_CHARS: usize = 20_000;

/// Where a finding's evidence is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The trace file.
    pub file: PathBuf,
    /// First and last line (1-based, inclusive).
    pub lines: [usize; 2],
}

/// One measurable problem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// A stable name of the check (`growing_input`, `repeated_output`, `repeated_prompt`,
    /// `calls_after_final`, `large_dump`, `rerun_passed_check`, `repeated_tool_output`).
    pub kind: String,
    /// What was found, with its numbers.
    pub finding: String,
    /// What it does to the pass rate (measured: the trial's outcome).
    pub effect_on_pass_rate: String,
    /// What it costs (measured tokens, calls or bytes).
    pub effect_on_cost: String,
    /// The task and trial it was found in, and the part of the harness it points to.
    pub source: String,
    /// Where to look.
    pub evidence: Evidence,
}

/// The analyzer's result for one candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The candidate's name.
    pub candidate: String,
    /// Who produced it (`builtin`).
    pub producer: String,
    /// Trials read.
    pub trials: usize,
    /// The findings, in task and trial order.
    pub findings: Vec<Finding>,
}

/// The file name of a diagnosis beside its candidate.
pub const DIAGNOSIS_FILE: &str = "diagnosis.json";

/// Diagnoses a candidate from its trial rows (their trace prefixes).
pub fn diagnose(candidate: &str, rows: &[TrialRow]) -> Diagnosis {
    let mut findings = Vec::new();
    for row in rows {
        if let Some(prefix) = &row.trace_path {
            diagnose_trial(row, Path::new(prefix), &mut findings);
        }
    }
    Diagnosis {
        candidate: candidate.to_string(),
        producer: "builtin".into(),
        trials: rows.len(),
        findings,
    }
}

/// Writes `diagnosis` as `diagnosis.json` in `candidate_dir`.
pub fn save(candidate_dir: &Path, diagnosis: &Diagnosis) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(diagnosis).map_err(std::io::Error::other)?;
    crate::archive::write_atomic(&candidate_dir.join(DIAGNOSIS_FILE), &bytes)
}

fn diagnose_trial(row: &TrialRow, prefix: &Path, out: &mut Vec<Finding>) {
    let source = format!("task `{}`, trial {}", row.task_id, row.trial_index);
    let outcome = format!(
        "none measured: the trial ended `{}` with outcome {}",
        row.status, row.outcome
    );
    for stream in ["stdout", "stderr"] {
        let file = with_suffix(prefix, stream);
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        if meta.len() > LARGE_OUTPUT_BYTES {
            let lines = std::fs::read(&file)
                .map(|b| b.iter().filter(|&&c| c == b'\n').count().max(1))
                .unwrap_or(1);
            out.push(Finding {
                kind: "large_dump".into(),
                finding: format!(
                    "the harness wrote {} bytes to {stream} ({lines} lines)",
                    meta.len()
                ),
                effect_on_pass_rate: outcome.clone(),
                effect_on_cost: format!(
                    "{} bytes of output; if fed to a model, about {} tokens",
                    meta.len(),
                    meta.len() / 4
                ),
                source: format!("{source}: the harness's {stream} (whole files or logs printed)"),
                evidence: Evidence {
                    file,
                    lines: [1, lines],
                },
            });
        }
    }
    let trace = prefix.join("model_calls.jsonl");
    let Ok(text) = std::fs::read_to_string(&trace) else {
        return;
    };
    let (calls, tools) = read_calls(&text);
    let ev = |a: usize, b: usize| Evidence {
        file: trace.clone(),
        lines: [a.min(b), a.max(b)],
    };
    let line_of = |c: &Call| c.request_line.or(c.response_line).unwrap_or(1);
    let end_of = |c: &Call| c.response_line.or(c.request_line).unwrap_or(1);

    // Input tokens per call growing within the trial.
    let inputs: Vec<u64> = calls.iter().filter_map(|c| c.input_tokens).collect();
    if inputs.len() >= 3
        && inputs.len() == calls.len()
        && inputs.windows(2).all(|w| w[1] >= w[0])
        && inputs[inputs.len() - 1] >= 2 * inputs[0].max(1)
    {
        let total: u64 = inputs.iter().sum();
        let flat = inputs[0] * inputs.len() as u64;
        out.push(Finding {
            kind: "growing_input".into(),
            finding: format!(
                "input tokens per call grew from {} to {} over {} calls",
                inputs[0],
                inputs[inputs.len() - 1],
                inputs.len()
            ),
            effect_on_pass_rate: outcome.clone(),
            effect_on_cost: format!(
                "{total} input tokens; {} more than {} calls at the first call's size",
                total - flat,
                inputs.len()
            ),
            source: format!("{source}: the prompt carries the whole history into every call"),
            evidence: ev(line_of(&calls[0]), end_of(&calls[calls.len() - 1])),
        });
    }

    // Identical outputs and identical prompts.
    for (kind, what, key) in [
        ("repeated_output", "model answer", 0),
        ("repeated_prompt", "request", 1),
    ] {
        let text_of = |c: &Call| {
            if key == 0 {
                c.output.clone()
            } else {
                c.prompt.clone()
            }
        };
        let mut seen: Vec<(String, usize)> = Vec::new();
        let mut reported: Vec<String> = Vec::new();
        for (i, c) in calls.iter().enumerate() {
            let Some(t) = text_of(c) else { continue };
            if let Some(&(_, first)) = seen.iter().find(|(s, _)| *s == t) {
                if reported.contains(&t) {
                    continue;
                }
                reported.push(t.clone());
                let repeats: Vec<&Call> = calls
                    .iter()
                    .filter(|d| text_of(d).as_deref() == Some(t.as_str()))
                    .collect();
                let wasted: u64 = repeats[1..]
                    .iter()
                    .map(|d| d.input_tokens.unwrap_or(0) + d.output_tokens)
                    .sum();
                out.push(Finding {
                    kind: kind.into(),
                    finding: format!(
                        "the same {what} came {} times in one trial (calls {} and {})",
                        repeats.len(),
                        first,
                        i
                    ),
                    effect_on_pass_rate: outcome.clone(),
                    effect_on_cost: format!(
                        "{wasted} tokens in the {} repeated call(s)",
                        repeats.len() - 1
                    ),
                    source: format!("{source}: a loop that asks again without new information"),
                    evidence: ev(line_of(&calls[first]), end_of(c)),
                });
            } else {
                seen.push((t, i));
            }
        }
    }

    // Calls after the answer was final.
    if let Some(answer) = final_answer(row) {
        if let Some(k) = calls
            .iter()
            .position(|c| c.output.as_deref().is_some_and(|o| is_answer(o, &answer)))
        {
            let after = &calls[k + 1..];
            if !after.is_empty() {
                let tokens: u64 = after
                    .iter()
                    .map(|c| c.input_tokens.unwrap_or(0) + c.output_tokens)
                    .sum();
                out.push(Finding {
                    kind: "calls_after_final".into(),
                    finding: format!(
                        "call {k} already answered `{answer}`, the final answer; {} more call(s) followed",
                        after.len()
                    ),
                    effect_on_pass_rate: outcome.clone(),
                    effect_on_cost: format!("{tokens} tokens in {} call(s) after the answer", after.len()),
                    source: format!("{source}: no stop once the answer is known"),
                    evidence: ev(line_of(&after[0]), end_of(&after[after.len() - 1])),
                });
            }
        }
    }

    // Tool calls repeated after they passed, or with the same result.
    for (kind, finding, cost, a, b) in tools.waste() {
        let hint = if kind == "rerun_passed_check" {
            "a check run again after it passed (stop once it passes, or keep its result)"
        } else {
            "a tool call repeated without new information (keep its result)"
        };
        out.push(Finding {
            kind: kind.into(),
            finding,
            effect_on_pass_rate: outcome.clone(),
            effect_on_cost: cost,
            source: format!("{source}: {hint}"),
            evidence: ev(a, b),
        });
    }

    // One huge message in a request.
    if let Some(c) = calls
        .iter()
        .filter(|c| c.longest_message > LARGE_MESSAGE_CHARS)
        .max_by_key(|c| c.longest_message)
    {
        let n = calls
            .iter()
            .filter(|c| c.longest_message > LARGE_MESSAGE_CHARS)
            .count();
        out.push(Finding {
            kind: "large_dump".into(),
            finding: format!(
                "{n} request(s) hold a message above {LARGE_MESSAGE_CHARS} characters (largest {})",
                c.longest_message
            ),
            effect_on_pass_rate: outcome.clone(),
            effect_on_cost: format!(
                "about {} input tokens for the largest message",
                c.longest_message / 4
            ),
            source: format!("{source}: a whole file or output pasted into the prompt"),
            evidence: ev(line_of(c), line_of(c)),
        });
    }
}

/// The trial's parsed answer as text, if it has one.
fn final_answer(row: &TrialRow) -> Option<String> {
    let raw = row.answer.as_deref()?;
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::String(s)) => Some(s),
        Ok(Value::Null) => None,
        Ok(v) => Some(v.to_string()),
        Err(_) => Some(raw.to_string()),
    }
    .filter(|s| !s.trim().is_empty())
}

/// Whether a model's output is exactly the final answer (trimmed), or a JSON object whose
/// `answer` is it.
fn is_answer(output: &str, answer: &str) -> bool {
    let o = output.trim();
    if o == answer.trim() {
        return true;
    }
    match serde_json::from_str::<Value>(o) {
        Ok(Value::Object(m)) => m.get("answer").is_some_and(|a| match a {
            Value::String(s) => s.trim() == answer.trim(),
            v => serde_json::to_string(v).ok().as_deref() == Some(answer),
        }),
        _ => false,
    }
}
