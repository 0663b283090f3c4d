//! HarnessPro's epoch loop (SPEC.md section 3, `docs/harnesspro.md`): under
//! `[objective] kind = "pareto"` with a `[harnesspro]` table, every iteration of the search
//! is an epoch whose children come from here instead of the proposer alone.
//!
//! ```text
//! epoch 0: the seeds (phase 0 of the search, the strategy's val evaluation)
//! epoch e: pool = initial harness + last epoch's survivors + last epoch's children
//!     core set: greedy DPP over the train tasks (core_set.rs)      -> store `decisions`
//!     each pool candidate runs every core task G times (the store memoizes)
//!     diagnosis: built-in analyzer, and the agent if one is configured (agent_diagnosis.rs)
//!     selection: tiers on the strategy's val estimates and val cost  -> <= 3 survivors
//!     per survivor, instructions I1 / I2 / I3 (plan.rs): the agent plans and edits a copy
//!     of the survivor's branch; hevo copies its files out and commits them on a branch of
//!     its own repository (worktree.rs)                            -> pending/
//! the search validates, archives and evaluates the children with its strategy, as usual
//! ```
//!
//! [`epoch`] holds the step; the search loop (`run/`) only dispatches to it.

pub mod agent_diagnosis;
pub mod core_set;
pub mod epoch;
pub mod plan;
pub mod worktree;

pub use epoch::{EpochRecord, Epochs};
