//! [`Call`]: one model call in flight, from authentication to its ledger row.
//!
//! A call's life: [`Gateway::begin`] (authenticate → trace request → parse JSON → route) →
//! [`Call::admit`] (caps) → answered by translation ([`Call::execute`], cached when
//! deterministic) or forwarded ([`super::forward`]) → [`Call::record_ok`] or [`Call::fail`]
//! (price, totals, ledger) → trace response.

use std::sync::Arc;
use std::time::Instant;

use axum::http::HeaderMap;
use serde_json::{json, Value};

use super::{now_ms, ApiError, Dialect, ErrorKind, Gateway, Route, Trial};
use crate::backend::{Api, Backend, DeltaSender};
use crate::cache::ResponseCache;
use crate::ledger::{CallRecord, CallStatus};
use crate::types::{ChatRequest, ChatResponse, Usage};

/// Why a request cannot be translated into a [`ChatRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The request is wrong in itself (a 400 whoever answers).
    Invalid(String),
    /// The request is fine but uses something the translation cannot carry exactly: an
    /// upstream of the same API gets it forwarded unchanged; any other backend answers 400.
    Unsupported(String),
}

/// The trial key from `x-api-key` or `Authorization: Bearer KEY`.
pub(crate) fn api_key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| {
                    v.strip_prefix("Bearer ")
                        .or_else(|| v.strip_prefix("bearer "))
                })
        })
        .map(str::trim)
}

impl Gateway {
    /// Authenticates, traces, parses the JSON body and routes its `model`. Caps are checked
    /// by [`Call::admit`] once the request is known to be well formed.
    pub(crate) fn begin(
        &self,
        api: Api,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(Call, Value), ApiError> {
        let dialect = Dialect::of(api);
        let started = Instant::now();
        let trial = self.authenticate(api_key(headers), dialect)?;
        let seq = {
            let mut state = trial.state.lock().expect("trial lock");
            state.next_seq += 1;
            state.next_seq - 1
        };
        let raw = serde_json::from_slice::<Value>(body);
        let traced = match &raw {
            Ok(value) => value.clone(),
            Err(_) => Value::String(String::from_utf8_lossy(body).into_owned()),
        };
        let mut call = Call {
            gateway: self.clone(),
            trial,
            seq,
            api,
            dialect,
            started,
            started_at_ms: now_ms(),
            requested_model: String::new(),
            route: None,
        };
        call.trace("request", None, &traced);
        let raw = raw.map_err(|e| {
            call.fail(ApiError::new(
                dialect,
                ErrorKind::InvalidRequest,
                format!("request body is not valid JSON: {e}"),
            ))
        })?;
        let Some(model) = raw.get("model").and_then(Value::as_str) else {
            return Err(call.fail(ApiError::new(
                dialect,
                ErrorKind::InvalidRequest,
                "model: a string `model` is required",
            )));
        };
        call.requested_model = model.to_owned();
        let route = self.route(model).ok_or_else(|| {
            call.fail(ApiError::new(
                dialect,
                ErrorKind::NotFound,
                format!(
                    "model `{model}` is not served by this gateway; available: {}",
                    self.inner.route_names.join(", ")
                ),
            ))
        })?;
        call.route = Some(route);
        Ok((call, raw))
    }
}

/// One call in flight, after [`Gateway::begin`].
pub(crate) struct Call {
    gateway: Gateway,
    trial: Arc<Trial>,
    seq: u64,
    api: Api,
    dialect: Dialect,
    started: Instant,
    started_at_ms: u64,
    requested_model: String,
    route: Option<Arc<Route>>,
}

impl Call {
    /// The API called.
    pub(crate) fn api(&self) -> Api {
        self.api
    }

    /// The error format of this call.
    pub(crate) fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn route(&self) -> &Route {
        self.route.as_ref().expect("begun calls are routed")
    }

    /// The backend that serves the call.
    pub(crate) fn backend(&self) -> &dyn Backend {
        self.route().backend.as_ref()
    }

    /// The model name the backend is sent (and priced by).
    pub(crate) fn upstream_model(&self) -> &str {
        &self.route().upstream_model
    }

    /// A 400 for a request the translation cannot carry and this backend cannot forward.
    pub(crate) fn unsupported(&self, message: &str) -> ApiError {
        let hint = if self.api.is_openai() {
            "an `openai` backend"
        } else {
            "an `anthropic` backend"
        };
        self.fail(ApiError::new(
            self.dialect,
            ErrorKind::InvalidRequest,
            format!(
                "{message}: model `{}` is served by backend `{}`, which cannot carry it (route \
                 the model to {hint} to have such requests forwarded unchanged)",
                self.requested_model,
                self.backend().name()
            ),
        ))
    }

    /// Turns a translation [`Refusal`] into the 400 this backend answers.
    pub(crate) fn refuse(&self, refusal: Refusal) -> ApiError {
        match refusal {
            Refusal::Invalid(message) => self.fail(ApiError::new(
                self.dialect,
                ErrorKind::InvalidRequest,
                message,
            )),
            Refusal::Unsupported(message) => self.unsupported(&message),
        }
    }

    fn base_record(&self, status: CallStatus, error: Option<String>) -> CallRecord {
        CallRecord {
            trial_id: self.trial.id.clone(),
            candidate_id: self.trial.labels.candidate_id.clone(),
            task_id: self.trial.labels.task_id.clone(),
            endpoint: self.api.as_str().to_owned(),
            seq: self.seq,
            started_at_ms: self.started_at_ms,
            model: match &self.route {
                Some(route) => route.upstream_model.clone(),
                None => self.requested_model.clone(),
            },
            input_tokens: 0,
            cached_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            latency_ms: self.started.elapsed().as_secs_f64() * 1000.0,
            cache_hit: false,
            status,
            retries: 0,
            error,
        }
    }

    /// Records and traces a failed call; returns the error for the caller to send.
    pub(crate) fn fail(&self, err: ApiError) -> ApiError {
        let status = match err.kind {
            ErrorKind::BudgetExceeded => CallStatus::BudgetExceeded,
            ErrorKind::Backend => CallStatus::BackendError,
            _ => CallStatus::BadRequest,
        };
        self.record_failure(status, &err.message);
        self.trace("response", Some(err.status().as_u16()), &err.body());
        err
    }

    /// Records a failed call whose answer is sent by the caller (an upstream's own error).
    pub(crate) fn record_failure(&self, status: CallStatus, message: &str) {
        if status == CallStatus::BackendError {
            self.trial
                .state
                .lock()
                .expect("trial lock")
                .usage
                .backend_errors += 1;
        }
        self.gateway
            .inner
            .sink
            .record(&self.base_record(status, Some(message.to_owned())));
    }

    /// Checks the trial's and the run's caps; a call over one gets 429.
    pub(crate) fn admit(&self) -> Result<(), ApiError> {
        let inner = &self.gateway.inner;
        let trial_usage = self.trial.state.lock().expect("trial lock").usage;
        let reason = match self.trial.caps.reached(&trial_usage) {
            Some(reason) => Some(format!("trial `{}` {reason}", self.trial.id)),
            None => {
                let run_usage = *inner.run.lock().expect("run lock");
                inner
                    .run_caps
                    .reached(&run_usage)
                    .map(|reason| format!("run {reason}"))
            }
        };
        match reason {
            None => Ok(()),
            Some(reason) => {
                self.trial
                    .state
                    .lock()
                    .expect("trial lock")
                    .usage
                    .budget_exceeded = true;
                Err(self.fail(ApiError::new(
                    self.dialect,
                    ErrorKind::BudgetExceeded,
                    format!("budget exceeded: {reason}; hevo refuses further model calls"),
                )))
            }
        }
    }

    /// Prices an answered call by `usage`, adds it to the trial's and run's totals and writes
    /// its ledger row.
    pub(crate) fn record_ok(&self, usage: Usage, cache_hit: bool, retries: u32) {
        let inner = &self.gateway.inner;
        let cost = inner
            .prices
            .cost(self.upstream_model(), &usage)
            .unwrap_or(0.0);
        let mut record = self.base_record(CallStatus::Ok, None);
        record.input_tokens = usage.uncached_tokens();
        record.cached_tokens = usage.cached_tokens;
        record.output_tokens = usage.output_tokens;
        record.cost_usd = cost;
        record.cache_hit = cache_hit;
        record.retries = retries;
        let run_exceeded = {
            let mut run = inner.run.lock().expect("run lock");
            run.add(&record);
            inner.run_caps.exceeded(&run)
        };
        {
            let mut state = self.trial.state.lock().expect("trial lock");
            state.usage.add(&record);
            if run_exceeded || self.trial.caps.exceeded(&state.usage) {
                state.usage.budget_exceeded = true;
            }
        }
        inner.sink.record(&record);
    }

    /// Answers a translated request from the cache or the backend, then prices, counts and
    /// records it.
    pub(crate) async fn execute(
        &self,
        mut request: ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> Result<(ChatResponse, bool), ApiError> {
        let inner = &self.gateway.inner;
        let route = self.route();
        request.model = route.upstream_model.clone();
        let cache_key = match &inner.cache {
            Some(_) if request.is_deterministic() => Some(ResponseCache::key(
                &route.backend.cache_identity(),
                &request,
            )),
            _ => None,
        };
        let cached = match (&inner.cache, &cache_key) {
            (Some(cache), Some(key)) => cache.get(key),
            _ => None,
        };
        let (response, cache_hit, retries) = match cached {
            Some(response) => (response, true, 0),
            None => match route.backend.complete(request, deltas).await {
                Ok(completion) => (completion.response, false, completion.retries),
                Err(err) => {
                    let kind = if err.is_infra() {
                        ErrorKind::Backend
                    } else {
                        ErrorKind::InvalidRequest
                    };
                    return Err(self.fail(ApiError::new(self.dialect, kind, err.to_string())));
                }
            },
        };
        self.record_ok(response.usage, cache_hit, retries);
        if let (Some(cache), Some(key), false) = (&inner.cache, &cache_key, cache_hit) {
            if let Err(err) = cache.put(key, &response) {
                tracing::warn!(%err, "response cache write failed");
            }
        }
        Ok((response, cache_hit))
    }

    /// Appends one line to the trial's trace.
    pub(crate) fn trace(&self, kind: &str, status: Option<u16>, body: &Value) {
        let mut line = json!({
            "seq": self.seq,
            "ts_ms": now_ms(),
            "type": kind,
            "api": self.dialect.as_str(),
            "endpoint": self.api.as_str(),
        });
        if let Some(status) = status {
            line["status"] = json!(status);
        }
        line["body"] = body.clone();
        self.trial.write_trace(&line);
    }
}

/// Runs `call.execute` while forwarding the backend's text deltas to `on_delta`; returns the
/// result and whether any delta was forwarded.
pub(crate) async fn execute_streaming(
    call: &Call,
    request: ChatRequest,
    mut on_delta: impl FnMut(String),
) -> (Result<(ChatResponse, bool), ApiError>, bool) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let fut = call.execute(request, Some(tx));
    tokio::pin!(fut);
    let mut streamed = false;
    let result = loop {
        tokio::select! {
            Some(delta) = rx.recv() => {
                streamed = true;
                on_delta(delta);
            }
            result = &mut fut => break result,
        }
    };
    while let Ok(delta) = rx.try_recv() {
        streamed = true;
        on_delta(delta);
    }
    (result, streamed)
}
