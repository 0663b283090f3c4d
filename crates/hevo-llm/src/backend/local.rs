//! The `local` backend: a GGUF model run in-process on the CPU by llama.cpp.
//!
//! One worker thread owns the model and its context and serves a queue of requests, so a model
//! is loaded once per process however many gateways and trials use it (a registry keyed by the
//! file's canonical path hands out the same worker). The worker keeps the tokens of the last
//! request in its KV cache: a request that shares a prefix with it (the same system prompt and
//! few-shot examples, or one prompt scored against several labels) only evaluates the rest,
//! and the reused tokens are reported as cached.
//!
//! Prompts are rendered with the chat template stored in the GGUF (ChatML for SmolLM2).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

use futures::future::BoxFuture;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::oneshot;

use super::{Backend, Completion, DeltaSender, GenerationTiming};
use crate::error::{BackendError, LlmError};
use crate::types::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, TokenLogprob, TopLogprob, Usage,
};

/// Settings of the embedded model.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalConfig {
    /// The backend's name, as routes refer to it.
    pub name: String,
    /// The GGUF file.
    pub model_path: PathBuf,
    /// CPU threads for prompt processing and generation.
    pub threads: u32,
    /// Context length in tokens (prompt + output).
    pub context_size: u32,
    /// Most prompt tokens evaluated in one batch.
    pub batch_size: u32,
}

impl LocalConfig {
    /// Defaults for `model_path`: [`default_threads`], 4096-token context, 512-token batches.
    pub fn new(name: &str, model_path: impl Into<PathBuf>) -> Self {
        Self {
            name: name.to_owned(),
            model_path: model_path.into(),
            threads: default_threads(),
            context_size: 4096,
            batch_size: 512,
        }
    }
}

/// Half the machine's cores, 1 to 4. llama.cpp's threads wait for each other at every step,
/// so a thread per core pays only while nothing else wants the cores, and the model shares
/// them with the harness processes. On 2 cores (bench/local-model.md): 2 threads were 1.2x
/// faster than 1 on a quiet machine and 10x slower beside another evaluation.
pub fn default_threads() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 2).clamp(1, 4) as u32
}

struct Job {
    request: ChatRequest,
    deltas: Option<DeltaSender>,
    reply: oneshot::Sender<Result<Completion, BackendError>>,
}

/// The loaded model's worker; dropping the last handle stops the thread and frees the model.
struct Worker {
    jobs: Mutex<mpsc::Sender<Job>>,
    chat_template: String,
    n_ctx_train: u32,
}

/// The embedded GGUF model behind the [`Backend`] trait.
pub struct LocalBackend {
    name: String,
    worker: Arc<Worker>,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn llama() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend = LlamaBackend::init().map_err(|e| e.to_string())?;
            if std::env::var_os("HEVO_LLAMA_LOG").is_none() {
                backend.void_logs();
            }
            Ok(backend)
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<Worker>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<PathBuf, Weak<Worker>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

impl LocalBackend {
    /// Loads the model (or reuses the already loaded one for the same file) and starts its
    /// worker thread.
    ///
    /// # Errors
    /// [`LlmError::LocalModel`] when the file is missing or llama.cpp cannot load it.
    pub fn load(config: LocalConfig) -> Result<Self, LlmError> {
        let path = &config.model_path;
        let local_err = |message: String| LlmError::LocalModel {
            path: path.clone(),
            message,
        };
        let canonical = path.canonicalize().map_err(|e| {
            local_err(format!(
                "{e}; run `hevo model pull` to fetch the default model"
            ))
        })?;
        let mut registry = registry().lock().expect("model registry lock");
        if let Some(worker) = registry.get(&canonical).and_then(Weak::upgrade) {
            return Ok(Self {
                name: config.name,
                worker,
            });
        }
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(String, u32), String>>();
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let thread_config = config.clone();
        std::thread::Builder::new()
            .name("hevo-local-model".into())
            .spawn(move || worker_main(thread_config, job_rx, ready_tx))
            .map_err(|e| local_err(format!("cannot start the model thread: {e}")))?;
        let (chat_template, n_ctx_train) = ready_rx
            .recv()
            .map_err(|_| local_err("the model thread stopped while loading".into()))?
            .map_err(local_err)?;
        let worker = Arc::new(Worker {
            jobs: Mutex::new(job_tx),
            chat_template,
            n_ctx_train,
        });
        registry.insert(canonical, Arc::downgrade(&worker));
        Ok(Self {
            name: config.name,
            worker,
        })
    }

    /// The chat template stored in the GGUF.
    pub fn chat_template(&self) -> &str {
        &self.worker.chat_template
    }

    /// The context length the model was trained with.
    pub fn n_ctx_train(&self) -> u32 {
        self.worker.n_ctx_train
    }

    /// Answers `request` without an async runtime, calling `on_delta` with each piece of text
    /// as it is generated. Must not be called from inside an async task.
    ///
    /// # Errors
    /// The [`BackendError`] of the call.
    pub fn complete_blocking(
        &self,
        request: ChatRequest,
        mut on_delta: impl FnMut(&str),
    ) -> Result<Completion, BackendError> {
        let (reply, rx) = oneshot::channel();
        let (tx, mut deltas) = tokio::sync::mpsc::unbounded_channel();
        self.worker
            .jobs
            .lock()
            .expect("job queue lock")
            .send(Job {
                request,
                deltas: Some(tx),
                reply,
            })
            .map_err(|_| BackendError::Internal("the local model thread has stopped".into()))?;
        while let Some(delta) = deltas.blocking_recv() {
            on_delta(&delta);
        }
        rx.blocking_recv()
            .map_err(|_| BackendError::Internal("the local model thread crashed".into()))?
    }
}

impl Backend for LocalBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn complete(
        &self,
        request: ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> BoxFuture<'_, Result<Completion, BackendError>> {
        let (reply, rx) = oneshot::channel();
        let sent = self.worker.jobs.lock().expect("job queue lock").send(Job {
            request,
            deltas,
            reply,
        });
        Box::pin(async move {
            if sent.is_err() {
                return Err(BackendError::Internal(
                    "the local model thread has stopped".into(),
                ));
            }
            rx.await
                .map_err(|_| BackendError::Internal("the local model thread crashed".into()))?
        })
    }
}

fn worker_main(
    config: LocalConfig,
    jobs: mpsc::Receiver<Job>,
    ready: mpsc::Sender<Result<(String, u32), String>>,
) {
    let backend = match llama() {
        Ok(backend) => backend,
        Err(err) => {
            let _ = ready.send(Err(err));
            return;
        }
    };
    let model =
        match LlamaModel::load_from_file(backend, &config.model_path, &LlamaModelParams::default())
        {
            Ok(model) => model,
            Err(err) => {
                let _ = ready.send(Err(format!("cannot load the GGUF: {err}")));
                return;
            }
        };
    let template = match model.chat_template(None) {
        Ok(template) => template,
        Err(err) => {
            let _ = ready.send(Err(format!("the GGUF has no usable chat template: {err}")));
            return;
        }
    };
    let threads = i32::try_from(config.threads.max(1)).unwrap_or(2);
    let n_ctx = config.context_size.min(model.n_ctx_train().max(512));
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(config.batch_size)
        .with_n_ubatch(config.batch_size)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let ctx = match model.new_context(backend, params) {
        Ok(ctx) => ctx,
        Err(err) => {
            let _ = ready.send(Err(format!("cannot create a llama.cpp context: {err}")));
            return;
        }
    };
    let text = template.to_string().unwrap_or_default();
    let _ = ready.send(Ok((text, model.n_ctx_train())));
    let mut engine = Engine {
        model: &model,
        template,
        ctx,
        kv: Vec::new(),
        batch_size: config.batch_size as usize,
    };
    while let Ok(job) = jobs.recv() {
        let result = engine.run(&job.request, job.deltas.as_ref());
        let _ = job.reply.send(result);
    }
}

struct Engine<'m> {
    model: &'m LlamaModel,
    template: LlamaChatTemplate,
    ctx: LlamaContext<'m>,
    /// Tokens currently in the KV cache (sequence 0), in order.
    kv: Vec<LlamaToken>,
    batch_size: usize,
}

/// Collects generated bytes into text, holding back what might start a stop string.
struct TextSink<'a> {
    stops: &'a [String],
    pending: Vec<u8>,
    text: String,
    sent: usize,
    deltas: Option<&'a DeltaSender>,
}

impl TextSink<'_> {
    /// Appends bytes; returns true when a stop string was hit (the text is cut before it).
    fn push(&mut self, bytes: &[u8]) -> bool {
        self.pending.extend_from_slice(bytes);
        match std::str::from_utf8(&self.pending) {
            Ok(s) => {
                self.text.push_str(s);
                self.pending.clear();
            }
            Err(e) if e.error_len().is_none() => {
                let valid = e.valid_up_to();
                self.text
                    .push_str(std::str::from_utf8(&self.pending[..valid]).expect("valid"));
                self.pending.drain(..valid);
            }
            Err(_) => {
                self.text.push_str(&String::from_utf8_lossy(&self.pending));
                self.pending.clear();
            }
        }
        let search_from = self.sent.saturating_sub(self.max_stop_len());
        let hit = self
            .stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| self.text[floor_char(&self.text, search_from)..].find(s.as_str()))
            .min()
            .map(|i| i + floor_char(&self.text, search_from));
        if let Some(at) = hit {
            self.text.truncate(at);
            self.flush(self.text.len());
            return true;
        }
        let hold = self.holdback();
        self.flush(self.text.len() - hold);
        false
    }

    fn max_stop_len(&self) -> usize {
        self.stops.iter().map(String::len).max().unwrap_or(0)
    }

    /// Length of the longest suffix of the text that is a proper prefix of a stop string.
    fn holdback(&self) -> usize {
        let mut hold = 0;
        for stop in self.stops {
            for len in (1..stop.len()).rev() {
                if len > hold && stop.is_char_boundary(len) && self.text.ends_with(&stop[..len]) {
                    hold = len;
                    break;
                }
            }
        }
        hold
    }

    fn flush(&mut self, upto: usize) {
        let upto = floor_char(&self.text, upto);
        if upto > self.sent {
            if let Some(tx) = self.deltas {
                let _ = tx.send(self.text[self.sent..upto].to_owned());
            }
            self.sent = upto;
        }
    }

    fn finish(mut self) -> String {
        if !self.pending.is_empty() {
            self.text.push_str(&String::from_utf8_lossy(&self.pending));
        }
        let len = self.text.len();
        self.flush(len);
        self.text
    }
}

/// The messages before a trailing `assistant` prefill, and the prefill's text ("" when the
/// last message is not the assistant's, or is the only one).
fn split_prefill(messages: &[ChatMessage]) -> (&[ChatMessage], &str) {
    match messages.split_last() {
        Some((last, head)) if last.role == "assistant" && !head.is_empty() => {
            (head, last.content.as_str())
        }
        _ => (messages, ""),
    }
}

fn floor_char(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl Engine<'_> {
    /// The prompt text for `request`. A trailing `assistant` message is a *prefill*: the
    /// reply is opened as usual and that text is written into it unclosed, so the model
    /// continues it (what Anthropic's API and llama.cpp's server do; the returned content is
    /// only the continuation).
    fn render(&self, request: &ChatRequest) -> Result<String, BackendError> {
        let (head, prefill) = split_prefill(&request.messages);
        let messages = head
            .iter()
            .map(|m| LlamaChatMessage::new(m.role.clone(), m.content.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| BackendError::BadRequest(format!("invalid message text: {e}")))?;
        let mut text = self
            .model
            .apply_chat_template(&self.template, &messages, true)
            .map_err(|e| {
                BackendError::BadRequest(format!("cannot apply the chat template: {e}"))
            })?;
        text.push_str(prefill);
        Ok(text)
    }

    /// Evaluates `tokens` (appended after the reused prefix), in batches; returns the batch
    /// index of the last token's logits.
    fn eval(&mut self, tokens: &[LlamaToken]) -> Result<i32, BackendError> {
        let mut last = 0;
        for chunk in tokens.chunks(self.batch_size.max(1)) {
            let mut batch = LlamaBatch::new(chunk.len(), 1);
            let start = self.kv.len();
            for (i, token) in chunk.iter().enumerate() {
                let pos = i32::try_from(start + i).expect("position fits");
                batch
                    .add(*token, pos, &[0], i == chunk.len() - 1)
                    .map_err(|e| BackendError::Internal(e.to_string()))?;
            }
            self.ctx.decode(&mut batch).map_err(|e| {
                self.kv.clear();
                let _ = self.ctx.clear_kv_cache_seq(Some(0), None, None);
                BackendError::Internal(format!("llama.cpp decode failed: {e}"))
            })?;
            self.kv.extend_from_slice(chunk);
            last = batch.n_tokens() - 1;
        }
        Ok(last)
    }

    fn piece(&self, token: LlamaToken) -> Vec<u8> {
        self.model.vocab().token_to_piece(token, false, None)
    }

    fn logprobs(&self, idx: i32, chosen: LlamaToken, top: u32) -> TokenLogprob {
        let logits = self.ctx.get_logits_ith(idx);
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
        let lse = f64::from(max) + sum.ln();
        let lp = |t: usize| f64::from(logits[t]) - lse;
        let mut top_logprobs = Vec::new();
        if top > 0 {
            let mut ids: Vec<usize> = (0..logits.len()).collect();
            let k = (top as usize).min(ids.len());
            ids.select_nth_unstable_by(k - 1, |a, b| logits[*b].total_cmp(&logits[*a]));
            ids.truncate(k);
            ids.sort_by(|a, b| logits[*b].total_cmp(&logits[*a]));
            top_logprobs = ids
                .into_iter()
                .map(|t| TopLogprob {
                    token: String::from_utf8_lossy(&self.piece(LlamaToken(t as i32))).into_owned(),
                    logprob: lp(t),
                })
                .collect();
        }
        TokenLogprob {
            token: String::from_utf8_lossy(&self.piece(chosen)).into_owned(),
            logprob: lp(chosen.0 as usize),
            top_logprobs,
        }
    }

    fn run(
        &mut self,
        request: &ChatRequest,
        deltas: Option<&DeltaSender>,
    ) -> Result<Completion, BackendError> {
        let prompt = self.render(request)?;
        let tokens = self.model.vocab().tokenize(prompt.as_bytes(), true, true);
        let n_ctx = self.ctx.n_ctx() as usize;
        if tokens.is_empty() {
            return Err(BackendError::BadRequest("the prompt is empty".into()));
        }
        if tokens.len() >= n_ctx {
            return Err(BackendError::BadRequest(format!(
                "the prompt is {} tokens; the local model's context holds {n_ctx}",
                tokens.len()
            )));
        }
        // Reuse the longest common prefix of the KV cache; evaluate at least one token so
        // the last position has fresh logits.
        let mut common = self
            .kv
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count();
        common = common.min(tokens.len() - 1);
        if common < self.kv.len() {
            let removed = self
                .ctx
                .clear_kv_cache_seq(Some(0), Some(common as u32), None);
            if matches!(removed, Ok(true)) {
                self.kv.truncate(common);
            } else {
                let _ = self.ctx.clear_kv_cache_seq(Some(0), None, None);
                self.kv.clear();
                common = 0;
            }
        }
        let prompt_started = Instant::now();
        let mut idx = self.eval(&tokens[common..])?;
        let prompt_ms = prompt_started.elapsed().as_secs_f64() * 1000.0;

        let room = n_ctx - tokens.len();
        let max_tokens = request.max_tokens.map_or(room, |m| (m as usize).min(room));
        let mut sampler = match (request.temperature, request.seed) {
            (Some(t), _) if t <= 0.0 => LlamaSampler::greedy(),
            (t, seed) => {
                let mut chain = Vec::new();
                if let Some(p) = request.top_p.filter(|p| *p < 1.0) {
                    chain.push(LlamaSampler::top_p(p, 1));
                }
                chain.push(LlamaSampler::temp(t.unwrap_or(1.0)));
                let seed = seed.map_or_else(rand::random::<u32>, |s| (s ^ (s >> 32)) as u32);
                chain.push(LlamaSampler::dist(seed));
                LlamaSampler::chain_simple(chain)
            }
        };
        let mut sink = TextSink {
            stops: &request.stop,
            pending: Vec::new(),
            text: String::new(),
            sent: 0,
            deltas,
        };
        let mut logprobs = request.logprobs.then(Vec::new);
        let mut generated = 0usize;
        let mut finish_reason = FinishReason::Length;
        let gen_started = Instant::now();
        while generated < max_tokens {
            let token = sampler.sample(&self.ctx, idx);
            if self.model.vocab().is_eog(token) {
                finish_reason = FinishReason::Stop;
                break;
            }
            generated += 1;
            if let Some(lps) = logprobs.as_mut() {
                lps.push(self.logprobs(idx, token, request.top_logprobs));
            }
            let bytes = self.piece(token);
            if sink.push(&bytes) {
                finish_reason = FinishReason::Stop;
                break;
            }
            if generated == max_tokens {
                break;
            }
            idx = self.eval(&[token])?;
        }
        let generation_ms = gen_started.elapsed().as_secs_f64() * 1000.0;
        let content = sink.finish();
        let response = ChatResponse {
            model: request.model.clone(),
            content,
            finish_reason,
            usage: Usage {
                prompt_tokens: tokens.len() as u64,
                cached_tokens: common as u64,
                output_tokens: generated as u64,
            },
            logprobs,
        };
        Ok(Completion {
            response,
            retries: 0,
            timing: Some(GenerationTiming {
                prompt_tokens_evaluated: (tokens.len() - common) as u64,
                prompt_ms,
                generated_tokens: generated as u64,
                generation_ms,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&[u8]]) -> (String, Vec<String>, bool) {
        let stops: Vec<String> = stops.iter().map(|s| (*s).to_owned()).collect();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut sink = TextSink {
            stops: &stops,
            pending: Vec::new(),
            text: String::new(),
            sent: 0,
            deltas: Some(&tx),
        };
        let mut hit = false;
        for piece in pieces {
            if sink.push(piece) {
                hit = true;
                break;
            }
        }
        let text = sink.finish();
        drop(tx);
        let mut deltas = Vec::new();
        while let Ok(d) = rx.try_recv() {
            deltas.push(d);
        }
        (text, deltas, hit)
    }

    #[test]
    fn stop_string_split_across_tokens_is_cut_and_never_streamed() {
        let (text, deltas, hit) = run(&["END"], &[b"ab", b"cE", b"N", b"D", b"zz"]);
        assert!(hit);
        assert_eq!(text, "abc");
        assert_eq!(deltas.concat(), "abc");
    }

    #[test]
    fn held_back_text_is_released_when_it_is_not_a_stop() {
        let (text, deltas, hit) = run(&["END"], &[b"aE", b"x", b"EN"]);
        assert!(!hit);
        assert_eq!(text, "aExEN");
        assert_eq!(deltas.concat(), "aExEN");
    }

    #[test]
    fn multibyte_characters_split_across_tokens_stay_whole() {
        let snow = "☃".as_bytes();
        let (text, deltas, _) = run(&[], &[&snow[..1], &snow[1..], b"!"]);
        assert_eq!(text, "☃!");
        assert!(deltas.iter().all(|d| !d.contains('\u{fffd}')));
    }

    #[test]
    fn only_a_trailing_assistant_message_after_others_is_a_prefill() {
        let m = |role: &str, text: &str| ChatMessage {
            role: role.into(),
            content: text.into(),
        };
        let convo = [m("user", "Q"), m("assistant", "Label:")];
        let (head, prefill) = split_prefill(&convo);
        assert_eq!((head.len(), prefill), (1, "Label:"));
        let plain = [m("user", "Q")];
        assert_eq!(split_prefill(&plain), (&plain[..], ""));
        let only = [m("assistant", "hi")];
        assert_eq!(split_prefill(&only), (&only[..], ""));
        let earlier = [m("assistant", "A"), m("user", "Q")];
        assert_eq!(split_prefill(&earlier).0.len(), 2);
    }
}
