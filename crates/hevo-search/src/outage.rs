//! Telling a provider outage from a candidate that provoked its own upstream errors.
//!
//! A trial whose model calls failed upstream (refused, unreachable or timed out after the
//! gateway's retries) and that then failed is `infra_error`: not scored, retried. A task
//! with no scored trial left is ambiguous: the provider may be down, or the candidate may
//! have provoked the errors itself (a request the provider refuses), and a proposed
//! candidate fails such a task so that provoking them cannot pay. Before it does, hevo asks
//! each model those calls failed at itself, through the gateway as a harness would, with a
//! one-token request of its own (a ledger row under trial id `probe`, so its cost counts).
//! If that fails too, the provider is down: the run stops and nothing is counted against
//! the candidate (its trials run again when the same command runs again). If the model
//! answers, the failure is the candidate's.

use std::path::Path;
use std::time::Duration;

use hevo_runtime::cancel::Cancel;
use hevo_runtime::eval::EvalError;
use hevo_runtime::model_access::ModelAccess;
use serde_json::json;

/// How long hevo waits for the answer to its own request: the gateway's retries with their
/// backoff fit in it; a provider that has not answered by then is down.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(180);

/// The ledger's trial id of hevo's own requests.
pub const PROBE_TRIAL: &str = "probe";

/// What hevo's own request to a model found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The request got an answer from the model's backend (any answer but the gateway's
    /// "every upstream attempt failed"): the provider is up.
    Answered,
    /// The upstream failed hevo's request too: why.
    Down(String),
}

/// Sends one minimal chat request for `model` through `access` (a fresh key, traced under
/// `trace_dir`) and says whether the provider answered.
///
/// # Errors
/// [`EvalError::Interrupted`] when `cancel` fires first; [`EvalError::Outage`] is never
/// returned here (the caller decides what a [`Probe::Down`] means).
pub fn probe(
    access: &dyn ModelAccess,
    model: &str,
    trace_dir: &Path,
    cancel: &Cancel,
) -> Result<Probe, EvalError> {
    let (env, ticket) = match access.open(PROBE_TRIAL, trace_dir, &Default::default()) {
        Ok(opened) => opened,
        Err(e) => return Ok(Probe::Down(format!("the gateway gave no key: {e}"))),
    };
    let url = format!(
        "{}/chat/completions",
        env.openai_base_url.trim_end_matches('/')
    );
    let body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "Reply with OK."}],
        "max_tokens": 1,
    });
    let found = hevo_runtime::rt::block_on(async {
        let send = async {
            let client = reqwest::Client::builder()
                .timeout(PROBE_TIMEOUT)
                .build()
                .map_err(|e| e.to_string())?;
            let resp = client
                .post(&url)
                .bearer_auth(&env.openai_api_key)
                .json(&body)
                .send()
                .await
                .map_err(|e| format!("no answer from the gateway: {e}"))?;
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            Ok::<_, String>((status, text))
        };
        let found = tokio::select! {
            r = send => Some(r),
            _ = cancel.cancelled() => None,
        };
        access.close(ticket).await;
        found
    });
    let Some(found) = found else {
        let reason = cancel.reason().expect("cancelled");
        return Err(EvalError::Interrupted { done: 0, reason });
    };
    Ok(match found {
        Err(why) => Probe::Down(why),
        // The gateway answers 502 when every attempt at the upstream failed (docs/models.md,
        // "Retries"); anything else came from the backend or the gateway's own rules.
        Ok((status, text)) if status == reqwest::StatusCode::BAD_GATEWAY => Probe::Down(format!(
            "HTTP 502: {}",
            hevo_runtime::printable::one_line(&text.chars().take(300).collect::<String>())
        )),
        Ok(_) => Probe::Answered,
    })
}
