//! The fuzz targets' short CI mode, no nightly needed: every seed of `fuzz/corpus/<target>/`
//! (real files: the examples, replay samples, bodies the real SDKs send, and the regression
//! inputs of bugs found) and a few thousand seeded mutations of them (bit flips,
//! truncations, splices, huge numbers, invalid UTF-8, a BOM, deep nesting) go through the
//! same target functions libFuzzer runs (`fuzz/src/targets.rs`). A panic or a broken promise
//! (an error not naming its file, a line outside the input) fails the test and leaves the
//! input in the target's temporary directory. `HEVO_FUZZ_ITERS` sets the mutations per
//! target (default 2000); `fuzz/run.sh` is the long libFuzzer run (bench/fuzz.md).

#[path = "../../../fuzz/src/targets.rs"]
#[allow(dead_code)]
mod targets;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// A small seeded generator (xorshift64*): the same seed gives the same mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Tokens that break parsers: huge and odd numbers, invalid UTF-8, quotes, separators.
const TOKENS: &[&[u8]] = &[
    b"1e999",
    b"-1e999",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"nan",
    b"inf",
    b"0.0000000000000000000000001",
    b"\xC3\x28",
    b"\xFF\xFE",
    b"\xED\xA0\x80",
    b"\"",
    b"\\u0000",
    b"\\ud800",
    b"\n",
    b"\r\n",
    b",",
    b"\0",
    b"[",
    b"{",
    b"}",
    b"]",
    b"=",
    b"[[x]]",
    b"null",
    b"\"\xF0\x9F\x98\x80\"",
];

/// One mutation of `input` (another seed `other` for splices).
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8]) {
    let at = rng.below(input.len() + 1);
    match rng.below(10) {
        0 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] ^= 1 << rng.below(8);
        }
        1 => input.truncate(at),
        2 => {
            let from = rng.below(other.len() + 1);
            let tail = other[from..].to_vec();
            input.truncate(at);
            input.extend(tail);
        }
        3 | 4 => {
            let token = TOKENS[rng.below(TOKENS.len())];
            input.splice(at..at, token.iter().copied());
        }
        5 => {
            // Replace a number-looking run with a huge one.
            let token = TOKENS[rng.below(7)];
            let end = (at + 1 + rng.below(8)).min(input.len());
            input.splice(at.min(end)..end, token.iter().copied());
        }
        6 => input
            .splice(0..0, b"\xEF\xBB\xBF".iter().copied())
            .for_each(drop),
        7 => {
            let depth = 1 + rng.below(3000);
            let (open, close): (&[u8], &[u8]) = match rng.below(3) {
                0 => (b"[", b"]"),
                1 => (b"{\"a\":", b"}"),
                _ => (b"a = [", b"]"),
            };
            let mut nest = open.repeat(depth);
            nest.extend(close.repeat(depth * rng.below(2)));
            input.splice(at..at, nest);
        }
        8 if !input.is_empty() => {
            let start = rng.below(input.len());
            let len = 1 + rng.below(64);
            let chunk = input[start..(start + len).min(input.len())].to_vec();
            input.splice(at..at, chunk);
        }
        _ => {
            let end = (at + rng.below(16)).min(input.len());
            input.drain(at..end);
        }
    }
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let seeds: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!seeds.is_empty(), "{} holds no seed", dir.display());
    seeds
}

/// Runs one input; on a panic or a broken promise, saves it and says where.
fn run_one(target: &str, run: targets::Target, input: &[u8], what: &str) {
    let outcome = catch_unwind(AssertUnwindSafe(|| run(input)));
    let failure = match outcome {
        Ok(Ok(())) => return,
        Ok(Err(broken)) => broken,
        Err(panic) => panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .map_or("panic".into(), |m| format!("panic: {m}")),
    };
    let saved = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{target}-failure"));
    std::fs::write(&saved, input).unwrap();
    panic!(
        "fuzz target `{target}` failed on {what}: {failure}\n  input saved to {} (add it to \
         fuzz/corpus/{target}/ once fixed)",
        saved.display()
    );
}

fn short_mode(target: &str) {
    let run = targets::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap()
        .1;
    let seeds = seeds(target);
    for (i, seed) in seeds.iter().enumerate() {
        run_one(target, run, seed, &format!("seed {i}"));
    }
    let iters: usize = std::env::var("HEVO_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ target.len() as u64);
    for n in 0..iters {
        let mut input = seeds[rng.below(seeds.len())].clone();
        let other = &seeds[rng.below(seeds.len())];
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut input, other);
        }
        run_one(target, run, &input, &format!("mutation {n}"));
    }
}

#[test]
fn every_target_has_a_test_and_a_corpus() {
    let names: Vec<&str> = targets::TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["suite", "harness", "config", "gateway", "matrix"]);
    for name in names {
        assert!(corpus_dir(name).is_dir(), "no corpus for `{name}`");
    }
}

#[test]
fn suite_parser_survives_its_corpus_and_mutations() {
    short_mode("suite");
}

#[test]
fn harness_parser_survives_its_corpus_and_mutations() {
    short_mode("harness");
}

#[test]
fn config_parser_survives_its_corpus_and_mutations() {
    short_mode("config");
}

#[test]
fn gateway_request_parsing_survives_its_corpus_and_mutations() {
    short_mode("gateway");
}

#[test]
fn matrix_reader_survives_its_corpus_and_mutations() {
    short_mode("matrix");
}
