//! The Model Context Protocol client (crush(1) MCP SERVERS): servers over stdio, Streamable HTTP
//! or the older HTTP+SSE transport, speaking revisions 2024-11-05, 2025-03-26, 2025-06-18 and
//! 2026-07-28. Synchronous: every server starts on a thread of its own, requests wait on
//! channels, and nothing here knows the agent, the tools or the configuration files — it takes
//! plain values (`ServerSpec`) and returns JSON values and messages.
//!
//! A server that fails, hangs, exits or sends garbage costs one warning and the session goes on
//! without it; a stdio server that exits is started again once, at its next use.

mod conn;
mod error;
mod http;
pub(crate) mod oauth;
mod session;
mod stdio;
pub(crate) mod wire;

pub(crate) use error::{Down, McpError};
pub(crate) use oauth::{ClientConfig, TokenStore};
pub(crate) use stdio::Command;
pub(crate) use wire::{base64, percent_decode};

use conn::{Envelope, Failure, Note};
use serde_json::{Map, Value, json};
use session::{ConnectError, Live};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// The stateless revision (no `initialize`; `_meta` on every request).
pub(crate) const MODERN: &str = "2026-07-28";
/// The revisions with the `initialize` handshake, newest first.
pub(crate) const LEGACY: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];
pub(crate) const LEGACY_LATEST: &str = LEGACY[0];
/// Messages larger than this are refused (the connection is closed).
pub(crate) const MAX_MESSAGE: usize = 32 * 1024 * 1024;

/// Who crush is, as `initialize` and `_meta` say it.
pub(crate) fn client_info() -> Value {
    json!({"name": "crush", "title": "Crush", "version": env!("CARGO_PKG_VERSION")})
}

/// How a server is reached.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TransportSpec {
    Stdio(Command),
    /// Streamable HTTP (falls back to HTTP+SSE when the URL is an older server's).
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// The HTTP+SSE transport of 2024-11-05.
    Sse {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl TransportSpec {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            TransportSpec::Stdio(_) => "stdio",
            TransportSpec::Http { .. } => "http",
            TransportSpec::Sse { .. } => "sse",
        }
    }

    fn url(&self) -> Option<&str> {
        match self {
            TransportSpec::Stdio(_) => None,
            TransportSpec::Http { url, .. } | TransportSpec::Sse { url, .. } => Some(url),
        }
    }
}

/// One configured server, its values expanded.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ServerSpec {
    pub name: String,
    pub transport: TransportSpec,
    /// Bounds start-up and each request.
    pub timeout: Duration,
    /// Only these tools (empty: all).
    pub enabled_tools: Vec<String>,
    pub disabled_tools: Vec<String>,
    pub disabled: bool,
    /// The server needs OAuth (`oauth: true`): without a kept token it waits for a login.
    pub oauth: bool,
    pub oauth_client: ClientConfig,
    /// Checked before each (re)start: a project server's files are as trusted.
    pub check: crate::guard::Check,
}

/// A tool of a server, as the model is offered it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tool {
    pub server: String,
    /// The server's name for it.
    pub mcp_name: String,
    /// `mcp_<server>_<tool>` (shortened to 64 characters when longer).
    pub full_name: String,
    pub description: String,
    /// The input JSON schema (an object schema).
    pub schema: Value,
    /// `x-mcp-header` parameters: header name and the property path of its value.
    headers: Vec<(String, Vec<String>)>,
}

/// A prompt template of a server.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Prompt {
    pub server: String,
    pub name: String,
    pub description: String,
    /// (name, required, description)
    pub arguments: Vec<(String, bool, String)>,
}

/// Where a server stands, for `crush mcp list`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Status {
    pub name: String,
    pub transport: &'static str,
    /// connected | starting | failed | needs-auth | disabled
    pub state: &'static str,
    pub version: Option<&'static str>,
    /// The server's own name and version.
    pub server: Option<String>,
    pub tools: Vec<String>,
    pub prompts: Vec<String>,
    pub error: Option<String>,
}

/// What every connection needs from the manager.
#[derive(Clone)]
pub(crate) struct Inputs {
    /// The project root, offered as the one root.
    pub root: PathBuf,
    pub tokens: Arc<dyn TokenStore>,
    pub warn: Arc<dyn Fn(String) + Send + Sync>,
    pub max_message: usize,
    /// How long a stdio server gets to exit after its input is closed (then SIGTERM, SIGKILL).
    pub stop_grace: Duration,
    /// The session's variables: an HTTP server's proxy (and its OAuth requests') is read from
    /// them first (crush(1) ENVIRONMENT).
    pub env: crate::env::Overlay,
}

impl Inputs {
    fn roots(&self) -> Value {
        let name = self
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = self.root.to_string_lossy();
        let uri = format!(
            "file://{}",
            path.split('/')
                .map(wire::percent_encode)
                .collect::<Vec<_>>()
                .join("/")
        );
        json!([{"uri": uri, "name": name}])
    }
}

#[derive(Clone)]
enum State {
    Starting,
    Ready(Arc<Live>),
    Failed(String),
    NeedsAuth(String),
    Disabled,
}

struct Server {
    spec: ServerSpec,
    state: Mutex<State>,
    /// Serializes connecting, so concurrent calls restart a server once.
    connecting: Mutex<()>,
    /// The one restart after the server exited was used.
    restarted: AtomicBool,
    tools: Mutex<Vec<Tool>>,
    prompts: Mutex<Vec<Prompt>>,
    /// Dropped from the configuration: whatever it finishes is discarded.
    removed: AtomicBool,
}

struct Shared {
    inputs: Inputs,
    servers: Mutex<BTreeMap<String, Arc<Server>>>,
    generation: AtomicU64,
    /// Signalled whenever a server's state changes.
    changed: Condvar,
    gate: Mutex<()>,
    warnings: Arc<Mutex<Vec<String>>>,
}

/// The servers of a session. Cloning gives another handle to the same servers.
#[derive(Clone)]
pub(crate) struct Manager {
    shared: Arc<Shared>,
}

/// The part of a tool call's arguments at `path` as a header value (primitive values only).
fn header_param(args: &Value, path: &[String]) -> Option<String> {
    let mut v = args;
    for p in path {
        v = v.get(p)?;
    }
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// An `x-mcp-header` annotation that breaks the rules (the tool is left out).
#[derive(Debug, Clone, PartialEq)]
enum HeaderRule {
    /// Not reachable through `properties` alone (the annotation, as JSON).
    Unreachable(String),
    NotToken(String),
    Twice(String),
    NotPrimitive {
        header: String,
        ty: String,
    },
}

impl std::fmt::Display for HeaderRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderRule::Unreachable(h) => write!(f, "x-mcp-header at an unreachable place ({h})"),
            HeaderRule::NotToken(h) => write!(f, "x-mcp-header {h:?} is not a header name"),
            HeaderRule::Twice(h) => write!(f, "x-mcp-header {h:?} appears twice"),
            HeaderRule::NotPrimitive { header, ty } => write!(
                f,
                "x-mcp-header {header:?} is on a parameter of type {ty:?}, not a string, integer or boolean"
            ),
        }
    }
}

/// The `x-mcp-header` annotations of a schema: (header, property path). Err: an annotation
/// that breaks the rules (empty, not a token, repeated, on a non-primitive, or not reachable
/// through `properties` alone).
fn header_params(schema: &Value) -> Result<Vec<(String, Vec<String>)>, HeaderRule> {
    fn walk(
        v: &Value,
        path: &mut Vec<String>,
        reachable: bool,
        out: &mut Vec<(String, Vec<String>, Value)>,
        bad: &mut Vec<HeaderRule>,
    ) {
        match v {
            Value::Object(m) => {
                if let Some(h) = m.get("x-mcp-header") {
                    if reachable && !path.is_empty() {
                        out.push((
                            h.as_str().unwrap_or("").to_string(),
                            path.clone(),
                            v.clone(),
                        ));
                    } else {
                        bad.push(HeaderRule::Unreachable(h.to_string()));
                    }
                }
                for (k, x) in m {
                    if k == "properties"
                        && let Value::Object(props) = x
                    {
                        for (name, p) in props {
                            path.push(name.clone());
                            walk(p, path, reachable, out, bad);
                            path.pop();
                        }
                    } else if k != "x-mcp-header" {
                        walk(x, &mut Vec::new(), false, out, bad);
                    }
                }
            }
            Value::Array(a) => {
                for x in a {
                    walk(x, &mut Vec::new(), false, out, bad);
                }
            }
            _ => {}
        }
    }
    let (mut found, mut bad) = (Vec::new(), Vec::new());
    walk(schema, &mut Vec::new(), true, &mut found, &mut bad);
    if let Some(b) = bad.into_iter().next() {
        return Err(b);
    }
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (h, path, prop) in found {
        let token = !h.is_empty()
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(HeaderRule::NotToken(h));
        }
        if seen.iter().any(|s| s.eq_ignore_ascii_case(&h)) {
            return Err(HeaderRule::Twice(h));
        }
        let ty = prop.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(ty, "string" | "integer" | "boolean") {
            return Err(HeaderRule::NotPrimitive {
                header: h,
                ty: ty.to_string(),
            });
        }
        seen.push(h.clone());
        out.push((h, path));
    }
    Ok(out)
}

/// Whether `name` can be a tool name for the providers (`^[a-zA-Z0-9_-]+$`).
fn valid_chars(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `mcp_<server>_<tool>`, shortened deterministically to 64 characters when longer: the first
/// 55, `_`, and 8 hex digits of the SHA-256 of the whole name.
pub(crate) fn full_name(server: &str, tool: &str) -> String {
    let full = format!("mcp_{server}_{tool}");
    if full.len() <= 64 {
        return full;
    }
    let hash = crate::sha256::hex(full.as_bytes());
    format!("{}_{}", &full[..55], &hash[..8])
}

/// The tools a server listed, checked: a name that cannot be a tool name, a schema that is not
/// an object schema, a bad `x-mcp-header` — each left out with a warning. Filters applied.
fn checked_tools(
    spec: &ServerSpec,
    raw: Vec<Value>,
    headers_apply: bool,
    warn: &dyn Fn(String),
) -> Vec<Tool> {
    let label = format!("MCP server '{}'", spec.name);
    if !valid_chars(&spec.name) {
        warn(format!(
            "{label}: its name has characters a tool name cannot carry (letters, digits, _ and - \
             only): its tools are left out"
        ));
        return Vec::new();
    }
    let mut out: Vec<Tool> = Vec::new();
    for t in raw {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            warn(format!("{label}: a tool without a name was left out"));
            continue;
        };
        if !spec.enabled_tools.is_empty() && !spec.enabled_tools.iter().any(|e| e == name) {
            continue;
        }
        if spec.disabled_tools.iter().any(|d| d == name) {
            continue;
        }
        if !valid_chars(name) {
            warn(format!(
                "{label}: tool {name:?} was left out: its name is not a valid tool name \
                 (letters, digits, _ and - only)"
            ));
            continue;
        }
        let mut schema = match t.get("inputSchema") {
            Some(Value::Object(m)) => Value::Object(m.clone()),
            None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
            Some(other) => {
                warn(format!(
                    "{label}: tool {name:?} was left out: its input schema is not an object ({})",
                    short(&other.to_string())
                ));
                continue;
            }
        };
        match schema.get("type") {
            None => schema["type"] = json!("object"),
            Some(Value::String(s)) if s == "object" => {}
            Some(other) => {
                warn(format!(
                    "{label}: tool {name:?} was left out: its input schema is of type {other}, \
                     not object"
                ));
                continue;
            }
        }
        if schema.get("properties").is_none() {
            schema["properties"] = json!({});
        }
        let headers = if headers_apply {
            match header_params(&schema) {
                Ok(h) => h,
                Err(e) => {
                    warn(format!("{label}: tool {name:?} was left out: {e}"));
                    continue;
                }
            }
        } else {
            Vec::new()
        };
        let full = full_name(&spec.name, name);
        if out.iter().any(|o| o.full_name == full) {
            warn(format!(
                "{label}: tool {name:?} was left out: another tool has the same name"
            ));
            continue;
        }
        let description = t
            .get("description")
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty())
            .or_else(|| t.get("title").and_then(Value::as_str))
            .map(str::to_string)
            .unwrap_or_else(|| format!("Tool {name} of the MCP server {}", spec.name));
        out.push(Tool {
            server: spec.name.clone(),
            mcp_name: name.to_string(),
            full_name: full,
            description,
            schema,
            headers,
        });
    }
    out
}

fn short(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

fn checked_prompts(server: &str, raw: Vec<Value>) -> Vec<Prompt> {
    raw.iter()
        .filter_map(|p| {
            let name = p.get("name")?.as_str()?.to_string();
            let arguments = p
                .get("arguments")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| {
                            Some((
                                x.get("name")?.as_str()?.to_string(),
                                x.get("required").and_then(Value::as_bool).unwrap_or(false),
                                x.get("description")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .to_string(),
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(Prompt {
                server: server.to_string(),
                name,
                description: p
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                arguments,
            })
        })
        .collect()
}

impl Server {
    fn state(&self) -> State {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn label(&self) -> String {
        format!("MCP server '{}'", self.spec.name)
    }

    /// The error of a request this server cannot take.
    fn down(&self, why: Down) -> McpError {
        McpError::Down {
            label: self.label(),
            why,
        }
    }
}

impl Shared {
    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        let _g = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        self.changed.notify_all();
    }

    fn warn(&self, msg: String) {
        (self.inputs.warn)(msg);
    }

    fn set_state(&self, s: &Server, state: State) {
        *s.state.lock().unwrap_or_else(|e| e.into_inner()) = state;
        self.bump();
    }

    /// Connects `s` (its state must be Starting or a dead session) and records the outcome.
    fn connect(self: &Arc<Self>, s: &Arc<Server>) -> Result<Arc<Live>, McpError> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let started = Instant::now();
        let result = match s.spec.check.check() {
            Ok(()) => Live::connect(&s.spec, &self.inputs, tx),
            Err(e) => Err(ConnectError::Failed(e.to_string())),
        };
        if s.removed.load(Ordering::SeqCst) {
            if let Ok(l) = &result {
                l.close();
            }
            return Err(s.down(Down::Removed));
        }
        let live = match result {
            Ok(l) => Arc::new(l),
            Err(ConnectError::NeedsAuth(why)) => {
                let msg = format!(
                    "needs authorization ({why}): run 'crush mcp login {}'",
                    s.spec.name
                );
                self.warn(format!("{}: {msg}", s.label()));
                self.set_state(s, State::NeedsAuth(msg.clone()));
                return Err(s.down(Down::NeedsAuth(msg)));
            }
            Err(ConnectError::Failed(why)) => {
                self.warn(format!("{} did not start: {why}", s.label()));
                self.set_state(s, State::Failed(why.clone()));
                return Err(s.down(Down::Failed(why)));
            }
        };
        let warn = |m: String| self.warn(m);
        // Listing is part of the start: what is left of the timeout (a quarter at least).
        let list_time = (started + s.spec.timeout)
            .saturating_duration_since(Instant::now())
            .max(s.spec.timeout / 4);
        let tools = match live.list("tools/list", "tools", list_time) {
            Ok(raw) => checked_tools(&s.spec, raw, live.http && live.modern, &warn),
            Err(f) => {
                live.close();
                let why = format!("listing its tools failed: {f}");
                self.warn(format!("{} did not start: {why}", s.label()));
                self.set_state(s, State::Failed(why.clone()));
                return Err(s.down(Down::Failed(why)));
            }
        };
        let prompts = if live.has("prompts") {
            match live.list("prompts/list", "prompts", list_time) {
                Ok(raw) => checked_prompts(&s.spec.name, raw),
                Err(f) => {
                    crate::log::warn(&format!("{}: listing prompts failed: {f}", s.label()));
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        crate::log::info(&format!(
            "{} connected in {} ms: MCP {}, {} tool(s), {} prompt(s)",
            s.label(),
            started.elapsed().as_millis(),
            live.version,
            tools.len(),
            prompts.len()
        ));
        *s.tools.lock().unwrap_or_else(|e| e.into_inner()) = tools;
        *s.prompts.lock().unwrap_or_else(|e| e.into_inner()) = prompts;
        let notes_live = Arc::downgrade(&live);
        let (me, server) = (self.clone(), s.clone());
        let _ = std::thread::Builder::new()
            .name("mcp-notes".into())
            .spawn(move || me.notes(&server, &notes_live, rx));
        let wants = |cap: &str| {
            live.capabilities
                .get(cap)
                .and_then(|c| c.get("listChanged"))
                .and_then(Value::as_bool)
                == Some(true)
        };
        if wants("tools") || wants("prompts") {
            live.listen(wants("prompts"));
        }
        self.set_state(s, State::Ready(live.clone()));
        Ok(live)
    }

    /// Handles what a connection sent on its own, until it is gone.
    fn notes(
        self: &Arc<Self>,
        s: &Arc<Server>,
        live: &Weak<Live>,
        rx: crossbeam_channel::Receiver<Note>,
    ) {
        for note in rx {
            let Some(l) = live.upgrade() else { return };
            let current = matches!(s.state(), State::Ready(c) if Arc::ptr_eq(&c, &l));
            if !current || s.removed.load(Ordering::SeqCst) {
                continue;
            }
            match note {
                Note::Notification { method, params } => match method.as_str() {
                    "notifications/tools/list_changed" => {
                        match l.list("tools/list", "tools", s.spec.timeout) {
                            Ok(raw) => {
                                let warn = |m: String| self.warn(m);
                                let tools = checked_tools(&s.spec, raw, l.http && l.modern, &warn);
                                *s.tools.lock().unwrap_or_else(|e| e.into_inner()) = tools;
                                self.bump();
                            }
                            Err(f) => crate::log::warn(&format!(
                                "{}: listing its changed tools failed: {f}",
                                s.label()
                            )),
                        }
                    }
                    "notifications/prompts/list_changed" => {
                        if let Ok(raw) = l.list("prompts/list", "prompts", s.spec.timeout) {
                            *s.prompts.lock().unwrap_or_else(|e| e.into_inner()) =
                                checked_prompts(&s.spec.name, raw);
                            self.bump();
                        }
                    }
                    "notifications/message" => {
                        let level = params.get("level").and_then(Value::as_str).unwrap_or("");
                        let data = params.get("data").cloned().unwrap_or(Value::Null);
                        let msg = format!("{} log: {}", s.label(), short(&data.to_string()));
                        match level {
                            "warning" | "error" | "critical" | "alert" | "emergency" => {
                                crate::log::warn(&msg)
                            }
                            _ => crate::log::debug(&msg),
                        }
                    }
                    _ => crate::log::debug(&format!("{}: {method}", s.label())),
                },
                // A connection given up while connecting (a Streamable HTTP attempt at an
                // older server, a process that exited on the probe) shares this channel.
                Note::Closed(_) if l.alive() => continue,
                Note::Closed(why) => {
                    if s.restarted.load(Ordering::SeqCst) {
                        self.warn(format!("{} stopped: {why}", s.label()));
                        s.tools.lock().unwrap_or_else(|e| e.into_inner()).clear();
                        s.prompts.lock().unwrap_or_else(|e| e.into_inner()).clear();
                        self.set_state(s, State::Failed(why));
                    } else {
                        self.warn(format!(
                            "{} stopped: {why}; it is started again at its next use",
                            s.label()
                        ));
                        self.bump();
                    }
                    return;
                }
            }
        }
    }

    /// The live session of `name`, waiting for a server still starting and starting once more a
    /// server that exited.
    fn live(self: &Arc<Self>, name: &str) -> Result<Arc<Live>, McpError> {
        let s = self.server(name)?;
        let end = Instant::now() + s.spec.timeout;
        loop {
            match s.state() {
                State::Ready(l) if l.alive() => return Ok(l),
                State::Ready(l) => {
                    let _c = s.connecting.lock().unwrap_or_else(|e| e.into_inner());
                    // Another call may have restarted it meanwhile.
                    if let State::Ready(n) = s.state()
                        && n.alive()
                    {
                        return Ok(n);
                    }
                    let why = l.closed_reason().unwrap_or_default();
                    if s.restarted.swap(true, Ordering::SeqCst) {
                        s.tools.lock().unwrap_or_else(|e| e.into_inner()).clear();
                        self.set_state(&s, State::Failed(why.clone()));
                        return Err(s.down(Down::Stopped(why)));
                    }
                    crate::log::info(&format!("{}: starting it again ({why})", s.label()));
                    self.set_state(&s, State::Starting);
                    return self.connect(&s);
                }
                State::Starting => {
                    let g = self.gate.lock().unwrap_or_else(|e| e.into_inner());
                    let left = end.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(s.down(Down::Starting));
                    }
                    let _ = self
                        .changed
                        .wait_timeout(g, left.min(Duration::from_millis(50)));
                }
                State::Failed(why) => return Err(s.down(Down::NotRunning(why))),
                State::NeedsAuth(msg) => return Err(s.down(Down::NeedsAuth(msg))),
                State::Disabled => return Err(s.down(Down::Disabled)),
            }
        }
    }

    /// A request to server `name`; a session the server ended is opened again and the request
    /// sent once more.
    fn request(
        self: &Arc<Self>,
        name: &str,
        method: &str,
        params: Value,
        env: Envelope,
        cancel: Option<&AtomicBool>,
    ) -> Result<Value, McpError> {
        let live = self.live(name)?;
        let timeout = self.timeout_of(name);
        let started = Instant::now();
        let r = match live.request(method, params.clone(), env.clone(), Some(timeout), cancel) {
            Err(Failure::SessionExpired) => {
                let s = self.server(name)?;
                let _c = s.connecting.lock().unwrap_or_else(|e| e.into_inner());
                // Starting first: the old session's end is then no news.
                self.set_state(&s, State::Starting);
                live.close();
                let fresh = self.connect(&s)?;
                fresh.request(method, params, env, Some(timeout), cancel)
            }
            r => r,
        };
        crate::log::debug(&format!(
            "MCP server '{name}': {method} answered in {:.2} ms",
            started.elapsed().as_secs_f64() * 1000.0
        ));
        r.map_err(|failure| McpError::Request {
            server: name.to_string(),
            method: method.to_string(),
            timeout,
            failure: Box::new(failure),
        })
    }

    fn server(&self, name: &str) -> Result<Arc<Server>, McpError> {
        self.servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .ok_or_else(|| McpError::NoServer(name.to_string()))
    }

    fn timeout_of(&self, name: &str) -> Duration {
        self.server(name)
            .map(|s| s.spec.timeout)
            .unwrap_or(Duration::from_secs(10))
    }
}

impl Manager {
    /// A manager with no servers yet. `root` is offered to servers as the one root; `env`: the
    /// session's variables.
    pub(crate) fn new(
        root: PathBuf,
        tokens: Arc<dyn TokenStore>,
        env: crate::env::Overlay,
    ) -> Manager {
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let w = warnings.clone();
        Manager {
            shared: Arc::new(Shared {
                inputs: Inputs {
                    root,
                    tokens,
                    warn: Arc::new(move |m: String| {
                        crate::log::warn(&m);
                        w.lock().unwrap_or_else(|e| e.into_inner()).push(m);
                    }),
                    max_message: MAX_MESSAGE,
                    stop_grace: Duration::from_secs(1),
                    env,
                },
                servers: Mutex::new(BTreeMap::new()),
                generation: AtomicU64::new(0),
                changed: Condvar::new(),
                gate: Mutex::new(()),
                warnings,
            }),
        }
    }

    /// Makes the running servers those of `specs`: new and changed ones start (each on a thread
    /// of its own), removed and changed ones stop, the others are left alone.
    pub(crate) fn set_servers(&self, specs: Vec<ServerSpec>) {
        let sh = &self.shared;
        let mut servers = sh.servers.lock().unwrap_or_else(|e| e.into_inner());
        let wanted: BTreeMap<String, ServerSpec> =
            specs.into_iter().map(|s| (s.name.clone(), s)).collect();
        let gone: Vec<String> = servers
            .iter()
            .filter(|(n, s)| wanted.get(*n) != Some(&s.spec))
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            if let Some(s) = servers.remove(&n) {
                s.removed.store(true, Ordering::SeqCst);
                if let State::Ready(l) = s.state() {
                    let _ = std::thread::Builder::new()
                        .name("mcp-stop".into())
                        .spawn(move || l.close());
                }
            }
        }
        for (name, spec) in wanted {
            if servers.contains_key(&name) {
                continue;
            }
            let disabled = spec.disabled;
            let s = Arc::new(Server {
                spec,
                state: Mutex::new(if disabled {
                    State::Disabled
                } else {
                    State::Starting
                }),
                connecting: Mutex::new(()),
                restarted: AtomicBool::new(false),
                tools: Mutex::new(Vec::new()),
                prompts: Mutex::new(Vec::new()),
                removed: AtomicBool::new(false),
            });
            servers.insert(name, s.clone());
            if !disabled {
                let sh2 = sh.clone();
                let spawned =
                    std::thread::Builder::new()
                        .name("mcp-start".into())
                        .spawn(move || {
                            let _c = s.connecting.lock().unwrap_or_else(|e| e.into_inner());
                            let _ = sh2.connect(&s);
                        });
                if let Err(e) = spawned {
                    sh.warn(format!("cannot start a thread for an MCP server: {e}"));
                }
            }
        }
        drop(servers);
        sh.bump();
    }

    /// Waits until no server is starting, at most `wait` (None: as long as the slowest server's
    /// own timeout allows).
    pub(crate) fn wait_ready(&self, wait: Option<Duration>) {
        self.wait_starting(None, wait);
    }

    /// Waits until server `name` (one the user named) is no longer starting, as long as its own
    /// timeout allows.
    pub(crate) fn wait_server(&self, name: &str) {
        self.wait_starting(Some(name), None);
    }

    fn wait_starting(&self, only: Option<&str>, wait: Option<Duration>) {
        let sh = &self.shared;
        let longest = sh
            .servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|s| only.is_none_or(|n| s.spec.name == n))
            .map(|s| s.spec.timeout)
            .max()
            .unwrap_or_default();
        // A server's start is bounded by its timeout (listing may take a quarter more); the
        // margin covers the thread.
        let end = Instant::now() + wait.unwrap_or(longest * 3 / 2 + Duration::from_millis(500));
        let mut g = sh.gate.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let starting = sh
                .servers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .filter(|s| only.is_none_or(|n| s.spec.name == n))
                .any(|s| matches!(s.state(), State::Starting));
            let left = end.saturating_duration_since(Instant::now());
            if !starting || left.is_zero() {
                return;
            }
            g = sh
                .changed
                .wait_timeout(g, left.min(Duration::from_millis(50)))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Changes whenever a server's state, tools or prompts change.
    pub(crate) fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::SeqCst)
    }

    /// The warnings since the last call (also in the log).
    pub(crate) fn take_warnings(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .shared
                .warnings
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// Whether any server is configured and not disabled.
    pub(crate) fn has_servers(&self) -> bool {
        self.shared
            .servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .any(|s| !s.spec.disabled)
    }

    fn each<T>(&self, f: impl Fn(&Server) -> Vec<T>) -> Vec<T> {
        self.shared
            .servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .flat_map(|s| f(s))
            .collect()
    }

    /// The tools of the servers that are running (or that exited and may start again).
    pub(crate) fn tools(&self) -> Vec<Tool> {
        self.each(|s| match s.state() {
            State::Ready(_) => s.tools.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            _ => Vec::new(),
        })
    }

    pub(crate) fn prompts(&self) -> Vec<Prompt> {
        self.each(|s| match s.state() {
            State::Ready(_) => s.prompts.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            _ => Vec::new(),
        })
    }

    /// The servers' instructions, for the system prompt.
    pub(crate) fn instructions(&self) -> Vec<(String, String)> {
        self.each(|s| match s.state() {
            State::Ready(l) if !l.instructions.trim().is_empty() => {
                vec![(s.spec.name.clone(), l.instructions.clone())]
            }
            _ => Vec::new(),
        })
    }

    /// Calls `tool` with `args`: the raw `CallToolResult`, or why there is none.
    pub(crate) fn call_tool(
        &self,
        tool: &Tool,
        args: &Value,
        cancel: Option<&AtomicBool>,
    ) -> Result<Value, McpError> {
        let env = Envelope {
            name: Some(tool.mcp_name.clone()),
            headers: tool
                .headers
                .iter()
                .filter_map(|(h, path)| Some((h.clone(), header_param(args, path)?)))
                .collect(),
            ..Default::default()
        };
        self.shared.request(
            &tool.server,
            "tools/call",
            json!({"name": tool.mcp_name, "arguments": args}),
            env,
            cancel,
        )
    }

    /// Every resource of server `name`.
    pub(crate) fn list_resources(&self, name: &str) -> Result<Vec<Value>, McpError> {
        let live = self.shared.live(name)?;
        if !live.has("resources") {
            return Ok(Vec::new());
        }
        live.list("resources/list", "resources", self.shared.timeout_of(name))
            .map_err(|failure| McpError::Listing {
                server: name.to_string(),
                method: "resources/list",
                failure: Box::new(failure),
            })
    }

    /// The contents of resource `uri` of server `name`.
    pub(crate) fn read_resource(
        &self,
        name: &str,
        uri: &str,
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<Value>, McpError> {
        let env = Envelope {
            name: Some(uri.to_string()),
            ..Default::default()
        };
        let r = self
            .shared
            .request(name, "resources/read", json!({"uri": uri}), env, cancel)?;
        Ok(r.get("contents")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    /// The messages of prompt `prompt` of server `name` with `args`.
    pub(crate) fn get_prompt(
        &self,
        name: &str,
        prompt: &str,
        args: Map<String, Value>,
    ) -> Result<Vec<Value>, McpError> {
        let env = Envelope {
            name: Some(prompt.to_string()),
            ..Default::default()
        };
        let r = self.shared.request(
            name,
            "prompts/get",
            json!({"name": prompt, "arguments": args}),
            env,
            None,
        )?;
        Ok(r.get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    /// Every server and where it stands.
    pub(crate) fn statuses(&self) -> Vec<Status> {
        self.each(|s| {
            let (state, version, server, error) = match s.state() {
                State::Starting => ("starting", None, None, None),
                State::Ready(l) => {
                    let info = &l.server_info;
                    let who = match (
                        info.get("name").and_then(Value::as_str),
                        info.get("version").and_then(Value::as_str),
                    ) {
                        (Some(n), Some(v)) => Some(format!("{n} {v}")),
                        (Some(n), None) => Some(n.to_string()),
                        _ => None,
                    };
                    let err = l.closed_reason();
                    let state = if err.is_some() {
                        "stopped"
                    } else {
                        "connected"
                    };
                    (state, Some(l.version), who, err)
                }
                State::Failed(e) => ("failed", None, None, Some(e)),
                State::NeedsAuth(e) => ("needs-auth", None, None, Some(e)),
                State::Disabled => ("disabled", None, None, None),
            };
            let listed = matches!(state, "connected" | "stopped");
            let names = |v: Vec<String>| if listed { v } else { Vec::new() };
            let tools = s.tools.lock().unwrap_or_else(|e| e.into_inner());
            let prompts = s.prompts.lock().unwrap_or_else(|e| e.into_inner());
            vec![Status {
                name: s.spec.name.clone(),
                transport: s.spec.transport.name(),
                state,
                version,
                server,
                tools: names(tools.iter().map(|t| t.mcp_name.clone()).collect()),
                prompts: names(prompts.iter().map(|p| p.name.clone()).collect()),
                error,
            }]
        })
    }

    /// Authorizes crush with HTTP server `name` (OAuth, through the browser), keeps the token,
    /// and connects the server with it.
    pub(crate) fn login(
        &self,
        name: &str,
        open: &dyn Fn(&str),
        wait: Duration,
    ) -> Result<(), McpError> {
        let s = self.shared.server(name)?;
        let url = s
            .spec
            .transport
            .url()
            .ok_or_else(|| McpError::NoAuth(name.to_string()))?;
        let how = oauth::Login {
            client: &s.spec.oauth_client,
            store: self.shared.inputs.tokens.as_ref(),
            open,
            timeout: s.spec.timeout,
            wait,
            env: &self.shared.inputs.env,
        };
        oauth::login(name, url, &how)?;
        let _c = s.connecting.lock().unwrap_or_else(|e| e.into_inner());
        let old = s.state();
        self.shared.set_state(&s, State::Starting);
        if let State::Ready(l) = old {
            l.close();
        }
        self.shared.connect(&s).map(|_| ())
    }

    /// Closes every connection (stdio servers get their input closed, then are stopped; HTTP
    /// sessions are ended), in parallel.
    pub(crate) fn shutdown(&self) {
        let servers: Vec<Arc<Server>> = std::mem::take(
            &mut *self
                .shared
                .servers
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
        .into_values()
        .collect();
        let handles: Vec<_> = servers
            .into_iter()
            .filter_map(|s| {
                s.removed.store(true, Ordering::SeqCst);
                match s.state() {
                    State::Ready(l) => std::thread::Builder::new()
                        .name("mcp-stop".into())
                        .spawn(move || l.close())
                        .ok(),
                    _ => None,
                }
            })
            .collect();
        for h in handles {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
impl Tool {
    /// A server tool as a listing would give it.
    pub(crate) fn sample(server: &str, name: &str) -> Tool {
        Tool {
            server: server.into(),
            mcp_name: name.into(),
            full_name: format!("mcp_{server}_{name}"),
            description: format!("Tool {name} of {server}"),
            schema: json!({"type": "object", "properties": {}}),
            headers: vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            transport: TransportSpec::Http {
                url: "http://127.0.0.1:1/mcp".into(),
                headers: vec![],
            },
            timeout: Duration::from_secs(1),
            enabled_tools: vec![],
            disabled_tools: vec![],
            disabled: false,
            oauth: false,
            oauth_client: ClientConfig::default(),
            check: Default::default(),
        }
    }

    fn names(t: &[Tool]) -> Vec<&str> {
        t.iter().map(|t| t.full_name.as_str()).collect()
    }

    #[test]
    fn tools_are_checked_named_and_filtered() {
        let warnings = Mutex::new(Vec::new());
        let warn = |m: String| warnings.lock().unwrap().push(m);
        let raw = vec![
            json!({"name": "echo", "description": "Echo", "inputSchema": {"type": "object", "properties": {"t": {"type": "string"}}}}),
            json!({"name": "get-sum", "inputSchema": {"properties": {}}}),
            json!({"name": "bad name", "inputSchema": {"type": "object"}}),
            json!({"name": "arr", "inputSchema": {"type": "array"}}),
            json!({"name": "str", "inputSchema": "object"}),
            json!({"name": "x".repeat(80), "inputSchema": {"type": "object"}}),
        ];
        let tools = checked_tools(&spec("fs"), raw.clone(), false, &warn);
        assert_eq!(names(&tools)[..2], ["mcp_fs_echo", "mcp_fs_get-sum"]);
        assert_eq!(tools[1].schema["type"], "object");
        assert_eq!(tools[1].description, "Tool get-sum of the MCP server fs");
        let long = &tools[2].full_name;
        assert_eq!(long.len(), 64);
        assert!(long.starts_with("mcp_fs_xxx"));
        assert_eq!(long, &full_name("fs", &"x".repeat(80)), "deterministic");
        let w = warnings.lock().unwrap().clone();
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w.iter().all(|m| m.starts_with("MCP server 'fs': tool")));
        assert!(w[0].contains("\"bad name\""));
        assert!(w[1].contains("type \"array\""));

        let mut s = spec("fs");
        s.enabled_tools = vec!["echo".into(), "get-sum".into()];
        s.disabled_tools = vec!["get-sum".into()];
        assert_eq!(
            names(&checked_tools(&s, raw, false, &warn)),
            ["mcp_fs_echo"]
        );
        let bad = checked_tools(&spec("my.server"), vec![json!({"name": "t"})], false, &warn);
        assert!(bad.is_empty());
    }

    #[test]
    fn x_mcp_header_rules() {
        let ok = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "nested": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}}
        }});
        let h = header_params(&ok).unwrap();
        assert!(h.contains(&("Region".to_string(), vec!["region".to_string()])));
        assert!(h.contains(&("N".to_string(), vec!["nested".to_string(), "n".to_string()])));
        assert_eq!(
            header_param(
                &json!({"nested": {"n": 42}}),
                &h.iter().find(|x| x.0 == "N").unwrap().1
            ),
            Some("42".into())
        );
        for bad in [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
        ] {
            assert!(header_params(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn roots_are_file_uris() {
        let inputs = Inputs {
            root: PathBuf::from("/home/u/my project"),
            tokens: Arc::new(NoTokens),
            warn: Arc::new(|_| {}),
            max_message: 1,
            stop_grace: Duration::ZERO,
            env: Default::default(),
        };
        assert_eq!(
            inputs.roots(),
            json!([{"uri": "file:///home/u/my%20project", "name": "my project"}])
        );
    }

    struct NoTokens;
    impl TokenStore for NoTokens {
        fn load(&self, _: &str) -> Option<Value> {
            None
        }
        fn save(&self, _: &str, _: Option<&Value>) {}
    }

    #[test]
    fn a_server_that_cannot_start_is_one_warning_and_a_failed_state() {
        let m = Manager::new(PathBuf::from("/"), Arc::new(NoTokens), Default::default());
        let mut s = spec("gone");
        s.transport = TransportSpec::Stdio(Command {
            command: "/nonexistent/mcp-server".into(),
            args: vec![],
            env: vec![],
            cwd: PathBuf::from("/"),
        });
        let mut off = spec("off");
        off.disabled = true;
        m.set_servers(vec![s, off]);
        m.wait_ready(None);
        let st = m.statuses();
        assert_eq!(st[0].name, "gone");
        assert_eq!(st[0].state, "failed");
        assert!(st[0].error.as_deref().unwrap().contains("cannot start"));
        assert_eq!(st[1].state, "disabled");
        let w = m.take_warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("MCP server 'gone' did not start"));
        assert!(m.tools().is_empty());
        let t = Tool {
            server: "gone".into(),
            mcp_name: "x".into(),
            full_name: "mcp_gone_x".into(),
            description: String::new(),
            schema: json!({}),
            headers: vec![],
        };
        assert!(
            m.call_tool(&t, &json!({}), None)
                .unwrap_err()
                .to_string()
                .contains("not running")
        );
    }
}
