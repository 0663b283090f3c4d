//! The fixture of the real-client tests: a [`scripted`](crate::scripted) upstream with an
//! `openai` and an `anthropic` backend in front of it, a gateway, one trial, and helpers to
//! find the clients (skipping loudly when one is not installed).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use hevo_llm::{
    AnthropicBackend, AnthropicConfig, Backend, CallRecord, CallStatus, Caps, Gateway,
    GatewayConfig, GatewayHandle, MemorySink, ModelPrice, ModelRoute, OpenAiBackend, OpenAiConfig,
    PriceTable, TrialKey, TrialLabels,
};

use crate::scripted::{self, Script, Scripted};

/// The upstream's key variable (the harness must never see it).
pub const UPSTREAM_KEY_VAR: &str = "HEVO_TEST_SCRIPTED_UPSTREAM_KEY";

/// An `openai` backend (`up-openai`, at `base/v1`) and an `anthropic` one (`up-anthropic`,
/// at `base`) in front of a scripted upstream on loopback, both with its key.
pub fn upstream_backends(base: &str) -> (Arc<dyn Backend>, Arc<dyn Backend>) {
    std::env::set_var(UPSTREAM_KEY_VAR, "upstream-secret");
    let openai: Arc<dyn Backend> = Arc::new(
        OpenAiBackend::new(OpenAiConfig::new(
            "up-openai",
            &format!("{base}/v1"),
            Some(UPSTREAM_KEY_VAR),
        ))
        .unwrap(),
    );
    let anthropic: Arc<dyn Backend> = Arc::new(
        AnthropicBackend::new(AnthropicConfig::new("up-anthropic", base, UPSTREAM_KEY_VAR))
            .unwrap(),
    );
    (openai, anthropic)
}

/// A scripted upstream, a gateway in front of it and one open trial.
pub struct Through {
    /// Temp dir: the agent's working directory is `work/`, its home `home/`.
    pub dir: tempfile::TempDir,
    /// The upstream.
    pub upstream: Scripted,
    /// The gateway.
    pub gateway: GatewayHandle,
    /// Every ledger row.
    pub sink: Arc<MemorySink>,
    /// The trial's key.
    pub key: TrialKey,
    /// The file the scripted turn writes.
    pub target: PathBuf,
}

/// What the scripted turn writes into the target file.
pub const CONTENT: &str = "written through hevo's gateway\n";

impl Through {
    /// Routes `gpt-test` and `embed-test` to the `openai` backend and `claude-test` to the
    /// `anthropic` backend (the default for unknown names), all on the scripted upstream.
    pub async fn start(target_name: &str) -> Self {
        Self::start_capped(
            target_name,
            Caps::UNLIMITED,
            Caps::UNLIMITED,
            ModelPrice::paid(1.0, 0.25, 4.0),
        )
        .await
    }

    /// [`Through::start`] with the trial's and the run's caps and the upstream models' price.
    pub async fn start_capped(
        target_name: &str,
        trial_caps: Caps,
        run_caps: Caps,
        price: ModelPrice,
    ) -> Self {
        Self::start_configured(target_name, trial_caps, run_caps, price, |_, _| {}).await
    }

    /// [`Through::start`] with a response cache in `<dir>/cache`.
    pub async fn start_cached(target_name: &str) -> Self {
        Self::start_configured(
            target_name,
            Caps::UNLIMITED,
            Caps::UNLIMITED,
            ModelPrice::paid(1.0, 0.25, 4.0),
            |config, dir| config.cache_dir = Some(dir.join("cache")),
        )
        .await
    }

    /// [`Through::start_capped`], with `configure` changing the gateway's config last (it is
    /// given the fixture's temp dir).
    pub async fn start_configured(
        target_name: &str,
        trial_caps: Caps,
        run_caps: Caps,
        price: ModelPrice,
        configure: impl FnOnce(&mut GatewayConfig, &Path),
    ) -> Self {
        let (caps, openai) = ((trial_caps, run_caps), |_: &str| None);
        Self::start_full(target_name, caps, price, openai, configure).await
    }

    /// [`Through::start`] with the `openai` backend (`up-openai`) that `openai` builds for
    /// the upstream's OpenAI base URL (`base/v1`), instead of the default one.
    pub async fn start_with_openai(
        target_name: &str,
        openai: impl FnOnce(&str) -> Arc<dyn Backend>,
    ) -> Self {
        let caps = (Caps::UNLIMITED, Caps::UNLIMITED);
        let price = ModelPrice::paid(1.0, 0.25, 4.0);
        let openai = |base: &str| Some(openai(base));
        Self::start_full(target_name, caps, price, openai, |_, _| {}).await
    }

    /// Starts the fixture: the `openai` backend is `openai`'s when it returns one.
    async fn start_full(
        target_name: &str,
        (trial_caps, run_caps): (Caps, Caps),
        price: ModelPrice,
        openai: impl FnOnce(&str) -> Option<Arc<dyn Backend>>,
        configure: impl FnOnce(&mut GatewayConfig, &Path),
    ) -> Self {
        // not under /tmp: Codex refuses to set up its sandbox helper in a temporary dir
        let dir = agent_scratch();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let target = work.join(target_name);
        let upstream = scripted::start(Script {
            path: target.clone(),
            content: CONTENT.to_owned(),
        })
        .await;
        let (default_openai, anthropic) = upstream_backends(&upstream.base);
        let openai = openai(&format!("{}/v1", upstream.base)).unwrap_or(default_openai);
        let prices = PriceTable::empty()
            .with_overrides(["gpt-up", "claude-up", "embed-up"].map(|m| (m.to_owned(), price)))
            .unwrap();
        let mut config = GatewayConfig::new(
            vec![
                ModelRoute::new("gpt-test", "up-openai", "gpt-up"),
                ModelRoute::new("embed-test", "up-openai", "embed-up"),
                ModelRoute::new("claude-test", "up-anthropic", "claude-up"),
            ],
            prices,
        );
        config.default_model = Some("claude-test".into());
        config.run_caps = run_caps;
        configure(&mut config, dir.path());
        let sink = Arc::new(MemorySink::new());
        let gateway = Gateway::start(config, vec![openai, anthropic], sink.clone()).unwrap();
        let labels = TrialLabels {
            candidate_id: Some("cand-7".into()),
            task_id: Some("task-3".into()),
        };
        let key = gateway
            .open_labeled_trial("trial-1", labels, &dir.path().join("trace"), trial_caps)
            .unwrap();
        Self {
            dir,
            upstream,
            gateway,
            sink,
            key,
            target,
        }
    }

    /// The agent's working directory.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// A home directory for the client, outside the working directory.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The environment a harness gets: the gateway's URLs and the trial key, nothing else of
    /// hevo's or the upstream's.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = self.gateway.harness_env(&self.key);
        env.push(("HOME".into(), self.home().display().to_string()));
        env
    }

    /// Asserts that every request the upstream saw is one `ok` ledger row of the trial, with
    /// the trial's labels, and that the upstream never saw the trial key; returns the rows.
    pub fn assert_ledger_covers_upstream(&self) -> Vec<CallRecord> {
        let rows = self.sink.records();
        let seen = self.upstream.seen();
        let ok: Vec<&CallRecord> = rows.iter().filter(|r| r.status == CallStatus::Ok).collect();
        assert_eq!(
            ok.len(),
            seen.len(),
            "upstream saw {} requests, the ledger has {} ok rows: {rows:#?}",
            seen.len(),
            ok.len()
        );
        for row in &rows {
            assert_eq!(row.trial_id, "trial-1");
            assert_eq!(row.candidate_id.as_deref(), Some("cand-7"));
            assert_eq!(row.task_id.as_deref(), Some("task-3"));
        }
        for request in &seen {
            for (name, value) in &request.headers {
                assert!(
                    !value.contains(self.key.as_str()),
                    "the trial key reached the upstream in `{name}`"
                );
            }
        }
        assert!(ok
            .iter()
            .all(|r| r.cost_usd > 0.0 || r.endpoint == "anthropic.count_tokens"));
        rows
    }

    /// The written target file, or a panic naming what the client printed.
    pub fn assert_written(&self, output: &str) {
        let written = std::fs::read_to_string(&self.target).unwrap_or_else(|e| {
            panic!(
                "{} was not written ({e}); client output:\n{output}",
                self.target.display()
            )
        });
        assert_eq!(written, CONTENT);
    }
}

/// `name` on `PATH`, or `None` after saying loudly that the test is skipped and how to
/// install the client.
pub fn client(name: &str, install: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        eprintln!(
            "\n\n*** SKIPPED: `{name}` is not on PATH; install it with `{install}` \
             (.ci/run does) ***\n\n"
        );
    }
    found
}

/// The Python with the pinned SDKs, or `None` after saying loudly that the test is skipped.
pub fn python_with_sdks() -> Option<PathBuf> {
    let python =
        std::env::var_os("HEVO_TEST_PYTHON").map_or_else(|| "python3".into(), PathBuf::from);
    let ok = Command::new(&python)
        .args(["-c", "import openai, anthropic"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "\n\n*** SKIPPED: `{}` cannot import the openai and anthropic SDKs; install them \
             with `pip install openai==3.57.0 anthropic==2.15.0` (.ci/run does) ***\n\n",
            python.display()
        );
        return None;
    }
    Some(python)
}

/// Runs `command` with `env` (and no provider or hevo variables of the test process), in
/// `cwd`; returns the exit status's success and stdout + stderr.
pub fn run(mut command: Command, env: &[(String, String)], cwd: &Path) -> (bool, String) {
    for (name, _) in std::env::vars() {
        if name.starts_with("OPENAI_")
            || name.starts_with("ANTHROPIC_")
            || name.starts_with("HEVO_")
            || name.starts_with("CLAUDE")
            || name.starts_with("CODEX")
        {
            command.env_remove(name);
        }
    }
    command
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd);
    let output = command.output().expect("client starts");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// A scratch directory for the agent CLIs that is not under the system temp directory:
/// Codex refuses to set up its sandbox helper there, and a checkout (so `target/tmp`) may
/// itself live under `/tmp`. Falls back to `$HOME/.cache/hevo-test-scratch`.
fn agent_scratch() -> tempfile::TempDir {
    let target = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let sys = std::env::temp_dir();
    let base = if target.starts_with(&sys) || target.starts_with("/tmp") {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let base = home
            .unwrap_or_else(|| "/var/tmp".into())
            .join(".cache/hevo-test-scratch");
        std::fs::create_dir_all(&base).unwrap();
        base
    } else {
        target
    };
    tempfile::tempdir_in(base).unwrap()
}
