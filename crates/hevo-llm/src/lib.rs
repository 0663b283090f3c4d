//! hevo's model layer: every model call a harness makes goes through here.
//!
//! Backends sit behind one trait; the gateway serves OpenAI- and Anthropic-compatible HTTP on
//! loopback, attributes each call to a trial by its key, prices it from the price table,
//! enforces caps, caches deterministic responses and writes traces. Nothing here knows about
//! task suites or search; `hevo-runtime` and `hevo-search` own those.
//!
//! ```no_run
//! # async fn demo() -> Result<(), hevo_llm::LlmError> {
//! use std::sync::Arc;
//! use hevo_llm::{Caps, Gateway, GatewayConfig, MemorySink, ModelRoute, OpenAiBackend,
//!                OpenAiConfig, PriceTable};
//! let backend = OpenAiBackend::new(OpenAiConfig::new(
//!     "openai", "https://api.openai.com/v1", Some("OPENAI_API_KEY")))?;
//! let config = GatewayConfig::new(
//!     vec![ModelRoute::new("gpt-4o-mini", "openai", "gpt-4o-mini")], PriceTable::builtin());
//! let sink = Arc::new(MemorySink::new());
//! let gateway = Gateway::start(config, vec![Arc::new(backend)], sink)?;
//! let key = gateway.open_trial("trial-1", std::path::Path::new("traces/trial-1"), Caps::UNLIMITED)?;
//! // start the harness with gateway.harness_env(&key), without gateway.provider_key_vars()
//! let usage = gateway.close_trial(&key).await;
//! println!("{} calls, ${:.4}", usage.calls, usage.cost_usd);
//! gateway.shutdown().await;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod backend;
mod cache;
mod config;
mod error;
mod gateway;
mod ledger;
pub mod model_file;
mod price;
pub mod provider_keys;
mod types;

pub use backend::{
    AnthropicBackend, AnthropicConfig, Api, Backend, Completion, GenerationTiming, LocalBackend,
    LocalConfig, MaxTokensField, OpenAiBackend, OpenAiConfig, RawBody, RawReply, RawRequest,
    Retries, RetryPolicy, MAX_ANSWER_BYTES,
};
pub use cache::ResponseCache;
pub use config::{BackendKind, BackendSpec, CapsSpec, ModelLayerConfig, RouteSpec};
pub use error::{BackendError, LlmError};
pub use gateway::{
    check_advertise, translate_request, BoundSocket, Gateway, GatewayConfig, GatewayHandle, Listen,
    ModelRoute, TrialKey, TRIAL_CONNECTIONS,
};
pub use ledger::{
    CallRecord, CallStatus, Caps, InFlight, LedgerSink, MemorySink, NullSink, Scope, TrialLabels,
    TrialUsage,
};
pub use price::{ModelPrice, PriceTable};
pub use types::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, TokenLogprob, TopLogprob, Usage,
};
