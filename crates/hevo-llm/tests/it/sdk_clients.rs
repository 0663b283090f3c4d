//! Harnesses written with the official Python SDKs (pinned: openai 3.57.0, anthropic
//! 2.15.0), streaming and calling tools through the gateway in front of the scripted
//! upstream.

use std::process::Command;

use serde_json::Value;

use crate::clients::{python_with_sdks, run, Through};

fn script(name: &str) -> String {
    format!("{}/tests/it/py/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs a Python harness and parses the JSON line it prints last.
pub(crate) fn run_python(t: &Through, name: &str) -> Option<Value> {
    let python = python_with_sdks()?;
    let mut command = Command::new(python);
    command.arg(script(name));
    let (ok, output) = run(command, &t.env(), &t.work());
    assert!(ok, "{name} failed:\n{output}");
    let line = output
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("{name} printed no JSON:\n{output}"));
    Some(serde_json::from_str(line).unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_sdk_streams_tool_calls_responses_and_embeddings() {
    let t = Through::start("from-openai.txt").await;
    let gateway = t.gateway.gateway().clone();
    let out = {
        let t = &t;
        tokio::task::block_in_place(|| run_python(t, "openai_tools.py"))
    };
    let Some(out) = out else { return };
    t.assert_written(&out.to_string());
    assert_eq!(out["chat_finish"], "tool_calls", "{out}");
    assert_eq!(out["chat_models"], serde_json::json!(["gpt-up-answered"]));
    assert_eq!(out["chat_final"], format!("Wrote {}.", t.target.display()));
    assert_eq!(out["responses_call"], "write_file");
    let events: Vec<&str> = out["responses_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        events.contains(&"response.function_call_arguments.delta"),
        "{out}"
    );
    assert_eq!(events.last(), Some(&"response.completed"));
    assert_eq!(
        out["responses_final"],
        format!("Wrote {}.", t.target.display())
    );
    assert_eq!(out["embeddings"], 2);
    let rows = t.assert_ledger_covers_upstream();
    let endpoints: Vec<&str> = rows.iter().map(|r| r.endpoint.as_str()).collect();
    assert_eq!(
        endpoints,
        [
            "openai.chat_completions",
            "openai.chat_completions",
            "openai.responses",
            "openai.responses",
            "openai.embeddings"
        ]
    );
    // the streamed chat completion was priced by the usage the gateway asked the upstream for
    let seen = t.upstream.seen();
    assert_eq!(seen[0].body["stream_options"]["include_usage"], true);
    assert!(rows[0].input_tokens > 0 && rows[0].output_tokens == 9);
    // tools, tool_calls and role "tool" reached the upstream as the SDK sent them
    assert_eq!(seen[1].body["messages"][3]["role"], "tool");
    assert_eq!(seen[1].body["messages"][2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(seen[1].body["model"], "gpt-up");
    assert_eq!(gateway.run_usage().calls, 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_sdk_streams_tool_use_with_thinking_and_counts_tokens() {
    let t = Through::start("from-anthropic.txt").await;
    let out = {
        let t = &t;
        tokio::task::block_in_place(|| run_python(t, "anthropic_tools.py"))
    };
    let Some(out) = out else { return };
    t.assert_written(&out.to_string());
    assert_eq!(out["stop_reason"], "tool_use", "{out}");
    assert_eq!(out["model"], "claude-up-answered");
    assert_eq!(
        out["stream_deltas"],
        serde_json::json!(["input_json_delta", "signature_delta", "thinking_delta"])
    );
    assert_eq!(out["final_stop"], "end_turn");
    assert_eq!(out["final_text"], format!("Wrote {}.", t.target.display()));
    assert!(out["count_tokens"].as_u64().unwrap() > 0);
    let rows = t.assert_ledger_covers_upstream();
    let endpoints: Vec<&str> = rows.iter().map(|r| r.endpoint.as_str()).collect();
    assert_eq!(
        endpoints,
        [
            "anthropic.messages",
            "anthropic.messages",
            "anthropic.count_tokens",
            "anthropic.messages"
        ]
    );
    let seen = t.upstream.seen();
    // the beta header, cache_control, thinking and its signed block went upstream unchanged
    assert!(seen[0]
        .headers
        .iter()
        .any(|(k, v)| k == "anthropic-beta" && v == "interleaved-thinking-2025-05-14"));
    assert_eq!(
        seen[0].body["system"][0]["cache_control"]["type"],
        "ephemeral"
    );
    assert_eq!(
        seen[1].body["messages"][1]["content"][0]["signature"],
        "sig-1"
    );
    assert_eq!(
        seen[1].body["messages"][2]["content"][0]["type"],
        "tool_result"
    );
    assert!(seen.iter().all(|s| s
        .headers
        .iter()
        .any(|(k, v)| k == "x-api-key" && v == "upstream-secret")));
    // the plain call with temperature 0 went upstream as the SDK sent it
    assert_eq!(seen[3].body["temperature"], 0);
    assert_eq!(seen[3].body["messages"][0]["content"], "hi");
    assert_eq!(out["plain"], "echo: hi");
}
