//! hevo's search: the Meta-Harness loop around the evaluation runtime.
//!
//! - [`config`]: `hevo.toml`, typed and validated;
//! - [`archive`]: the run's archive on disk (the only owner of its naming, `NNN-name`);
//! - [`proposer`]: everything that writes new candidates, behind one trait;
//! - [`run`]: the loop (Phase 0, iterations, validation, resume) driving a
//!   `hevo_strategy` strategy through a live oracle;
//! - [`runner`]: evaluates a batch of trials for the loop through `hevo_runtime`;
//! - [`finalize`]: the test split, once, after a search;
//! - [`outage`]: a provider outage told from a candidate's own upstream errors;
//! - [`objective`]: HarnessPro's pass-rate-and-cost objective and its lite / medium / heavy tiers;
//! - [`diagnose`]: the built-in analyzer of trial traces (measurable waste, no model);
//! - [`tests_synth`]: `hevo tests synth`, agent-written tests frozen into a locked suite;
//! - [`harnesspro`]: HarnessPro's epoch loop (core set, diagnosis, survivors, plans committed
//!   on git branches);
//! - [`view`]: what a run directory shows (`hevo report`, `status`, `show`, `ls`).
//!
//! This crate decides *what* to evaluate and keeps the archive; it runs nothing itself:
//! trials, the store and model access are `hevo-runtime`'s, the policy is
//! `hevo-strategy`'s, and the command line is `hevo-cli`'s.
#![warn(missing_docs)]

pub mod archive;
pub mod config;
pub mod diagnose;
pub mod finalize;
pub mod harnesspro;
pub mod objective;
pub mod outage;
pub mod proposer;
pub mod run;
pub mod runner;
pub mod tests_synth;
pub mod view;
