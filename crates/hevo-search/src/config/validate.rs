//! The checks of every value of a `hevo.toml` beyond its types (ranges, names, the keys
//! each choice needs), run after parsing and again after command-line overrides.

use std::path::Path;

use hevo_llm::ModelLayerConfig;
use hevo_strategy::vocab::{parse_estimator, StrategyName};

use super::proposer::RESERVED_AGENT_VARS;
use super::{ConfigError, ObjectiveKind, RunConfig};

impl RunConfig {
    /// Checks every value (after command-line overrides, too).
    pub fn validate(&self, file: &Path) -> Result<(), ConfigError> {
        let bad = |key: &str, problem: String| ConfigError::invalid(file, key, problem);
        if self.seeds.is_empty() {
            return Err(bad(
                "seeds",
                "is empty: list at least one starting harness directory".into(),
            ));
        }
        if let Some(setup) = &self.setup {
            if setup.first().is_none_or(|program| program.is_empty()) {
                return Err(bad(
                    "setup",
                    "is empty: give the program that builds the suite and its arguments, e.g. \
                     [\"python3\", \"make_suite.py\"], or remove `setup`"
                        .into(),
                ));
            }
        }
        if let Some(name) = &self.name {
            // The run directory is runs/<name> beside the config: one plain path component.
            let plain = !name.is_empty()
                && name != "."
                && name != ".."
                && !name.contains(['/', '\\'])
                && !name.chars().any(char::is_control);
            if !plain {
                return Err(bad(
                    "name",
                    format!(
                        "is {name:?}: the run is kept in runs/<name>, so use a plain name \
                         without `/`, e.g. \"threshold-v2\" (or --run-dir for another place)"
                    ),
                ));
            }
        }
        if !["params", "agent", "llm"].contains(&self.proposer.kind.as_str()) {
            return Err(bad(
                "proposer.kind",
                format!(
                    "is `{}`: use `params`, `agent` or `llm`",
                    self.proposer.kind
                ),
            ));
        }
        if self.proposer.kind != "agent" {
            // Read only by an agent proposer: set with another kind, it was likely meant to
            // choose one, and would be ignored without a word.
            let agent_keys = [
                ("proposer.preset", self.proposer.preset.is_some()),
                ("proposer.command", self.proposer.command.is_some()),
                ("proposer.env", !self.proposer.env.is_empty()),
            ];
            if let Some((key, _)) = agent_keys.iter().find(|(_, set)| *set) {
                return Err(bad(
                    key,
                    format!(
                        "is set, but `proposer.kind` is `{}`: it is read only with \
                         kind = \"agent\"; set that, or remove it",
                        self.proposer.kind
                    ),
                ));
            }
        }
        if self.proposer.max_tokens == 0 {
            return Err(bad(
                "proposer.max_tokens",
                "is 0: give the most tokens of the llm proposer's reply, at least 1 (default \
                 8192)"
                    .into(),
            ));
        }
        if self.proposer.kind == "agent" {
            match (&self.proposer.preset, &self.proposer.command) {
                (None, None) => {
                    return Err(bad("proposer.preset", "is missing: an `agent` proposer needs `preset = \"claude\"` or `\"codex\"`, or a `command`".into()))
                }
                (Some(p), None) if p != "claude" && p != "codex" => {
                    return Err(bad("proposer.preset", format!("is `{p}`: use `claude` or `codex`, or give a `command`")))
                }
                (_, Some(c)) if c.is_empty() => return Err(bad("proposer.command", "is empty: give the program and its arguments".into())),
                _ => {}
            }
        }
        // A proposer that calls a model does so through the gateway: an empty `[model]`
        // (no backend, on purpose: runs whose proposer needs none) leaves it nothing to
        // call, and it would fail only after phase 0.
        let caller = match (self.proposer.kind.as_str(), &self.proposer.preset) {
            ("llm", _) => Some("`[proposer] kind = \"llm\"`".to_string()),
            ("agent", Some(p)) if self.proposer.command.is_none() => {
                Some(format!("`[proposer] preset = \"{p}\"`"))
            }
            _ => None,
        };
        if let (Some(caller), Some(layer)) = (caller, &self.model) {
            if layer.backends.is_empty() {
                return Err(bad(
                    "model",
                    format!(
                        "has no backend, but {caller} calls its model through hevo's gateway: \
                         add a backend and a route (docs/models.md), or remove `[model]` to \
                         use the embedded local model"
                    ),
                ));
            }
        }
        for name in self.proposer.env.keys() {
            if RESERVED_AGENT_VARS.contains(&name.as_str()) {
                return Err(bad(
                    "proposer.env",
                    format!("sets `{name}`, which hevo sets for the agent: remove it"),
                ));
            }
        }
        if let (Some(p), None) = (&self.proposer.preset, &self.proposer.command) {
            let layer = self
                .model
                .clone()
                .unwrap_or_else(ModelLayerConfig::local_default);
            if let Some(why) = crate::proposer::agent_preset::unserved(p, &layer) {
                return Err(bad("proposer.preset", format!("is `{p}`: {why}")));
            }
        }
        if self.search.candidates_per_iteration == 0 {
            return Err(bad(
                "search.candidates_per_iteration",
                "is 0: use at least 1".into(),
            ));
        }
        if let Some(problem) = hevo_runtime::limits::trials_problem(self.search.trials) {
            return Err(bad("search.trials", problem));
        }
        if self.search.jobs == Some(0) {
            return Err(bad(
                "search.jobs",
                "is 0: use at least 1, or leave it out for the number of cores".into(),
            ));
        }
        if let Err(e) = self.evaluation.strategy.parse::<StrategyName>() {
            return Err(bad("evaluation.strategy", e.to_string()));
        }
        if !(self.evaluation.rho > 0.0 && self.evaluation.rho <= 1.0) {
            return Err(bad(
                "evaluation.rho",
                format!(
                    "is {}: use a share in (0, 1], e.g. 0.2",
                    self.evaluation.rho
                ),
            ));
        }
        if let Err(e) = parse_estimator(&self.evaluation.estimator) {
            return Err(bad("evaluation.estimator", e.to_string()));
        }
        let o = &self.objective;
        for (tier, w) in [("lite", o.lite), ("medium", o.medium), ("heavy", o.heavy)] {
            let Some(w) = w else { continue };
            let key = format!("objective.{tier}");
            if o.kind != ObjectiveKind::Pareto {
                // Read only by the tiers: set without them, it would be ignored.
                return Err(bad(
                    &key,
                    "is set, but `objective.kind` is `pass_rate`: the tier weights are read \
                     only with `kind = \"pareto\"`; add that, or remove them"
                        .into(),
                ));
            }
            if !w.iter().all(|x| x.is_finite() && *x >= 0.0) || w == [0.0, 0.0] {
                return Err(bad(
                    &key,
                    format!("is {w:?}: use two finite weights >= 0, not both 0, e.g. [1.0, 2.0]"),
                ));
            }
        }
        // Its upper bound is the cluster's MaxArraySize, checked at start (cluster.rs).
        if self.executor.array_max == Some(0) {
            return Err(bad(
                "executor.array_max",
                "is 0: use 1 (no arrays) up to the cluster's MaxArraySize".into(),
            ));
        }
        for (key, v) in [
            ("executor.cpus", self.executor.cpus.map(u64::from)),
            ("executor.mem_mb", self.executor.mem_mb),
            ("executor.pids", self.executor.pids),
            ("executor.io_mbps", self.executor.io_mbps),
            ("executor.disk_mb", self.executor.disk_mb),
        ] {
            if v == Some(0) {
                return Err(bad(
                    key,
                    "is 0, which no trial can run with: use at least 1, or leave it out for \
                     the default"
                        .into(),
                ));
            }
        }
        use hevo_runtime::cgroup::TrialLimits;
        if let Some(n) = self.executor.pids.filter(|n| *n > TrialLimits::MAX_PIDS) {
            return Err(bad(
                "executor.pids",
                format!(
                    "is {n}, above the kernel's limit of {} processes: use at most that, or \
                     leave it out for {}",
                    TrialLimits::MAX_PIDS,
                    TrialLimits::DEFAULT_PIDS
                ),
            ));
        }
        if let Some(n) = self.executor.cpus.filter(|n| *n > TrialLimits::MAX_CPUS) {
            return Err(bad(
                "executor.cpus",
                format!(
                    "is {n}: use at most {} CPUs, or leave it out for no limit",
                    TrialLimits::MAX_CPUS
                ),
            ));
        }
        if self.executor.mem_mb.is_some_and(|mb| mb < 16) {
            return Err(bad(
                "executor.mem_mb",
                "is below 16 MB, too little for any interpreter to start: use e.g. 2048".into(),
            ));
        }
        let ex = &self.executor;
        if ex.kind == super::ExecutorKind::Local {
            // Read only by the Slurm executor: set for a local one, it was likely meant to
            // choose Slurm, and would be ignored without a word.
            let slurm_keys = [
                ("executor.partition", ex.partition.is_some()),
                ("executor.account", ex.account.is_some()),
                ("executor.sbatch", !ex.sbatch.is_empty()),
                ("executor.wrapper", !ex.wrapper.is_empty()),
                ("executor.array_max", ex.array_max.is_some()),
                ("executor.array_throttle", ex.array_throttle.is_some()),
            ];
            if let Some((key, _)) = slurm_keys.iter().find(|(_, set)| *set) {
                return Err(bad(
                    key,
                    "is set, but `executor.kind` is `local`: it is read only with kind = \
                     \"slurm\"; set that, or remove it"
                        .into(),
                ));
            }
        }
        if ex
            .wrapper
            .first()
            .is_some_and(|program| program.trim().is_empty())
        {
            return Err(bad(
                "executor.wrapper",
                "starts with an empty program: give the command each job runs inside, e.g. \
                 [\"apptainer\", \"exec\", \"img.sif\"], or remove it"
                    .into(),
            ));
        }
        for entry in &self.executor.sbatch {
            if let Some((option, instead)) = hevo_runtime::slurm::hevo_sets(entry) {
                return Err(bad(
                    "executor.sbatch",
                    format!(
                        "has `{entry}`, which sets `{option}`: hevo sets `{option}` itself on \
                         sbatch's command line, where it wins over `#SBATCH` lines; remove it \
                         (what sets it: {instead})"
                    ),
                ));
            }
        }
        if self.executor.array_throttle == Some(0) {
            return Err(bad(
                "executor.array_throttle",
                "is 0: use at least 1, or leave it out for no limit".into(),
            ));
        }
        if let Some(h) = &self.harnesspro {
            if self.objective.kind != ObjectiveKind::Pareto {
                return Err(bad(
                    "harnesspro",
                    "needs `[objective] kind = \"pareto\"`: add it, or remove `[harnesspro]`"
                        .into(),
                ));
            }
            for (key, v) in [
                ("harnesspro.core_size", h.core_size),
                ("harnesspro.core_runs", h.core_runs),
            ] {
                if v == 0 {
                    return Err(bad(key, "is 0: use at least 1".into()));
                }
            }
        }
        for (key, v) in [
            ("budget.max_evaluations", self.budget.max_evaluations),
            ("budget.max_wall_s", self.budget.max_wall_s),
        ] {
            if v == Some(0) {
                return Err(bad(
                    key,
                    "is 0, which stops the run before it starts: use a positive limit, or \
                     leave it out for none"
                        .into(),
                ));
            }
        }
        if self.proposer.timeout_s == 0 {
            return Err(bad(
                "proposer.timeout_s",
                "is 0, which stops every proposer at once: use seconds, e.g. 1800".into(),
            ));
        }
        if let Some(layer) = &self.model {
            // The gateway checks routes when it starts, but with no backend it never starts:
            // a route to nothing would be found only by the first harness that calls it.
            for (i, route) in layer.models.iter().enumerate() {
                if !layer.backends.iter().any(|b| b.name == route.backend) {
                    return Err(bad(
                        &format!("model.models.{i}.backend"),
                        format!(
                            "is `{}`, which no `[[model.backends]]` entry is named: name one \
                             of the backends ({}), or add that backend",
                            route.backend,
                            if layer.backends.is_empty() {
                                "there are none".to_string()
                            } else {
                                layer
                                    .backends
                                    .iter()
                                    .map(|b| format!("`{}`", b.name))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            }
                        ),
                    ));
                }
            }
            for (i, backend) in layer.backends.iter().enumerate() {
                let Some(var) = backend.api_key_env.as_deref() else {
                    continue;
                };
                if !hevo_runtime::custody::is_secret_name(var) {
                    // Custody hides variables by name at start-up, before the config is read:
                    // one it does not know stays in the environment of every helper hevo
                    // starts (`setup`, `git`, `pip`, Slurm's commands).
                    return Err(bad(
                        &format!("model.backends.{i}.api_key_env"),
                        format!(
                            "is `{var}`, a name hevo does not keep secret: name the variable \
                             so it ends in `_API_KEY` (or `_AUTH_TOKEN`, `_ACCESS_TOKEN`, \
                             `_SECRET_KEY`, `_SESSION_TOKEN`), e.g. `{}_API_KEY`, and export \
                             the key under that name",
                            var.trim_end_matches("_KEY").trim_end_matches('_')
                        ),
                    ));
                }
            }
            for (scope, caps) in [("trial", &layer.caps.trial), ("run", &layer.caps.run)] {
                if let Some(v) = caps.max_cost_usd.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                    // A NaN cap is never reached: the run would spend without a limit.
                    return Err(bad(
                        &format!("model.caps.{scope}.max_cost_usd"),
                        format!("is {v}: use a number of dollars >= 0, e.g. 0.05"),
                    ));
                }
            }
        }
        if let Some(v) = self.budget.max_usd {
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(
                    "budget.max_usd",
                    format!("is {v}: use a positive number of dollars"),
                ));
            }
        }
        Ok(())
    }
}
