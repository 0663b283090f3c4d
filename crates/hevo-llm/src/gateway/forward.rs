//! Forwarding a request unchanged to an upstream of the same API, streamed when the caller
//! asked for a stream, and pricing it by the usage the upstream reports.
//!
//! Only the model name is changed (to the route's upstream model), plus one addition: a
//! streamed chat completion asks the upstream for its usage chunk
//! (`stream_options.include_usage`), which is passed on only if the caller asked for it too.
//! The upstream's status, error bodies included, reaches the caller as it is.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};

use super::detach::Answer;
use super::ending::Ending;
use super::sse::{parse_event, EventSplitter};
use super::usage::UsageWatch;
use super::Call;
use crate::backend::{Api, RawBody, RawRequest, Retries};
use crate::ledger::CallStatus;

/// The protocol headers passed on to the upstream.
const PASSED_HEADERS: &[&str] = &["anthropic-beta", "anthropic-version", "openai-beta"];

/// At most this many events of a stream are kept in the trace (the rest are counted).
const TRACED_EVENTS: usize = 2000;

/// Forwards `body` for `call` and answers with the upstream's reply. The upstream is called,
/// and a stream relayed, in the call's own task, so a caller that hangs up does not cancel
/// what the upstream bills.
pub(crate) async fn forward(
    call: Call,
    mut body: Value,
    headers: &HeaderMap,
    query: Option<String>,
) -> Response {
    if let Err(err) = call.admit() {
        return err.into_response();
    }
    let api = call.api();
    body["model"] = json!(call.upstream_model());
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    let mut hide_usage_chunk = false;
    if api == Api::ChatCompletions && stream {
        let wanted = body.pointer("/stream_options/include_usage") == Some(&json!(true));
        if !wanted {
            hide_usage_chunk = true;
            if !body.get("stream_options").is_some_and(Value::is_object) {
                body["stream_options"] = json!({});
            }
            body["stream_options"]["include_usage"] = json!(true);
        }
    }
    let passed = PASSED_HEADERS
        .iter()
        .filter_map(|name| {
            headers
                .get(*name)
                .and_then(|v| v.to_str().ok())
                .map(|v| ((*name).to_owned(), v.to_owned()))
        })
        .collect();
    let request = RawRequest {
        api,
        body,
        headers: passed,
        query,
    };
    call.detach_answering(move |call, answer| send(call, request, hide_usage_chunk, answer))
        .await
}

/// Sends `request` upstream and answers with the reply; a stream is then relayed to its
/// end. Runs in the call's own task ([`Call::detach_answering`]).
async fn send(call: Call, request: RawRequest, hide_usage_chunk: bool, answer: Answer) {
    let api = call.api();
    let reply = match call.unless_cancelled(call.backend().forward(request)).await {
        Some(Ok(reply)) => reply,
        Some(Err(err)) => return answer.send(call.fail_backend(&err).into_response()),
        None => return answer.send(call.cancelled().into_response()),
    };
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let content_type = reply.content_type.clone();
    match reply.body {
        RawBody::Full(bytes) => {
            let bytes = call.scrubbed_bytes(bytes);
            let value = serde_json::from_slice::<Value>(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
            if status.is_success() {
                let mut watch = UsageWatch::default();
                watch.observe(&value);
                call.record_ok(watch.usage(api), false, &reply.retries);
            } else {
                call.record_failure_after(
                    CallStatus::BadRequest,
                    &format!(
                        "upstream answered HTTP {}: {}",
                        status.as_u16(),
                        error_text(&value)
                    ),
                    &reply.retries,
                );
            }
            call.trace("response", Some(status.as_u16()), &value);
            answer.send((status, [(header::CONTENT_TYPE, content_type)], bytes).into_response());
        }
        RawBody::Stream(upstream) => {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<Bytes, std::io::Error>>();
            let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|item| (item, rx))
            }));
            answer.send(
                (
                    status,
                    [
                        (header::CONTENT_TYPE, content_type),
                        (header::CACHE_CONTROL, "no-cache".to_owned()),
                    ],
                    body,
                )
                    .into_response(),
            );
            relay(call, upstream, tx, hide_usage_chunk, reply.retries).await;
        }
    }
}

/// Passes a stream on event by event, watching usage, each event with the provider keys it
/// quotes replaced ([`Call::scrubbed_bytes`]); records the call when it ends. The
/// upstream is read to its end even if the caller left, so what was spent is recorded. A
/// stream that broke off, ended with an error event or without its last event ([`Ending`])
/// is a backend error, priced by the usage it had reported.
async fn relay(
    call: Call,
    mut upstream: futures::stream::BoxStream<'static, Result<Bytes, crate::BackendError>>,
    tx: tokio::sync::mpsc::UnboundedSender<Result<Bytes, std::io::Error>>,
    hide_usage_chunk: bool,
    retries: Retries,
) {
    let api = call.api();
    let mut splitter = EventSplitter::default();
    let mut watch = UsageWatch::default();
    let mut traced: Vec<Value> = Vec::new();
    let mut ending = Ending::default();
    let mut events = 0usize;
    let mut broke = None;
    let mut handle = |event: Vec<u8>, traced: &mut Vec<Value>| {
        // an event is whole here, so a key it quotes is replaced whole
        let event = call.scrubbed_bytes(Bytes::from(event));
        let (name, data) = parse_event(&event);
        let value = serde_json::from_str::<Value>(&data).ok();
        ending.observe(api, name.as_deref(), &data, value.as_ref());
        let mut pass = true;
        if let Some(value) = &value {
            watch.observe(value);
            if hide_usage_chunk
                && value
                    .get("choices")
                    .and_then(Value::as_array)
                    .is_some_and(Vec::is_empty)
                && value.get("usage").is_some_and(Value::is_object)
            {
                pass = false;
            }
        }
        events += 1;
        if traced.len() < TRACED_EVENTS {
            traced.push(json!({
                "event": name,
                "data": value.unwrap_or(Value::String(data)),
            }));
        }
        if pass {
            let _ = tx.send(Ok(event));
        }
    };
    let mut cancelled = false;
    loop {
        let Some(next) = call.unless_cancelled(upstream.next()).await else {
            cancelled = true;
            break;
        };
        let Some(chunk) = next else { break };
        match chunk {
            Ok(bytes) => {
                for event in splitter.push(&bytes) {
                    handle(event, &mut traced);
                }
                if splitter.oversized() {
                    broke = Some(crate::backend::oversized("event").to_string());
                    break;
                }
            }
            Err(err) => {
                broke = Some(err.to_string());
                break;
            }
        }
    }
    let rest = splitter.rest();
    if !rest.iter().all(u8::is_ascii_whitespace) {
        handle(rest, &mut traced);
    }
    let cut = cancelled || broke.is_some();
    let mut usage = watch.usage(api);
    let failure = match (cancelled, broke) {
        (true, _) => {
            let (priced, message) = call.cancelled_usage(usage);
            usage = priced;
            Some(message.to_owned())
        }
        (false, Some(err)) => Some(format!("the upstream stream broke off: {err}")),
        (false, None) => ending.failure(api),
    };
    match failure {
        None => call.record_ok(usage, false, &retries),
        Some(failure) => {
            if cut {
                // the caller's stream is cut too, so its SDK does not take it for whole
                let _ = tx.send(Err(std::io::Error::other(failure.clone())));
            }
            let retries = Retries {
                count: retries.count,
                last_error: if cancelled {
                    retries.last_error
                } else {
                    Some(failure.clone())
                },
            };
            call.record_spent_failure(usage, &failure, &retries);
        }
    }
    let mut summary = json!({
        "stream": true,
        "events": events,
        "usage": usage_summary(&watch, api),
        "model": watch.model(),
        "data": traced,
    });
    if events > TRACED_EVENTS {
        summary["events_not_traced"] = json!(events - TRACED_EVENTS);
    }
    call.trace("response", Some(200), &summary);
}

fn usage_summary(watch: &UsageWatch, api: Api) -> Value {
    if !watch.seen() {
        return Value::Null;
    }
    let u = watch.usage(api);
    json!({ "prompt_tokens": u.prompt_tokens, "cached_tokens": u.cached_tokens,
            "output_tokens": u.output_tokens })
}

/// The message of a provider error body, or the body itself, shortened.
fn error_text(value: &Value) -> String {
    match value.pointer("/error/message").and_then(Value::as_str) {
        Some(message) => message.to_owned(),
        None => value.to_string().chars().take(500).collect(),
    }
}
