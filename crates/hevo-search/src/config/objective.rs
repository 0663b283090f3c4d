//! `[objective]` and `[harnesspro]`: what the search optimizes (pass rate alone, or pass
//! rate and cost in three tiers) and HarnessPro's epoch loop (`docs/harnesspro.md`).

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
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveConfig {
    /// `pass_rate` (the default: one pick) or `pareto` (lite, medium and heavy tiers).
    #[serde(default)]
    pub kind: ObjectiveKind,
    /// `[alpha, beta]` (weights of pass rate and cost) of the lite tier.
    #[serde(default = "default_lite")]
    pub lite: [f64; 2],
    /// `[alpha, beta]` of the medium tier.
    #[serde(default = "default_medium")]
    pub medium: [f64; 2],
    /// `[alpha, beta]` of the heavy tier.
    #[serde(default = "default_heavy")]
    pub heavy: [f64; 2],
}

fn default_lite() -> [f64; 2] {
    [1.0, 2.0]
}

fn default_medium() -> [f64; 2] {
    [1.0, 1.0]
}

fn default_heavy() -> [f64; 2] {
    [2.0, 1.0]
}

impl Default for ObjectiveConfig {
    fn default() -> Self {
        ObjectiveConfig {
            kind: ObjectiveKind::default(),
            lite: default_lite(),
            medium: default_medium(),
            heavy: default_heavy(),
        }
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
