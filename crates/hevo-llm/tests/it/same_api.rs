//! Plain requests to a backend of their own API, sent by the official Python SDKs: they reach
//! the scripted upstream as the SDK sent them (body, protocol headers, query), its answers
//! reach the SDK as it sent them, and deterministic ones are still served from the response
//! cache.

use hevo_llm::CallStatus;
use serde_json::json;

use crate::clients::Through;
use crate::scripted::{Seen, CACHE_WRITTEN};
use crate::sdk_clients::run_python;

fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_requests_reach_a_same_api_upstream_unchanged_and_are_still_cached() {
    let t = Through::start_cached("unused.txt").await;
    let out = {
        let t = &t;
        tokio::task::block_in_place(|| run_python(t, "same_api.py"))
    };
    let Some(out) = out else { return };
    let seen = t.upstream.seen();
    // prompt caching: cache_control, the beta and the caller's version reached Anthropic, and
    // the SDK got Anthropic's own answer, cache writes included
    let cached = &seen[0];
    assert_eq!(cached.path, "/v1/messages");
    assert_eq!(
        cached.body["system"][0]["cache_control"]["type"],
        "ephemeral"
    );
    assert_eq!(
        cached.body["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(
        header(cached, "anthropic-beta"),
        Some("context-1m-2025-08-07")
    );
    assert_eq!(header(cached, "anthropic-version"), Some("2023-01-01"));
    assert_eq!(out["cache_creation"], CACHE_WRITTEN, "{out}");
    assert_eq!(out["message_id"], "msg_up");
    // the beta API: `?beta=true` and its beta header
    assert_eq!(seen[1].path, "/v1/messages?beta=true");
    assert_eq!(header(&seen[1], "anthropic-beta"), Some("x-beta-1"));
    assert_eq!(out["beta_text"], "echo: beta");
    // OpenAI: max_completion_tokens and the developer role, as sent (reasoning models refuse
    // max_tokens)
    let chat = &seen[2];
    assert_eq!(chat.path, "/v1/chat/completions");
    assert_eq!(chat.body["max_completion_tokens"], 64);
    assert!(chat.body.get("max_tokens").is_none(), "{}", chat.body);
    assert_eq!(chat.body["messages"][0]["role"], "developer");
    assert_eq!(chat.body["model"], "gpt-up");
    assert_eq!(header(chat, "openai-beta"), Some("x-openai-beta"));
    assert_eq!(
        (out["chat_text"].as_str(), out["chat_id"].as_str()),
        (Some("echo: dev"), Some("chatcmpl-up"))
    );
    // each deterministic request reached the upstream once; the repeat came from the cache
    assert_eq!(seen.len(), 5, "{seen:#?}");
    assert_eq!(seen[3].body["temperature"], 0);
    assert_eq!(seen[4].body["temperature"], 0);
    for pair in ["chat_cached", "message_cached"] {
        let answers = out[pair].as_array().unwrap();
        assert_eq!(answers[0], answers[1], "{pair}: {out}");
    }
    assert_eq!(out["message_cached"][0][1], "end_turn");
    let rows = t.sink.records();
    let hits: Vec<bool> = rows.iter().map(|r| r.cache_hit).collect();
    assert_eq!(hits, [false, false, false, false, false, true, true]);
    assert!(rows.iter().all(|r| r.status == CallStatus::Ok));
    assert_eq!(
        rows[5].cost_usd, rows[3].cost_usd,
        "a hit costs what the call did"
    );
    assert_eq!(rows[6].cost_usd, rows[4].cost_usd);
    // the prompt-cache write is input the call paid for
    assert!(rows[0].input_tokens >= CACHE_WRITTEN, "{:?}", rows[0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_query_string_reaches_the_upstream_on_every_openai_endpoint() {
    let t = Through::start("unused.txt").await;
    let out = {
        let t = &t;
        tokio::task::block_in_place(|| run_python(t, "query.py"))
    };
    let Some(out) = out else { return };
    assert_eq!(out["plain"], "echo: q", "{out}");
    assert_eq!(out["embeddings"], 1);
    let paths: Vec<String> = t.upstream.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(
        paths,
        [
            "/v1/chat/completions?api-version=2024-10-21",
            "/v1/chat/completions?api-version=2024-10-21",
            "/v1/responses?api-version=2024-10-21",
            "/v1/embeddings?api-version=2024-10-21",
        ]
    );
    t.assert_ledger_covers_upstream();
}

#[tokio::test(flavor = "multi_thread")]
async fn n_choices_are_forwarded_to_an_openai_backend_and_refused_by_name_elsewhere() {
    let t = Through::start("unused.txt").await;
    let out = {
        let t = &t;
        tokio::task::block_in_place(|| run_python(t, "n_choices.py"))
    };
    let Some(out) = out else { return };
    assert_eq!(out["plain"], json!(["echo: two", "echo: two"]), "{out}");
    assert_eq!(out["stream_indices"], json!([0, 1]));
    let refused = out["refused"].as_str().unwrap();
    assert!(
        refused.contains("`n`") && refused.contains("cannot carry it"),
        "{refused}"
    );
    let seen = t.upstream.seen();
    assert_eq!(seen.len(), 2, "the refused call never reached the upstream");
    assert!(seen.iter().all(|s| s.body["n"] == 2));
    let rows = t.sink.records();
    let statuses: Vec<CallStatus> = rows.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [CallStatus::Ok, CallStatus::Ok, CallStatus::BadRequest]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stop_sequence_that_ended_an_answer_survives_the_response_cache() {
    let t = Through::start_cached("unused.txt").await;
    let out = {
        let t = &t;
        tokio::task::block_in_place(|| run_python(t, "stop_sequence.py"))
    };
    let Some(out) = out else { return };
    let stopped = json!(["echo: before ", "stop_sequence", "END"]);
    assert_eq!(out["messages"], json!([stopped, stopped]), "{out}");
    assert_eq!(out["chat"], json!(["echo: before ", "stop"]));
    let hits: Vec<bool> = t.sink.records().iter().map(|r| r.cache_hit).collect();
    assert_eq!(hits, [false, true, false]);
    assert_eq!(t.upstream.seen().len(), 2);
}
