//! hevo's engine: everything between the command line and the math.
//!
//! Task suites and scorers, the harness protocol, trials and executors, the SQLite store and
//! the archive, evaluation strategies, proposers, the search loop and offline replay. The
//! statistics live in `hevo-stats` (pure), the model layer in `hevo-llm`; the binary in
//! `hevo-cli` only parses arguments and renders output.
#![warn(missing_docs)]

pub mod eval;
pub mod executor;
pub mod harness;
pub mod model_access;
pub mod proposer;
pub mod scorer;
pub mod search;
pub mod store;
pub mod suite;
pub mod trial;
