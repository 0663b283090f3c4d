//! Integration tests of the model layer, over real HTTP on loopback.
//!
//! - `common`: the [`common::TestContext`] (temp dir, mock upstream, gateway on port 0).
//! - `openai_upstream`: the gateway in front of an OpenAI-compatible mock upstream: attribution,
//!   401, 429 caps, streaming, cached tokens, the response cache, traces, retries, keys.
//! - `anthropic`: the `/v1/messages` dialect and the `anthropic` backend.
//! - `local_model`: the gateway in front of the embedded GGUF model (needs `hevo model pull`).

mod anthropic;
mod common;
mod local_model;
mod openai_upstream;
