//! The OpenAI dialect: `POST /v1/chat/completions` (plain and SSE) and `GET /v1/models`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{execute_streaming, now_ms, random_id, Call, Dialect, Gateway};
use crate::types::{ChatMessage, ChatRequest, ChatResponse, FinishReason, TokenLogprob};

#[derive(Deserialize)]
struct WireRequest {
    model: String,
    messages: Vec<WireMessage>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    stop: Option<Stop>,
    seed: Option<u64>,
    logprobs: Option<bool>,
    top_logprobs: Option<u32>,
    n: Option<u32>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    tools: Option<Vec<Value>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    #[serde(default)]
    content: Value,
}

/// The text of a message `content`: a string, or an array of `{"type": "text", "text": ...}`
/// parts; `what` names the field in the error message.
pub(crate) fn content_text(value: Value, what: &str) -> Result<String, String> {
    match value {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text),
        Value::Array(parts) => {
            let mut out = String::new();
            for (i, part) in parts.iter().enumerate() {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(text))) => out.push_str(text),
                    (Some("text"), _) => {
                        return Err(format!("{what}[{i}]: a text part needs a string `text`"))
                    }
                    (Some(kind), _) => {
                        return Err(format!(
                            "{what}[{i}]: content parts of type `{kind}` are not supported \
                             (only `text`)"
                        ))
                    }
                    (None, _) => return Err(format!("{what}[{i}]: a content part needs a `type`")),
                }
            }
            Ok(out)
        }
        other => Err(format!(
            "{what} must be a string or an array of text parts, got {}",
            match other {
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                _ => "an object",
            }
        )),
    }
}

/// Options of the OpenAI dialect that do not reach the backend.
pub(crate) struct Options {
    stream: bool,
    include_usage: bool,
    logprobs: bool,
}

fn parse(raw: Value) -> Result<(ChatRequest, Options), String> {
    let wire: WireRequest =
        serde_json::from_value(raw).map_err(|e| format!("invalid chat completion request: {e}"))?;
    if wire.messages.is_empty() {
        return Err("`messages` must contain at least one message".into());
    }
    if wire.n.is_some_and(|n| n != 1) {
        return Err("`n` other than 1 is not supported; make several calls".into());
    }
    if wire.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err("`tools` are not supported by hevo's gateway yet".into());
    }
    if let Some(t) = wire.temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(format!("`temperature` must be between 0 and 2, got {t}"));
        }
    }
    let logprobs = wire.logprobs.unwrap_or(false);
    let top_logprobs = wire.top_logprobs.unwrap_or(0);
    if top_logprobs > 20 {
        return Err(format!(
            "`top_logprobs` must be between 0 and 20, got {top_logprobs}"
        ));
    }
    if top_logprobs > 0 && !logprobs {
        return Err("`top_logprobs` requires `logprobs: true`".into());
    }
    let mut messages = Vec::with_capacity(wire.messages.len());
    for (i, m) in wire.messages.into_iter().enumerate() {
        let role = if m.role == "developer" {
            "system".to_owned()
        } else {
            m.role
        };
        let content = content_text(m.content, &format!("messages[{i}].content"))?;
        messages.push(ChatMessage { role, content });
    }
    let request = ChatRequest {
        model: wire.model,
        messages,
        temperature: wire.temperature,
        top_p: wire.top_p,
        max_tokens: wire.max_completion_tokens.or(wire.max_tokens),
        stop: match wire.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s],
            Some(Stop::Many(v)) => v,
        },
        seed: wire.seed,
        logprobs,
        top_logprobs,
    };
    let options = Options {
        stream: wire.stream.unwrap_or(false),
        include_usage: wire.stream_options.is_some_and(|o| o.include_usage),
        logprobs,
    };
    Ok((request, options))
}

/// The trial key from `Authorization: Bearer KEY` (or `x-api-key`).
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
}

fn finish(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
    }
}

fn usage_json(response: &ChatResponse) -> Value {
    let u = response.usage;
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total_tokens(),
        "prompt_tokens_details": { "cached_tokens": u.cached_tokens },
    })
}

fn logprobs_json(items: &[TokenLogprob]) -> Value {
    let entry = |token: &str, logprob: f64| json!({ "token": token, "logprob": logprob, "bytes": token.as_bytes() });
    let content: Vec<Value> = items
        .iter()
        .map(|t| {
            let mut v = entry(&t.token, t.logprob);
            v["top_logprobs"] = t
                .top_logprobs
                .iter()
                .map(|a| entry(&a.token, a.logprob))
                .collect();
            v
        })
        .collect();
    json!({ "content": content })
}

fn render(id: &str, model: &str, response: &ChatResponse, logprobs: bool) -> Value {
    let lp = match (&response.logprobs, logprobs) {
        (Some(items), true) => logprobs_json(items),
        _ => Value::Null,
    };
    json!({
        "id": id,
        "object": "chat.completion",
        "created": now_ms() / 1000,
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": response.content },
            "logprobs": lp,
            "finish_reason": finish(response.finish_reason),
        }],
        "usage": usage_json(response),
        "system_fingerprint": "hevo",
    })
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(
    State(gateway): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (call, request, options) =
        match gateway.prepare(Dialect::OpenAi, bearer(&headers), &body, parse) {
            Ok(prepared) => prepared,
            Err(err) => return err.into_response(),
        };
    let id = format!("chatcmpl-{}", random_id());
    if options.stream {
        stream(call, request, options, id).into_response()
    } else {
        match call.execute(request, None).await {
            Ok((response, _)) => {
                let body = render(&id, call.requested_model(), &response, options.logprobs);
                call.trace("response", Some(200), &body);
                Json(body).into_response()
            }
            Err(err) => err.into_response(),
        }
    }
}

fn stream(call: Call, request: ChatRequest, options: Options, id: String) -> impl IntoResponse {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let model = call.requested_model().to_owned();
    tokio::spawn(async move {
        let created = now_ms() / 1000;
        let chunk = |delta: Value, finish_reason: Value, logprobs: Value| {
            json!({
                "id": id, "object": "chat.completion.chunk", "created": created,
                "model": model, "system_fingerprint": "hevo",
                "choices": [{ "index": 0, "delta": delta, "logprobs": logprobs,
                              "finish_reason": finish_reason }],
            })
        };
        let send = |value: Value| {
            let _ = tx.send(Event::default().data(value.to_string()));
        };
        send(chunk(
            json!({ "role": "assistant", "content": "" }),
            Value::Null,
            Value::Null,
        ));
        let (result, streamed) = execute_streaming(&call, request, |delta| {
            send(chunk(json!({ "content": delta }), Value::Null, Value::Null));
        })
        .await;
        match result {
            Ok((response, _)) => {
                let lp = match (&response.logprobs, options.logprobs) {
                    (Some(items), true) => logprobs_json(items),
                    _ => Value::Null,
                };
                if !streamed && !response.content.is_empty() {
                    send(chunk(
                        json!({ "content": response.content }),
                        Value::Null,
                        lp.clone(),
                    ));
                }
                let last_lp = if streamed { lp } else { Value::Null };
                send(chunk(
                    json!({}),
                    json!(finish(response.finish_reason)),
                    last_lp,
                ));
                if options.include_usage {
                    let mut usage_chunk = chunk(json!({}), Value::Null, Value::Null);
                    usage_chunk["choices"] = json!([]);
                    usage_chunk["usage"] = usage_json(&response);
                    send(usage_chunk);
                }
                let mut traced = render(&id, &model, &response, options.logprobs);
                traced["stream"] = json!(true);
                call.trace("response", Some(200), &traced);
            }
            Err(err) => send(err.body()),
        }
        let _ = tx.send(Event::default().data("[DONE]"));
    });
    let events = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, std::convert::Infallible>(event), rx))
    });
    Sse::new(events)
}

/// `GET /v1/models`.
pub(crate) async fn list_models(State(gateway): State<Gateway>, headers: HeaderMap) -> Response {
    if let Err(err) = gateway.authenticate(bearer(&headers), Dialect::OpenAi) {
        return err.into_response();
    }
    let data: Vec<Value> = gateway
        .models()
        .iter()
        .map(|name| json!({ "id": name, "object": "model", "created": 0, "owned_by": "hevo" }))
        .collect();
    Json(json!({ "object": "list", "data": data })).into_response()
}
