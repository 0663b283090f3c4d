//! Server-sent events: [`sse_of`], the response every dialect's streamed answer is, and
//! events split as they arrive: a forwarded stream is passed on event by event so the gateway
//! can read each event's usage (and drop what the caller did not ask for).

/// Splits a byte stream into whole events (each ending with a blank line).
#[derive(Debug, Default)]
pub(crate) struct EventSplitter {
    buf: Vec<u8>,
}

impl EventSplitter {
    /// Appends `chunk` and returns the events it completed, each with its terminating blank
    /// line, byte for byte as received.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = event_end(&self.buf) {
            events.push(self.buf.drain(..end).collect());
        }
        events
    }

    /// Whatever is left when the stream ends (an event without its blank line).
    pub(crate) fn rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// The end (exclusive) of the first complete event in `buf`: after `\n\n` or `\r\n\r\n`.
fn event_end(buf: &[u8]) -> Option<usize> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The `event:` name and joined `data:` payload of one event.
pub(crate) fn parse_event(event: &[u8]) -> (Option<String>, String) {
    let text = String::from_utf8_lossy(event);
    let mut name = None;
    let mut data: Vec<&str> = Vec::new();
    for line in text.lines() {
        if let Some(e) = line.strip_prefix("event:") {
            name = Some(e.trim().to_owned());
        } else if let Some(d) = line.strip_prefix("data:") {
            data.push(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    (name, data.join("\n"))
}

/// A server-sent-event response that streams the events sent into `rx` until its sender
/// is dropped (every dialect's streaming answer ends this way).
pub(crate) fn sse_of(
    rx: tokio::sync::mpsc::UnboundedReceiver<axum::response::sse::Event>,
) -> impl axum::response::IntoResponse {
    let events = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, std::convert::Infallible>(event), rx))
    });
    axum::response::sse::Sse::new(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_come_out_whole() {
        let mut s = EventSplitter::default();
        assert!(s.push(b"event: a\ndata: {\"x\"").is_empty());
        let events = s.push(b": 1}\n\ndata: [DONE]\n\nda");
        assert_eq!(events.len(), 2);
        assert_eq!(
            parse_event(&events[0]),
            (Some("a".into()), "{\"x\": 1}".into())
        );
        assert_eq!(parse_event(&events[1]).1, "[DONE]");
        assert_eq!(s.rest(), b"da");
    }
}
