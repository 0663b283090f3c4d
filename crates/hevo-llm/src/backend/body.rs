//! Reading an upstream's answer with a ceiling: an upstream that sends without end (a
//! broken proxy, a runaway answer) costs at most [`MAX_ANSWER_BYTES`] of memory per call,
//! then the call fails with [`BackendError::Oversized`] instead of growing hevo until the
//! machine kills it. The same ceiling bounds one event of a streamed answer
//! (`gateway::sse::EventSplitter`); a stream as a whole is passed on event by event and
//! has none.

use axum::body::Bytes;

use crate::error::BackendError;

/// The most of one answer body (or of one event of a stream) hevo holds: 64 MiB, twice the
/// largest request the gateway takes (`GatewayConfig::max_body_bytes`) and far above any
/// provider's answer (a 128k-token answer is well under 1 MiB of JSON).
pub const MAX_ANSWER_BYTES: usize = 64 << 20;

/// What an answer past [`MAX_ANSWER_BYTES`] fails with; `what` names it ("answer", "event").
pub(crate) fn oversized(what: &str) -> BackendError {
    BackendError::Oversized(format!(
        "the upstream's {what} passed {} MiB; hevo stopped reading it",
        MAX_ANSWER_BYTES >> 20
    ))
}

/// `response`'s body, read to its end unless it passes [`MAX_ANSWER_BYTES`].
pub(crate) async fn read_body(mut response: reqwest::Response) -> Result<Bytes, BackendError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| BackendError::http(&e))? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(oversized("answer"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(body))
}
