//! libFuzzer entry for the `suite` target ([`hevo_fuzz::targets::suite`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = hevo_fuzz::targets::suite(data) {
        panic!("{broken}");
    }
});
