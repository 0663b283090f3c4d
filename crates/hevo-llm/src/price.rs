//! The price table: dollars per million tokens for uncached input, cached input (a prompt
//! cache read), input written to the prompt cache (5-minute and 1-hour writes) and output.
//!
//! Built-in defaults cover common hosted models; `hevo.toml` overrides or extends them. A model
//! that is routed but neither priced nor marked free stops the gateway at start-up, so no run
//! ever spends money it cannot count.
//!
//! ```
//! use hevo_llm::{PriceTable, Usage};
//! let table = PriceTable::builtin()
//!     .with_toml("[\"my-model\"]\ninput = 1.0\ncached_input = 0.1\noutput = 2.0\n")
//!     .unwrap();
//! let usage = Usage { prompt_tokens: 1_000_000, cached_tokens: 500_000, ..Usage::default() };
//! assert!((table.cost("my-model", &usage).unwrap() - 0.55).abs() < 1e-9);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::LlmError;
use crate::types::Usage;

/// Prices of one model in dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Uncached input tokens.
    #[serde(default)]
    pub input: f64,
    /// Input tokens served from the provider's prompt cache; defaults to `input`.
    #[serde(default)]
    pub cached_input: Option<f64>,
    /// Input tokens written to the provider's prompt cache for 5 minutes (Anthropic bills
    /// them above uncached input); defaults to 1.25 × `input`, Anthropic's rate.
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// Input tokens written to the prompt cache for 1 hour; defaults to 2 × `input`,
    /// Anthropic's rate.
    #[serde(default)]
    pub cache_write_1h: Option<f64>,
    /// Output tokens.
    #[serde(default)]
    pub output: f64,
    /// Explicitly free (a local model): every price is zero and no price is required.
    #[serde(default)]
    pub free: bool,
    /// Most output tokens the model generates when a request sets no limit: what a call
    /// without `max_tokens` reserves against the caps (`DEFAULT_MAX_OUTPUT` when unset).
    #[serde(default)]
    pub max_output: Option<u64>,
}

/// The output limit assumed for a model whose [`ModelPrice::max_output`] is not known.
pub const DEFAULT_MAX_OUTPUT: u64 = 128_000;

impl ModelPrice {
    /// A paid model's prices.
    pub const fn paid(input: f64, cached_input: f64, output: f64) -> Self {
        Self {
            input,
            cached_input: Some(cached_input),
            cache_write: None,
            cache_write_1h: None,
            output,
            free: false,
            max_output: None,
        }
    }

    /// These prices for a provider that bills no more for writing the prompt cache than
    /// for uncached input (OpenAI caches automatically, at no charge): a call's
    /// reservation then prices its input at `input`, not at Anthropic's 2 × `input`.
    pub const fn no_cache_write_premium(mut self) -> Self {
        self.cache_write = Some(self.input);
        self.cache_write_1h = Some(self.input);
        self
    }

    /// These prices with the model's default output limit.
    pub const fn with_max_output(mut self, tokens: u64) -> Self {
        self.max_output = Some(tokens);
        self
    }

    /// A model that costs nothing.
    pub const fn free() -> Self {
        Self {
            input: 0.0,
            cached_input: Some(0.0),
            cache_write: Some(0.0),
            cache_write_1h: Some(0.0),
            output: 0.0,
            free: true,
            max_output: None,
        }
    }

    /// The price of a cached input token ([`ModelPrice::cached_input`] or its default).
    pub fn cached_input_price(&self) -> f64 {
        self.cached_input.unwrap_or(self.input)
    }

    /// The price of an input token written to the 5-minute prompt cache
    /// ([`ModelPrice::cache_write`] or its default).
    pub fn cache_write_price(&self) -> f64 {
        self.cache_write.unwrap_or(self.input * 1.25)
    }

    /// The price of an input token written to the 1-hour prompt cache
    /// ([`ModelPrice::cache_write_1h`] or its default).
    pub fn cache_write_1h_price(&self) -> f64 {
        self.cache_write_1h.unwrap_or(self.input * 2.0)
    }

    /// The dollars `usage` costs at these prices: uncached input that is not written to the
    /// cache at `input`, cache reads at `cached_input`, cache writes at `cache_write` (1-hour
    /// ones at `cache_write_1h`), output at `output`.
    pub fn cost(&self, usage: &Usage) -> f64 {
        if self.free {
            return 0.0;
        }
        let written_1h = usage.cache_write_1h_tokens.min(usage.cache_write_tokens);
        let written_5m = usage.cache_write_tokens - written_1h;
        let plain = usage
            .uncached_tokens()
            .saturating_sub(usage.cache_write_tokens);
        (plain as f64 * self.input
            + usage.cached_tokens as f64 * self.cached_input_price()
            + written_5m as f64 * self.cache_write_price()
            + written_1h as f64 * self.cache_write_1h_price()
            + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }

    /// The most a call can cost: `input_tokens` all at the dearest input price (uncached, or
    /// written to the cache, which costs more), and `output_tokens` generated (the request's
    /// limit, else [`ModelPrice::max_output`]).
    pub fn max_cost(&self, input_tokens: u64, output_tokens: Option<u64>) -> f64 {
        if self.free {
            return 0.0;
        }
        let input = self
            .input
            .max(self.cache_write_price())
            .max(self.cache_write_1h_price());
        (input_tokens as f64 * input + self.output_limit(output_tokens) as f64 * self.output)
            / 1_000_000.0
    }

    /// The request's output limit, else the model's default, else `DEFAULT_MAX_OUTPUT`.
    pub fn output_limit(&self, requested: Option<u64>) -> u64 {
        requested.or(self.max_output).unwrap_or(DEFAULT_MAX_OUTPUT)
    }

    fn validate(&self, model: &str) -> Result<(), LlmError> {
        let values = [
            self.input,
            self.cached_input_price(),
            self.cache_write_price(),
            self.cache_write_1h_price(),
            self.output,
        ];
        if values.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return Err(LlmError::PriceTable {
                message: format!("prices of `{model}` must be finite and not negative"),
            });
        }
        Ok(())
    }
}

/// Built-in prices (USD per million tokens: input, cached input, output) and output limits;
/// OpenAI's models charge nothing extra for cache writes, Anthropic's use the defaults.
/// Providers change them; override them in `hevo.toml` when they do.
const BUILTIN: &[(&str, ModelPrice)] = &[
    (
        "gpt-4o",
        ModelPrice::paid(2.50, 1.25, 10.00)
            .no_cache_write_premium()
            .with_max_output(16384),
    ),
    (
        "gpt-4o-mini",
        ModelPrice::paid(0.15, 0.075, 0.60)
            .no_cache_write_premium()
            .with_max_output(16384),
    ),
    (
        "gpt-4.1",
        ModelPrice::paid(2.00, 0.50, 8.00)
            .no_cache_write_premium()
            .with_max_output(32768),
    ),
    (
        "gpt-4.1-mini",
        ModelPrice::paid(0.40, 0.10, 1.60)
            .no_cache_write_premium()
            .with_max_output(32768),
    ),
    (
        "gpt-4.1-nano",
        ModelPrice::paid(0.10, 0.025, 0.40)
            .no_cache_write_premium()
            .with_max_output(32768),
    ),
    (
        "gpt-5",
        ModelPrice::paid(1.25, 0.125, 10.00)
            .no_cache_write_premium()
            .with_max_output(128000),
    ),
    (
        "gpt-5-mini",
        ModelPrice::paid(0.25, 0.025, 2.00)
            .no_cache_write_premium()
            .with_max_output(128000),
    ),
    (
        "gpt-5-nano",
        ModelPrice::paid(0.05, 0.005, 0.40)
            .no_cache_write_premium()
            .with_max_output(128000),
    ),
    (
        "o3",
        ModelPrice::paid(2.00, 0.50, 8.00)
            .no_cache_write_premium()
            .with_max_output(100000),
    ),
    (
        "o4-mini",
        ModelPrice::paid(1.10, 0.275, 4.40)
            .no_cache_write_premium()
            .with_max_output(100000),
    ),
    (
        "claude-opus-4",
        ModelPrice::paid(15.00, 1.50, 75.00).with_max_output(32000),
    ),
    (
        "claude-opus-4-1",
        ModelPrice::paid(15.00, 1.50, 75.00).with_max_output(32000),
    ),
    (
        "claude-sonnet-4",
        ModelPrice::paid(3.00, 0.30, 15.00).with_max_output(64000),
    ),
    (
        "claude-sonnet-4-5",
        ModelPrice::paid(3.00, 0.30, 15.00).with_max_output(64000),
    ),
    (
        "claude-haiku-4-5",
        ModelPrice::paid(1.00, 0.10, 5.00).with_max_output(64000),
    ),
    (
        "claude-3-5-haiku",
        ModelPrice::paid(0.80, 0.08, 4.00).with_max_output(8192),
    ),
    ("smollm2-135m-instruct", ModelPrice::free()),
];

/// `model` without its date suffix (`-YYYY-MM-DD` or `-YYYYMMDD`, as providers date
/// snapshots), or `None` when it has none.
fn undated(model: &str) -> Option<&str> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let date = |y: &str, m: &str, d: &str| {
        let month = m.parse::<u32>().unwrap_or(0);
        let day = d.parse::<u32>().unwrap_or(0);
        y.len() == 4
            && digits(y)
            && digits(m)
            && digits(d)
            && (1..=12).contains(&month)
            && (1..=31).contains(&day)
    };
    let (name, suffix) = model.rsplit_once('-')?;
    // -YYYYMMDD
    if suffix.len() == 8 && date(&suffix[..4], &suffix[4..6], &suffix[6..]) {
        return Some(name);
    }
    // -YYYY-MM-DD: the last three dash-separated parts
    let (rest, month) = name.rsplit_once('-')?;
    let (name, year) = rest.rsplit_once('-')?;
    (month.len() == 2 && suffix.len() == 2 && date(year, month, suffix)).then_some(name)
}

/// Model name to prices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    prices: BTreeMap<String, ModelPrice>,
}

impl PriceTable {
    /// An empty table: every model must be priced explicitly.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-in defaults for common models.
    pub fn builtin() -> Self {
        Self {
            prices: BUILTIN
                .iter()
                .map(|(name, price)| ((*name).to_owned(), *price))
                .collect(),
        }
    }

    /// Adds or replaces one model's price.
    pub fn insert(&mut self, model: impl Into<String>, price: ModelPrice) -> Result<(), LlmError> {
        let model = model.into();
        price.validate(&model)?;
        self.prices.insert(model, price);
        Ok(())
    }

    /// Overrides with every entry of `overrides` (e.g. the `[prices]` table of `hevo.toml`).
    pub fn with_overrides(
        mut self,
        overrides: impl IntoIterator<Item = (String, ModelPrice)>,
    ) -> Result<Self, LlmError> {
        for (model, price) in overrides {
            self.insert(model, price)?;
        }
        Ok(self)
    }

    /// Overrides with a TOML document whose top-level tables are model names:
    /// `["gpt-4o"]` / `input = 2.5` / `cached_input = 1.25` / `output = 10` (or `free = true`).
    pub fn with_toml(self, text: &str) -> Result<Self, LlmError> {
        let parsed: BTreeMap<String, ModelPrice> =
            toml::from_str(text).map_err(|e| LlmError::PriceTable {
                message: e.to_string(),
            })?;
        self.with_overrides(parsed)
    }

    /// The price of `model`: its own entry, else, for a dated name, the entry of the name
    /// without the date (`gpt-4o-2024-08-06` gets `gpt-4o`'s price, `claude-sonnet-4-20250514`
    /// `claude-sonnet-4`'s). Nothing else falls back: `o3-pro` is another model than `o3`
    /// and has no price until it is given one.
    pub fn get(&self, model: &str) -> Option<&ModelPrice> {
        self.prices
            .get(model)
            .or_else(|| undated(model).and_then(|name| self.prices.get(name)))
    }

    /// The dollars `usage` of `model` costs; `None` when the model is not priced.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.get(model).map(|p| p.cost(usage))
    }

    /// Fails with [`LlmError::UnpricedModel`] for the first model that has no price.
    pub fn check<'a>(&self, models: impl IntoIterator<Item = &'a str>) -> Result<(), LlmError> {
        for model in models {
            if self.get(model).is_none() {
                return Err(LlmError::UnpricedModel {
                    model: model.to_owned(),
                });
            }
        }
        Ok(())
    }

    /// Every entry, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ModelPrice)> {
        self.prices.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_splits_cached_and_uncached_input() {
        let price = ModelPrice::paid(2.0, 0.5, 8.0);
        let usage = Usage {
            prompt_tokens: 1000,
            cached_tokens: 400,
            output_tokens: 100,
            ..Usage::default()
        };
        let expected = (600.0 * 2.0 + 400.0 * 0.5 + 100.0 * 8.0) / 1e6;
        assert!((price.cost(&usage) - expected).abs() < 1e-12);
    }

    #[test]
    fn openai_models_reserve_input_at_its_own_price_and_anthropic_at_the_dearest_write() {
        let table = PriceTable::builtin();
        let gpt = table.get("gpt-4o").unwrap();
        // 1M input tokens and 0 output: the input price alone.
        assert_eq!(gpt.max_cost(1_000_000, Some(0)), 2.50);
        let claude = table.get("claude-sonnet-4").unwrap();
        assert_eq!(claude.max_cost(1_000_000, Some(0)), 6.00);
    }

    #[test]
    fn cache_writes_cost_more_than_input_and_one_hour_writes_more_still() {
        // Anthropic's rates for claude-sonnet-4: $3 input, $3.75 5-minute writes, $6 1-hour
        // writes, $0.30 reads, $15 output per million tokens
        let price = *PriceTable::builtin().get("claude-sonnet-4").unwrap();
        let usage = Usage {
            prompt_tokens: 100 + 300 + 600,
            cached_tokens: 600,
            cache_write_tokens: 300,
            cache_write_1h_tokens: 0,
            output_tokens: 500,
        };
        assert!(
            (price.cost(&usage) - 0.009105).abs() < 1e-12,
            "{}",
            price.cost(&usage)
        );
        let usage = Usage {
            cache_write_1h_tokens: 100,
            ..usage
        };
        let expected =
            (100.0 * 3.0 + 200.0 * 3.75 + 100.0 * 6.0 + 600.0 * 0.3 + 500.0 * 15.0) / 1e6;
        assert!((price.cost(&usage) - expected).abs() < 1e-12);
        // priced explicitly, and bounded by the dearest input price
        let price = ModelPrice {
            cache_write: Some(5.0),
            cache_write_1h: Some(7.0),
            ..ModelPrice::paid(3.0, 0.3, 15.0)
        };
        let expected = (100.0 * 3.0 + 200.0 * 5.0 + 100.0 * 7.0 + 600.0 * 0.3 + 500.0 * 15.0) / 1e6;
        assert!((price.cost(&usage) - expected).abs() < 1e-12);
        let most = price.max_cost(usage.prompt_tokens, Some(usage.output_tokens));
        assert!((most - (1000.0 * 7.0 + 500.0 * 15.0) / 1e6).abs() < 1e-12);
        assert!(most >= price.cost(&usage));
        let err = PriceTable::empty()
            .with_toml("[\"m\"]\ninput = 1.0\ncache_write_1h = -2.0\n")
            .unwrap_err();
        assert!(err.to_string().contains("negative"), "{err}");
    }

    #[test]
    fn only_a_dated_name_takes_the_price_of_the_name_without_its_date() {
        let table = PriceTable::builtin();
        assert_eq!(
            table.get("gpt-4o-mini-2024-07-18"),
            table.get("gpt-4o-mini")
        );
        assert_eq!(table.get("gpt-4o-2024-08-06"), table.get("gpt-4o"));
        assert_eq!(
            table.get("claude-sonnet-4-20250514"),
            table.get("claude-sonnet-4")
        );
        assert_eq!(
            table.get("claude-opus-4-1-20250805"),
            table.get("claude-opus-4-1")
        );
        assert!(table.get("gpt-4o").is_some());
        // other models that merely start with a priced name are not priced by it
        for other in [
            "o3-pro",
            "gpt-5-pro",
            "gpt-5-codex",
            "gpt-4o-audio-preview",
            "claude-sonnet-4-latest",
            "gpt-4oz",
            "gpt-4o-2024-13-06",
            "gpt-4o-2024",
            "gpt-4o-20241",
            "o3-pro-2025-06-10",
        ] {
            assert!(table.get(other).is_none(), "{other} is priced");
            let err = table.check([other]).unwrap_err().to_string();
            assert!(
                err.contains(&format!("[model.prices.\"{other}\"]")),
                "{err}"
            );
        }
        let table = table
            .with_toml("[\"o3-pro\"]\ninput = 20.0\noutput = 80.0\n")
            .unwrap();
        assert_eq!(table.get("o3-pro-2025-06-10").unwrap().input, 20.0);
    }

    #[test]
    fn unknown_model_is_an_error_until_priced_or_free() {
        let table = PriceTable::builtin();
        let err = table.check(["my-model"]).unwrap_err();
        assert!(err.to_string().contains("free = true"), "{err}");
        let table = table.with_toml("[\"my-model\"]\nfree = true\n").unwrap();
        table.check(["my-model"]).unwrap();
        assert_eq!(
            table.cost(
                "my-model",
                &Usage {
                    prompt_tokens: 5,
                    ..Usage::default()
                }
            ),
            Some(0.0)
        );
    }

    #[test]
    fn bad_toml_names_the_problem() {
        let err = PriceTable::empty()
            .with_toml("[\"m\"]\ninptu = 1.0\n")
            .unwrap_err();
        assert!(err.to_string().contains("inptu"), "{err}");
        let err = PriceTable::empty()
            .with_toml("[\"m\"]\ninput = -1.0\n")
            .unwrap_err();
        assert!(err.to_string().contains("negative"), "{err}");
    }
}
