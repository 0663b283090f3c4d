//! OpenAI's `POST /v1/chat/completions`, plain and SSE: forwarded unchanged to an `openai`
//! backend; for any other backend, translated when it is plain chat and refused otherwise
//! (see the module docs of `gateway`).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::call::execute_streaming;
use super::forward::forward;
use super::limits::Held;
use super::misc::open_call;
use super::same_api::forward_plain;
use super::translate::{absent, check_fields, content_text, field};
use super::{now_ms, random_id, Call, Gateway, Refusal};
use crate::backend::Api;
use crate::types::{ChatMessage, ChatRequest, ChatResponse, FinishReason, TokenLogprob};

/// Fields a plain chat completion sets, all carried by the translation (`user`, `metadata`
/// and `store` only label the call upstream).
const FIELDS: &[&str] = &[
    "model",
    "messages",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "logprobs",
    "top_logprobs",
    "n",
    "stream",
    "stream_options",
    "user",
    "metadata",
    "store",
];

#[derive(Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

/// Options of the OpenAI dialect that do not reach the backend.
pub(crate) struct Options {
    stream: bool,
    include_usage: bool,
    logprobs: bool,
}

/// Settings that change nothing when no tools are given, or that ask for the default.
fn harmless(key: &str, value: &Value, has_tools: bool) -> bool {
    match key {
        "tool_choice" => !has_tools && (value == "none" || value == "auto"),
        "parallel_tool_calls" => !has_tools,
        "response_format" => value.get("type") == Some(&json!("text")),
        "frequency_penalty" | "presence_penalty" => value.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Translates a chat completion request, or says why it cannot be carried exactly.
pub(super) fn parse(raw: &Value) -> Result<(ChatRequest, Options), Refusal> {
    let Some(object) = raw.as_object() else {
        return Err(Refusal::Invalid(
            "the request body must be a JSON object".into(),
        ));
    };
    let has_tools = object.get("tools").is_some_and(|t| !absent(t));
    check_fields(object, FIELDS, |k, v| harmless(k, v, has_tools), "")?;
    let Some(wire_messages) = object.get("messages") else {
        return Err(Refusal::Invalid(
            "invalid chat completion request: missing field `messages`".into(),
        ));
    };
    let Some(wire_messages) = wire_messages.as_array() else {
        return Err(Refusal::Invalid("`messages` must be an array".into()));
    };
    if wire_messages.is_empty() {
        return Err(Refusal::Invalid(
            "`messages` must contain at least one message".into(),
        ));
    }
    if field::<u32>(object, "n")?.is_some_and(|n| n != 1) {
        return Err(Refusal::Unsupported(
            "`n` other than 1 (several choices; or make several calls)".into(),
        ));
    }
    let temperature = field::<f32>(object, "temperature")?;
    if let Some(t) = temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(Refusal::Invalid(format!(
                "`temperature` must be between 0 and 2, got {t}"
            )));
        }
    }
    let logprobs = field::<bool>(object, "logprobs")?.unwrap_or(false);
    let top_logprobs = field::<u32>(object, "top_logprobs")?.unwrap_or(0);
    if top_logprobs > 20 {
        return Err(Refusal::Invalid(format!(
            "`top_logprobs` must be between 0 and 20, got {top_logprobs}"
        )));
    }
    if top_logprobs > 0 && !logprobs {
        return Err(Refusal::Invalid(
            "`top_logprobs` requires `logprobs: true`".into(),
        ));
    }
    let mut messages = Vec::with_capacity(wire_messages.len());
    for (i, m) in wire_messages.iter().enumerate() {
        messages.push(message(i, m)?);
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
        max_tokens: field::<u32>(object, "max_completion_tokens")?
            .or(field::<u32>(object, "max_tokens")?),
        stop: match field::<Stop>(object, "stop")? {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s],
            Some(Stop::Many(v)) => v,
        },
        seed: field(object, "seed")?,
        logprobs,
        top_logprobs,
        caller: String::new(),
    };
    let options = Options {
        stream: field::<bool>(object, "stream")?.unwrap_or(false),
        include_usage: raw.pointer("/stream_options/include_usage") == Some(&json!(true)),
        logprobs,
    };
    Ok((request, options))
}

/// Translates `messages[i]`: text in any of the four text roles.
fn message(i: usize, m: &Value) -> Result<ChatMessage, Refusal> {
    let Some(m) = m.as_object() else {
        return Err(Refusal::Invalid(format!("messages[{i}] must be an object")));
    };
    let role = match m.get("role").and_then(Value::as_str) {
        Some("developer" | "system") => "system",
        Some("user") => "user",
        Some("assistant") => "assistant",
        Some("tool" | "function") => {
            return Err(Refusal::Unsupported(format!(
                "tool results (messages[{i}] has role `tool`)"
            )))
        }
        Some(other) => {
            return Err(Refusal::Invalid(format!(
                "messages[{i}].role: unknown role `{other}`"
            )))
        }
        None => return Err(Refusal::Invalid(format!("messages[{i}] needs a `role`"))),
    };
    check_fields(
        m,
        &["role", "content", "refusal"],
        |_, _| false,
        &format!("messages[{i}]."),
    )?;
    let content = content_text(
        m.get("content").unwrap_or(&Value::Null),
        &format!("messages[{i}].content"),
    )?;
    Ok(ChatMessage::new(role, content))
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
    RawQuery(query): RawQuery,
    Extension(held): Extension<Held>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (call, raw) = match open_call(&gateway, Api::ChatCompletions, &headers, body, held) {
        Ok(opened) => opened,
        Err(refused) => return refused.into_response(),
    };
    let forwards = call.backend().forwards(Api::ChatCompletions);
    let id = format!("chatcmpl-{}", random_id());
    let (request, options) = match parse(&raw) {
        Err(Refusal::Invalid(message)) => {
            return call.refuse(Refusal::Invalid(message)).into_response()
        }
        Ok((request, options)) if forwards && !options.stream => {
            let render = |r: &ChatResponse| render(&id, &r.model, r, options.logprobs);
            return forward_plain(&gateway, call, raw, request, &headers, query, render).await;
        }
        Ok(_) | Err(_) if forwards => return forward(call, raw, &headers, query).await,
        Err(refusal) => return call.refuse(refusal).into_response(),
        Ok(translated) => translated,
    };
    if let Err(err) = call.admit() {
        return err.into_response();
    }
    if options.stream {
        stream(call, request, options, id).into_response()
    } else {
        call.detach(|call| async move {
            match call.execute(request, None).await {
                Ok((response, _)) => {
                    let body = render(&id, &response.model, &response, options.logprobs);
                    call.trace("response", Some(200), &body);
                    Json(body).into_response()
                }
                Err(err) => err.into_response(),
            }
        })
        .await
    }
}

fn stream(call: Call, request: ChatRequest, options: Options, id: String) -> impl IntoResponse {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let model = call.upstream_model().to_owned();
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
    super::sse_of(rx)
}
