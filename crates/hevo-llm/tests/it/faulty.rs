//! An upstream that misbehaves on purpose, picked by the model the gateway sends it, with a
//! gateway in front of it (an `openai` and an `anthropic` backend, 1 s `timeout_s`, 2 fast
//! retries) and one trial; and a runner of the official Python SDKs against that gateway.
//!
//! | upstream model | answer |
//! |---|---|
//! | `silent` | nothing for 3 s, then a normal answer |
//! | `trickle` | a normal answer whose body arrives in 10 pieces, 0.2 s apart (2 s in all) |
//! | `refused-401`, `refused-403` | that status: the provider refuses the backend's key |
//! | `retry-after-neg`, `-nan`, `-huge` | 503 with `Retry-After: -1`, `NaN`, `1e30` |
//! | `flood` | a 200 that never ends: a JSON object (a stream: an event) whose string grows without end |
//! | any other | a normal answer at once |
//!
//! A normal answer's text is `w0 w1 ... w9`. Chat completions report 1000 prompt tokens (200
//! cached) and 500 output tokens; messages report 100 uncached input tokens, 300 written to
//! the prompt cache (100 of them for an hour), 600 read from it and 500 output tokens.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use futures::StreamExt;
use hevo_llm::{
    AnthropicBackend, AnthropicConfig, Backend, Caps, Gateway, GatewayConfig, GatewayHandle,
    MemorySink, ModelPrice, ModelRoute, OpenAiBackend, OpenAiConfig, PriceTable, RetryPolicy,
    TrialKey,
};
use serde_json::{json, Value};

use crate::clients::{python_with_sdks, run};

/// The words of a normal answer.
pub const WORDS: &str = "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9";
/// The upstream key variable of the backends.
const KEY_VAR: &str = "HEVO_TEST_FAULTY_UPSTREAM_KEY";

/// The faulty upstream, a gateway in front of it and one open trial.
pub struct Faulty {
    /// The upstream model of every request the upstream received, in order of arrival.
    pub seen: Arc<Mutex<Vec<String>>>,
    /// The gateway.
    pub gateway: GatewayHandle,
    /// Every ledger row.
    pub sink: Arc<MemorySink>,
    /// The trial's key.
    pub key: TrialKey,
    dir: tempfile::TempDir,
}

impl Faulty {
    /// Starts the upstream and the gateway. Harness model names are the upstream's with a
    /// prefix naming the API: `gpt-<upstream model>` on the `openai` backend,
    /// `claude-<upstream model>` on the `anthropic` one; `claude-sonnet-4` is served as
    /// itself (a normal answer at Anthropic's built-in prices).
    pub async fn start() -> Faulty {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/messages", post(messages))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        std::env::set_var(KEY_VAR, "faulty-upstream-secret");
        let retry = RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(50),
        };
        let timeout = Duration::from_secs(1);
        let mut openai = OpenAiConfig::new("oa", &format!("{base}/v1"), Some(KEY_VAR));
        (openai.retry, openai.timeout) = (retry, timeout);
        let mut anthropic = AnthropicConfig::new("an", &base, KEY_VAR);
        (anthropic.retry, anthropic.timeout) = (retry, timeout);
        let backends: Vec<Arc<dyn Backend>> = vec![
            Arc::new(OpenAiBackend::new(openai).unwrap()),
            Arc::new(AnthropicBackend::new(anthropic).unwrap()),
        ];
        let upstream_models = [
            "plain",
            "silent",
            "trickle",
            "refused-401",
            "refused-403",
            "retry-after-neg",
            "retry-after-nan",
            "retry-after-huge",
            "flood",
        ];
        let mut routes = vec![ModelRoute::new("claude-sonnet-4", "an", "claude-sonnet-4")];
        for model in upstream_models {
            routes.push(ModelRoute::new(&format!("gpt-{model}"), "oa", model));
            routes.push(ModelRoute::new(&format!("claude-{model}"), "an", model));
        }
        let price = ModelPrice::paid(1.0, 0.25, 4.0);
        let prices = PriceTable::builtin()
            .with_overrides(upstream_models.map(|m| (m.to_owned(), price)))
            .unwrap();
        let sink = Arc::new(MemorySink::new());
        let gateway =
            Gateway::start(GatewayConfig::new(routes, prices), backends, sink.clone()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let key = gateway
            .open_trial("faulty", &dir.path().join("trace"), Caps::UNLIMITED)
            .unwrap();
        Faulty {
            seen,
            gateway,
            sink,
            key,
            dir,
        }
    }

    /// How many requests for `model` the upstream received.
    pub fn received(&self, model: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|m| *m == model)
            .count()
    }

    /// Runs `py/sdk_calls.py` with `calls`; returns what each call gave the harness, or
    /// `None` (the test skips, loudly) without the SDKs.
    pub fn sdk_calls(&self, calls: Value) -> Option<Vec<Value>> {
        let python = python_with_sdks()?;
        let mut command = Command::new(python);
        command.arg(format!(
            "{}/tests/it/py/sdk_calls.py",
            env!("CARGO_MANIFEST_DIR")
        ));
        let mut env = self.gateway.harness_env(&self.key);
        env.push(("HEVO_TEST_CALLS".into(), calls.to_string()));
        let (ok, output) = tokio::task::block_in_place(|| run(command, &env, self.dir.path()));
        assert!(ok, "sdk_calls.py failed:\n{output}");
        let line = output
            .lines()
            .rev()
            .find(|l| l.starts_with('['))
            .unwrap_or_else(|| panic!("sdk_calls.py printed no JSON:\n{output}"));
        Some(serde_json::from_str(line).unwrap())
    }
}

/// Records the request for `model` and plays its fault: `Err` with the answer of a refusing
/// model, else (after the silence of `silent`) `Ok` with the pause between the pieces of the
/// normal answer.
async fn fault(seen: &Mutex<Vec<String>>, model: &str) -> Result<Duration, Response> {
    seen.lock().unwrap().push(model.to_owned());
    let error = |status: StatusCode, message: &str| {
        (
            status,
            Json(json!({"type": "error", "error": {"message": message}})),
        )
            .into_response()
    };
    let busy = |retry_after: &str| {
        let mut response = error(StatusCode::SERVICE_UNAVAILABLE, "busy");
        response
            .headers_mut()
            .insert("retry-after", retry_after.parse().unwrap());
        response
    };
    match model {
        "silent" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok(Duration::ZERO)
        }
        "trickle" => Ok(Duration::from_millis(200)),
        "refused-401" => Err(error(StatusCode::UNAUTHORIZED, "invalid x-api-key")),
        "refused-403" => Err(error(
            StatusCode::FORBIDDEN,
            "this key may not use the model",
        )),
        "retry-after-neg" => Err(busy("-1")),
        "retry-after-nan" => Err(busy("NaN")),
        "retry-after-huge" => Err(busy("1e30")),
        _ => Ok(Duration::ZERO),
    }
}

/// A 200 answer that never ends: `{"pad": "xxx...` (a stream: `data: {"pad": "xxx...`), in
/// 1 MiB pieces, as fast as the caller reads.
fn flood(stream: bool) -> Response {
    let (head, content_type) = match stream {
        true => ("data: {\"pad\": \"", "text/event-stream"),
        false => ("{\"pad\": \"", "application/json"),
    };
    let piece = Bytes::from(vec![b'x'; 1 << 20]);
    let rest = futures::stream::repeat(piece).map(Ok::<_, std::io::Error>);
    let body = futures::stream::once(async move { Ok(Bytes::from(head)) }).chain(rest);
    ([("content-type", content_type)], Body::from_stream(body)).into_response()
}

/// `pieces` sent one by one, `pace` apart (the first at once), as `content_type`.
fn paced(pieces: Vec<String>, pace: Duration, content_type: &str) -> Response {
    let stream = futures::stream::unfold(
        (pieces.into_iter(), true),
        move |(mut rest, first)| async move {
            let piece = rest.next()?;
            if !first {
                tokio::time::sleep(pace).await;
            }
            Some((Ok::<_, std::io::Error>(Bytes::from(piece)), (rest, false)))
        },
    );
    ([("content-type", content_type)], Body::from_stream(stream)).into_response()
}

/// A JSON answer cut in 10 pieces.
fn json_pieces(value: &Value) -> Vec<String> {
    let text = value.to_string();
    let size = text.len().div_ceil(10);
    text.as_bytes()
        .chunks(size)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect()
}

fn sse_piece(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

async fn chat(State(seen): State<Arc<Mutex<Vec<String>>>>, Json(body): Json<Value>) -> Response {
    let model = body["model"].as_str().unwrap_or("").to_owned();
    let pace = match fault(&seen, &model).await {
        Ok(pace) => pace,
        Err(response) => return response,
    };
    if model == "flood" {
        return flood(body["stream"] == true);
    }
    let usage = json!({"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500,
                       "prompt_tokens_details": {"cached_tokens": 200}});
    if body["stream"] != true {
        let answer = json!({"id": "c1", "object": "chat.completion", "created": 0,
            "model": model, "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": WORDS}}], "usage": usage});
        return paced(json_pieces(&answer), pace, "application/json");
    }
    let chunk = |delta: Value, finish: Value| {
        sse_piece(
            None,
            &json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut pieces = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let words: Vec<&str> = WORDS.split(' ').collect();
    for (i, word) in words.iter().enumerate() {
        let text = if i + 1 < words.len() {
            format!("{word} ")
        } else {
            (*word).to_owned()
        };
        pieces.push(chunk(json!({"content": text}), Value::Null));
    }
    let last = pieces.pop().unwrap();
    pieces.push(format!(
        "{last}{}{}data: [DONE]\n\n",
        chunk(json!({}), json!("stop")),
        sse_piece(
            None,
            &json!({"id": "c1", "object": "chat.completion.chunk", "created": 0,
                "model": model, "choices": [], "usage": usage})
        )
    ));
    paced(pieces, pace, "text/event-stream")
}

async fn messages(
    State(seen): State<Arc<Mutex<Vec<String>>>>,
    Json(body): Json<Value>,
) -> Response {
    let model = body["model"].as_str().unwrap_or("").to_owned();
    let pace = match fault(&seen, &model).await {
        Ok(pace) => pace,
        Err(response) => return response,
    };
    if model == "flood" {
        return flood(body["stream"] == true);
    }
    let usage = json!({"input_tokens": 100, "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 600, "output_tokens": 500,
        "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 100}});
    if body["stream"] != true {
        let answer = json!({"id": "msg_1", "type": "message", "role": "assistant",
            "model": model, "content": [{"type": "text", "text": WORDS}],
            "stop_reason": "end_turn", "stop_sequence": null, "usage": usage});
        return paced(json_pieces(&answer), pace, "application/json");
    }
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    let mut pieces = vec![sse_piece(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": start_usage}}),
    )];
    pieces.push(sse_piece(
        Some("content_block_start"),
        &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
    ));
    let words: Vec<&str> = WORDS.split(' ').collect();
    for (i, word) in words.iter().enumerate() {
        let text = if i + 1 < words.len() {
            format!("{word} ")
        } else {
            (*word).to_owned()
        };
        pieces.push(sse_piece(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": text}}),
        ));
    }
    let last = pieces.pop().unwrap();
    pieces.push(format!(
        "{last}{}{}{}",
        sse_piece(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": 0})
        ),
        sse_piece(
            Some("message_delta"),
            &json!({"type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": 500}})
        ),
        sse_piece(Some("message_stop"), &json!({"type": "message_stop"}))
    ));
    paced(pieces, pace, "text/event-stream")
}
