//! libFuzzer entry for the `harness` target ([`hevo_fuzz::targets::harness`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = hevo_fuzz::targets::harness(data) {
        panic!("{broken}");
    }
});
