//! Just enough HTTP/1.1 for the fake server: parse one request, write one response, close.

use super::reply::{Plan, Step};
use std::collections::BTreeMap;
use std::io::{self, BufRead, Read, Write};

/// A parsed request.
#[derive(Debug)]
pub(crate) struct Request {
    pub method: String,
    /// Path including any query string.
    pub path: String,
    /// Lowercase names; repeated headers joined with ", ".
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn read_line(r: &mut impl BufRead, budget: &mut usize) -> io::Result<String> {
    let mut line = Vec::new();
    let n = r.take(*budget as u64 + 1).read_until(b'\n', &mut line)?;
    if n > *budget {
        return Err(bad("request head too large"));
    }
    *budget -= n;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    let s = String::from_utf8(line).map_err(|_| bad("non-UTF-8 request head"))?;
    Ok(s.trim_end_matches(['\r', '\n']).to_owned())
}

/// Reads a request head and body. `on_continue` is called if the client sent
/// `expect: 100-continue`, before the body is read.
pub(crate) fn read_request(
    r: &mut impl BufRead,
    mut on_continue: impl FnMut() -> io::Result<()>,
) -> io::Result<Request> {
    let mut budget = MAX_HEAD;
    let mut first = read_line(r, &mut budget)?;
    while first.is_empty() {
        first = read_line(r, &mut budget)?; // tolerate stray CRLF before a request
    }
    let mut parts = first.split_whitespace();
    let (Some(method), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(bad(format!("bad request line {first:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(bad(format!("unsupported version {version:?}")));
    }
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let line = read_line(r, &mut budget)?;
        if line.is_empty() {
            break;
        }
        let (k, v) = line
            .split_once(':')
            .ok_or_else(|| bad(format!("bad header line {line:?}")))?;
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_owned());
        headers
            .entry(k)
            .and_modify(|old| {
                old.push_str(", ");
                old.push_str(&v);
            })
            .or_insert(v);
    }
    if headers
        .get("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        on_continue()?;
    }
    let chunked = headers
        .get("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        read_chunked(r)?
    } else if let Some(len) = headers.get("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| bad(format!("bad content-length {len:?}")))?;
        if len > MAX_BODY {
            return Err(bad("request body too large"));
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body)?;
        body
    } else {
        Vec::new()
    };
    Ok(Request {
        method: method.to_owned(),
        path: path.to_owned(),
        headers,
        body,
    })
}

fn read_chunked(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut budget = MAX_HEAD;
        let line = read_line(r, &mut budget)?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(size, 16).map_err(|_| bad(format!("bad chunk size {line:?}")))?;
        if size == 0 {
            // Trailers, then a blank line.
            while !read_line(r, &mut budget)?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(bad("request body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])?;
        read_line(r, &mut budget)?; // CRLF after the chunk
    }
}

pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// Writes the response described by `plan`. Streams are close-delimited, or chunked when
/// `chunked` is set; an incomplete plan ends without the final chunk. Errors (the client went
/// away) end the write silently: the caller closes the socket either way.
pub(crate) fn write_plan(w: &mut impl Write, plan: &Plan, chunked: bool) -> io::Result<()> {
    let has = |name: &str| {
        plan.headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(name))
    };
    let mut head = format!("HTTP/1.1 {} {}\r\n", plan.status, reason(plan.status));
    for (k, v) in &plan.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !has("connection") {
        head.push_str("connection: close\r\n");
    }
    let chunked = plan.streaming && chunked;
    if plan.streaming {
        if chunked {
            head.push_str("transfer-encoding: chunked\r\n");
        }
    } else if !has("content-length") && !has("transfer-encoding") {
        let len: usize = plan
            .steps
            .iter()
            .map(|s| s.bytes().map_or(0, <[u8]>::len))
            .sum();
        head.push_str(&format!("content-length: {len}\r\n"));
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())?;
    w.flush()?;
    for step in &plan.steps {
        match step.bytes() {
            Some([]) => {}
            Some(b) if chunked => {
                w.write_all(format!("{:x}\r\n", b.len()).as_bytes())?;
                w.write_all(b)?;
                w.write_all(b"\r\n")?;
                w.flush()?;
            }
            Some(b) => {
                w.write_all(b)?;
                w.flush()?;
            }
            None => {
                if let Step::Sleep(d) = step {
                    std::thread::sleep(*d);
                }
            }
        }
    }
    if chunked && plan.complete {
        w.write_all(b"0\r\n\r\n")?;
        w.flush()?;
    }
    Ok(())
}
