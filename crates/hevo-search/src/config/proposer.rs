//! `[proposer]`: where new candidates come from (the built-in `params`, a coding-agent CLI
//! or one model call), its defaults and the agent variables hevo keeps for itself.

use serde::Deserialize;

/// `[proposer]`: where new candidates come from.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProposerConfig {
    /// `params` (built in, offline), `agent` (a coding-agent CLI) or `llm` (one model call).
    #[serde(default = "default_proposer")]
    pub kind: String,
    /// `agent` preset: `claude` or `codex`.
    #[serde(default)]
    pub preset: Option<String>,
    /// `agent` command line (overrides the preset); `{prompt}` is replaced by the prompt,
    /// `{openai_base_url}` / `{anthropic_base_url}` by the gateway's URLs.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// `agent`: extra environment variables of the agent (after its preset's; `{agent_home}`
    /// in a value is the agent's own home, outside the archive). The gateway's URL and key
    /// variables and `HOME` are hevo's and cannot be set here.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Time limit of one proposer call, in seconds.
    #[serde(default = "default_proposer_timeout")]
    pub timeout_s: u64,
    /// `llm`: the model (a route of `[model]`) that writes the new harness file
    /// (default: the model layer's default model).
    #[serde(default)]
    pub model: Option<String>,
    /// `llm`: most tokens of the reply.
    #[serde(default = "default_proposer_max_tokens")]
    pub max_tokens: u32,
}

/// Variables of the agent's environment that hevo owns: `[proposer] env` cannot set them.
pub(super) const RESERVED_AGENT_VARS: &[&str] = &[
    "HOME",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
];

fn default_proposer_max_tokens() -> u32 {
    8192
}

fn default_proposer() -> String {
    "params".into()
}

fn default_proposer_timeout() -> u64 {
    1800
}

impl Default for ProposerConfig {
    fn default() -> Self {
        ProposerConfig {
            kind: default_proposer(),
            preset: None,
            command: None,
            env: Default::default(),
            timeout_s: default_proposer_timeout(),
            model: None,
            max_tokens: default_proposer_max_tokens(),
        }
    }
}
