//! A gateway in front of the holding upstream (`held`), and what the tests of calls that
//! outlive their caller, their trial or the gateway read off it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hevo_llm::{
    CallRecord, CallStatus, Caps, Gateway, GatewayConfig, GatewayHandle, MemorySink, ModelPrice,
    ModelRoute, PriceTable, TrialKey, Usage,
};
use serde_json::Value;

use crate::clients::{python_with_sdks, run, upstream_backends};
use crate::held::{start, Held};

/// The price of the upstream models: $1 / $0.25 / $4 per million tokens.
pub const PRICE: ModelPrice = ModelPrice::paid(1.0, 0.25, 4.0);

/// A holding upstream, a gateway in front of it (`gpt-test` on an `openai` backend,
/// `claude-test` on an `anthropic` one, both priced [`PRICE`]) and what it recorded.
pub struct HeldGateway {
    /// Temp dir (traces, the clients' home).
    pub dir: tempfile::TempDir,
    /// The upstream.
    pub upstream: Held,
    /// The gateway.
    pub gateway: GatewayHandle,
    /// Every ledger row.
    pub sink: Arc<MemorySink>,
}

impl HeldGateway {
    /// Starts both; closing a trial waits at most `drain_timeout` for its calls.
    pub async fn start(drain_timeout: Duration) -> Self {
        Self::start_with(|config| config.drain_timeout = drain_timeout).await
    }

    /// Starts both, the gateway with the config `configure` makes of the default one.
    pub async fn start_with(configure: impl FnOnce(&mut GatewayConfig)) -> Self {
        let upstream = start().await;
        let (openai, anthropic) = upstream_backends(&upstream.base);
        let prices = PriceTable::empty()
            .with_overrides(["gpt-up", "claude-up"].map(|m| (m.to_owned(), PRICE)))
            .unwrap();
        let mut config = GatewayConfig::new(
            vec![
                ModelRoute::new("gpt-test", "up-openai", "gpt-up"),
                ModelRoute::new("claude-test", "up-anthropic", "claude-up"),
            ],
            prices,
        );
        configure(&mut config);
        let sink = Arc::new(MemorySink::new());
        let gateway = Gateway::start(config, vec![openai, anthropic], sink.clone()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Self {
            dir,
            upstream,
            gateway,
            sink,
        }
    }

    /// Opens trial `id` with `caps`.
    pub fn trial(&self, id: &str, caps: Caps) -> TrialKey {
        let trace = self.dir.path().join("trace").join(id);
        self.gateway.open_trial(id, &trace, caps).unwrap()
    }

    /// Runs `py/<script>` as a harness of the trial `key` with `vars` added to its
    /// environment; returns the JSON line it printed last, or `None` when the SDKs are not
    /// installed (the test is then skipped, loudly).
    pub fn harness(&self, script: &str, key: &TrialKey, vars: &[(&str, &str)]) -> Option<Value> {
        let python = python_with_sdks()?;
        let mut command = std::process::Command::new(python);
        command.arg(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/it/py")
                .join(script),
        );
        let mut env = self.gateway.harness_env(key);
        env.push((
            "HOME".into(),
            self.dir.path().join("home").display().to_string(),
        ));
        env.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        let (ok, output) = tokio::task::block_in_place(|| run(command, &env, self.dir.path()));
        assert!(ok, "{script} failed:\n{output}");
        let line = output
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("{script} printed no JSON:\n{output}"));
        Some(serde_json::from_str(line).unwrap())
    }

    /// The ledger rows of `trial`.
    pub fn rows(&self, trial: &str) -> Vec<CallRecord> {
        let rows = self.sink.records();
        rows.into_iter().filter(|r| r.trial_id == trial).collect()
    }
}

/// Asserts that `row` is a call priced by `input` (uncached, cached) and `output` tokens.
pub fn assert_priced(row: &CallRecord, status: CallStatus, input: (u64, u64), output: u64) {
    assert_eq!(row.status, status, "{row:#?}");
    assert_eq!(
        (row.input_tokens, row.cached_tokens, row.output_tokens),
        (input.0, input.1, output),
        "{row:#?}"
    );
    let cost = PRICE.cost(&Usage {
        prompt_tokens: input.0 + input.1,
        cached_tokens: input.1,
        output_tokens: output,
        ..Usage::default()
    });
    assert!((row.cost_usd - cost).abs() < 1e-12, "{row:#?}");
}
