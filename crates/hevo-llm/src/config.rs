//! The model layer's part of `hevo.toml`: backends, model routes, prices, caps and the cache,
//! as typed, strictly parsed tables, and how they become a running [`Gateway`].
//!
//! ```toml
//! [[backends]]
//! name = "local"
//! kind = "local"                # model_path defaults to the pulled SmolLM2
//! threads = 1                   # per worker
//! parallel = 2                  # workers, each answering one request at a time
//!
//! [[backends]]
//! name = "openai"
//! kind = "openai"
//! base_url = "https://api.openai.com/v1"
//! api_key_env = "OPENAI_API_KEY"
//! # max_tokens_field = "max_completion_tokens"   # default by host, see MaxTokensField
//!
//! [[models]]
//! name = "smollm2"              # what harnesses put in `model`
//! backend = "local"
//! upstream_model = "smollm2-135m-instruct"
//!
//! [prices."gpt-4o-mini"]
//! input = 0.15
//! cached_input = 0.075
//! output = 0.60
//!
//! [caps.trial]
//! max_cost_usd = 0.05
//! [caps.run]
//! max_cost_usd = 20.0
//! ```
//!
//! [`Gateway`]: crate::Gateway

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::backend::{
    AnthropicBackend, AnthropicConfig, Backend, LocalBackend, LocalConfig, MaxTokensField,
    OpenAiBackend, OpenAiConfig, RetryPolicy,
};
use crate::error::LlmError;
use crate::gateway::{GatewayConfig, ModelRoute};
use crate::ledger::Caps;
use crate::model_file;
use crate::price::{ModelPrice, PriceTable};

/// The kind of a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// An OpenAI-compatible HTTP endpoint.
    Openai,
    /// Anthropic's Messages API.
    Anthropic,
    /// The embedded GGUF model.
    Local,
}

/// One `[[backends]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSpec {
    /// The name routes refer to.
    pub name: String,
    /// What kind of backend.
    pub kind: BackendKind,
    /// Base URL (`openai`: up to `/v1`; `anthropic`: without `/v1`). Defaults to the
    /// provider's public API.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Environment variable holding the API key (`openai`: optional; `anthropic`: defaults
    /// to `ANTHROPIC_API_KEY`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Retries on 429/5xx/network errors (default 4).
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// The longest the upstream may stay silent, in seconds: to accept the connection, to
    /// start its answer, and between two pieces of it (default 600). A stream that keeps
    /// sending is never cut. A number above 0 and at most [`MAX_TIMEOUT_S`].
    #[serde(default, deserialize_with = "timeout_seconds")]
    pub timeout_s: Option<f64>,
    /// `openai`: the field a request translated into a chat completion (an Anthropic message)
    /// carries its output limit in, `"max_tokens"` or `"max_completion_tokens"` (default: the
    /// latter for `api.openai.com` and `*.openai.azure.com`, the former elsewhere; see
    /// [`MaxTokensField`]).
    #[serde(default)]
    pub max_tokens_field: Option<MaxTokensField>,
    /// `local`: the GGUF file (default: the pulled SmolLM2 under `HEVO_HOME`).
    #[serde(default)]
    pub model_path: Option<PathBuf>,
    /// `local`: CPU threads of each worker (default half the cores, 1 to 4).
    #[serde(default)]
    pub threads: Option<u32>,
    /// `local`: workers, each with its own context, answering requests at once (default: as
    /// many as the cores hold at `threads` each).
    #[serde(default)]
    pub parallel: Option<u32>,
    /// `local`: context length in tokens (default 4096).
    #[serde(default)]
    pub context_size: Option<u32>,
}

impl BackendSpec {
    /// The environment variable that holds this backend's API key: `api_key_env`, else
    /// `ANTHROPIC_API_KEY` for an `anthropic` backend; none for the others.
    pub fn key_var(&self) -> Option<&str> {
        match (self.kind, self.api_key_env.as_deref()) {
            (_, Some(var)) => Some(var),
            (BackendKind::Anthropic, None) => Some("ANTHROPIC_API_KEY"),
            _ => None,
        }
    }
}

/// The longest `timeout_s` accepted: 7 days, hevo's bound on every duration a user writes.
pub const MAX_TIMEOUT_S: f64 = 7.0 * 24.0 * 3600.0;

/// The default `timeout_s`.
const DEFAULT_TIMEOUT_S: f64 = 600.0;

/// Reads `timeout_s`, refusing what is not a number of seconds above 0 and at most
/// [`MAX_TIMEOUT_S`] (`inf`, `nan`, 0, negative numbers), so the error names the file, the
/// line and the key instead of a panic when the backend is built.
fn timeout_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let secs = f64::deserialize(d)?;
    if secs.is_finite() && secs > 0.0 && secs <= MAX_TIMEOUT_S {
        Ok(Some(secs))
    } else {
        Err(serde::de::Error::custom(format!(
            "timeout_s = {secs} is not a number of seconds above 0 and at most {MAX_TIMEOUT_S} \
             (7 days); give the longest the upstream may stay silent, e.g. timeout_s = 600"
        )))
    }
}

/// `[caps]`: per-trial and per-run limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapsSpec {
    /// Limits of each trial.
    #[serde(default)]
    pub trial: Caps,
    /// Limits of the whole run.
    #[serde(default)]
    pub run: Caps,
}

/// The model layer's configuration.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelLayerConfig {
    /// Backends.
    #[serde(default)]
    pub backends: Vec<BackendSpec>,
    /// Model routes.
    #[serde(default)]
    pub models: Vec<RouteSpec>,
    /// Route for model names without a route (e.g. an SDK's default model).
    #[serde(default)]
    pub default_model: Option<String>,
    /// Price overrides, by model name.
    #[serde(default)]
    pub prices: BTreeMap<String, ModelPrice>,
    /// Caps.
    #[serde(default)]
    pub caps: CapsSpec,
    /// Response cache directory (default `$HEVO_HOME/cache/responses`).
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Turn the response cache off.
    #[serde(default)]
    pub no_cache: bool,
}

/// One `[[models]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// The name harnesses use.
    pub name: String,
    /// The backend serving it.
    pub backend: String,
    /// The backend's model name (default: `name`).
    #[serde(default)]
    pub upstream_model: Option<String>,
}

impl ModelLayerConfig {
    /// The local SmolLM2 model as the only backend, served as `smollm2` and as the default.
    pub fn local_default() -> Self {
        Self {
            backends: vec![BackendSpec {
                name: "local".into(),
                kind: BackendKind::Local,
                base_url: None,
                api_key_env: None,
                max_retries: None,
                timeout_s: None,
                max_tokens_field: None,
                model_path: None,
                threads: None,
                parallel: None,
                context_size: None,
            }],
            models: vec![RouteSpec {
                name: "smollm2".into(),
                backend: "local".into(),
                upstream_model: Some(model_file::DEFAULT_MODEL_NAME.into()),
            }],
            default_model: Some("smollm2".into()),
            ..Self::default()
        }
    }

    /// Builds every backend (reads key variables, loads the local model).
    ///
    /// # Errors
    /// [`LlmError::BackendConfig`] for a missing key variable, [`LlmError::LocalModel`] when
    /// the GGUF is missing or does not load.
    pub fn build_backends(&self) -> Result<Vec<Arc<dyn Backend>>, LlmError> {
        let mut out: Vec<Arc<dyn Backend>> = Vec::new();
        for spec in &self.backends {
            let mut retry = RetryPolicy::default();
            if let Some(n) = spec.max_retries {
                retry.max_retries = n;
            }
            let secs = spec.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
            let timeout = Duration::try_from_secs_f64(secs)
                .ok()
                .filter(|t| !t.is_zero() && secs <= MAX_TIMEOUT_S)
                .ok_or_else(|| LlmError::BackendConfig {
                    backend: spec.name.clone(),
                    message: format!(
                        "timeout_s = {secs} is not a number of seconds above 0 and at most \
                         {MAX_TIMEOUT_S}"
                    ),
                })?;
            if spec.max_tokens_field.is_some() && spec.kind != BackendKind::Openai {
                return Err(LlmError::BackendConfig {
                    backend: spec.name.clone(),
                    message: "max_tokens_field is a setting of `openai` backends only (the \
                              field of the chat completions they are sent); remove it"
                        .into(),
                });
            }
            let backend: Arc<dyn Backend> = match spec.kind {
                BackendKind::Openai => {
                    let base = spec
                        .base_url
                        .as_deref()
                        .unwrap_or("https://api.openai.com/v1");
                    let mut c = OpenAiConfig::new(&spec.name, base, spec.api_key_env.as_deref());
                    c.retry = retry;
                    c.timeout = timeout;
                    if let Some(field) = spec.max_tokens_field {
                        c.max_tokens_field = field;
                    }
                    Arc::new(OpenAiBackend::new(c)?)
                }
                BackendKind::Anthropic => {
                    let base = spec
                        .base_url
                        .as_deref()
                        .unwrap_or("https://api.anthropic.com");
                    let var = spec.key_var().unwrap_or("ANTHROPIC_API_KEY");
                    let mut c = AnthropicConfig::new(&spec.name, base, var);
                    c.retry = retry;
                    c.timeout = timeout;
                    Arc::new(AnthropicBackend::new(c)?)
                }
                BackendKind::Local => {
                    let path = match &spec.model_path {
                        Some(path) => path.clone(),
                        None => model_file::require_default_model()?,
                    };
                    let mut c = LocalConfig::new(&spec.name, path);
                    if let Some(t) = spec.threads {
                        c = c.with_threads(t);
                    }
                    if let Some(n) = spec.parallel {
                        c.parallel = n;
                    }
                    if let Some(n) = spec.context_size {
                        c.context_size = n;
                    }
                    Arc::new(LocalBackend::load(c)?)
                }
            };
            out.push(backend);
        }
        Ok(out)
    }

    /// The gateway config: routes, built-in prices with the overrides, run caps, cache.
    ///
    /// # Errors
    /// [`LlmError::PriceTable`] for an invalid price.
    pub fn gateway_config(&self) -> Result<GatewayConfig, LlmError> {
        let prices = PriceTable::builtin().with_overrides(self.prices.clone())?;
        let routes = self
            .models
            .iter()
            .map(|r| {
                ModelRoute::new(
                    &r.name,
                    &r.backend,
                    r.upstream_model.as_deref().unwrap_or(&r.name),
                )
            })
            .collect();
        let mut config = GatewayConfig::new(routes, prices);
        config.default_model = self.default_model.clone();
        config.run_caps = self.caps.run;
        config.cache_dir = if self.no_cache {
            None
        } else {
            Some(
                self.cache_dir
                    .clone()
                    .unwrap_or_else(|| model_file::hevo_home().join("cache").join("responses")),
            )
        };
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let text = r#"
            [[backends]]
            name = "openai"
            kind = "openai"
            base_url = "http://127.0.0.1:9/v1"

            [[models]]
            name = "m"
            backend = "openai"
            upstream_model = "gpt-4o-mini"

            [prices."gpt-4o-mini"]
            input = 0.2
            output = 0.8

            [caps.trial]
            max_tokens = 1000
            [caps.run]
            max_cost_usd = 2.5
        "#;
        let config: ModelLayerConfig = toml::from_str(text).unwrap();
        assert_eq!(config.caps.trial.max_tokens, Some(1000));
        let gw = config.gateway_config().unwrap();
        assert_eq!(gw.run_caps.max_cost_usd, Some(2.5));
        assert_eq!(gw.prices.get("gpt-4o-mini").unwrap().input, 0.2);
        assert_eq!(config.build_backends().unwrap().len(), 1);
        let err = toml::from_str::<ModelLayerConfig>("[[models]]\nname = \"m\"\nbakend = \"x\"\n")
            .unwrap_err();
        assert!(err.to_string().contains("bakend"), "{err}");
    }

    #[test]
    fn a_timeout_that_is_not_a_positive_number_of_seconds_is_refused_when_read() {
        let backend = |timeout: &str| {
            format!("[[backends]]\nname = \"o\"\nkind = \"openai\"\ntimeout_s = {timeout}\n")
        };
        for bad in ["inf", "-inf", "nan", "0", "-1", "1e300"] {
            let err = toml::from_str::<ModelLayerConfig>(&backend(bad)).unwrap_err();
            let message = err.to_string();
            assert!(
                message.contains("timeout_s") && message.contains("line 4"),
                "{bad}: {message}"
            );
        }
        let config: ModelLayerConfig = toml::from_str(&backend("0.5")).unwrap();
        assert_eq!(config.backends[0].timeout_s, Some(0.5));
        assert_eq!(config.build_backends().unwrap().len(), 1);
        // a spec built in code, not read, is checked when its backend is built
        let mut config = config;
        config.backends[0].timeout_s = Some(f64::INFINITY);
        let err = config.build_backends().err().unwrap();
        assert!(err.to_string().contains("timeout_s = inf"), "{err}");
    }

    #[test]
    fn max_tokens_field_takes_two_values_and_only_on_openai_backends() {
        let backend = |kind: &str, field: &str| {
            format!("[[backends]]\nname = \"o\"\nkind = \"{kind}\"\nmax_tokens_field = {field}\n")
        };
        for (value, field) in [
            ("\"max_tokens\"", MaxTokensField::MaxTokens),
            (
                "\"max_completion_tokens\"",
                MaxTokensField::MaxCompletionTokens,
            ),
        ] {
            let config: ModelLayerConfig = toml::from_str(&backend("openai", value)).unwrap();
            assert_eq!(config.backends[0].max_tokens_field, Some(field));
            assert_eq!(config.build_backends().unwrap().len(), 1);
        }
        for bad in ["\"max_output_tokens\"", "\"MAX_TOKENS\"", "1"] {
            let err = toml::from_str::<ModelLayerConfig>(&backend("openai", bad)).unwrap_err();
            let message = err.to_string();
            assert!(
                message.contains("max_tokens_field")
                    && message.contains("line 4")
                    && (bad == "1" || message.contains("\"max_completion_tokens\"")),
                "{bad}: {message}"
            );
        }
        std::env::set_var("HEVO_TEST_CONFIG_ANTHROPIC_KEY", "k");
        let text = backend("anthropic", "\"max_tokens\"")
            + "api_key_env = \"HEVO_TEST_CONFIG_ANTHROPIC_KEY\"\n";
        let config: ModelLayerConfig = toml::from_str(&text).unwrap();
        let err = config.build_backends().err().unwrap();
        assert!(
            err.to_string().contains("max_tokens_field") && err.to_string().contains("`openai`"),
            "{err}"
        );
    }
}
