//! The process's one async runtime.
//!
//! hevo's control flow is synchronous (the search loop, strategies, the CLI); the work that
//! waits (trials, the gateway, agent proposers, signals) runs on a single multi-threaded
//! tokio runtime made on first use and kept for the life of the process. Synchronous code
//! enters it with [`block_on`]; it must not be called from inside an async task.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::Runtime;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The process runtime (one worker per core, at least two, so a blocking caller and the
/// gateway never starve each other).
pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cores.max(2))
            .thread_name("hevo-rt")
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("cannot start hevo's async runtime: {e}"))
    })
}

/// Runs `future` to completion on the process runtime, from synchronous code.
pub fn block_on<F: Future>(future: F) -> F::Output {
    runtime().block_on(future)
}
