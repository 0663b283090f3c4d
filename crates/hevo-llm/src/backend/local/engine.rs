//! One llama.cpp context answering one request at a time: renders the chat template, reuses
//! the longest prefix of its KV cache, evaluates the rest, samples, and reports log-probs.
//!
//! Answers do not depend on what the context answered before. llama.cpp's result for a token
//! depends on how the prompt was cut into batches: measured with SmolLM2, reusing an 85-token
//! cached prefix and evaluating the remaining 48 tokens moved the next token's log-probs by up
//! to 0.15 against evaluating all 133 at once, enough to flip a near-tied label and, through
//! the search's decisions, a whole run. So prompts are evaluated in chunks at fixed positions
//! (multiples of the chunk size), and a cached prefix is reused only up to a chunk boundary
//! and only where it was itself evaluated as prompt chunks: the same prompt always goes
//! through the same batches, whichever worker answers it and whatever came before.

use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::text_sink::TextSink;
use crate::backend::{Completion, DeltaSender, GenerationTiming};
use crate::error::BackendError;
use crate::types::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, TokenLogprob, TopLogprob, Usage,
};

/// A context of the shared model and the tokens in its KV cache.
pub(super) struct Engine<'m> {
    model: &'m LlamaModel,
    template: LlamaChatTemplate,
    ctx: LlamaContext<'m>,
    /// Tokens currently in the KV cache (sequence 0), in order.
    kv: Vec<LlamaToken>,
    /// How many of `kv`'s first tokens were evaluated as prompt chunks (the tokens after them
    /// were generated one at a time), so may be reused.
    reusable: usize,
    /// Prompt chunk size; chunks start at its multiples.
    chunk: usize,
}

/// How many tokens the batch starting at position `start` takes, of `remaining`: up to the
/// next multiple of `chunk`.
fn chunk_len(start: usize, remaining: usize, chunk: usize) -> usize {
    (chunk - start % chunk).min(remaining)
}

/// How much of a `shared`-token common prefix with the KV cache may be reused: no more than
/// the `reusable` prompt-chunk tokens, rounded down to a chunk boundary.
fn reusable_prefix(shared: usize, reusable: usize, chunk: usize) -> usize {
    let n = shared.min(reusable);
    n - n % chunk
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

impl<'m> Engine<'m> {
    /// An engine over `ctx`, a fresh context of `model`.
    pub(super) fn new(
        model: &'m LlamaModel,
        template: LlamaChatTemplate,
        ctx: LlamaContext<'m>,
        chunk: usize,
    ) -> Self {
        Self {
            model,
            template,
            ctx,
            kv: Vec::new(),
            reusable: 0,
            chunk: chunk.max(1),
        }
    }

    /// Forgets the KV cache (after a request failed half-way).
    pub(super) fn reset(&mut self) {
        self.kv.clear();
        self.reusable = 0;
        let _ = self.ctx.clear_kv_cache_seq(Some(0), None, None);
    }

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

    /// Evaluates `tokens` (appended after the tokens in the KV cache) in batches that end at
    /// multiples of the chunk size; returns the batch index of the last token's logits.
    fn eval(&mut self, mut tokens: &[LlamaToken]) -> Result<i32, BackendError> {
        let mut last = 0;
        while !tokens.is_empty() {
            let start = self.kv.len();
            let (chunk, rest) = tokens.split_at(chunk_len(start, tokens.len(), self.chunk));
            tokens = rest;
            let mut batch = LlamaBatch::new(chunk.len(), 1);
            for (i, token) in chunk.iter().enumerate() {
                let pos = i32::try_from(start + i).expect("position fits");
                batch
                    .add(*token, pos, &[0], i == chunk.len() - 1)
                    .map_err(|e| BackendError::Internal(e.to_string()))?;
            }
            if let Err(e) = self.ctx.decode(&mut batch) {
                self.reset();
                return Err(BackendError::Internal(format!(
                    "llama.cpp decode failed: {e}"
                )));
            }
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

    /// Answers `request`, streaming text to `deltas` as it is generated.
    pub(super) fn run(
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
        common = reusable_prefix(common.min(tokens.len() - 1), self.reusable, self.chunk);
        if common < self.kv.len() {
            let removed = self
                .ctx
                .clear_kv_cache_seq(Some(0), Some(common as u32), None);
            if matches!(removed, Ok(true)) {
                self.kv.truncate(common);
            } else {
                self.reset();
                common = 0;
            }
        }
        let prompt_started = Instant::now();
        let mut idx = self.eval(&tokens[common..])?;
        self.reusable = tokens.len();
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
                ..Usage::default()
            },
            logprobs,
            stop_sequence: None,
        };
        Ok(Completion {
            response,
            retries: crate::backend::Retries::default(),
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

    #[test]
    fn prompt_batches_end_on_the_chunk_grid_wherever_they_start() {
        let cuts = |mut pos: usize, mut n: usize| {
            let mut out = Vec::new();
            while n > 0 {
                let len = chunk_len(pos, n, 64);
                out.push((pos, len));
                pos += len;
                n -= len;
            }
            out
        };
        assert_eq!(cuts(0, 133), [(0, 64), (64, 64), (128, 5)]);
        assert_eq!(cuts(64, 69), [(64, 64), (128, 5)]);
        assert_eq!(cuts(130, 1), [(130, 1)]);
        assert_eq!(reusable_prefix(85, 200, 64), 64);
        assert_eq!(reusable_prefix(200, 133, 64), 128);
        assert_eq!(reusable_prefix(63, 200, 64), 0);
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
