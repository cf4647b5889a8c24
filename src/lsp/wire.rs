//! The LSP base protocol: `Content-Length: N\r\n\r\n` headers, then N bytes of JSON. Reading
//! is strict and bounded: a header line longer than 1 KiB, a line that is not a header, a bad or
//! missing `Content-Length`, a message over the size limit or a stream cut inside a message is
//! an error, and the caller gives up on the server (a peer that broke the framing cannot be
//! trusted to find it again).

use serde_json::Value;
use std::io::{self, BufRead, Read, Write};

/// The longest header line accepted.
const MAX_HEADER_LINE: usize = 1024;
/// The most header lines one message may have.
const MAX_HEADERS: usize = 16;

/// Why no message could be read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The stream ended between two messages.
    Eof,
    /// The stream broke the framing (what, for the warning).
    Bad(String),
    /// The stream ended inside a message (what, for the warning): the server is likely gone,
    /// and how it ended says more than the cut.
    Cut(String),
}

/// What a line of raw bytes looks like in a message: at most 60 characters, escaped.
fn show(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let t = text.trim_end_matches(['\r', '\n']);
    let mut out: String = t.chars().take(60).flat_map(char::escape_default).collect();
    if t.chars().count() > 60 {
        out.push('…');
    }
    out
}

/// Reads one message body (at most `max_len` bytes).
pub(super) fn read_message(r: &mut impl BufRead, max_len: usize) -> Result<Vec<u8>, ReadError> {
    let mut length: Option<usize> = None;
    let mut headers = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut *r)
            .take(MAX_HEADER_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| ReadError::Bad(format!("cannot read: {e}")))?;
        if n == 0 {
            return Err(if headers == 0 {
                ReadError::Eof
            } else {
                ReadError::Cut("the output ended inside a message header".into())
            });
        }
        if !line.ends_with(b"\n") {
            return Err(if line.len() > MAX_HEADER_LINE {
                ReadError::Bad(format!(
                    "wrote a header line longer than {MAX_HEADER_LINE} bytes ({}...)",
                    show(&line)
                ))
            } else {
                ReadError::Cut("the output ended inside a message header".into())
            });
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.is_empty() {
            if headers == 0 {
                // Blank lines between messages are tolerated.
                continue;
            }
            break;
        }
        headers += 1;
        if headers > MAX_HEADERS {
            return Err(ReadError::Bad(format!(
                "wrote more than {MAX_HEADERS} header lines"
            )));
        }
        let header = std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.split_once(':'));
        let Some((name, value)) = header else {
            return Err(ReadError::Bad(format!(
                "wrote something that is not an LSP message: \"{}\"",
                show(&line)
            )));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let v = value.trim();
            length = Some(v.parse::<usize>().map_err(|_| {
                ReadError::Bad(format!(
                    "sent a bad Content-Length \"{}\"",
                    show(v.as_bytes())
                ))
            })?);
        }
    }
    let Some(len) = length else {
        return Err(ReadError::Bad(
            "sent a message without Content-Length".into(),
        ));
    };
    if len > max_len {
        return Err(ReadError::Bad(format!(
            "sent a message of {} MiB, over the limit of {} MiB",
            len.div_ceil(1 << 20),
            max_len >> 20
        )));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ReadError::Cut(format!("the output ended inside a message of {len} bytes"))
        } else {
            ReadError::Bad(format!("cannot read: {e}"))
        }
    })?;
    Ok(body)
}

/// Writes one message and flushes it.
pub(super) fn write_message(w: &mut impl Write, msg: &Value) -> io::Result<()> {
    let body = msg.to_string();
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    w.write_all(&out)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_all(input: &[u8], max: usize) -> (Vec<Value>, Option<String>) {
        let mut r = io::BufReader::new(input);
        let mut out = Vec::new();
        loop {
            match read_message(&mut r, max) {
                Ok(b) => out.push(serde_json::from_slice(&b).unwrap()),
                Err(ReadError::Eof) => return (out, None),
                Err(ReadError::Bad(m) | ReadError::Cut(m)) => return (out, Some(m)),
            }
        }
    }

    #[test]
    fn messages_round_trip_with_either_line_ending() {
        let mut buf = Vec::new();
        write_message(&mut buf, &json!({"a": 1})).unwrap();
        write_message(&mut buf, &json!({"b": "é"})).unwrap();
        buf.extend_from_slice(b"content-length: 2\nContent-Type: x\n\n{}");
        let (msgs, err) = read_all(&buf, 1000);
        assert_eq!(msgs, [json!({"a": 1}), json!({"b": "é"}), json!({})]);
        assert!(err.is_none());
    }

    #[test]
    fn broken_framing_is_an_error_that_names_it() {
        let cases: &[(&[u8], &str)] = &[
            (b"hello there\r\n", "not an LSP message: \"hello there\""),
            (b"Content-Length: ten\r\n\r\n", "bad Content-Length \"ten\""),
            (b"Content-Length: -3\r\n\r\n", "bad Content-Length"),
            (b"X: 1\r\n\r\n{}", "without Content-Length"),
            (
                b"Content-Length: 100000000\r\n\r\n",
                "96 MiB, over the limit of 1 MiB",
            ),
            (
                b"Content-Length: 10\r\n\r\n{}",
                "ended inside a message of 10 bytes",
            ),
            (b"Content-Length: 10\r\n", "ended inside a message header"),
        ];
        for (input, want) in cases {
            let (msgs, err) = read_all(input, 1 << 20);
            assert!(msgs.is_empty());
            let err = err.unwrap_or_default();
            assert!(err.contains(want), "{err} (wanted {want})");
        }
        let long = vec![b'x'; 5000];
        let (_, err) = read_all(&long, 1 << 20);
        assert!(err.unwrap().contains("longer than 1024"));
        let many = "A: b\r\n".repeat(20);
        let (_, err) = read_all(many.as_bytes(), 1 << 20);
        assert!(err.unwrap().contains("more than 16 header lines"));
    }
}
