//! A plain request to a backend that speaks the request's own API: forwarded unchanged, as
//! [`forward`] forwards everything else of that API (its body, protocol headers and query),
//! so nothing the translation into a [`ChatRequest`] does not carry is lost on the way:
//! Anthropic's `cache_control` and `anthropic-beta` (prompt caching, betas), OpenAI's
//! `developer` role and `max_completion_tokens`, `?beta=true`.
//!
//! What translating such a request was for is kept: the response cache. A deterministic
//! request is keyed by its translation (and the beta headers, which can change an answer),
//! answered from the cache when the key is there (rendered in the caller's format, at the
//! price the call would have had), and otherwise forwarded, its answer stored when it is
//! plain text the cache can replay exactly
//! ([`Api::plain_answer`](crate::backend::Api::plain_answer)).

use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use super::forward::forward;
use super::{Call, Gateway};
use crate::backend::{Backend, Retries};
use crate::cache::ResponseCache;
use crate::types::{ChatRequest, ChatResponse};

/// Headers that can change an answer and so are part of the cache key when sent.
const KEYED_HEADERS: &[&str] = &["anthropic-beta", "openai-beta"];

/// Answers `raw` (whose translation is `request`) for `call` as the module docs say;
/// `render` writes a cached answer in the caller's format.
pub(super) async fn forward_plain(
    gateway: &Gateway,
    call: Call,
    raw: Value,
    mut request: ChatRequest,
    headers: &HeaderMap,
    query: Option<String>,
    render: impl FnOnce(&ChatResponse) -> Value,
) -> Response {
    let cache = match &gateway.inner.cache {
        Some(cache) if request.is_deterministic() => cache,
        _ => return forward(call, raw, headers, query).await,
    };
    request.model = call.upstream_model().to_owned();
    let key = ResponseCache::key(&identity(call.backend(), headers), &request);
    if let Some(cached) = cache.get(&key) {
        if let Err(err) = call.admit() {
            return err.into_response();
        }
        call.record_ok(cached.usage, true, &Retries::default());
        let body = render(&cached);
        call.trace("response", Some(200), &body);
        return Json(body).into_response();
    }
    let api = call.api();
    let response = forward(call, raw, headers, query).await;
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if response.status() != StatusCode::OK || !json {
        return response;
    }
    let (parts, body) = response.into_parts();
    // a forwarded JSON answer is held whole (`RawBody::Full`): this only unwraps it
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let answer = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|value| api.plain_answer(&value, &request.model));
    if let Some(answer) = answer {
        if let Err(err) = cache.put(&key, &answer) {
            tracing::warn!(%err, "response cache write failed");
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The backend's cache identity plus the [`KEYED_HEADERS`] the caller sent.
fn identity(backend: &dyn Backend, headers: &HeaderMap) -> String {
    let mut identity = backend.cache_identity();
    for name in KEYED_HEADERS {
        if let Some(value) = headers.get(*name).and_then(|v| v.to_str().ok()) {
            identity.push_str(&format!("\n{name}: {value}"));
        }
    }
    identity
}
