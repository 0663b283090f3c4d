//! libFuzzer entry for the `gateway` target ([`hevo_fuzz::targets::gateway`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = hevo_fuzz::targets::gateway(data) {
        panic!("{broken}");
    }
});
