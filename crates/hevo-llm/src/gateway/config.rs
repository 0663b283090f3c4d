//! How a gateway is set up: [`GatewayConfig`] and its [`ModelRoute`]s, [`Gateway::new`] that
//! checks the config against the backends and prices and builds the state, and what the
//! gateway was set up with (its models, run caps, provider key variables and routes).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::backend::Backend;
use crate::cache::ResponseCache;
use crate::error::LlmError;
use crate::ledger::{Caps, LedgerSink, Scope};
use crate::price::PriceTable;

use super::limits::Budget;
use super::live::Live;
use super::scrub;
use super::trace::RunTraceBudget;
use super::{Gateway, Inner, Route, RunState};

/// Maps a model name harnesses use to a backend and the backend's own model name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRoute {
    /// The name harnesses put in `model`.
    pub name: String,
    /// The backend that serves it ([`Backend::name`]).
    pub backend: String,
    /// The model name sent to the backend, and priced.
    pub upstream_model: String,
}

impl ModelRoute {
    /// A route from `name` to `upstream_model` on `backend`.
    pub fn new(name: &str, backend: &str, upstream_model: &str) -> Self {
        Self {
            name: name.into(),
            backend: backend.into(),
            upstream_model: upstream_model.into(),
        }
    }
}

/// How a gateway is set up for one run.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Models harnesses may call.
    pub routes: Vec<ModelRoute>,
    /// Route used when a harness names a model that has no route (so SDK defaults such as
    /// `gpt-4o-mini` reach the run's model); `None` answers such calls with 404.
    pub default_model: Option<String>,
    /// Prices; every routed upstream model must be priced or free.
    pub prices: PriceTable,
    /// Caps on the whole run (every trial together); its `max_concurrent`,
    /// `max_bytes_in_flight` and `max_trace_bytes` bound the whole gateway.
    pub run_caps: Caps,
    /// Directory of the shared response cache; `None` disables caching.
    pub cache_dir: Option<PathBuf>,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// How long closing a trial waits for its calls still in flight (the harness left while
    /// a stream or an answer was still coming) before cancelling them; each is recorded
    /// either way. [`GatewayConfig::DRAIN_TIMEOUT`] by default.
    pub drain_timeout: Duration,
    /// How long a request body may send nothing before the request is dropped (408), giving
    /// back its slot and bytes. [`GatewayConfig::BODY_IDLE_TIMEOUT`] by default.
    pub body_idle_timeout: Duration,
}

impl GatewayConfig {
    /// The default of [`GatewayConfig::drain_timeout`].
    pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
    /// The default of [`GatewayConfig::body_idle_timeout`].
    pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

    /// A config with these routes and prices, no run caps, no cache, 32 MiB body limit.
    pub fn new(routes: Vec<ModelRoute>, prices: PriceTable) -> Self {
        Self {
            routes,
            default_model: None,
            prices,
            run_caps: Caps::UNLIMITED,
            cache_dir: None,
            max_body_bytes: 32 << 20,
            drain_timeout: Self::DRAIN_TIMEOUT,
            body_idle_timeout: Self::BODY_IDLE_TIMEOUT,
        }
    }
}

impl Gateway {
    /// Checks the config (every route's backend exists, every upstream model is priced or
    /// free) and builds the state.
    ///
    /// # Errors
    /// [`LlmError::UnknownBackend`], [`LlmError::UnpricedModel`], or an I/O error opening the
    /// cache directory.
    pub fn new(
        config: GatewayConfig,
        backends: Vec<Arc<dyn Backend>>,
        sink: Arc<dyn LedgerSink>,
    ) -> Result<Self, LlmError> {
        let by_name: HashMap<&str, &Arc<dyn Backend>> =
            backends.iter().map(|b| (b.name(), b)).collect();
        let mut routes = HashMap::new();
        let mut route_names = Vec::new();
        for route in &config.routes {
            let backend =
                by_name
                    .get(route.backend.as_str())
                    .ok_or_else(|| LlmError::UnknownBackend {
                        model: route.name.clone(),
                        backend: route.backend.clone(),
                    })?;
            config.prices.check([route.upstream_model.as_str()])?;
            route_names.push(route.name.clone());
            routes.insert(
                route.name.clone(),
                Arc::new(Route {
                    backend: Arc::clone(backend),
                    upstream_model: route.upstream_model.clone(),
                }),
            );
        }
        if let Some(default) = &config.default_model {
            if !routes.contains_key(default) {
                return Err(LlmError::DefaultModelNotRouted {
                    model: default.clone(),
                });
            }
        }
        let cache = config.cache_dir.map(ResponseCache::open).transpose()?;
        let mut secret_vars: Vec<String> =
            backends.iter().flat_map(|b| b.secret_env_vars()).collect();
        secret_vars.sort();
        secret_vars.dedup();
        let gateway = Self {
            inner: Arc::new(Inner {
                routes,
                route_names,
                default_model: config.default_model,
                prices: config.prices,
                run_caps: config.run_caps,
                cache,
                max_body_bytes: config.max_body_bytes,
                drain_timeout: config.drain_timeout,
                body_idle_timeout: config.body_idle_timeout,
                sink,
                live: Live::default(),
                trials: RwLock::new(HashMap::new()),
                run: Mutex::new(RunState::default()),
                budget: Budget::new(
                    config.run_caps.concurrency(Scope::Run),
                    config.run_caps.bytes_in_flight(Scope::Run),
                ),
                trace_budget: RunTraceBudget::new(config.run_caps.trace_bytes(Scope::Run)),
                secrets: scrub::secrets_of(&secret_vars),
                secret_vars,
            }),
        };
        gateway.register();
        Ok(gateway)
    }

    /// The run's caps.
    pub fn run_caps(&self) -> Caps {
        self.inner.run_caps
    }

    /// Names of environment variables holding provider keys; remove them from every
    /// harness's environment.
    pub fn provider_key_vars(&self) -> &[String] {
        &self.inner.secret_vars
    }

    /// The model names harnesses may use.
    pub fn models(&self) -> &[String] {
        &self.inner.route_names
    }

    /// The model names (routes) whose calls go to `upstream_model`, in configuration order.
    /// The ledger names a call's upstream model; this finds what to ask for it again.
    pub fn routes_to(&self, upstream_model: &str) -> Vec<String> {
        self.inner
            .route_names
            .iter()
            .filter(|name| {
                self.inner
                    .routes
                    .get(name.as_str())
                    .is_some_and(|r| r.upstream_model == upstream_model)
            })
            .cloned()
            .collect()
    }

    pub(super) fn route(&self, model: &str) -> Option<Arc<Route>> {
        self.inner.routes.get(model).cloned().or_else(|| {
            self.inner
                .default_model
                .as_ref()
                .and_then(|d| self.inner.routes.get(d).cloned())
        })
    }
}
