//! The field an `openai` backend sends a translated request's output limit in: an Anthropic
//! message (the official `anthropic` SDK, `max_tokens = 37`) to a model of an `openai`
//! backend on the scripted upstream, whose backend is read from `hevo.toml`'s backend table,
//! with `max_tokens_field` unset (a loopback upstream: `max_tokens`), `"max_tokens"` and
//! `"max_completion_tokens"`. The host rule (`api.openai.com` gets `max_completion_tokens`)
//! is unit-tested in `backend/max_tokens_field.rs`: no test reaches OpenAI.

use hevo_llm::ModelLayerConfig;
use serde_json::Value;

use crate::clients::{Through, UPSTREAM_KEY_VAR};
use crate::sdk_clients::run_python;

/// The chat completion the upstream received for the message, when the `openai` backend's
/// table has `setting` (a `max_tokens_field = ...` line, or nothing); `None` when the SDK is
/// not installed.
async fn chat_sent_with(setting: &str) -> Option<Value> {
    let openai = |base: &str| {
        let table = format!(
            "[[backends]]\nname = \"up-openai\"\nkind = \"openai\"\nbase_url = \"{base}\"\n\
             api_key_env = \"{UPSTREAM_KEY_VAR}\"\n{setting}\n"
        );
        let layer: ModelLayerConfig = toml::from_str(&table).unwrap();
        layer.build_backends().unwrap().remove(0)
    };
    let t = Through::start_with_openai("unused.txt", openai).await;
    let out = {
        let t = &t;
        tokio::task::block_in_place(|| run_python(t, "message_to_openai.py"))
    }?;
    assert_eq!(out["stop"], "end_turn", "{out}");
    let seen = t.upstream.seen();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].path, "/v1/chat/completions");
    t.assert_ledger_covers_upstream();
    Some(seen[0].body.clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_translated_message_sends_its_limit_in_the_configured_field() {
    let Some(chat) = chat_sent_with("max_tokens_field = \"max_completion_tokens\"").await else {
        return;
    };
    assert_eq!(chat["max_completion_tokens"], 37, "{chat}");
    assert!(chat.get("max_tokens").is_none(), "{chat}");

    let chat = chat_sent_with("max_tokens_field = \"max_tokens\"")
        .await
        .unwrap();
    assert_eq!(chat["max_tokens"], 37, "{chat}");
    assert!(chat.get("max_completion_tokens").is_none(), "{chat}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_translated_message_to_a_server_that_is_not_openai_sends_max_tokens_by_default() {
    let Some(chat) = chat_sent_with("").await else {
        return;
    };
    assert_eq!(chat["max_tokens"], 37, "{chat}");
    assert!(chat.get("max_completion_tokens").is_none(), "{chat}");
}
