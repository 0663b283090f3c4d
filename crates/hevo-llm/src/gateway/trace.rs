//! [`TraceFile`]: a trial's `model_calls.jsonl`, capped per trial and per run like a trial's
//! stdout. The line that would cross a cap is replaced by one `truncated` marker line and
//! nothing more is written to that trace; the ledger still has every call.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::{json, Value};

use crate::ledger::Scope;

/// The bytes every trace of a run may still write together.
#[derive(Debug)]
pub(crate) struct RunTraceBudget {
    cap: u64,
    left: AtomicU64,
}

impl RunTraceBudget {
    pub(crate) fn new(cap: u64) -> Self {
        Self {
            cap,
            left: AtomicU64::new(cap),
        }
    }

    /// Takes `bytes` from the budget; false (taking nothing) when fewer are left.
    fn take(&self, bytes: u64) -> bool {
        self.left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(bytes)
            })
            .is_ok()
    }
}

/// One line of a trace: a call's request or response (the body is borrowed, not copied).
#[derive(Serialize)]
pub(crate) struct TraceLine<'a> {
    pub(crate) seq: u64,
    pub(crate) ts_ms: u64,
    #[serde(rename = "type")]
    pub(crate) kind: &'a str,
    pub(crate) api: &'a str,
    pub(crate) endpoint: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<u16>,
    pub(crate) body: &'a Value,
}

/// One trial's open trace.
pub(crate) struct TraceFile {
    writer: BufWriter<File>,
    cap: u64,
    written: u64,
    truncated: bool,
}

/// Counts the bytes written through it, so a line's size is known before it is written.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TraceFile {
    /// A trace writing to `file`, at most `cap` bytes.
    pub(crate) fn new(file: File, cap: u64) -> Self {
        Self {
            writer: BufWriter::new(file),
            cap,
            written: 0,
            truncated: false,
        }
    }

    /// Appends `line` (one JSON line) unless this trace or the run's traces would grow past
    /// their cap; the first line that would is replaced by the `truncated` marker.
    pub(crate) fn write(
        &mut self,
        line: &TraceLine<'_>,
        run: &RunTraceBudget,
    ) -> std::io::Result<()> {
        if self.truncated {
            return Ok(());
        }
        let mut counter = Counter(0);
        serde_json::to_writer(&mut counter, line)?;
        let len = counter.0 + 1;
        let full = if self.written + len > self.cap {
            Some((Scope::Trial, self.cap))
        } else if !run.take(len) {
            Some((Scope::Run, run.cap))
        } else {
            None
        };
        if let Some((scope, cap)) = full {
            self.truncated = true;
            let scope = match scope {
                Scope::Trial => "trial",
                Scope::Run => "run",
            };
            let marker = json!({
                "type": "truncated",
                "seq": line.seq,
                "ts_ms": line.ts_ms,
                "scope": scope,
                "cap_bytes": cap,
                "written_bytes": self.written,
                "message": format!(
                    "trace truncated: the {scope}'s trace cap of {cap} bytes is reached; later \
                     calls of this trial are in the ledger (model_calls) only"
                ),
            });
            serde_json::to_writer(&mut self.writer, &marker)?;
        } else {
            serde_json::to_writer(&mut self.writer, line)?;
            self.written += len;
        }
        self.writer.write_all(b"\n")?;
        self.writer.flush()
    }

    /// Flushes what is buffered.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}
