//! The HTTP routes: [`SERVED`], every method and path the gateway answers, and
//! [`Gateway::router`], which wires each to its handler behind the body limit and
//! [`limits::hold`]. An unknown path gets `misc::not_served` (404), a served path called
//! with another method `misc::method_not_allowed` (405), both in the caller's format.

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, head, post};
use axum::Router;

use super::{anthropic_api, limits, misc, openai_api, responses_api, Gateway};

/// Every method and path the gateway serves, as unknown paths' 404 lists them.
pub const SERVED: &[&str] = &[
    "POST /v1/chat/completions",
    "POST /v1/responses",
    "POST /v1/embeddings",
    "GET /v1/models",
    "GET /v1/models/{id}",
    "POST /v1/messages",
    "POST /v1/messages/count_tokens",
    "HEAD /",
    "GET /",
];

impl Gateway {
    /// The HTTP routes, for serving on any listener or calling in tests without a socket.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(openai_api::chat_completions))
            .route("/v1/responses", post(responses_api::responses))
            .route("/v1/embeddings", post(misc::embeddings))
            .route("/v1/models", get(misc::list_models))
            .route("/v1/models/{id}", get(misc::get_model))
            .route("/v1/messages", post(anthropic_api::messages))
            .route(
                "/v1/messages/count_tokens",
                post(anthropic_api::count_tokens),
            )
            .route("/", head(misc::root).get(misc::root))
            .fallback(misc::not_served)
            .method_not_allowed_fallback(misc::method_not_allowed)
            .layer(DefaultBodyLimit::max(self.inner.max_body_bytes))
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                limits::hold,
            ))
            .with_state(self.clone())
    }
}
