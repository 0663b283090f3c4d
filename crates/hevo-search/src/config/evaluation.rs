//! `[evaluation]`: which tasks each candidate sees and how its score is estimated, and the
//! strategy these keys name.

use hevo_strategy::strategy::StrategyKind;
use hevo_strategy::vocab::{parse_estimator, StrategyName, StrategyOptions, UnknownName};
use serde::Deserialize;

/// `[evaluation]`: which tasks each candidate sees and how its score is estimated.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EvaluationConfig {
    /// A strategy name of [`hevo_strategy::vocab::StrategyName`]; `recommended` (the
    /// default) is `default`.
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// Share of the validation tasks a sampling strategy evaluates per candidate.
    #[serde(default = "default_rho")]
    pub rho: f64,
    /// Estimator for `coevolve`: a name of [`hevo_strategy::vocab::ESTIMATORS`].
    #[serde(default = "default_estimator")]
    pub estimator: String,
}

fn default_strategy() -> String {
    "recommended".into()
}

fn default_rho() -> f64 {
    0.2
}

fn default_estimator() -> String {
    "auto".into()
}

impl EvaluationConfig {
    /// The strategy this section names, with its options (validated names; an unknown name
    /// is an error naming what is accepted).
    pub fn kind(&self) -> Result<StrategyKind, UnknownName> {
        let name: StrategyName = self.strategy.parse()?;
        let options = StrategyOptions {
            estimator: parse_estimator(&self.estimator)?,
            ..StrategyOptions::default()
        };
        Ok(name.kind(&options))
    }
}

impl Default for EvaluationConfig {
    fn default() -> Self {
        EvaluationConfig {
            strategy: default_strategy(),
            rho: default_rho(),
            estimator: default_estimator(),
        }
    }
}
