//! A WHATWG server-sent-events parser over any `BufRead`.
//!
//! Rules (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
//! a UTF-8 BOM at the very start is skipped; lines end in CRLF, LF or a lone CR; a line starting
//! with `:` is a comment; `field: value` loses exactly one space after the colon; a line without a
//! colon is a field with an empty value; `data` lines are joined with `\n`; a blank line dispatches
//! the event (nothing when no `data` was seen); an event not closed by a blank line at EOF is
//! discarded. Each line is decoded on its own (a character split across network reads is fine);
//! invalid UTF-8 becomes U+FFFD. The size of one event (and of one line) is capped.

use std::io::{self, BufRead};

/// Default cap on the size of one event's data (and of one line).
pub(crate) const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// The error inside the `InvalidData` I/O error returned when an event or a line exceeds the cap.
#[derive(Debug)]
pub(crate) struct TooLarge(pub usize);

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "server-sent event larger than {} bytes", self.0)
    }
}

impl std::error::Error for TooLarge {}

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event` field, `message` when none was given.
    pub event: String,
    /// The `data` lines joined with `\n`.
    pub data: String,
    /// The last event id seen so far (`id` field), if any.
    pub id: Option<String>,
}

/// Reads events from a byte stream. Every read goes through the inner reader, so a transport read
/// timeout on it is an idle timer: comments and keep-alives count as activity.
pub(crate) struct SseReader<R> {
    inner: R,
    max: usize,
    at_start: bool,
    /// The previous line ended in `\r`; a `\n` right after it belongs to that line ending.
    pending_cr: bool,
    line: Vec<u8>,
    event: String,
    data: String,
    last_id: Option<String>,
}

impl<R: BufRead> SseReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_EVENT_BYTES)
    }

    /// A reader whose events (and lines) may not exceed `max` bytes.
    pub(crate) fn with_limit(inner: R, max: usize) -> Self {
        SseReader {
            inner,
            max,
            at_start: true,
            pending_cr: false,
            line: Vec::new(),
            event: String::new(),
            data: String::new(),
            last_id: None,
        }
    }

    /// The inner reader, positioned after the last line read.
    pub(crate) fn into_inner(self) -> R {
        self.inner
    }

    /// The next event; `Ok(None)` at the end of the stream (an unterminated event is discarded).
    /// Errors: I/O errors of the inner reader, and `InvalidData` when an event is too large.
    pub(crate) fn next_event(&mut self) -> io::Result<Option<SseEvent>> {
        loop {
            if !self.read_line()? {
                self.event.clear();
                self.data.clear();
                return Ok(None);
            }
            let raw = std::mem::take(&mut self.line);
            let mut bytes: &[u8] = &raw;
            if self.at_start {
                self.at_start = false;
                if let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF") {
                    bytes = rest;
                }
            }
            let text = String::from_utf8_lossy(bytes);
            let ev = self.process_line(&text)?;
            self.line = raw;
            if let Some(ev) = ev {
                return Ok(Some(ev));
            }
        }
    }

    fn process_line(&mut self, line: &str) -> io::Result<Option<SseEvent>> {
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            "data" => {
                if self.data.len() + value.len() + 1 > self.max {
                    self.data.clear();
                    self.event.clear();
                    return Err(too_long(self.max));
                }
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            // `retry` sets a reconnection delay; this client does not reconnect by itself.
            _ => {}
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        if self.data.is_empty() {
            self.event.clear();
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        let event = if self.event.is_empty() {
            "message".to_string()
        } else {
            std::mem::take(&mut self.event)
        };
        Some(SseEvent {
            event,
            data,
            id: self.last_id.clone(),
        })
    }

    /// Reads one line (without its terminator) into `self.line`. False at EOF, when a partial
    /// line without terminator is dropped too (it cannot close an event).
    fn read_line(&mut self) -> io::Result<bool> {
        self.line.clear();
        loop {
            let buf = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok(false);
            }
            if self.pending_cr {
                self.pending_cr = false;
                if buf[0] == b'\n' {
                    self.inner.consume(1);
                    continue;
                }
            }
            match buf.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    if self.line.len() + i > self.max {
                        return Err(too_long(self.max));
                    }
                    self.line.extend_from_slice(&buf[..i]);
                    self.pending_cr = buf[i] == b'\r';
                    self.inner.consume(i + 1);
                    return Ok(true);
                }
                None => {
                    let n = buf.len();
                    if self.line.len() + n > self.max {
                        return Err(too_long(self.max));
                    }
                    self.line.extend_from_slice(buf);
                    self.inner.consume(n);
                }
            }
        }
    }
}

fn too_long(max: usize) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, TooLarge(max))
}

impl<R: BufRead> Iterator for SseReader<R> {
    type Item = io::Result<SseEvent>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor, Read};

    fn parse(input: &[u8]) -> Vec<SseEvent> {
        SseReader::new(Cursor::new(input.to_vec()))
            .collect::<io::Result<Vec<_>>>()
            .unwrap()
    }

    fn datas(input: &[u8]) -> Vec<String> {
        parse(input).into_iter().map(|e| e.data).collect()
    }

    /// Yields its bytes in the given chunk sizes, one per read.
    struct Chunky {
        data: Vec<u8>,
        pos: usize,
        sizes: Vec<usize>,
        i: usize,
    }
    impl Read for Chunky {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pos >= self.data.len() {
                return Ok(0);
            }
            let want = self.sizes.get(self.i).copied().unwrap_or(1).max(1);
            self.i += 1;
            let n = want.min(buf.len()).min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn basic_event_and_type() {
        let evs = parse(b"event: ping\ndata: {\"a\":1}\n\ndata: x\n\n");
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].event, "ping");
        assert_eq!(evs[0].data, "{\"a\":1}");
        assert_eq!(evs[1].event, "message");
        assert_eq!(evs[1].data, "x");
    }

    #[test]
    fn bom_is_stripped_only_at_start() {
        let evs = parse(b"\xEF\xBB\xBFdata: a\n\n");
        assert_eq!(evs[0].data, "a");
        // A BOM elsewhere makes an unknown field name: ignored.
        let evs = parse(b"data: a\n\n\xEF\xBB\xBFdata: b\n\n");
        assert_eq!(evs.len(), 1);
    }

    #[test]
    fn line_endings_crlf_lf_cr() {
        assert_eq!(datas(b"data: a\r\n\r\ndata: b\r\n\r\n"), ["a", "b"]);
        assert_eq!(datas(b"data: a\r\rdata: b\r\r"), ["a", "b"]);
        assert_eq!(datas(b"data: a\r\n\ndata: b\n\r\n"), ["a", "b"]);
        assert_eq!(datas(b"data: a\rdata: b\r\n\r"), ["a\nb"]);
    }

    #[test]
    fn comments_are_skipped() {
        assert_eq!(
            datas(b": ping\n: OPENROUTER PROCESSING\ndata: a\n: mid\n\n:\n\n"),
            ["a"]
        );
    }

    #[test]
    fn data_without_space_and_extra_space() {
        assert_eq!(datas(b"data:a\n\n"), ["a"]);
        assert_eq!(datas(b"data:  a\n\n"), [" a"]);
        assert_eq!(datas(b"data\n\n"), [""]);
    }

    #[test]
    fn multiline_data_joined() {
        assert_eq!(
            datas(b"data: a\ndata: b\ndata:\ndata: c\n\n"),
            ["a\nb\n\nc"]
        );
    }

    #[test]
    fn blank_line_without_data_dispatches_nothing() {
        let evs = parse(b"\n\nevent: x\n\ndata: a\n\n");
        assert_eq!(evs.len(), 1);
        // The type was reset by the blank line.
        assert_eq!(evs[0].event, "message");
    }

    #[test]
    fn unterminated_event_at_eof_is_discarded() {
        assert_eq!(datas(b"data: a\n\ndata: b\n"), ["a"]);
        assert_eq!(datas(b"data: a\n\ndata: {\"cut"), ["a"]);
    }

    #[test]
    fn id_and_unknown_fields() {
        let evs = parse(b"id: 7\nfoo: bar\nretry: 100\ndata: a\n\nid: x\0y\ndata: b\n\n");
        assert_eq!(evs[0].id.as_deref(), Some("7"));
        assert_eq!(evs[1].id.as_deref(), Some("7"));
    }

    #[test]
    fn utf8_split_across_reads() {
        let text = "data: héllo → 世界\r\n\r\n";
        let bytes = text.as_bytes().to_vec();
        for size in 1..5 {
            let rd = Chunky {
                data: bytes.clone(),
                pos: 0,
                sizes: vec![size; bytes.len()],
                i: 0,
            };
            let evs: Vec<_> = SseReader::new(BufReader::with_capacity(3, rd))
                .collect::<io::Result<_>>()
                .unwrap();
            assert_eq!(evs.len(), 1);
            assert_eq!(evs[0].data, "héllo → 世界");
        }
    }

    #[test]
    fn crlf_split_between_reads() {
        let bytes = b"data: a\r\n\r\ndata: b\r\n\r\n".to_vec();
        let rd = Chunky {
            data: bytes.clone(),
            pos: 0,
            sizes: vec![8, 1, 1, 1, 100],
            i: 0,
        };
        let evs: Vec<_> = SseReader::new(BufReader::with_capacity(4, rd))
            .collect::<io::Result<_>>()
            .unwrap();
        assert_eq!(
            evs.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(datas(b"data: a\xFFb\n\n"), ["a\u{FFFD}b"]);
    }

    #[test]
    fn size_cap() {
        let mut rd = SseReader::with_limit(Cursor::new(b"data: 0123456789\n\n".to_vec()), 8);
        let err = rd.next_event().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.get_ref().is_some_and(|e| e.is::<TooLarge>()));
        let mut rd = SseReader::with_limit(
            Cursor::new(b"data: 0123\ndata: 4567\ndata: 89\n\n".to_vec()),
            10,
        );
        assert!(rd.next_event().is_err());
        let mut rd = SseReader::with_limit(Cursor::new(b"data: 0123\n\n".to_vec()), 16);
        assert_eq!(rd.next_event().unwrap().unwrap().data, "0123");
    }
}
