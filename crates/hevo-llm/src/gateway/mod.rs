//! The gateway: an OpenAI- and Anthropic-compatible HTTP server on loopback through which every
//! model call of a run passes.
//!
//! Each trial gets its own key ([`Gateway::open_trial`]); a call waits for a slot and for
//! its body's bytes (`limits`), is attributed by its key, reserves its maximum cost against
//! the trial's and the run's caps (`call`), is answered from the response cache or a
//! backend, priced, written to the trial's capped trace (`trace`) and handed to the
//! [`LedgerSink`]. A sandboxed trial's key is bound to its sandbox's socket (`bound`).
//! Closing a trial expires its key and returns its totals.
//!
//! Routes ([`SERVED`]): OpenAI's chat completions, Responses, embeddings and models;
//! Anthropic's messages and token counting; `HEAD /` and `GET /`. Any other path gets a 404
//! whose body lists them.
//!
//! A request is answered one of two ways. When its translation into a provider-neutral
//! [`ChatRequest`] carries it exactly (plain chat), the backend answers that, whatever its
//! provider, and deterministic answers are cached. Otherwise (tools, thinking, structured
//! output, images, the Responses API, ...), and for every stream, a backend that speaks the
//! request's API gets it forwarded unchanged ([`forward`]); any other backend (the embedded
//! model) answers 400 saying what it cannot carry. See docs/models.md.

mod anthropic_api;
mod bound;
mod call;
mod error;
mod forward;
mod limits;
mod listen;
mod misc;
mod openai_api;
mod responses_api;
mod sse;
mod trace;
mod translate;
mod usage;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use listen::{check_advertise, Listen};

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, head, post};
use axum::Router;
use rand::RngCore;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::backend::Backend;
use crate::cache::ResponseCache;
use crate::error::LlmError;
use crate::ledger::{Caps, InFlight, LedgerSink, Scope, TrialLabels, TrialUsage};
use crate::price::PriceTable;
#[cfg(doc)]
use crate::types::ChatRequest;
pub use bound::BoundSocket;
pub(crate) use call::{Call, Refusal};
pub(crate) use error::{ApiError, Dialect, ErrorKind};
use limits::Budget;
use trace::{RunTraceBudget, TraceFile, TraceLine};

/// Translates a request body of `api` into the provider-neutral [`ChatRequest`] the
/// gateway answers from a non-forwarding backend, with the checks its handlers make before
/// any backend is asked (valid JSON, a string `model`, the dialect's fields). The error is
/// the message the 400 would carry. Embeddings and token counting are never translated.
pub fn translate_request(
    api: crate::backend::Api,
    body: &[u8],
) -> Result<crate::types::ChatRequest, String> {
    use crate::backend::Api;
    let raw: Value =
        serde_json::from_slice(body).map_err(|e| format!("request body is not valid JSON: {e}"))?;
    if raw.get("model").and_then(Value::as_str).is_none() {
        return Err("model: a string `model` is required".into());
    }
    let translated = match api {
        Api::ChatCompletions => openai_api::parse(&raw).map(|(request, _)| request),
        Api::Responses => responses_api::parse(&raw).map(|(request, _)| request),
        Api::Messages => anthropic_api::parse(&raw).map(|(request, _)| request),
        Api::Embeddings | Api::CountTokens => {
            return Err(format!("`{}` is forwarded, never translated", api.path()))
        }
    };
    translated.map_err(|refusal| match refusal {
        Refusal::Invalid(message) | Refusal::Unsupported(message) => message,
    })
}

/// Every method and path the gateway serves, as unknown paths' 404 lists them.
pub const SERVED: &[&str] = &[
    "POST /v1/chat/completions",
    "POST /v1/responses",
    "POST /v1/embeddings",
    "GET /v1/models",
    "GET /v1/models/{id}",
    "POST /v1/messages",
    "POST /v1/messages/count_tokens",
    "HEAD /",
    "GET /",
];

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
}

impl GatewayConfig {
    /// A config with these routes and prices, no run caps, no cache, 32 MiB body limit.
    pub fn new(routes: Vec<ModelRoute>, prices: PriceTable) -> Self {
        Self {
            routes,
            default_model: None,
            prices,
            run_caps: Caps::UNLIMITED,
            cache_dir: None,
            max_body_bytes: 32 << 20,
        }
    }
}

/// A trial's API key: valid from [`Gateway::open_trial`] until [`Gateway::close_trial`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrialKey(String);

impl TrialKey {
    /// The key as sent in `Authorization: Bearer` or `x-api-key`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

struct Route {
    backend: Arc<dyn Backend>,
    upstream_model: String,
}

struct Trial {
    id: String,
    labels: TrialLabels,
    caps: Caps,
    state: Mutex<TrialState>,
    trace: Mutex<Option<TraceFile>>,
    budget: Budget,
    /// Bound to its sandbox's socket ([`Gateway::serve_bound`]): refused over TCP.
    bound: std::sync::atomic::AtomicBool,
}

impl Trial {
    /// Appends one JSON line to the trial's trace, within the trial's and the run's trace
    /// caps (a closed trial's trace is gone).
    fn write_trace(&self, line: &TraceLine<'_>, run: &RunTraceBudget) {
        let mut guard = self.trace.lock().expect("trace lock");
        if let Some(trace) = guard.as_mut() {
            if trace.write(line, run).is_err() {
                tracing::warn!(trial = %self.id, "trace write failed");
            }
        }
    }
}

#[derive(Default)]
struct TrialState {
    usage: TrialUsage,
    in_flight: InFlight,
    next_seq: u64,
}

/// The run's answered calls and its calls in flight.
#[derive(Default)]
struct RunState {
    usage: TrialUsage,
    in_flight: InFlight,
}

struct Inner {
    routes: HashMap<String, Arc<Route>>,
    route_names: Vec<String>,
    default_model: Option<String>,
    prices: PriceTable,
    run_caps: Caps,
    cache: Option<ResponseCache>,
    max_body_bytes: usize,
    sink: Arc<dyn LedgerSink>,
    trials: RwLock<HashMap<String, Arc<Trial>>>,
    run: Mutex<RunState>,
    budget: Budget,
    trace_budget: RunTraceBudget,
    secret_vars: Vec<String>,
}

/// The gateway's state: routes, prices, trials and totals. Cheap to clone; serve it with
/// [`Gateway::router`] or start it on a port with [`Gateway::start`].
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("routes", &self.inner.route_names)
            .finish_non_exhaustive()
    }
}

/// A running gateway: its address plus everything [`Gateway`] offers (through `Deref`).
/// Keep it alive for the whole run: dropping it stops the server (clones of the [`Gateway`]
/// state stay usable, but nothing listens any more).
#[derive(Debug)]
pub struct GatewayHandle {
    gateway: Gateway,
    addr: SocketAddr,
    /// The base URL trial-side processes are given (see [`Listen`]).
    base: String,
    /// The base URL for processes on this machine.
    local_base: String,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
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
                sink,
                trials: RwLock::new(HashMap::new()),
                run: Mutex::new(RunState::default()),
                budget: Budget::new(
                    config.run_caps.concurrency(Scope::Run),
                    config.run_caps.bytes_in_flight(Scope::Run),
                ),
                trace_budget: RunTraceBudget::new(config.run_caps.trace_bytes(Scope::Run)),
                secret_vars,
            }),
        };
        gateway.register();
        Ok(gateway)
    }

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

    /// The HTTP routes, for serving on any listener or calling in tests without a socket.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(openai_api::chat_completions))
            .route("/v1/responses", post(responses_api::responses))
            .route("/v1/embeddings", post(misc::embeddings))
            .route("/v1/models", get(misc::list_models))
            .route("/v1/models/{id}", get(misc::get_model))
            .route("/v1/messages", post(anthropic_api::messages))
            .route(
                "/v1/messages/count_tokens",
                post(anthropic_api::count_tokens),
            )
            .route("/", head(misc::root).get(misc::root))
            .fallback(misc::not_served)
            .layer(DefaultBodyLimit::max(self.inner.max_body_bytes))
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                limits::hold,
            ))
            .with_state(self.clone())
    }

    /// Registers a trial and returns its fresh random key. Its calls are traced to
    /// `<trace_dir>/model_calls.jsonl` (created if needed) and limited by `caps`.
    ///
    /// # Errors
    /// [`LlmError::Io`] when the trace file cannot be created.
    pub fn open_trial(
        &self,
        trial_id: &str,
        trace_dir: &Path,
        caps: Caps,
    ) -> Result<TrialKey, LlmError> {
        self.open_labeled_trial(trial_id, TrialLabels::default(), trace_dir, caps)
    }

    /// [`Gateway::open_trial`] for a trial whose calls' ledger rows carry `labels` (the
    /// candidate and task it is about).
    ///
    /// # Errors
    /// [`LlmError::Io`] when the trace file cannot be created.
    pub fn open_labeled_trial(
        &self,
        trial_id: &str,
        labels: TrialLabels,
        trace_dir: &Path,
        caps: Caps,
    ) -> Result<TrialKey, LlmError> {
        let mut bytes = [0u8; 24];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        let key = format!("hevo-{}", hex::encode(bytes));
        self.open_keyed_trial(trial_id, labels, trace_dir, caps, key)
    }

    /// [`Gateway::open_labeled_trial`] with a key the caller chose instead of a random one:
    /// a job that outlived a restarted hevo keeps calling with the key it was given, and
    /// that key must work again (see `hevo_runtime::model_access::KeySecret`).
    ///
    /// # Errors
    /// [`LlmError::Io`] when the trace file cannot be created, [`LlmError::KeyInUse`] when
    /// `key` is already an open trial's.
    pub fn open_keyed_trial(
        &self,
        trial_id: &str,
        labels: TrialLabels,
        trace_dir: &Path,
        caps: Caps,
        key: String,
    ) -> Result<TrialKey, LlmError> {
        std::fs::create_dir_all(trace_dir).map_err(|e| LlmError::io(trace_dir, e))?;
        let path = trace_dir.join("model_calls.jsonl");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| LlmError::io(&path, e))?;
        let trial = Arc::new(Trial {
            id: trial_id.to_owned(),
            labels,
            caps,
            state: Mutex::new(TrialState::default()),
            trace: Mutex::new(Some(TraceFile::new(file, caps.trace_bytes(Scope::Trial)))),
            budget: Budget::new(
                caps.concurrency(Scope::Trial),
                caps.bytes_in_flight(Scope::Trial),
            ),
            bound: std::sync::atomic::AtomicBool::new(false),
        });
        match self
            .inner
            .trials
            .write()
            .expect("trials lock")
            .entry(key.clone())
        {
            std::collections::hash_map::Entry::Occupied(_) => return Err(LlmError::KeyInUse),
            std::collections::hash_map::Entry::Vacant(slot) => slot.insert(trial),
        };
        Ok(TrialKey(key))
    }

    /// Expires `key` (later calls get 401), closes the trace file and returns the trial's
    /// totals. An unknown or already closed key gives empty totals.
    pub fn close_trial(&self, key: &TrialKey) -> TrialUsage {
        let Some(trial) = self
            .inner
            .trials
            .write()
            .expect("trials lock")
            .remove(&key.0)
        else {
            return TrialUsage::default();
        };
        if let Some(mut trace) = trial.trace.lock().expect("trace lock").take() {
            let _ = trace.flush();
        }
        let usage = trial.state.lock().expect("trial lock").usage;
        usage
    }

    /// The live totals of an open trial.
    pub fn trial_usage(&self, key: &TrialKey) -> Option<TrialUsage> {
        let trials = self.inner.trials.read().expect("trials lock");
        trials
            .get(&key.0)
            .map(|t| t.state.lock().expect("trial lock").usage)
    }

    /// Totals of every call of the run so far.
    pub fn run_usage(&self) -> TrialUsage {
        self.inner.run.lock().expect("run lock").usage
    }

    /// What the run's calls in flight have reserved against the run's caps.
    pub fn run_in_flight(&self) -> InFlight {
        self.inner.run.lock().expect("run lock").in_flight
    }

    /// The open trial `key` belongs to.
    fn trial_of(&self, key: &str) -> Option<Arc<Trial>> {
        self.inner
            .trials
            .read()
            .expect("trials lock")
            .get(key)
            .cloned()
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

    fn authenticate(&self, key: Option<&str>, dialect: Dialect) -> Result<Arc<Trial>, ApiError> {
        let Some(key) = key else {
            return Err(ApiError::new(
                dialect,
                ErrorKind::Authentication,
                "missing API key: send the trial key hevo put in OPENAI_API_KEY / \
                 ANTHROPIC_API_KEY",
            ));
        };
        let trials = self.inner.trials.read().expect("trials lock");
        trials.get(key).cloned().ok_or_else(|| {
            ApiError::new(
                dialect,
                ErrorKind::Authentication,
                "invalid API key: unknown or expired trial key (each key is valid only while \
                 its trial runs)",
            )
        })
    }

    fn route(&self, model: &str) -> Option<Arc<Route>> {
        self.inner.routes.get(model).cloned().or_else(|| {
            self.inner
                .default_model
                .as_ref()
                .and_then(|d| self.inner.routes.get(d).cloned())
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

    /// Stops accepting connections, lets calls in flight finish (at most `grace`), and
    /// returns.
    pub async fn shutdown_within(mut self, grace: Duration) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            let abort = server.abort_handle();
            if tokio::time::timeout(grace, server).await.is_err() {
                abort.abort();
            }
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

/// A server-sent-event response that streams the events sent into `rx` until its sender
/// is dropped (every dialect's streaming answer ends this way).
pub(crate) fn sse_of(
    rx: tokio::sync::mpsc::UnboundedReceiver<axum::response::sse::Event>,
) -> impl axum::response::IntoResponse {
    let events = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, std::convert::Infallible>(event), rx))
    });
    axum::response::sse::Sse::new(events)
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub(crate) fn random_id() -> String {
    let mut bytes = [0u8; 12];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}
