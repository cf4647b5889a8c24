//! JSON-RPC 2.0 over newline-delimited JSON on stdin and stdout: the reader thread, the writer
//! thread behind a bounded queue, and the `Peer` every thread sends through (notifications,
//! responses, and requests to the editor whose responses the reader routes back).
//!
//! Nothing but protocol messages reaches stdout, and only the writer thread writes it. When the
//! editor stops reading, the queue fills and senders wait; once the connection closes (stdin at
//! its end, stdout broken, a signal), waiting senders give up and requests to the editor fail,
//! so no thread stays blocked on an editor that is gone.

use crossbeam_channel::{Receiver, Sender, bounded, select};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// JSON-RPC's error codes, and ACP's.
pub(super) const PARSE_ERROR: i64 = -32700;
pub(super) const INVALID_REQUEST: i64 = -32600;
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
pub(super) const INVALID_PARAMS: i64 = -32602;
pub(super) const INTERNAL_ERROR: i64 = -32603;
pub(super) const AUTH_REQUIRED: i64 = -32000;
pub(super) const NOT_FOUND: i64 = -32002;

/// Messages waiting for the writer. A full queue makes senders wait for the editor to read.
const QUEUE: usize = 256;
/// A longer line is refused whole (a prompt with images is large, not this large).
pub(super) const MAX_LINE: usize = 64 * 1024 * 1024;
/// How often a waiting thread looks at its cancel flag.
const POLL: Duration = Duration::from_millis(50);

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub(super) fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }

    pub(super) fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub(super) fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(INTERNAL_ERROR, message)
    }

    fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

/// One line of stdin, as the reader thread delivers it.
pub(super) enum Line {
    Text(Vec<u8>),
    /// A line longer than [`MAX_LINE`] (skipped to its end).
    TooLong,
    /// stdin ended (or failed).
    End,
}

/// Reads `stdin` line by line on its own thread, into a bounded channel.
pub(super) fn spawn_reader(
    input: impl BufRead + Send + 'static,
) -> std::io::Result<Receiver<Line>> {
    let (tx, rx) = bounded(64);
    std::thread::Builder::new()
        .name("acp-stdin".into())
        .spawn(move || {
            let mut input = input;
            loop {
                let line = read_line(&mut input, MAX_LINE);
                let end = matches!(line, Line::End);
                if tx.send(line).is_err() || end {
                    return;
                }
            }
        })?;
    Ok(rx)
}

/// One line without its `\n` (and `\r`), at most `max` bytes kept.
pub(super) fn read_line(input: &mut impl BufRead, max: usize) -> Line {
    let mut buf = Vec::new();
    let mut too_long = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Line::End,
        };
        if chunk.is_empty() {
            // The last line may lack its newline.
            return if buf.is_empty() && !too_long {
                Line::End
            } else if too_long {
                Line::TooLong
            } else {
                Line::Text(buf)
            };
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > max {
                too_long = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        input.consume(take + usize::from(done));
        if done {
            if too_long {
                return Line::TooLong;
            }
            if buf.ends_with(b"\r") {
                buf.pop();
            }
            return Line::Text(buf);
        }
    }
}

/// A message from the editor.
#[derive(Debug, PartialEq)]
pub(super) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The answer to one of our requests.
    Response {
        id: Value,
        result: Result<Value, RpcError>,
    },
    /// Not a JSON-RPC 2.0 message: the error to answer (with the request's id when it had one).
    Invalid {
        id: Value,
        error: RpcError,
    },
}

/// Parses one line.
pub(super) fn parse(line: &[u8]) -> Incoming {
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: Value::Null,
                error: RpcError::new(PARSE_ERROR, format!("parse error: {e}")),
            };
        }
    };
    let Value::Object(m) = v else {
        return Incoming::Invalid {
            id: Value::Null,
            error: RpcError::new(
                INVALID_REQUEST,
                "invalid request: a message is one JSON object (batches are not supported)",
            ),
        };
    };
    let id = m.get("id").cloned();
    let bad = |id: Option<Value>, why: &str| Incoming::Invalid {
        id: id.unwrap_or(Value::Null),
        error: RpcError::new(INVALID_REQUEST, format!("invalid request: {why}")),
    };
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return bad(id, "\"jsonrpc\" must be \"2.0\"");
    }
    if let Some(id) = &id
        && !(id.is_string() || id.is_number() || id.is_null())
    {
        return bad(None, "\"id\" must be a string or a number");
    }
    let params = m.get("params").cloned().unwrap_or(Value::Null);
    if !(params.is_object() || params.is_array() || params.is_null()) {
        return bad(id, "\"params\" must be an object");
    }
    match (m.get("method"), id) {
        (Some(Value::String(method)), Some(id)) => Incoming::Request {
            id,
            method: method.clone(),
            params,
        },
        (Some(Value::String(method)), None) => Incoming::Notification {
            method: method.clone(),
            params,
        },
        (Some(_), id) => bad(id, "\"method\" must be a string"),
        (None, Some(id)) => {
            let result = match (m.get("result"), m.get("error")) {
                (_, Some(e)) if !e.is_null() => Err(RpcError {
                    code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                        .to_string(),
                }),
                (Some(r), _) => Ok(r.clone()),
                (None, _) => return bad(Some(id), "a response needs a result or an error"),
            };
            Incoming::Response { id, result }
        }
        (None, None) => bad(None, "no \"method\""),
    }
}

/// Why a request to the editor has no answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum AskError {
    /// The turn was canceled while waiting.
    Canceled,
    /// The connection closed.
    Closed,
    TimedOut,
    /// The editor answered with an error.
    Rpc(RpcError),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::Canceled => f.write_str("canceled"),
            AskError::Closed => f.write_str("the editor closed the connection"),
            AskError::TimedOut => f.write_str("the editor did not answer in time"),
            AskError::Rpc(e) => write!(f, "{} ({})", e.message, e.code),
        }
    }
}

type Pending = HashMap<u64, Sender<Result<Value, RpcError>>>;

/// The connection as every thread sees it.
pub(super) struct Peer {
    out: Sender<String>,
    /// Disconnected (its sender dropped) once the connection closes: wakes every waiter.
    closed_rx: Receiver<()>,
    closed_tx: Mutex<Option<Sender<()>>>,
    closed: AtomicBool,
    /// stdin ended: no answer can come any more.
    input_ended: AtomicBool,
    next_id: AtomicU64,
    pending: Mutex<Pending>,
    /// The writer is writing a line.
    writing: Arc<AtomicBool>,
}

impl Peer {
    /// The peer and the writer thread, which writes each queued message as one line on `output`.
    pub(super) fn start(output: impl Write + Send + 'static) -> std::io::Result<Arc<Peer>> {
        let (out, rx) = bounded::<String>(QUEUE);
        let (closed_tx, closed_rx) = bounded(0);
        let peer = Arc::new(Peer {
            out,
            closed_rx,
            closed_tx: Mutex::new(Some(closed_tx)),
            closed: AtomicBool::new(false),
            input_ended: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
            writing: Arc::new(AtomicBool::new(false)),
        });
        let writer = WriterEnd {
            peer: Arc::downgrade(&peer),
            writing: peer.writing.clone(),
        };
        std::thread::Builder::new()
            .name("acp-stdout".into())
            .spawn(move || writer.run(rx, output))?;
        Ok(peer)
    }

    /// Closes the connection: queued and later messages are dropped, waiters wake.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        drop(self.lock_closed().take());
        self.fail_pending();
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// stdin ended: requests to the editor can get no answer any more (messages still go out).
    pub(super) fn input_ended(&self) {
        self.input_ended.store(true, Ordering::SeqCst);
        self.fail_pending();
    }

    fn lock_closed(&self) -> std::sync::MutexGuard<'_, Option<Sender<()>>> {
        self.closed_tx.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fail_pending(&self) {
        // Dropping the senders wakes each waiter with a disconnect.
        self.lock_pending().clear();
    }

    /// Queues one message; waits while the queue is full, and drops it once the connection is
    /// closed. Whether it was queued.
    fn send(&self, msg: &Value) -> bool {
        if self.is_closed() {
            return false;
        }
        let line = msg.to_string();
        select! {
            send(self.out, line) -> r => r.is_ok(),
            recv(self.closed_rx) -> _ => false,
        }
    }

    pub(super) fn notify(&self, method: &str, params: Value) -> bool {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    pub(super) fn respond(&self, id: &Value, result: Result<Value, RpcError>) -> bool {
        let msg = match result {
            Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
            Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e.to_json()}),
        };
        self.send(&msg)
    }

    /// Sends a request to the editor and waits for its answer: until `cancel` is set, the
    /// connection closes, or `timeout` passes (None: no limit).
    pub(super) fn request(
        &self,
        method: &str,
        params: Value,
        cancel: &AtomicBool,
        timeout: Option<Duration>,
    ) -> Result<Value, AskError> {
        if self.input_ended.load(Ordering::SeqCst) || self.is_closed() {
            return Err(AskError::Closed);
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = bounded(1);
        self.lock_pending().insert(id, tx);
        let sent =
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        // stdin may have ended between the check and the insert.
        if !sent || self.input_ended.load(Ordering::SeqCst) {
            self.lock_pending().remove(&id);
            return Err(AskError::Closed);
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let outcome = loop {
            if cancel.load(Ordering::SeqCst) {
                break Err(AskError::Canceled);
            }
            let wait = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) => left.min(POLL),
                    None => break Err(AskError::TimedOut),
                },
                None => POLL,
            };
            match rx.recv_timeout(wait) {
                Ok(Ok(v)) => break Ok(v),
                Ok(Err(e)) => break Err(AskError::Rpc(e)),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    break Err(AskError::Closed);
                }
            }
        };
        self.lock_pending().remove(&id);
        outcome
    }

    /// Routes the editor's answer to the request waiting for it. False when none was.
    pub(super) fn deliver(&self, id: &Value, result: Result<Value, RpcError>) -> bool {
        let Some(n) = id.as_u64() else {
            return false;
        };
        match self.lock_pending().remove(&n) {
            Some(tx) => tx.try_send(result).is_ok(),
            None => false,
        }
    }

    /// Waits until every queued message is written, at most until `deadline`.
    pub(super) fn flush(&self, deadline: Instant) -> bool {
        while !self.out.is_empty() || self.writing.load(Ordering::SeqCst) {
            if self.is_closed() || Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }
}

/// The writer thread's side.
struct WriterEnd {
    peer: std::sync::Weak<Peer>,
    writing: Arc<AtomicBool>,
}

impl WriterEnd {
    fn run(self, rx: Receiver<String>, mut output: impl Write) {
        for mut line in rx {
            self.writing.store(true, Ordering::SeqCst);
            line.push('\n');
            let r = output
                .write_all(line.as_bytes())
                .and_then(|_| output.flush());
            self.writing.store(false, Ordering::SeqCst);
            if let Err(e) = r {
                crate::log::warn(&format!("acp: cannot write to stdout: {e}"));
                crate::ewriteln!("crush: acp: cannot write to stdout: {e}");
                if let Some(p) = self.peer.upgrade() {
                    p.close();
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut r = std::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        loop {
            match read_line(&mut r, max) {
                Line::Text(t) => out.push(String::from_utf8(t).unwrap()),
                Line::TooLong => out.push("<too long>".into()),
                Line::End => return out,
            }
        }
    }

    #[test]
    fn lines_are_split_capped_and_the_last_needs_no_newline() {
        assert_eq!(lines(b"a\r\nbb\n\nccc", 10), ["a", "bb", "", "ccc"]);
        assert_eq!(
            lines(b"short\n0123456789abc\nok\n", 10),
            ["short", "<too long>", "ok"]
        );
        assert_eq!(lines(b"0123456789abc", 10), ["<too long>"]);
        assert!(lines(b"", 10).is_empty());
    }

    #[test]
    fn messages_are_told_apart_and_bad_ones_get_the_right_error() {
        let p = |s: &str| parse(s.as_bytes());
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}"#),
            Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
                params: json!({"a": 1})
            }
        );
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","method":"session/cancel"}"#),
            Incoming::Notification {
                method: "session/cancel".into(),
                params: Value::Null
            }
        );
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","id":"x","result":{"ok":true}}"#),
            Incoming::Response {
                id: json!("x"),
                result: Ok(json!({"ok": true}))
            }
        );
        assert!(matches!(
            p(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}"#),
            Incoming::Response {
                result: Err(RpcError { code: -1, .. }),
                ..
            }
        ));
        let code = |s: &str| match p(s) {
            Incoming::Invalid { id, error } => (id, error.code),
            other => panic!("{other:?}"),
        };
        assert_eq!(code("{oops"), (Value::Null, PARSE_ERROR));
        assert_eq!(code("[1,2]"), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            code(r#"{"id":7,"method":"x"}"#),
            (json!(7), INVALID_REQUEST),
            "jsonrpc missing"
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":7,"method":5}"#),
            (json!(7), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#),
            (json!(1), INVALID_REQUEST)
        );
    }

    /// A writer that blocks until told to go on, like an editor that stopped reading.
    struct Gate {
        open: Receiver<()>,
        written: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gate {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let _ = self.open.recv();
            self.written.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_queue_waits_and_closing_releases_every_waiter() {
        let (_open_tx, open) = bounded::<()>(0);
        let written = Arc::new(Mutex::new(Vec::new()));
        let peer = Peer::start(Gate {
            open,
            written: written.clone(),
        })
        .unwrap();
        // The writer holds one line; the queue takes QUEUE more; the next sender waits.
        for _ in 0..=QUEUE {
            assert!(peer.notify("x", json!({})));
        }
        let p = peer.clone();
        let blocked = std::thread::spawn(move || p.notify("x", json!({})));
        let p = peer.clone();
        let asking = std::thread::spawn(move || {
            p.request(
                "fs/read_text_file",
                json!({}),
                &AtomicBool::new(false),
                None,
            )
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!blocked.is_finished(), "the sender waits for room");
        peer.close();
        assert!(!blocked.join().unwrap(), "dropped once closed");
        assert_eq!(asking.join().unwrap(), Err(AskError::Closed));
        assert!(!peer.notify("x", json!({})));
        assert!(written.lock().unwrap().is_empty());
    }

    #[test]
    fn answers_reach_their_request_and_cancel_or_timeout_end_the_wait() {
        let out = Arc::new(Mutex::new(Vec::new()));
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let peer = Peer::start(Shared(out.clone())).unwrap();
        let p = peer.clone();
        let waiter = std::thread::spawn(move || {
            p.request(
                "session/request_permission",
                json!({"q": 1}),
                &AtomicBool::new(false),
                None,
            )
        });
        // The request goes out with id 0; its answer is routed back.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !String::from_utf8_lossy(&out.lock().unwrap()).contains("request_permission") {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        }
        let sent: Value =
            serde_json::from_slice(out.lock().unwrap().split(|&b| b == b'\n').next().unwrap())
                .unwrap();
        assert_eq!(sent["id"], 0);
        assert!(
            !peer.deliver(&json!(99), Ok(json!(null))),
            "no such request"
        );
        assert!(peer.deliver(&json!(0), Ok(json!({"outcome": "yes"}))));
        assert_eq!(waiter.join().unwrap(), Ok(json!({"outcome": "yes"})));

        let cancel = AtomicBool::new(true);
        assert_eq!(
            peer.request("x", json!({}), &cancel, None),
            Err(AskError::Canceled)
        );
        assert_eq!(
            peer.request(
                "x",
                json!({}),
                &AtomicBool::new(false),
                Some(Duration::from_millis(20))
            ),
            Err(AskError::TimedOut)
        );
        peer.input_ended();
        assert_eq!(
            peer.request("x", json!({}), &AtomicBool::new(false), None),
            Err(AskError::Closed)
        );
        assert!(peer.flush(Instant::now() + Duration::from_secs(10)));
    }
}
