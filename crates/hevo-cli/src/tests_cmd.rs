//! `hevo tests`: generated tests, frozen (`synth`), and re-freezing after a reviewed edit
//! (`freeze`). Parses and renders only; the work is [`hevo_search::tests_synth`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use hevo_llm::ModelLayerConfig;
use hevo_runtime::cancel::Cancel;
use hevo_runtime::limits::time_limit;
use hevo_runtime::task::Split;
use hevo_search::config::RunConfig;
use hevo_search::proposer::agent_preset::{check_program, preset, unserved};
use hevo_search::tests_synth::{self, SynthAgent, SynthError, SynthOptions, SynthReport};

use crate::model_setup::ModelLayer;
use crate::num_args::count;
use crate::CliError;

/// Arguments of `hevo tests`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: TestsCommand,
}

#[derive(clap::Subcommand, Debug)]
enum TestsCommand {
    /// Have an agent write executable tests per task, keep those that run, freeze them
    /// into a new suite scored by them.
    Synth(Box<SynthArgs>),
    /// Re-freeze a suite's tests after a reviewed edit (rewrites tests.lock.json).
    Freeze(FreezeArgs),
}

/// Arguments of `hevo tests synth`.
#[derive(clap::Args, Debug)]
#[command(
    allow_negative_numbers = true,
    after_help = "What happens:\n  \
    1. The initial harness runs once on every task of the chosen splits (its working \
    directories are kept).\n  \
    2. Per task, the agent runs sandboxed in a workspace holding README.md (the test \
    format), task.json (id, input, group, the suite's description) and trajectory/ (the \
    initial harness's answer, stdout, stderr, model calls and the files it left). It never \
    sees `expected`, the scorer's verdict or another task. It writes \
    tests/test_01.sh|py ... (exit 0 pass, 1 fail; stdin {\"answer\", \"expected\", \"input\"}).\n  \
    3. Each test is kept if it parses (bash -n, Python's ast) and two runs against the \
    initial harness's output both exit 0 or 1, the same (no timeout, signal, other code or \
    Python crash).\n  \
    4. OUT gets suite.toml ([scorer] kind = \"command\", tests = \"tests\", lock = \
    \"tests.lock.json\"), tasks.jsonl (the tasks that kept a test), their files, \
    tests/<task id>/ and tests.lock.json (every test's SHA-256). Loading OUT checks every \
    hash: an edited, missing or extra test is an error until `hevo tests freeze OUT`.\n\n\
    A task's outcome under the new scorer is the fraction of its tests passed. Running the \
    same command again resumes: the initial harness's finished trials and the agent calls \
    that ended are reused (OUT/.synth/), the rest of OUT is rewritten.\n\n\
    `--agent claude` needs an `anthropic` backend in the `[model]` of --model-config \
    (`--agent codex` an `openai` one): the agents call their model with tools, which the \
    embedded local model cannot serve.\n\n\
    Examples:\n  \
    hevo tests synth examples/shell --harness examples/shell/harness-script --agent claude \
    --model-config claude.toml\n  \
    hevo tests synth SUITE --harness H --out SUITE-tests --per-task 5 --agent-cmd ./my-agent.sh {prompt}",
    // Either agent flag, and clap's message names both when neither is given.
    group(clap::ArgGroup::new("the_agent").required(true).args(["agent", "agent_cmd"]))
)]
pub struct SynthArgs {
    /// The suite to write tests for (left unchanged).
    #[arg(value_name = "SUITE_DIR")]
    pub suite: PathBuf,
    /// The initial harness: its trajectories are shown to the agent and the tests are
    /// checked on its output.
    #[arg(long, value_name = "HARNESS_DIR")]
    pub harness: PathBuf,
    /// The new suite directory, new or empty [default: SUITE_DIR-tests beside it].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Agent preset: `claude` (Claude Code) or `codex`.
    #[arg(long, value_name = "PRESET", value_parser = ["claude", "codex"])]
    pub agent: Option<String>,
    /// The model the preset asks for [default: the agent's own default].
    #[arg(long, value_name = "MODEL", requires = "agent")]
    pub agent_model: Option<String>,
    /// Any agent command instead of a preset (`{prompt}` is replaced by the prompt, else
    /// it is appended); takes every following argument, so put it last.
    #[arg(long, value_name = "CMD", num_args = 1.., allow_hyphen_values = true, conflicts_with = "agent")]
    pub agent_cmd: Option<Vec<String>>,
    /// Tests asked for per task.
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = count::<usize>)]
    pub per_task: usize,
    /// Splits whose tasks get tests (repeat or comma-separate) [default: all three].
    #[arg(long, value_delimiter = ',', value_parser = ["train", "val", "test"])]
    pub split: Vec<String>,
    /// Time limit of one agent call (one task), in seconds.
    #[arg(long, default_value_t = 900.0, value_name = "SECS")]
    pub agent_timeout: f64,
    /// Time limit of one test process, in seconds (also the new scorer's `timeout_s`).
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub test_timeout: f64,
    /// Trials of the initial harness run at the same time [default: number of cores].
    #[arg(long, value_name = "N", value_parser = count::<usize>)]
    pub jobs: Option<usize>,
    /// Serve the harness's and the agent's model calls as `[model]` in this hevo.toml says
    /// [default: the embedded local model if pulled, else none].
    #[arg(long, value_name = "HEVO_TOML", conflicts_with = "no_model")]
    pub model_config: Option<PathBuf>,
    /// Start no model gateway.
    #[arg(long)]
    pub no_model: bool,
    /// Print the report as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    /// Cgroup limits of each trial and agent call.
    #[command(flatten)]
    pub limits: crate::limit_args::LimitArgs,
}

/// Arguments of `hevo tests freeze`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Review the edit first: every trial scored by a re-frozen test is \
    run again (the lock's hashes are part of each task's content key).\n\nExample (on the \
    suite that `hevo tests synth examples/shell --harness examples/shell/harness-script \
    --agent claude --model-config claude.toml` writes, after editing one of its tests):\n  \
    hevo tests freeze examples/shell-tests"
)]
pub struct FreezeArgs {
    /// The suite whose `[scorer] lock` is rewritten.
    #[arg(value_name = "SUITE_DIR")]
    pub suite: PathBuf,
}

/// Runs `hevo tests`.
pub fn run(args: Args, cancel: &Cancel) -> Result<ExitCode, CliError> {
    match args.command {
        TestsCommand::Synth(a) => synth(*a, cancel),
        TestsCommand::Freeze(a) => freeze(a),
    }
}

fn to_cli(e: SynthError) -> CliError {
    if e.is_user_error() {
        CliError::User(e.into())
    } else {
        CliError::Internal(e.into())
    }
}

fn synth(args: SynthArgs, cancel: &Cancel) -> Result<ExitCode, CliError> {
    let out = match &args.out {
        Some(o) => o.clone(),
        None => {
            let name = args
                .suite
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "suite".into());
            args.suite
                .canonicalize()
                .ok()
                .and_then(|p| p.parent().map(|d| d.join(format!("{name}-tests"))))
                .unwrap_or_else(|| PathBuf::from(format!("{name}-tests")))
        }
    };
    let splits: Vec<Split> = if args.split.is_empty() {
        vec![Split::Train, Split::Val, Split::Test]
    } else {
        args.split.iter().filter_map(|s| Split::parse(s)).collect()
    };
    let agent_timeout =
        time_limit("`--agent-timeout`", args.agent_timeout).map_err(CliError::user)?;
    let test_timeout = time_limit("`--test-timeout`", args.test_timeout).map_err(CliError::user)?;
    let jobs = crate::num_args::jobs(args.jobs)?;
    let launcher = crate::launcher(args.limits.limits())?;
    let (command, env, install) = match (&args.agent_cmd, &args.agent) {
        (Some(cmd), _) => (absolute_program(cmd), Vec::new(), None),
        (None, Some(name)) => {
            let p = preset(
                name,
                args.agent_model.as_deref(),
                launcher.isolation() != "none",
            )
            .ok_or_else(|| CliError::user(format!("unknown agent preset `{name}`")))?;
            (p.command, p.env, Some(p.install))
        }
        (None, None) => {
            return Err(CliError::user(
                "give `--agent claude|codex` or `--agent-cmd CMD...`",
            ))
        }
    };
    let layer = model_layer_config(&args)?;
    if let (Some(name), None) = (&args.agent, &args.agent_cmd) {
        if let Some(why) = unserved(name, &layer) {
            return Err(CliError::user(format!(
                "--agent {name}: {why}; give that `[model]` in a hevo.toml with \
                 `--model-config FILE`, or use `--agent-cmd` for an agent the model can serve"
            )));
        }
    }
    check_agent(&command, install, args.agent_cmd.is_some())?;
    let out = tests_synth::prepare_out(&out, &args.suite).map_err(to_cli)?;
    let work = out.join(tests_synth::WORK_DIR);
    let model_dir = work.join("initial");
    std::fs::create_dir_all(&model_dir)
        .map_err(|e| CliError::user(format!("cannot create `{}`: {e}", model_dir.display())))?;
    let mut log = |line: &str| eprintln!("hevo: {line}");
    let model = ModelLayer::start_layer(&layer, &model_dir, cancel, &mut log)?;
    let opts = SynthOptions {
        suite_dir: args.suite.clone(),
        harness_dir: args.harness.clone(),
        out,
        splits,
        per_task: args.per_task,
        agent: SynthAgent {
            command,
            env,
            timeout: agent_timeout,
            model_env: model.proposer_env(&work.join("agent")),
        },
        test_timeout,
        jobs,
        model_access: model.access(),
        launcher,
        cancel: cancel.clone(),
    };
    let result = tests_synth::synth(&opts, &mut log);
    model.shutdown();
    let report = match result {
        Ok(r) => r,
        Err(SynthError::Interrupted(reason)) => {
            eprintln!(
                "hevo: stopped by {reason}; nothing was frozen. Run the same command again: \
                 the initial harness's finished trials are reused"
            );
            return Ok(ExitCode::from(reason.exit_code()));
        }
        Err(e) => return Err(to_cli(e)),
    };
    let mut stdout = std::io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer_pretty(&mut stdout, &report)
            .map_err(std::io::Error::from)
            .and_then(|_| writeln!(stdout))
    } else {
        write_report(&mut stdout, &report)
    };
    match written {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(CliError::Internal(e.into())),
    }
}

/// Checks that the agent's program can be started ([`check_program`]), naming the flag
/// the user typed (`--agent-cmd`, or `--agent` for a preset) and `--agent-cmd` as the place
/// to give another program.
/// `command` with a relative program path (`./my-agent.sh`) made absolute against the
/// current directory: the agent runs in a workspace of its own, where the path as typed
/// names nothing (the sandbox shows the program's folder, not other files the command
/// names). A bare name (`my-agent`) is found on `PATH` as before.
fn absolute_program(command: &[String]) -> Vec<String> {
    let mut out = command.to_vec();
    if let Some(program) = out.first_mut() {
        if program.contains('/') && Path::new(program.as_str()).is_relative() {
            if let Ok(abs) = std::path::absolute(program.as_str()) {
                *program = abs.to_string_lossy().into_owned();
            }
        }
    }
    out
}

fn check_agent(command: &[String], install: Option<&str>, own: bool) -> Result<(), CliError> {
    let flag = if own { "--agent-cmd" } else { "--agent" };
    check_program(command, install, "`--agent-cmd`")
        .map_err(|e| CliError::user(format!("{flag}: {e}")))
}

/// The model layer: `--model-config`'s `[model]`, none with `--no-model`, else the
/// embedded model when pulled.
fn model_layer_config(args: &SynthArgs) -> Result<ModelLayerConfig, CliError> {
    if args.no_model {
        return Ok(ModelLayerConfig::default());
    }
    if let Some(path) = &args.model_config {
        let (config, _) = RunConfig::load(path).map_err(|e| CliError::User(e.into()))?;
        return Ok(config.model.unwrap_or_else(ModelLayerConfig::local_default));
    }
    let pulled = hevo_llm::model_file::default_model_path(&hevo_llm::model_file::hevo_home());
    Ok(if pulled.is_file() {
        ModelLayerConfig::local_default()
    } else {
        ModelLayerConfig::default()
    })
}

fn write_report(out: &mut impl Write, r: &SynthReport) -> std::io::Result<()> {
    writeln!(
        out,
        "froze {} test(s) for {} task(s) into {} ({} dropped)",
        r.kept,
        r.tasks.len() - r.tasks_without_tests.len(),
        r.out.display(),
        r.dropped
    )?;
    for t in &r.tasks {
        writeln!(
            out,
            "  {:<16} {:<5} kept {:>2}/{:<2} agent {}",
            t.id,
            t.split,
            t.kept(),
            t.tests.len(),
            t.agent
        )?;
        for v in t.tests.iter().filter(|v| !v.kept) {
            writeln!(
                out,
                "      dropped {}: {}",
                v.file,
                v.why.as_deref().unwrap_or("")
            )?;
        }
    }
    if !r.tasks_without_tests.is_empty() {
        writeln!(
            out,
            "left out of the new suite (no test kept): {}",
            r.tasks_without_tests.join(", ")
        )?;
    }
    if let Some(rate) = r.initial_pass_rate {
        writeln!(
            out,
            "the initial harness passes {:.1}% of the kept tests (mean over tasks)",
            100.0 * rate
        )?;
    }
    writeln!(out, "lock: {}", r.lock.display())
}

fn freeze(args: FreezeArgs) -> Result<ExitCode, CliError> {
    let (lock, changed) = tests_synth::refreeze(&args.suite).map_err(to_cli)?;
    let changed = if changed == usize::MAX {
        "no readable lock before".to_string()
    } else {
        format!("{changed} file(s) differed from the old lock")
    };
    println!(
        "froze {} test file(s) in {} ({changed})",
        lock.files.len(),
        args.suite.display()
    );
    Ok(ExitCode::SUCCESS)
}
