//! The streaming worker: one HTTP call per attempt over ureq, SSE parsed as it arrives, progress
//! sent on a channel, retries per `RetryPolicy`.

use super::dialect::{Accumulator, Dialect, ErrorReply, Framing, Signer, Visit};
use super::endpoints::{self, TokenOrigin, TokenSource};
use super::retry::{self, Failure, backoff, classify_http, error_from_json, jittered};
use super::sse::{MAX_EVENT_BYTES, SseReader, TooLarge};
use super::{ChatRequest, Endpoint, LlmError, Part, Response, RetryPolicy, StreamEvent, bedrock};
use crossbeam_channel::{Receiver, Sender};
use std::collections::HashMap;
use std::io::{self, BufReader, Read};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Largest error body read (the message is cut to a snippet anyway).
const MAX_ERROR_BODY: u64 = 256 * 1024;

/// Most bytes read after the final event so that the connection can go back to the pool (the
/// end of the body usually follows at once: a chunked terminator, or nothing).
const MAX_DRAIN: u64 = 64 * 1024;

/// The rest of a streamed body, after the final event.
type Rest = BufReader<ureq::BodyReader<'static>>;

/// Events the worker may have sent and the caller not yet taken. When the caller falls behind,
/// the worker waits (and stops reading the network) instead of queueing without limit; when the
/// caller drops the receiver, a waiting worker wakes with an error and stops.
const EVENT_QUEUE: usize = 256;

/// Starts the worker thread; see `crate::llm::stream`.
pub(super) fn stream(
    endpoint: &Endpoint,
    req: &ChatRequest,
    policy: &RetryPolicy,
) -> Receiver<StreamEvent> {
    start(Job::new(endpoint, req, policy)).0
}

/// Runs `job` on a new thread; its events arrive on the receiver.
fn start(job: Job) -> (Receiver<StreamEvent>, Option<std::thread::JoinHandle<()>>) {
    let (tx, rx) = crossbeam_channel::bounded(EVENT_QUEUE);
    let spare = tx.clone();
    let spawned = std::thread::Builder::new()
        .name("llm-stream".into())
        .spawn(move || job.run(&tx));
    match spawned {
        Ok(h) => (rx, Some(h)),
        Err(e) => {
            let _ = spare.send(StreamEvent::Error(LlmError::Protocol(format!(
                "cannot start the model worker thread: {e}"
            ))));
            (rx, None)
        }
    }
}

/// Runs one call to the end and returns its result (for short calls such as titles).
pub(super) fn complete(
    endpoint: &Endpoint,
    req: &ChatRequest,
    policy: &RetryPolicy,
) -> Result<Response, LlmError> {
    for ev in stream(endpoint, req, policy).iter() {
        match ev {
            StreamEvent::Done(r) => return Ok(r),
            StreamEvent::Error(e) => return Err(e),
            _ => {}
        }
    }
    Err(LlmError::Protocol(
        "the model worker stopped without a result".into(),
    ))
}

/// Everything one call needs, owned by the worker. The body is serialised once, so every attempt
/// sends identical bytes.
struct Job {
    url: String,
    dialect: Dialect,
    headers: Vec<(String, String)>,
    /// A bearer token fetched before each attempt (Vertex AI's access token).
    token: Option<TokenSource>,
    body: Vec<u8>,
    policy: RetryPolicy,
    /// Most bytes one attempt's reply may accumulate (`MAX_REPLY_BYTES`; smaller in tests).
    reply_limit: usize,
    framing: Framing,
    /// Signs each attempt and reads refusals (Bedrock's SigV4).
    signer: Option<Box<dyn Signer>>,
    /// The proxy the call goes through (`net::proxy_for_in`, the session's variables first).
    proxy: Option<String>,
}

/// How an attempt ended without a response.
enum End {
    Failed(Failure),
    /// The receiver was dropped: stop quietly.
    Gone,
}

impl From<Failure> for End {
    fn from(f: Failure) -> Self {
        End::Failed(f)
    }
}

/// A reply in server-sent events, read by the accumulator of the call's dialect.
struct SseStream<'a> {
    job: &'a Job,
    reader: ureq::BodyReader<'static>,
    tx: &'a Sender<StreamEvent>,
}

impl Visit for SseStream<'_> {
    type Out = Result<(Response, Option<Rest>), End>;

    fn visit<A: Accumulator>(self) -> Self::Out {
        let mut sse = SseReader::new(BufReader::new(self.reader));
        let mut acc = A::with_limit(self.job.reply_limit);
        let mut out = Vec::new();
        loop {
            match sse.next_event() {
                Ok(Some(ev)) => {
                    let r = acc.feed(&ev, &mut out);
                    send_all(self.tx, &mut out)?;
                    if r? {
                        return Ok((acc.finish()?, Some(sse.into_inner())));
                    }
                }
                Ok(None) => return Ok((acc.finish()?, None)),
                Err(e) => return Err(self.job.read_error(e).into()),
            }
        }
    }
}

/// Sends the progress events in `out` (emptying it); `Gone` once the receiver is dropped.
fn send_all(tx: &Sender<StreamEvent>, out: &mut Vec<StreamEvent>) -> Result<(), End> {
    for e in out.drain(..) {
        if tx.send(e).is_err() {
            return Err(End::Gone);
        }
    }
    Ok(())
}

fn nonzero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

fn secs_ceil(d: Duration) -> u64 {
    d.as_secs_f64().ceil() as u64
}

fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Job {
    fn new(ep: &Endpoint, req: &ChatRequest, policy: &RetryPolicy) -> Job {
        let p = endpoints::prepare(ep, req);
        Job {
            dialect: p.dialect,
            headers: request_headers(p.headers, &ep.headers),
            token: p.token,
            // Serialising a Value cannot fail (all keys are strings).
            body: serde_json::to_vec(&p.body).unwrap_or_default(),
            policy: policy.clone(),
            reply_limit: policy.max_reply_bytes,
            framing: p.framing,
            signer: p.signer,
            proxy: crate::net::proxy_for_in(&p.url, &ep.env),
            url: p.url,
        }
    }

    /// The agent for this call's settings, shared by every call with the same settings for the
    /// life of the process, so that the calls of a tool loop reuse one connection (and its TLS
    /// session) instead of each paying for a new handshake.
    ///
    /// ureq returns a connection to the pool only when its response body was read to the end
    /// (and nothing more was sent); a body abandoned half-read (a cancelled call, a failure, an
    /// oversized reply) drops its connection, which closes it. A pooled connection the server
    /// has closed meanwhile is detected when taken, and none idle longer than 15 s is used.
    fn agent(&self) -> ureq::Agent {
        /// The timeouts and the proxy: everything the agent is built from.
        type Key = (crate::net::Timeouts, Option<String>, bool);
        static AGENTS: OnceLock<Mutex<HashMap<Key, ureq::Agent>>> = OnceLock::new();
        let p = &self.policy;
        let t = crate::net::Timeouts {
            connect: nonzero(p.connect_timeout),
            response: nonzero(p.response_timeout),
            per_read: nonzero(p.idle_timeout),
            global: None,
        };
        let https = self.url.starts_with("https://");
        let key = (t, self.proxy.clone(), https);
        let mut agents = AGENTS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        agents
            .entry(key)
            .or_insert_with(|| crate::net::agent_via(&self.url, t, self.proxy.as_deref()))
            .clone()
    }

    fn run(&self, tx: &Sender<StreamEvent>) {
        let agent = self.agent();
        let max = self.policy.max_attempts.max(1);
        let mut attempt = 1;
        // A token the server refused is replaced once, by a fresh one from its command.
        let (mut fresh_token, mut refreshed) = (false, false);
        loop {
            let token = match self.token.as_ref().map(|t| t.get(fresh_token)) {
                None => None,
                Some(Ok(t)) => Some(t),
                Some(Err(e)) => {
                    let _ = tx.send(StreamEvent::Error(e));
                    return;
                }
            };
            fresh_token = false;
            let f = match self.attempt(&agent, tx, token.as_ref().map(|t| t.0.as_str())) {
                Ok((r, rest)) => {
                    if tx.send(StreamEvent::Done(r)).is_ok()
                        && let Some(rest) = rest
                    {
                        // After the reply is delivered: reading to the end of the body puts
                        // the connection back in the pool for the next call.
                        let _ = io::copy(&mut rest.take(MAX_DRAIN), &mut io::sink());
                    }
                    return;
                }
                Err(End::Gone) => return,
                Err(End::Failed(f)) => self.named(f),
            };
            let f = match (&token, f) {
                (Some((_, origin)), f) if is_unauthorized(&f.error) => {
                    if matches!(origin, TokenOrigin::Command | TokenOrigin::Login) && !refreshed {
                        refreshed = true;
                        fresh_token = true;
                        let ev = StreamEvent::Retry {
                            attempt,
                            wait: Duration::ZERO,
                            reason: format!("{} (getting a fresh access token)", f.error),
                        };
                        if tx.send(ev).is_err() {
                            return;
                        }
                        continue;
                    }
                    token_refused(f, *origin)
                }
                (_, f) => f,
            };
            if let LlmError::Auth {
                refreshable: true, ..
            } = &f.error
                && !refreshed
                && let Some(outcome) = self.signer.as_ref().and_then(|s| s.refresh(&f.error, tx))
            {
                refreshed = true;
                match outcome {
                    Ok(()) => continue,
                    Err(e) => {
                        let _ = tx.send(StreamEvent::Error(e));
                        return;
                    }
                }
            }
            if !f.retryable || attempt >= max {
                let _ = tx.send(StreamEvent::Error(f.error));
                return;
            }
            let wait = f
                .retry_after
                .unwrap_or_else(|| jittered(backoff(&self.policy, attempt), clock_seed()));
            let ev = StreamEvent::Retry {
                attempt,
                wait,
                reason: f.error.to_string(),
            };
            if tx.send(ev).is_err() {
                return;
            }
            std::thread::sleep(wait);
            attempt += 1;
        }
    }

    /// `f`, naming this call's server when it says a stream was cut short.
    fn named(&self, mut f: Failure) -> Failure {
        if let LlmError::Truncated { server, .. } = &mut f.error
            && server.is_empty()
        {
            *server = crate::net::authority_of(&self.url).to_string();
        }
        f
    }

    /// One request. A streamed reply comes with the rest of its body, to be read after the reply
    /// is delivered.
    fn attempt(
        &self,
        agent: &ureq::Agent,
        tx: &Sender<StreamEvent>,
        token: Option<&str>,
    ) -> Result<(Response, Option<Rest>), End> {
        let mut rb = agent.post(&self.url);
        for (k, v) in &self.headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        if let Some(t) = token {
            rb = rb.header("authorization", format!("Bearer {t}"));
        }
        let mut credentials = None;
        if let Some(s) = &self.signer {
            let (signed, source) = s.sign(&self.url, &self.body)?;
            for (k, v) in &signed {
                rb = rb.header(k.as_str(), v.as_str());
            }
            credentials = source;
        }
        let resp = rb.send(&self.body[..]).map_err(|e| self.send_error(e))?;
        let status = resp.status().as_u16();
        let headers: Vec<(String, String)> = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let reader = resp.into_body().into_reader();
        if !(200..300).contains(&status) {
            let body = read_limited(reader, MAX_ERROR_BODY);
            return Err(match &self.signer {
                Some(s) => s.classify(
                    &ErrorReply {
                        status,
                        headers: &headers,
                        body: &body,
                        credentials,
                    },
                    &self.policy,
                ),
                None => classify_http(status, &headers, &body, &self.policy, SystemTime::now()),
            }
            .into());
        }
        let ct = retry::header(&headers, "content-type")
            .unwrap_or("")
            .to_ascii_lowercase();
        if !ct.is_empty() && !ct.starts_with(self.framing.content_type()) {
            return Ok((self.whole_body(&ct, &headers, reader, tx)?, None));
        }
        match self.framing {
            Framing::Sse => self.dialect.visit(SseStream {
                job: self,
                reader,
                tx,
            }),
            Framing::EventStream => self.event_stream(reader, tx),
        }
    }

    /// A reply in AWS's event stream: messages carrying Anthropic's events (Bedrock's).
    fn event_stream(
        &self,
        reader: ureq::BodyReader<'static>,
        tx: &Sender<StreamEvent>,
    ) -> Result<(Response, Option<Rest>), End> {
        let mut frames = crate::aws::eventstream::Decoder::new(
            BufReader::new(reader),
            MAX_EVENT_BYTES.min(self.reply_limit.saturating_add(64 * 1024)),
        );
        let mut acc = bedrock::Frames::new(self.reply_limit);
        let mut out = Vec::new();
        loop {
            let m = match frames.next_message() {
                Ok(Some(m)) => m,
                Ok(None) => return Ok((acc.finish()?, None)),
                Err(e) => {
                    return Err(match bedrock::frame_failure(e) {
                        Ok(f) => f,
                        Err(io) => self.read_error(io),
                    }
                    .into());
                }
            };
            let r = acc.feed(&m, &mut out);
            send_all(tx, &mut out)?;
            if r? {
                return Ok((acc.finish()?, Some(frames.into_inner())));
            }
        }
    }

    /// A 2xx reply that is not an event stream: an error object, or a whole (non-streamed) reply
    /// from a server that ignored `stream:true`.
    fn whole_body(
        &self,
        ct: &str,
        headers: &[(String, String)],
        reader: impl Read,
        tx: &Sender<StreamEvent>,
    ) -> Result<Response, End> {
        let body = read_limited(reader, MAX_EVENT_BYTES as u64);
        let v = serde_json::from_str::<serde_json::Value>(body.trim()).ok();
        if let Some(v) = &v {
            if let Some(eb) = error_from_json(v) {
                let request_id = retry::header(headers, "request-id")
                    .or_else(|| retry::header(headers, "x-request-id"));
                let mut msg = format!("server error: {}", eb.message);
                if let Some(id) = request_id.or(eb.request_id.as_deref()) {
                    msg.push_str(&format!(" (request id {id})"));
                }
                return Err(Failure {
                    error: LlmError::Protocol(msg),
                    retryable: retry::kind_retryable(eb.kind.as_deref(), eb.code.as_deref()),
                    retry_after: None,
                }
                .into());
            }
            if let Some(r) = self.dialect.whole_reply(v) {
                for p in &r.parts {
                    let ev = match p {
                        Part::Text { text } => StreamEvent::TextDelta(text.clone()),
                        Part::Reasoning { thinking, .. } => {
                            StreamEvent::ReasoningDelta(thinking.clone())
                        }
                        Part::ToolCall { name, .. } => {
                            StreamEvent::ToolCallStart { name: name.clone() }
                        }
                        _ => continue,
                    };
                    if tx.send(ev).is_err() {
                        return Err(End::Gone);
                    }
                }
                return Ok(r);
            }
        }
        Err(Failure::fatal(LlmError::Protocol(format!(
            "expected an event stream, got {ct}: {}",
            retry::snippet(&body, 200)
        )))
        .into())
    }

    fn send_error(&self, e: ureq::Error) -> End {
        let connect = |message: String| LlmError::Connect {
            url: crate::net::redact_url(&self.url),
            message,
        };
        let f = match e {
            ureq::Error::Timeout(t) => {
                use ureq::Timeout as T;
                match t {
                    T::Resolve | T::Connect => Failure::retry(connect(format!(
                        "connection timed out after {} s",
                        secs_ceil(self.policy.connect_timeout)
                    ))),
                    T::RecvResponse => Failure::retry(LlmError::IdleTimeout {
                        secs: secs_ceil(self.policy.response_timeout),
                    }),
                    T::PerRead => Failure::retry(LlmError::IdleTimeout {
                        secs: secs_ceil(self.policy.idle_timeout),
                    }),
                    other => Failure::retry(connect(format!("timeout: {other}"))),
                }
            }
            ureq::Error::Io(io) => Failure::retry(connect(io.to_string())),
            ureq::Error::HostNotFound => Failure::retry(connect("host not found".into())),
            ureq::Error::ConnectionFailed => Failure::retry(connect("connection failed".into())),
            ureq::Error::Protocol(p) => {
                Failure::retry(connect(format!("HTTP protocol error: {p}")))
            }
            ureq::Error::Http(_) | ureq::Error::BadUri(_) | ureq::Error::InvalidProxyUrl => {
                let msg = e
                    .to_string()
                    .replace(&self.url, &crate::net::redact_url(&self.url));
                Failure::fatal(LlmError::Protocol(format!(
                    "cannot build the request: {msg}"
                )))
            }
            other => Failure::fatal(connect(other.to_string())),
        };
        End::Failed(f)
    }

    fn read_error(&self, e: io::Error) -> Failure {
        let ureq_timeout = e
            .get_ref()
            .and_then(|i| i.downcast_ref::<ureq::Error>())
            .is_some_and(|u| matches!(u, ureq::Error::Timeout(_)));
        if ureq_timeout
            || matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            )
        {
            return Failure::retry(LlmError::IdleTimeout {
                secs: secs_ceil(self.policy.idle_timeout),
            });
        }
        if e.get_ref().is_some_and(|i| i.is::<TooLarge>()) {
            return Failure::fatal(LlmError::Protocol(e.to_string()));
        }
        Failure::retry(LlmError::Connect {
            url: crate::net::redact_url(&self.url),
            message: format!("connection lost while streaming: {e}"),
        })
    }
}

/// Every header of a request: the fixed ones, then the provider's (`provider`), then the user's
/// (`user`, from the configuration). A fixed header the provider sets, and a fixed or provider
/// header that the user also sets, is left out (names compare ignoring case): `http` appends repeated names, and a server seeing two
/// `authorization` headers may use either, or refuse the request.
fn is_unauthorized(e: &LlmError) -> bool {
    matches!(e, LlmError::Http { status: 401, .. })
}

/// A refused access token's failure, saying where the token came from and what to do.
fn token_refused(mut f: Failure, origin: TokenOrigin) -> Failure {
    if let LlmError::Http { message, .. } = &mut f.error {
        message.push_str(match origin {
            TokenOrigin::Environment => {
                "; the access token in GOOGLE_OAUTH_ACCESS_TOKEN was refused (expired?): set a fresh one (gcloud auth print-access-token)"
            }
            TokenOrigin::Login => {
                "; a fresh access token was refused too: sign in again (crush login)"
            }
            TokenOrigin::Command => {
                "; a fresh access token from gcloud was refused too: check the account (gcloud auth login) and its access to the project"
            }
        });
    }
    f.retryable = false;
    f
}

fn request_headers(
    provider: Vec<(String, String)>,
    user: &[(String, String)],
) -> Vec<(String, String)> {
    let fixed = [
        ("content-type", "application/json"),
        ("accept", "text/event-stream"),
        ("accept-encoding", "identity"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()));
    let user_sets = |name: &str| {
        user.iter()
            .any(|(k, _)| k.trim().eq_ignore_ascii_case(name))
    };
    let provider_sets = |name: &str| provider.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let fixed: Vec<_> = fixed
        .into_iter()
        .filter(|(k, _)| !provider_sets(k))
        .collect();
    fixed
        .into_iter()
        .chain(provider)
        .filter(|(k, _)| !user_sets(k))
        .chain(user.iter().cloned())
        .collect()
}

/// Up to `limit` bytes of `r` as text (read errors end the read: what came is kept).
fn read_limited(r: impl Read, limit: u64) -> String {
    let mut buf = Vec::new();
    let _ = r.take(limit).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ApiKind, FinishReason, Message, Usage};
    use std::io::{BufRead, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::Instant;

    /// One canned reply: pieces written with a pause before each, then the socket is closed.
    struct Reply(Vec<(u64, Vec<u8>)>);

    fn reply(raw: impl Into<String>) -> Reply {
        Reply(vec![(0, raw.into().into_bytes())])
    }

    fn http(status: u16, headers: &[(&str, &str)], body: &str) -> String {
        let mut s = format!("HTTP/1.1 {status} X\r\nconnection: close\r\n");
        for (k, v) in headers {
            s.push_str(&format!("{k}: {v}\r\n"));
        }
        s.push_str("\r\n");
        s.push_str(body);
        s
    }

    fn sse_head() -> String {
        http(200, &[("content-type", "text/event-stream")], "")
    }

    type Head = Vec<(String, String)>;

    struct Server {
        url: String,
        bodies: Arc<Mutex<Vec<String>>>,
        /// The header lines of each request, as (name, value).
        heads: Arc<Mutex<Vec<Head>>>,
    }

    /// Serves `replies` in order, one connection each, on 127.0.0.1.
    fn serve(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (b2, h2) = (bodies.clone(), heads.clone());
        thread::spawn(move || {
            for r in replies {
                let Ok((mut sock, _)) = listener.accept() else {
                    return;
                };
                let Some((head, body)) = read_request(&sock) else {
                    continue;
                };
                h2.lock().unwrap().push(head);
                b2.lock().unwrap().push(body);
                for (pause, bytes) in r.0 {
                    thread::sleep(Duration::from_millis(pause));
                    if sock.write_all(&bytes).is_err() {
                        break;
                    }
                    let _ = sock.flush();
                }
                let _ = sock.shutdown(std::net::Shutdown::Both);
            }
        });
        Server { url, bodies, heads }
    }

    /// One request from `sock`: its header lines and its body.
    fn read_request(sock: &TcpStream) -> Option<(Head, String)> {
        read_request_from(&mut BufReader::new(sock.try_clone().ok()?))
    }

    fn read_request_from(rd: &mut impl BufRead) -> Option<(Vec<(String, String)>, String)> {
        let mut len = 0usize;
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if rd.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().ok()?;
                }
                head.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let mut body = vec![0; len];
        rd.read_exact(&mut body).ok()?;
        Some((head, String::from_utf8(body).ok()?))
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            base_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            max_retry_after: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            ..RetryPolicy::default()
        }
    }

    fn endpoint(url: &str, kind: ApiKind) -> Endpoint {
        Endpoint {
            kind,
            base_url: url.to_string(),
            api_key: Some("secret".into()),
            headers: vec![("x-extra".into(), "1".into())],
            ..Default::default()
        }
    }

    fn request() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system: "sys".into(),
            messages: vec![Message::user("hi")],
            tools: vec![],
            max_tokens: Some(100),
            temperature: None,
            ..Default::default()
        }
    }

    fn collect(rx: Receiver<StreamEvent>) -> Vec<StreamEvent> {
        rx.iter().collect()
    }

    fn anthropic_text(text: &str) -> String {
        let mut s = sse_head();
        let evs = [
            r#"{"type":"message_start","message":{"model":"claude","usage":{"input_tokens":3,"output_tokens":1}}}"#.to_string(),
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.to_string(),
            r#"{"type":"ping"}"#.to_string(),
            serde_json::json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}).to_string(),
            r#"{"type":"content_block_stop","index":0}"#.to_string(),
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#.to_string(),
            r#"{"type":"message_stop"}"#.to_string(),
        ];
        for e in evs {
            let ty: serde_json::Value = serde_json::from_str(&e).unwrap();
            s.push_str(&format!(
                "event: {}\ndata: {e}\n\n",
                ty["type"].as_str().unwrap()
            ));
        }
        s
    }

    fn openai_text(text: &str) -> String {
        let mut s = sse_head();
        s.push_str(&format!(
            "data: {}\n\n",
            serde_json::json!({"model":"gpt","choices":[{"index":0,"delta":{"content":text},"finish_reason":null}]})
        ));
        s.push_str(
            r#"data: {"model":"gpt","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        );
        s.push_str("\n\n");
        s.push_str(r#"data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}"#);
        s.push_str("\n\ndata: [DONE]\n\n");
        s
    }

    fn done(evs: &[StreamEvent]) -> &Response {
        match evs.last() {
            Some(StreamEvent::Done(r)) => r,
            other => panic!("expected Done, got {other:?} in {evs:?}"),
        }
    }

    fn error(evs: &[StreamEvent]) -> &LlmError {
        match evs.last() {
            Some(StreamEvent::Error(e)) => e,
            other => panic!("expected Error, got {other:?} in {evs:?}"),
        }
    }

    fn retries(evs: &[StreamEvent]) -> Vec<(u32, Duration)> {
        evs.iter()
            .filter_map(|e| match e {
                StreamEvent::Retry { attempt, wait, .. } => Some((*attempt, *wait)),
                _ => None,
            })
            .collect()
    }

    /// The values of header `name` in `head`, ignoring case.
    fn values<'a>(head: &'a [(String, String)], name: &str) -> Vec<&'a str> {
        head.iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    #[test]
    fn a_header_the_user_sets_replaces_the_built_in_one() {
        let srv = serve(vec![reply(openai_text("a")), reply(anthropic_text("b"))]);
        let mut ep = endpoint(&srv.url, ApiKind::OpenAi);
        ep.headers = vec![
            ("Authorization".into(), "Bearer from-user".into()),
            (
                "Content-Type".into(),
                "application/json; charset=utf-8".into(),
            ),
            ("User-Agent".into(), "mine/1".into()),
        ];
        complete(&ep, &request(), &policy()).unwrap();
        let mut ep = endpoint(&srv.url, ApiKind::Anthropic);
        ep.headers = vec![
            ("X-Api-Key".into(), "user-key".into()),
            ("Anthropic-Version".into(), "2099-01-01".into()),
        ];
        complete(&ep, &request(), &policy()).unwrap();
        let heads = srv.heads.lock().unwrap();
        let (oa, an) = (&heads[0], &heads[1]);
        assert_eq!(values(oa, "authorization"), ["Bearer from-user"]);
        assert_eq!(
            values(oa, "content-type"),
            ["application/json; charset=utf-8"]
        );
        assert_eq!(values(oa, "user-agent"), ["mine/1"]);
        assert_eq!(values(oa, "accept"), ["text/event-stream"]);
        assert_eq!(values(an, "x-api-key"), ["user-key"]);
        assert_eq!(values(an, "anthropic-version"), ["2099-01-01"]);
        assert_eq!(values(an, "content-type"), ["application/json"]);
        assert_eq!(values(an, "x-extra"), Vec::<&str>::new());
    }

    #[test]
    fn anthropic_streams_text_end_to_end() {
        let srv = serve(vec![reply(anthropic_text("Hello there"))]);
        let evs = collect(stream(
            &endpoint(&srv.url, ApiKind::Anthropic),
            &request(),
            &policy(),
        ));
        let r = done(&evs);
        assert_eq!(
            r.parts,
            vec![Part::Text {
                text: "Hello there".into()
            }]
        );
        assert_eq!(r.finish, FinishReason::EndTurn);
        assert_eq!(
            r.usage,
            Some(Usage {
                input: 3,
                output: 7,
                cache_read: 0,
                cache_write: 0
            })
        );
        assert!(matches!(&evs[0], StreamEvent::TextDelta(t) if t == "Hello there"));
        let bodies = srv.bodies.lock().unwrap();
        let sent: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
        assert_eq!(sent["stream"], true);
        assert_eq!(sent["messages"][0]["content"][0]["text"], "hi");
    }

    #[test]
    fn openai_streams_text_in_small_pieces() {
        // Every byte in its own write: lines, CRLF and UTF-8 split across reads.
        let raw = openai_text("héllo → 世界").replace("\n\n", "\r\n\r\n");
        let (head, body) = raw.split_at(raw.find("\r\n\r\n").unwrap() + 4);
        let mut pieces = vec![(0, head.as_bytes().to_vec())];
        pieces.extend(body.bytes().map(|b| (0, vec![b])));
        let srv = serve(vec![Reply(pieces)]);
        let r = complete(
            &endpoint(&srv.url, ApiKind::OpenAiCompat),
            &request(),
            &policy(),
        )
        .unwrap();
        assert_eq!(
            r.parts,
            vec![Part::Text {
                text: "héllo → 世界".into()
            }]
        );
        assert_eq!(r.usage.map(|u| u.input), Some(9));
    }

    #[test]
    fn server_error_then_success_is_retried_with_identical_body() {
        let srv = serve(vec![
            reply(http(
                500,
                &[("content-type", "application/json")],
                r#"{"error":{"message":"boom"}}"#,
            )),
            reply(http(
                529,
                &[],
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            )),
            reply(anthropic_text("ok")),
        ]);
        let evs = collect(stream(
            &endpoint(&srv.url, ApiKind::Anthropic),
            &request(),
            &policy(),
        ));
        assert_eq!(done(&evs).parts, vec![Part::Text { text: "ok".into() }]);
        let r = retries(&evs);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2]);
        assert!(r.iter().all(|(_, w)| *w <= Duration::from_millis(20)));
        match &evs[0] {
            StreamEvent::Retry { reason, .. } => assert!(reason.contains("boom"), "{reason}"),
            other => panic!("{other:?}"),
        }
        let bodies = srv.bodies.lock().unwrap();
        assert_eq!(bodies.len(), 3);
        assert!(bodies.iter().all(|b| b == &bodies[0]));
    }

    #[test]
    fn rate_limit_waits_for_retry_after_ms() {
        let srv = serve(vec![
            reply(http(
                429,
                &[("retry-after-ms", "150"), ("retry-after", "1")],
                r#"{"error":{"message":"slow down","type":"rate_limit_exceeded"}}"#,
            )),
            reply(openai_text("done")),
        ]);
        let t0 = Instant::now();
        let evs = collect(stream(
            &endpoint(&srv.url, ApiKind::OpenAi),
            &request(),
            &policy(),
        ));
        assert_eq!(
            done(&evs).parts,
            vec![Part::Text {
                text: "done".into()
            }]
        );
        assert_eq!(retries(&evs), [(1, Duration::from_millis(150))]);
        assert!(t0.elapsed() >= Duration::from_millis(150));
    }

    #[test]
    fn retry_after_too_long_is_not_retried() {
        let srv = serve(vec![reply(http(429, &[("retry-after", "3600")], "{}"))]);
        let evs = collect(stream(
            &endpoint(&srv.url, ApiKind::OpenAi),
            &request(),
            &policy(),
        ));
        assert_eq!(evs.len(), 1);
        assert_eq!(
            error(&evs),
            &LlmError::RetryAfterTooLong {
                status: 429,
                secs: 3600
            }
        );
    }

    #[test]
    fn unauthorized_is_not_retried_and_shows_the_message() {
        let body = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_42"}"#;
        let srv = serve(vec![reply(http(
            401,
            &[("content-type", "application/json")],
            body,
        ))]);
        let evs = collect(stream(
            &endpoint(&srv.url, ApiKind::Anthropic),
            &request(),
            &policy(),
        ));
        assert_eq!(evs.len(), 1);
        let e = error(&evs);
        let shown = e.to_string();
        assert!(
            shown.contains("401")
                && shown.contains("invalid x-api-key")
                && shown.contains("req_42"),
            "{shown}"
        );
        assert_eq!(srv.bodies.lock().unwrap().len(), 1);
    }

    #[test]
    fn cut_mid_stream_is_retried_then_done() {
        let full = anthropic_text("complete answer");
        let cut = &full[..full.find("content_block_stop").unwrap()];
        let srv = serve(vec![reply(cut.to_string()), reply(full.clone())]);
        let evs = collect(stream(
            &endpoint(&srv.url, ApiKind::Anthropic),
            &request(),
            &policy(),
        ));
        assert!(matches!(&evs[0], StreamEvent::TextDelta(t) if t == "complete answer"));
        assert!(
            matches!(&evs[1], StreamEvent::Retry { attempt: 1, reason, .. } if reason.contains("ended before"))
        );
        assert_eq!(
            done(&evs).parts,
            vec![Part::Text {
                text: "complete answer".into()
            }]
        );
    }

    #[test]
    fn midstream_error_event_is_retried() {
        let mut first = sse_head();
        first.push_str("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n");
        let srv = serve(vec![reply(first), reply(anthropic_text("fine"))]);
        let evs = collect(stream(
            &endpoint(&srv.url, ApiKind::Anthropic),
            &request(),
            &policy(),
        ));
        assert_eq!(retries(&evs).len(), 1);
        assert_eq!(
            done(&evs).parts,
            vec![Part::Text {
                text: "fine".into()
            }]
        );
    }

    #[test]
    fn idle_stall_times_out() {
        let mut p = policy();
        p.idle_timeout = Duration::from_millis(300);
        p.max_attempts = 2;
        let stall = || {
            let mut head = sse_head();
            head.push_str(": ping\n\n");
            Reply(vec![
                (0, head.into_bytes()),
                (1500, b"data: late\n\n".to_vec()),
            ])
        };
        let srv = serve(vec![stall(), stall()]);
        let t0 = Instant::now();
        let evs = collect(stream(
            &endpoint(&srv.url, ApiKind::OpenAiCompat),
            &request(),
            &p,
        ));
        assert_eq!(error(&evs), &LlmError::IdleTimeout { secs: 1 });
        assert_eq!(retries(&evs).len(), 1);
        assert!(
            t0.elapsed() < Duration::from_millis(1400),
            "{:?}",
            t0.elapsed()
        );
    }

    #[test]
    fn json_reply_to_a_stream_request() {
        let err = r#"{"error":{"message":"model is loading","type":"invalid_request_error"}}"#;
        let srv = serve(vec![reply(http(
            200,
            &[("content-type", "application/json")],
            err,
        ))]);
        let evs = collect(stream(
            &endpoint(&srv.url, ApiKind::OpenAiCompat),
            &request(),
            &policy(),
        ));
        assert!(error(&evs).to_string().contains("model is loading"));
        let whole = r#"{"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}"#;
        let srv = serve(vec![reply(http(
            200,
            &[("content-type", "application/json")],
            whole,
        ))]);
        let r = complete(
            &endpoint(&srv.url, ApiKind::OpenAiCompat),
            &request(),
            &policy(),
        )
        .unwrap();
        assert_eq!(
            r.parts,
            vec![Part::Text {
                text: "whole".into()
            }]
        );
        let srv = serve(vec![reply(http(
            200,
            &[("content-type", "text/html")],
            "<html>hi</html>",
        ))]);
        let e = complete(
            &endpoint(&srv.url, ApiKind::OpenAiCompat),
            &request(),
            &policy(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("<html>hi</html>"), "{e}");
    }

    #[test]
    fn connection_refused_is_retried_then_reported() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut p = policy();
        p.max_attempts = 2;
        let evs = collect(stream(
            &endpoint(&format!("http://127.0.0.1:{port}"), ApiKind::OpenAiCompat),
            &request(),
            &p,
        ));
        assert_eq!(retries(&evs).len(), 1);
        assert!(matches!(error(&evs), LlmError::Connect { .. }));
    }

    fn many_text_deltas(n: usize, piece: &str) -> String {
        let mut s = sse_head();
        s.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\"}}\n\n");
        let d = serde_json::json!({"type":"content_block_delta","index":0,
            "delta":{"type":"text_delta","text":piece}});
        for _ in 0..n {
            s.push_str(&format!("event: content_block_delta\ndata: {d}\n\n"));
        }
        s.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        s
    }

    #[test]
    fn a_reply_past_the_size_cap_is_an_error_and_not_retried() {
        let piece = "y".repeat(100);
        let srv = serve(vec![
            reply(many_text_deltas(100, &piece)),
            reply(many_text_deltas(100, &piece)),
        ]);
        let mut job = Job::new(
            &endpoint(&srv.url, ApiKind::Anthropic),
            &request(),
            &policy(),
        );
        job.reply_limit = 4_000;
        let evs = collect(start(job).0);
        assert_eq!(error(&evs), &LlmError::TooLarge { limit: 4000 });
        assert!(retries(&evs).is_empty());
        assert_eq!(srv.bodies.lock().unwrap().len(), 1);
        // The same reply under the default cap is fine.
        let srv = serve(vec![reply(many_text_deltas(100, &piece))]);
        let r = complete(
            &endpoint(&srv.url, ApiKind::Anthropic),
            &request(),
            &policy(),
        )
        .unwrap();
        assert_eq!(crate::llm::types::text_of(&r.parts).len(), 10_000);
    }

    #[test]
    fn a_slow_reader_holds_the_worker_back_and_dropping_it_stops_the_worker() {
        let srv = serve(vec![reply(many_text_deltas(4 * EVENT_QUEUE, "z"))]);
        let (rx, handle) = start(Job::new(
            &endpoint(&srv.url, ApiKind::Anthropic),
            &request(),
            &policy(),
        ));
        assert_eq!(rx.capacity(), Some(EVENT_QUEUE));
        // The worker fills the queue, then waits for the reader instead of reading on.
        while !rx.is_full() {
            thread::sleep(Duration::from_millis(1));
        }
        assert!(matches!(rx.recv(), Ok(StreamEvent::TextDelta(_))));
        drop(rx);
        // Blocked in send on a full queue, the worker wakes on the disconnect and ends.
        handle.unwrap().join().unwrap();
    }

    /// A keep-alive server on 127.0.0.1: each connection gets its own thread running
    /// `conn(n, socket, reader)`, n counting connections from 0. Returns the URL and the number
    /// of connections accepted so far.
    fn serve_conns(
        conn: impl Fn(usize, TcpStream, BufReader<TcpStream>) + Send + Sync + 'static,
    ) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let (c2, conn) = (count.clone(), Arc::new(conn));
        thread::spawn(move || {
            for sock in listener.incoming() {
                let Ok(sock) = sock else { return };
                let n = c2.fetch_add(1, SeqCst);
                let (conn, rd) = (conn.clone(), BufReader::new(sock.try_clone().unwrap()));
                thread::spawn(move || conn(n, sock, rd));
            }
        });
        (url, count)
    }

    /// The head of a kept-alive event-stream reply whose body is `len` bytes.
    fn keep_alive_head(len: usize) -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len}\r\n\r\n"
        )
    }

    /// Answers every request on the connection with `body`, keeping the connection open.
    fn answer_all(body: &str, mut sock: TcpStream, mut rd: BufReader<TcpStream>) {
        while read_request_from(&mut rd).is_some() {
            let reply = keep_alive_head(body.len()) + body;
            if sock.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    }

    /// Runs `job` on this thread to its very end (the body drained after `Done` included).
    fn run_here(job: Job) -> Vec<StreamEvent> {
        let (tx, rx) = crossbeam_channel::bounded(EVENT_QUEUE);
        job.run(&tx);
        drop(tx);
        rx.iter().collect()
    }

    #[test]
    fn consecutive_calls_reuse_one_connection() {
        for kind in [ApiKind::Anthropic, ApiKind::OpenAiCompat] {
            let body = match kind {
                ApiKind::Anthropic => anthropic_text("again"),
                _ => openai_text("again"),
            };
            let body = body[body.find("\r\n\r\n").unwrap() + 4..].to_string();
            let (url, conns) = serve_conns(move |_, sock, rd| answer_all(&body, sock, rd));
            let ep = endpoint(&url, kind);
            for _ in 0..3 {
                let evs = run_here(Job::new(&ep, &request(), &policy()));
                assert_eq!(
                    done(&evs).parts,
                    vec![Part::Text {
                        text: "again".into()
                    }]
                );
            }
            assert_eq!(conns.load(SeqCst), 1, "{kind:?}");
        }
    }

    #[test]
    fn a_stream_abandoned_on_cancel_does_not_go_back_to_the_pool() {
        let full = anthropic_text("fresh");
        let full = full[full.find("\r\n\r\n").unwrap() + 4..].to_string();
        let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(1);
        let (closed_tx, closed_rx) = crossbeam_channel::bounded::<bool>(1);
        let (url, conns) = serve_conns(move |n, mut sock, mut rd| {
            if n > 0 {
                return answer_all(&full, sock, rd);
            }
            // The first reply promises far more than it sends: one event, then (once the
            // caller has gone) another, then silence.
            read_request_from(&mut rd).unwrap();
            let first = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"stale\"}}\n\n";
            sock.write_all((keep_alive_head(100_000) + first).as_bytes())
                .unwrap();
            let _ = go_rx.recv();
            let _ = sock.write_all(first.as_bytes());
            // The client must close this connection rather than keep it for the next call.
            let mut rest = Vec::new();
            let _ = closed_tx.send(rd.read_to_end(&mut rest).is_ok());
        });
        let ep = endpoint(&url, ApiKind::Anthropic);
        let (rx, handle) = start(Job::new(&ep, &request(), &policy()));
        assert!(matches!(rx.recv(), Ok(StreamEvent::TextDelta(t)) if t == "stale"));
        drop(rx); // cancel
        go_tx.send(()).unwrap();
        handle.unwrap().join().unwrap();
        assert_eq!(closed_rx.recv_timeout(Duration::from_secs(30)), Ok(true));
        let evs = run_here(Job::new(&ep, &request(), &policy()));
        assert_eq!(
            done(&evs).parts,
            vec![Part::Text {
                text: "fresh".into()
            }]
        );
        assert_eq!(conns.load(SeqCst), 2);
    }

    /// An Anthropic reply as Bedrock frames it: the HTTP head, then the frames.
    fn bedrock_reply(text: &str) -> (String, Vec<u8>) {
        let sse = anthropic_text(text);
        let mut frames = Vec::new();
        for line in sse.lines().filter_map(|l| l.strip_prefix("data: ")) {
            let payload = serde_json::json!({
                "bytes": crate::aws::eventstream::base64(line.as_bytes())});
            frames.extend(crate::aws::eventstream::encode(
                &[(":event-type", "chunk"), (":message-type", "event")],
                payload.to_string().as_bytes(),
            ));
        }
        let head = http(
            200,
            &[("content-type", "application/vnd.amazon.eventstream")],
            "",
        );
        (head, frames)
    }

    #[test]
    fn bedrock_frames_split_across_reads_and_a_bearer_key() {
        let (head, frames) = bedrock_reply("framed");
        // The body arrives in pieces that cut frames (and a prelude) anywhere.
        let mut pieces = vec![(0, head.into_bytes())];
        for (i, c) in frames.chunks(7).enumerate() {
            pieces.push((u64::from(i % 5 == 0), c.to_vec()));
        }
        let srv = serve(vec![Reply(pieces)]);
        let ep = endpoint(&srv.url, ApiKind::Bedrock);
        let evs = collect(stream(&ep, &request(), &policy()));
        assert_eq!(
            done(&evs).parts,
            vec![Part::Text {
                text: "framed".into()
            }]
        );
        let heads = srv.heads.lock().unwrap();
        let h = |n: &str| {
            heads[0]
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(h("authorization").as_deref(), Some("Bearer secret"));
        assert_eq!(
            h("accept").as_deref(),
            Some("application/vnd.amazon.eventstream")
        );
        let body: serde_json::Value = serde_json::from_str(&srv.bodies.lock().unwrap()[0]).unwrap();
        assert_eq!(body["anthropic_version"], "bedrock-2023-05-31");
    }

    #[test]
    fn a_stalled_bedrock_stream_times_out_and_is_retried() {
        let mut p = policy();
        p.idle_timeout = Duration::from_millis(300);
        p.max_attempts = 2;
        let (head, frames) = bedrock_reply("late");
        // Half a frame, then silence.
        let stall = || {
            Reply(vec![
                (0, head.clone().into_bytes()),
                (0, frames[..40].to_vec()),
                (1500, frames[40..].to_vec()),
            ])
        };
        let srv = serve(vec![stall(), stall()]);
        let evs = collect(stream(
            &endpoint(&srv.url, ApiKind::Bedrock),
            &request(),
            &p,
        ));
        assert_eq!(retries(&evs).len(), 1);
        assert_eq!(error(&evs), &LlmError::IdleTimeout { secs: 1 });
    }

    #[test]
    fn dropped_receiver_stops_the_worker() {
        let srv = serve(vec![reply(anthropic_text("x"))]);
        drop(stream(
            &endpoint(&srv.url, ApiKind::Anthropic),
            &request(),
            &policy(),
        ));
        // Nothing to assert beyond "no panic": the worker sends into a closed channel and exits.
        thread::sleep(Duration::from_millis(50));
    }

    fn gemini_text(text: &str) -> String {
        let mut s = sse_head();
        s.push_str(&format!(
            "data: {}\n\n",
            serde_json::json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}})
        ));
        s
    }

    #[test]
    fn a_refused_vertex_token_is_replaced_once_by_a_fresh_one() {
        if std::env::var_os(endpoints::TOKEN_VAR).is_some() {
            return; // The environment's token would be used instead of the command's.
        }
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("count");
        let script = dir.path().join("gcloud.sh");
        std::fs::write(
            &script,
            format!(
                "echo x >> {c}\necho \"tok-$(wc -l < {c} | tr -d ' ')\"\n",
                c = count.display()
            ),
        )
        .unwrap();
        let unauthorized = || {
            reply(http(
                401,
                &[("content-type", "application/json")],
                r#"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#,
            ))
        };
        let srv = serve(vec![
            unauthorized(),
            reply(gemini_text("ok")),
            unauthorized(),
            unauthorized(),
        ]);
        let ep = Endpoint {
            kind: ApiKind::Vertex,
            base_url: format!("{}/v1/projects/p/locations/global", srv.url),
            ambient_auth: true,
            ..Default::default()
        };
        let mut req = request();
        req.model = "gemini-3-pro".into();
        let job = |ep: &Endpoint| {
            let mut j = Job::new(ep, &req, &policy());
            j.token = Some(TokenSource {
                command: vec!["sh".into(), script.display().to_string()],
                login: None,
                env: Default::default(),
            });
            j
        };
        let evs = run_here(job(&ep));
        assert_eq!(done(&evs).parts, vec![Part::Text { text: "ok".into() }]);
        let auth = |i: usize| {
            srv.heads.lock().unwrap()[i]
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(auth(0).as_deref(), Some("Bearer tok-1"));
        assert_eq!(auth(1).as_deref(), Some("Bearer tok-2"));
        // The fresh token is kept for the next call; refused again, it is replaced once more,
        // then the call fails saying what to do.
        let evs = run_here(job(&ep));
        let e = error(&evs).to_string();
        assert!(e.contains("401") && e.contains("gcloud auth login"), "{e}");
        assert_eq!(auth(2).as_deref(), Some("Bearer tok-2"));
        assert_eq!(auth(3).as_deref(), Some("Bearer tok-3"));
        assert!(srv.url.starts_with("http://127.0.0.1"));
        let path = srv.heads.lock().unwrap().len();
        assert_eq!(path, 4);
    }
}
