//! Calls in flight and request bytes in memory, per trial and per gateway.
//!
//! Every request passes [`hold`] before its handler runs: it takes a call slot of its trial
//! and of the gateway, and its body is read (`intake`) taking the body's bytes from its
//! trial's and the gateway's byte budgets as they arrive, so a request holds only the bytes
//! it has sent, and a body that stalls is dropped after `body_idle_timeout`. A request that
//! has to wait (for a slot, or for bytes) spools its body to an unlinked temporary file,
//! read through a small buffer, and waits with the file: a body left waiting in its socket
//! stalls the caller's TCP window, and the kernel may give up on a connection whose window
//! stays closed (measured on Linux 6.18: the caller got `ETIMEDOUT` after 30 s, 22 of 40
//! waiting 30 MB requests). So hevo's memory is bounded by the budgets, not by how much
//! callers send or say they will send, and waiting costs disk, not memory or the caller's
//! connection. Slots and bytes are returned when the answer, a stream included, has been
//! sent (or the caller left) and the call has ended: a call whose caller left holds them
//! until its upstream has answered ([`Held`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::bound::Via;
use super::call::api_key;
use super::intake::{read, Intake};
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

    /// A call slot if one is free now.
    fn try_slot(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).try_acquire_owned().ok()
    }

    /// `bytes` of the budget if they are free now: `Some(None)` when none are needed.
    pub(crate) fn try_bytes(&self, bytes: u64) -> Option<Option<OwnedSemaphorePermit>> {
        let n = u32::try_from(bytes).unwrap_or(u32::MAX).min(self.byte_cap);
        if n == 0 {
            return Some(None);
        }
        Arc::clone(&self.bytes)
            .try_acquire_many_owned(n)
            .ok()
            .map(Some)
    }

    /// `bytes` of the budget; a body larger than the whole budget takes all of it.
    pub(crate) async fn bytes(&self, bytes: u64) -> Option<OwnedSemaphorePermit> {
        let n = u32::try_from(bytes).unwrap_or(u32::MAX).min(self.byte_cap);
        if n == 0 {
            return None;
        }
        Arc::clone(&self.bytes).acquire_many_owned(n).await.ok()
    }
}

/// The slots and body bytes a request holds (see the module documentation): shared by the
/// middleware, until the answer has been sent, and by the request's [`super::Call`], until
/// it has ended; they are returned when both are done.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    _permits: Arc<[OwnedSemaphorePermit]>,
}

/// The middleware described in the module documentation.
/// A key used outside the sandbox it is bound to is refused here, before anything is held;
/// a request without an open trial's key holds nothing and its body is never read.
pub(crate) async fn hold(State(gateway): State<Gateway>, request: Request, next: Next) -> Response {
    let key = api_key(request.headers()).map(str::to_owned);
    let dialect = Dialect::of_path(request.uri().path());
    if let Some(key) = &key {
        let via = request.extensions().get::<Via>();
        if let Err(err) = gateway.check_binding(key, via, dialect) {
            return err.into_response();
        }
    }
    let trial = key.and_then(|key| gateway.trial_of(&key));
    if trial.is_none() {
        // No open trial's key: the handler answers 401 (or serves `GET /`) without its body,
        // so such a request holds no slot and reads nothing. Before, keyless requests that
        // dripped their bodies held the gateway's slots and starved every trial.
        let (parts, _unread) = request.into_parts();
        let mut request = Request::from_parts(parts, Body::empty());
        request.extensions_mut().insert(Held {
            _permits: Arc::from(Vec::new()),
        });
        return next.run(request).await;
    }
    let inner = &gateway.inner;
    let budgets: Vec<&Budget> = trial
        .as_deref()
        .map(|t| &t.budget)
        .into_iter()
        .chain([&inner.budget])
        .collect();
    let (parts, body) = request.into_parts();
    let slots_now = take_slots_now(&budgets);
    let free = slots_now.is_some().then_some(budgets.as_slice());
    let intake = match read(
        body,
        free,
        inner.max_body_bytes,
        inner.body_idle_timeout,
        dialect,
    )
    .await
    {
        Ok(intake) => intake,
        Err(response) => return *response,
    };
    let spooled = match &intake {
        Intake::Spooled(_, len) => Some(*len),
        Intake::Memory(..) => None,
    };
    let (body, mut bytes) = intake.into_body();
    let slots = match slots_now {
        Some(slots) => slots,
        None => {
            let mut slots = Vec::with_capacity(budgets.len());
            for budget in &budgets {
                slots.extend(budget.slot().await);
            }
            slots
        }
    };
    if let Some(len) = spooled {
        for budget in &budgets {
            bytes.extend(budget.bytes(len).await);
        }
    }
    let mut request = Request::from_parts(parts, body);
    let held = Held {
        _permits: slots.into_iter().chain(bytes).collect(),
    };
    request.extensions_mut().insert(held.clone());
    let response = next.run(request).await;
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
        let _held = &held;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// A slot of every budget, if all are free now (otherwise none is kept).
fn take_slots_now(budgets: &[&Budget]) -> Option<Vec<OwnedSemaphorePermit>> {
    budgets.iter().map(|budget| budget.try_slot()).collect()
}
