//! JSON-RPC 2.0 over any transport: requests matched to their answers by id, the server's own
//! requests answered (`ping`, `roots/list`), its notifications handed to the session, and every
//! waiting caller released with an error when the connection ends.

use crossbeam_channel::{Receiver, Sender};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why a request has no result.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Failure {
    /// The server answered with a JSON-RPC error.
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// The connection ended before the answer (the server exited, the stream closed).
    Closed(String),
    /// An HTTP server asked for authorization (401, or 403 with a bearer challenge).
    Unauthorized(String),
    /// An HTTP server no longer knows the session (404 while one was open).
    SessionExpired,
    /// An HTTP status without a JSON-RPC error in the body.
    Http {
        status: u16,
        body: String,
    },
    /// The request could not be sent (connection refused, I/O).
    Transport(String),
    TimedOut(Duration),
    Canceled,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Rpc { code, message, .. } => write!(f, "{message} (JSON-RPC error {code})"),
            Failure::Closed(why) => f.write_str(why),
            Failure::Unauthorized(why) => write!(f, "authorization required: {why}"),
            Failure::SessionExpired => f.write_str("the server ended the session"),
            Failure::Http { status, body } if body.is_empty() => write!(f, "HTTP {status}"),
            Failure::Http { status, body } => write!(f, "HTTP {status}: {body}"),
            Failure::Transport(why) => f.write_str(why),
            Failure::TimedOut(d) => write!(f, "no answer within {}", secs(*d)),
            Failure::Canceled => f.write_str("canceled"),
        }
    }
}

impl std::error::Error for Failure {}

/// `1.5 s`, `10 s`.
pub(super) fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{} s", s as u64)
    } else {
        format!("{s:.1} s")
    }
}

/// What the server sent besides answers: its notifications, and the end of the connection.
#[derive(Clone, Debug)]
pub(super) enum Note {
    Notification { method: String, params: Value },
    Closed(String),
}

type Answer = Result<Value, Failure>;

/// Routes incoming messages. Transports feed it; `Conn` waits on it.
pub(super) struct Dispatch {
    /// `MCP server 'NAME'`, for warnings.
    label: String,
    pending: Mutex<HashMap<u64, Sender<Answer>>>,
    /// Ids given up on (timed out, canceled): a late answer is dropped quietly.
    abandoned: Mutex<HashSet<u64>>,
    closed: Mutex<Option<String>>,
    notes: Sender<Note>,
    /// The answer to the server's `roots/list`.
    roots: Value,
    /// Warnings (a bad message), reported through this; at most one per kind.
    warn: Box<dyn Fn(String) + Send + Sync>,
    warned: Mutex<HashSet<&'static str>>,
}

impl Dispatch {
    pub(super) fn new(
        label: String,
        roots: Value,
        notes: Sender<Note>,
        warn: Box<dyn Fn(String) + Send + Sync>,
    ) -> Arc<Dispatch> {
        Arc::new(Dispatch {
            label,
            pending: Mutex::new(HashMap::new()),
            abandoned: Mutex::new(HashSet::new()),
            closed: Mutex::new(None),
            notes,
            roots,
            warn,
            warned: Mutex::new(HashSet::new()),
        })
    }

    /// One warning of each kind per connection; the rest go to the debug log.
    pub(super) fn warn_once(&self, kind: &'static str, msg: String) {
        let first = self
            .warned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(kind);
        if first {
            (self.warn)(format!("{}: {msg}", self.label));
        } else {
            crate::log::debug(&format!("{}: {msg}", self.label));
        }
    }

    fn register(&self, id: u64) -> Receiver<Answer> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        rx
    }

    fn abandon(&self, id: u64) {
        let had = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .is_some();
        if had {
            self.abandoned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id);
        }
    }

    /// Answers request `id` (when still waited for).
    pub(super) fn answer(&self, id: u64, a: Answer) {
        let tx = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        if let Some(tx) = tx {
            let _ = tx.send(a);
        }
    }

    /// Whether request `id` is still waited for.
    pub(super) fn is_pending(&self, id: u64) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&id)
    }

    /// Why the connection ended, if it did.
    pub(super) fn closed(&self) -> Option<String> {
        self.closed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Ends the connection: every waiting request fails with `why`; the session is told once.
    pub(super) fn close(&self, why: String) {
        {
            let mut c = self.closed.lock().unwrap_or_else(|e| e.into_inner());
            if c.is_some() {
                return;
            }
            *c = Some(why.clone());
        }
        let waiting: Vec<Sender<Answer>> = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, tx)| tx)
            .collect();
        for tx in waiting {
            let _ = tx.send(Err(Failure::Closed(why.clone())));
        }
        let _ = self.notes.send(Note::Closed(why));
    }

    /// A line (stdio) or SSE event that is not JSON.
    pub(super) fn garbage(&self, text: &str) {
        let mut snippet: String = text.chars().take(80).collect();
        if snippet.len() < text.len() {
            snippet.push('…');
        }
        self.warn_once(
            "garbage",
            format!("ignored output that is not a JSON-RPC message: {snippet:?}"),
        );
    }

    /// Handles one incoming message (or batch); returns the replies to send back.
    pub(super) fn handle(&self, msg: Value) -> Vec<Value> {
        let mut replies = Vec::new();
        match msg {
            Value::Array(items) => {
                for m in items {
                    replies.extend(self.handle(m));
                }
            }
            Value::Object(m) => {
                let id = m.get("id").cloned().filter(|v| !v.is_null());
                match (m.get("method").and_then(Value::as_str), id) {
                    (Some(method), Some(id)) => {
                        let params = m.get("params").cloned().unwrap_or(Value::Null);
                        replies.push(self.server_request(method, &params, id));
                    }
                    (Some(method), None) => {
                        let _ = self.notes.send(Note::Notification {
                            method: method.to_string(),
                            params: m.get("params").cloned().unwrap_or(Value::Null),
                        });
                    }
                    (None, Some(id)) => self.response(&id, &m),
                    (None, None) => {
                        // An error without id answers something the server could not read.
                        if let Some(e) = m.get("error") {
                            self.warn_once("noid", format!("reported an error: {e}"));
                        } else {
                            self.garbage(&Value::Object(m).to_string());
                        }
                    }
                }
            }
            other => self.garbage(&other.to_string()),
        }
        replies
    }

    fn response(&self, id: &Value, m: &serde_json::Map<String, Value>) {
        let Some(n) = id
            .as_u64()
            .or_else(|| id.as_str().and_then(|s| s.parse().ok()))
        else {
            self.warn_once(
                "badid",
                format!("answered with an id crush never sent ({id})"),
            );
            return;
        };
        let answer = match (m.get("result"), m.get("error")) {
            (_, Some(e)) => Err(rpc_failure(e)),
            (Some(r), None) => Ok(r.clone()),
            (None, None) => Ok(Value::Null),
        };
        let tx = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&n);
        match tx {
            Some(tx) => {
                let _ = tx.send(answer);
            }
            None => {
                let late = self
                    .abandoned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&n);
                if late {
                    crate::log::debug(&format!("{}: late answer to {n} dropped", self.label));
                } else {
                    self.warn_once(
                        "badid",
                        format!("answered with an id crush never sent ({id})"),
                    );
                }
            }
        }
    }

    fn server_request(&self, method: &str, _params: &Value, id: Value) -> Value {
        let result = match method {
            "ping" => Ok(json!({})),
            "roots/list" => Ok(json!({"roots": self.roots})),
            // Sampling and elicitation are not offered: no capability was declared for them.
            _ => Err((-32601, format!("Method not found: {method}"))),
        };
        match result {
            Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
            Err((code, message)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        }
    }

    /// The answer to the server's `roots/list`.
    pub(super) fn roots(&self) -> &Value {
        &self.roots
    }
}

/// A JSON-RPC `error` object as a failure.
pub(super) fn rpc_failure(e: &Value) -> Failure {
    Failure::Rpc {
        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("error")
            .to_string(),
        data: e.get("data").cloned(),
    }
}

/// What a transport needs to know about a message besides its body.
#[derive(Clone, Debug, Default)]
pub(super) struct Envelope {
    /// The request id (None: a notification).
    pub id: Option<u64>,
    pub method: String,
    /// `params.name` or `params.uri` (the `Mcp-Name` header of Streamable HTTP).
    pub name: Option<String>,
    /// `Mcp-Param-*` headers of a tool call.
    pub headers: Vec<(String, String)>,
}

/// Carries messages to the server. Answers come back through the `Dispatch` the transport was
/// made with.
pub(super) trait Transport: Send + Sync {
    /// Sends one message; may return before the answer arrives.
    fn send(&self, msg: &Value, env: &Envelope) -> Result<(), Failure>;
    /// The negotiated protocol version (HTTP sends it as a header); None: none yet.
    fn set_protocol(&self, _version: Option<&'static str>) {}
    /// The session is established (older HTTP servers then get their GET stream).
    fn established(&self) {}
    /// A request is canceled with `notifications/cancelled` (stdio, older HTTP), not by closing
    /// its stream.
    fn cancels_by_notification(&self) -> bool {
        true
    }
    /// Ends the connection (stdio: stops the server; HTTP: ends the session).
    fn close(&self);
}

/// One connection: a transport, the dispatch it feeds, and request ids.
pub(super) struct Conn {
    pub dispatch: Arc<Dispatch>,
    pub transport: Box<dyn Transport>,
    next_id: AtomicU64,
}

/// How often a waiting request looks at its cancel flag.
const POLL: Duration = Duration::from_millis(20);

impl Conn {
    pub(super) fn new(dispatch: Arc<Dispatch>, transport: Box<dyn Transport>) -> Conn {
        Conn {
            dispatch,
            transport,
            next_id: AtomicU64::new(1),
        }
    }

    /// Sends a request and waits for its answer, at most `timeout` (None: no limit), stopping
    /// early when `cancel` is set. A request given up on is canceled at the server.
    pub(super) fn request(
        &self,
        method: &str,
        params: Value,
        env: Envelope,
        timeout: Option<Duration>,
        cancel: Option<&AtomicBool>,
    ) -> Result<Value, Failure> {
        if let Some(why) = self.dispatch.closed() {
            return Err(Failure::Closed(why));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let rx = self.dispatch.register(id);
        let env = Envelope {
            id: Some(id),
            method: method.to_string(),
            ..env
        };
        if let Err(e) = self.transport.send(&msg, &env) {
            self.dispatch.abandon(id);
            return Err(e);
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let wait = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(POLL),
                None => POLL,
            };
            match rx.recv_timeout(wait) {
                Ok(a) => return a,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    let why = self
                        .dispatch
                        .closed()
                        .unwrap_or_else(|| "the connection ended".into());
                    return Err(Failure::Closed(why));
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            }
            if cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
                self.give_up(id, "the user canceled the request");
                return Err(Failure::Canceled);
            }
            if let (Some(d), Some(t)) = (deadline, timeout)
                && Instant::now() >= d
            {
                // An answer may have raced the deadline.
                if let Ok(a) = rx.try_recv() {
                    return a;
                }
                self.give_up(id, &format!("no answer within {}", secs(t)));
                return Err(Failure::TimedOut(t));
            }
        }
    }

    fn give_up(&self, id: u64, reason: &str) {
        self.dispatch.abandon(id);
        if self.transport.cancels_by_notification() && self.dispatch.closed().is_none() {
            self.notify(
                "notifications/cancelled",
                json!({"requestId": id, "reason": reason}),
            );
        }
    }

    /// Sends a notification; failures are logged (nobody waits for them).
    pub(super) fn notify(&self, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let env = Envelope {
            id: None,
            method: method.to_string(),
            ..Default::default()
        };
        if let Err(e) = self.transport.send(&msg, &env) {
            crate::log::debug(&format!("mcp: {method} not sent: {e}"));
        }
    }

    pub(super) fn close(&self) {
        self.transport.close();
        self.dispatch.close("the connection was closed".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Play = Box<dyn Fn(&Value) -> Option<Value> + Send + Sync>;
    type Warnings = Arc<Mutex<Vec<String>>>;

    /// A transport that hands each request to a closure playing the server.
    struct Loop {
        dispatch: Arc<Dispatch>,
        server: Play,
        sent: Mutex<Vec<Value>>,
    }

    impl Transport for Arc<Loop> {
        fn send(&self, msg: &Value, _env: &Envelope) -> Result<(), Failure> {
            self.sent.lock().unwrap().push(msg.clone());
            if let Some(reply) = (self.server)(msg) {
                let d = self.dispatch.clone();
                std::thread::spawn(move || {
                    d.handle(reply);
                });
            }
            Ok(())
        }
        fn close(&self) {}
    }

    fn conn(
        server: impl Fn(&Value) -> Option<Value> + Send + Sync + 'static,
    ) -> (Conn, Arc<Loop>, Receiver<Note>, Warnings) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let w = warnings.clone();
        let d = Dispatch::new(
            "MCP server 't'".into(),
            json!([{"uri": "file:///p"}]),
            tx,
            Box::new(move |m| w.lock().unwrap().push(m)),
        );
        let l = Arc::new(Loop {
            dispatch: d.clone(),
            server: Box::new(server),
            sent: Mutex::new(Vec::new()),
        });
        (Conn::new(d, Box::new(l.clone())), l, rx, warnings)
    }

    #[test]
    fn answers_are_matched_by_id() {
        let (c, _, _, _) = conn(|m| {
            Some(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"echo": m["params"]}}))
        });
        let r = c
            .request("x", json!({"a": 1}), Envelope::default(), None, None)
            .unwrap();
        assert_eq!(r, json!({"echo": {"a": 1}}));
        let (c, _, _, _) = conn(|m| {
            Some(
                json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "nope"}}),
            )
        });
        let e = c
            .request("x", json!({}), Envelope::default(), None, None)
            .unwrap_err();
        assert!(matches!(e, Failure::Rpc { code: -32601, .. }), "{e:?}");
    }

    #[test]
    fn timeout_cancels_at_the_server_and_a_wrong_id_is_warned_about() {
        let (c, l, _, warnings) =
            conn(|_| Some(json!({"jsonrpc": "2.0", "id": 999, "result": {}})));
        let e = c
            .request(
                "slow",
                json!({}),
                Envelope::default(),
                Some(Duration::from_millis(100)),
                None,
            )
            .unwrap_err();
        assert_eq!(e, Failure::TimedOut(Duration::from_millis(100)));
        let sent = l.sent.lock().unwrap().clone();
        assert_eq!(sent[1]["method"], "notifications/cancelled");
        assert_eq!(sent[1]["params"]["requestId"], sent[0]["id"]);
        assert!(warnings.lock().unwrap()[0].contains("id crush never sent"));
    }

    #[test]
    fn cancel_flag_and_close_release_the_caller() {
        let (c, _, notes, _) = conn(|_| None);
        let flag = AtomicBool::new(true);
        let e = c
            .request("x", json!({}), Envelope::default(), None, Some(&flag))
            .unwrap_err();
        assert_eq!(e, Failure::Canceled);
        let d = c.dispatch.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            d.close("the server exited".into());
        });
        let e = c
            .request("x", json!({}), Envelope::default(), None, None)
            .unwrap_err();
        assert_eq!(e, Failure::Closed("the server exited".into()));
        assert!(matches!(notes.recv().unwrap(), Note::Closed(_)));
    }

    #[test]
    fn server_requests_are_answered_and_notifications_passed_on() {
        let (c, _, notes, _) = conn(|_| None);
        let replies = c.dispatch.handle(json!([
            {"jsonrpc": "2.0", "id": 7, "method": "roots/list"},
            {"jsonrpc": "2.0", "id": "p", "method": "ping"},
            {"jsonrpc": "2.0", "id": 8, "method": "sampling/createMessage"},
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        ]));
        assert_eq!(replies[0]["result"]["roots"][0]["uri"], "file:///p");
        assert_eq!(replies[1]["id"], "p");
        assert_eq!(replies[2]["error"]["code"], -32601);
        match notes.try_recv().unwrap() {
            Note::Notification { method, .. } => {
                assert_eq!(method, "notifications/tools/list_changed")
            }
            n => panic!("{n:?}"),
        }
    }
}
