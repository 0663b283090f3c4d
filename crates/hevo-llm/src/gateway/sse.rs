//! Server-sent events: [`sse_of`], the response every dialect's streamed answer is, and
//! events split as they arrive: a forwarded stream is passed on event by event so the gateway
//! can read each event's usage (and drop what the caller did not ask for).

use crate::backend::MAX_ANSWER_BYTES;

/// Splits a byte stream into whole events (each ending with a blank line). An unfinished
/// event is held until its end arrives, up to [`MAX_ANSWER_BYTES`]: past that it is dropped
/// and the splitter is [`EventSplitter::oversized`].
#[derive(Debug, Default)]
pub(crate) struct EventSplitter {
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no event end (each byte is searched once).
    searched: usize,
    oversized: bool,
}

impl EventSplitter {
    /// Appends `chunk` and returns the events it completed, each with its terminating blank
    /// line, byte for byte as received.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        if self.oversized {
            return Vec::new();
        }
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = event_end(&self.buf, self.searched) {
            events.push(self.buf.drain(..end).collect());
            self.searched = 0;
        }
        // an end may begin in the last 3 bytes and finish in the next chunk
        self.searched = self.buf.len().saturating_sub(3);
        if self.buf.len() > MAX_ANSWER_BYTES {
            self.oversized = true;
            self.buf = Vec::new();
        }
        events
    }

    /// Whether an event passed [`MAX_ANSWER_BYTES`] before its end: the stream is not to be
    /// read further.
    pub(crate) fn oversized(&self) -> bool {
        self.oversized
    }

    /// Whatever is left when the stream ends (an event without its blank line).
    pub(crate) fn rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// The end (exclusive) of the first complete event in `buf`, searching from `from`: after
/// `\n\n` or `\r\n\r\n`.
fn event_end(buf: &[u8], from: usize) -> Option<usize> {
    let tail = &buf[from.min(buf.len())..];
    let lf = tail
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| from + i + 2);
    let crlf = tail
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| from + i + 4);
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

    #[test]
    fn an_end_split_across_chunks_is_found_whichever_byte_it_is_cut_at() {
        let stream = b"data: 1\r\n\r\ndata: 2\n\ndata: 3\r\n\r\n";
        for cut in 0..=stream.len() {
            for cut2 in cut..=stream.len() {
                let mut s = EventSplitter::default();
                let mut events = s.push(&stream[..cut]);
                events.extend(s.push(&stream[cut..cut2]));
                events.extend(s.push(&stream[cut2..]));
                let data: Vec<String> = events.iter().map(|e| parse_event(e).1).collect();
                assert_eq!(data, ["1", "2", "3"], "cut at {cut}, {cut2}");
                assert!(s.rest().is_empty());
            }
        }
    }

    #[test]
    fn an_event_without_end_is_held_up_to_the_ceiling_then_dropped() {
        let mut s = EventSplitter::default();
        assert_eq!(s.push(b"data: 1\n\ndata: ").len(), 1);
        let piece = vec![b'x'; 1 << 20];
        // "data: " and 63 MiB are held; one more MiB passes the ceiling
        for _ in 0..(MAX_ANSWER_BYTES >> 20) - 1 {
            assert!(s.push(&piece).is_empty());
            assert!(!s.oversized());
        }
        assert!(s.push(&piece).is_empty());
        assert!(s.oversized());
        // nothing more is held, whatever follows
        assert!(s.push(b"\n\ndata: 2\n\n").is_empty());
        assert!(s.rest().is_empty());
    }
}
