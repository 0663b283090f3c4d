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
//! - `closing`: calls still in flight when their trial ends or the gateway shuts down.
//! - `left`: calls whose caller went away, still recorded and held against the caps.
//! - `held`, `held_answers`, `held_gateway`: an upstream that holds its answers until the
//!   test lets them go, what it answers, and a gateway in front of it (the fixture of
//!   `closing`, `left`, `stalls` and `stream_ends`).
//! - `stalls`: uploads that declare a large body and send little or nothing of it.
//! - `stream_ends`: forwarded streams that break off or end in an error, priced by what they
//!   reported.
//! - `scripted`, `clients`: a scripted tool-calling upstream and the fixture of the tests of
//!   real clients: `sdk_clients` (the official Python SDKs) and `agent_clis` (the real
//!   `claude` and `codex` CLIs). They skip, loudly, when the client is not installed.

mod agent_clis;
mod anthropic;
mod caps;
mod clients;
mod closing;
mod common;
mod dialects;
mod held;
mod held_answers;
mod held_gateway;
mod left;
mod local_model;
mod openai_upstream;
mod scripted;
mod sdk_clients;
mod stalls;
mod stream_ends;
