//! `hevo`: search for better LLM harnesses at a fraction of the usual evaluation cost.

use clap::Parser;

/// Command-line arguments.
#[derive(Parser, Debug)]
#[command(
    name = "hevo",
    version,
    about = "Automated harness optimization, cheap and trustworthy"
)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
