//! What the gateway forwards, translates and refuses, per backend; the small endpoints; the
//! 404 of unknown paths. Against the scripted upstream behind an `openai` backend
//! (`gpt-test`) and an `anthropic` backend (`claude-test`).

use hevo_llm::CallStatus;
use serde_json::{json, Value};

use crate::clients::Through;
use crate::common::sse_events;

async fn post(t: &Through, path: &str, body: Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", t.gateway.anthropic_base_url()))
        .header("x-api-key", t.key.as_str())
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn tool() -> Value {
    json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}})
}

#[tokio::test]
async fn what_a_backend_cannot_carry_is_refused_in_the_callers_format() {
    let t = Through::start("unused.txt").await;
    let user = json!([{"role": "user", "content": "hi"}]);
    let cases = [
        (
            "/v1/chat/completions",
            json!({"model": "claude-test", "messages": user, "tools": [tool()]}),
            "`tools`",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "claude-test", "messages": [{"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "c", "content": "r"}]}),
            "tool results",
        ),
        (
            "/v1/messages",
            json!({"model": "gpt-test", "max_tokens": 9, "messages": user,
                   "thinking": {"type": "enabled", "budget_tokens": 1024}}),
            "`thinking`",
        ),
        (
            "/v1/messages",
            json!({"model": "gpt-test", "max_tokens": 9, "messages": [{"role": "user",
                "content": [{"type": "image", "source": {}}]}]}),
            "content parts of type `image`",
        ),
        (
            "/v1/messages",
            json!({"model": "gpt-test", "max_tokens": 9, "messages": user,
                   "output_config": {"format": {"type": "json_schema"}}}),
            "`output_config`",
        ),
        (
            "/v1/responses",
            json!({"model": "claude-test", "input": "hi", "tools": [{"type": "function",
                "name": "f", "parameters": {}}]}),
            "`tools`",
        ),
        (
            "/v1/embeddings",
            json!({"model": "claude-test", "input": "hi"}),
            "embeddings",
        ),
        (
            "/v1/messages/count_tokens",
            json!({"model": "gpt-test", "messages": user}),
            "token counting",
        ),
    ];
    for (path, body, needle) in cases {
        let (status, text) = post(&t, path, body.clone()).await;
        assert_eq!(status, 400, "{path} {body} -> {text}");
        let err = json_of(&text);
        let message = if path.starts_with("/v1/messages") {
            assert_eq!(err["type"], "error");
            err["error"]["message"].as_str().unwrap().to_owned()
        } else {
            assert_eq!(err["error"]["type"], "invalid_request_error");
            err["error"]["message"].as_str().unwrap().to_owned()
        };
        assert!(message.contains(needle), "{path}: {message}");
        assert!(message.contains("cannot carry it"), "{path}: {message}");
    }
    assert!(t.upstream.seen().is_empty());
    let rows = t.sink.records();
    assert_eq!(rows.len(), 8);
    assert!(rows.iter().all(|r| r.status == CallStatus::BadRequest));
}

#[tokio::test]
async fn plain_requests_cross_dialects_and_name_the_model_that_answered() {
    let t = Through::start("unused.txt").await;
    // Claude Code's `role: "system"` inside messages, and cache_control, to an OpenAI upstream
    let (status, text) = post(
        &t,
        "/v1/messages",
        json!({"model": "gpt-test", "max_tokens": 20, "messages": [
            {"role": "system", "content": [{"type": "text", "text": "be brief",
                                            "cache_control": {"type": "ephemeral"}}]},
            {"role": "user", "content": "hello"}]}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let v = json_of(&text);
    assert_eq!(v["content"][0]["text"], "echo: hello");
    assert_eq!(v["model"], "gpt-up-answered");
    let seen = t.upstream.seen();
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(
        seen[0].body["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    // the Responses API to an Anthropic upstream, streamed
    let (status, text) = post(
        &t,
        "/v1/responses",
        json!({"model": "claude-test", "instructions": "be brief", "stream": true,
               "input": [{"role": "user", "content": [{"type": "input_text", "text": "yo"}]}]}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let events = sse_events(&text);
    let names: Vec<&str> = events.iter().filter_map(|(e, _)| e.as_deref()).collect();
    assert_eq!(names.first(), Some(&"response.created"));
    assert_eq!(names.last(), Some(&"response.completed"));
    let done = json_of(&events.last().unwrap().1);
    assert_eq!(
        done["response"]["output"][0]["content"][0]["text"],
        "echo: yo"
    );
    assert_eq!(done["response"]["model"], "claude-up-answered");
    assert_eq!(t.upstream.seen()[1].path, "/v1/messages");
    assert_eq!(t.upstream.seen()[1].body["system"], "be brief");
}

#[tokio::test]
async fn requests_beyond_plain_chat_reach_a_same_dialect_upstream_unchanged() {
    let t = Through::start("unused.txt").await;
    let body = json!({"model": "gpt-test", "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {}}},
        "x_vendor_field": {"kept": true}});
    let (status, text) = post(&t, "/v1/chat/completions", body).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(json_of(&text)["model"], "gpt-up-answered");
    let seen = &t.upstream.seen()[0];
    assert_eq!(seen.body["response_format"]["type"], "json_schema");
    assert_eq!(seen.body["x_vendor_field"], json!({"kept": true}));
    assert_eq!(seen.body["model"], "gpt-up");
    // a streamed Anthropic tool call: input_json_delta passes through, stop reason tool_use
    let (status, text) = post(
        &t,
        "/v1/messages?beta=true",
        json!({"model": "claude-test", "max_tokens": 99, "stream": true,
               "messages": [{"role": "user", "content": "w"}],
               "tools": [{"name": "Write", "input_schema": {"type": "object"}}]}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(text.contains("input_json_delta"), "{text}");
    assert!(text.contains("\"stop_reason\":\"tool_use\""), "{text}");
    assert_eq!(t.upstream.seen()[1].path, "/v1/messages?beta=true");
    let rows = t.sink.records();
    assert_eq!(rows[1].endpoint, "anthropic.messages");
    assert_eq!((rows[1].output_tokens, rows[1].status), (9, CallStatus::Ok));
}

#[tokio::test]
async fn small_endpoints_and_unknown_paths() {
    let t = Through::start("unused.txt").await;
    let client = reqwest::Client::new();
    let base = t.gateway.anthropic_base_url();
    let head = client.head(&base).send().await.unwrap();
    assert_eq!(head.status(), 200);
    let model: Value = client
        .get(format!("{base}/v1/models/gpt-test"))
        .bearer_auth(t.key.as_str())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (model["id"].as_str(), model["type"].as_str()),
        (Some("gpt-test"), Some("model"))
    );
    let missing = client
        .get(format!("{base}/v1/nope"))
        .bearer_auth(t.key.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let err: Value = missing.json().await.unwrap();
    let message = err["error"]["message"].as_str().unwrap();
    assert!(message.contains("GET /v1/nope"), "{message}");
    assert!(message.contains("POST /v1/responses"), "{message}");
    let anthropic: Value = client
        .post(format!("{base}/v1/complete"))
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(anthropic["type"], "error");
    assert_eq!(anthropic["error"]["type"], "not_found_error");
}
