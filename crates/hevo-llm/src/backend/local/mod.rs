//! The `local` backend: a GGUF model run in-process on the CPU by llama.cpp.
//!
//! The model is loaded once per process (a registry keyed by the file's canonical path hands
//! every gateway and trial the same one) and served by `parallel` worker threads. Each worker
//! owns a llama.cpp context, so requests from concurrent trials are answered at the same time
//! instead of queueing behind one another, and no worker waits for another's threads. A
//! worker keeps the tokens of its last request in its KV cache: a request that shares a
//! prefix with it (the same system prompt and few-shot examples, an agent's next turn) only
//! evaluates the rest, and the reused tokens are reported as cached. The queue ([`pool`])
//! hands a free worker the waiting request that shares the most with its last one.
//!
//! An answer does not depend on which worker gives it or what that worker answered before:
//! prompts go through llama.cpp in batches at fixed positions ([`engine`]).
//!
//! Prompts are rendered with the chat template stored in the GGUF (ChatML for SmolLM2).

mod engine;
mod pool;
mod text_sink;

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};

use futures::future::BoxFuture;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use tokio::sync::oneshot;

use super::{Backend, Completion, DeltaSender};
use crate::error::{BackendError, LlmError};
use crate::types::ChatRequest;
use engine::Engine;
use pool::Queue;

/// Settings of the embedded model.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalConfig {
    /// The backend's name, as routes refer to it.
    pub name: String,
    /// The GGUF file.
    pub model_path: PathBuf,
    /// CPU threads of each worker, for prompt processing and generation.
    pub threads: u32,
    /// Workers, each with its own context: how many requests are answered at once.
    pub parallel: u32,
    /// Context length in tokens (prompt + output) of each worker.
    pub context_size: u32,
    /// Prompt tokens evaluated in one batch; batches end at its multiples and a cached prefix
    /// is reused up to one, so an answer does not depend on the cache (see `engine`).
    pub batch_size: u32,
}

impl LocalConfig {
    /// Defaults for `model_path`: `default_threads()` and `default_parallel()`, a 4096-token
    /// context and 64-token batches (as fast as 512 on a 391-token prompt, 32 was 15%
    /// slower; a smaller chunk reuses more of a cached prefix).
    pub fn new(name: &str, model_path: impl Into<PathBuf>) -> Self {
        let threads = default_threads();
        Self {
            name: name.to_owned(),
            model_path: model_path.into(),
            threads,
            parallel: default_parallel(threads),
            context_size: 4096,
            batch_size: 64,
        }
    }

    /// Sets the threads of each worker, and the workers to `default_parallel()` for them.
    #[must_use]
    pub fn with_threads(mut self, threads: u32) -> Self {
        self.threads = threads;
        self.parallel = default_parallel(threads);
        self
    }
}

fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as u32
}

/// Half the machine's cores, 1 to 4. llama.cpp's threads wait for each other at every step,
/// so a thread per core pays only while nothing else wants the cores, and the model shares
/// them with the harness processes. On 2 cores (bench/local-model.md): 2 threads were 1.2x
/// faster than 1 on a quiet machine and 10x slower beside another evaluation.
pub fn default_threads() -> u32 {
    (cores() / 2).clamp(1, 4)
}

/// As many workers of `threads` threads as the cores hold (at least 1): on 2 cores, two
/// single-threaded workers, which answer two trials' requests at once without waiting for
/// each other.
pub fn default_parallel(threads: u32) -> u32 {
    (cores() / threads.max(1)).max(1)
}

struct Job {
    request: ChatRequest,
    deltas: Option<DeltaSender>,
    reply: oneshot::Sender<Result<Completion, BackendError>>,
}

/// The loaded model's workers; dropping the last handle stops them and frees the model.
struct Workers {
    queue: Arc<Queue<Job>>,
    chat_template: String,
    n_ctx_train: u32,
    count: u32,
    /// [`Backend::cache_identity`]: the model file and how prompts are evaluated.
    identity: String,
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.queue.close();
    }
}

impl Workers {
    /// Queues `request`; the receiver gets the answer.
    fn submit(
        &self,
        request: ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> Result<oneshot::Receiver<Result<Completion, BackendError>>, BackendError> {
        let key = affinity_key(&request);
        let caller = request.caller.clone();
        let (reply, rx) = oneshot::channel();
        let job = Job {
            request,
            deltas,
            reply,
        };
        self.queue
            .push(job, key, caller)
            .map_err(|_| BackendError::Internal("the local model has stopped".into()))?;
        Ok(rx)
    }
}

/// The text a request's prompt starts with, for [`pool`]'s prefix affinity: the messages in
/// order, roles and contents separated by control characters that chat text does not use.
fn affinity_key(request: &ChatRequest) -> String {
    let mut key = String::new();
    for m in &request.messages {
        key.push_str(&m.role);
        key.push('\u{1f}');
        key.push_str(&m.content);
        key.push('\u{1e}');
    }
    key
}

/// The embedded GGUF model behind the [`Backend`] trait.
pub struct LocalBackend {
    name: String,
    workers: Arc<Workers>,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("name", &self.name)
            .field("workers", &self.workers.count)
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

fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<Workers>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<PathBuf, Weak<Workers>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

impl LocalBackend {
    /// Loads the model (or reuses the already loaded one for the same file, with its
    /// workers) and starts `config.parallel` workers.
    ///
    /// # Errors
    /// [`LlmError::LocalModel`] when the file is missing, is not a GGUF, llama.cpp cannot
    /// load it, or a worker's context cannot be created.
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
        crate::model_file::check_gguf(path)?;
        let mut registry = registry().lock().expect("model registry lock");
        if let Some(workers) = registry.get(&canonical).and_then(Weak::upgrade) {
            return Ok(Self {
                name: config.name,
                workers,
            });
        }
        let backend = llama().map_err(local_err)?;
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|e| local_err(format!("cannot load the GGUF: {e}")))?;
        let chat_template = model
            .chat_template(None)
            .map_err(|e| local_err(format!("the GGUF has no usable chat template: {e}")))?
            .to_string()
            .unwrap_or_default();
        let n_ctx_train = model.n_ctx_train();
        let identity = model_identity(&canonical, &config);
        let model = Arc::new(model);
        let count = config.parallel.max(1);
        let workers = Arc::new(Workers {
            queue: Arc::new(Queue::new(count as usize)),
            chat_template,
            n_ctx_train,
            count,
            identity,
        });
        // One at a time: llama.cpp's context creation mutates the model.
        for i in 0..workers.count {
            start_worker(i, &config, &model, &workers.queue).map_err(local_err)?;
        }
        registry.insert(canonical, Arc::downgrade(&workers));
        Ok(Self {
            name: config.name,
            workers,
        })
    }

    /// The chat template stored in the GGUF.
    pub fn chat_template(&self) -> &str {
        &self.workers.chat_template
    }

    /// The context length the model was trained with.
    pub fn n_ctx_train(&self) -> u32 {
        self.workers.n_ctx_train
    }

    /// How many requests the model answers at once (its workers).
    pub fn parallel(&self) -> u32 {
        self.workers.count
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
        let (tx, mut deltas) = tokio::sync::mpsc::unbounded_channel();
        let rx = self.workers.submit(request, Some(tx))?;
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

    fn cache_identity(&self) -> String {
        self.workers.identity.clone()
    }

    fn complete(
        &self,
        request: ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> BoxFuture<'_, Result<Completion, BackendError>> {
        let submitted = self.workers.submit(request, deltas);
        Box::pin(async move {
            submitted?
                .await
                .map_err(|_| BackendError::Internal("the local model thread crashed".into()))?
        })
    }
}

/// Bumped whenever a change to the engine can change an answer, so cached answers of the
/// old engine are not replayed.
const ENGINE_VERSION: u32 = 2;

/// The local model's cache identity: the file (path, size, modification time) and the
/// evaluation settings that can change an answer.
fn model_identity(canonical: &std::path::Path, config: &LocalConfig) -> String {
    let meta = std::fs::metadata(canonical).ok();
    let modified = meta
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!(
        "local {} {} bytes modified {modified} engine {ENGINE_VERSION} batch {}",
        canonical.display(),
        meta.map_or(0, |m| m.len()),
        config.batch_size
    )
}

/// Starts worker `index` and waits until its context exists.
fn start_worker(
    index: u32,
    config: &LocalConfig,
    model: &Arc<LlamaModel>,
    queue: &Arc<Queue<Job>>,
) -> Result<(), String> {
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let (config, model, queue) = (config.clone(), Arc::clone(model), Arc::clone(queue));
    std::thread::Builder::new()
        .name(format!("hevo-local-model-{index}"))
        .spawn(move || serve(index as usize, &config, &model, &queue, &ready_tx))
        .map_err(|e| format!("cannot start a model thread: {e}"))?;
    ready_rx
        .recv()
        .map_err(|_| "a model thread stopped while starting".to_owned())?
}

/// Worker `index`: creates its context, reports ready, then answers requests until the
/// queue closes.
fn serve(
    index: usize,
    config: &LocalConfig,
    model: &LlamaModel,
    queue: &Queue<Job>,
    ready: &mpsc::Sender<Result<(), String>>,
) {
    let started = (|| {
        let backend = llama()?;
        let template = model
            .chat_template(None)
            .map_err(|e| format!("the GGUF has no usable chat template: {e}"))?;
        let threads = i32::try_from(config.threads.max(1)).unwrap_or(1);
        let n_ctx = config.context_size.min(model.n_ctx_train().max(512));
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(config.batch_size)
            .with_n_ubatch(config.batch_size)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let ctx = model
            .new_context(backend, params)
            .map_err(|e| format!("cannot create a llama.cpp context: {e}"))?;
        Ok::<_, String>(Engine::new(
            model,
            template,
            ctx,
            config.batch_size as usize,
        ))
    })();
    let mut engine = match started {
        Ok(engine) => engine,
        Err(err) => {
            let _ = ready.send(Err(err));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let mut last = String::new();
    while let Some((job, key)) = queue.take(index, &last) {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            engine.run(&job.request, job.deltas.as_ref())
        }));
        let result = run.unwrap_or_else(|panic| {
            // The worker lives on for the next request, with an empty KV cache.
            engine.reset();
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown");
            Err(BackendError::Internal(format!(
                "the local model panicked: {what}"
            )))
        });
        queue.finished(index, &key);
        let _ = job.reply.send(result);
        last = key;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_identity_changes_with_the_file_and_the_batches() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.gguf"), dir.path().join("b.gguf"));
        std::fs::write(&a, b"model a").unwrap();
        std::fs::write(&b, b"model b, longer").unwrap();
        let config = LocalConfig::new("local", &a);
        let id = model_identity(&a, &config);
        assert_eq!(id, model_identity(&a, &config));
        assert_ne!(id, model_identity(&b, &config));
        let other_name = LocalConfig::new("elsewhere", &a);
        assert_eq!(
            id,
            model_identity(&a, &other_name),
            "the name changes no answer"
        );
        let mut batches = config.clone();
        batches.batch_size = 128;
        assert_ne!(id, model_identity(&a, &batches));
        // The file replaced in place (new size): a new identity.
        std::fs::write(&a, b"model a, retrained").unwrap();
        assert_ne!(id, model_identity(&a, &config));
    }
}
