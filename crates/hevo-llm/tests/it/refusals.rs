//! Refusals answered before a request is a model call, seen by the official Python SDKs: a
//! body over the gateway's limit (413) and a served path called with another method (405)
//! come in the caller's error format, and the 413 of a trial's key is in the ledger.

use hevo_llm::{CallStatus, Caps, ModelPrice};
use serde_json::json;

use crate::clients::Through;
use crate::sdk_clients::run_python;

#[tokio::test(flavor = "multi_thread")]
async fn oversized_bodies_and_wrong_methods_are_refused_in_the_callers_format() {
    let t = Through::start_configured(
        "unused.txt",
        Caps::UNLIMITED,
        Caps::UNLIMITED,
        ModelPrice::paid(1.0, 0.25, 4.0),
        |config, _| config.max_body_bytes = 64 << 10,
    )
    .await;
    let out = {
        let t = &t;
        tokio::task::block_in_place(|| run_python(t, "refusals.py"))
    };
    let Some(out) = out else { return };
    // OpenAI's SDK keeps `error`; Anthropic's the whole body
    let openai = &out["openai_too_large"];
    assert_eq!(openai["status"], 413, "{out}");
    assert_eq!(openai["body"]["code"], "request_too_large");
    assert!(openai["body"]["message"]
        .as_str()
        .unwrap()
        .contains("limit of 65536 bytes"));
    let anthropic = &out["anthropic_too_large"];
    assert_eq!(anthropic["class"], "ContentTooLargeError", "{out}");
    assert_eq!(anthropic["body"]["type"], "error");
    assert_eq!(anthropic["body"]["error"]["type"], "request_too_large");
    let get = &out["openai_get"];
    assert_eq!(
        (get["status"].clone(), get["allow"].clone()),
        (json!(405), json!("POST")),
        "{out}"
    );
    assert_eq!(get["body"]["code"], "method_not_allowed");
    assert!(get["body"]["message"]
        .as_str()
        .unwrap()
        .contains("POST /v1/chat/completions"));
    let get = &out["anthropic_get"];
    assert_eq!(get["status"], 405, "{out}");
    assert_eq!(get["body"]["type"], "error");
    assert_eq!(get["body"]["error"]["type"], "invalid_request_error");
    assert!(t.upstream.seen().is_empty());
    let rows = t.sink.records();
    let rows: Vec<(&str, CallStatus)> = rows
        .iter()
        .map(|r| (r.endpoint.as_str(), r.status))
        .collect();
    assert_eq!(
        rows,
        [
            ("openai.chat_completions", CallStatus::BadRequest),
            ("anthropic.messages", CallStatus::BadRequest)
        ]
    );
}

/// A refusal quotes the model name it was sent; its ledger row keeps a bounded part of it,
/// so a harness cannot grow the run's store by 20 MB per call (an audit grew one from
/// 256 KB to 230 MB in 2 s with ten such calls).
#[tokio::test(flavor = "multi_thread")]
async fn a_huge_model_name_leaves_a_bounded_ledger_row() {
    let t = crate::common::TestContext::start(crate::common::Setup::default()).await;
    let key = t.trial("huge", Caps::UNLIMITED);
    let name = "m".repeat(1 << 20);
    let (status, _) = t
        .chat(Some(key.as_str()), crate::common::body(&name, "hi"))
        .await;
    assert_eq!(status, 404);
    let rows = t.sink.records();
    assert_eq!(rows.len(), 1, "{}", rows.len());
    let row = &rows[0];
    assert_eq!(row.status, CallStatus::BadRequest);
    assert!(row.model.len() < 1024, "{}", row.model.len());
    assert!(row.error.as_ref().unwrap().len() < 8192);
    assert!(row.error.as_ref().unwrap().contains("bytes cut"));
}
