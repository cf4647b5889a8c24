//! The HTTP transports. Streamable HTTP (2025-03-26 on): every message is a POST to one endpoint
//! whose reply is one JSON object or an event stream scoped to that request; `Mcp-Session-Id` is
//! kept and ended with a DELETE; `MCP-Protocol-Version` is sent once negotiated; the optional GET
//! stream carries what older servers send on their own. The older HTTP+SSE transport (2024-11-05):
//! a GET event stream whose `endpoint` event names the URL messages are POSTed to; every answer
//! comes on the stream.

use super::conn::{Dispatch, Envelope, Failure, Transport, rpc_failure};
use super::wire::{Url, base64};
use crate::llm::sse::SseReader;
use serde_json::Value;
use std::io::{BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where and how to reach an HTTP server.
#[derive(Clone, Debug)]
pub(super) struct Endpoint {
    pub url: String,
    /// The configured headers (values expanded).
    pub headers: Vec<(String, String)>,
    /// Bounds connecting and waiting for a reply's headers.
    pub timeout: Duration,
    pub max_message: usize,
    /// The proxy its requests go through (`net::proxy_for_in`, the session's variables first).
    pub proxy: Option<String>,
}

/// Bearer tokens for a server that needs authorization (see `oauth.rs`).
pub(super) trait Credentials: Send + Sync {
    /// The token to send (refreshed first when it has expired); None: none yet.
    fn token(&self) -> Option<String>;
    /// The server refused `refused`: a refreshed token to retry with, if one can be had.
    fn refresh(&self, refused: &str) -> Option<String>;
}

/// The revision from which the protocol is stateless (no session, no GET stream).
const MODERN: &str = super::MODERN;

/// An error body is read up to this much.
const MAX_ERROR_BODY: u64 = 64 * 1024;

fn agent(ep: &Endpoint) -> ureq::Agent {
    crate::net::agent_via(
        &ep.url,
        crate::net::Timeouts {
            connect: Some(ep.timeout),
            response: Some(ep.timeout),
            per_read: None,
            global: None,
        },
        ep.proxy.as_deref(),
    )
}

fn header(resp: &Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

fn read_limited(r: impl Read, max: u64) -> Result<String, usize> {
    let mut buf = Vec::new();
    let _ = r.take(max + 1).read_to_end(&mut buf);
    if buf.len() as u64 > max {
        return Err(buf.len());
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

type Response = ureq::http::Response<ureq::Body>;

/// Sends a request built by `send` with the current token; when the server refuses it (401),
/// the token is refreshed and the request sent once more.
fn with_token(
    creds: Option<&Arc<dyn Credentials>>,
    send: impl Fn(Option<&str>) -> Result<Response, Failure>,
) -> Result<Response, Failure> {
    let token = creds.and_then(|c| c.token());
    let resp = send(token.as_deref())?;
    if resp.status().as_u16() == 401
        && let Some(c) = creds
        && let Some(t) = c.refresh(token.as_deref().unwrap_or(""))
    {
        return send(Some(&t));
    }
    Ok(resp)
}

/// The configured headers and, when there is one, the bearer token.
fn with_headers<B>(
    mut rb: ureq::RequestBuilder<B>,
    headers: &[(String, String)],
    token: Option<&str>,
) -> ureq::RequestBuilder<B> {
    for (k, v) in headers {
        rb = rb.header(k.as_str(), v.as_str());
    }
    if let Some(t) = token {
        rb = rb.header("authorization", format!("Bearer {t}").as_str());
    }
    rb
}

/// A header value as Streamable HTTP carries it: plain when it is visible ASCII without
/// surrounding spaces, else `=?base64?…?=`.
pub(super) fn header_value(v: &str) -> String {
    let plain = !v.is_empty()
        && v.bytes().all(|b| (0x20..0x7f).contains(&b) || b == b'\t')
        && v.trim() == v
        && !(v.starts_with("=?base64?") && v.ends_with("?="));
    if plain {
        v.to_string()
    } else {
        format!("=?base64?{}?=", base64(v.as_bytes()))
    }
}

/// A non-2xx reply as a failure: its JSON-RPC error when the body holds one.
fn status_failure(status: u16, resp: Response) -> Failure {
    let www = header(&resp, "www-authenticate").unwrap_or_default();
    let body = read_limited(resp.into_body().into_reader(), MAX_ERROR_BODY).unwrap_or_default();
    if status == 401 || (status == 403 && www.to_ascii_lowercase().contains("bearer")) {
        return Failure::Unauthorized(if www.is_empty() {
            format!("HTTP {status}")
        } else {
            www
        });
    }
    if let Ok(v) = serde_json::from_str::<Value>(body.trim())
        && let Some(e) = v.get("error").filter(|e| e.is_object())
    {
        return rpc_failure(e);
    }
    let mut snippet: String = body.trim().chars().take(200).collect();
    if snippet.len() < body.trim().len() {
        snippet.push('…');
    }
    Failure::Http {
        status,
        body: snippet,
    }
}

/// Feeds an event stream to the dispatch until `until` says to stop. Replies to the server's own
/// requests are handed to `reply`. Returns false when the stream broke or ended.
fn pump(
    reader: impl Read,
    max: usize,
    dispatch: &Dispatch,
    reply: &dyn Fn(Value),
    until: &dyn Fn() -> bool,
) -> bool {
    let mut sse = SseReader::with_limit(BufReader::new(reader), max);
    loop {
        match sse.next_event() {
            Ok(Some(ev)) if ev.event == "message" || ev.event.is_empty() => {
                if ev.data.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(&ev.data) {
                    Ok(v) => {
                        for r in dispatch.handle(v) {
                            reply(r);
                        }
                    }
                    Err(_) => dispatch.garbage(&ev.data),
                }
                if until() {
                    return true;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => return false,
            Err(e) => {
                if e.get_ref()
                    .is_some_and(|x| x.is::<crate::llm::sse::TooLarge>())
                {
                    dispatch.warn_once(
                        "large",
                        format!(
                            "the server sent a message over the limit of {} MB: it was dropped",
                            max / (1024 * 1024)
                        ),
                    );
                }
                return false;
            }
        }
    }
}

struct Inner {
    ep: Endpoint,
    agent: ureq::Agent,
    dispatch: Arc<Dispatch>,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<&'static str>>,
    creds: Option<Arc<dyn Credentials>>,
    listening: AtomicBool,
    closed: AtomicBool,
}

/// The Streamable HTTP transport.
pub(super) struct Streamable {
    inner: Arc<Inner>,
}

impl Streamable {
    pub(super) fn new(
        ep: Endpoint,
        dispatch: Arc<Dispatch>,
        creds: Option<Arc<dyn Credentials>>,
    ) -> Streamable {
        Streamable {
            inner: Arc::new(Inner {
                agent: agent(&ep),
                ep,
                dispatch,
                session: Mutex::new(None),
                protocol: Mutex::new(None),
                creds,
                listening: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// Opens the GET stream older revisions offer for what the server sends on its own (a 405
    /// means the server has none). Its messages go to the dispatch; it ends with the session.
    pub(super) fn listen(&self) {
        if self.inner.listening.swap(true, Ordering::SeqCst) {
            return;
        }
        let inner = self.inner.clone();
        let _ = std::thread::Builder::new()
            .name("mcp-http-get".into())
            .spawn(move || {
                let token = inner.creds.as_ref().and_then(|c| c.token());
                let rb = inner
                    .agent
                    .get(&inner.ep.url)
                    .header("accept", "text/event-stream");
                let Ok(resp) = with_headers(rb, &inner.headers(), token.as_deref()).call() else {
                    return;
                };
                if resp.status().as_u16() != 200 {
                    return;
                }
                let reader = resp.into_body().into_reader();
                let i2 = inner.clone();
                pump(
                    reader,
                    inner.ep.max_message,
                    &inner.dispatch,
                    &|r| i2.post_reply(r),
                    &|| i2.closed.load(Ordering::SeqCst),
                );
            });
    }
}

impl Inner {
    fn modern(&self) -> bool {
        *self.protocol.lock().unwrap_or_else(|e| e.into_inner()) == Some(MODERN)
    }

    /// The headers of every request: configured ones, session, version.
    fn headers(&self) -> Vec<(String, String)> {
        let mut h = self.ep.headers.clone();
        if let Some(s) = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            h.push(("mcp-session-id".into(), s));
        }
        if let Some(v) = *self.protocol.lock().unwrap_or_else(|e| e.into_inner()) {
            h.push(("mcp-protocol-version".into(), v.to_string()));
        }
        h
    }

    /// POSTs `body`; a refused token is refreshed and the request sent once more.
    fn post(&self, body: &[u8], env: &Envelope) -> Result<Response, Failure> {
        with_token(self.creds.as_ref(), |token| {
            let rb = self
                .agent
                .post(&self.ep.url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream");
            let mut rb = with_headers(rb, &self.headers(), token);
            if self.modern() {
                rb = rb.header("mcp-method", env.method.as_str());
                if let Some(n) = &env.name {
                    rb = rb.header("mcp-name", header_value(n).as_str());
                }
                for (k, v) in &env.headers {
                    rb = rb.header(format!("mcp-param-{k}").as_str(), header_value(v).as_str());
                }
            }
            rb.send(body)
                .map_err(|e| Failure::Transport(format!("{}: {e}", self.ep.url)))
        })
    }

    /// Sends one request and routes its reply (JSON or an event stream) to the dispatch.
    fn request(self: &Arc<Self>, body: Vec<u8>, env: &Envelope, id: u64) {
        let resp = match self.post(&body, env) {
            Ok(r) => r,
            Err(f) => return self.dispatch.answer(id, Err(f)),
        };
        let status = resp.status().as_u16();
        if let Some(s) = header(&resp, "mcp-session-id").filter(|s| !s.is_empty()) {
            *self.session.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
        }
        if status == 404
            && self
                .session
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some()
        {
            return self.dispatch.answer(id, Err(Failure::SessionExpired));
        }
        if !(200..300).contains(&status) {
            return self.dispatch.answer(id, Err(status_failure(status, resp)));
        }
        if status == 202 {
            // The answer comes on the GET stream.
            return;
        }
        let ct = header(&resp, "content-type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let reader = resp.into_body().into_reader();
        let max = self.ep.max_message;
        if ct.starts_with("text/event-stream") {
            let me = self.clone();
            pump(reader, max, &self.dispatch, &|r| me.post_reply(r), &|| {
                !me.dispatch.is_pending(id)
            });
            // Dropping the stream before the answer cancels the request (modern servers).
        } else {
            match read_limited(reader, max as u64) {
                Ok(text) if text.trim().is_empty() => {}
                Ok(text) => match serde_json::from_str::<Value>(text.trim()) {
                    Ok(v) => {
                        for r in self.dispatch.handle(v) {
                            self.post_reply(r);
                        }
                    }
                    Err(_) => self.dispatch.garbage(&text),
                },
                Err(n) => {
                    let why = format!(
                        "the server sent a reply of {} MB, over the limit of {} MB",
                        n / (1024 * 1024),
                        max / (1024 * 1024)
                    );
                    self.dispatch.warn_once("large", why.clone());
                    return self.dispatch.answer(id, Err(Failure::Transport(why)));
                }
            }
        }
        if self.dispatch.is_pending(id) {
            self.dispatch.answer(
                id,
                Err(Failure::Closed(
                    "the server's reply ended without an answer".into(),
                )),
            );
        }
    }

    /// A reply to one of the server's own requests, POSTed on a thread of its own.
    fn post_reply(self: &Arc<Self>, msg: Value) {
        let me = self.clone();
        let _ = std::thread::Builder::new()
            .name("mcp-http-reply".into())
            .spawn(move || {
                let env = Envelope::default();
                if let Err(e) = me.post(msg.to_string().as_bytes(), &env) {
                    crate::log::debug(&format!("mcp: reply not delivered: {e}"));
                }
            });
    }
}

impl Transport for Streamable {
    /// A request is sent on a thread of its own (its reply may stream for long); a notification
    /// is sent before this returns, so it arrives before what is sent after it.
    fn send(&self, msg: &Value, env: &Envelope) -> Result<(), Failure> {
        let body = msg.to_string().into_bytes();
        let Some(id) = env.id else {
            let resp = self.inner.post(&body, env)?;
            let status = resp.status().as_u16();
            if !(200..300).contains(&status) {
                let f = status_failure(status, resp);
                crate::log::debug(&format!("mcp: {} refused: {f}", env.method));
            }
            return Ok(());
        };
        let inner = self.inner.clone();
        let env = env.clone();
        std::thread::Builder::new()
            .name("mcp-http".into())
            .spawn(move || inner.request(body, &env, id))
            .map(|_| ())
            .map_err(|e| Failure::Transport(format!("cannot start a thread: {e}")))
    }

    fn set_protocol(&self, version: Option<&'static str>) {
        *self
            .inner
            .protocol
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = version;
    }

    fn established(&self) {
        self.listen();
    }

    fn cancels_by_notification(&self) -> bool {
        !self.inner.modern()
    }

    /// Ends the session with a DELETE (older revisions), bounded by a short timeout.
    fn close(&self) {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let session = self
            .inner
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if session.is_some() && !self.inner.modern() {
            let token = self.inner.creds.as_ref().and_then(|c| c.token());
            let rb = self.inner.agent.delete(&self.inner.ep.url);
            let _ = with_headers(rb, &self.inner.headers(), token.as_deref()).call();
        }
    }
}

/// The HTTP+SSE transport of 2024-11-05.
pub(super) struct LegacySse {
    inner: Arc<SseInner>,
}

struct SseInner {
    ep: Endpoint,
    agent: ureq::Agent,
    post_url: String,
    dispatch: Arc<Dispatch>,
    creds: Option<Arc<dyn Credentials>>,
    closed: AtomicBool,
}

impl LegacySse {
    /// Opens the event stream and waits (at most the endpoint's timeout) for its `endpoint`
    /// event.
    pub(super) fn connect(
        ep: Endpoint,
        dispatch: Arc<Dispatch>,
        creds: Option<Arc<dyn Credentials>>,
    ) -> Result<LegacySse, Failure> {
        let agent = agent(&ep);
        let (tx, rx) = crossbeam_channel::bounded::<Result<(String, SseReader<_>), Failure>>(1);
        let (ep2, agent2, creds2) = (ep.clone(), agent.clone(), creds.clone());
        std::thread::Builder::new()
            .name("mcp-sse".into())
            .spawn(move || {
                let opened = (|| {
                    let resp = with_token(creds2.as_ref(), |token| {
                        let rb = agent2.get(&ep2.url).header("accept", "text/event-stream");
                        with_headers(rb, &ep2.headers, token)
                            .call()
                            .map_err(|e| Failure::Transport(format!("{}: {e}", ep2.url)))
                    })?;
                    let status = resp.status().as_u16();
                    if !(200..300).contains(&status) {
                        return Err(status_failure(status, resp));
                    }
                    let mut sse = SseReader::with_limit(
                        BufReader::new(resp.into_body().into_reader()),
                        ep2.max_message,
                    );
                    loop {
                        match sse.next_event() {
                            Ok(Some(ev)) if ev.event == "endpoint" => {
                                return Ok((ev.data.trim().to_string(), sse));
                            }
                            Ok(Some(_)) => {}
                            Ok(None) => {
                                return Err(Failure::Closed(
                                    "the event stream ended before its endpoint event".into(),
                                ));
                            }
                            Err(e) => return Err(Failure::Transport(e.to_string())),
                        }
                    }
                })();
                let _ = tx.send(opened);
            })
            .map_err(|e| Failure::Transport(format!("cannot start a thread: {e}")))?;
        let (endpoint, mut sse) = match rx.recv_timeout(ep.timeout) {
            Ok(r) => r?,
            Err(_) => return Err(Failure::TimedOut(ep.timeout)),
        };
        let base = Url::parse(&ep.url)
            .ok_or_else(|| Failure::Transport(format!("not an URL: {}", ep.url)))?;
        let post_url = base.join(&endpoint);
        // The POST endpoint must be on the same origin as the stream.
        if Url::parse(&post_url).map(|u| u.origin()) != Some(base.origin()) {
            return Err(Failure::Transport(format!(
                "the server named a POST endpoint on another origin: {post_url}"
            )));
        }
        let inner = Arc::new(SseInner {
            ep,
            agent,
            post_url,
            dispatch,
            creds,
            closed: AtomicBool::new(false),
        });
        let i2 = inner.clone();
        std::thread::Builder::new()
            .name("mcp-sse".into())
            .spawn(move || {
                loop {
                    match sse.next_event() {
                        Ok(Some(ev)) if ev.event == "message" => {
                            match serde_json::from_str::<Value>(&ev.data) {
                                Ok(v) => {
                                    for r in i2.dispatch.handle(v) {
                                        let _ = i2.post(&r);
                                    }
                                }
                                Err(_) => i2.dispatch.garbage(&ev.data),
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) | Err(_) => break,
                    }
                    if i2.closed.load(Ordering::SeqCst) {
                        return;
                    }
                }
                i2.dispatch
                    .close("the server closed its event stream".into());
            })
            .map_err(|e| Failure::Transport(format!("cannot start a thread: {e}")))?;
        Ok(LegacySse { inner })
    }
}

impl SseInner {
    fn post(&self, msg: &Value) -> Result<(), Failure> {
        let body = msg.to_string();
        let resp = with_token(self.creds.as_ref(), |token| {
            let rb = self
                .agent
                .post(&self.post_url)
                .header("content-type", "application/json");
            with_headers(rb, &self.ep.headers, token)
                .send(body.as_bytes())
                .map_err(|e| Failure::Transport(format!("{}: {e}", self.post_url)))
        })?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(status_failure(status, resp));
        }
        let _ = read_limited(resp.into_body().into_reader(), MAX_ERROR_BODY);
        Ok(())
    }
}

impl Transport for LegacySse {
    /// As for Streamable HTTP: notifications are sent before this returns.
    fn send(&self, msg: &Value, env: &Envelope) -> Result<(), Failure> {
        let Some(id) = env.id else {
            return self.inner.post(msg);
        };
        let inner = self.inner.clone();
        let msg = msg.clone();
        std::thread::Builder::new()
            .name("mcp-sse-post".into())
            .spawn(move || {
                if let Err(f) = inner.post(&msg) {
                    inner.dispatch.answer(id, Err(f));
                }
            })
            .map(|_| ())
            .map_err(|e| Failure::Transport(format!("cannot start a thread: {e}")))
    }

    fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_plain_or_base64() {
        assert_eq!(header_value("us-west1"), "us-west1");
        assert_eq!(
            header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            header_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }
}
