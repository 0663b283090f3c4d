//! The small endpoints: `HEAD /` and `GET /`, the model list and one model, embeddings; the
//! 404 of every path not served and the 405 of a served path called with another method; and
//! [`open_call`], how every model endpoint starts a call (or refuses one whose body cannot
//! be read).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::call::api_key;
use super::forward::forward;
use super::limits::Held;
use super::{ApiError, Call, Dialect, ErrorKind, Gateway, SERVED};
use crate::backend::Api;

/// The dialect to answer a request with no API of its own in: Anthropic when the caller sent
/// Anthropic's version header, else OpenAI.
fn guess_dialect(headers: &HeaderMap) -> Dialect {
    if headers.contains_key("anthropic-version") {
        Dialect::Anthropic
    } else {
        Dialect::OpenAi
    }
}

/// `HEAD /` and `GET /` (Claude Code checks that the base URL answers): what is served.
pub(crate) async fn root(method: Method) -> Response {
    if method == Method::HEAD {
        return StatusCode::OK.into_response();
    }
    Json(json!({ "service": "hevo gateway", "served": SERVED })).into_response()
}

/// Any other path: 404 in the caller's dialect, listing what is served.
pub(crate) async fn not_served(method: Method, uri: Uri, headers: HeaderMap) -> Response {
    ApiError::new(
        guess_dialect(&headers),
        ErrorKind::NotFound,
        format!(
            "{method} {} is not served by hevo's gateway; it serves: {}",
            uri.path(),
            SERVED.join(", ")
        ),
    )
    .into_response()
}

/// A served path called with a method it does not serve: 405 in the caller's dialect (axum
/// adds the `Allow` header), naming the methods that path serves. Like the 404, not a call.
pub(crate) async fn method_not_allowed(method: Method, uri: Uri, headers: HeaderMap) -> Response {
    let path = uri.path();
    let dialect = match Dialect::of_path(path) {
        Dialect::Anthropic => Dialect::Anthropic,
        Dialect::OpenAi => guess_dialect(&headers),
    };
    let served: Vec<&str> = SERVED
        .iter()
        .filter(|s| s.split_once(' ').is_some_and(|(_, p)| same_path(p, path)))
        .copied()
        .collect();
    ApiError::new(
        dialect,
        ErrorKind::MethodNotAllowed,
        format!(
            "{method} {path} is not served by hevo's gateway; this path serves: {}",
            served.join(", ")
        ),
    )
    .into_response()
}

/// True when `path` matches `pattern`, whose `{...}` segments match any one segment.
fn same_path(pattern: &str, path: &str) -> bool {
    let (mut a, mut b) = (pattern.split('/'), path.split('/'));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(p), Some(s)) if p == s || (p.starts_with('{') && !s.is_empty()) => {}
            _ => return false,
        }
    }
}

/// Starts a call of `api`: reads its body, authenticates, traces and parses it
/// ([`Gateway::begin`]). Every model endpoint starts so; a refusal is in the caller's format
/// and already in the ledger.
pub(crate) fn open_call(
    gateway: &Gateway,
    api: Api,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    held: Held,
) -> Result<(Call, Value), ApiError> {
    let body = read_body(gateway, api, headers, body, &held)?;
    gateway.begin(api, headers, &body, held)
}

/// The body of a call of `api`, or the refusal of a call whose body could not be read (over
/// the body limit: 413; broken off: 400), in the caller's format and already in the ledger;
/// the refused call holds `held` (the request's slots and bytes) until it is recorded.
fn read_body(
    gateway: &Gateway,
    api: Api,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    held: &Held,
) -> Result<Bytes, ApiError> {
    let rejection = match body {
        Ok(body) => return Ok(body),
        Err(rejection) => rejection,
    };
    let err = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            Dialect::of(api),
            ErrorKind::TooLarge,
            format!(
                "request body is larger than the gateway's limit of {} bytes",
                gateway.inner.max_body_bytes
            ),
        )
    } else {
        ApiError::new(
            Dialect::of(api),
            ErrorKind::InvalidRequest,
            format!("request body could not be read: {rejection}"),
        )
    };
    Err(gateway.refuse_unread(api, headers, err, held.clone()))
}

/// One model, in a shape both SDKs read (OpenAI's `object`/`owned_by`, Anthropic's
/// `type`/`display_name`/`created_at`).
fn model_json(name: &str) -> Value {
    json!({
        "id": name, "object": "model", "created": 0, "owned_by": "hevo",
        "type": "model", "display_name": name, "created_at": "1970-01-01T00:00:00Z",
    })
}

/// `GET /v1/models`.
pub(crate) async fn list_models(State(gateway): State<Gateway>, headers: HeaderMap) -> Response {
    if let Err(err) = gateway.authenticate(api_key(&headers), guess_dialect(&headers)) {
        return err.into_response();
    }
    let data: Vec<Value> = gateway.models().iter().map(|m| model_json(m)).collect();
    Json(json!({
        "object": "list", "data": data, "has_more": false,
        "first_id": gateway.models().first(), "last_id": gateway.models().last(),
    }))
    .into_response()
}

/// `GET /v1/models/{id}`: a model harnesses may call (the default route serves any name).
pub(crate) async fn get_model(
    State(gateway): State<Gateway>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let dialect = guess_dialect(&headers);
    if let Err(err) = gateway.authenticate(api_key(&headers), dialect) {
        return err.into_response();
    }
    if gateway.route(&id).is_none() {
        return ApiError::new(
            dialect,
            ErrorKind::NotFound,
            format!(
                "model `{id}` is not served by this gateway; available: {}",
                gateway.models().join(", ")
            ),
        )
        .into_response();
    }
    Json(model_json(&id)).into_response()
}

/// `POST /v1/embeddings`: forwarded to an OpenAI-compatible upstream; other backends answer
/// 400.
pub(crate) async fn embeddings(
    State(gateway): State<Gateway>,
    RawQuery(query): RawQuery,
    Extension(held): Extension<Held>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (call, raw) = match open_call(&gateway, Api::Embeddings, &headers, body, held) {
        Ok(opened) => opened,
        Err(refused) => return refused.into_response(),
    };
    if call.backend().forwards(Api::Embeddings) {
        forward(call, raw, &headers, query).await
    } else {
        call.unsupported("embeddings (`POST /v1/embeddings`)")
            .into_response()
    }
}
