//! [`Live`]: the calls of one trial, or of the whole gateway, that have not ended yet.
//!
//! A call is counted from the moment its key is accepted until its [`Call`](super::Call) is
//! dropped, which is after its ledger row and its trace lines are written. The call's work
//! runs in a task that owns the call, so a call whose caller went away still ends (priced
//! and recorded) and is counted until then. Closing a trial waits for its calls, and the
//! gateway's shutdown for all of them ([`Live::drain`]); what is still running when the
//! wait is over is cancelled: each call stops waiting for its upstream and is recorded with
//! what it has seen. A user who will not wait cancels them at once ([`Live::cancel`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

/// How long cancelled calls are given to record themselves.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// The live calls of a trial or of the gateway (see the module documentation).
#[derive(Debug)]
pub(crate) struct Live {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    count: AtomicUsize,
    idle: Notify,
    cancel: watch::Sender<bool>,
}

/// One live call; dropping it ends the call's count.
#[derive(Debug)]
pub(crate) struct Entered(Arc<Shared>);

impl Default for Live {
    fn default() -> Self {
        Live {
            shared: Arc::new(Shared {
                count: AtomicUsize::new(0),
                idle: Notify::new(),
                cancel: watch::Sender::new(false),
            }),
        }
    }
}

impl Live {
    /// Counts one more live call until the returned value is dropped.
    pub(crate) fn enter(&self) -> Entered {
        self.shared.count.fetch_add(1, Ordering::SeqCst);
        Entered(Arc::clone(&self.shared))
    }

    /// Calls not ended yet.
    pub(crate) fn count(&self) -> usize {
        self.shared.count.load(Ordering::SeqCst)
    }

    /// Waits until no call is live.
    async fn idle(&self) {
        loop {
            let notified = self.shared.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Waits up to `wait` for every live call to end; then cancels the rest and gives them a
    /// few seconds to record themselves. Returns how many were cancelled.
    pub(crate) async fn drain(&self, wait: Duration) -> usize {
        if tokio::time::timeout(wait, self.idle()).await.is_ok() {
            return 0;
        }
        let cancelled = self.count();
        self.cancel();
        if tokio::time::timeout(CANCEL_WAIT, self.idle())
            .await
            .is_err()
        {
            tracing::warn!(
                calls = self.count(),
                "model calls did not stop within {CANCEL_WAIT:?} of being cancelled"
            );
        }
        cancelled
    }
}

impl Live {
    /// Cancels the live calls now, and every call that enters later: each stops waiting for
    /// its upstream and records itself ([`Entered::cancelled`]).
    pub(crate) fn cancel(&self) {
        self.shared.cancel.send_replace(true);
    }
}

impl Entered {
    /// Completes when the calls counted here are cancelled ([`Live::drain`] gave up waiting,
    /// or [`Live::cancel`]).
    pub(crate) async fn cancelled(&self) {
        let mut rx = self.0.cancel.subscribe();
        let _ = rx.wait_for(|cancelled| *cancelled).await;
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drain_waits_for_calls_and_cancels_those_that_outlast_the_wait() {
        let live = Live::default();
        assert_eq!(live.drain(Duration::ZERO).await, 0);
        // a call that ends on its own is waited for
        let call = live.enter();
        let ends = tokio::spawn(async move { drop(call) });
        assert_eq!(live.drain(Duration::from_secs(600)).await, 0);
        ends.await.unwrap();
        // a call that never ends on its own is cancelled and then ends
        let call = live.enter();
        let stops = tokio::spawn(async move {
            call.cancelled().await;
            drop(call);
        });
        assert_eq!(live.drain(Duration::ZERO).await, 1);
        assert_eq!(live.count(), 0);
        stops.await.unwrap();
    }
}
