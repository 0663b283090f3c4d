//! The Anthropic dialect (`POST /v1/messages`) and the `anthropic` backend.

use std::sync::Arc;

use hevo_llm::{
    AnthropicBackend, AnthropicConfig, Backend, Caps, Gateway, GatewayConfig, MemorySink,
    ModelRoute, RetryPolicy,
};
use serde_json::{json, Value};

use crate::common::{mock_prices, sse_events, Setup, TestContext};

fn message_body(user: &str) -> Value {
    json!({
        "model": "mock-1",
        "max_tokens": 64,
        "system": "you are a test",
        "messages": [{"role": "user", "content": [{"type": "text", "text": user}]}],
    })
}

async fn post(t: &TestContext, key: &str, body: &Value) -> reqwest::Response {
    t.client
        .post(format!("{}/v1/messages", t.gateway.anthropic_base_url()))
        .header("x-api-key", key)
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn messages_endpoint_answers_in_anthropic_format() {
    let t = TestContext::start(Setup::default()).await;
    let key = t.trial("a", Caps::UNLIMITED);
    let resp = post(&t, key.as_str(), &message_body("hello there")).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["content"][0]["text"], "echo: hello there");
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["usage"]["input_tokens"], 16);
    // second call: the system prompt is cached upstream
    let v: Value = post(&t, key.as_str(), &message_body("hello there"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            v["usage"]["input_tokens"].as_u64(),
            v["usage"]["cache_read_input_tokens"].as_u64()
        ),
        (Some(12), Some(4))
    );

    let resp = post(&t, "nope", &message_body("x")).await;
    assert_eq!(resp.status(), 401);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "authentication_error");

    let mut bad = message_body("x");
    bad.as_object_mut().unwrap().remove("max_tokens");
    let resp = post(&t, key.as_str(), &bad).await;
    assert_eq!(resp.status(), 400);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["type"], "invalid_request_error");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tokens"),
        "{err}"
    );

    let mut stream = message_body("streamed words");
    stream["stream"] = json!(true);
    let text = post(&t, key.as_str(), &stream).await.text().await.unwrap();
    let events = sse_events(&text);
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    let streamed: String = events
        .iter()
        .filter(|(e, _)| e.as_deref() == Some("content_block_delta"))
        .map(|(_, d)| {
            serde_json::from_str::<Value>(d).unwrap()["delta"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(streamed, "echo: streamed words");
    let usage = t.gateway.close_trial(&key).await;
    assert_eq!(usage.calls, 3);
    assert!(t.trace("a").iter().all(|l| l["api"] == "anthropic"));
}

#[tokio::test]
async fn anthropic_backend_talks_to_a_second_gateway() {
    // inner gateway: the "provider"; outer gateway: hevo in front of it with the anthropic
    // backend, holding the inner trial key as its provider key
    let inner = TestContext::start(Setup::default()).await;
    let inner_key = inner.trial("provider-side", Caps::UNLIMITED);
    std::env::set_var("HEVO_TEST_ANTHROPIC_KEY", inner_key.as_str());
    let mut config = AnthropicConfig::new(
        "anthropic",
        &inner.gateway.anthropic_base_url(),
        "HEVO_TEST_ANTHROPIC_KEY",
    );
    config.retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    let backend: Arc<dyn Backend> = Arc::new(AnthropicBackend::new(config).unwrap());
    let sink = Arc::new(MemorySink::new());
    let outer = Gateway::start(
        GatewayConfig::new(
            vec![ModelRoute::new("claude-test", "anthropic", "mock-1")],
            mock_prices(),
        ),
        vec![backend],
        sink.clone(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = outer
        .open_trial("outer", dir.path(), Caps::UNLIMITED)
        .unwrap();
    let body = json!({"model": "claude-test", "max_tokens": 32, "messages": [
        {"role": "system", "content": "you are a test"}, {"role": "user", "content": "via two"}]});
    for expected_cached in [0, 4] {
        let resp: Value = reqwest::Client::new()
            .post(format!("{}/chat/completions", outer.openai_base_url()))
            .bearer_auth(key.as_str())
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            resp["choices"][0]["message"]["content"], "echo: via two",
            "{resp}"
        );
        assert_eq!(resp["usage"]["prompt_tokens"], 16);
        assert_eq!(
            resp["usage"]["prompt_tokens_details"]["cached_tokens"],
            expected_cached
        );
    }
    let outer_usage = outer.close_trial(&key).await;
    let inner_usage = inner.gateway.close_trial(&inner_key).await;
    assert_eq!(outer_usage.calls, 2);
    assert_eq!(inner_usage.calls, 2);
    assert_eq!(
        (
            outer_usage.input_tokens,
            outer_usage.cached_tokens,
            outer_usage.output_tokens
        ),
        (
            inner_usage.input_tokens,
            inner_usage.cached_tokens,
            inner_usage.output_tokens
        )
    );
    assert!((outer_usage.cost_usd - inner_usage.cost_usd).abs() < 1e-15);
    assert_eq!(
        outer.provider_key_vars(),
        ["HEVO_TEST_ANTHROPIC_KEY".to_owned()]
    );
}
