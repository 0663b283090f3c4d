//! Local-model throughput: hevo's `local` backend against a raw llama-cpp-2 loop (the crate's
//! `simple` example: one batch for the prompt, then greedy sample + decode per token), same
//! GGUF, same context, batch and thread settings, same process, same prompt lengths.
//!
//! Why: the target is for the local backend to reach at least 0.9x llama.cpp's own throughput;
//! hevo adds a worker queue, chat templating, stop-string handling and (optionally) logprobs.
//! Also measured: scoring one ~300-token prompt for a label (1 token, top-20 logprobs) and
//! the same prompt against 5 labels, where the KV prefix is reused.
//!
//! Each side runs in its own child process (llama.cpp's backend cannot be freed and
//! re-initialized in one process without slowing down), alternating raw, hevo, raw, hevo, ...
//! so that background load hits both alike; the table shows medians.
//!
//! Needs the default model (`hevo model pull`). Run:
//! `cargo bench -p hevo-llm --bench local_model` (`HEVO_BENCH_THREADS`, default 2).

use std::num::NonZeroU32;
use std::time::Instant;

use hevo_llm::{model_file, ChatMessage, ChatRequest, LocalBackend, LocalConfig};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;

const GEN: usize = 128;
const REPS: usize = 3;

fn prompt_text(rep: usize) -> String {
    let mut text = format!("Run {rep}. Here is a list of observations about the weather. ");
    for i in 0..22 {
        text.push_str(&format!("Day {i}: cloudy in the morning, sunny by noon. "));
    }
    text.push_str("Continue the list with more days in the same style.");
    text
}

fn chatml(user: &str) -> String {
    format!("<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The raw llama-cpp-2 loop. Returns (prompt tokens/s, generation tokens/s, prompt tokens).
fn raw(path: &std::path::Path, threads: i32) -> (f64, f64, usize) {
    let mut backend = LlamaBackend::init().unwrap();
    backend.void_logs();
    let model = LlamaModel::load_from_file(&backend, path, &LlamaModelParams::default()).unwrap();
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(4096))
        .with_n_batch(512)
        .with_n_ubatch(512)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = model.new_context(&backend, params).unwrap();
    let (mut prompt_rates, mut gen_rates, mut n_prompt) = (Vec::new(), Vec::new(), 0);
    for rep in 0..REPS {
        ctx.clear_kv_cache();
        let tokens = model
            .vocab()
            .tokenize(chatml(&prompt_text(rep)).as_bytes(), true, true);
        n_prompt = tokens.len();
        let mut batch = LlamaBatch::new(512, 1);
        let last = tokens.len() - 1;
        for (i, t) in tokens.iter().enumerate() {
            batch.add(*t, i as i32, &[0], i == last).unwrap();
        }
        let start = Instant::now();
        ctx.decode(&mut batch).unwrap();
        prompt_rates.push(tokens.len() as f64 / start.elapsed().as_secs_f64());
        let mut sampler = LlamaSampler::greedy();
        let start = Instant::now();
        for pos in (tokens.len() as i32..).take(GEN) {
            let token = sampler.sample(&ctx, batch.n_tokens() - 1);
            let _piece = model.vocab().token_to_piece(token, false, None);
            batch.clear();
            batch.add(token, pos, &[0], true).unwrap();
            ctx.decode(&mut batch).unwrap();
        }
        gen_rates.push(GEN as f64 / start.elapsed().as_secs_f64());
    }
    (median(prompt_rates), median(gen_rates), n_prompt)
}

fn hevo(path: &std::path::Path, threads: u32) -> (f64, f64, usize, String) {
    let mut config = LocalConfig::new("local", path);
    config.threads = threads;
    config.parallel = 1;
    let backend = LocalBackend::load(config).unwrap();
    let (mut pp, mut tg, mut n_prompt) = (Vec::new(), Vec::new(), 0);
    for rep in 0..REPS {
        let mut request = ChatRequest::new(
            model_file::DEFAULT_MODEL_NAME,
            vec![ChatMessage::new("user", prompt_text(rep))],
        );
        request.temperature = Some(0.0);
        request.max_tokens = Some(GEN as u32);
        let done = backend.complete_blocking(request, |_| {}).unwrap();
        let timing = done.timing.unwrap();
        n_prompt = timing.prompt_tokens_evaluated as usize;
        pp.push(timing.prompt_tokens_evaluated as f64 * 1e3 / timing.prompt_ms);
        tg.push(timing.generated_tokens as f64 * 1e3 / timing.generation_ms);
    }

    // label scoring: one ~300-token prompt, next-token top-20 logprobs; then 5 labels
    let labels = ["positive", "negative", "neutral", "mixed", "unknown"];
    let base = prompt_text(99);
    let score = |suffix: &str| {
        let mut r = ChatRequest::new(
            model_file::DEFAULT_MODEL_NAME,
            vec![ChatMessage::new("user", format!("{base}\nLabel: {suffix}"))],
        );
        r.temperature = Some(0.0);
        r.max_tokens = Some(1);
        r.logprobs = true;
        r.top_logprobs = 20;
        backend.complete_blocking(r, |_| {}).unwrap()
    };
    let start = Instant::now();
    let first = score("");
    let one_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    let mut cached = 0;
    for label in labels {
        cached += score(label).response.usage.cached_tokens;
    }
    let five_ms = start.elapsed().as_secs_f64() * 1e3;
    let note = format!(
        "label scoring: {} prompt tokens, 1 token + top-20 logprobs: {one_ms:.0} ms; then 5 \
         labels on the same prefix: {five_ms:.0} ms in all ({cached} prompt tokens reused \
         from the KV cache)",
        first.response.usage.prompt_tokens
    );
    (median(pp), median(tg), n_prompt, note)
}

fn main() {
    let path = model_file::require_default_model()
        .unwrap_or_else(|e| panic!("{e}\nthis bench needs the default model: `hevo model pull`"));
    let threads: u32 = std::env::var("HEVO_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    match std::env::var("HEVO_BENCH_SIDE").as_deref() {
        Ok("raw") => {
            let (pp, tg, n) = raw(&path, threads as i32);
            println!("RESULT {pp} {tg} {n}");
            return;
        }
        Ok("hevo") => {
            let (pp, tg, n, note) = hevo(&path, threads);
            println!("RESULT {pp} {tg} {n}");
            println!("NOTE {note}");
            return;
        }
        _ => {}
    }
    let rounds: usize = std::env::var("HEVO_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let exe = std::env::current_exe().unwrap();
    let run_side = |side: &str| -> (f64, f64, usize, Option<String>) {
        let out = std::process::Command::new(&exe)
            .env("HEVO_BENCH_SIDE", side)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let result = text
            .lines()
            .find_map(|l| l.strip_prefix("RESULT "))
            .unwrap();
        let v: Vec<f64> = result.split(' ').map(|x| x.parse().unwrap()).collect();
        let note = text
            .lines()
            .find_map(|l| l.strip_prefix("NOTE "))
            .map(str::to_owned);
        (v[0], v[1], v[2] as usize, note)
    };
    let (mut raw_pp, mut raw_tg, mut hevo_pp, mut hevo_tg) = (vec![], vec![], vec![], vec![]);
    let (mut raw_n, mut hevo_n, mut notes) = (0, 0, Vec::new());
    for _ in 0..rounds {
        let (pp, tg, n, _) = run_side("raw");
        raw_pp.push(pp);
        raw_tg.push(tg);
        raw_n = n;
        let (pp, tg, n, note) = run_side("hevo");
        hevo_pp.push(pp);
        hevo_tg.push(tg);
        hevo_n = n;
        notes.extend(note);
    }
    let (raw_pp, raw_tg) = (median(raw_pp), median(raw_tg));
    let (pp, tg) = (median(hevo_pp), median(hevo_tg));
    println!(
        "threads: {threads}; generation: {GEN} tokens; medians over {rounds} alternating \
         processes x {REPS} runs"
    );
    println!("| | prompt tokens | prompt tokens/s | generation tokens/s |");
    println!("|---|---|---|---|");
    println!("| raw llama-cpp-2 loop | {raw_n} | {raw_pp:.1} | {raw_tg:.1} |");
    println!("| hevo local backend | {hevo_n} | {pp:.1} | {tg:.1} |");
    println!(
        "| ratio hevo / raw | | {:.3} | {:.3} |",
        pp / raw_pp,
        tg / raw_tg
    );
    println!();
    for note in notes {
        println!("{note}");
    }
}
