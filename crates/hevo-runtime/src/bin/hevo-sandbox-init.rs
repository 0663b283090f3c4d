//! The sandbox init as its own small binary (for tests and for embedding hevo-runtime
//! without the `hevo` binary); `hevo` itself serves the same role.

fn main() {
    hevo_runtime::sandbox_init::run_if_asked();
    eprintln!(
        "hevo-sandbox-init is started by hevo inside a sandbox: {} -- COMMAND",
        hevo_runtime::sandbox::INIT_ARG
    );
    std::process::exit(2);
}
