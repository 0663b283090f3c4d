//! libFuzzer entry for the `config` target ([`hevo_fuzz::targets::config`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = hevo_fuzz::targets::config(data) {
        panic!("{broken}");
    }
});
