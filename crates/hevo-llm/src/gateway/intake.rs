//! Reading a request's body under the byte budgets of `limits`.
//!
//! Bytes are taken from the budgets as they arrive, not by what the request declares: a
//! request that says `Content-Length: 33554432` and then sends nothing holds nothing. A
//! body is kept in memory while each chunk's bytes can be taken at once from every budget;
//! when one cannot, the body is spooled to an unlinked temporary file instead (the bytes
//! taken so far are given back) and the request waits for all its bytes with the file (no
//! request ever waits while it holds bytes, so requests cannot block each other half-read).
//! A body that stops arriving for the gateway's `body_idle_timeout` ends its request with
//! 408, and one that breaks off (the caller left) with 400, giving back what it held; neither
//! reaches a handler, so neither is a call.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio::sync::OwnedSemaphorePermit;

use super::limits::Budget;
use super::{ApiError, Dialect, ErrorKind};

/// The buffer a spooled body is read back through.
const SPOOL_CHUNK: usize = 64 << 10;

/// A body read to its end (at most `limit + 1` bytes: one more than the limit is enough for
/// the handler's extractor to answer 413).
pub(crate) enum Intake {
    /// In memory, with the bytes it took from each budget.
    Memory(Vec<Bytes>, Vec<OwnedSemaphorePermit>),
    /// In a temporary file, of this length; it holds no bytes of the budgets yet.
    Spooled(tokio::fs::File, u64),
}

impl Intake {
    /// The body for the handler.
    pub(crate) fn into_body(self) -> (Body, Vec<OwnedSemaphorePermit>) {
        match self {
            Intake::Memory(chunks, bytes) => {
                let chunks = futures::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>));
                (Body::from_stream(chunks), bytes)
            }
            Intake::Spooled(file, _) => (Body::from_stream(read_back(file)), Vec::new()),
        }
    }
}

/// Reads `body`: in memory as long as `budgets` (`None`: none may be taken now) give each
/// chunk's bytes at once, else spooled (see the module documentation). The error is the
/// response to send, in the caller's `dialect`: 408 for a body that stalled, 400 for one that
/// broke off, 503 when the file cannot be written.
pub(crate) async fn read(
    body: Body,
    budgets: Option<&[&Budget]>,
    limit: usize,
    idle: Duration,
    dialect: Dialect,
) -> Result<Intake, Box<Response>> {
    let unavailable = |err: std::io::Error| unavailable(dialect, err);
    let mut stream = body.into_data_stream();
    let most = limit as u64 + 1;
    let mut read: u64 = 0;
    let mut chunks = Vec::new();
    let mut taken: Vec<OwnedSemaphorePermit> = Vec::new();
    let mut file = None;
    if budgets.is_none() {
        file = Some(spool_file(&[]).await.map_err(unavailable)?);
    }
    while read < most {
        let next = tokio::time::timeout(idle, stream.next())
            .await
            .map_err(|_| {
                refused(
                    dialect,
                    ErrorKind::Timeout,
                    format!(
                        "hevo's gateway received no byte of the request body for {idle:?} \
                         ({read} bytes came); the request is dropped"
                    ),
                )
            })?;
        let mut chunk = match next {
            None => break,
            Some(Ok(chunk)) => chunk,
            // the caller left or its body broke off: not a request, and nobody may be there
            // to read the answer
            Some(Err(err)) => {
                return Err(refused(
                    dialect,
                    ErrorKind::InvalidRequest,
                    format!("the request body broke off after {read} bytes: {err}"),
                ))
            }
        };
        chunk.truncate(chunk.len().min((most - read) as usize));
        if chunk.is_empty() {
            continue;
        }
        read += chunk.len() as u64;
        if let Some(file) = file.as_mut() {
            write(file, &chunk).await.map_err(unavailable)?;
            continue;
        }
        match budgets.and_then(|budgets| take(budgets, chunk.len() as u64, &mut taken)) {
            Some(()) => chunks.push(chunk),
            None => {
                chunks.push(chunk);
                file = Some(spool_file(&chunks).await.map_err(unavailable)?);
                chunks = Vec::new();
                taken = Vec::new();
            }
        }
    }
    match file {
        None => Ok(Intake::Memory(chunks, taken)),
        Some(mut file) => {
            file.flush().await.map_err(unavailable)?;
            file.rewind().await.map_err(unavailable)?;
            Ok(Intake::Spooled(file, read))
        }
    }
}

/// Takes `bytes` from every budget into `taken` (merged with what it took before), if all
/// have them now; otherwise takes nothing.
fn take(budgets: &[&Budget], bytes: u64, taken: &mut Vec<OwnedSemaphorePermit>) -> Option<()> {
    let mut now = Vec::with_capacity(budgets.len());
    for budget in budgets {
        now.push(budget.try_bytes(bytes)?);
    }
    for (i, permit) in now.into_iter().enumerate() {
        match (taken.get_mut(i), permit) {
            (Some(held), Some(permit)) => held.merge(permit),
            (None, Some(permit)) => taken.push(permit),
            (_, None) => {}
        }
    }
    Some(())
}

/// The refusal `message` of `kind` in the caller's `dialect` (an SDK reads it as it reads
/// any API error of its provider).
fn refused(dialect: Dialect, kind: ErrorKind, message: String) -> Box<Response> {
    Box::new(ApiError::new(dialect, kind, message).into_response())
}

fn unavailable(dialect: Dialect, err: std::io::Error) -> Box<Response> {
    refused(
        dialect,
        ErrorKind::Unavailable,
        format!("hevo's gateway could not hold the request body while it waited: {err}"),
    )
}

/// An unlinked temporary file holding `chunks`.
async fn spool_file(chunks: &[Bytes]) -> std::io::Result<tokio::fs::File> {
    let mut file = tokio::fs::File::from_std(tempfile::tempfile()?);
    for chunk in chunks {
        write(&mut file, chunk).await?;
    }
    Ok(file)
}

async fn write(file: &mut tokio::fs::File, chunk: &[u8]) -> std::io::Result<()> {
    file.write_all(chunk).await
}

/// The spooled body, read back through a small buffer.
fn read_back(
    file: tokio::fs::File,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; SPOOL_CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), Some(file)))
            }
            Err(err) => Some((Err(err), None)),
        }
    })
}
