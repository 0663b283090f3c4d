//! hevo's evaluation policy: which validation tasks each candidate is evaluated on, and how
//! its full-set score is estimated.
//!
//! - [`strategy`]: the strategies (`full`, `fixed`, `resample`, `coevolve`, `screen`,
//!   `race`, `default`) as synchronous policy objects that ask an [`strategy::Oracle`] for
//!   batches of outcomes. The live search and replay drive the same code.
//! - [`vocab`]: the one vocabulary of strategy and estimator names, shared by `hevo.toml`,
//!   the command line and replay.
//! - [`replay`]: offline evaluation of strategies on a logged outcome matrix.
//! - [`frontier`]: the (strategy, rho) settings of several replays that pick best for what
//!   they spend.
//! - [`matches`]: for each peer setting, the cheapest `default` setting that picks as well.
//!
//! This crate depends on `hevo-stats` only: no async runtime, no model, no store, so a new
//! strategy is written and tested here without building llama.cpp.
#![warn(missing_docs)]

pub mod frontier;
pub mod matches;
pub mod matrix;
pub mod replay;
#[cfg(test)]
mod replay_fixtures;
pub mod strategy;
pub mod vocab;
