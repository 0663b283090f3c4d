//! Provider keys an upstream quotes in its errors (an OpenAI-compatible server echoing the
//! `Authorization` header it got) reach neither the harness, nor the ledger, nor the traces:
//! a forwarded 400 passed on as the upstream sent it, a 401 the gateway turns into 502, and
//! a forwarded stream's events.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use hevo_llm::{
    Backend, Caps, Gateway, GatewayConfig, MemorySink, ModelPrice, ModelRoute, OpenAiBackend,
    OpenAiConfig, PriceTable,
};
use serde_json::{json, Value};

const KEY_VAR: &str = "HEVO_TEST_SCRUB_KEY";
const SECRET: &str = "sk-scrub-secret-0123456789";

/// Answers every call with an error quoting the `Authorization` header it was sent; a
/// streamed call gets a 200 stream whose text and closing error event quote it.
async fn echo(headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if body["stream"] == true {
        let chunk = json!({"id": "c", "object": "chat.completion.chunk", "model": "echo-stream",
            "choices": [{"index": 0, "delta": {"content": format!("you sent {auth}")}}]});
        let error = json!({"error": {"message": format!("stream aborted for {auth}")}});
        let events = format!("data: {chunk}\n\ndata: {error}\n\n");
        return ([("content-type", "text/event-stream")], events).into_response();
    }
    let status = if body["model"] == "echo-401" {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::BAD_REQUEST
    };
    let error = json!({"error": {"message": format!("Incorrect API key provided: {auth}"),
                                 "type": "invalid_request_error"}});
    (status, Json(error)).into_response()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_quoting_its_key_leaks_it_nowhere() {
    let app = Router::new().route("/v1/chat/completions", post(echo));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    std::env::set_var(KEY_VAR, SECRET);
    let mut config = OpenAiConfig::new("up", &base, Some(KEY_VAR));
    config.retry.max_retries = 0;
    let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(OpenAiBackend::new(config).unwrap())];
    let routes = vec![
        ModelRoute::new("m400", "up", "echo-400"),
        ModelRoute::new("m401", "up", "echo-401"),
        ModelRoute::new("mstream", "up", "echo-stream"),
    ];
    let prices = PriceTable::empty()
        .with_overrides([
            ("echo-400".to_owned(), ModelPrice::paid(1.0, 1.0, 1.0)),
            ("echo-401".to_owned(), ModelPrice::paid(1.0, 1.0, 1.0)),
            ("echo-stream".to_owned(), ModelPrice::paid(1.0, 1.0, 1.0)),
        ])
        .unwrap();
    let sink = Arc::new(MemorySink::new());
    let gateway =
        Gateway::start(GatewayConfig::new(routes, prices), backends, sink.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = gateway
        .gateway()
        .open_trial("t", &dir.path().join("trace"), Caps::UNLIMITED)
        .unwrap();
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for model in ["m400", "m401"] {
        let reply = client
            .post(format!("{}/chat/completions", gateway.openai_base_url()))
            .bearer_auth(key.as_str())
            .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        statuses.push(reply.status().as_u16());
        let text = reply.text().await.unwrap();
        assert!(!text.contains(SECRET), "{model}: {text}");
        assert!(text.contains("[provider key]"), "{model}: {text}");
    }
    assert_eq!(statuses, [400, 502]);
    // a forwarded stream is passed on event by event, each scrubbed
    let reply = client
        .post(format!("{}/chat/completions", gateway.openai_base_url()))
        .bearer_auth(key.as_str())
        .json(&json!({"model": "mstream", "stream": true,
                      "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    let text = reply.text().await.unwrap();
    assert!(text.contains("stream aborted for"), "{text}");
    assert!(!text.contains(SECRET), "{text}");
    assert_eq!(text.matches("[provider key]").count(), 2, "{text}");
    gateway.gateway().close_trial(&key).await;
    let rows = sink.records();
    assert_eq!(rows.len(), 3);
    for row in &rows {
        let stored = serde_json::to_string(row).unwrap();
        assert!(!stored.contains(SECRET), "{stored}");
    }
    let mut traced = String::new();
    for entry in walk(&dir.path().join("trace")) {
        traced += &std::fs::read_to_string(entry).unwrap_or_default();
    }
    assert!(traced.contains("Incorrect API key provided"), "{traced}");
    assert!(!traced.contains(SECRET), "{traced}");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
