//! The agent presets: the command line and environment of today's coding-agent CLIs run
//! headless through hevo's gateway (checked with Claude Code 2.1.332 and Codex 0.171.0).
//!
//! In a command line, `{prompt}` is replaced by the prompt, `{openai_base_url}` and
//! `{anthropic_base_url}` by the gateway's URLs; in an environment value, `{agent_home}` is
//! replaced by the agent's own home directory (outside the archive, so its config,
//! conversation logs and caches never reach the next proposer).

use hevo_llm::{BackendKind, ModelLayerConfig};

/// The placeholder in a command line that is replaced by the prompt.
pub const PROMPT_PLACEHOLDER: &str = "{prompt}";

/// The placeholder in an environment value that is replaced by the agent's home.
pub const HOME_PLACEHOLDER: &str = "{agent_home}";

/// A named agent: how to start it headless and what it needs in its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preset {
    /// The command line template.
    pub command: Vec<String>,
    /// Variables the agent needs (values may hold [`HOME_PLACEHOLDER`]).
    pub env: Vec<(String, String)>,
    /// How to install the agent, for the error when it is missing.
    pub install: &'static str,
}

/// The preset named `name` (`claude` or `codex`), asking for `model` when given (else the
/// agent's default model name reaches the gateway, which serves it by its default route).
///
/// - `claude`: Claude Code in print mode (`claude -p`), allowed to edit files and run
///   commands without asking (`--permission-mode acceptEdits` and `--allowedTools`; its
///   `bypassPermissions` is refused when running as root), its config in the agent home,
///   non-essential traffic and telemetry (which would go straight to the vendor) off.
/// - `codex`: `codex exec` with `--sandbox workspace-write` (`--full-auto` is gone) and a
///   custom provider pointed at the gateway's Responses endpoint (Codex ignores
///   `OPENAI_BASE_URL`), keyed by the trial's `OPENAI_API_KEY`, its state in the agent home.
///   When hevo itself confines the agent (`contained`: its bubblewrap sandbox), Codex's own
///   sandbox is off (`danger-full-access`): it cannot nest inside hevo's, whose tool calls
///   then failed silently, and hevo's already allows writes only to `pending/` and the
///   agent's home.
pub fn preset(name: &str, model: Option<&str>, contained: bool) -> Option<Preset> {
    let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let pairs = |items: &[(&str, &str)]| {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    match name {
        "claude" => {
            let mut command = strings(&[
                "claude",
                "-p",
                PROMPT_PLACEHOLDER,
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Bash Read Write Edit Glob Grep",
                "--output-format",
                "text",
            ]);
            if let Some(model) = model {
                command.extend(["--model".to_string(), model.to_string()]);
            }
            Some(Preset {
                command,
                env: pairs(&[
                    ("CLAUDE_CONFIG_DIR", "{agent_home}/.claude"),
                    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                    ("DISABLE_TELEMETRY", "1"),
                    ("DISABLE_AUTOUPDATER", "1"),
                ]),
                install: "npm install -g @anthropic-ai/claude-code@2.1.332",
            })
        }
        "codex" => {
            let mut command = strings(&[
                "codex",
                "exec",
                "--skip-git-repo-check",
                "--sandbox",
                if contained {
                    "danger-full-access"
                } else {
                    "workspace-write"
                },
                "-c",
                "model_provider=\"hevo\"",
                "-c",
                "model_providers.hevo.name=\"hevo\"",
                "-c",
                "model_providers.hevo.base_url=\"{openai_base_url}\"",
                "-c",
                "model_providers.hevo.env_key=\"OPENAI_API_KEY\"",
            ]);
            if let Some(model) = model {
                command.extend(["-c".to_string(), format!("model=\"{model}\"")]);
            }
            command.push(PROMPT_PLACEHOLDER.to_string());
            Some(Preset {
                command,
                env: pairs(&[("CODEX_HOME", "{agent_home}/.codex")]),
                install: "npm install -g @openai/codex@0.171.0",
            })
        }
        _ => None,
    }
}

/// Why the model layer `layer` cannot serve the agent preset `name`, if it cannot. Claude
/// Code and Codex call their model with tools, in their vendor's API (Anthropic's Messages,
/// OpenAI's Responses); hevo carries tool calls only by forwarding them unchanged to a
/// backend of that API, so the embedded local model (or only the other vendor's backend)
/// answers their first request with a 400 and the agent stops, on every call alike.
pub fn unserved(name: &str, layer: &ModelLayerConfig) -> Option<String> {
    let (agent, kind, api) = match name {
        "claude" => (
            "Claude Code",
            BackendKind::Anthropic,
            "Anthropic's Messages API",
        ),
        "codex" => ("Codex", BackendKind::Openai, "OpenAI's Responses API"),
        _ => return None,
    };
    if layer.backends.iter().any(|b| b.kind == kind) {
        return None;
    }
    let kind_name = if kind == BackendKind::Anthropic {
        "anthropic"
    } else {
        "openai"
    };
    Some(format!(
        "{agent} calls its model with tools in {api}, which hevo carries only to a \
         `{kind_name}` backend, and this model layer has none (the embedded local model \
         cannot carry tool calls): add `[[model.backends]] kind = \"{kind_name}\"` and \
         route the agent's model to it (docs/models.md)"
    ))
}

/// The command line with the prompt and the gateway's URLs substituted (the prompt is
/// appended if there is no placeholder).
pub fn command_line(
    template: &[String],
    prompt: &str,
    openai_base_url: &str,
    anthropic_base_url: &str,
) -> Vec<String> {
    let mut argv: Vec<String> = template
        .iter()
        .map(|a| {
            a.replace("{openai_base_url}", openai_base_url)
                .replace("{anthropic_base_url}", anthropic_base_url)
                .replace(PROMPT_PLACEHOLDER, prompt)
        })
        .collect();
    if !template.iter().any(|a| a.contains(PROMPT_PLACEHOLDER)) {
        argv.push(prompt.to_string());
    }
    argv
}

/// Checks that the agent's program can be started: a path that exists, or a name found on
/// `PATH`. The error names the program, how to install it (`install`, if known) and
/// `setting`, where the user gives another program (`` `[proposer] command` `` in a
/// `hevo.toml`, a flag on a command line).
pub fn check_program(
    command: &[String],
    install: Option<&str>,
    setting: &str,
) -> Result<(), String> {
    let Some(program) = command.first() else {
        return Err("the agent command is empty: give the program and its arguments".into());
    };
    let found = if program.contains('/') {
        std::path::Path::new(program).is_file()
    } else {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path).any(|d| d.join(program).is_file())
    };
    if found {
        return Ok(());
    }
    let fix = match install {
        Some(install) => format!("install it (`{install}`) or give another program in {setting}"),
        None => format!("fix {setting} or install the program"),
    };
    Err(format!(
        "the agent program `{program}` is not found (on PATH or as a path): {fix}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_put_the_prompt_and_the_gateway_in_place() {
        let claude = preset("claude", Some("m1"), true).unwrap();
        let argv = command_line(&claude.command, "do it", "http://o/v1", "http://a");
        assert_eq!(&argv[..3], &["claude", "-p", "do it"]);
        assert_eq!(&argv[argv.len() - 2..], &["--model", "m1"]);
        assert!(claude.env.contains(&(
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into()
        )));
        let codex = preset("codex", None, false).unwrap();
        let argv = command_line(&codex.command, "do it", "http://o/v1", "http://a");
        assert_eq!(argv.last().unwrap(), "do it");
        assert!(argv.contains(&"workspace-write".to_string()));
        let contained = preset("codex", None, true).unwrap();
        assert!(contained
            .command
            .contains(&"danger-full-access".to_string()));
        assert!(argv.contains(&"model_providers.hevo.base_url=\"http://o/v1\"".to_string()));
        assert!(!argv.iter().any(|a| a == "--full-auto"));
        assert!(preset("gemini", None, false).is_none());
    }

    #[test]
    fn a_template_without_placeholder_gets_the_prompt_appended() {
        let argv = command_line(&["my-agent".into(), "--fast".into()], "p", "", "");
        assert_eq!(argv, vec!["my-agent", "--fast", "p"]);
    }

    #[test]
    fn a_missing_program_is_named_with_its_install_line() {
        let err =
            check_program(&["hevo-no-such-agent".into()], Some("npm i x"), "`--x`").unwrap_err();
        assert!(
            err.contains("`hevo-no-such-agent`")
                && err.contains("npm i x")
                && err.contains("another program in `--x`"),
            "{err}"
        );
        let err = check_program(&["hevo-no-such-agent".into()], None, "`--x`").unwrap_err();
        assert!(err.ends_with("fix `--x` or install the program"), "{err}");
        assert!(check_program(&["bash".into()], None, "`--x`").is_ok());
    }
}
