//! libFuzzer entry for the `matrix` target ([`hevo_fuzz::targets::matrix`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = hevo_fuzz::targets::matrix(data) {
        panic!("{broken}");
    }
});
