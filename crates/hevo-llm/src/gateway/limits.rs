//! Calls in flight and request bytes in memory, per trial and per gateway.
//!
//! Every request passes [`hold`] before its body is read: it waits for a call slot of its
//! trial and of the gateway, then for its body's bytes (`Content-Length`, or the body limit
//! when it sends none) from its trial's and the gateway's byte budgets. Waiting requests hold
//! no body (it stays in the socket), so hevo's memory is bounded by the budgets, not by how
//! much callers send. Bytes are returned when the handler is done with the body; slots when
//! the answer, a stream included, has been sent (or the caller left).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::bound::Via;
use super::call::api_key;
use super::{Dialect, Gateway};

/// A call-slot and a byte budget (one per trial, one for the gateway).
#[derive(Debug)]
pub(crate) struct Budget {
    slots: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    byte_cap: u32,
}

impl Budget {
    /// `slots` calls at once and `bytes` request bytes at once (at most `u32::MAX`).
    pub(crate) fn new(slots: u64, bytes: u64) -> Self {
        let byte_cap = u32::try_from(bytes).unwrap_or(u32::MAX).max(1);
        let slots = usize::try_from(slots)
            .unwrap_or(Semaphore::MAX_PERMITS)
            .clamp(1, Semaphore::MAX_PERMITS);
        Self {
            slots: Arc::new(Semaphore::new(slots)),
            bytes: Arc::new(Semaphore::new(byte_cap as usize)),
            byte_cap,
        }
    }

    async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).acquire_owned().await.ok()
    }

    /// `bytes` of the budget; a body larger than the whole budget takes all of it.
    async fn bytes(&self, bytes: u64) -> Option<OwnedSemaphorePermit> {
        let n = u32::try_from(bytes).unwrap_or(u32::MAX).min(self.byte_cap);
        if n == 0 {
            return None;
        }
        Arc::clone(&self.bytes).acquire_many_owned(n).await.ok()
    }
}

/// The middleware described in the module documentation.
/// A key used outside the sandbox it is bound to is refused here, before anything is held.
pub(crate) async fn hold(State(gateway): State<Gateway>, request: Request, next: Next) -> Response {
    let key = api_key(request.headers()).map(str::to_owned);
    if let Some(key) = &key {
        let via = request.extensions().get::<Via>();
        let dialect = Dialect::of_path(request.uri().path());
        if let Err(err) = gateway.check_binding(key, via, dialect) {
            return err.into_response();
        }
    }
    let trial = key.and_then(|key| gateway.trial_of(&key));
    let inner = &gateway.inner;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let body_bytes = match declared {
        Some(n) => n.min(inner.max_body_bytes as u64),
        None if request.method() == Method::GET || request.method() == Method::HEAD => 0,
        None => inner.max_body_bytes as u64,
    };
    let mut slots = Vec::with_capacity(2);
    let mut bytes = Vec::with_capacity(2);
    if let Some(trial) = &trial {
        slots.extend(trial.budget.slot().await);
    }
    slots.extend(inner.budget.slot().await);
    if let Some(trial) = &trial {
        bytes.extend(trial.budget.bytes(body_bytes).await);
    }
    bytes.extend(inner.budget.bytes(body_bytes).await);
    let response = next.run(request).await;
    drop(bytes);
    let streams = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streams {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _held = &slots;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}
