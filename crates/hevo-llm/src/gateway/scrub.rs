//! Provider keys out of what an upstream says: an upstream's error can quote the key it was
//! sent (an OpenAI-compatible server echoing `Authorization: Bearer ...` in a 401), and the
//! gateway passes upstream errors on to the harness, writes them to the ledger and traces
//! them. Every such text has each provider key hevo holds replaced by [`REDACTED`] first.

use std::borrow::Cow;

use super::Gateway;

/// What a provider key is replaced with.
pub const REDACTED: &str = "[provider key]";

/// The shortest value treated as a key: a variable holding `1` would otherwise make every
/// `1` in an answer vanish.
const MIN_KEY_CHARS: usize = 8;

/// The values of the provider key variables `vars` in this environment (set, long enough).
pub(super) fn secrets_of(vars: &[String]) -> Vec<String> {
    vars.iter()
        .filter_map(|var| crate::provider_keys::var(var))
        .map(|v| v.trim().to_owned())
        .filter(|v| v.chars().count() >= MIN_KEY_CHARS)
        .collect()
}

impl Gateway {
    /// `text` with every provider key replaced by [`REDACTED`].
    pub(crate) fn scrubbed<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.inner.secrets {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }

    /// [`Gateway::scrubbed`] for a body's bytes (an upstream's answer passed on as it came).
    pub(crate) fn scrubbed_bytes(&self, bytes: axum::body::Bytes) -> axum::body::Bytes {
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return bytes;
        };
        match self.scrubbed(text) {
            Cow::Borrowed(_) => bytes,
            Cow::Owned(clean) => axum::body::Bytes::from(clean),
        }
    }
}
