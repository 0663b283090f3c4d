//! Calls cancelled while they waited for their upstream, and how they are recorded.
//!
//! A call is cancelled when its trial's close or the gateway's shutdown stopped waiting for
//! it (`live`), or when the user will not wait ([`Gateway::cancel_calls`], hevo's second
//! Ctrl-C). It stops waiting for its upstream and is recorded as `backend_error`, its
//! `error` starting with `cancelled`, priced by the usage the upstream had reported (a
//! stream's first event often carries the input tokens). A call whose upstream had reported
//! no input tokens (a plain answer reports its usage only once it is whole; a chat completion
//! or Responses stream at its end) may still be billed for its input, which the provider
//! has received: it is recorded with the input tokens it reserved against the caps (one per
//! request byte, an upper bound; see `Gateway::bound`), at the uncached input price, and its
//! `error` starts with `cancelled, input estimated` so that a reader can tell the estimate
//! from a count.

use std::time::Duration;

use super::{ApiError, Call, ErrorKind, Gateway};
use crate::backend::Retries;
use crate::types::Usage;

/// The error of a call cancelled while it waited for its upstream, priced by what the
/// upstream had reported.
pub(crate) const CANCELLED: &str = "cancelled: the call was still running when its trial ended \
     or hevo shut down, and did not end in the time it was given (or hevo was told to stop at \
     once); recorded with what it had received";

/// The error of a cancelled call whose upstream had reported no input tokens.
pub(crate) const CANCELLED_ESTIMATED: &str = "cancelled, input estimated: the call was still \
     running when its trial ended or hevo shut down, and did not end in the time it was \
     given (or hevo was told to stop at once); the upstream had reported no usage, so its \
     input tokens are the gateway's estimate (one per request byte, an upper bound), priced \
     at the uncached input price";

impl Gateway {
    /// Calls begun and not ended yet, in every trial: what closing the trials and the
    /// shutdown wait for.
    pub fn live_calls(&self) -> usize {
        self.inner.live.count()
    }

    /// How long closing a trial waits for its calls still running before it cancels them
    /// ([`GatewayConfig::drain_timeout`](super::GatewayConfig::drain_timeout)).
    pub fn drain_timeout(&self) -> Duration {
        self.inner.drain_timeout
    }

    /// Cancels every call still running, now, and every call begun later, as closing a
    /// trial or the shutdown does once its wait is over: each stops waiting for its upstream
    /// and is recorded as cancelled. The closes and the shutdown waiting for them then return
    /// as soon as they are recorded. For a user who will not wait (hevo's second Ctrl-C).
    pub fn cancel_calls(&self) {
        self.inner.live.cancel();
    }
}

impl Call {
    /// The usage a cancelled call is priced by, given the usage its upstream had reported
    /// (`seen`), and the error it is recorded with (see the module documentation).
    pub(crate) fn cancelled_usage(&self, seen: Usage) -> (Usage, &'static str) {
        if seen.prompt_tokens > 0 || self.input_bound() == 0 {
            return (seen, CANCELLED);
        }
        let estimated = Usage {
            prompt_tokens: self.input_bound(),
            ..seen
        };
        (estimated, CANCELLED_ESTIMATED)
    }

    /// Records and traces a call cancelled before its upstream answered (nothing of the
    /// answer had come); returns the error for the caller, if it is still there.
    pub(crate) fn cancelled(&self) -> ApiError {
        let (usage, message) = self.cancelled_usage(Usage::default());
        self.record_spent_failure(usage, message, &Retries::default());
        let err = ApiError::new(self.dialect(), ErrorKind::Backend, message);
        self.trace("response", Some(err.status().as_u16()), &err.body());
        err
    }
}
