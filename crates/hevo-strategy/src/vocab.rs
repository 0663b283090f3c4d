//! The one vocabulary of strategy and estimator names.
//!
//! `hevo.toml` (`[evaluation] strategy`, `estimator`), `hevo run --strategy`, and `hevo
//! replay --strategy/--estimator` all parse names here, so a name accepted in one place is
//! accepted in all of them and an unknown name is refused with the list of accepted ones.

use std::fmt;
use std::str::FromStr;

use hevo_stats::estimate::Estimator;

use crate::strategy::{PiMethod, StrategyKind};

/// A strategy as users name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StrategyName {
    /// Every candidate on every task.
    Full,
    /// Naive: one fixed uniform subset for the whole run.
    Fixed,
    /// Random-Resample: a fresh uniform subset each iteration.
    Resample,
    /// Task-CoEvolve (paper-faithful).
    Coevolve,
    /// GEPA's minibatch screen.
    Screen,
    /// Paired racing under one global budget.
    Race,
    /// The recommended strategy (also accepted as `recommended`).
    Default,
}

impl StrategyName {
    /// Every strategy, in the order reports list them.
    pub const ALL: [StrategyName; 7] = [
        StrategyName::Full,
        StrategyName::Fixed,
        StrategyName::Resample,
        StrategyName::Coevolve,
        StrategyName::Screen,
        StrategyName::Race,
        StrategyName::Default,
    ];

    /// The name written in configs and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyName::Full => "full",
            StrategyName::Fixed => "fixed",
            StrategyName::Resample => "resample",
            StrategyName::Coevolve => "coevolve",
            StrategyName::Screen => "screen",
            StrategyName::Race => "race",
            StrategyName::Default => "default",
        }
    }

    /// The strategy with its options filled in from `options`.
    pub fn kind(self, options: &StrategyOptions) -> StrategyKind {
        match self {
            StrategyName::Full => StrategyKind::Full,
            StrategyName::Fixed => StrategyKind::Fixed,
            StrategyName::Resample => StrategyKind::Resample,
            StrategyName::Coevolve => StrategyKind::Coevolve {
                estimator: options.estimator,
                pi: options.pi,
            },
            StrategyName::Screen => StrategyKind::Screen {
                minibatch: options.minibatch.max(1),
            },
            StrategyName::Race => StrategyKind::Race,
            StrategyName::Default => StrategyKind::Default,
        }
    }

    /// The accepted names, for error messages and `--help`.
    pub fn accepted() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|s| s.as_str()).collect();
        format!("{} (`recommended` is `default`)", names.join(", "))
    }
}

impl fmt::Display for StrategyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StrategyName {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "recommended" {
            return Ok(StrategyName::Default);
        }
        Self::ALL
            .iter()
            .copied()
            .find(|n| n.as_str() == s)
            .ok_or_else(|| UnknownName {
                what: "strategy",
                given: s.to_string(),
                accepted: Self::accepted(),
            })
    }
}

/// The options a strategy name leaves open.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StrategyOptions {
    /// `coevolve`'s estimator; `None` is `auto` (chosen per stratum).
    pub estimator: Option<Estimator>,
    /// `coevolve`'s inclusion probabilities.
    pub pi: PiMethod,
    /// `screen`'s minibatch size (GEPA's default is 3).
    pub minibatch: usize,
}

impl Default for StrategyOptions {
    fn default() -> Self {
        StrategyOptions {
            estimator: Some(Estimator::Hajek),
            pi: PiMethod::MonteCarlo(4000),
            minibatch: 3,
        }
    }
}

/// Estimator names `coevolve` accepts, in the order reports list them.
pub const ESTIMATORS: [&str; 4] = ["hajek", "residual", "hajek-residual", "auto"];

/// Parses an estimator name; `auto` is `None` (chosen per stratum).
pub fn parse_estimator(s: &str) -> Result<Option<Estimator>, UnknownName> {
    match s {
        "hajek" => Ok(Some(Estimator::Hajek)),
        "residual" => Ok(Some(Estimator::Residual)),
        "hajek-residual" => Ok(Some(Estimator::HajekResidual)),
        "auto" => Ok(None),
        other => Err(UnknownName {
            what: "estimator",
            given: other.to_string(),
            accepted: ESTIMATORS.join(", "),
        }),
    }
}

/// Parses an inclusion-probability method: `mc` (Monte Carlo with `draws` draws) or `exact`.
pub fn parse_pi(s: &str, draws: usize) -> Result<PiMethod, UnknownName> {
    match s {
        "mc" => Ok(PiMethod::MonteCarlo(draws.max(1))),
        "exact" => Ok(PiMethod::Exact),
        other => Err(UnknownName {
            what: "pi method",
            given: other.to_string(),
            accepted: "mc, exact".into(),
        }),
    }
}

/// A name that is not in the vocabulary.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{given}`; use {accepted}")]
pub struct UnknownName {
    /// What kind of name (`strategy`, `estimator`, ...).
    pub what: &'static str,
    /// The name given.
    pub given: String,
    /// The accepted names.
    pub accepted: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips_and_recommended_is_default() {
        for n in StrategyName::ALL {
            assert_eq!(n.as_str().parse::<StrategyName>().unwrap(), n);
        }
        assert_eq!(
            "recommended".parse::<StrategyName>().unwrap(),
            StrategyName::Default
        );
    }

    #[test]
    fn unknown_names_list_what_is_accepted() {
        let e = "racing".parse::<StrategyName>().unwrap_err();
        assert_eq!(e.given, "racing");
        assert!(e.to_string().contains("screen"), "{e}");
        let e = parse_estimator("hajek2").unwrap_err();
        assert!(e.to_string().contains("hajek-residual"), "{e}");
        for name in ESTIMATORS {
            parse_estimator(name).unwrap();
        }
    }
}
