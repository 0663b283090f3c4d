//! The real agent CLIs, headless, through the gateway in front of the scripted upstream,
//! which answers their first turn with a call to their own file-writing tool: Claude Code
//! (npm `@anthropic-ai/claude-code@2.1.332`) and Codex (npm `@openai/codex@0.171.0`).

use std::process::Command;

use crate::clients::{client, run, Through};

const INSTALL: &str = "npm install -g @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0";

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_writes_a_file_through_the_gateway() {
    let Some(claude) = client("claude", INSTALL) else {
        return;
    };
    let t = Through::start("from-claude.txt").await;
    let mut command = Command::new("timeout");
    command.arg("300").arg(claude).args([
        "-p",
        "Write the file.",
        "--model",
        "claude-test",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Write Edit Read Bash",
        "--output-format",
        "text",
    ]);
    let mut env = t.env();
    env.extend([
        (
            "CLAUDE_CONFIG_DIR".into(),
            t.home().join(".claude").display().to_string(),
        ),
        (
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into(),
        ),
        ("DISABLE_TELEMETRY".into(), "1".into()),
    ]);
    let (ok, output) = tokio::task::block_in_place(|| run(command, &env, &t.work()));
    t.assert_written(&output);
    assert!(ok, "claude failed:\n{output}");
    let rows = t.assert_ledger_covers_upstream();
    let seen = t.upstream.seen();
    assert!(
        seen.len() >= 2,
        "a tool call and a final turn: {}",
        seen.len()
    );
    let first = &seen[0];
    assert!(first.path.contains("beta=true"), "{}", first.path);
    assert!(first.body["tools"].as_array().unwrap().len() > 5);
    assert!(first.headers.iter().any(|(k, _)| k == "anthropic-beta"));
    assert!(rows.iter().all(|r| r.endpoint.starts_with("anthropic.")));
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_writes_a_file_through_the_gateways_responses_endpoint() {
    let Some(codex) = client("codex", INSTALL) else {
        return;
    };
    let t = Through::start("from-codex.txt").await;
    let codex_home = t.home().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let mut command = Command::new("timeout");
    command.arg("300").arg(codex).args([
        "exec",
        "--skip-git-repo-check",
        "--sandbox",
        "workspace-write",
        "-c",
        "model_provider=hevo",
        "-c",
        "model_providers.hevo.name=\"hevo\"",
        "-c",
        &format!(
            "model_providers.hevo.base_url=\"{}\"",
            t.gateway.openai_base_url()
        ),
        "-c",
        "model_providers.hevo.env_key=\"OPENAI_API_KEY\"",
        "-c",
        "model=\"gpt-test\"",
        "Write the file.",
    ]);
    let mut env = t.env();
    env.push(("CODEX_HOME".into(), codex_home.display().to_string()));
    let (ok, output) = tokio::task::block_in_place(|| run(command, &env, &t.work()));
    let results: Vec<String> = t
        .upstream
        .seen()
        .iter()
        .flat_map(|s| s.body["input"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string())
        .collect();
    t.assert_written(&format!("{output}\ntool results: {results:?}"));
    assert!(ok, "codex failed:\n{output}");
    let rows = t.assert_ledger_covers_upstream();
    assert!(rows.len() >= 2, "{rows:#?}");
    assert!(rows.iter().all(|r| r.endpoint == "openai.responses"));
    let seen = t.upstream.seen();
    assert!(seen[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|tool| tool["name"] == "exec_command"));
    assert!(seen.last().unwrap().body["input"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["type"] == "function_call_output"));
}
