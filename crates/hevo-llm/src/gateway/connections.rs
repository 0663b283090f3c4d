//! How many connections a gateway listener holds at once.
//!
//! `axum::serve` accepts every connection it is offered and keeps an idle one for ever, so
//! one harness that opened thousands of idle connections used up hevo's file descriptors:
//! the gateway stopped accepting anyone's calls, and sibling trials failed (an audit's
//! sandboxed harness did it in 0.7 s). [`Capped`] holds at most a fixed number of
//! connections: past it, `accept` waits, and new connections wait in the kernel's queue
//! (their `connect` has succeeded; they are read once a held connection closes). Each
//! sandboxed trial's socket has its own cap ([`TRIAL_CONNECTIONS`]), so a trial that hoards
//! connections only slows its own calls; the shared TCP listener (unsandboxed harnesses,
//! Slurm jobs, the proposer) has a cap from the process's descriptor limit
//! ([`tcp_connections`]).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections one sandboxed trial's gateway socket holds at once: four times the calls a
/// trial may have in flight by default (16), for SDK connection pools.
pub const TRIAL_CONNECTIONS: usize = 64;

/// Connections the shared TCP listener holds at once: half of the process's descriptor
/// limit (the rest is for trials' pipes, traces and the store), at least 64.
pub(crate) fn tcp_connections() -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    usize::try_from(soft / 2).unwrap_or(usize::MAX).max(64)
}

/// A listener that holds at most `max` accepted connections at once (see the module docs).
pub(crate) struct Capped<L> {
    inner: L,
    permits: Arc<Semaphore>,
}

impl<L> Capped<L> {
    /// `inner`, holding at most `max` connections at once.
    pub(crate) fn new(inner: L, max: usize) -> Self {
        Capped {
            inner,
            permits: Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS))),
        }
    }
}

impl<L: Listener> Listener for Capped<L> {
    type Io = Held<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        // The semaphore is never closed.
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("the connection semaphore is never closed");
        let (io, addr) = self.inner.accept().await;
        (
            Held {
                io,
                _permit: permit,
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// An accepted connection and its place under the cap, given back when it is dropped.
pub(crate) struct Held<Io> {
    io: Io,
    _permit: OwnedSemaphorePermit,
}

impl<Io: AsyncRead + Unpin> AsyncRead for Held<Io> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for Held<Io> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
