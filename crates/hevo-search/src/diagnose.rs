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
//!   (`crate::diagnose_tools`).
//!
//! Every finding names its evidence: the file and the 1-based line range. The result is
//! saved as `diagnosis.json` beside the candidate in the archive.

use std::path::{Path, PathBuf};

use hevo_runtime::store::TrialRow;
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// One model call read back from a trace.
struct Call {
    /// Line of its request (1-based), if traced.
    request_line: Option<usize>,
    /// The request's messages (or the whole body), compact JSON.
    prompt: Option<String>,
    /// Line of its response.
    response_line: Option<usize>,
    /// The answer's text.
    output: Option<String>,
    /// Input tokens (uncached + cached) the response reports.
    input_tokens: Option<u64>,
    /// Output tokens it reports.
    output_tokens: u64,
    /// The longest message of the request, in characters.
    longest_message: usize,
}

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

fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn diagnose_trial(row: &TrialRow, prefix: &Path, out: &mut Vec<Finding>) {
    let source = format!("task `{}`, trial {}", row.task_id, row.trial_index);
    let outcome = format!(
        "none measured: the trial ended `{}` with outcome {}",
        row.status, row.outcome
    );
    for stream in ["stdout", "stderr"] {
        let file = with_suffix(prefix, &format!(".{stream}"));
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

/// Pairs the trace's request and response lines into calls (by `seq`), and collects the
/// tool calls and results they carry.
fn read_calls(text: &str) -> (Vec<Call>, crate::diagnose_tools::ToolLog) {
    let mut tools = crate::diagnose_tools::ToolLog::default();
    let mut calls: Vec<(u64, Call)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let seq = v["seq"].as_u64().unwrap_or(i as u64);
        let idx = match calls.iter().position(|(s, _)| *s == seq) {
            Some(k) => k,
            None => {
                calls.push((
                    seq,
                    Call {
                        request_line: None,
                        prompt: None,
                        response_line: None,
                        output: None,
                        input_tokens: None,
                        output_tokens: 0,
                        longest_message: 0,
                    },
                ));
                calls.len() - 1
            }
        };
        let call = &mut calls[idx].1;
        let body = &v["body"];
        match v["type"].as_str() {
            Some("request") => {
                tools.request(body, i + 1);
                call.request_line = Some(i + 1);
                let prompt = body.get("messages").unwrap_or(body);
                call.prompt = Some(prompt.to_string());
                call.longest_message = body["messages"]
                    .as_array()
                    .map(|ms| {
                        ms.iter()
                            .map(|m| content_text(&m["content"]).chars().count())
                    })
                    .and_then(|it| it.max())
                    .unwrap_or(0);
            }
            Some("response") => {
                call.response_line = Some(i + 1);
                let text = body["choices"][0]["message"]["content"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| {
                        body.get("content")
                            .map(content_text)
                            .filter(|s| !s.is_empty())
                    });
                call.output = text;
                let u = &body["usage"];
                let input = u["prompt_tokens"].as_u64().or_else(|| {
                    u["input_tokens"].as_u64().map(|x| {
                        x + u["cache_read_input_tokens"].as_u64().unwrap_or(0)
                            + u["cache_creation_input_tokens"].as_u64().unwrap_or(0)
                    })
                });
                call.input_tokens = input;
                call.output_tokens = u["completion_tokens"]
                    .as_u64()
                    .or_else(|| u["output_tokens"].as_u64())
                    .unwrap_or(0);
                let tokens = input.map(|x| x + call.output_tokens);
                tools.response(body, i + 1, tokens);
            }
            _ => {}
        }
    }
    (calls.into_iter().map(|(_, c)| c).collect(), tools)
}

/// The text of a message's content: a string, or the `text` of its parts.
pub(crate) fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hevo_runtime::spend::Spend;
    use serde_json::json;

    fn row(prefix: &Path, answer: &str) -> TrialRow {
        TrialRow {
            run_id: "r".into(),
            candidate_id: 1,
            task_id: "t1".into(),
            trial_index: 0,
            outcome: 1.0,
            status: "pass".into(),
            spend: Spend::default(),
            wall_ms: 5,
            attempts: 1,
            trace_path: Some(prefix.to_string_lossy().into_owned()),
            error: None,
            answer: Some(json!(answer).to_string()),
            task_key: String::new(),
        }
    }

    /// Writes a gateway trace: one request and one response line per `(prompt, output,
    /// prompt tokens)`.
    fn trace(prefix: &Path, calls: &[(&str, &str, u64)]) {
        std::fs::create_dir_all(prefix).unwrap();
        let mut text = String::new();
        for (seq, (prompt, output, tokens)) in calls.iter().enumerate() {
            let req = json!({"seq": seq, "type": "request", "api": "openai",
                "body": {"model": "m", "messages": [{"role": "user", "content": prompt}]}});
            let resp = json!({"seq": seq, "type": "response", "api": "openai", "status": 200,
                "body": {"choices": [{"message": {"role": "assistant", "content": output}}],
                         "usage": {"prompt_tokens": tokens, "completion_tokens": 2}}});
            text += &format!("{req}\n{resp}\n");
        }
        std::fs::write(prefix.join("model_calls.jsonl"), text).unwrap();
        std::fs::write(with_suffix(prefix, ".stdout"), "{\"answer\": \"x\"}\n").unwrap();
    }

    #[test]
    fn a_clean_trace_has_no_finding() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("c1/t1/0");
        trace(
            &p,
            &[("think about it", "step", 100), ("now answer", "yes", 120)],
        );
        let d = diagnose("clean", &[row(&p, "yes")]);
        assert!(d.findings.is_empty(), "{:?}", d.findings);
        assert_eq!(d.trials, 1);
    }

    #[test]
    fn planted_waste_is_found_with_its_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("c1/t1/0");
        let dump = "config line\n".repeat(2_000);
        trace(
            &p,
            &[
                ("read the config", "ok", 100),
                (&dump, "yes", 6_000),
                ("check again", "yes", 6_100),
            ],
        );
        let d = diagnose("wasteful", &[row(&p, "yes")]);
        let kind = |k: &str| d.findings.iter().find(|f| f.kind == k).cloned();
        let grow = kind("growing_input").expect("growing input");
        assert_eq!(grow.evidence.lines, [1, 6]);
        assert!(
            grow.finding.contains("from 100 to 6100 over 3 calls"),
            "{grow:?}"
        );
        let rep = kind("repeated_output").expect("repeated output");
        assert_eq!(rep.evidence.lines, [3, 6]);
        let after = kind("calls_after_final").expect("calls after final");
        assert_eq!(after.evidence.lines, [5, 6]);
        assert!(
            after.effect_on_cost.contains("6102 tokens in 1 call(s)"),
            "{after:?}"
        );
        let dump = kind("large_dump").expect("a dump into the prompt");
        assert_eq!(dump.evidence.lines, [3, 3]);
        assert!(kind("repeated_prompt").is_none(), "{:?}", d.findings);

        let cand = tmp.path().join("cand");
        std::fs::create_dir_all(&cand).unwrap();
        save(&cand, &d).unwrap();
        let back: Diagnosis =
            serde_json::from_slice(&std::fs::read(cand.join(DIAGNOSIS_FILE)).unwrap()).unwrap();
        assert_eq!(back, d);
    }

    /// Writes a gateway trace from `(seq, type, api, body)` lines; returns the prefix.
    fn raw_trace(dir: &Path, lines: &[(u64, &str, &str, Value)]) -> PathBuf {
        let p = dir.join("c1/t1/0");
        std::fs::create_dir_all(&p).unwrap();
        let text: String = lines
            .iter()
            .map(|(seq, ty, api, body)| {
                format!(
                    "{}\n",
                    json!({"seq": seq, "type": ty, "api": api, "body": body})
                )
            })
            .collect();
        std::fs::write(p.join("model_calls.jsonl"), text).unwrap();
        p
    }

    fn kinds(d: &Diagnosis) -> Vec<&str> {
        d.findings.iter().map(|f| f.kind.as_str()).collect()
    }

    #[test]
    fn a_check_rerun_after_it_passed_is_found_in_openai_chat() {
        let tmp = tempfile::tempdir().unwrap();
        let user = json!({"role": "user", "content": "fix the bug"});
        let ask = |id: &str, args: &str| {
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": "run_tests", "arguments": args}}]})
        };
        let result =
            |id: &str, text: &str| json!({"role": "tool", "tool_call_id": id, "content": text});
        let usage = |n: u64| json!({"prompt_tokens": n, "completion_tokens": 10});
        let p = raw_trace(
            tmp.path(),
            &[
                (0, "request", "openai", json!({"messages": [user]})),
                (
                    0,
                    "response",
                    "openai",
                    json!({"choices": [{"message": ask("c1", "{\"path\": \"tests\"}")}], "usage": usage(50)}),
                ),
                (
                    1,
                    "request",
                    "openai",
                    json!({"messages": [user, ask("c1", "{\"path\": \"tests\"}"),
                    result("c1", "===== 5 passed in 0.10s =====")]}),
                ),
                (
                    1,
                    "response",
                    "openai",
                    json!({"choices": [{"message": ask("c2", "{\"path\":\"tests\"}")}], "usage": usage(60)}),
                ),
                (
                    2,
                    "request",
                    "openai",
                    json!({"messages": [user, ask("c1", "{\"path\": \"tests\"}"),
                    result("c1", "===== 5 passed in 0.10s ====="), ask("c2", "{\"path\":\"tests\"}"),
                    result("c2", "===== 5 passed in 0.12s =====")]}),
                ),
                (
                    2,
                    "response",
                    "openai",
                    json!({"choices": [{"message": {"role": "assistant", "content": "done"}}], "usage": usage(70)}),
                ),
            ],
        );
        let d = diagnose("rerun", &[row(&p, "done")]);
        assert_eq!(kinds(&d), ["rerun_passed_check"], "{:?}", d.findings);
        let f = &d.findings[0];
        // From the request that first showed the pass to the request holding the re-run's result.
        assert_eq!(f.evidence.lines, [3, 5]);
        assert!(
            f.finding
                .contains("`run_tests {\"path\":\"tests\"}` passed"),
            "{f:?}"
        );
        assert!(f.finding.contains("run 1 more time(s)"), "{f:?}");
        assert!(
            f.effect_on_cost
                .starts_with("70 tokens in the 1 model call(s)"),
            "{f:?}"
        );
    }

    #[test]
    fn a_tool_repeated_with_the_same_result_is_found_in_anthropic_messages() {
        let tmp = tempfile::tempdir().unwrap();
        let use_ = |id: &str| json!({"type": "tool_use", "id": id, "name": "grep", "input": {"pattern": "foo"}});
        let res = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": [{"type": "text", "text": "no matches"}]});
        let user = json!({"role": "user", "content": "where is foo?"});
        let usage = json!({"input_tokens": 40, "output_tokens": 5});
        let p = raw_trace(
            tmp.path(),
            &[
                (0, "request", "anthropic", json!({"messages": [user]})),
                (
                    0,
                    "response",
                    "anthropic",
                    json!({"content": [use_("t1")], "usage": usage}),
                ),
                (
                    1,
                    "request",
                    "anthropic",
                    json!({"messages": [user,
                    {"role": "assistant", "content": [use_("t1")]}, {"role": "user", "content": [res("t1")]}]}),
                ),
                (
                    1,
                    "response",
                    "anthropic",
                    json!({"content": [use_("t2")], "usage": usage}),
                ),
                (
                    2,
                    "request",
                    "anthropic",
                    json!({"messages": [user,
                    {"role": "assistant", "content": [use_("t1")]}, {"role": "user", "content": [res("t1")]},
                    {"role": "assistant", "content": [use_("t2")]}, {"role": "user", "content": [res("t2")]}]}),
                ),
                (
                    2,
                    "response",
                    "anthropic",
                    json!({"content": [{"type": "text", "text": "nowhere"}], "usage": usage}),
                ),
            ],
        );
        let d = diagnose("repeat", &[row(&p, "nowhere")]);
        assert_eq!(kinds(&d), ["repeated_tool_output"], "{:?}", d.findings);
        assert_eq!(d.findings[0].evidence.lines, [2, 5]);
        assert!(
            d.findings[0].finding.contains("ran 2 times"),
            "{:?}",
            d.findings[0]
        );
    }

    #[test]
    fn responses_items_parallel_calls_and_new_arguments_are_told_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let call = |id: &str, cmd: &str| json!({"type": "function_call", "call_id": id, "name": "sh", "arguments": json!({"cmd": cmd}).to_string()});
        let out = |id: &str, text: &str| json!({"type": "function_call_output", "call_id": id, "output": text});
        let usage = json!({"input_tokens": 70, "output_tokens": 3});
        let p = raw_trace(
            tmp.path(),
            &[
                (0, "request", "openai", json!({"input": "build it"})),
                // Two identical calls asked together (no result known yet), one other.
                (
                    0,
                    "response",
                    "openai",
                    json!({"output": [call("a", "make check"), call("b", "make check"), call("c", "ls")], "usage": usage}),
                ),
                (
                    1,
                    "request",
                    "openai",
                    json!({"input": [call("a", "make check"), out("a", "exit code 0"),
                    call("b", "make check"), out("b", "exit code 0"), call("c", "ls"), out("c", "Makefile")]}),
                ),
                (
                    1,
                    "response",
                    "openai",
                    json!({"output": [call("d", "make check"), call("e", "ls -l")], "usage": usage}),
                ),
                (
                    2,
                    "request",
                    "openai",
                    json!({"input": [call("d", "make check"), out("d", "exit code 0"), call("e", "ls -l"), out("e", "Makefile")]}),
                ),
                (
                    2,
                    "response",
                    "openai",
                    json!({"output": [{"type": "message", "content": [{"type": "output_text", "text": "built"}]}], "usage": usage}),
                ),
            ],
        );
        let d = diagnose("mixed", &[row(&p, "built")]);
        // `make check` passed (call a) and `d` was asked after that: one re-run, not two
        // (`b` was asked in the same response as `a`); `ls` and `ls -l` differ.
        assert_eq!(kinds(&d), ["rerun_passed_check"], "{:?}", d.findings);
        assert!(
            d.findings[0].finding.contains("run 1 more time(s)"),
            "{:?}",
            d.findings[0]
        );
        assert_eq!(d.findings[0].evidence.lines, [3, 5]);
    }
}
