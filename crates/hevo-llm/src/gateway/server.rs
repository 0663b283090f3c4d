//! Serving a gateway on a TCP listener: [`Gateway::start`], [`Gateway::serve`] and
//! [`Gateway::serve_on`], and what the running server ([`GatewayHandle`]) offers: its
//! address, the base URLs and environment harnesses are given, and its shutdown (which waits
//! for the calls still in flight, so that each is in the ledger).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::backend::Backend;
use crate::error::LlmError;
use crate::ledger::LedgerSink;

use super::connections::{tcp_connections, Capped};
use super::{Gateway, GatewayConfig, GatewayHandle, Listen, TrialKey};

impl Gateway {
    /// Builds the gateway and serves it on `127.0.0.1` at a free port. Must be called inside
    /// a tokio runtime.
    ///
    /// # Errors
    /// Those of [`Gateway::new`], [`LlmError::NoRuntime`] and [`LlmError::Bind`].
    pub fn start(
        config: GatewayConfig,
        backends: Vec<Arc<dyn Backend>>,
        sink: Arc<dyn LedgerSink>,
    ) -> Result<GatewayHandle, LlmError> {
        let gateway = Gateway::new(config, backends, sink)?;
        gateway.serve()
    }

    /// Serves this gateway on `127.0.0.1` at a free port.
    ///
    /// # Errors
    /// [`LlmError::NoRuntime`] outside a tokio runtime, [`LlmError::Bind`].
    pub fn serve(self) -> Result<GatewayHandle, LlmError> {
        self.serve_on(&Listen::default())
    }

    /// Serves this gateway where `listen` says (the bind address and the advertised URL).
    ///
    /// # Errors
    /// [`LlmError::NoRuntime`] outside a tokio runtime, [`LlmError::Bind`].
    pub fn serve_on(self, listen: &Listen) -> Result<GatewayHandle, LlmError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| LlmError::NoRuntime)?;
        let std_listener = std::net::TcpListener::bind(listen.bind).map_err(LlmError::Bind)?;
        std_listener.set_nonblocking(true).map_err(LlmError::Bind)?;
        let addr = std_listener.local_addr().map_err(LlmError::Bind)?;
        let (tx, rx) = oneshot::channel::<()>();
        let router = self.router();
        let server = runtime.spawn(async move {
            let listener = match tokio::net::TcpListener::from_std(std_listener) {
                Ok(listener) => listener,
                Err(err) => {
                    tracing::error!(%err, "gateway listener failed");
                    return;
                }
            };
            let listener = Capped::new(listener, tcp_connections());
            let serve = axum::serve(listener, router).with_graceful_shutdown(async {
                let _ = rx.await;
            });
            if let Err(err) = serve.await {
                tracing::error!(%err, "gateway server failed");
            }
        });
        Ok(GatewayHandle {
            gateway: self,
            addr,
            base: listen.base_url(addr),
            local_base: listen.local_base_url(addr),
            shutdown: Some(tx),
            server: Some(server),
        })
    }
}

impl GatewayHandle {
    /// The listening address (127.0.0.1 unless [`Listen::bind`] said otherwise).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `OPENAI_BASE_URL` for harnesses: `http://127.0.0.1:PORT/v1`, or the advertised URL
    /// plus `/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base)
    }

    /// `ANTHROPIC_BASE_URL` for harnesses: `http://127.0.0.1:PORT` or the advertised URL (the
    /// SDK appends `/v1`).
    pub fn anthropic_base_url(&self) -> String {
        self.base.clone()
    }

    /// `OPENAI_BASE_URL` and `ANTHROPIC_BASE_URL` for processes on this machine (an agent
    /// proposer): loopback whenever the listener accepts it.
    pub fn local_base_urls(&self) -> (String, String) {
        (format!("{}/v1", self.local_base), self.local_base.clone())
    }

    /// The environment a trial's harness gets: `OPENAI_BASE_URL`, `OPENAI_API_KEY`,
    /// `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`. Remove [`Gateway::provider_key_vars`] too.
    pub fn harness_env(&self, key: &TrialKey) -> Vec<(String, String)> {
        vec![
            ("OPENAI_BASE_URL".into(), self.openai_base_url()),
            ("OPENAI_API_KEY".into(), key.0.clone()),
            ("ANTHROPIC_BASE_URL".into(), self.anthropic_base_url()),
            ("ANTHROPIC_API_KEY".into(), key.0.clone()),
        ]
    }

    /// The gateway state behind this server.
    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// Stops accepting connections and lets the calls in flight end, at most `grace` in all:
    /// first the connections (answers still being sent), then every call still running
    /// without one (its caller left: the upstream is still answering). Calls still running
    /// after `grace` are cancelled and recorded with what they had received, so every call
    /// is in the ledger when this returns.
    pub async fn shutdown_within(mut self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            let abort = server.abort_handle();
            if tokio::time::timeout_at(deadline, server).await.is_err() {
                abort.abort();
            }
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let cancelled = self.gateway.inner.live.drain(left).await;
        if cancelled > 0 {
            tracing::warn!("cancelled {cancelled} model call(s) still running at shutdown");
        }
    }

    /// [`GatewayHandle::shutdown_within`] with a 10 s grace period.
    pub async fn shutdown(self) {
        self.shutdown_within(Duration::from_secs(10)).await;
    }
}

impl std::ops::Deref for GatewayHandle {
    type Target = Gateway;

    fn deref(&self) -> &Gateway {
        &self.gateway
    }
}

impl Drop for GatewayHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
