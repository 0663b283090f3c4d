//! Proposers: where new candidate harnesses come from.
//!
//! A proposer looks at what has been evaluated so far and suggests the next candidates.
//! `params` is built in and offline: an evolutionary search over the `[params]` a harness
//! declares. It never sees test outcomes; it only receives validation estimates.

pub mod agent;
pub mod params;
pub mod params_writer;
