//! A scriptable MCP server for the tests, std only. One core speaks the protocol; it is served
//! over stdio by this test binary itself, re-executed in server mode (the environment variable
//! `CRUSH_TEST_MCP_SERVER` names the script file; see `server_mode`), or over Streamable HTTP and
//! the older HTTP+SSE transport in-process (`McpHttp`), with a fake OAuth authorization server.
//!
//! The script (JSON) says what the server does:
//! - `era`: `legacy` (initialize; default), `modern` (2026-07-28 only) or `dual`;
//! - `version`: what `initialize` answers (default: the version asked for when known);
//! - `tools`: `[{name, description, inputSchema, action, ...}]`, actions: `echo`, `sleep`
//!   (`ms`), `crash`, `image`, `error`, `rpc_error`, `big` (`bytes`), `wrong_id`, `structured`,
//!   `links`, `grow` (adds tool `grown`, announces list_changed), `garbage`, `roots`, `env`;
//! - `resources`, `prompts` (`template` with `{arg}` holes), `instructions`, `page_size`;
//! - `hang_initialize`, `initialize_delay_ms` (a slow start), `garbage_first` (a non-JSON line first), `session` (HTTP session ids),
//!   `http_reply` (`sse` or `json`), `auth` (`{token, expires_in}`: OAuth required), `log` (a
//!   file every received message is appended to, one JSON per line).

use super::http::{Request, read_request};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A one-pixel PNG.
pub(crate) const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

const MODERN: &str = "2026-07-28";
const KNOWN: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

type Sender = Arc<dyn Fn(Value) + Send + Sync>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The protocol, whatever carries it.
pub(crate) struct Core {
    script: Value,
    tools: Mutex<Vec<Value>>,
    file: Option<Mutex<File>>,
    records: Mutex<Vec<Value>>,
    cancelled: Mutex<HashSet<String>>,
    /// The server's own requests waiting for the client's answer.
    waiting: Mutex<HashMap<String, crossbeam_channel::Sender<Value>>>,
    /// The id of an open `subscriptions/listen` and where its notifications go.
    listen: Mutex<Option<(Value, Sender)>>,
    next: AtomicU64,
}

fn result(id: &Value, r: Value, modern: bool) -> Value {
    let mut r = r;
    if modern && r.is_object() && r.get("resultType").is_none() {
        r["resultType"] = json!("complete");
    }
    json!({"jsonrpc": "2.0", "id": id, "result": r})
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

impl Core {
    pub(crate) fn new(script: Value) -> Arc<Core> {
        let file = script["log"].as_str().and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
                .map(Mutex::new)
        });
        let tools = script["tools"].as_array().cloned().unwrap_or_default();
        Arc::new(Core {
            script,
            tools: Mutex::new(tools),
            file,
            records: Mutex::new(Vec::new()),
            cancelled: Mutex::new(HashSet::new()),
            waiting: Mutex::new(HashMap::new()),
            listen: Mutex::new(None),
            next: AtomicU64::new(1),
        })
    }

    pub(crate) fn record(&self, v: &Value) {
        lock(&self.records).push(v.clone());
        if let Some(f) = &self.file {
            let _ = writeln!(lock(f), "{v}");
        }
    }

    /// Every message received (in-process servers).
    pub(crate) fn records(&self) -> Vec<Value> {
        lock(&self.records).clone()
    }

    fn era(&self) -> &str {
        self.script["era"].as_str().unwrap_or("legacy")
    }

    fn capabilities(&self) -> Value {
        json!({"tools": {"listChanged": true}, "resources": {}, "prompts": {"listChanged": true}})
    }

    /// Handles one message from the client; `send` carries what the server sends back.
    pub(crate) fn handle(self: &Arc<Self>, msg: Value, send: Sender) {
        self.record(&msg);
        if let Value::Array(items) = msg {
            for m in items {
                self.handle(m, send.clone());
            }
            return;
        }
        let method = msg["method"].as_str().unwrap_or("").to_string();
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        if method.is_empty() {
            // The client's answer to one of the server's requests.
            if let Some(tx) = lock(&self.waiting).remove(&id.to_string()) {
                let _ = tx.send(msg.clone());
            }
            return;
        }
        if id.is_null() {
            if method == "notifications/cancelled" {
                lock(&self.cancelled).insert(msg["params"]["requestId"].to_string());
            }
            return;
        }
        let params = msg["params"].clone();
        let modern = params["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN;
        let reply = |r: Value| send(result(&id, r, modern));
        match method.as_str() {
            "initialize" => {
                if self.era() == "modern" {
                    return send(error(
                        &id,
                        -32601,
                        "initialize is not supported; this server speaks 2026-07-28",
                    ));
                }
                if self.script["hang_initialize"] == true {
                    return;
                }
                if let Some(ms) = self.script["initialize_delay_ms"].as_u64() {
                    std::thread::sleep(Duration::from_millis(ms));
                }
                let asked = params["protocolVersion"].as_str().unwrap_or("");
                let version =
                    self.script["version"]
                        .as_str()
                        .unwrap_or(if KNOWN.contains(&asked) {
                            asked
                        } else {
                            KNOWN[0]
                        });
                reply(json!({
                    "protocolVersion": version,
                    "capabilities": self.capabilities(),
                    "serverInfo": {"name": "test-mcp", "version": "1.0"},
                    "instructions": self.script["instructions"],
                }))
            }
            "server/discover" => {
                if self.era() == "legacy" {
                    return send(error(&id, -32601, "Method not found"));
                }
                let versions = self.script["supported"]
                    .as_array()
                    .cloned()
                    .unwrap_or_else(|| vec![json!(MODERN)]);
                reply(json!({
                    "supportedVersions": versions,
                    "capabilities": self.capabilities(),
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "test-mcp", "version": "2.0"}},
                    "instructions": self.script["instructions"],
                }))
            }
            "tools/list" => {
                let tools = lock(&self.tools).clone();
                let page = self.script["page_size"].as_u64().unwrap_or(1000) as usize;
                let start: usize = params["cursor"]
                    .as_str()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                let end = (start + page).min(tools.len());
                let mut r = json!({"tools": tools[start.min(end)..end]});
                if end < tools.len() {
                    r["nextCursor"] = json!(end.to_string());
                }
                reply(r)
            }
            "tools/call" => {
                let me = self.clone();
                std::thread::spawn(move || me.call(&id, &params, modern, send));
            }
            "resources/list" => reply(json!({"resources": self.script["resources"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|r| json!({"uri": r["uri"], "name": r["name"], "mimeType": r["mimeType"]}))
                .collect::<Vec<_>>()})),
            "resources/read" => {
                let found = self.script["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|r| r["uri"] == params["uri"])
                    .cloned();
                match found {
                    Some(r) => reply(json!({"contents": [
                        {"uri": r["uri"], "mimeType": r["mimeType"], "text": r["text"]}
                    ]})),
                    None => send(error(&id, -32602, "Resource not found")),
                }
            }
            "prompts/list" => reply(json!({"prompts": self.script["prompts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|p| json!({"name": p["name"], "description": p["description"],
                    "arguments": p["arguments"]}))
                .collect::<Vec<_>>()})),
            "prompts/get" => {
                let found = self.script["prompts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["name"] == params["name"])
                    .cloned();
                match found {
                    Some(p) => {
                        let mut text = p["template"].as_str().unwrap_or("").to_string();
                        if let Some(args) = params["arguments"].as_object() {
                            for (k, v) in args {
                                text = text.replace(&format!("{{{k}}}"), v.as_str().unwrap_or(""));
                            }
                        }
                        reply(json!({"messages": [
                            {"role": "user", "content": {"type": "text", "text": text}}
                        ]}))
                    }
                    None => send(error(&id, -32602, "Prompt not found")),
                }
            }
            "subscriptions/listen" => {
                send(
                    json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                    "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id},
                               "notifications": params["notifications"]}}),
                );
                *lock(&self.listen) = Some((id, send));
            }
            "ping" => reply(json!({})),
            _ => send(error(&id, -32601, "Method not found")),
        }
    }

    /// A server request to the client, waiting (at most 5 s) for its answer.
    fn ask(&self, method: &str, send: &Sender) -> Option<Value> {
        let id = json!(format!("srv-{}", self.next.fetch_add(1, Ordering::Relaxed)));
        let (tx, rx) = crossbeam_channel::bounded(1);
        lock(&self.waiting).insert(id.to_string(), tx);
        send(json!({"jsonrpc": "2.0", "id": id, "method": method}));
        rx.recv_timeout(Duration::from_secs(5)).ok()
    }

    fn call(&self, id: &Value, params: &Value, modern: bool, send: Sender) {
        let name = params["name"].as_str().unwrap_or("");
        let args = params["arguments"].clone();
        let Some(tool) = lock(&self.tools)
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
        else {
            return send(error(id, -32602, &format!("Unknown tool: {name}")));
        };
        let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
        let reply = |r: Value| send(result(id, r, modern));
        match tool["action"].as_str().unwrap_or("echo") {
            "echo" => reply(text(match args["text"].as_str() {
                Some(t) => t.to_string(),
                None => args.to_string(),
            })),
            "sleep" => {
                let ms = args["ms"].as_u64().or(tool["ms"].as_u64()).unwrap_or(1000);
                let end = Instant::now() + Duration::from_millis(ms);
                while Instant::now() < end {
                    if lock(&self.cancelled).contains(&id.to_string()) {
                        self.record(&json!({"event": "cancel observed", "id": id}));
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                reply(text(format!("slept {ms} ms")))
            }
            "crash" => send(json!({"__crash": true})),
            "image" => reply(json!({"content": [
                {"type": "text", "text": "here is the image"},
                {"type": "image", "mimeType": "image/png", "data": PNG}
            ]})),
            "error" => reply(
                json!({"content": [{"type": "text", "text": "the tool failed"}],
                "isError": true}),
            ),
            "rpc_error" => send(error(id, -32000, "the tool exploded")),
            "big" => {
                let n = args["bytes"]
                    .as_u64()
                    .or(tool["bytes"].as_u64())
                    .unwrap_or(1000);
                reply(text("x".repeat(n as usize)))
            }
            "wrong_id" => {
                let wrong = json!(id.as_u64().unwrap_or(0) + 1000);
                send(result(&wrong, text("lost".into()), modern))
            }
            "structured" => {
                let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
                reply(json!({"content": [], "structuredContent": {"sum": sum}}))
            }
            "links" => reply(json!({"content": [
                {"type": "resource_link", "uri": "file:///docs/a.md", "name": "a.md",
                 "description": "the A doc"},
                {"type": "resource", "resource": {"uri": "file:///docs/b.md",
                 "mimeType": "text/markdown", "text": "B body"}}
            ]})),
            "grow" => {
                lock(&self.tools).push(json!({"name": "grown", "description": "A grown tool",
                    "inputSchema": {"type": "object", "properties": {}}, "action": "echo"}));
                let listen = lock(&self.listen).clone();
                match listen {
                    Some((sid, to)) => to(json!({"jsonrpc": "2.0",
                        "method": "notifications/tools/list_changed",
                        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": sid}}})),
                    None => send(json!({"jsonrpc": "2.0",
                        "method": "notifications/tools/list_changed"})),
                }
                // Give the client time to list again before the answer.
                std::thread::sleep(Duration::from_millis(300));
                reply(text("grew".into()))
            }
            "garbage" => {
                send(json!({"__raw": "this line is not JSON"}));
                reply(text("after the garbage".into()))
            }
            "roots" => {
                if modern {
                    match params.get("inputResponses") {
                        Some(r) => reply(text(r["r"]["roots"].to_string())),
                        None => reply(json!({"resultType": "input_required",
                            "inputRequests": {"r": {"method": "roots/list"}},
                            "requestState": "state-1"})),
                    }
                } else {
                    match self.ask("roots/list", &send) {
                        Some(a) => reply(text(a["result"]["roots"].to_string())),
                        None => reply(text("no roots".into())),
                    }
                }
            }
            "env" => reply(text(
                std::env::var(args["name"].as_str().unwrap_or("")).unwrap_or_default(),
            )),
            other => send(error(id, -32601, &format!("unknown action {other}"))),
        }
    }
}

/// The `mcp` entry of a stdio server running `script` (written next to `dir`): this test
/// binary, re-executed in server mode.
pub(crate) fn stdio_server(dir: &Path, name: &str, script: &Value) -> Value {
    let path = dir.join(format!("mcp-{name}.json"));
    std::fs::write(&path, script.to_string()).expect("write the MCP script");
    json!({
        "type": "stdio",
        "command": std::env::current_exe().expect("the test binary").to_string_lossy(),
        "env": {SERVER_ENV: path.to_string_lossy()},
    })
}

/// Reads a log file written by a server (one JSON per line).
pub(crate) fn read_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The variable that puts this binary in stdio server mode (its value: the script file).
pub(crate) const SERVER_ENV: &str = "CRUSH_TEST_MCP_SERVER";
/// The variable that makes this binary a browser: it GETs its argument, following redirects.
pub(crate) const BROWSER_ENV: &str = "CRUSH_TEST_BROWSER";

/// The arguments of this process, read before `main` (std's may not be set up yet).
fn args() -> Vec<String> {
    std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn stdio_main(script: &Path) -> ! {
    let script: Value = std::fs::read_to_string(script)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    let out = Arc::new(Mutex::new(std::io::stdout()));
    if let Some(g) = script["garbage_first"].as_str() {
        let mut o = lock(&out);
        let _ = writeln!(o, "{g}");
        let _ = o.flush();
    }
    let core = Core::new(script);
    let o = out.clone();
    let send: Sender = Arc::new(move |v: Value| {
        if v["__crash"] == true {
            std::process::exit(3);
        }
        let line = match v["__raw"].as_str() {
            Some(raw) => raw.to_string(),
            None => v.to_string(),
        };
        let mut o = lock(&o);
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    });
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            core.handle(v, send.clone());
        }
    }
    std::process::exit(0)
}

fn browser_main() -> ! {
    let Some(url) = args().get(1).cloned() else {
        std::process::exit(2)
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let code = match agent.get(&url).call() {
        Ok(r) if r.status().as_u16() == 200 => 0,
        _ => 1,
    };
    std::process::exit(code)
}

/// Runs before `main`: in server or browser mode this process is that and nothing else (the
/// test harness would print to stdout).
extern "C" fn server_mode() {
    if let Some(script) = std::env::var_os(SERVER_ENV) {
        stdio_main(Path::new(&script));
    }
    if std::env::var_os(BROWSER_ENV).is_some() {
        browser_main();
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static SERVER_MODE: extern "C" fn() = server_mode;

/// The MCP server over HTTP on 127.0.0.1: Streamable HTTP at `/mcp`, HTTP+SSE at `/sse`, and an
/// OAuth authorization server at `/as` when the script has `auth`.
pub(crate) struct McpHttp {
    addr: std::net::SocketAddr,
    pub core: Arc<Core>,
    http: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
}

struct Http {
    core: Arc<Core>,
    base: String,
    sessions: Mutex<HashMap<String, crossbeam_channel::Sender<Value>>>,
    issued: Mutex<Vec<String>>,
    token: Mutex<Option<String>>,
    next: AtomicU64,
}

fn respond(s: &mut TcpStream, status: u16, headers: &[(&str, String)], body: &str) {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-length: {}\r\nconnection: close\r\n",
        super::http::reason(status),
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body.as_bytes());
    let _ = s.flush();
}

fn json_reply(s: &mut TcpStream, status: u16, v: &Value) {
    respond(
        s,
        status,
        &[("content-type", "application/json".into())],
        &v.to_string(),
    );
}

fn query(path: &str, key: &str) -> Option<String> {
    let q = path.split_once('?')?.1;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| decode(v))
    })
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let h = u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap_or(b'?');
                out.push(h);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl McpHttp {
    pub(crate) fn start(script: Value) -> McpHttp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let core = Core::new(script);
        let http = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Http {
            core: core.clone(),
            base: format!("http://{addr}"),
            sessions: Mutex::new(HashMap::new()),
            issued: Mutex::new(Vec::new()),
            token: Mutex::new(None),
            next: AtomicU64::new(1),
        });
        let (h, st) = (http.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = conn else { continue };
                let (sh, h) = (shared.clone(), h.clone());
                std::thread::spawn(move || sh.serve(stream, &h));
            }
        });
        McpHttp {
            addr,
            core,
            http,
            stop,
        }
    }

    /// The Streamable HTTP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The HTTP+SSE endpoint.
    pub(crate) fn sse_url(&self) -> String {
        format!("http://{}/sse", self.addr)
    }

    /// Every HTTP request received, in order.
    pub(crate) fn requests(
        &self,
    ) -> Vec<(String, String, std::collections::BTreeMap<String, String>)> {
        lock(&self.http)
            .iter()
            .map(|r| (r.method.clone(), r.path.clone(), r.headers.clone()))
            .collect()
    }

    /// The bodies of the HTTP requests received, in order.
    pub(crate) fn bodies(&self) -> Vec<String> {
        lock(&self.http)
            .iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    }
}

impl Drop for McpHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

impl Http {
    fn serve(self: Arc<Self>, mut stream: TcpStream, log: &Mutex<Vec<Request>>) {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let Ok(reader) = stream.try_clone() else {
            return;
        };
        let mut r = BufReader::new(reader);
        let Ok(req) = read_request(&mut r, || Ok(())) else {
            return;
        };
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let path = req.path.split('?').next().unwrap_or("").to_string();
        lock(log).push(Request {
            method: req.method.clone(),
            path: req.path.clone(),
            headers: req.headers.clone(),
            body: req.body.clone(),
        });
        let auth = &self.core.script["auth"];
        if auth.is_object() {
            if self.oauth(&mut stream, &req, &path) {
                return;
            }
            let token = lock(&self.token).clone();
            let given = req
                .headers
                .get("authorization")
                .cloned()
                .unwrap_or_default();
            if matches!(path.as_str(), "/mcp" | "/sse" | "/messages")
                && (token.is_none()
                    || Some(given.trim_start_matches("Bearer ").to_string()) != token)
            {
                let www = format!(
                    "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\"",
                    self.base
                );
                return respond(&mut stream, 401, &[("www-authenticate", www)], "");
            }
        }
        match (req.method.as_str(), path.as_str()) {
            ("POST", "/mcp") => self.post(&mut stream, &req, body),
            ("GET", "/mcp") => respond(&mut stream, 405, &[], ""),
            ("DELETE", "/mcp") => respond(&mut stream, 200, &[], ""),
            ("GET", "/sse") => self.sse_stream(stream),
            ("POST", "/messages") => {
                let sid = query(&req.path, "sessionId").unwrap_or_default();
                let tx = lock(&self.sessions).get(&sid).cloned();
                match tx {
                    Some(tx) => {
                        respond(&mut stream, 202, &[], "");
                        let send: Sender = Arc::new(move |v| {
                            let _ = tx.send(v);
                        });
                        self.core.handle(body, send);
                    }
                    None => respond(&mut stream, 404, &[], "no such session"),
                }
            }
            _ => respond(&mut stream, 404, &[], ""),
        }
    }

    /// The fake authorization server; true when it answered.
    fn oauth(&self, s: &mut TcpStream, req: &Request, path: &str) -> bool {
        let base = &self.base;
        let auth = &self.core.script["auth"];
        match (req.method.as_str(), path) {
            ("GET", "/.well-known/oauth-protected-resource/mcp") => json_reply(
                s,
                200,
                &json!({"resource": format!("{base}/mcp"), "authorization_servers": [format!("{base}/as")],
                        "scopes_supported": ["mcp"]}),
            ),
            ("GET", "/.well-known/oauth-authorization-server/as") => json_reply(
                s,
                200,
                &json!({"issuer": format!("{base}/as"),
                        "authorization_endpoint": auth["authorization_endpoint"].as_str()
                            .map_or_else(|| format!("{base}/as/authorize"), str::to_string),
                        "token_endpoint": format!("{base}/as/token"),
                        "registration_endpoint": format!("{base}/as/register"),
                        "code_challenge_methods_supported": ["S256"]}),
            ),
            ("POST", "/as/register") => json_reply(s, 201, &json!({"client_id": "client-1"})),
            ("GET", "/as/authorize") => {
                let ok = query(&req.path, "code_challenge_method").as_deref() == Some("S256")
                    && query(&req.path, "client_id").is_some()
                    && query(&req.path, "code_challenge").is_some();
                let redirect = query(&req.path, "redirect_uri").unwrap_or_default();
                let state = query(&req.path, "state").unwrap_or_default();
                let loc = if ok {
                    format!("{redirect}?code=code-1&state={state}&iss={base}/as")
                } else {
                    format!("{redirect}?error=invalid_request&state={state}")
                };
                respond(s, 302, &[("location", loc)], "");
            }
            ("POST", "/as/token") => {
                let form = String::from_utf8_lossy(&req.body).to_string();
                let field = |k: &str| query(&format!("?{form}"), k).unwrap_or_default();
                let good = match field("grant_type").as_str() {
                    "authorization_code" => {
                        field("code") == "code-1" && !field("code_verifier").is_empty()
                    }
                    "refresh_token" => field("refresh_token") == "refresh-1",
                    _ => false,
                };
                if !good {
                    json_reply(s, 400, &json!({"error": "invalid_grant"}));
                    return true;
                }
                let n = self.next.fetch_add(1, Ordering::Relaxed);
                let token = format!("{}-{n}", auth["token"].as_str().unwrap_or("token"));
                lock(&self.issued).push(token.clone());
                *lock(&self.token) = Some(token.clone());
                json_reply(
                    s,
                    200,
                    &json!({"access_token": token, "token_type": "Bearer",
                            "expires_in": auth["expires_in"].as_i64().unwrap_or(3600),
                            "refresh_token": "refresh-1"}),
                );
            }
            _ => return false,
        }
        true
    }

    fn post(&self, s: &mut TcpStream, req: &Request, body: Value) {
        let legacy = self.core.era() == "legacy";
        let session_on = self.core.script["session"] == true;
        let method = body["method"].as_str().unwrap_or("").to_string();
        let sid = req.headers.get("mcp-session-id").cloned();
        if legacy && session_on && method != "initialize" {
            let known = sid
                .as_ref()
                .is_some_and(|s| lock(&self.sessions).contains_key(s));
            if !known {
                return json_reply(
                    s,
                    400,
                    &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000,
                        "message": "Bad Request: No valid session ID provided"}}),
                );
            }
        }
        let id = body.get("id").cloned().unwrap_or(Value::Null);
        if id.is_null() || method.is_empty() {
            // Handled (and recorded) before the 202: the client sends its next request once it
            // has the answer, and the records must keep that order.
            self.core.handle(body, Arc::new(|_| {}));
            return respond(s, 202, &[], "");
        }
        let (tx, rx) = crossbeam_channel::unbounded::<Value>();
        let send: Sender = Arc::new(move |v| {
            let _ = tx.send(v);
        });
        self.core.handle(body, send);
        let mut headers = Vec::new();
        if method == "initialize" && session_on {
            let new = format!("session-{}", self.next.fetch_add(1, Ordering::Relaxed));
            lock(&self.sessions).insert(new.clone(), crossbeam_channel::unbounded().0);
            headers.push(("mcp-session-id", new));
        }
        let json_mode = self.core.script["http_reply"] == "json";
        if json_mode {
            loop {
                match rx.recv_timeout(Duration::from_secs(30)) {
                    Ok(v) if v["__crash"] == true => {
                        let _ = s.shutdown(Shutdown::Both);
                        return;
                    }
                    Ok(v) if v.get("id") == Some(&id) && v.get("method").is_none() => {
                        headers.push(("content-type", "application/json".into()));
                        return respond(s, 200, &headers, &v.to_string());
                    }
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        }
        let mut head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
                .to_string();
        for (k, v) in &headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        if s.write_all(head.as_bytes()).is_err() {
            return;
        }
        while let Ok(v) = rx.recv_timeout(Duration::from_secs(60)) {
            let answered = v.get("id") == Some(&id) && v.get("method").is_none();
            if !write_event(s, &v) || answered {
                return;
            }
        }
    }

    fn sse_stream(&self, mut s: TcpStream) {
        let sid = format!("sse-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = crossbeam_channel::unbounded::<Value>();
        lock(&self.sessions).insert(sid.clone(), tx);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
             event: endpoint\ndata: /messages?sessionId={sid}\n\n"
        );
        if s.write_all(head.as_bytes())
            .and_then(|_| s.flush())
            .is_err()
        {
            return;
        }
        while let Ok(v) = rx.recv() {
            if !write_event(&mut s, &v) {
                return;
            }
        }
    }
}

/// Writes one message as an SSE event; false when the stream ends (a crash, or the client left).
fn write_event(s: &mut TcpStream, v: &Value) -> bool {
    if v["__crash"] == true {
        let _ = s.shutdown(Shutdown::Both);
        return false;
    }
    let data = match v["__raw"].as_str() {
        Some(raw) => raw.to_string(),
        None => v.to_string(),
    };
    s.write_all(format!("event: message\ndata: {data}\n\n").as_bytes())
        .and_then(|_| s.flush())
        .is_ok()
}

/// A free port on 127.0.0.1 (bound and released: another process could take it, rarely).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Waits until `f` holds, at most `d`.
pub(crate) fn eventually(d: Duration, f: impl Fn() -> bool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// A scratch directory for scripts and logs.
pub(crate) fn scratch(env: &super::TestEnv) -> PathBuf {
    let d = env.root().join("mcp");
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}
