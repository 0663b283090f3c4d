//! A scripted provider on loopback that speaks OpenAI's chat completions, Responses and
//! embeddings and Anthropic's messages and token counting, streamed or not, and plays one
//! agent turn by reading the request: while no tool result is in the history and a writing
//! tool is offered, it calls that tool to write [`Script::content`] to [`Script::path`];
//! once a tool result is there, it answers with final text. Without tools it echoes.
//! Anthropic's usage reports [`CACHE_WRITTEN`] prompt-cache tokens written when the request
//! marks `cache_control`; its text stops before the first of the request's `stop_sequences`
//! it contains, with stop reason `stop_sequence`.
//!
//! Writing tools it knows: Claude Code's `Write` (`file_path`, `content`), Codex's
//! `exec_command` (`cmd`, a shell command), and the tests' own `write_file` (`path`,
//! `content`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::{OriginalUri, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// What the scripted agent turn writes.
pub struct Script {
    /// The file the tool call writes.
    pub path: PathBuf,
    /// What it writes there.
    pub content: String,
}

/// One request the upstream received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Path with query.
    pub path: String,
    /// Headers, lowercase names.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Value,
}

struct Shared {
    script: Script,
    seen: Mutex<Vec<Seen>>,
}

/// A running scripted upstream.
pub struct Scripted {
    /// `http://127.0.0.1:PORT` (the Anthropic base; the OpenAI base is this + `/v1`).
    pub base: String,
    shared: Arc<Shared>,
}

impl Scripted {
    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }
}

/// Starts a scripted upstream on a free port.
pub async fn start(script: Script) -> Scripted {
    let shared = Arc::new(Shared {
        script,
        seen: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/responses", post(responses))
        .route("/v1/embeddings", post(embeddings))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Scripted {
        base: format!("http://{addr}"),
        shared,
    }
}

fn log(shared: &Shared, uri: &OriginalUri, headers: &HeaderMap, body: &Value) {
    shared.seen.lock().unwrap().push(Seen {
        path: uri.0.to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        body: body.clone(),
    });
}

/// Prompt tokens the upstream reports: a quarter of the body's bytes (deterministic).
fn prompt_tokens(body: &Value) -> u64 {
    body.to_string().len() as u64 / 4
}

/// Input tokens Anthropic's prompt cache writes: 11 when the request marks a
/// `cache_control` breakpoint anywhere, else none.
pub const CACHE_WRITTEN: u64 = 11;

fn cache_written(body: &Value) -> u64 {
    if body.to_string().contains("\"cache_control\"") {
        CACHE_WRITTEN
    } else {
        0
    }
}

/// Where the first of `sequences` (a request's `stop_sequences`) starts in `text`, and which.
fn first_stop<'a>(text: &str, sequences: &'a Value) -> Option<(usize, &'a str)> {
    sequences
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|s| text.find(s).map(|at| (at, s)))
        .min_by_key(|(at, _)| *at)
}

/// The scripted turn: a tool call (name, arguments) or final text.
enum Turn {
    Call(String, Value),
    Text(String),
}

fn plan(script: &Script, tool_names: &[String], has_result: bool, last_user: &str) -> Turn {
    let path = script.path.display().to_string();
    if has_result {
        return Turn::Text(format!("Wrote {path}."));
    }
    let has = |n: &str| tool_names.iter().any(|t| t == n);
    if has("Write") {
        Turn::Call(
            "Write".into(),
            json!({"file_path": path, "content": script.content}),
        )
    } else if has("write_file") {
        Turn::Call(
            "write_file".into(),
            json!({"path": path, "content": script.content}),
        )
    } else if has("exec_command") {
        let cmd = format!(
            "printf '%s' '{}' > '{}'",
            script.content.replace('\'', "'\\''"),
            path
        );
        Turn::Call("exec_command".into(), json!({"cmd": cmd}))
    } else {
        Turn::Text(format!("echo: {last_user}"))
    }
}

fn names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            t.get("name")
                .or_else(|| t.pointer("/function/name"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect()
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn sse(events: Vec<(Option<&str>, Value)>, done: bool) -> Response {
    let mut out = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            out.push_str(&format!("event: {name}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    if done {
        out.push_str("data: [DONE]\n\n");
    }
    ([("content-type", "text/event-stream")], out).into_response()
}

/// Splits `s` in two pieces (a streamed argument arrives in parts).
fn halves(s: &str) -> [String; 2] {
    let mid = s
        .char_indices()
        .nth(s.chars().count() / 2)
        .map_or(0, |(i, _)| i);
    [s[..mid].to_owned(), s[mid..].to_owned()]
}

async fn messages(
    State(shared): State<Arc<Shared>>,
    uri: OriginalUri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    log(&shared, &uri, &headers, &body);
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    let has_result = msgs.iter().any(|m| {
        m["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
    });
    let last_user = msgs
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .unwrap_or_default();
    let turn = plan(
        &shared.script,
        &names(&body["tools"]),
        has_result,
        &last_user,
    );
    let thinking = body["thinking"]["type"]
        .as_str()
        .is_some_and(|t| t != "disabled");
    let model = body["model"].as_str().unwrap_or("").to_owned();
    let input = prompt_tokens(&body);
    let mut blocks = Vec::new();
    if thinking {
        blocks
            .push(json!({"type": "thinking", "thinking": "Plan the turn.", "signature": "sig-1"}));
    }
    let mut stop_sequence = Value::Null;
    let stop = match &turn {
        Turn::Call(name, args) => {
            blocks.push(json!({"type": "tool_use", "id": "toolu_1", "name": name, "input": args}));
            "tool_use"
        }
        Turn::Text(text) => match first_stop(text, &body["stop_sequences"]) {
            Some((at, sequence)) => {
                blocks.push(json!({"type": "text", "text": text[..at]}));
                stop_sequence = json!(sequence);
                "stop_sequence"
            }
            None => {
                blocks.push(json!({"type": "text", "text": text}));
                "end_turn"
            }
        },
    };
    let usage = json!({"input_tokens": input, "cache_read_input_tokens": 0,
                       "cache_creation_input_tokens": cache_written(&body),
                       "output_tokens": 9});
    if body["stream"] != true {
        return Json(
            json!({"id": "msg_up", "type": "message", "role": "assistant",
            "model": format!("{model}-answered"), "content": blocks, "stop_reason": stop,
            "stop_sequence": stop_sequence, "usage": usage}),
        )
        .into_response();
    }
    let mut events = vec![(
        Some("message_start"),
        json!({"type": "message_start", "message": {"id": "msg_up", "type": "message",
            "role": "assistant", "model": format!("{model}-answered"), "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": 1}}}),
    )];
    for (i, block) in blocks.iter().enumerate() {
        let (start, deltas): (Value, Vec<Value>) = match block["type"].as_str().unwrap() {
            "thinking" => (
                json!({"type": "thinking", "thinking": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ],
            ),
            "tool_use" => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                halves(&block["input"].to_string())
                    .into_iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect(),
            ),
            _ => (
                json!({"type": "text", "text": ""}),
                halves(block["text"].as_str().unwrap())
                    .into_iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect(),
            ),
        };
        events.push((
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": i, "content_block": start}),
        ));
        for delta in deltas {
            events.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": i, "delta": delta}),
            ));
        }
        events.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": i}),
        ));
    }
    events.push((
        Some("message_delta"),
        json!({"type": "message_delta",
               "delta": {"stop_reason": stop, "stop_sequence": stop_sequence},
               "usage": {"output_tokens": 9}}),
    ));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    sse(events, false)
}

async fn count_tokens(
    State(shared): State<Arc<Shared>>,
    uri: OriginalUri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    log(&shared, &uri, &headers, &body);
    Json(json!({"input_tokens": prompt_tokens(&body)})).into_response()
}

async fn chat(
    State(shared): State<Arc<Shared>>,
    uri: OriginalUri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    log(&shared, &uri, &headers, &body);
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    let has_result = msgs.iter().any(|m| m["role"] == "tool");
    let last_user = msgs
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .unwrap_or_default();
    let turn = plan(
        &shared.script,
        &names(&body["tools"]),
        has_result,
        &last_user,
    );
    let model = format!("{}-answered", body["model"].as_str().unwrap_or(""));
    let usage = json!({"prompt_tokens": prompt_tokens(&body), "completion_tokens": 9,
        "total_tokens": prompt_tokens(&body) + 9, "prompt_tokens_details": {"cached_tokens": 0}});
    let (message, finish) = match &turn {
        Turn::Call(name, args) => (
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}),
            "tool_calls",
        ),
        Turn::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
    };
    // `n` choices, all the same
    let n = body["n"].as_u64().unwrap_or(1);
    if body["stream"] != true {
        let choices: Vec<Value> = (0..n)
            .map(|i| {
                json!({"index": i, "message": message, "logprobs": null,
                            "finish_reason": finish})
            })
            .collect();
        return Json(
            json!({"id": "chatcmpl-up", "object": "chat.completion", "created": 0,
            "model": model, "choices": choices, "usage": usage}),
        )
        .into_response();
    }
    let chunk = |delta: Value, finish: Value| {
        let choices: Vec<Value> = (0..n)
            .map(|i| json!({"index": i, "delta": delta, "finish_reason": finish}))
            .collect();
        (
            None,
            json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 0,
            "model": model, "choices": choices}),
        )
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": null}),
        Value::Null,
    )];
    match &turn {
        Turn::Call(name, args) => {
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            for part in halves(&args.to_string()) {
                events.push(chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                    Value::Null,
                ));
            }
        }
        Turn::Text(text) => {
            for part in halves(text) {
                events.push(chunk(json!({"content": part}), Value::Null));
            }
        }
    }
    events.push(chunk(json!({}), json!(finish)));
    if body["stream_options"]["include_usage"] == true {
        events.push((
            None,
            json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 0,
                   "model": model, "choices": [], "usage": usage}),
        ));
    }
    sse(events, true)
}

async fn responses(
    State(shared): State<Arc<Shared>>,
    uri: OriginalUri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    log(&shared, &uri, &headers, &body);
    let input = body["input"].as_array().cloned().unwrap_or_default();
    let has_result = input.iter().any(|i| i["type"] == "function_call_output");
    let last_user = match &body["input"] {
        Value::String(s) => s.clone(),
        _ => input
            .iter()
            .rev()
            .find(|i| i["role"] == "user")
            .map(|i| text_of(&i["content"]))
            .unwrap_or_default(),
    };
    let turn = plan(
        &shared.script,
        &names(&body["tools"]),
        has_result,
        &last_user,
    );
    let model = format!("{}-answered", body["model"].as_str().unwrap_or(""));
    let item = match &turn {
        Turn::Call(name, args) => json!({"type": "function_call", "id": "fc_1",
            "call_id": "call_1", "name": name, "arguments": args.to_string(),
            "status": "completed"}),
        Turn::Text(text) => json!({"type": "message", "id": "msg_1", "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
    };
    let input_tokens = prompt_tokens(&body);
    let response = |status: &str, output: Value, usage: Value| {
        json!({"id": "resp_up", "object": "response", "created_at": 0, "status": status,
               "model": model, "output": output, "usage": usage, "error": null,
               "incomplete_details": null, "tools": body["tools"],
               "parallel_tool_calls": true, "tool_choice": "auto"})
    };
    let usage = json!({"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + 9});
    if body["stream"] != true {
        return Json(response("completed", json!([item]), usage)).into_response();
    }
    let mut seq = 0;
    let mut events = Vec::new();
    let mut push = |kind: &'static str, mut v: Value| {
        v["type"] = json!(kind);
        v["sequence_number"] = json!(seq);
        seq += 1;
        events.push((Some(kind), v));
    };
    push(
        "response.created",
        json!({"response": response("in_progress", json!([]), Value::Null)}),
    );
    match &turn {
        Turn::Call(_, args) => {
            let mut added = item.clone();
            added["arguments"] = json!("");
            added["status"] = json!("in_progress");
            push(
                "response.output_item.added",
                json!({"output_index": 0, "item": added}),
            );
            for part in halves(&args.to_string()) {
                push(
                    "response.function_call_arguments.delta",
                    json!({"item_id": "fc_1", "output_index": 0, "delta": part}),
                );
            }
            push(
                "response.function_call_arguments.done",
                json!({"item_id": "fc_1", "output_index": 0, "arguments": args.to_string()}),
            );
        }
        Turn::Text(text) => {
            let mut added = item.clone();
            added["content"] = json!([]);
            push(
                "response.output_item.added",
                json!({"output_index": 0, "item": added}),
            );
            let at = json!({"item_id": "msg_1", "output_index": 0, "content_index": 0});
            let mut part = at.clone();
            part["part"] = json!({"type": "output_text", "text": "", "annotations": []});
            push("response.content_part.added", part);
            for piece in halves(text) {
                let mut d = at.clone();
                d["delta"] = json!(piece);
                push("response.output_text.delta", d);
            }
            let mut d = at.clone();
            d["text"] = json!(text);
            push("response.output_text.done", d);
            let mut part = at.clone();
            part["part"] = json!({"type": "output_text", "text": text, "annotations": []});
            push("response.content_part.done", part);
        }
    }
    push(
        "response.output_item.done",
        json!({"output_index": 0, "item": item}),
    );
    push(
        "response.completed",
        json!({"response": response("completed", json!([item]), usage)}),
    );
    sse(events, false)
}

async fn embeddings(
    State(shared): State<Arc<Shared>>,
    uri: OriginalUri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    log(&shared, &uri, &headers, &body);
    let inputs = match &body["input"] {
        Value::Array(items) => items.len(),
        _ => 1,
    };
    let data: Vec<Value> = (0..inputs)
        .map(|i| json!({"object": "embedding", "index": i, "embedding": [0.5, -0.25, i as f64]}))
        .collect();
    let tokens = prompt_tokens(&body);
    Json(
        json!({"object": "list", "data": data, "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
    )
    .into_response()
}
