//! OpenAI's `POST /v1/responses` (what Codex and new SDK code call), plain and SSE: forwarded
//! to an OpenAI-compatible upstream; for any other backend, plain text turns are translated
//! and answered in the Responses format, and the rest (tools, reasoning, images, stored
//! conversations) get a 400 that names it.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::call::execute_streaming;
use super::forward::forward;
use super::limits::Held;
use super::misc::open_call;
use super::translate::{absent, check_fields, content_text, field};
use super::{now_ms, random_id, Call, Gateway, Refusal};
use crate::backend::Api;
use crate::types::{ChatMessage, ChatRequest, ChatResponse, FinishReason};

/// Fields of a plain text turn, all carried by the translation (`store`, `metadata` and
/// `user` only label the call; nothing is stored).
const FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "temperature",
    "top_p",
    "max_output_tokens",
    "stream",
    "store",
    "metadata",
    "user",
];

fn harmless(key: &str, value: &Value, has_tools: bool) -> bool {
    match key {
        "tool_choice" => !has_tools && (value == "none" || value == "auto"),
        "parallel_tool_calls" => !has_tools,
        "text" => value.pointer("/format/type").is_none_or(|t| t == "text"),
        "truncation" => value == "disabled",
        _ => false,
    }
}

/// Translates a Responses request, or says why it cannot be carried exactly.
pub(super) fn parse(raw: &Value) -> Result<(ChatRequest, bool), Refusal> {
    let Some(object) = raw.as_object() else {
        return Err(Refusal::Invalid(
            "the request body must be a JSON object".into(),
        ));
    };
    let has_tools = object.get("tools").is_some_and(|t| !absent(t));
    check_fields(object, FIELDS, |k, v| harmless(k, v, has_tools), "")?;
    let mut messages = Vec::new();
    if let Some(instructions) = object.get("instructions").and_then(Value::as_str) {
        messages.push(ChatMessage::new("system", instructions));
    }
    match object.get("input") {
        Some(Value::String(text)) => messages.push(ChatMessage::new("user", text.as_str())),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                messages.push(input_item(i, item)?);
            }
        }
        _ => {
            return Err(Refusal::Invalid(
                "input: a string or an array of input items is required".into(),
            ))
        }
    }
    if messages.iter().all(|m| m.role == "system") {
        return Err(Refusal::Invalid("input: no message to answer".into()));
    }
    let temperature = field::<f32>(object, "temperature")?;
    if let Some(t) = temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(Refusal::Invalid(format!(
                "`temperature` must be between 0 and 2, got {t}"
            )));
        }
    }
    let request = ChatRequest {
        model: object
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        messages,
        temperature,
        top_p: field(object, "top_p")?,
        max_tokens: field(object, "max_output_tokens")?,
        stop: Vec::new(),
        seed: None,
        logprobs: false,
        top_logprobs: 0,
        caller: String::new(),
    };
    Ok((request, field::<bool>(object, "stream")?.unwrap_or(false)))
}

/// Translates `input[i]`: a message item (typed `message` or untyped) with text content.
fn input_item(i: usize, item: &Value) -> Result<ChatMessage, Refusal> {
    let Some(item) = item.as_object() else {
        return Err(Refusal::Invalid(format!("input[{i}] must be an object")));
    };
    match item.get("type").and_then(Value::as_str) {
        None | Some("message") => {}
        Some(kind) => {
            return Err(Refusal::Unsupported(format!(
                "input items of type `{kind}` (input[{i}])"
            )))
        }
    }
    let role = match item.get("role").and_then(Value::as_str) {
        Some("system" | "developer") => "system",
        Some("user") => "user",
        Some("assistant") => "assistant",
        other => {
            return Err(Refusal::Invalid(format!(
                "input[{i}].role: must be user, assistant, system or developer, got {other:?}"
            )))
        }
    };
    check_fields(
        item,
        &["type", "role", "content", "id", "status"],
        |_, _| false,
        &format!("input[{i}]."),
    )?;
    let content = content_text(
        item.get("content").unwrap_or(&Value::Null),
        &format!("input[{i}].content"),
    )?;
    Ok(ChatMessage::new(role, content))
}

/// `POST /v1/responses`.
pub(crate) async fn responses(
    State(gateway): State<Gateway>,
    RawQuery(query): RawQuery,
    Extension(held): Extension<Held>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (call, raw) = match open_call(&gateway, Api::Responses, &headers, body, held) {
        Ok(opened) => opened,
        Err(refused) => return refused.into_response(),
    };
    if call.backend().forwards(Api::Responses) {
        return forward(call, raw, &headers, query).await;
    }
    let (request, stream) = match parse(&raw) {
        Ok(translated) => translated,
        Err(refusal) => return call.refuse(refusal).into_response(),
    };
    if let Err(err) = call.admit() {
        return err.into_response();
    }
    let ids = Ids {
        response: format!("resp_{}", random_id()),
        message: format!("msg_{}", random_id()),
    };
    if stream {
        return sse(call, request, ids).into_response();
    }
    call.detach(|call| async move {
        match call.execute(request, None).await {
            Ok((response, _)) => {
                let body = render(&ids, &response, "completed");
                call.trace("response", Some(200), &body);
                Json(body).into_response()
            }
            Err(err) => err.into_response(),
        }
    })
    .await
}

struct Ids {
    response: String,
    message: String,
}

fn text_part(text: &str) -> Value {
    json!({ "type": "output_text", "text": text, "annotations": [] })
}

fn message_item(ids: &Ids, text: Option<&str>) -> Value {
    let (status, content) = match text {
        Some(text) => ("completed", json!([text_part(text)])),
        None => ("in_progress", json!([])),
    };
    json!({ "type": "message", "id": ids.message, "status": status, "role": "assistant",
            "content": content })
}

/// The response object; `status` `in_progress` renders it before any output.
fn render(ids: &Ids, response: &ChatResponse, status: &str) -> Value {
    let done = status != "in_progress";
    let truncated = done && response.finish_reason == FinishReason::Length;
    let u = response.usage;
    json!({
        "id": ids.response,
        "object": "response",
        "created_at": now_ms() / 1000,
        "status": if truncated { "incomplete" } else { status },
        "incomplete_details": if truncated { json!({ "reason": "max_output_tokens" }) }
                              else { Value::Null },
        "error": null,
        "model": response.model,
        "output": if done { json!([message_item(ids, Some(&response.content))]) }
                  else { json!([]) },
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": if done { json!({
            "input_tokens": u.prompt_tokens,
            "input_tokens_details": { "cached_tokens": u.cached_tokens },
            "output_tokens": u.output_tokens,
            "output_tokens_details": { "reasoning_tokens": 0 },
            "total_tokens": u.total_tokens(),
        }) } else { Value::Null },
    })
}

fn sse(call: Call, request: ChatRequest, ids: Ids) -> impl IntoResponse {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let model = call.upstream_model().to_owned();
    tokio::spawn(async move {
        let seq = AtomicU64::new(0);
        let send = |kind: &str, mut value: Value| {
            value["type"] = json!(kind);
            value["sequence_number"] = json!(seq.fetch_add(1, Ordering::Relaxed));
            let _ = tx.send(Event::default().event(kind).data(value.to_string()));
        };
        let pending = ChatResponse {
            model,
            content: String::new(),
            finish_reason: FinishReason::Stop,
            usage: Default::default(),
            logprobs: None,
            stop_sequence: None,
        };
        let started = render(&ids, &pending, "in_progress");
        send("response.created", json!({ "response": started }));
        send("response.in_progress", json!({ "response": started }));
        let at = |extra: Value| {
            let mut v = json!({ "item_id": ids.message, "output_index": 0, "content_index": 0 });
            for (k, x) in extra.as_object().expect("object") {
                v[k] = x.clone();
            }
            v
        };
        send(
            "response.output_item.added",
            json!({ "output_index": 0, "item": message_item(&ids, None) }),
        );
        send(
            "response.content_part.added",
            at(json!({ "part": text_part("") })),
        );
        let (result, streamed) = execute_streaming(&call, request, |delta| {
            send("response.output_text.delta", at(json!({ "delta": delta })));
        })
        .await;
        match result {
            Ok((response, _)) => {
                if !streamed && !response.content.is_empty() {
                    send(
                        "response.output_text.delta",
                        at(json!({ "delta": response.content })),
                    );
                }
                send(
                    "response.output_text.done",
                    at(json!({ "text": response.content })),
                );
                send(
                    "response.content_part.done",
                    at(json!({ "part": text_part(&response.content) })),
                );
                send(
                    "response.output_item.done",
                    json!({ "output_index": 0,
                            "item": message_item(&ids, Some(&response.content)) }),
                );
                let done = render(&ids, &response, "completed");
                let kind = if done["status"] == "incomplete" {
                    "response.incomplete"
                } else {
                    "response.completed"
                };
                send(kind, json!({ "response": done }));
                let mut traced = done;
                traced["stream"] = json!(true);
                call.trace("response", Some(200), &traced);
            }
            Err(err) => send("error", err.body()),
        }
    });
    super::sse_of(rx)
}
