//! The one cancellation token of a process, with the reason it was cancelled.
//!
//! A [`Cancel`] is made once (by the CLI, or by a test) and cloned into everything that can
//! wait: trials, `prepare`, scorer processes, proposers and the gateway. Signals become
//! reasons ([`Cancel::listen_for_signals`]): the first SIGINT/SIGTERM asks every process
//! group to stop (SIGTERM, grace period, SIGKILL) and lets the store finish its writes; a
//! second one is [`CancelReason::Kill`]: every running group gets SIGKILL at once (a
//! signal echoed within [`TERM_ECHO`] or [`INT_ECHO`] of the first is not a second one).
//!
//! Reasons are ordered by strength and only a stronger reason replaces the current one, so
//! a late "store failed" never hides the user's Ctrl-C, and a second Ctrl-C always wins.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

/// How soon after a first SIGTERM another SIGTERM is the same request echoed (a sender
/// signalling the process and then its group), not a second signal.
pub const TERM_ECHO: std::time::Duration = std::time::Duration::from_millis(500);

/// The same for SIGINT (`timeout -s INT` echoes it too), kept short: a person who presses
/// Ctrl-C twice means "stop now", and no one presses twice within 100 ms.
pub const INT_ECHO: std::time::Duration = std::time::Duration::from_millis(100);

/// Why a run was cancelled, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CancelReason {
    /// Something the run depends on failed (e.g. the store could not be written); the run
    /// stops so that nothing is lost.
    Failure,
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// A second signal: every running process group is killed without a grace period.
    Kill,
}

impl CancelReason {
    /// The shell's exit code for this reason (128 + the signal number; 1 for a failure).
    pub fn exit_code(self) -> u8 {
        match self {
            CancelReason::Failure => 1,
            CancelReason::Interrupt | CancelReason::Kill => 130,
            CancelReason::Terminate => 143,
        }
    }
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CancelReason::Failure => "a failure",
            CancelReason::Interrupt => "SIGINT",
            CancelReason::Terminate => "SIGTERM",
            CancelReason::Kill => "a second signal",
        })
    }
}

/// A cloneable cancellation token; every clone sees the same state.
#[derive(Clone, Debug)]
pub struct Cancel {
    tx: Arc<watch::Sender<Option<CancelReason>>>,
    rx: watch::Receiver<Option<CancelReason>>,
}

impl Default for Cancel {
    fn default() -> Self {
        Cancel::new()
    }
}

impl Cancel {
    /// A token that is not cancelled.
    pub fn new() -> Cancel {
        let (tx, rx) = watch::channel(None);
        Cancel {
            tx: Arc::new(tx),
            rx,
        }
    }

    /// Cancels with `reason`, unless a reason at least as strong is already set. With
    /// [`CancelReason::Kill`] every running process group gets SIGKILL now.
    pub fn cancel(&self, reason: CancelReason) {
        self.tx.send_if_modified(|current| match current {
            Some(c) if *c >= reason => false,
            _ => {
                *current = Some(reason);
                true
            }
        });
        if reason == CancelReason::Kill {
            crate::launch::kill_all_running();
        }
    }

    /// The reason, if cancelled.
    pub fn reason(&self) -> Option<CancelReason> {
        *self.rx.borrow()
    }

    /// Whether it was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.reason().is_some()
    }

    /// Waits until it is cancelled (at once if it already is) and returns the reason.
    pub async fn cancelled(&self) -> CancelReason {
        let mut rx = self.rx.clone();
        loop {
            if let Some(r) = *rx.borrow_and_update() {
                return r;
            }
            if rx.changed().await.is_err() {
                // The sender lives in `self`, so this cannot happen; never resolve.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Waits until the reason is at least `reason`.
    pub async fn reached(&self, reason: CancelReason) {
        let mut rx = self.rx.clone();
        loop {
            if rx.borrow_and_update().is_some_and(|r| r >= reason) {
                return;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Turns SIGINT and SIGTERM into reasons, on the process runtime: the first signal
    /// cancels with `Interrupt`/`Terminate` and calls `notify` (the CLI prints how to
    /// resume), a second one cancels with `Kill`. A SIGTERM within [`TERM_ECHO`] of a first
    /// SIGTERM (a SIGINT within [`INT_ECHO`] of a first SIGINT) is the same request, not a
    /// second one: `timeout` (and other supervisors) signal the process and then its
    /// process group, so hevo gets it twice at once, and took that for "stop now". Call
    /// once per process.
    pub fn listen_for_signals(&self, notify: impl Fn(CancelReason) + Send + 'static) {
        use tokio::signal::unix::{signal, SignalKind};
        let cancel = self.clone();
        crate::rt::runtime().spawn(async move {
            let mut int = signal(SignalKind::interrupt()).ok();
            let mut term = signal(SignalKind::terminate()).ok();
            let mut first: Option<(CancelReason, std::time::Instant)> = None;
            loop {
                let reason = tokio::select! {
                    Some(()) = recv(&mut int) => CancelReason::Interrupt,
                    Some(()) = recv(&mut term) => CancelReason::Terminate,
                    else => return,
                };
                match first {
                    None => {
                        first = Some((reason, std::time::Instant::now()));
                        cancel.cancel(reason);
                        notify(reason);
                    }
                    Some((CancelReason::Terminate, at))
                        if reason == CancelReason::Terminate && at.elapsed() < TERM_ECHO => {}
                    Some((CancelReason::Interrupt, at))
                        if reason == CancelReason::Interrupt && at.elapsed() < INT_ECHO => {}
                    Some(_) => cancel.cancel(CancelReason::Kill),
                }
            }
        });
    }
}

async fn recv(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s.as_mut() {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_stronger_reason_replaces_the_current_one() {
        let c = Cancel::new();
        assert_eq!(c.reason(), None);
        c.cancel(CancelReason::Terminate);
        c.cancel(CancelReason::Failure);
        assert_eq!(c.reason(), Some(CancelReason::Terminate));
        let clone = c.clone();
        clone.cancel(CancelReason::Kill);
        assert_eq!(c.reason(), Some(CancelReason::Kill));
    }

    #[test]
    fn waiters_wake_with_the_reason() {
        let c = Cancel::new();
        let waiter = {
            let c = c.clone();
            crate::rt::runtime().spawn(async move { c.cancelled().await })
        };
        c.cancel(CancelReason::Interrupt);
        let got = crate::rt::block_on(waiter).unwrap();
        assert_eq!(got, CancelReason::Interrupt);
        assert_eq!(CancelReason::Interrupt.exit_code(), 130);
    }
}
