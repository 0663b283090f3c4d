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
