//! [`Call`]: one model call in flight, from authentication to its ledger row.
//!
//! A call's life: [`Gateway::begin`] (authenticate → parse JSON → trace request → route →
//! bound the call's tokens and cost) → [`Call::admit`] (reserve a slot and the bound against
//! the trial's and the run's caps, or 429) → answered by translation ([`Call::execute`],
//! cached when deterministic) or forwarded ([`super::forward`]) → [`Call::record_ok`] or
//! [`Call::fail`] (price, settle the reservation into the totals, ledger) → trace response.
//!
//! The work that waits for the upstream runs in a task that owns the call (`detach`), so a
//! caller that hangs up does not end it. A call dropped before it ends releases its
//! reservation. A call is live (counted in its trial and the run, see `live`) until it is
//! dropped; one still waiting for its upstream when its trial's close or the shutdown stops
//! waiting is cancelled ([`Call::unless_cancelled`]) and recorded with what it had received,
//! or with its estimated input when it had received no usage (`cancelled`).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::http::HeaderMap;
use serde_json::Value;

use super::limits::Held;
use super::live::Entered;
use super::{now_ms, ApiError, Dialect, ErrorKind, Gateway, Route, Trial};
use crate::backend::{Api, Backend, DeltaSender, Retries};
use crate::cache::ResponseCache;
use crate::error::BackendError;
use crate::ledger::{CallRecord, CallStatus, InFlight, TrialUsage};
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
    /// by [`Call::admit`] once the request is known to be well formed. The call keeps the
    /// slots and bytes `held` for its request until it ends.
    pub(crate) fn begin(
        &self,
        api: Api,
        headers: &HeaderMap,
        body: &[u8],
        held: Held,
    ) -> Result<(Call, Value), ApiError> {
        let dialect = Dialect::of(api);
        let started = Instant::now();
        let (trial, entered) = self.enter(api_key(headers), dialect)?;
        let seq = {
            let mut state = trial.state.lock().expect("trial lock");
            state.next_seq += 1;
            state.next_seq - 1
        };
        let raw = serde_json::from_slice::<Value>(body);
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
            bound: InFlight::one(body.len() as u64, 0.0),
            input_bound: input_bound(api, body.len() as u64),
            reserved: AtomicBool::new(false),
            _held: held,
            entered,
        };
        match &raw {
            Ok(value) => call.trace("request", None, value),
            Err(_) => call.trace(
                "request",
                None,
                &Value::String(String::from_utf8_lossy(body).into_owned()),
            ),
        }
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
        call.bound = self.bound(api, &route.upstream_model, call.input_bound, &raw);
        call.route = Some(route);
        Ok((call, raw))
    }

    /// The most a call may spend: its `input` bound ([`input_bound`]) at the dearest input
    /// price, plus its output limit (the request's, the larger of two; else the model's
    /// default), times `n` choices, at the output price.
    fn bound(&self, api: Api, model: &str, input: u64, raw: &Value) -> InFlight {
        let num = |name: &str| raw.get(name).and_then(Value::as_u64);
        let requested = match api {
            // Both limits set: a backend may honour either, so the larger one bounds it.
            Api::ChatCompletions => match (num("max_completion_tokens"), num("max_tokens")) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
            Api::Responses => num("max_output_tokens"),
            Api::Messages => num("max_tokens"),
            Api::Embeddings | Api::CountTokens => Some(0),
        };
        // Every one of `n` choices can reach the limit, the model's default one included.
        let answers = match api {
            Api::ChatCompletions => num("n").unwrap_or(1).max(1),
            _ => 1,
        };
        match self.inner.prices.get(model) {
            Some(price) => {
                let output = price.output_limit(requested).saturating_mul(answers);
                InFlight::one(
                    input.saturating_add(output),
                    price.max_cost(input, Some(output)),
                )
            }
            None => InFlight::one(input, 0.0),
        }
    }
}

/// The most input tokens a request of `api` with a body of `body_bytes` can be billed for:
/// every byte an uncached input token (a token is at least one byte of the text); none for
/// token counting, which is free.
fn input_bound(api: Api, body_bytes: u64) -> u64 {
    if api == Api::CountTokens {
        0
    } else {
        body_bytes
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
    /// What the call reserves against the caps when admitted.
    bound: InFlight,
    /// The input tokens in `bound` ([`input_bound`]).
    input_bound: u64,
    /// Holds a reservation (between [`Call::admit`] and the call's end).
    reserved: AtomicBool,
    /// The request's slots and bytes (see [`Held`]).
    _held: Held,
    /// Counts the call as live in its trial and in the run until it is dropped (declared
    /// last: dropped after everything else).
    entered: [Entered; 2],
}

impl Drop for Call {
    fn drop(&mut self) {
        self.release();
    }
}

impl Call {
    /// The API called.
    pub(crate) fn api(&self) -> Api {
        self.api
    }

    /// The dialect the caller is answered in.
    pub(crate) fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Runs `work` unless the call is cancelled first (its trial was closed, or the gateway
    /// shut down, and waiting for it took too long): `None` then.
    pub(crate) async fn unless_cancelled<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        let [in_trial, in_run] = &self.entered;
        tokio::select! {
            done = work => Some(done),
            () = in_trial.cancelled() => None,
            () = in_run.cancelled() => None,
        }
    }

    fn route(&self) -> &Route {
        self.route.as_ref().expect("begun calls are routed")
    }

    /// The backend that serves the call.
    pub(crate) fn backend(&self) -> &dyn Backend {
        self.route().backend.as_ref()
    }

    /// The most input tokens the call can be billed for ([`input_bound`]).
    pub(crate) fn input_bound(&self) -> u64 {
        self.input_bound
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

    /// `record` as the ledger keeps it: bounded ([`CallRecord::bounded`]) and with every
    /// provider key an upstream quoted replaced ([`Gateway::scrubbed`]).
    fn ledger_row(&self, record: &CallRecord) -> CallRecord {
        let mut row = record.bounded();
        let clean = |text: Option<String>| text.map(|t| self.gateway.scrubbed(&t).into_owned());
        row.error = clean(row.error);
        row.upstream_error = clean(row.upstream_error);
        row
    }

    /// An upstream's answer as the gateway passes it on: its provider keys replaced.
    pub(crate) fn scrubbed_bytes(&self, bytes: axum::body::Bytes) -> axum::body::Bytes {
        self.gateway.scrubbed_bytes(bytes)
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
            cache_write_tokens: 0,
            cache_write_1h_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            latency_ms: self.started.elapsed().as_secs_f64() * 1000.0,
            cache_hit: false,
            status,
            retries: 0,
            upstream_error: None,
            error,
        }
    }

    /// Gives the call's reservation back (once; later calls do nothing).
    fn release(&self) {
        if self.reserved.swap(false, Ordering::SeqCst) {
            let mut state = self.trial.state.lock().expect("trial lock");
            let mut run = self.gateway.inner.run.lock().expect("run lock");
            state.in_flight.remove(&self.bound);
            run.in_flight.remove(&self.bound);
        }
    }

    /// Records and traces a backend's failure (an infra fault unless the request was bad),
    /// with the retries it took; returns the error for the caller to send.
    pub(crate) fn fail_backend(&self, err: &BackendError) -> ApiError {
        let kind = if err.is_infra() {
            ErrorKind::Backend
        } else {
            ErrorKind::InvalidRequest
        };
        // An upstream's error text can quote the key it was sent.
        let message = self.gateway.scrubbed(&err.to_string()).into_owned();
        let api_error = ApiError::new(self.dialect, kind, message.clone());
        let status = match kind {
            ErrorKind::Backend => CallStatus::BackendError,
            _ => CallStatus::BadRequest,
        };
        let retries = Retries {
            count: err.retries(),
            last_error: Some(message),
        };
        self.record_failure_after(status, &api_error.message, &retries);
        self.trace(
            "response",
            Some(api_error.status().as_u16()),
            &api_error.body(),
        );
        api_error
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
        self.record_failure_after(status, message, &Retries::default());
    }

    /// [`Call::record_failure`] of a call that took `retries` upstream; releases its
    /// reservation.
    pub(crate) fn record_failure_after(
        &self,
        status: CallStatus,
        message: &str,
        retries: &Retries,
    ) {
        self.release();
        if status == CallStatus::BackendError {
            self.trial
                .state
                .lock()
                .expect("trial lock")
                .usage
                .backend_errors += 1;
        }
        let mut record = self.base_record(status, Some(message.to_owned()));
        record.retries = retries.count;
        record.upstream_error = retries.last_error.clone();
        self.gateway.inner.sink.record(&self.ledger_row(&record));
    }

    /// Reserves a slot and the call's maximum tokens and cost (the `bound` that
    /// [`Gateway::begin`] set) against the trial's and the run's caps, atomically; a call
    /// that cannot reserve gets 429 (and is in the ledger as `budget_exceeded`). The reservation is settled by [`Call::record_ok`],
    /// released by a failure or when the call is dropped.
    pub(crate) fn admit(&self) -> Result<(), ApiError> {
        let inner = &self.gateway.inner;
        let reason = {
            let mut state = self.trial.state.lock().expect("trial lock");
            let mut run = inner.run.lock().expect("run lock");
            let reason = match self.trial.caps.refusal(&state.usage, &state.in_flight) {
                Some(reason) => Some(format!("trial `{}` {reason}", self.trial.id)),
                None => inner
                    .run_caps
                    .refusal(&run.usage, &run.in_flight)
                    .map(|reason| format!("run {reason}")),
            };
            match reason {
                None => {
                    state.in_flight.add(&self.bound);
                    run.in_flight.add(&self.bound);
                    self.reserved.store(true, Ordering::SeqCst);
                }
                Some(_) => state.usage.budget_exceeded = true,
            }
            reason
        };
        match reason {
            None => Ok(()),
            Some(reason) => Err(self.fail(ApiError::new(
                self.dialect,
                ErrorKind::BudgetExceeded,
                format!("budget exceeded: {reason}; hevo refuses further model calls"),
            ))),
        }
    }

    /// Prices an answered call by `usage`, adds it to the trial's and run's totals and writes
    /// its ledger row.
    pub(crate) fn record_ok(&self, usage: Usage, cache_hit: bool, retries: &Retries) {
        self.settle(CallStatus::Ok, usage, cache_hit, retries, None);
    }

    /// Records a call that failed after the upstream had started answering (a stream that
    /// broke off, ended in an error event or without its end, or was cancelled) as a backend
    /// error, priced by the usage it had reported: its tokens and dollars count in the totals
    /// (and against the caps) although it is not an answered call.
    pub(crate) fn record_spent_failure(&self, usage: Usage, message: &str, retries: &Retries) {
        let error = Some(message.to_owned());
        self.settle(CallStatus::BackendError, usage, false, retries, error);
    }

    /// Prices the call by `usage`, replaces its reservation by that in the trial's and run's
    /// totals and writes its ledger row.
    fn settle(
        &self,
        status: CallStatus,
        usage: Usage,
        cache_hit: bool,
        retries: &Retries,
        error: Option<String>,
    ) {
        let inner = &self.gateway.inner;
        let cost = inner
            .prices
            .cost(self.upstream_model(), &usage)
            .unwrap_or(0.0);
        let mut record = self.base_record(status, error);
        record.input_tokens = usage.uncached_tokens();
        record.cached_tokens = usage.cached_tokens;
        record.cache_write_tokens = usage.cache_write_tokens;
        record.cache_write_1h_tokens = usage.cache_write_1h_tokens;
        record.output_tokens = usage.output_tokens;
        record.cost_usd = cost;
        record.cache_hit = cache_hit;
        record.retries = retries.count;
        record.upstream_error = retries.last_error.clone();
        {
            let mut state = self.trial.state.lock().expect("trial lock");
            let mut run = inner.run.lock().expect("run lock");
            if self.reserved.swap(false, Ordering::SeqCst) {
                state.in_flight.remove(&self.bound);
                run.in_flight.remove(&self.bound);
            }
            if status == CallStatus::Ok {
                run.usage.add(&record);
                state.usage.add(&record);
            } else {
                add_spend(&mut run.usage, &record);
                add_spend(&mut state.usage, &record);
                state.usage.backend_errors += 1;
            }
            if inner.run_caps.exceeded(&run.usage) || self.trial.caps.exceeded(&state.usage) {
                state.usage.budget_exceeded = true;
            }
        }
        inner.sink.record(&self.ledger_row(&record));
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
        request.caller = self.trial.id.clone();
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
            Some(response) => (response, true, Retries::default()),
            None => match self
                .unless_cancelled(route.backend.complete(request, deltas))
                .await
            {
                Some(Ok(completion)) => (completion.response, false, completion.retries),
                Some(Err(err)) => return Err(self.fail_backend(&err)),
                None => return Err(self.cancelled()),
            },
        };
        self.record_ok(response.usage, cache_hit, &retries);
        if let (Some(cache), Some(key), false) = (&inner.cache, &cache_key, cache_hit) {
            if let Err(err) = cache.put(key, &response) {
                tracing::warn!(%err, "response cache write failed");
            }
        }
        Ok((response, cache_hit))
    }

    /// Appends one line to the trial's trace.
    pub(crate) fn trace(&self, kind: &str, status: Option<u16>, body: &Value) {
        let line = super::TraceLine {
            seq: self.seq,
            ts_ms: now_ms(),
            kind,
            api: self.dialect.as_str(),
            endpoint: self.api.as_str(),
            status,
            body,
        };
        self.trial
            .write_trace(&line, &self.gateway.inner.trace_budget);
    }
}

/// Adds a failed call's tokens and dollars to `usage` (it is not an answered call).
fn add_spend(usage: &mut TrialUsage, record: &CallRecord) {
    usage.input_tokens += record.input_tokens;
    usage.cached_tokens += record.cached_tokens;
    usage.output_tokens += record.output_tokens;
    usage.cost_usd += record.cost_usd;
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

impl Gateway {
    /// Refuses a request of `api` with `err` before its body was read (it is larger than
    /// the body limit): authenticated, traced and in the ledger as `bad_request` like any
    /// refused call, with no model (none was read).
    pub(crate) fn refuse_unread(
        &self,
        api: Api,
        headers: &HeaderMap,
        err: ApiError,
        held: Held,
    ) -> ApiError {
        let (trial, entered) = match self.enter(api_key(headers), err.dialect) {
            Ok(entered) => entered,
            Err(unknown_key) => return unknown_key,
        };
        let seq = {
            let mut state = trial.state.lock().expect("trial lock");
            state.next_seq += 1;
            state.next_seq - 1
        };
        let call = Call {
            gateway: self.clone(),
            trial,
            seq,
            api,
            dialect: err.dialect,
            started: Instant::now(),
            started_at_ms: now_ms(),
            requested_model: String::new(),
            route: None,
            bound: InFlight::one(0, 0.0),
            input_bound: 0,
            reserved: AtomicBool::new(false),
            _held: held,
            entered,
        };
        call.trace("request", None, &Value::String("(body not read)".into()));
        call.fail(err)
    }
}
