//! Starts the model layer for a run: backends from `[model]`, the gateway (on loopback, or
//! where `[gateway]` says for Slurm trials), the ledger into the run's store, per-trial
//! keys for the engine, and what signals do to the calls still running (`calls_on_signal`).

use std::path::Path;
use std::sync::Arc;

use anyhow::anyhow;
use hevo_llm::model_file::{self, PullOutcome};
use hevo_llm::{BackendKind, GatewayHandle, Listen, ModelLayerConfig};
use hevo_runtime::cancel::Cancel;
use hevo_runtime::model_access::ModelEnv;
use hevo_runtime::model_access::{GatewayAccess, KeySecret, ModelAccess, SqliteSink, Ticket};
use hevo_search::config::RunConfig;
use tokio::task::JoinHandle;

use hevo_runtime::spend::Spend;

use crate::CliError;

/// A running model layer (or none, for runs whose `[model]` table is empty).
pub struct ModelLayer {
    handle: Option<GatewayHandle>,
    access: Option<Arc<dyn ModelAccess>>,
    /// Keys for processes on this machine (the agent proposer): loopback URLs.
    local_access: Option<Arc<dyn ModelAccess>>,
    open_tickets: std::sync::Mutex<Vec<Ticket>>,
    /// Stops the calls still running on a second signal (`calls_on_signal`).
    on_signal: Option<JoinHandle<()>>,
}

impl ModelLayer {
    /// Starts the layer `config` asks for; pulls the default local model first if needed.
    /// `cancel` is the process's token: its signals act on the calls still running.
    pub fn start(
        config: &RunConfig,
        _config_file: &Path,
        run_dir: &Path,
        cancel: &Cancel,
        log: &mut dyn FnMut(&str),
    ) -> Result<ModelLayer, CliError> {
        let layer = config
            .model
            .clone()
            .unwrap_or_else(ModelLayerConfig::local_default);
        // Only trials on other machines are given the advertised URL; local ones (sandboxed,
        // loopback only) keep reaching the gateway on loopback.
        let remote = config.executor.kind == hevo_search::config::ExecutorKind::Slurm;
        let listen = config.gateway.listen();
        Self::serve_layer(&layer, &listen, remote, run_dir, cancel, log)
    }

    /// Starts the given model-layer configuration on loopback (see [`ModelLayer::start`]).
    pub fn start_layer(
        layer: &ModelLayerConfig,
        run_dir: &Path,
        cancel: &Cancel,
        log: &mut dyn FnMut(&str),
    ) -> Result<ModelLayer, CliError> {
        Self::serve_layer(layer, &Listen::default(), false, run_dir, cancel, log)
    }

    /// Starts `layer` with its gateway on `listen`; trials get the advertised URL when
    /// `remote` (they run on other machines), the local one otherwise.
    fn serve_layer(
        layer: &ModelLayerConfig,
        listen: &Listen,
        remote: bool,
        run_dir: &Path,
        cancel: &Cancel,
        log: &mut dyn FnMut(&str),
    ) -> Result<ModelLayer, CliError> {
        if layer.backends.is_empty() {
            return Ok(ModelLayer {
                handle: None,
                access: None,
                local_access: None,
                open_tickets: Default::default(),
                on_signal: None,
            });
        }
        let needs_default_model = layer
            .backends
            .iter()
            .any(|b| b.kind == BackendKind::Local && b.model_path.is_none());
        if needs_default_model
            && !model_file::default_model_path(&model_file::hevo_home()).is_file()
        {
            log("the local model is missing: fetching it (hevo model pull, 98 MB)");
            match model_file::pull(&model_file::hevo_home(), None) {
                Ok(PullOutcome::Fetched(p)) | Ok(PullOutcome::AlreadyPresent(p)) => {
                    log(&format!("local model ready: {}", p.display()))
                }
                Err(e) => return Err(CliError::User(anyhow!("cannot fetch the local model: {e}"))),
            }
        }
        let gateway_config = layer
            .gateway_config()
            .map_err(|e| CliError::User(anyhow!("[model]: {e}")))?;
        log("loading the model backend(s)");
        let backends = layer
            .build_backends()
            .map_err(|e| CliError::User(anyhow!("[model]: {e}")))?;
        std::fs::create_dir_all(run_dir).map_err(|e| CliError::Internal(e.into()))?;
        let sink = Arc::new(
            SqliteSink::open(&run_dir.join("hevo.db"))
                .map_err(|e| CliError::Internal(anyhow!(e)))?,
        );
        // Jobs on a cluster outlive a restarted hevo and keep the URL and key they were given:
        // their keys are derived from the run's secret, and a free port chosen by the kernel
        // is chosen again (when it is still free) from `gateway.port`.
        let secret = remote
            .then(|| KeySecret::load_or_create(run_dir))
            .transpose()
            .map_err(|e| CliError::User(anyhow!("{e}")))?;
        let port_file = run_dir.join("gateway.port");
        let mut listen = listen.clone();
        let previous = std::fs::read_to_string(&port_file)
            .ok()
            .and_then(|p| p.trim().parse::<u16>().ok());
        let reused = match (remote, listen.bind.port(), previous) {
            (true, 0, Some(port)) => {
                listen.bind.set_port(port);
                true
            }
            _ => false,
        };
        // The gateway serves on the process runtime, beside the trials it answers.
        let gateway = hevo_runtime::rt::block_on(async {
            hevo_llm::Gateway::new(gateway_config, backends, sink)
        })
        .map_err(|e| CliError::User(anyhow!("[model]: {e}")))?;
        let serve = |listen: &Listen| {
            let gateway = gateway.clone();
            hevo_runtime::rt::block_on(async { gateway.serve_on(listen) })
        };
        let handle = match serve(&listen) {
            Err(e) if reused => {
                // Printed even without progress output: running jobs lose their model.
                eprintln!(
                    "hevo: warning: the gateway's port from before ({}) is taken ({e}); jobs \
                     still running from before cannot reach the new gateway (set a fixed port \
                     with `[gateway] bind`)",
                    listen.bind.port()
                );
                listen.bind.set_port(0);
                serve(&listen)
            }
            other => other,
        }
        .map_err(|e| {
            CliError::User(anyhow!(
                "cannot start the model gateway on {} (`[gateway] bind` in hevo.toml): {e}",
                listen.bind
            ))
        })?;
        if remote {
            std::fs::write(&port_file, format!("{}\n", handle.addr().port()))
                .map_err(|e| CliError::Internal(e.into()))?;
        }
        let local = handle.local_base_urls();
        let urls = if remote {
            (handle.openai_base_url(), handle.anthropic_base_url())
        } else {
            local.clone()
        };
        log(&format!("model gateway on {}", urls.0));
        if listen.is_exposed() {
            // Printed even without progress output: it is a security notice.
            eprintln!(
                "hevo: notice: the model gateway listens on {} (`[gateway] bind`), open to the \
                 network, not only this machine; calls need a live per-trial key, but let only \
                 the compute nodes reach that port (firewall). Trials are told {}",
                handle.addr(),
                urls.1
            );
        }
        let key_access = |(openai, anthropic): (String, String)| {
            GatewayAccess::new(
                handle.gateway().clone(),
                openai,
                anthropic,
                layer.caps.trial,
            )
        };
        let mut access = key_access(urls);
        if let Some(secret) = secret {
            access = access.with_key_secret(secret);
        }
        let access: Arc<dyn ModelAccess> = Arc::new(access);
        // the proposer runs here and dies with hevo: random keys
        let local_access: Arc<dyn ModelAccess> = Arc::new(key_access(local));
        let on_signal = crate::calls_on_signal::watch(handle.gateway().clone(), cancel.clone());
        Ok(ModelLayer {
            handle: Some(handle),
            access: Some(access),
            local_access: Some(local_access),
            open_tickets: Default::default(),
            on_signal: Some(on_signal),
        })
    }

    /// Per-trial keys for the engine (`None` without a gateway).
    pub fn access(&self) -> Option<Arc<dyn ModelAccess>> {
        self.access.clone()
    }

    /// Variables for a process that is not a trial (the agent proposer): a key that lives
    /// until [`ModelLayer::shutdown`], its calls traced under `trace_dir`, so its spend lands
    /// in the same ledger.
    pub fn proposer_env(&self, trace_dir: &Path) -> ModelEnv {
        match &self.local_access {
            Some(access) => match access.open("proposer", trace_dir, &Default::default()) {
                Ok((env, ticket)) => {
                    self.open_tickets.lock().expect("tickets lock").push(ticket);
                    env
                }
                Err(_) => ModelEnv::offline(),
            },
            None => ModelEnv::offline(),
        }
    }

    /// The run's model totals so far (the gateway's run totals: trials, `prepare` and the
    /// proposer).
    pub fn usage(&self) -> Spend {
        match &self.handle {
            Some(h) => Spend::from_usage(&h.gateway().run_usage()),
            None => Spend::default(),
        }
    }

    /// Stops the gateway.
    pub fn shutdown(self) {
        if let Some(access) = &self.local_access {
            for t in self.open_tickets.lock().expect("tickets lock").drain(..) {
                hevo_runtime::rt::block_on(access.close(t));
            }
        }
        if let Some(h) = self.handle {
            hevo_runtime::rt::block_on(h.shutdown());
        }
        if let Some(on_signal) = self.on_signal {
            on_signal.abort();
        }
    }
}
