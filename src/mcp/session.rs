//! One connection to a server, from opening it to closing it: choosing the revision (the
//! `server/discover` probe of 2026-07-28, else the `initialize` handshake of the earlier ones),
//! then requests carrying what that revision needs (`_meta`, `resultType`, input requests).

use super::conn::{Conn, Dispatch, Envelope, Failure, Note, Transport};
use super::http::{Endpoint, LegacySse, Streamable};
use super::oauth;
use super::stdio::Stdio;
use super::{Inputs, LEGACY, LEGACY_LATEST, MODERN, ServerSpec, TransportSpec, client_info};
use crossbeam_channel::Sender;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Why a server could not be used.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum ConnectError {
    Failed(String),
    /// It needs the user to authorize crush first.
    NeedsAuth(String),
}

/// A negotiated connection.
pub(super) struct Live {
    conn: Conn,
    pub version: &'static str,
    pub modern: bool,
    pub capabilities: Value,
    pub server_info: Value,
    pub instructions: String,
    /// The transport is HTTP (tool parameters may be mirrored into headers).
    pub http: bool,
}

/// The `_meta` every request of 2026-07-28 carries.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        "io.modelcontextprotocol/clientInfo": client_info(),
    })
}

/// What the `server/discover` probe told.
enum Probe {
    /// A server of 2026-07-28: its discover result.
    Modern(Value),
    /// An older server (or one that offers only an older revision we speak).
    Legacy(&'static str),
    /// The server exited on the probe.
    Died,
    Failed(ConnectError),
}

/// The legacy revision we speak among `supported`, newest first.
fn pick_legacy(supported: &[Value]) -> Option<&'static str> {
    LEGACY
        .iter()
        .find(|v| supported.iter().any(|s| s.as_str() == Some(**v)))
        .copied()
}

fn versions_text() -> String {
    format!("{MODERN}, {}", LEGACY.join(", "))
}

fn probe(conn: &Conn, wait: Duration) -> Probe {
    let params = json!({"_meta": modern_meta()});
    match conn.request(
        "server/discover",
        params,
        Envelope::default(),
        Some(wait),
        None,
    ) {
        Ok(v) => match v.get("supportedVersions").and_then(Value::as_array) {
            Some(list) if list.iter().any(|s| s.as_str() == Some(MODERN)) => Probe::Modern(v),
            Some(list) => match pick_legacy(list) {
                Some(ver) => Probe::Legacy(ver),
                None => Probe::Failed(ConnectError::Failed(format!(
                    "the server speaks MCP {}; crush speaks {}",
                    Value::Array(list.clone()),
                    versions_text()
                ))),
            },
            // A result without versions: an older server answering anything it is sent.
            None => Probe::Legacy(LEGACY_LATEST),
        },
        Err(Failure::Rpc {
            code: -32022, data, ..
        }) => {
            let list = data
                .as_ref()
                .and_then(|d| d.get("supported"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            match pick_legacy(&list) {
                Some(ver) => Probe::Legacy(ver),
                None => Probe::Failed(ConnectError::Failed(format!(
                    "the server speaks MCP {}; crush speaks {}",
                    Value::Array(list),
                    versions_text()
                ))),
            }
        }
        Err(Failure::Closed(_)) => Probe::Died,
        Err(Failure::Unauthorized(w)) => Probe::Failed(ConnectError::NeedsAuth(w)),
        Err(f @ Failure::Transport(_)) => Probe::Failed(ConnectError::Failed(f.to_string())),
        // Any other error, or silence: a server that wants `initialize` first.
        Err(_) => Probe::Legacy(LEGACY_LATEST),
    }
}

fn connect_error(f: Failure, timeout: Duration) -> ConnectError {
    match f {
        Failure::Unauthorized(w) => ConnectError::NeedsAuth(w),
        Failure::TimedOut(_) => ConnectError::Failed(format!(
            "no answer to initialize within {}",
            super::conn::secs(timeout)
        )),
        f => ConnectError::Failed(f.to_string()),
    }
}

impl Live {
    /// Opens a connection to `spec` and negotiates the revision, within its timeout.
    pub(super) fn connect(
        spec: &ServerSpec,
        inputs: &Inputs,
        notes: Sender<Note>,
    ) -> Result<Live, ConnectError> {
        let deadline = Instant::now() + spec.timeout;
        let left = || deadline.saturating_duration_since(Instant::now());
        let label = format!("MCP server '{}'", spec.name);
        let dispatch = || {
            let warn = inputs.warn.clone();
            Dispatch::new(
                label.clone(),
                inputs.roots(),
                notes.clone(),
                Box::new(move |m| warn(m)),
            )
        };
        match &spec.transport {
            TransportSpec::Stdio(cmd) => {
                let open = || -> Result<Conn, ConnectError> {
                    let d = dispatch();
                    let t = Stdio::spawn(
                        cmd,
                        d.clone(),
                        inputs.max_message,
                        label.clone(),
                        inputs.stop_grace.min(spec.timeout),
                    )
                    .map_err(|e| ConnectError::Failed(e.to_string()))?;
                    Ok(Conn::new(d, Box::new(t)))
                };
                let conn = open()?;
                // Half the time for the probe: a server that ignores it still gets initialized.
                match probe(&conn, spec.timeout / 2) {
                    Probe::Modern(d) => Ok(Live::modern(conn, d, false)),
                    Probe::Legacy(v) => Live::initialize(conn, v, left(), spec.timeout, false),
                    Probe::Died => {
                        conn.close();
                        Live::initialize(open()?, LEGACY_LATEST, left(), spec.timeout, false)
                    }
                    Probe::Failed(e) => {
                        conn.close();
                        Err(e)
                    }
                }
            }
            TransportSpec::Http { url, headers } | TransportSpec::Sse { url, headers } => {
                let creds = Self::credentials(spec, inputs)?;
                let ep = Endpoint {
                    url: url.clone(),
                    headers: headers.clone(),
                    timeout: spec.timeout,
                    max_message: inputs.max_message,
                    proxy: crate::net::proxy_for_in(url, &inputs.env),
                };
                let legacy_sse = |ep: Endpoint| -> Result<Live, ConnectError> {
                    let d = dispatch();
                    let t = LegacySse::connect(ep, d.clone(), creds.clone())
                        .map_err(|f| connect_error(f, spec.timeout))?;
                    let conn = Conn::new(d, Box::new(t));
                    Live::initialize(conn, LEGACY_LATEST, left(), spec.timeout, true)
                };
                if matches!(spec.transport, TransportSpec::Sse { .. }) {
                    return legacy_sse(ep);
                }
                let d = dispatch();
                let t = Streamable::new(ep.clone(), d.clone(), creds.clone());
                t.set_protocol(Some(MODERN));
                let conn = Conn::new(d, Box::new(t));
                match probe(&conn, left()) {
                    Probe::Modern(d) => Ok(Live::modern(conn, d, true)),
                    Probe::Legacy(v) => {
                        conn.transport.set_protocol(None);
                        match Live::initialize(conn, v, left(), spec.timeout, true) {
                            // Not a Streamable HTTP endpoint: the older HTTP+SSE transport.
                            Err(ConnectError::Failed(m))
                                if ["HTTP 400", "HTTP 404", "HTTP 405"]
                                    .iter()
                                    .any(|p| m.starts_with(p)) =>
                            {
                                let ep = Endpoint {
                                    timeout: left(),
                                    ..ep
                                };
                                legacy_sse(ep).map_err(|e| match e {
                                    ConnectError::Failed(e2) => ConnectError::Failed(format!(
                                        "{m} (and as an HTTP+SSE server: {e2})"
                                    )),
                                    e => e,
                                })
                            }
                            r => r,
                        }
                    }
                    Probe::Died => Err(ConnectError::Failed(
                        "the server closed the connection".into(),
                    )),
                    Probe::Failed(e) => Err(e),
                }
            }
        }
    }

    /// The kept OAuth token of an HTTP server; a server set up for OAuth without one needs the
    /// user first.
    fn credentials(
        spec: &ServerSpec,
        inputs: &Inputs,
    ) -> Result<Option<Arc<dyn super::http::Credentials>>, ConnectError> {
        match oauth::Session::load(&spec.name, inputs.tokens.clone(), spec.timeout, &inputs.env) {
            Some(s) => Ok(Some(s)),
            None if spec.oauth => Err(ConnectError::NeedsAuth("not authorized yet".into())),
            None => Ok(None),
        }
    }

    fn modern(conn: Conn, discover: Value, http: bool) -> Live {
        let s = |k: &str| discover.get(k).cloned().unwrap_or(Value::Null);
        Live {
            conn,
            version: MODERN,
            modern: true,
            capabilities: s("capabilities"),
            server_info: discover
                .get("_meta")
                .and_then(|m| m.get("io.modelcontextprotocol/serverInfo"))
                .cloned()
                .unwrap_or(Value::Null),
            instructions: discover
                .get("instructions")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            http,
        }
    }

    /// The `initialize` handshake, asking for `want`.
    fn initialize(
        conn: Conn,
        want: &'static str,
        wait: Duration,
        timeout: Duration,
        http: bool,
    ) -> Result<Live, ConnectError> {
        let params = json!({
            "protocolVersion": want,
            "capabilities": {"roots": {"listChanged": false}},
            "clientInfo": client_info(),
        });
        let r = match conn.request("initialize", params, Envelope::default(), Some(wait), None) {
            Ok(r) => r,
            Err(f) => {
                conn.close();
                return Err(connect_error(f, timeout));
            }
        };
        let answered = r
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(version) = LEGACY.iter().find(|v| **v == answered).copied() else {
            conn.close();
            return Err(ConnectError::Failed(format!(
                "the server speaks MCP {}; crush speaks {}",
                if answered.is_empty() {
                    "without naming a version"
                } else {
                    answered
                },
                versions_text()
            )));
        };
        // The header exists from 2025-06-18 on.
        if version != "2024-11-05" && version != "2025-03-26" {
            conn.transport.set_protocol(Some(version));
        }
        conn.notify("notifications/initialized", json!({}));
        conn.transport.established();
        let s = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
        Ok(Live {
            conn,
            version,
            modern: false,
            capabilities: s("capabilities"),
            server_info: s("serverInfo"),
            instructions: r
                .get("instructions")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            http,
        })
    }

    /// Whether the connection is still open.
    pub(super) fn alive(&self) -> bool {
        self.conn.dispatch.closed().is_none()
    }

    /// Why the connection ended, if it did.
    pub(super) fn closed_reason(&self) -> Option<String> {
        self.conn.dispatch.closed()
    }

    pub(super) fn close(&self) {
        self.conn.close();
    }

    /// The capability `name` was declared.
    pub(super) fn has(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(|v| !v.is_null())
    }

    /// A request of this session: `_meta` added for 2026-07-28, input requests answered (the
    /// project root for `roots/list`; elicitation is declined).
    pub(super) fn request(
        &self,
        method: &str,
        params: Value,
        env: Envelope,
        timeout: Option<Duration>,
        cancel: Option<&AtomicBool>,
    ) -> Result<Value, Failure> {
        let mut params = match params {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        if self.modern {
            let mut meta = match params.remove("_meta") {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            if let Value::Object(m) = modern_meta() {
                meta.extend(m);
            }
            params.insert("_meta".into(), Value::Object(meta));
        }
        // Each round of input requests is bounded; the deadline covers all of them.
        let deadline = timeout.map(|t| Instant::now() + t);
        for _ in 0..4 {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let r = self.conn.request(
                method,
                Value::Object(params.clone()),
                env.clone(),
                left,
                cancel,
            )?;
            if r.get("resultType").and_then(Value::as_str) != Some("input_required") {
                return Ok(r);
            }
            let mut answers = Map::new();
            if let Some(Value::Object(reqs)) = r.get("inputRequests") {
                for (key, req) in reqs {
                    let answer = match req.get("method").and_then(Value::as_str) {
                        Some("roots/list") => json!({"roots": self.conn.dispatch.roots()}),
                        Some("elicitation/create") => json!({"action": "decline"}),
                        other => {
                            return Err(Failure::Rpc {
                                code: -32601,
                                message: format!(
                                    "the server asked crush for {} while answering {method}, \
                                     which crush does not offer",
                                    other.unwrap_or("an unknown input")
                                ),
                                data: None,
                            });
                        }
                    };
                    answers.insert(key.clone(), answer);
                }
            }
            params.insert("inputResponses".into(), Value::Object(answers));
            match r.get("requestState") {
                Some(s) => params.insert("requestState".into(), s.clone()),
                None => params.remove("requestState"),
            };
        }
        Err(Failure::Rpc {
            code: -32603,
            message: format!("the server kept asking for input while answering {method}"),
            data: None,
        })
    }

    /// Every page of a `*/list` request (at most 100 pages).
    pub(super) fn list(
        &self,
        method: &str,
        key: &str,
        timeout: Duration,
    ) -> Result<Vec<Value>, Failure> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..100 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let r = self.request(method, params, Envelope::default(), Some(timeout), None)?;
            if let Some(items) = r.get(key).and_then(Value::as_array) {
                out.extend(items.iter().cloned());
            }
            cursor = r
                .get("nextCursor")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// Opens the `subscriptions/listen` stream of 2026-07-28 for list changes, on a thread of
    /// its own; its notifications arrive like any other.
    pub(super) fn listen(self: &Arc<Self>, prompts: bool) {
        if !self.modern {
            return;
        }
        let me = self.clone();
        let _ = std::thread::Builder::new()
            .name("mcp-listen".into())
            .spawn(move || {
                let filter = json!({"toolsListChanged": true, "promptsListChanged": prompts});
                let _ = me.request(
                    "subscriptions/listen",
                    json!({"notifications": filter}),
                    Envelope::default(),
                    None,
                    None,
                );
            });
    }
}
