//! Calls in flight and request bytes in memory, per trial and per gateway.
//!
//! Every request passes [`hold`] before its body is read: it takes a call slot of its trial
//! and of the gateway, then its body's bytes (`Content-Length`, or the body limit when it
//! sends none) from its trial's and the gateway's byte budgets. A request that has to wait
//! first spools its body to an unlinked temporary file, read through a small buffer, and
//! waits with the file: a body left waiting in its socket stalls the caller's TCP window, and
//! the kernel may give up on a connection whose window stays closed (measured on Linux 6.18:
//! the caller got `ETIMEDOUT` after 30 s, 22 of 40 waiting 30 MB requests). So hevo's memory is bounded by
//! the budgets, not by how much callers send, and waiting costs disk, not memory or the
//! caller's connection. Slots and bytes are returned when the answer, a stream included,
//! has been sent (or the caller left) and the call has ended: a call whose caller left
//! holds them until its upstream has answered ([`Held`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
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

    /// A call slot if one is free now.
    fn try_slot(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).try_acquire_owned().ok()
    }

    /// `bytes` of the budget if they are free now: `Some(None)` when none are needed.
    fn try_bytes(&self, bytes: u64) -> Option<Option<OwnedSemaphorePermit>> {
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
    async fn bytes(&self, bytes: u64) -> Option<OwnedSemaphorePermit> {
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
    let budgets: Vec<&Budget> = trial
        .as_deref()
        .map(|t| &t.budget)
        .into_iter()
        .chain([&inner.budget])
        .collect();
    let (slots, bytes, mut request) = match take_now(&budgets, body_bytes) {
        Some((slots, bytes)) => (slots, bytes, request),
        None => {
            let (request, spooled) = match spool(request, inner.max_body_bytes).await {
                Ok(spooled) => spooled,
                Err(response) => return *response,
            };
            let mut slots = Vec::with_capacity(2);
            let mut bytes = Vec::with_capacity(2);
            for budget in &budgets {
                slots.extend(budget.slot().await);
            }
            for budget in &budgets {
                bytes.extend(budget.bytes(spooled).await);
            }
            (slots, bytes, request)
        }
    };
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

/// Every slot and byte permit of `budgets`, if all are free now (otherwise none is kept).
fn take_now(
    budgets: &[&Budget],
    body_bytes: u64,
) -> Option<(Vec<OwnedSemaphorePermit>, Vec<OwnedSemaphorePermit>)> {
    let mut slots = Vec::with_capacity(budgets.len());
    let mut bytes = Vec::with_capacity(budgets.len());
    for budget in budgets {
        slots.push(budget.try_slot()?);
    }
    for budget in budgets {
        bytes.extend(budget.try_bytes(body_bytes)?);
    }
    Some((slots, bytes))
}

/// The buffer a spooled body is copied through.
const SPOOL_CHUNK: usize = 64 << 10;

/// Reads `request`'s body into an unlinked temporary file (at most `limit + 1` bytes: one
/// more than the limit is enough for the handler's extractor to answer 413 as it does for
/// an unspooled body) and gives back the request reading from that file, with its length.
async fn spool(request: Request, limit: usize) -> Result<(Request, u64), Box<Response>> {
    let unavailable = |err: std::io::Error| {
        Box::new(
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                format!("hevo's gateway could not hold the request body while it waited: {err}"),
            )
                .into_response(),
        )
    };
    let (parts, body) = request.into_parts();
    let file = tempfile::tempfile().map_err(unavailable)?;
    let mut file = tokio::fs::File::from_std(file);
    let mut stream = body.into_data_stream();
    let mut written: u64 = 0;
    let most = limit as u64 + 1;
    while written < most {
        let Some(chunk) = stream.next().await else {
            break;
        };
        // the caller left or its body broke off: the handler gets what came (a truncated
        // body, answered 400) and nobody may be there to read the answer
        let Ok(chunk) = chunk else {
            break;
        };
        let take = chunk.len().min((most - written) as usize);
        file.write_all(&chunk[..take]).await.map_err(unavailable)?;
        written += take as u64;
    }
    drop(stream);
    file.flush().await.map_err(unavailable)?;
    file.rewind().await.map_err(unavailable)?;
    let chunks = futures::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; SPOOL_CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((
                    Ok::<_, std::io::Error>(axum::body::Bytes::from(buf)),
                    Some(file),
                ))
            }
            Err(err) => Some((Err(err), None)),
        }
    });
    Ok((
        Request::from_parts(parts, Body::from_stream(chunks)),
        written,
    ))
}
