//! The AWS event-stream framing (`application/vnd.amazon.eventstream`), as Bedrock streams a
//! model's reply: each message is a 12-byte prelude (total length and headers length, u32 big
//! endian, then the CRC-32 of those 8 bytes), the headers, the payload, and the CRC-32 of
//! everything before it. CRC-32 is the IEEE polynomial (as gzip and zlib use it).

use std::fmt;
use std::io::{self, Read};

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CRC: [u32; 256] = crc_table();

/// CRC-32/IEEE of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |c, &b| {
        CRC[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

/// A header value (the eight types of the framing).
#[derive(Clone, Debug, PartialEq)]
pub enum HeaderValue {
    Bool(bool),
    Byte(i8),
    Short(i16),
    Int(i32),
    Long(i64),
    Bytes(Vec<u8>),
    String(String),
    /// Milliseconds since the epoch.
    Timestamp(i64),
    Uuid([u8; 16]),
}

/// One decoded message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub headers: Vec<(String, HeaderValue)>,
    pub payload: Vec<u8>,
}

impl Message {
    /// The value of a string header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|(k, v)| match v {
            HeaderValue::String(s) if k == name => Some(s.as_str()),
            _ => None,
        })
    }
}

/// Why the stream could not be read.
#[derive(Debug)]
pub enum FrameError {
    /// The stream ended inside a message.
    Truncated,
    /// A checksum does not match: `what` is "prelude" or "message".
    Crc { what: &'static str },
    /// A length or header that cannot be.
    Malformed(String),
    /// A message longer than the decoder accepts.
    TooLarge { len: usize, limit: usize },
    /// Reading failed (a timeout, a reset).
    Io(io::Error),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Truncated => write!(f, "the event stream ended inside a message"),
            FrameError::Crc { what } => {
                write!(f, "an event-stream message failed its {what} checksum")
            }
            FrameError::Malformed(m) => write!(f, "malformed event-stream message: {m}"),
            FrameError::TooLarge { len, limit } => write!(
                f,
                "an event-stream message of {len} bytes exceeds the limit of {limit}"
            ),
            FrameError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Reads messages one by one from a byte stream.
pub struct Decoder<R> {
    inner: R,
    limit: usize,
}

/// Reads into `buf` until it is full or the stream ends; returns how many bytes came.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> Decoder<R> {
    /// A decoder refusing messages longer than `limit` bytes.
    pub fn new(inner: R, limit: usize) -> Self {
        Decoder { inner, limit }
    }

    pub fn into_inner(self) -> R {
        self.inner
    }

    /// The next message; None when the stream ends between two messages.
    pub fn next_message(&mut self) -> Result<Option<Message>, FrameError> {
        let mut prelude = [0u8; 12];
        match fill(&mut self.inner, &mut prelude).map_err(FrameError::Io)? {
            0 => return Ok(None),
            12 => {}
            _ => return Err(FrameError::Truncated),
        }
        let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        if crc32(&prelude[..8]) != be(&prelude[8..12]) {
            return Err(FrameError::Crc { what: "prelude" });
        }
        let total = be(&prelude[..4]) as usize;
        let headers_len = be(&prelude[4..8]) as usize;
        if total < 16 || headers_len > total - 16 {
            return Err(FrameError::Malformed(format!(
                "total length {total}, headers length {headers_len}"
            )));
        }
        if total > self.limit {
            return Err(FrameError::TooLarge {
                len: total,
                limit: self.limit,
            });
        }
        let mut msg = vec![0u8; total];
        msg[..12].copy_from_slice(&prelude);
        if fill(&mut self.inner, &mut msg[12..]).map_err(FrameError::Io)? < total - 12 {
            return Err(FrameError::Truncated);
        }
        if crc32(&msg[..total - 4]) != be(&msg[total - 4..]) {
            return Err(FrameError::Crc { what: "message" });
        }
        let headers = parse_headers(&msg[12..12 + headers_len])?;
        Ok(Some(Message {
            headers,
            payload: msg[12 + headers_len..total - 4].to_vec(),
        }))
    }
}

fn parse_headers(mut b: &[u8]) -> Result<Vec<(String, HeaderValue)>, FrameError> {
    let bad = |m: &str| FrameError::Malformed(m.to_string());
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if b.len() < n {
            return None;
        }
        let (h, t) = b.split_at(n);
        *b = t;
        Some(h)
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let short = || bad("a header runs past the headers");
        let n = take(&mut b, 1).ok_or_else(short)?[0] as usize;
        let name = String::from_utf8_lossy(take(&mut b, n).ok_or_else(short)?).into_owned();
        let ty = take(&mut b, 1).ok_or_else(short)?[0];
        let mut fixed = |n: usize| -> Result<Vec<u8>, FrameError> {
            take(&mut b, n).map(<[u8]>::to_vec).ok_or_else(short)
        };
        let int = |v: &[u8]| v.iter().fold(0i64, |a, &x| (a << 8) | i64::from(x));
        let value = match ty {
            0 => HeaderValue::Bool(true),
            1 => HeaderValue::Bool(false),
            2 => HeaderValue::Byte(fixed(1)?[0] as i8),
            3 => HeaderValue::Short(int(&fixed(2)?) as i16),
            4 => HeaderValue::Int(int(&fixed(4)?) as i32),
            5 => HeaderValue::Long(int(&fixed(8)?)),
            6 | 7 => {
                let len = fixed(2)?;
                let data = fixed(usize::from(u16::from_be_bytes([len[0], len[1]])))?;
                if ty == 6 {
                    HeaderValue::Bytes(data)
                } else {
                    HeaderValue::String(String::from_utf8_lossy(&data).into_owned())
                }
            }
            8 => HeaderValue::Timestamp(int(&fixed(8)?)),
            9 => {
                let mut u = [0u8; 16];
                u.copy_from_slice(&fixed(16)?);
                HeaderValue::Uuid(u)
            }
            t => return Err(FrameError::Malformed(format!("header type {t}"))),
        };
        out.push((name, value));
    }
    Ok(out)
}

/// A message with string headers, framed (for tests and the fake server).
pub fn encode(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut hb = Vec::new();
    for (k, v) in headers {
        hb.push(k.len() as u8);
        hb.extend_from_slice(k.as_bytes());
        hb.push(7);
        hb.extend_from_slice(&(v.len() as u16).to_be_bytes());
        hb.extend_from_slice(v.as_bytes());
    }
    let total = (12 + hb.len() + payload.len() + 4) as u32;
    let mut msg = Vec::with_capacity(total as usize);
    msg.extend_from_slice(&total.to_be_bytes());
    msg.extend_from_slice(&(hb.len() as u32).to_be_bytes());
    let c = crc32(&msg);
    msg.extend_from_slice(&c.to_be_bytes());
    msg.extend_from_slice(&hb);
    msg.extend_from_slice(payload);
    let c = crc32(&msg);
    msg.extend_from_slice(&c.to_be_bytes());
    msg
}

/// Standard base64 with padding (for tests and the fake server: Bedrock's `chunk` payloads
/// carry their event in it).
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = c
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= c.len() {
                A[(n >> (18 - 6 * i)) as usize & 63] as char
            } else {
                '='
            });
        }
    }
    out
}
