//! Shared fixtures: a deterministic OpenAI-compatible upstream and a gateway in front of it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use hevo_llm::{
    Backend, Caps, GatewayConfig, GatewayHandle, MemorySink, ModelPrice, ModelRoute, OpenAiBackend,
    OpenAiConfig, PriceTable, RetryPolicy, TrialKey,
};
use serde_json::{json, Value};

/// What the mock upstream saw.
#[derive(Default)]
pub struct UpstreamLog {
    /// Requests answered or refused.
    pub requests: AtomicUsize,
    /// Authorization headers received.
    pub auth: Mutex<Vec<String>>,
    /// Systems prompts seen (prompt caching: a repeated system prompt is "cached").
    seen_systems: Mutex<Vec<String>>,
    /// Failures still to serve for model `flaky`.
    pub flaky_left: AtomicUsize,
}

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// The mock's rule: the answer is `echo: <last user message>`; prompt tokens are 10 + the
/// words of every message; a system prompt seen before counts as cached; output tokens are
/// the answer's words. Model `flaky` fails with 429 then 500 while `flaky_left` > 0; model
/// `broken` always fails with 500.
async fn mock_chat(
    State(log): State<Arc<UpstreamLog>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let n = log.requests.fetch_add(1, Ordering::SeqCst);
    if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        log.auth.lock().unwrap().push(auth.to_owned());
    }
    let model = body["model"].as_str().unwrap_or("").to_owned();
    if model == "broken" {
        return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response();
    }
    if model == "flaky" {
        let left = log.flaky_left.load(Ordering::SeqCst);
        if left > 0 {
            log.flaky_left.store(left - 1, Ordering::SeqCst);
            let status = if n % 2 == 0 {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::BAD_GATEWAY
            };
            return (status, Json(json!({"error": {"message": "slow down"}}))).into_response();
        }
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut prompt = 10;
    let mut cached = 0;
    let mut last_user = String::new();
    for m in &messages {
        let content = m["content"].as_str().unwrap_or("");
        prompt += words(content);
        if m["role"] == "system" {
            let mut seen = log.seen_systems.lock().unwrap();
            if seen.iter().any(|s| s == content) {
                cached += words(content);
            } else {
                seen.push(content.to_owned());
            }
        }
        if m["role"] == "user" {
            last_user = content.to_owned();
        }
    }
    let mut answer = format!("echo: {last_user}");
    let mut finish = "stop";
    if let Some(max) = body["max_tokens"].as_u64() {
        let w: Vec<&str> = answer.split_whitespace().take(max as usize).collect();
        if (w.len() as u64) < words(&answer) {
            finish = "length";
        }
        answer = w.join(" ");
    }
    let logprobs = if body["logprobs"] == true {
        json!({"content": answer.split_whitespace().map(|w| json!({
            "token": w, "logprob": -0.5, "top_logprobs": [{"token": w, "logprob": -0.5}]
        })).collect::<Vec<_>>()})
    } else {
        Value::Null
    };
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": words(&answer),
                       "total_tokens": prompt + words(&answer),
                       "prompt_tokens_details": {"cached_tokens": cached}});
    if body["stream"] == true {
        return stream_answer(&model, &answer, finish, &usage, &body);
    }
    Json(json!({
        "id": "mock-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                     "logprobs": logprobs, "finish_reason": finish}],
        "usage": usage,
    }))
    .into_response()
}

/// The mock's answer as OpenAI's stream: a role chunk, a chunk per word, the finish chunk,
/// the usage chunk when asked for, `[DONE]`.
fn stream_answer(model: &str, answer: &str, finish: &str, usage: &Value, body: &Value) -> Response {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "mock-1", "object": "chat.completion.chunk", "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for (i, word) in answer.split(' ').enumerate() {
        let piece = if i == 0 {
            word.to_owned()
        } else {
            format!(" {word}")
        };
        chunks.push(chunk(json!({"content": piece}), Value::Null));
    }
    chunks.push(chunk(json!({}), json!(finish)));
    if body["stream_options"]["include_usage"] == true {
        chunks.push(
            json!({"id": "mock-1", "object": "chat.completion.chunk", "model": model,
                           "choices": [], "usage": usage}),
        );
    }
    let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    out.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], out).into_response()
}

/// A running mock upstream.
pub struct MockUpstream {
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    /// What it saw.
    pub log: Arc<UpstreamLog>,
}

/// Starts the mock upstream on a free loopback port.
pub async fn mock_upstream() -> MockUpstream {
    let log = Arc::new(UpstreamLog::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(mock_chat))
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    MockUpstream {
        base_url: format!("http://{addr}/v1"),
        log,
    }
}

/// Prices of the mock's models: $1 / $0.25 / $4 per million (uncached, cached, output).
pub fn mock_prices() -> PriceTable {
    let price = ModelPrice::paid(1.0, 0.25, 4.0);
    PriceTable::empty()
        .with_overrides(["mock-1", "flaky", "broken"].map(|m| (m.to_owned(), price)))
        .unwrap()
}

/// A temp dir, a mock upstream and a gateway in front of it.
pub struct TestContext {
    /// Temp dir (traces, cache).
    pub dir: tempfile::TempDir,
    /// The upstream.
    pub upstream: MockUpstream,
    /// The gateway.
    pub gateway: GatewayHandle,
    /// Every call record.
    pub sink: Arc<MemorySink>,
    /// HTTP client.
    pub client: reqwest::Client,
}

/// Options of [`TestContext::start`].
#[derive(Default)]
pub struct Setup {
    pub run_caps: Caps,
    pub cache_dir: Option<PathBuf>,
    pub key_env: Option<String>,
}

impl TestContext {
    /// Mock upstream + gateway routing `mock-1`, `flaky`, `broken` to it (`gpt-4o-mini` is an
    /// alias of `mock-1`), fast retries.
    pub async fn start(setup: Setup) -> Self {
        let upstream = mock_upstream().await;
        Self::start_with(setup, upstream).await
    }

    /// Like [`TestContext::start`] with a given upstream.
    pub async fn start_with(setup: Setup, upstream: MockUpstream) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = OpenAiConfig::new("up", &upstream.base_url, setup.key_env.as_deref());
        config.retry = RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(50),
        };
        let backend: Arc<dyn Backend> = Arc::new(OpenAiBackend::new(config).unwrap());
        let mut gw = GatewayConfig::new(
            vec![
                ModelRoute::new("mock-1", "up", "mock-1"),
                ModelRoute::new("gpt-4o-mini", "up", "mock-1"),
                ModelRoute::new("flaky", "up", "flaky"),
                ModelRoute::new("broken", "up", "broken"),
            ],
            mock_prices(),
        );
        gw.run_caps = setup.run_caps;
        gw.cache_dir = setup.cache_dir;
        let sink = Arc::new(MemorySink::new());
        let gateway = hevo_llm::Gateway::start(gw, vec![backend], sink.clone()).unwrap();
        Self {
            dir,
            upstream,
            gateway,
            sink,
            client: reqwest::Client::new(),
        }
    }

    /// Opens a trial whose trace goes to `<dir>/<id>`.
    pub fn trial(&self, id: &str, caps: Caps) -> TrialKey {
        self.gateway
            .open_trial(id, &self.dir.path().join(id), caps)
            .unwrap()
    }

    /// POSTs `body` to the OpenAI endpoint with `key`; returns status and JSON body.
    pub async fn chat(&self, key: Option<&str>, body: Value) -> (u16, Value) {
        let mut req = self.client.post(format!(
            "{}/chat/completions",
            self.gateway.openai_base_url()
        ));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        let resp = req.json(&body).send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap())
    }

    /// Reads a trial's trace lines.
    pub fn trace(&self, id: &str) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.dir.path().join(id).join("model_calls.jsonl")).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A chat body for the mock: one system and one user message.
pub fn body(model: &str, user: &str) -> Value {
    json!({
        "model": model,
        "messages": [
            {"role": "system", "content": "you are a test"},
            {"role": "user", "content": user},
        ],
    })
}

/// Parses an SSE body into its `data:` payloads (with the event name, if any).
pub fn sse_events(text: &str) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut event = None;
        let mut data = Vec::new();
        for line in block.lines() {
            if let Some(e) = line.strip_prefix("event:") {
                event = Some(e.trim().to_owned());
            } else if let Some(d) = line.strip_prefix("data:") {
                data.push(d.trim_start().to_owned());
            }
        }
        if !data.is_empty() {
            out.push((event, data.join("\n")));
        }
    }
    out
}
