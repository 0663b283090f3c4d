//! Pure statistics for hevo: no IO, no clocks, explicit seeds.
//!
//! This crate holds the math that decides which validation tasks a candidate harness is
//! evaluated on and how its full-set score is estimated: sampling designs and inclusion
//! probabilities, the Task-CoEvolve weights, estimators with standard errors and intervals,
//! racing rules, Pareto tiers and DPP core-set selection. It must never read files, spawn
//! processes or look at the wall clock; its callers (`hevo-strategy`, `hevo-search`,
//! `hevo-runtime`) feed it numbers.
#![warn(missing_docs)]

pub mod design;
pub mod dpp;
pub mod estimate;
pub mod irt;
pub mod pareto;
pub mod racing;
pub mod rank;
pub mod seed;
pub mod selection;
pub mod synth;
pub mod weights;
