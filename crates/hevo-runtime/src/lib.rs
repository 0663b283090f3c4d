//! hevo's evaluation runtime: running harnesses on tasks and recording what happened.
//!
//! - [`task`]: a task and its split (types only);
//! - [`suite`]: task suites (tasks, splits, groups) loaded and validated;
//! - [`harness`]: the harness manifest (`harness.toml`), its only reader and writer;
//! - [`scorer`]: turning an answer into an outcome (`label`, `exact`, `command`, `program`);
//! - [`launch`]: the one seam through which every trial-side process starts
//!   ([`launch::Launcher`]; the sandbox wraps it), its environment and process-group kill;
//! - [`cgroup`]: one cgroup per launch (memory, processes, CPU, IO), killed as a whole;
//! - [`disk`]: the disk limit of each launch (what its folders hold, its largest file);
//! - [`sandbox`]: the bubblewrap [`launch::Launcher`] (own namespaces, only the gateway on the
//!   network) and [`sandbox_init`], its init inside;
//! - [`slurm`]: the launcher that runs every process as a job of a Slurm cluster;
//! - [`trial`]: one harness process on one task (working directory, environment, limits);
//! - [`untrusted`]: copying and reading what an untrusted process wrote, never following a
//!   link or opening a FIFO or device;
//! - [`executor`]: running many trials in parallel, longest first;
//! - [`model_access`]: the gateway key of each trial and its spend;
//! - [`store`]: the SQLite store (one writer, exact resume);
//! - [`custody`]: provider keys hidden from `/proc/<hevo>/environ` at start-up;
//! - [`run_lock`]: one hevo per run directory;
//! - [`limits`]: the bounds on durations and trial counts users give;
//! - [`cancel`]: the process's one cancellation token, with its reason;
//! - [`rt`]: the process's one async runtime;
//! - [`evaluator`]: an evaluation context kept open across batches (store, suite,
//!   candidates, `prepare`); the search holds one for the whole run;
//! - [`eval`]: `hevo eval`: plan (validate everything) and run one batch;
//! - [`report`]: an evaluation's result, read back from the store;
//! - [`failures`]: the trials that did not pass or fail, by class, with the first of each;
//! - [`spend`]: model calls, tokens and dollars, the one type for them.
//!
//! It knows nothing of strategies or of the search: those are `hevo-strategy` and
//! `hevo-search`, which call into this crate.
#![warn(missing_docs)]

pub mod cancel;
pub mod cgroup;
pub mod custody;
pub mod descriptors;
pub mod disk;
pub mod eval;
pub mod evaluator;
pub mod executor;
pub mod failures;
pub mod harness;
pub mod launch;
pub mod limits;
pub mod model_access;
mod prepare;
pub mod printable;
pub mod remove;
pub mod report;
pub mod rt;
pub mod run_lock;
pub mod run_place;
pub mod sandbox;
pub mod sandbox_init;
mod sandbox_relay;
pub mod scorer;
pub mod slurm;
pub mod spend;
mod stop;
pub mod store;
pub mod suite;
pub mod task;
pub mod tests_lock;
pub mod toml_line;
pub mod trial;
pub mod untrusted;
