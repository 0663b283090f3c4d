//! Running a call's upstream work in a task of its own, which owns the call.
//!
//! A handler's future is dropped when its caller hangs up (an SDK's timeout, a harness that
//! exits), but the upstream may already be generating, and billing, the answer. So the
//! work that waits for the upstream never runs in the handler: [`Call::detach`] moves the
//! call into a task and the handler only waits for the answer to send. If the caller is
//! gone, the task still ends the call (priced by the upstream's real usage and recorded),
//! and the call keeps its reservation against the caps and its slot until then.

use std::future::Future;

use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;

use super::{ApiError, Call, ErrorKind};

/// Where a detached call sends the answer for its caller (see [`Call::detach_answering`]).
pub(crate) struct Answer(oneshot::Sender<Response>);

impl Answer {
    /// Hands `response` to the caller, if it is still there.
    pub(crate) fn send(self, response: Response) {
        let _ = self.0.send(response);
    }
}

impl Call {
    /// Runs `work` on the call in a task of its own and answers the caller with what it
    /// returns (see the module documentation).
    pub(crate) async fn detach<F, Fut>(self, work: F) -> Response
    where
        F: FnOnce(Call) -> Fut,
        Fut: Future<Output = Response> + Send + 'static,
    {
        self.detach_answering(|call, answer| {
            let answered = work(call);
            async move { answer.send(answered.await) }
        })
        .await
    }

    /// [`Call::detach`] for work that answers before it ends (a stream: the response, whose
    /// body then comes from the task).
    pub(crate) async fn detach_answering<F, Fut>(self, work: F) -> Response
    where
        F: FnOnce(Call, Answer) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let dialect = self.dialect();
        let (tx, rx) = oneshot::channel();
        tokio::spawn(work(self, Answer(tx)));
        match rx.await {
            Ok(response) => response,
            Err(_) => ApiError::new(
                dialect,
                ErrorKind::Backend,
                "hevo's gateway lost the call: its task ended without an answer",
            )
            .into_response(),
        }
    }
}
