//! hevo's fuzz targets for libFuzzer (`cargo fuzz run TARGET`, see `fuzz/run.sh`); the same
//! functions run in the short CI mode of `crates/hevo-cli/tests/fuzz_short.rs`.

pub mod targets;
