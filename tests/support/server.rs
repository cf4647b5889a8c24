//! The fake model server: a `TcpListener` on 127.0.0.1, one thread per connection, a script of
//! replies consumed one per model request, and a record of every request.

use super::checks::check_request;
use super::http::{read_request, write_plan};
use super::reply::{Dialect, Ids, Reply};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// The body of the 500 sent when a model request arrives and the script is empty.
pub(crate) const EXHAUSTED: &str = "fake server: script exhausted";

/// What answered a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The next reply of the script.
    Script,
    /// The route with this index (see [`FakeServer::route`]).
    Route(usize),
    /// The fallback reply (script empty, fallback set).
    Fallback,
    /// Nothing: the script was empty; answered 500 [`EXHAUSTED`].
    Exhausted,
    /// Not a model path and no route: answered 404.
    NotFound,
}

/// One request as the server received it.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub method: String,
    /// Path with query string.
    pub path: String,
    /// Lowercase header names.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON (`Value::Null` if empty or not JSON).
    pub body: Value,
    /// The body as text (lossy UTF-8).
    pub body_text: String,
    /// `Some` for model endpoints.
    pub dialect: Option<Dialect>,
    pub source: Source,
}

impl Recorded {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// `body.messages` (empty if absent).
    pub(crate) fn messages(&self) -> Vec<Value> {
        self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Names of the tools offered to the model, in order.
    pub(crate) fn tool_names(&self) -> Vec<String> {
        let mut tools = self.body["tools"].as_array().cloned().unwrap_or_default();
        if self.dialect == Some(Dialect::Gemini) {
            tools = tools
                .iter()
                .flat_map(|t| {
                    t["functionDeclarations"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .collect();
        }
        tools
            .iter()
            .filter_map(|t| {
                t["name"]
                    .as_str()
                    .or_else(|| t["function"]["name"].as_str())
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The system prompt as one string (Anthropic `system`, Gemini's `systemInstruction`, or
    /// OpenAI system/developer messages).
    pub(crate) fn system_text(&self) -> String {
        match self.dialect {
            Some(Dialect::Anthropic | Dialect::AnthropicVertex | Dialect::Bedrock) => {
                content_text(&self.body["system"])
            }
            Some(Dialect::Gemini) => self.body["systemInstruction"]["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            Some(Dialect::Responses) => self.body["input"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "system" || m["role"] == "developer")
                .map(|m| content_text(&m["content"]))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => self
                .messages()
                .iter()
                .filter(|m| m["role"] == "system" || m["role"] == "developer")
                .map(|m| content_text(&m["content"]))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// Texts of every user message (tool results excluded), in order.
    pub(crate) fn user_texts(&self) -> Vec<String> {
        self.messages()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| content_text(&m["content"]))
            .filter(|t| !t.is_empty())
            .collect()
    }

    /// `(tool call id, result text, is_error)` of every tool result sent, in order, in any
    /// dialect (OpenAI has no error flag: always `false`; Gemini gives the function's name for
    /// its id).
    pub(crate) fn tool_results(&self) -> Vec<(String, String, bool)> {
        let mut out = Vec::new();
        for item in self.body["input"].as_array().into_iter().flatten() {
            if item["type"] == "function_call_output" {
                out.push((
                    item["call_id"].as_str().unwrap_or("").to_owned(),
                    item["output"].as_str().unwrap_or("").to_owned(),
                    false,
                ));
            }
        }
        for c in self.body["contents"].as_array().into_iter().flatten() {
            for p in c["parts"].as_array().into_iter().flatten() {
                let fr = &p["functionResponse"];
                if fr.is_object() {
                    out.push((
                        fr["id"]
                            .as_str()
                            .or(fr["name"].as_str())
                            .unwrap_or("")
                            .to_owned(),
                        fr["response"]["result"].as_str().unwrap_or("").to_owned(),
                        false,
                    ));
                }
            }
        }
        for m in self.messages() {
            if m["role"] == "tool" {
                out.push((
                    m["tool_call_id"].as_str().unwrap_or("").to_owned(),
                    content_text(&m["content"]),
                    false,
                ));
            } else if let Some(blocks) = m["content"].as_array() {
                for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                    out.push((
                        b["tool_use_id"].as_str().unwrap_or("").to_owned(),
                        content_text(&b["content"]),
                        b["is_error"] == true,
                    ));
                }
            }
        }
        out
    }
}

/// The text of a content value: a string, or the `text` of its text blocks/parts joined by "\n".
pub(crate) fn content_text(c: &Value) -> String {
    match c {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

type Matcher = Arc<dyn Fn(&Recorded) -> bool + Send + Sync>;

struct Route {
    matcher: Matcher,
    /// Consumed in order; the last one repeats forever.
    replies: VecDeque<Reply>,
}

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    fallback: Option<Reply>,
    routes: Vec<Route>,
    violations: Vec<String>,
    chunked: bool,
    /// Opt-outs of the check made on drop (see [`FakeServer::expect_violations`]).
    violations_expected: bool,
    exhaustion_expected: bool,
    /// How Bedrock requests must be signed (None: not checked).
    bedrock_auth: Option<super::bedrock::Auth>,
    /// Single-slot mode (see [`FakeServer::set_single_slot`]): how long a model request
    /// "thinks" before its reply.
    single_slot: Option<Duration>,
}

struct Shared {
    state: Mutex<State>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stop: AtomicBool,
    /// Single-slot mode: the number of the latest model request, and how many were abandoned.
    slot: AtomicUsize,
    abandoned: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking connection thread must not hide the record from the test.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fake Anthropic/OpenAI streaming server on `127.0.0.1:<random port>`. Stops when dropped,
/// and then fails the test (unless it is already failing) if the client broke the protocol, a
/// model request found the script empty, or script replies were left unused: every test gets
/// these checks; [`assert_clean`](Self::assert_clean) makes them earlier, mid-test.
pub(crate) struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl FakeServer {
    /// A server with an empty script (every model request gets the exhaustion 500).
    pub(crate) fn start() -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("fake server: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("fake server: local_addr");
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            requests: Arc::new(Mutex::new(Vec::new())),
            stop: AtomicBool::new(false),
            slot: AtomicUsize::new(0),
            abandoned: AtomicUsize::new(0),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("fake-server-accept".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if s.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let s = s.clone();
                    let _ = std::thread::Builder::new()
                        .name("fake-server-conn".into())
                        .spawn(move || handle(conn, &s));
                }
            })
            .expect("fake server: spawn accept thread");
        FakeServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// A server that answers model requests with these replies, in order.
    pub(crate) fn with_script(replies: Vec<Reply>) -> FakeServer {
        let s = FakeServer::start();
        s.push_all(replies);
        s
    }

    /// A server that answers every model request with `text` (no script).
    pub(crate) fn always_text(text: &str) -> FakeServer {
        let s = FakeServer::start();
        s.set_fallback(Some(Reply::text(text)));
        s
    }

    /// Appends a reply to the script.
    pub(crate) fn push(&self, reply: Reply) -> &Self {
        lock(&self.shared.state).script.push_back(reply);
        self
    }

    pub(crate) fn push_all(&self, replies: Vec<Reply>) -> &Self {
        lock(&self.shared.state).script.extend(replies);
        self
    }

    /// The reply used when the script is empty (`None`: the exhaustion 500).
    pub(crate) fn set_fallback(&self, reply: Option<Reply>) -> &Self {
        lock(&self.shared.state).fallback = reply;
        self
    }

    /// Serve streams with `transfer-encoding: chunked` instead of close-delimited bodies.
    pub(crate) fn set_chunked(&self, chunked: bool) -> &Self {
        lock(&self.shared.state).chunked = chunked;
        self
    }

    /// Answers requests with this method whose path (query ignored) ends with `path_suffix`,
    /// before the script is consulted, e.g. `route("GET", "/v2/providers", Reply::raw(..))`.
    /// Returns the route index (see [`Source::Route`]).
    pub(crate) fn route(&self, method: &str, path_suffix: &str, reply: Reply) -> usize {
        self.route_seq(method, path_suffix, vec![reply])
    }

    /// Like [`route`](Self::route) with successive replies; the last one repeats.
    pub(crate) fn route_seq(&self, method: &str, path_suffix: &str, replies: Vec<Reply>) -> usize {
        let (method, suffix) = (method.to_ascii_uppercase(), path_suffix.to_owned());
        self.route_when(
            move |r| {
                r.method == method && r.path.split('?').next().unwrap_or("").ends_with(&suffix)
            },
            replies,
        )
    }

    /// Answers requests matching `pred` with `replies` (the last repeats), before the script.
    /// E.g. title generation: `route_when(|r| r.tool_names().is_empty(), vec![Reply::text("Title")])`.
    pub(crate) fn route_when(
        &self,
        pred: impl Fn(&Recorded) -> bool + Send + Sync + 'static,
        replies: Vec<Reply>,
    ) -> usize {
        assert!(!replies.is_empty(), "route needs at least one reply");
        let mut st = lock(&self.shared.state);
        st.routes.push(Route {
            matcher: Arc::new(pred),
            replies: replies.into(),
        });
        st.routes.len() - 1
    }

    /// Single-slot mode, like a local server with one slot (llama.cpp's `--parallel 1`): each
    /// model request thinks for `think` before its reply, and one still thinking when another
    /// model request arrives is abandoned (its connection closed with no answer).
    pub(crate) fn set_single_slot(&self, think: Duration) -> &Self {
        lock(&self.shared.state).single_slot = Some(think);
        self
    }

    /// Model requests abandoned in single-slot mode.
    pub(crate) fn abandoned(&self) -> usize {
        self.shared.abandoned.load(Ordering::SeqCst)
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Base URL for an Anthropic provider (`{base}/v1/messages`).
    pub(crate) fn anthropic_base_url(&self) -> String {
        self.url()
    }

    /// Base URL for an OpenAI-compatible provider (`{base}/chat/completions`).
    pub(crate) fn openai_base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// Base URL for a Vertex AI provider (project `fake-project`, location `global`).
    pub(crate) fn vertex_base_url(&self) -> String {
        format!("{}/v1/projects/fake-project/locations/global", self.url())
    }

    /// The shared record, for tests that want to watch it live.
    pub(crate) fn requests_handle(&self) -> Arc<Mutex<Vec<Recorded>>> {
        self.shared.requests.clone()
    }

    /// Every request received so far, in arrival order.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    pub(crate) fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// Requests to model endpoints only (`/v1/messages`, `/chat/completions`).
    pub(crate) fn model_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.dialect.is_some())
            .collect()
    }

    pub(crate) fn request(&self, i: usize) -> Recorded {
        let reqs = lock(&self.shared.requests);
        reqs.get(i)
            .cloned()
            .unwrap_or_else(|| panic!("no request #{i}: only {} received", reqs.len()))
    }

    pub(crate) fn last_request(&self) -> Recorded {
        lock(&self.shared.requests)
            .last()
            .cloned()
            .expect("the fake server received no request")
    }

    pub(crate) fn last_body(&self) -> Value {
        self.last_request().body
    }

    /// Model requests that found the script empty (and got the exhaustion 500).
    pub(crate) fn exhausted_count(&self) -> usize {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.source == Source::Exhausted)
            .count()
    }

    /// Script replies not consumed yet.
    pub(crate) fn remaining(&self) -> usize {
        lock(&self.shared.state).script.len()
    }

    /// Protocol violations seen in requests, each prefixed with `request #N`.
    pub(crate) fn violations(&self) -> Vec<String> {
        lock(&self.shared.state).violations.clone()
    }

    /// For tests of the checker itself: protocol violations are the expected outcome, read
    /// through [`violations`](Self::violations), and do not fail the test on drop.
    pub(crate) fn expect_violations(&self) -> &Self {
        lock(&self.shared.state).violations_expected = true;
        self
    }

    /// Bedrock requests must carry this authorization (a SigV4 signature is recomputed from the
    /// request as it arrived); anything else is a protocol violation.
    pub(crate) fn expect_bedrock_auth(&self, auth: super::bedrock::Auth) -> &Self {
        lock(&self.shared.state).bedrock_auth = Some(auth);
        self
    }

    /// For tests of the exhaustion answer: model requests finding the script empty do not fail
    /// the test on drop.
    pub(crate) fn expect_exhaustion(&self) -> &Self {
        lock(&self.shared.state).exhaustion_expected = true;
        self
    }

    /// Panics unless: no violations, no request found the script empty, and the script is used
    /// up (less what [`expect_violations`](Self::expect_violations) and
    /// [`expect_exhaustion`](Self::expect_exhaustion) allow). Drop makes the same check; call it
    /// to check a part of a test before the script gets more replies.
    pub(crate) fn assert_clean(&self) {
        let problems = self.problems();
        assert!(
            problems.is_empty(),
            "fake server at {}: {}",
            self.url(),
            problems.join("\n")
        );
    }

    fn problems(&self) -> Vec<String> {
        let (violations, exhaustion_expected) = {
            let st = lock(&self.shared.state);
            let v = if st.violations_expected {
                Vec::new()
            } else {
                st.violations.clone()
            };
            (v, st.exhaustion_expected)
        };
        let mut problems = Vec::new();
        if !violations.is_empty() {
            problems.push(format!("protocol violations:\n{}", violations.join("\n")));
        }
        let exhausted = self.exhausted_count();
        if exhausted > 0 && !exhaustion_expected {
            problems.push(format!(
                "{exhausted} model requests after the script was exhausted"
            ));
        }
        let left = self.remaining();
        if left > 0 {
            problems.push(format!("{left} script replies left unused"));
        }
        problems
    }
}

/// Picks the reply for a request and records it. Returns the reply and the request's index.
fn choose(shared: &Shared, rec: &mut Recorded) -> (Reply, usize) {
    let mut st = lock(&shared.state);
    let route = st.routes.iter().position(|r| (r.matcher)(rec));
    let reply = if let Some(i) = route {
        rec.source = Source::Route(i);
        let replies = &mut st.routes[i].replies;
        if replies.len() > 1 {
            replies.pop_front().expect("non-empty")
        } else {
            replies[0].clone()
        }
    } else if rec.dialect.is_none() {
        rec.source = Source::NotFound;
        Reply::status(
            404,
            &format!("fake server: no route for {} {}", rec.method, rec.path),
        )
    } else if let Some(r) = st.script.pop_front() {
        rec.source = Source::Script;
        r
    } else if let Some(r) = st.fallback.clone() {
        rec.source = Source::Fallback;
        r
    } else {
        rec.source = Source::Exhausted;
        Reply::status(
            500,
            &serde_json::json!({"type": "error", "error": {"type": "api_error", "message": EXHAUSTED}})
                .to_string(),
        )
    };
    let mut reqs = lock(&shared.requests);
    reqs.push(rec.clone());
    (reply, reqs.len() - 1)
}

fn handle(conn: TcpStream, shared: &Shared) {
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    let req = match read_request(&mut reader, || {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
    }) {
        Ok(r) => r,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::UnexpectedEof {
                lock(&shared.state)
                    .violations
                    .push(format!("unparseable HTTP request: {e}"));
                let _ = writer.write_all(
                    b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            }
            return;
        }
    };
    let dialect = Dialect::from_path(&req.path).filter(|_| req.method == "POST");
    let body_text = String::from_utf8_lossy(&req.body).into_owned();
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let mut rec = Recorded {
        method: req.method,
        path: req.path,
        headers: req.headers,
        body,
        body_text,
        dialect,
        source: Source::Script,
    };
    let problems = match dialect {
        Some(Dialect::Bedrock) => {
            let auth = lock(&shared.state).bedrock_auth.clone();
            super::bedrock::check(
                &rec.method,
                &rec.path,
                &rec.headers,
                &req.body,
                auth.as_ref(),
            )
        }
        Some(d) if rec.body.is_null() => vec![format!(
            "{d:?} request body is not JSON: {:?}",
            rec.body_text.chars().take(200).collect::<String>()
        )],
        Some(d) => check_request(d, &rec.headers, &rec.body),
        None => Vec::new(),
    };
    let (reply, index) = choose(shared, &mut rec);
    if !problems.is_empty() {
        let mut st = lock(&shared.state);
        st.violations.extend(
            problems
                .into_iter()
                .map(|p| format!("request #{index}: {p}")),
        );
    }
    let (chunked, slot) = {
        let st = lock(&shared.state);
        (st.chunked, st.single_slot)
    };
    if let (Some(think), Some(_)) = (slot, dialect) {
        let me = shared.slot.fetch_add(1, Ordering::SeqCst) + 1;
        let end = std::time::Instant::now() + think;
        while std::time::Instant::now() < end {
            if shared.slot.load(Ordering::SeqCst) != me {
                shared.abandoned.fetch_add(1, Ordering::SeqCst);
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let plan = reply.plan(dialect, &Ids { request: index });
    let _ = write_plan(&mut writer, &plan, chunked);
    let _ = writer.flush();
    let _ = writer.shutdown(Shutdown::Both);
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        // A second panic while unwinding would abort the whole test binary.
        if !std::thread::panicking() {
            self.assert_clean();
        }
    }
}
