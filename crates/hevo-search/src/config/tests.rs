//! Unit tests of `hevo.toml` parsing: the documented defaults, and errors that name the
//! key, its line and the fix.

use super::*;

fn parse(text: &str) -> Result<RunConfig, ConfigError> {
    RunConfig::parse(text, Path::new("dir/hevo.toml"))
}

#[test]
fn minimal_config_gets_documented_defaults() {
    let c = parse("suite = \"suite\"\nseeds = [\"a\"]\n").unwrap();
    assert!(
        c.model.is_none(),
        "no [model] means the embedded local model"
    );
    assert_eq!(c.proposer.kind, "params");
    assert_eq!(c.search.iterations, 10);
    assert_eq!(c.search.candidates_per_iteration, 3);
    assert_eq!(c.evaluation.strategy, "recommended");
    assert_eq!(c.evaluation.rho, 0.2);
    assert_eq!(c.objective.kind, ObjectiveKind::PassRate);
    assert_eq!(c.objective.weights(), [[1.0, 2.0], [1.0, 1.0], [2.0, 1.0]]);
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let err = parse("suite = \"s\"\nseeds = [\"a\"]\n[search]\niteratons = 3\n").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("dir/hevo.toml:4:"), "{msg}");
    assert!(msg.contains("iteratons"), "{msg}");
}

#[test]
fn executor_limits_default_to_a_process_bound_only() {
    let c = parse("suite = \"s\"\nseeds = [\"a\"]\n").unwrap();
    assert_eq!(
        c.executor.limits(),
        hevo_runtime::cgroup::TrialLimits::default()
    );
    assert_eq!(c.executor.limits().pids, Some(1024));
    assert_eq!(c.executor.limits().disk_mb, Some(10240));
    let c = parse(
        "suite = \"s\"\nseeds = [\"a\"]\n[executor]\nmem_mb = 512\ncpus = 2\npids = 64\nio_mbps = 50\ndisk_mb = 300\n",
    )
    .unwrap();
    let l = c.executor.limits();
    assert_eq!(
        (l.memory_mb, l.cpus, l.pids, l.io_mbps, l.disk_mb),
        (Some(512), Some(2.0), Some(64), Some(50), Some(300))
    );
}

#[test]
fn bad_values_name_the_key_and_the_fix() {
    let cases = [
        ("[evaluation]\nstrategy = \"fast\"", "evaluation.strategy"),
        ("[evaluation]\nrho = 1.5", "evaluation.rho"),
        ("[proposer]\nkind = \"agent\"", "proposer.preset"),
        (
            "[proposer]\nkind = \"agent\"\npreset = \"claude\"\nenv = { HOME = \"/x\" }",
            "proposer.env",
        ),
        ("[search]\ntrials = 0", "search.trials"),
        (
            "[proposer]\npreset = \"claude\"",
            "hevo.toml:4: `proposer.preset` is set, but `proposer.kind` is `params`",
        ),
        (
            "[proposer]\nkind = \"llm\"\ncommand = [\"x\"]",
            "`proposer.command` is set, but `proposer.kind` is `llm`",
        ),
        ("[proposer]\nenv = { A = \"1\" }", "`proposer.env` is set"),
        ("[proposer]\nmax_tokens = 0", "`proposer.max_tokens` is 0"),
        ("[search]\ntrials = 10001", "between 1 and 10000"),
        ("[model]\nbackend = \"openai\"", "backend"),
        ("[budget]\nmax_usd = -1.0", "budget.max_usd"),
        (
            "[objective]\nkind = \"cost\"",
            "expected `pass_rate` or `pareto`",
        ),
        (
            "[objective]\nkind = \"pareto\"\nlite = [-1.0, 2.0]",
            "objective.lite",
        ),
        (
            "[objective]\nkind = \"pareto\"\nheavy = [1.0, 2.0, 3.0]",
            "hevo.toml:5:9: `objective.heavy`: invalid length 3, expected two weights",
        ),
        (
            "[objective]\nkind = \"pareto\"\nlite = [inf, 1.0]",
            "use two finite weights >= 0",
        ),
        (
            "[objective]\nlite = [1.0, 2.0]",
            "`objective.lite` is set, but `objective.kind` is `pass_rate`",
        ),
        ("[executor]\npids = 0", "executor.pids"),
        ("[executor]\ncpus = 0", "executor.cpus"),
        ("[executor]\nio_mbps = 0", "executor.io_mbps"),
        ("[executor]\ndisk_mb = 0", "executor.disk_mb"),
        ("[executor]\nmem_mb = 8", "executor.mem_mb"),
        ("[executor]\narray_max = 0", "`executor.array_max` is 0"),
        (
            "[executor]\nkind = \"slurm\"\nsbatch = [\"--qos=x\", \"-t 5\"]",
            "hevo.toml:5: `executor.sbatch` has `-t 5`, which sets `--time`",
        ),
        (
            "[executor]\nsbatch = [\"--qos=x\"]",
            "hevo.toml:4: `executor.sbatch` is set, but `executor.kind` is `local`",
        ),
        (
            "[executor]\nwrapper = []\narray_throttle = 4",
            "`executor.array_throttle` is set, but `executor.kind` is `local`",
        ),
        (
            "[executor]\nkind = \"slurm\"\nwrapper = [\"\"]",
            "`executor.wrapper` starts with an empty program",
        ),
        ("[executor]\npids = -1", "hevo.toml:4:8"),
        // Beyond what the kernel takes: every trial would fail to start, as infra_error.
        (
            "[executor]\npids = 99999999999",
            "`executor.pids` is 99999999999, above the kernel's limit of 4194304",
        ),
        (
            "[executor]\ncpus = 4294967295",
            "`executor.cpus` is 4294967295: use at most 4096",
        ),
        ("setup = []", "hevo.toml:3: `setup` is empty"),
        (
            "[[model.models]]\nname = \"m\"\nbackend = \"nope\"",
            "`model.models.0.backend` is `nope`, which no `[[model.backends]]` entry is named: \
             name one of the backends (there are none)",
        ),
        (
            "[[model.backends]]\nname = \"r\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"OPENROUTER_KEY\"",
            "`model.backends.0.api_key_env` is `OPENROUTER_KEY`, a name hevo does not keep \
             secret: name the variable so it ends in `_API_KEY`",
        ),
        (
            "[model.caps.trial]\nmax_cost_usd = nan",
            "hevo.toml:4: `model.caps.trial.max_cost_usd` is NaN",
        ),
        (
            "[model.caps.run]\nmax_cost_usd = -1.0",
            "`model.caps.run.max_cost_usd` is -1: use a number of dollars >= 0",
        ),
        ("setup = [\"\"]", "`setup` is empty"),
        ("[budget]\nmax_evaluations = 0", "budget.max_evaluations"),
        ("[budget]\nmax_wall_s = 0", "budget.max_wall_s"),
        ("[proposer]\ntimeout_s = 0", "proposer.timeout_s"),
        ("name = \"../../escape\"", "`name`"),
        ("name = \"\"", "`name`"),
        ("name = \"a/b\"", "`name`"),
        ("name = \"..\"", "`name`"),
        (
            "[proposer]\nkind = \"agent\"\npreset = \"claude\"\n[model]",
            "hevo.toml:6: `model` has no backend, but `[proposer] preset = \"claude\"`",
        ),
        (
            "[proposer]\nkind = \"llm\"\n[model]",
            "hevo.toml:5: `model` has no backend, but `[proposer] kind = \"llm\"`",
        ),
        (
            "[proposer]\nkind = \"agent\"\npreset = \"claude\"",
            "hevo.toml:5: `proposer.preset` is `claude`: Claude Code calls its model with tools",
        ),
    ];
    for (extra, key) in cases {
        let text = format!("suite = \"s\"\nseeds = [\"a\"]\n{extra}\n");
        let msg = parse(&text).unwrap_err().to_string();
        assert!(msg.contains(key), "{extra}: {msg}");
    }
}

/// An empty `[model]` is for runs whose proposer calls no model: the params proposer, or
/// an agent `command` of the user's own.
#[test]
fn an_empty_model_table_is_fine_for_a_proposer_that_calls_none() {
    for proposer in ["", "[proposer]\nkind = \"agent\"\ncommand = [\"my-agent\"]"] {
        let text = format!("suite = \"s\"\nseeds = [\"a\"]\n{proposer}\n[model]\n");
        assert!(parse(&text).is_ok(), "{proposer}: {:?}", parse(&text).err());
    }
}

/// A value out of range names its line, as a parse error does; a value of the wrong type
/// names its key (toml's own message names only the type) and where keys are listed.
#[test]
fn range_and_type_errors_name_the_line_and_the_key() {
    for (extra, want) in [
        (
            "[evaluation]\nrho = 1.5",
            "dir/hevo.toml:4: `evaluation.rho` is 1.5",
        ),
        (
            "[budget]\nmax_usd = -1.0",
            "dir/hevo.toml:4: `budget.max_usd`",
        ),
        (
            "[executor]\npids = 0",
            "dir/hevo.toml:4: `executor.pids` is 0",
        ),
        ("name = \"a/b\"", "dir/hevo.toml:3: `name` is \"a/b\""),
        (
            "[search]\niterations = \"x\"",
            "dir/hevo.toml:4:14: `search.iterations`: invalid type: string \"x\"",
        ),
        (
            "[executor]\npids = -1",
            "dir/hevo.toml:4:8: `executor.pids`: invalid value",
        ),
    ] {
        let text = format!("suite = \"s\"\nseeds = [\"a\"]\n{extra}\n");
        let msg = parse(&text).unwrap_err().to_string();
        assert!(msg.starts_with(want), "{extra}:\n{msg}\nwanted: {want}");
    }
    // A key the file does not hold (a missing choice) has no line to name.
    let msg = parse("suite = \"s\"\nseeds = [\"a\"]\n[proposer]\nkind = \"agent\"\n")
        .unwrap_err()
        .to_string();
    assert!(msg.starts_with("dir/hevo.toml: `proposer.preset`"), "{msg}");
}

#[test]
fn gateway_listeners_are_checked_with_their_line() {
    let at = |gw: &str| {
        parse(&format!(
            "suite = \"s\"\nseeds = [\"a\"]\n[gateway]\n{gw}\n"
        ))
        .map(|c| c.gateway.listen())
        .map_err(|e| e.to_string())
    };
    assert_eq!(at("").unwrap(), hevo_llm::Listen::default());
    let l = at("bind = \"0.0.0.0:0\"\nadvertise = \"http://login\"").unwrap();
    assert!(l.is_exposed());
    assert_eq!(l.advertise.as_deref(), Some("http://login"));
    assert!(at("bind = \"10.0.0.5:8400\"").is_ok());
    for (gw, says) in [
        ("bind = \"login:8400\"", "gateway.bind"),
        ("bind = \"0.0.0.0:8400\"", "gateway.advertise"),
        (
            "advertise = \"http://login:8400\"",
            "without `gateway.bind`",
        ),
        (
            "bind = \"0.0.0.0:1\"\nadvertise = \"login:8400\"",
            "http://",
        ),
        ("bnd = \"0.0.0.0:1\"", "bnd"),
    ] {
        let msg = at(gw).unwrap_err();
        assert!(msg.contains("dir/hevo.toml:"), "{gw}: {msg}");
        assert!(msg.contains(says), "{gw}: {msg}");
    }
    // The location is the `[gateway]` table's line (the checks span its keys).
    let msg = at("bind = \"nope\"").unwrap_err();
    assert!(msg.contains("dir/hevo.toml:3:"), "{msg}");
}

#[test]
fn empty_seeds_are_rejected() {
    let msg = parse("suite = \"s\"\nseeds = []\n")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("seeds"), "{msg}");
}
