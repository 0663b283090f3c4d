//! Trial keys bound to their sandbox.
//!
//! A sandboxed trial reaches the gateway only through a Unix socket that hevo binds into its
//! sandbox. [`Gateway::serve_bound`] serves the gateway on such a socket for one key and
//! binds that key to it: from then on the key is accepted only on sockets served for it and
//! refused over TCP, and such a socket accepts no other key. A key stolen by another trial
//! (whose sandbox has only its own socket) or used over the TCP port is refused with 401
//! before anything is read, counted or billed. Keys never bound (unsandboxed and Slurm runs)
//! stay bearer keys over TCP.
//!
//! Sandboxes are made by the runtime, which knows a trial only by its environment; it finds
//! the gateway that issued a key with [`Gateway::issuer_of`] (every gateway of the process
//! registers itself; keys are 192-bit random, so at most one issued a given key).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use axum::Extension;
use tokio::task::JoinHandle;

use super::connections::{Capped, TRIAL_CONNECTIONS};
use super::{ApiError, Dialect, ErrorKind, Gateway, Inner, Trial};
use crate::error::LlmError;

/// Every live gateway of this process.
static LIVE: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

/// The key a bound socket serves; set on each request arriving through it (clients cannot
/// set request extensions).
#[derive(Debug, Clone)]
pub(crate) struct Via(Arc<str>);

/// A gateway served on one trial's socket; dropping it stops serving there.
#[derive(Debug)]
pub struct BoundSocket {
    server: JoinHandle<()>,
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Gateway {
    /// Adds this gateway to the process's registry ([`Gateway::issuer_of`]).
    pub(crate) fn register(&self) {
        let mut live = LIVE.lock().expect("gateway registry lock");
        live.retain(|g| g.strong_count() > 0);
        live.push(Arc::downgrade(&self.inner));
    }

    /// The live gateway of this process that issued `key` (an open trial's), if any.
    pub fn issuer_of(key: &str) -> Option<Gateway> {
        let live = LIVE.lock().expect("gateway registry lock");
        live.iter().filter_map(Weak::upgrade).find_map(|inner| {
            let issued = inner.trials.read().expect("trials lock").contains_key(key);
            issued.then_some(Gateway { inner })
        })
    }

    /// Binds `key`'s trial to `listener` (see the module documentation) and serves the
    /// gateway there until the returned value is dropped. Must be called inside a tokio
    /// runtime.
    ///
    /// # Errors
    /// [`LlmError::NoRuntime`] outside a runtime; [`LlmError::UnknownKey`] when `key` is not
    /// an open trial's.
    pub fn serve_bound(
        &self,
        key: &str,
        listener: tokio::net::UnixListener,
    ) -> Result<BoundSocket, LlmError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| LlmError::NoRuntime)?;
        let trial = self.trial_of(key).ok_or(LlmError::UnknownKey)?;
        trial.bound.store(true, Ordering::SeqCst);
        let router = self.router().layer(Extension(Via(Arc::from(key))));
        let server = runtime.spawn(async move {
            let listener = Capped::new(listener, TRIAL_CONNECTIONS);
            if let Err(err) = axum::serve(listener, router).await {
                tracing::warn!(%err, "bound gateway socket failed");
            }
        });
        Ok(BoundSocket { server })
    }

    /// Refuses `key` when it is used where it is not bound: over TCP while bound to a
    /// sandbox, or on a socket served for another key. `via` is the socket's key.
    pub(crate) fn check_binding(
        &self,
        key: &str,
        via: Option<&Via>,
        dialect: Dialect,
    ) -> Result<(), ApiError> {
        // Logged once per trial: a harness looping on refused calls would otherwise flood
        // hevo's stderr with one line per call.
        let refuse = |trial: Option<Arc<Trial>>, message: &str| -> Result<(), ApiError> {
            if let Some(t) = trial.filter(|t| t.refusals.fetch_add(1, Ordering::SeqCst) == 0) {
                tracing::warn!(
                    trial = %t.id,
                    "refused a trial key used outside its sandbox (further refusals for this \
                     trial are not logged)"
                );
            }
            Err(ApiError::new(
                dialect,
                ErrorKind::Authentication,
                message.to_owned(),
            ))
        };
        match via {
            Some(Via(own)) if **own != *key => refuse(
                self.trial_of(own),
                if self.trial_of(key).is_some() {
                    "invalid API key: this key belongs to another trial's sandbox (each \
                     sandboxed trial's key works only inside its own sandbox; nothing was billed)"
                } else {
                    "invalid API key: not this sandbox's trial key (a sandboxed trial's key is \
                     in its OPENAI_API_KEY and ANTHROPIC_API_KEY; nothing was billed)"
                },
            ),
            Some(_) => Ok(()),
            None => match self.trial_of(key) {
                Some(t) if t.bound.load(Ordering::SeqCst) => refuse(
                    Some(t),
                    "invalid API key: this trial key is bound to its sandbox and works only \
                     through the gateway socket inside it, not over TCP (nothing was billed)",
                ),
                _ => Ok(()),
            },
        }
    }
}
