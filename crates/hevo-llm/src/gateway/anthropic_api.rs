//! Anthropic's `POST /v1/messages` (plain and SSE) and `POST /v1/messages/count_tokens`:
//! forwarded unchanged to an `anthropic` backend; for any other backend, translated when it
//! is plain chat and refused otherwise (see the module docs of `gateway`).

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
use super::same_api::forward_plain;
use super::translate::{absent, check_fields, content_text, field};
use super::{random_id, Call, Gateway, Refusal};
use crate::backend::Api;
use crate::types::{ChatMessage, ChatRequest, ChatResponse, FinishReason};

/// Fields a plain messages request sets, all carried by the translation (`metadata` only
/// labels the call upstream).
const FIELDS: &[&str] = &[
    "model",
    "max_tokens",
    "messages",
    "system",
    "temperature",
    "top_p",
    "stop_sequences",
    "stream",
    "metadata",
];

/// Settings that change nothing when no tools are given, or that ask for the default.
fn harmless(key: &str, value: &Value, has_tools: bool) -> bool {
    let kind = value.get("type").and_then(Value::as_str);
    match key {
        "tool_choice" => !has_tools && matches!(kind, Some("none" | "auto")),
        "thinking" => kind == Some("disabled"),
        // automatic prompt caching: a hint, the answer is the same
        "cache_control" => true,
        _ => false,
    }
}

/// Translates a messages request, or says why it cannot be carried exactly.
pub(super) fn parse(raw: &Value) -> Result<(ChatRequest, bool), Refusal> {
    let Some(object) = raw.as_object() else {
        return Err(Refusal::Invalid(
            "the request body must be a JSON object".into(),
        ));
    };
    let Some(max_tokens) = field::<u32>(object, "max_tokens")? else {
        return Err(Refusal::Invalid(
            "max_tokens: field required (the Messages API needs `max_tokens`)".into(),
        ));
    };
    let has_tools = object.get("tools").is_some_and(|t| !absent(t));
    check_fields(object, FIELDS, |k, v| harmless(k, v, has_tools), "")?;
    let wire_messages = match object.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        _ => {
            return Err(Refusal::Invalid(
                "messages: at least one message is required".into(),
            ))
        }
    };
    let temperature = field::<f32>(object, "temperature")?;
    if let Some(t) = temperature {
        if !(0.0..=1.0).contains(&t) {
            return Err(Refusal::Invalid(format!(
                "temperature: must be between 0 and 1, got {t}"
            )));
        }
    }
    let mut messages = Vec::with_capacity(wire_messages.len() + 1);
    if let Some(system) = object.get("system").filter(|s| !s.is_null()) {
        messages.push(ChatMessage::new("system", content_text(system, "system")?));
    }
    for (i, m) in wire_messages.iter().enumerate() {
        let Some(m) = m.as_object() else {
            return Err(Refusal::Invalid(format!("messages.{i}: must be an object")));
        };
        // Claude Code puts a `role: "system"` message inside `messages`
        let role = match m.get("role").and_then(Value::as_str) {
            Some(role @ ("user" | "assistant" | "system")) => role,
            other => {
                return Err(Refusal::Invalid(format!(
                    "messages.{i}.role: must be `user`, `assistant` or `system`, got {}",
                    other.map_or("nothing".to_owned(), |r| format!("`{r}`"))
                )))
            }
        };
        check_fields(
            m,
            &["role", "content"],
            |_, _| false,
            &format!("messages.{i}."),
        )?;
        let content = content_text(
            m.get("content").unwrap_or(&Value::Null),
            &format!("messages.{i}.content"),
        )?;
        messages.push(ChatMessage::new(role, content));
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
        max_tokens: Some(max_tokens),
        stop: field(object, "stop_sequences")?.unwrap_or_default(),
        seed: None,
        logprobs: false,
        top_logprobs: 0,
        caller: String::new(),
    };
    Ok((request, field::<bool>(object, "stream")?.unwrap_or(false)))
}

/// `POST /v1/messages` (`?beta=true` is passed on to an upstream).
pub(crate) async fn messages(
    State(gateway): State<Gateway>,
    Extension(held): Extension<Held>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (call, raw) = match open_call(&gateway, Api::Messages, &headers, body, held) {
        Ok(opened) => opened,
        Err(refused) => return refused.into_response(),
    };
    let forwards = call.backend().forwards(Api::Messages);
    let id = format!("msg_{}", random_id());
    let (request, stream) = match parse(&raw) {
        Err(Refusal::Invalid(message)) => {
            return call.refuse(Refusal::Invalid(message)).into_response()
        }
        Ok((request, false)) if forwards => {
            let render = |response: &ChatResponse| render(&id, &response.model, response);
            return forward_plain(&gateway, call, raw, request, &headers, query, render).await;
        }
        Ok(_) | Err(_) if forwards => return forward(call, raw, &headers, query).await,
        Err(refusal) => return call.refuse(refusal).into_response(),
        Ok(translated) => translated,
    };
    if let Err(err) = call.admit() {
        return err.into_response();
    }
    if stream {
        return sse(call, request, id).into_response();
    }
    call.detach(|call| async move {
        match call.execute(request, None).await {
            Ok((response, _)) => {
                let body = render(&id, &response.model, &response);
                call.trace("response", Some(200), &body);
                Json(body).into_response()
            }
            Err(err) => err.into_response(),
        }
    })
    .await
}

/// `POST /v1/messages/count_tokens`: forwarded to an Anthropic upstream; other backends
/// answer 400.
pub(crate) async fn count_tokens(
    State(gateway): State<Gateway>,
    Extension(held): Extension<Held>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (call, raw) = match open_call(&gateway, Api::CountTokens, &headers, body, held) {
        Ok(opened) => opened,
        Err(refused) => return refused.into_response(),
    };
    if call.backend().forwards(Api::CountTokens) {
        forward(call, raw, &headers, query).await
    } else {
        call.unsupported("token counting (`POST /v1/messages/count_tokens`)")
            .into_response()
    }
}

/// The `stop_reason` of `response`: `stop_sequence` when it names the stop string hit.
fn stop_reason(response: &ChatResponse) -> &'static str {
    match (response.finish_reason, &response.stop_sequence) {
        (FinishReason::Length, _) => "max_tokens",
        (FinishReason::Stop, Some(_)) => "stop_sequence",
        (FinishReason::Stop, None) => "end_turn",
    }
}

fn usage_json(response: &ChatResponse) -> Value {
    let u = response.usage;
    json!({
        "input_tokens": u.uncached_tokens(),
        "cache_read_input_tokens": u.cached_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": u.output_tokens,
    })
}

fn render(id: &str, model: &str, response: &ChatResponse) -> Value {
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{ "type": "text", "text": response.content }],
        "stop_reason": stop_reason(response),
        "stop_sequence": response.stop_sequence,
        "usage": usage_json(response),
    })
}

fn sse(call: Call, request: ChatRequest, id: String) -> impl IntoResponse {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let model = call.upstream_model().to_owned();
    tokio::spawn(async move {
        let send = |name: &str, value: Value| {
            let _ = tx.send(Event::default().event(name).data(value.to_string()));
        };
        let mut start = json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": { "input_tokens": 0, "output_tokens": 0 },
        });
        send(
            "message_start",
            json!({ "type": "message_start", "message": start.take() }),
        );
        send(
            "content_block_start",
            json!({ "type": "content_block_start", "index": 0,
                    "content_block": { "type": "text", "text": "" } }),
        );
        let text_delta = |text: String| {
            json!({ "type": "content_block_delta", "index": 0,
                    "delta": { "type": "text_delta", "text": text } })
        };
        let (result, streamed) = execute_streaming(&call, request, |delta| {
            send("content_block_delta", text_delta(delta))
        })
        .await;
        match result {
            Ok((response, _)) => {
                if !streamed && !response.content.is_empty() {
                    send("content_block_delta", text_delta(response.content.clone()));
                }
                send(
                    "content_block_stop",
                    json!({ "type": "content_block_stop", "index": 0 }),
                );
                send(
                    "message_delta",
                    json!({ "type": "message_delta",
                            "delta": { "stop_reason": stop_reason(&response),
                                       "stop_sequence": response.stop_sequence },
                            "usage": usage_json(&response) }),
                );
                send("message_stop", json!({ "type": "message_stop" }));
                let mut traced = render(&id, &model, &response);
                traced["stream"] = json!(true);
                call.trace("response", Some(200), &traced);
            }
            Err(err) => send("error", err.body()),
        }
    });
    super::sse_of(rx)
}
