//! The gateway: an OpenAI- and Anthropic-compatible HTTP server on loopback through which every
//! model call of a run passes.
//!
//! Each trial gets its own key ([`Gateway::open_trial`]); a call waits for a slot and for
//! its body's bytes (`limits`), is attributed by its key, reserves its maximum cost against
//! the trial's and the run's caps (`call`), is answered from the response cache or a
//! backend, priced, written to the trial's capped trace (`trace`) and handed to the
//! [`LedgerSink`]. A sandboxed trial's key is bound to its sandbox's socket (`bound`).
//! Every call is counted as live in its trial and in the gateway until it has been recorded
//! (`live`). Closing a trial expires its key, waits for its live calls and returns its
//! totals; the gateway's shutdown waits for all of them.
//!
//! Routes ([`SERVED`]): OpenAI's chat completions, Responses, embeddings and models;
//! Anthropic's messages and token counting; `HEAD /` and `GET /`. Any other path gets a 404
//! whose body lists them.
//!
//! A request is answered one of two ways. A backend that speaks the request's API gets it
//! forwarded unchanged ([`forward`]: body, protocol headers and query; only `model` is
//! mapped), whatever it asks for; a plain deterministic one is still answered from, and its
//! answer stored in, the response cache under its translation (`same_api`). Any other
//! backend (the embedded model, a backend of the other provider) answers the request's
//! translation into a provider-neutral [`ChatRequest`] when that carries it exactly (plain
//! chat), deterministic answers cached, and otherwise answers 400 saying what it cannot
//! carry. See docs/models.md.

mod anthropic_api;
mod bound;
mod call;
mod cancelled;
mod config;
mod connections;
mod detach;
mod ending;
mod error;
mod forward;
mod intake;
mod limits;
mod listen;
mod live;
mod misc;
mod openai_api;
mod responses_api;
mod routes;
mod same_api;
mod scrub;
mod server;
mod sse;
mod stamp;
mod trace;
mod translate;
mod trials;
pub(crate) mod usage;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::backend::Backend;
use crate::cache::ResponseCache;
use crate::ledger::{Caps, InFlight, LedgerSink, TrialLabels, TrialUsage};
use crate::price::PriceTable;
#[cfg(doc)]
use crate::types::ChatRequest;
use limits::Budget;
use live::Live;
use trace::{RunTraceBudget, TraceFile, TraceLine};

pub use bound::BoundSocket;
pub(crate) use call::{Call, Refusal};
pub use config::{GatewayConfig, ModelRoute};
pub use connections::TRIAL_CONNECTIONS;
pub(crate) use error::{ApiError, Dialect, ErrorKind};
pub use listen::{check_advertise, Listen};
pub use routes::SERVED;
pub(crate) use sse::sse_of;
pub(crate) use stamp::{now_ms, random_id};
pub use translate::translate_request;

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
    /// Keys refused on its sandbox's socket, or its own key refused over TCP: only the
    /// first is logged ([`Gateway::check_binding`]).
    refusals: std::sync::atomic::AtomicU64,
    /// Its calls not ended yet ([`Gateway::close_trial`] waits for them).
    live: Live,
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
    drain_timeout: std::time::Duration,
    body_idle_timeout: std::time::Duration,
    sink: Arc<dyn LedgerSink>,
    /// Every call not ended yet (the shutdown waits for them).
    live: Live,
    trials: RwLock<HashMap<String, Arc<Trial>>>,
    run: Mutex<RunState>,
    budget: Budget,
    trace_budget: RunTraceBudget,
    secret_vars: Vec<String>,
    /// The provider keys those variables held when the gateway started: replaced in every
    /// text an upstream sent that hevo passes on, stores or traces ([`Gateway::scrubbed`]).
    secrets: Vec<String>,
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
