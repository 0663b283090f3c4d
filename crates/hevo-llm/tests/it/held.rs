//! An upstream on loopback that holds its answers until the test lets them go: for the tests
//! of calls that outlive their caller, their trial or the gateway, and of streams that end
//! badly (`held_gateway` puts a gateway in front of it).
//!
//! It speaks OpenAI's chat completions and Responses API and Anthropic's messages, plain
//! and streamed (raw HTTP/1.1, one request per connection, a stream's events each flushed
//! as a chunk), and reads what to do from `MODE:<mode>` in the request body:
//!
//! - `plain` (no mode): answers at once;
//! - `hold`: answers (headers included) only once [`Held::release`] was called;
//! - `hold_stream`: a stream sends its first events at once (Anthropic's `message_start`
//!   carries the input tokens), the rest once released; a plain answer waits like `hold`;
//! - `break`: a stream sends its first events, then the connection is cut mid-body;
//! - `error_event`: a stream sends its first events, then ends with the API's error
//!   (Anthropic's `event: error`, the Responses API's `response.failed`, an error chunk);
//! - `no_end`: a stream sends its first events, then ends cleanly without its last event.
//!
//! What it answers is in `held_answers`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::held_answers::{chat, messages, responses};

struct Shared {
    gate: watch::Sender<bool>,
    arrived: AtomicUsize,
    answered: AtomicUsize,
}

/// A running holding upstream.
pub struct Held {
    /// `http://127.0.0.1:PORT` (the Anthropic base; OpenAI's is this + `/v1`).
    pub base: String,
    shared: Arc<Shared>,
}

impl Held {
    /// Lets every held answer go, now and from now on.
    pub fn release(&self) {
        self.shared.gate.send_replace(true);
    }

    /// Requests received so far.
    pub fn arrived(&self) -> usize {
        self.shared.arrived.load(Ordering::SeqCst)
    }

    /// Whole answers given so far (what the upstream bills), each counted as it starts to go
    /// out (a stream: its events after the hold, up to its last).
    pub fn answered(&self) -> usize {
        self.shared.answered.load(Ordering::SeqCst)
    }
}

/// Starts a holding upstream on a free port.
pub async fn start() -> Held {
    let shared = Arc::new(Shared {
        gate: watch::Sender::new(false),
        arrived: AtomicUsize::new(0),
        answered: AtomicUsize::new(0),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = shared.clone();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::spawn(answer(serving.clone(), socket));
        }
    });
    Held {
        base: format!("http://{addr}"),
        shared,
    }
}

async fn opened(shared: &Shared) {
    let _ = shared.gate.subscribe().wait_for(|open| *open).await;
}

fn mode(body: &Value) -> String {
    let text = body.to_string();
    text.split("MODE:")
        .nth(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .unwrap_or_else(|| "plain".into())
}

/// Reads one request (`Content-Length` body) from `socket`: its path and JSON body.
async fn read_request(socket: &mut TcpStream) -> Option<(String, Value)> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let path = head.split_whitespace().nth(1)?.to_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((path, serde_json::from_slice(&body).ok()?))
}

/// Writes `event` as one chunk of a chunked body, flushed.
async fn chunk(socket: &mut TcpStream, event: &str) -> std::io::Result<()> {
    let framed = format!("{:x}\r\n{event}\r\n", event.len());
    socket.write_all(framed.as_bytes()).await?;
    socket.flush().await
}

/// Answers one request on `socket` as its mode says (see the module documentation); raw
/// HTTP/1.1, so that a stream can be cut after its first events have surely been sent.
async fn answer(shared: Arc<Shared>, mut socket: TcpStream) -> std::io::Result<()> {
    let Some((path, body)) = read_request(&mut socket).await else {
        return Ok(());
    };
    shared.arrived.fetch_add(1, Ordering::SeqCst);
    let mode = mode(&body);
    let model = body["model"].as_str().unwrap_or("").to_owned();
    let script = match path.as_str() {
        "/v1/chat/completions" => chat(
            &model,
            body["stream_options"]["include_usage"] == json!(true),
        ),
        "/v1/messages" => messages(&model),
        _ => responses(&model),
    };
    let streamed = body["stream"] == json!(true);
    if mode == "hold" || (mode == "hold_stream" && !streamed) {
        opened(&shared).await;
    }
    if !streamed {
        let whole = script.whole.to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n",
            whole.len()
        );
        // counted before it is sent: the gateway may have recorded it before this task runs
        // again
        shared.answered.fetch_add(1, Ordering::SeqCst);
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(whole.as_bytes()).await?;
        socket.flush().await?;
        return socket.shutdown().await;
    }
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
              transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .await?;
    for event in &script.first {
        chunk(&mut socket, event).await?;
    }
    match mode.as_str() {
        // the first events are sent; the body ends without its last chunk
        "break" => return socket.shutdown().await,
        "error_event" => {
            for event in &script.error {
                chunk(&mut socket, event).await?;
            }
        }
        "no_end" => {}
        _ => {
            if mode == "hold_stream" {
                opened(&shared).await;
            }
            shared.answered.fetch_add(1, Ordering::SeqCst);
            for event in &script.rest {
                chunk(&mut socket, event).await?;
            }
        }
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.flush().await?;
    socket.shutdown().await
}
