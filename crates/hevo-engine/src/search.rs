//! The search loop (Meta-Harness, SPEC.md section 1): configuration, archive, the loop
//! itself, how it gets trials run, and the final test evaluation.

pub mod archive;
pub mod config;
pub mod finalize;
pub mod llm_proposer;
pub mod proposers;
pub mod run;
pub mod runner;
