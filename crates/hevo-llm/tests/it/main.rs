//! Integration tests of the model layer, over real HTTP on loopback.
//!
//! - `common`: the [`common::TestContext`] (temp dir, mock upstream, gateway on port 0).
//! - `openai_upstream`: the gateway in front of an OpenAI-compatible mock upstream: attribution,
//!   401, 429 caps, streaming, cached tokens, the response cache, traces, retries, keys.
//! - `anthropic`: the `/v1/messages` dialect and the `anthropic` backend.
//! - `local_model`: the gateway in front of the embedded GGUF model (needs `hevo model pull`).
//! - `caps`: caps held under concurrency with the official SDKs, concurrency and
//!   bytes-in-flight limits, peak memory under large requests, retries and errors in the
//!   ledger, capped traces.
//! - `dialects`: what is forwarded and what is refused, the small endpoints, unknown paths.
//! - `refusals`: bodies over the limit and wrong methods, refused in the caller's format.
//! - `scripted`, `clients`: a scripted tool-calling upstream and the fixture of the tests of
//!   real clients: `sdk_clients` (the official Python SDKs), `same_api` (plain SDK requests
//!   to a backend of their own API) and `agent_clis` (the real `claude` and `codex` CLIs).
//!   They skip, loudly, when the client is not installed.
//! - `faulty`, `upstream_faults`: an upstream that misbehaves on purpose (slow streams,
//!   silence, refused keys, odd `Retry-After`, prompt-cache writes) and what the official
//!   SDKs and the ledger see through the gateway.

mod agent_clis;
mod anthropic;
mod caps;
mod clients;
mod common;
mod dialects;
mod faulty;
mod local_model;
mod openai_upstream;
mod refusals;
mod same_api;
mod scripted;
mod sdk_clients;
mod upstream_faults;
