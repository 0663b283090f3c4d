//! What a signal does to the model calls still running: on the first SIGINT/SIGTERM hevo
//! says how many there are, how long it waits for them (so that each is in the ledger,
//! priced by its upstream's usage) and that a second signal stops them now; on the second
//! signal, or once that wait is over, it cancels them ([`Gateway::cancel_calls`]): each is
//! recorded as cancelled, and what waited for them (the trials' closes, the shutdown) ends.

use hevo_llm::Gateway;
use hevo_runtime::cancel::{Cancel, CancelReason};
use tokio::task::JoinHandle;

use crate::words::counted;

/// Watches `cancel` for the gateway's calls, on the process runtime, until aborted.
pub(crate) fn watch(gateway: Gateway, cancel: Cancel) -> JoinHandle<()> {
    hevo_runtime::rt::runtime().spawn(async move {
        cancel.reached(CancelReason::Interrupt).await;
        let wait = gateway.drain_timeout();
        let running = gateway.live_calls();
        if running > 0 {
            eprintln!(
                "hevo: {} still running: waiting up to {} s for {} to end, so that {} \
                 cost is recorded; press Ctrl-C again to stop {} now (recorded as cancelled)",
                counted(running as u64, "model call"),
                wait.as_secs(),
                if running == 1 { "it" } else { "them" },
                if running == 1 { "its" } else { "their" },
                if running == 1 { "it" } else { "them" },
            );
        }
        tokio::select! {
            () = cancel.reached(CancelReason::Kill) => {
                let running = gateway.live_calls();
                if running > 0 {
                    eprintln!(
                        "hevo: stopping {} now; each is recorded as cancelled",
                        counted(running as u64, "model call")
                    );
                }
            }
            () = tokio::time::sleep(wait) => {}
        }
        gateway.cancel_calls();
    })
}
