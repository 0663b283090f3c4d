//! [`ApiError`]: a failed gateway call rendered in the calling provider's error format.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// Which provider's HTTP dialect a request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// OpenAI chat completions.
    OpenAi,
    /// Anthropic messages.
    Anthropic,
}

impl Dialect {
    /// The dialect of `api`'s provider.
    pub(crate) fn of(api: crate::backend::Api) -> Self {
        if api.is_openai() {
            Dialect::OpenAi
        } else {
            Dialect::Anthropic
        }
    }

    /// The dialect of a request to `path` (Anthropic's routes start with `/v1/messages`).
    pub(crate) fn of_path(path: &str) -> Self {
        if path.starts_with("/v1/messages") {
            Dialect::Anthropic
        } else {
            Dialect::OpenAi
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
        }
    }
}

/// The kinds of failure a caller can see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    InvalidRequest,
    Authentication,
    NotFound,
    BudgetExceeded,
    Backend,
    /// The request body is larger than the gateway's limit (413).
    TooLarge,
    /// The path is served, but not with the request's method (405).
    MethodNotAllowed,
    /// The request's body stopped arriving (408).
    Timeout,
    /// The gateway could not hold the request (503).
    Unavailable,
}

/// A failed call: status, kind and a message meant for the harness author. Server-side causes
/// are summarized, never dumped (no keys, no internal paths).
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) dialect: Dialect,
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(dialect: Dialect, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            dialect,
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn status(&self) -> StatusCode {
        match self.kind {
            ErrorKind::InvalidRequest => StatusCode::BAD_REQUEST,
            ErrorKind::Authentication => StatusCode::UNAUTHORIZED,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::BudgetExceeded => StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::Backend => StatusCode::BAD_GATEWAY,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorKind::Timeout => StatusCode::REQUEST_TIMEOUT,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The JSON body in the dialect's error format.
    pub(crate) fn body(&self) -> serde_json::Value {
        match self.dialect {
            Dialect::OpenAi => {
                let (kind, code) = match self.kind {
                    ErrorKind::InvalidRequest => ("invalid_request_error", "invalid_request"),
                    ErrorKind::Authentication => ("invalid_request_error", "invalid_api_key"),
                    ErrorKind::NotFound => ("invalid_request_error", "model_not_found"),
                    ErrorKind::BudgetExceeded => ("insufficient_quota", "budget_exceeded"),
                    ErrorKind::Backend => ("server_error", "upstream_error"),
                    ErrorKind::TooLarge => ("invalid_request_error", "request_too_large"),
                    ErrorKind::MethodNotAllowed => ("invalid_request_error", "method_not_allowed"),
                    ErrorKind::Timeout => ("invalid_request_error", "request_timeout"),
                    ErrorKind::Unavailable => ("server_error", "unavailable"),
                };
                json!({ "error": {
                    "message": self.message, "type": kind, "param": null, "code": code } })
            }
            Dialect::Anthropic => {
                let kind = match self.kind {
                    ErrorKind::InvalidRequest => "invalid_request_error",
                    ErrorKind::Authentication => "authentication_error",
                    ErrorKind::NotFound => "not_found_error",
                    ErrorKind::BudgetExceeded => "rate_limit_error",
                    ErrorKind::Backend => "api_error",
                    ErrorKind::TooLarge => "request_too_large",
                    ErrorKind::MethodNotAllowed => "invalid_request_error",
                    ErrorKind::Timeout => "invalid_request_error",
                    ErrorKind::Unavailable => "api_error",
                };
                json!({ "type": "error", "error": { "type": kind, "message": self.message } })
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(self.body())).into_response();
        if matches!(
            self.kind,
            ErrorKind::Authentication | ErrorKind::BudgetExceeded
        ) {
            // Official SDKs honour this header: retrying a refused key or an exhausted budget
            // only burns the harness's time.
            response
                .headers_mut()
                .insert("x-should-retry", HeaderValue::from_static("false"));
        }
        response
    }
}
