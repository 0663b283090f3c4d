//! `[objective]` and `[harnesspro]`: what the search optimizes (pass rate alone, or pass
//! rate and cost in three tiers) and HarnessPro's epoch loop (`docs/harnesspro.md`).

use hevo_stats::pareto::TIER_WEIGHTS;
use serde::Deserialize;

/// `[harnesspro]`: the epoch loop of HarnessPro (`docs/harnesspro.md`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HarnessProConfig {
    /// Epochs after epoch 0 (the seeds); replaces `[search] iterations`.
    #[serde(default = "default_epochs")]
    pub epochs: u32,
    /// Training tasks in each epoch's core set (chosen by greedy DPP).
    #[serde(default = "default_core_size")]
    pub core_size: u32,
    /// Runs of every core task per candidate (G).
    #[serde(default = "default_core_runs")]
    pub core_runs: u32,
}

fn default_epochs() -> u32 {
    3
}

fn default_core_size() -> u32 {
    10
}

fn default_core_runs() -> u32 {
    3
}

impl Default for HarnessProConfig {
    fn default() -> Self {
        HarnessProConfig {
            epochs: default_epochs(),
            core_size: default_core_size(),
            core_runs: default_core_runs(),
        }
    }
}

/// `[objective]`: what the search optimizes (`docs/harnesspro.md`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveConfig {
    /// `pass_rate` (the default: one pick) or `pareto` (lite, medium and heavy tiers).
    #[serde(default)]
    pub kind: ObjectiveKind,
    /// `[alpha, beta]` (weights of pass rate and cost) of the lite tier, as written (`None`:
    /// the default, [`ObjectiveConfig::weights`]).
    #[serde(default, deserialize_with = "two_weights")]
    pub lite: Option<[f64; 2]>,
    /// `[alpha, beta]` of the medium tier, as written.
    #[serde(default, deserialize_with = "two_weights")]
    pub medium: Option<[f64; 2]>,
    /// `[alpha, beta]` of the heavy tier, as written.
    #[serde(default, deserialize_with = "two_weights")]
    pub heavy: Option<[f64; 2]>,
}

impl ObjectiveConfig {
    /// `[alpha, beta]` of the lite, medium and heavy tiers, the defaults
    /// (`hevo_stats::pareto::TIER_WEIGHTS`: cost-leaning, balanced, pass-rate-leaning) where
    /// not written.
    pub fn weights(&self) -> [[f64; 2]; 3] {
        let [lite, medium, heavy] = TIER_WEIGHTS.map(|(a, b)| [a, b]);
        [
            self.lite.unwrap_or(lite),
            self.medium.unwrap_or(medium),
            self.heavy.unwrap_or(heavy),
        ]
    }
}

/// A tier's weights: exactly two numbers (a third was dropped without a word before).
fn two_weights<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<[f64; 2]>, D::Error> {
    let v = Vec::<f64>::deserialize(d)?;
    match v[..] {
        [alpha, beta] => Ok(Some([alpha, beta])),
        _ => Err(serde::de::Error::invalid_length(
            v.len(),
            &"two weights [alpha, beta], e.g. [1.0, 2.0]",
        )),
    }
}

/// What the search optimizes.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ObjectiveKind {
    /// The validation pass rate alone.
    #[default]
    PassRate,
    /// Pass rate and mean cost per task together: three tiers (SPEC section 3).
    Pareto,
}
