//! Retries with exponential backoff for upstream HTTP calls (429, 5xx, network errors,
//! timeouts), honouring a sane `Retry-After`.

use std::time::Duration;

use serde_json::Value;

use crate::error::{upstream_status_is_infra, BackendError};

/// How often and how patiently an upstream call is retried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Wait before the first retry; doubled each time.
    pub initial_backoff: Duration,
    /// Longest wait between attempts (also caps a `Retry-After` header).
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self.initial_backoff.saturating_mul(1u32 << attempt.min(16));
        retry_after.unwrap_or(exp).min(self.max_backoff)
    }
}

/// Sends the request built by `build` until it succeeds, fails in a way another attempt would
/// not mend ([`BackendError::is_retried`]), or retries run out. Returns the JSON body and the
/// [`Retries`].
pub(crate) async fn send_json(
    policy: &RetryPolicy,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> Result<(Value, Retries), BackendError> {
    let mut attempt = 0;
    let mut last_error = None;
    loop {
        let (err, wait) = match build().send().await {
            Err(err) => (BackendError::http(&err), None),
            Ok(response) => {
                let status = response.status();
                let wait = retry_after(&response, policy.max_backoff);
                match super::body::read_body(response).await {
                    Err(err) => (err, None),
                    Ok(body) if status.is_success() => {
                        let value = serde_json::from_slice(&body).map_err(|err| {
                            BackendError::Transport(format!("upstream sent invalid JSON: {err}"))
                        })?;
                        let retries = Retries {
                            count: attempt,
                            last_error,
                        };
                        return Ok((value, retries));
                    }
                    Ok(body) => (upstream_error(status.as_u16(), &body), wait),
                }
            }
        };
        if !err.is_retried() || attempt >= policy.max_retries {
            return Err(exhausted(err, attempt));
        }
        last_error = Some(err.to_string());
        tokio::time::sleep(policy.backoff(attempt, wait)).await;
        attempt += 1;
    }
}

/// Sends the request built by `build` until the upstream answers with a status that is not an
/// infrastructure fault (success, or the request's own 4xx, which the caller gets as it is),
/// fails in a way another attempt would not mend, or retries run out. Returns the response,
/// body unread (so a stream can be passed on), and the [`Retries`].
pub(crate) async fn send_raw(
    policy: &RetryPolicy,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> Result<(reqwest::Response, Retries), BackendError> {
    let mut attempt = 0;
    let mut last_error = None;
    loop {
        let (err, wait) = match build().send().await {
            Err(err) => (BackendError::http(&err), None),
            Ok(response) => {
                let status = response.status().as_u16();
                if !upstream_status_is_infra(status) {
                    let retries = Retries {
                        count: attempt,
                        last_error,
                    };
                    return Ok((response, retries));
                }
                let wait = retry_after(&response, policy.max_backoff);
                let body = super::body::read_body(response).await.unwrap_or_default();
                (upstream_error(status, &body), wait)
            }
        };
        if !err.is_retried() || attempt >= policy.max_retries {
            return Err(exhausted(err, attempt));
        }
        last_error = Some(err.to_string());
        tokio::time::sleep(policy.backoff(attempt, wait)).await;
        attempt += 1;
    }
}

/// What retrying cost one call: how many attempts failed first, and the last such failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retries {
    /// Failed attempts (429, 5xx, network, timeout) before the last one.
    pub count: u32,
    /// The last of them, e.g. `upstream returned HTTP 503: overloaded`.
    pub last_error: Option<String>,
}

/// The final failure, wrapped with its retry count when there were retries.
fn exhausted(err: BackendError, retries: u32) -> BackendError {
    if retries == 0 {
        err
    } else {
        BackendError::Exhausted {
            retries,
            last: Box::new(err),
        }
    }
}

/// The wait a response's `Retry-After` header asks for, at most `cap` ([`seconds_to_wait`]).
fn retry_after(response: &reqwest::Response, cap: Duration) -> Option<Duration> {
    response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| seconds_to_wait(v, cap))
}

/// The wait a `Retry-After` value in seconds asks for, at most `cap`. Only a finite number
/// of seconds, 0 or more, counts: anything else (negative, `NaN`, `inf`, an HTTP date, text)
/// is ignored, and the policy's own backoff applies.
fn seconds_to_wait(value: &str, cap: Duration) -> Option<Duration> {
    let secs = value.trim().parse::<f64>().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(secs.min(cap.as_secs_f64())).ok()
}

/// The failure an upstream's error answer (`status`, `body`) stands for. A refused key
/// (401, 403) says so: it is hevo's configuration, not the harness's request.
fn upstream_error(status: u16, body: &[u8]) -> BackendError {
    let mut message = error_message(body);
    if matches!(status, 401 | 403) {
        message.push_str(
            " (the provider refused the key or account of hevo's backend; check the \
             backend's api_key_env)",
        );
    }
    BackendError::Upstream { status, message }
}

/// The `error.message` of a provider error body, or the body itself.
fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| text.chars().take(500).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_keeps_only_finite_waits_of_zero_or_more_and_caps_them() {
        let cap = Duration::from_secs(30);
        assert_eq!(seconds_to_wait("2", cap), Some(Duration::from_secs(2)));
        assert_eq!(
            seconds_to_wait(" 0.5 ", cap),
            Some(Duration::from_millis(500))
        );
        assert_eq!(seconds_to_wait("0", cap), Some(Duration::ZERO));
        assert_eq!(seconds_to_wait("-0", cap), Some(Duration::ZERO));
        assert_eq!(seconds_to_wait("1e30", cap), Some(cap));
        assert_eq!(seconds_to_wait("1e400", cap), None, "parses as infinity");
        for ignored in ["-1", "-0.001", "NaN", "nan", "inf", "-inf", "soon", ""] {
            assert_eq!(seconds_to_wait(ignored, cap), None, "{ignored:?}");
        }
        assert_eq!(
            seconds_to_wait("Wed, 21 Oct 2015 07:28:00 GMT", cap),
            None,
            "an HTTP date is not a number of seconds"
        );
    }

    #[test]
    fn the_backoff_is_capped_whatever_the_header_asks() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.backoff(0, seconds_to_wait("1e30", policy.max_backoff)),
            policy.max_backoff
        );
        assert_eq!(policy.backoff(0, None), policy.initial_backoff);
        assert_eq!(policy.backoff(40, None), policy.max_backoff);
    }
}
