//! The Anthropic dialect: `POST /v1/messages` (plain and SSE).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::openai_api::{bearer, content_text};
use super::{execute_streaming, random_id, Call, Dialect, Gateway};
use crate::types::{ChatMessage, ChatRequest, ChatResponse, FinishReason};

#[derive(Deserialize)]
struct WireRequest {
    model: String,
    max_tokens: u32,
    messages: Vec<WireMessage>,
    #[serde(default)]
    system: Value,
    temperature: Option<f32>,
    top_p: Option<f32>,
    stop_sequences: Option<Vec<String>>,
    stream: Option<bool>,
    tools: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    content: Value,
}

fn parse(raw: Value) -> Result<(ChatRequest, bool), String> {
    let wire: WireRequest =
        serde_json::from_value(raw).map_err(|e| format!("invalid messages request: {e}"))?;
    if wire.messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    if wire.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err("tools are not supported by hevo's gateway yet".into());
    }
    if let Some(t) = wire.temperature {
        if !(0.0..=1.0).contains(&t) {
            return Err(format!("temperature: must be between 0 and 1, got {t}"));
        }
    }
    let mut messages = Vec::with_capacity(wire.messages.len() + 1);
    if !wire.system.is_null() {
        messages.push(ChatMessage::new(
            "system",
            content_text(wire.system, "system")?,
        ));
    }
    for (i, m) in wire.messages.into_iter().enumerate() {
        if m.role != "user" && m.role != "assistant" {
            return Err(format!(
                "messages.{i}.role: must be `user` or `assistant`, got `{}`",
                m.role
            ));
        }
        let content = content_text(m.content, &format!("messages.{i}.content"))?;
        messages.push(ChatMessage {
            role: m.role,
            content,
        });
    }
    let request = ChatRequest {
        model: wire.model,
        messages,
        temperature: wire.temperature,
        top_p: wire.top_p,
        max_tokens: Some(wire.max_tokens),
        stop: wire.stop_sequences.unwrap_or_default(),
        seed: None,
        logprobs: false,
        top_logprobs: 0,
    };
    Ok((request, wire.stream.unwrap_or(false)))
}

fn key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| bearer(headers))
}

fn stop_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
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
        "stop_reason": stop_reason(response.finish_reason),
        "stop_sequence": null,
        "usage": usage_json(response),
    })
}

/// `POST /v1/messages`.
pub(crate) async fn messages(
    State(gateway): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (call, request, stream) =
        match gateway.prepare(Dialect::Anthropic, key(&headers), &body, parse) {
            Ok(prepared) => prepared,
            Err(err) => return err.into_response(),
        };
    let id = format!("msg_{}", random_id());
    if stream {
        return sse(call, request, id).into_response();
    }
    match call.execute(request, None).await {
        Ok((response, _)) => {
            let body = render(&id, call.requested_model(), &response);
            call.trace("response", Some(200), &body);
            Json(body).into_response()
        }
        Err(err) => err.into_response(),
    }
}

fn sse(call: Call, request: ChatRequest, id: String) -> impl IntoResponse {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let model = call.requested_model().to_owned();
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
                            "delta": { "stop_reason": stop_reason(response.finish_reason),
                                       "stop_sequence": null },
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
    let events = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, std::convert::Infallible>(event), rx))
    });
    Sse::new(events)
}
