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
//! - `closing`: calls still in flight when their trial ends or the gateway shuts down.
//! - `cancelled_input`: cancelled calls whose upstream reported no usage, priced by their
//!   estimated input.
//! - `left`: calls whose caller went away, still recorded and held against the caps.
//! - `held`, `held_answers`, `held_gateway`: an upstream that holds its answers until the
//!   test lets them go, what it answers, and a gateway in front of it (the fixture of
//!   `closing`, `left`, `stalls` and `stream_ends`).
//! - `stalls`: uploads that declare a large body and send little or nothing of it.
//! - `stream_ends`: forwarded streams that break off or end in an error, priced by what they
//!   reported.
//! - `scripted`, `clients`: a scripted tool-calling upstream and the fixture of the tests of
//!   real clients: `sdk_clients` (the official Python SDKs), `same_api` (plain SDK requests
//!   to a backend of their own API), `max_tokens_field` (the output-limit field of a message
//!   translated for an `openai` backend) and `agent_clis` (the real `claude` and `codex`
//!   CLIs).
//!   They skip, loudly, when the client is not installed.
//! - `faulty`, `upstream_faults`: an upstream that misbehaves on purpose (slow streams,
//!   silence, refused keys, odd `Retry-After`, prompt-cache writes) and what the official
//!   SDKs and the ledger see through the gateway.

mod agent_clis;
mod anthropic;
mod cancelled_input;
mod caps;
mod clients;
mod closing;
mod common;
mod dialects;
mod faulty;
mod held;
mod held_answers;
mod held_gateway;
mod left;
mod local_model;
mod max_tokens_field;
mod openai_upstream;
mod refusals;
mod same_api;
mod scripted;
mod scrub;
mod sdk_clients;
mod stalls;
mod stream_ends;
mod upstream_faults;
