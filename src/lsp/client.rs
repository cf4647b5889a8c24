//! One language server: a child process (through `crate::proc`) that speaks JSON-RPC over its
//! stdin and stdout. A writer thread sends (so a server that stops reading blocks nobody), a
//! reader thread dispatches: answers to our requests, the server's own requests (answered at
//! once), and notifications — above all `textDocument/publishDiagnostics`, kept per file with a
//! sequence number the waiting edit tools watch.
//!
//! Anything wrong on the wire (garbage, a bad `Content-Length`, an oversized message, an exit)
//! ends the connection: every pending request fails at once, the server is stopped and its
//! death is reported once.

use super::text::{self, Encoding};
use super::wire::{self, ReadError};
use super::{ServerSpec, StartError};
use crate::proc;
use crossbeam_channel::{Receiver, Sender};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, UNIX_EPOCH};

/// The largest message accepted from a server.
pub(super) const MAX_MESSAGE: usize = 32 << 20;
/// Files larger than this are not sent to servers.
const MAX_DOCUMENT: u64 = 8 << 20;
/// Diagnostics kept per file.
const MAX_DIAGNOSTICS_PER_FILE: usize = 1000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why a request got no result.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RpcError {
    /// The server answered with an error.
    Server { code: i64, message: String },
    /// No answer in time (the server is then given up as hung).
    Timeout(String),
    /// The server is gone (why).
    Gone(String),
}

impl std::error::Error for RpcError {}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpcError::Server { code, message } => write!(f, "{message} (error {code})"),
            RpcError::Timeout(m) | RpcError::Gone(m) => f.write_str(m),
        }
    }
}

/// One diagnostic as a server published it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Diagnostic {
    /// 0-based, as on the wire.
    pub line: u64,
    pub character: u64,
    /// 1 error, 2 warning, 3 information, 4 hint.
    pub severity: u8,
    pub source: String,
    pub code: String,
    pub message: String,
    pub tags: Vec<u64>,
}

impl Diagnostic {
    fn parse(v: &Value) -> Diagnostic {
        let start = &v["range"]["start"];
        let code = match v.get("code") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        // One line: servers indent continuation lines (pyright with no-break spaces).
        let mut message = v["message"]
            .as_str()
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if message.len() > 2000 {
            let cut = (0..=2000)
                .rev()
                .find(|i| message.is_char_boundary(*i))
                .unwrap_or(0);
            message.truncate(cut);
            message.push('…');
        }
        Diagnostic {
            line: start["line"].as_u64().unwrap_or(0),
            character: start["character"].as_u64().unwrap_or(0),
            // The spec leaves a missing severity to the client: an error.
            severity: v["severity"].as_u64().unwrap_or(1).clamp(1, 4) as u8,
            source: v["source"].as_str().unwrap_or("").to_string(),
            code,
            message,
            tags: v["tags"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default(),
        }
    }
}

/// How a wait for diagnostics went.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Waited {
    /// When the first fresh publish came, from the start of the wait.
    pub first: Option<Duration>,
    /// How long the wait went on after the last publish (the settle window, or less at the
    /// deadline).
    pub after_last: Option<Duration>,
}

/// What a server last published for one file.
#[derive(Clone, Debug)]
pub(crate) struct FileDiagnostics {
    pub path: PathBuf,
    pub items: Vec<Diagnostic>,
    /// The publish sequence number of the last publish that was about the current version of
    /// the file (a publish for an older version is kept but not counted as an answer).
    fresh: u64,
}

#[cfg(test)]
impl FileDiagnostics {
    pub(crate) fn for_tests(path: &Path) -> FileDiagnostics {
        FileDiagnostics {
            path: path.to_path_buf(),
            items: Vec::new(),
            fresh: 0,
        }
    }
}

/// A file the server has open.
#[derive(Clone, Debug)]
struct Doc {
    version: i64,
    /// Modification time and length when last sent.
    stamp: (i64, u64),
    hash: u64,
}

struct State {
    next_id: i64,
    pending: HashMap<i64, Sender<Result<Value, RpcError>>>,
    dead: Option<String>,
    caps: Value,
    server_info: Option<String>,
    encoding: Encoding,
    /// Methods the server registered dynamically (`client/registerCapability`).
    registered: Vec<String>,
    docs: HashMap<String, Doc>,
    /// By path: a server may spell a file's URI its own way.
    diags: HashMap<PathBuf, FileDiagnostics>,
    /// Incremented at each publish.
    seq: u64,
    /// When the last publish arrived.
    published_at: Option<Instant>,
}

struct Shared {
    name: String,
    root: PathBuf,
    settings: Value,
    debug: bool,
    out: Mutex<Option<Sender<Value>>>,
    state: Mutex<State>,
    changed: Condvar,
    /// The last lines of the server's stderr, for the reason of a failure.
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// Set once `initialize` succeeded: only then is a death reported through `on_dead`.
    started: AtomicBool,
    /// Set when crush stops the server: its death is then expected.
    stopping: AtomicBool,
    /// Set when a wait for diagnostics ended (see `warm`).
    waited: AtomicBool,
    on_dead: Box<dyn Fn(&str) + Send + Sync>,
    process: Mutex<Option<proc::Piped>>,
}

/// A running, initialized language server.
pub(crate) struct Client {
    shared: Arc<Shared>,
    timeout: Duration,
}

fn stamp(meta: &std::fs::Metadata) -> (i64, u64) {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64);
    (mtime, meta.len())
}

fn hash(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// The text of a document as sent to servers (None: missing, too large or not a regular file).
fn read_doc(path: &Path) -> Option<(String, (i64, u64))> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_DOCUMENT {
        return None;
    }
    // Opened non-blocking and read up to the limit: the path may have been replaced meanwhile.
    let bytes =
        crate::fsutil::read_regular(path, crate::fsutil::Links::Follow, MAX_DOCUMENT).ok()?;
    Some((String::from_utf8_lossy(&bytes).into_owned(), stamp(&meta)))
}

/// What the client tells a server it can do.
fn client_capabilities() -> Value {
    json!({
        "general": {"positionEncodings": ["utf-8", "utf-16"]},
        "window": {"workDoneProgress": true, "showMessage": {}},
        "workspace": {
            "configuration": true,
            "workspaceFolders": true,
            "didChangeConfiguration": {"dynamicRegistration": true},
            "didChangeWatchedFiles": {"dynamicRegistration": false},
            "symbol": {"dynamicRegistration": false},
            "workspaceEdit": {"documentChanges": true, "resourceOperations": []},
            "applyEdit": false
        },
        "textDocument": {
            "synchronization": {"dynamicRegistration": true, "didSave": true},
            "publishDiagnostics": {"versionSupport": true, "tagSupport": {"valueSet": [1, 2]}},
            "definition": {"linkSupport": true},
            "references": {},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
            "rename": {"prepareSupport": false},
            "callHierarchy": {}
        }
    })
}

impl Shared {
    fn send(&self, msg: Value) -> bool {
        match lock(&self.out).as_ref() {
            Some(tx) => tx.send(msg).is_ok(),
            None => false,
        }
    }

    fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Ends the connection: pending requests fail with `why`, the death is reported once (when
    /// it was not asked for), and the process is stopped.
    fn die(&self, why: &str) {
        let mut why = why.to_string();
        if !self.stopping.load(Ordering::SeqCst)
            && let Some(last) = lock(&self.stderr).back()
        {
            why.push_str(&format!(" (its last words on stderr: {last})"));
        }
        let pending = {
            let mut st = lock(&self.state);
            if st.dead.is_some() {
                return;
            }
            st.dead = Some(why.clone());
            std::mem::take(&mut st.pending)
        };
        for (_, tx) in pending {
            let _ = tx.send(Err(RpcError::Gone(why.clone())));
        }
        self.changed.notify_all();
        *lock(&self.out) = None;
        if self.started.load(Ordering::SeqCst) && !self.stopping.load(Ordering::SeqCst) {
            (self.on_dead)(&why);
        }
        if let Some(mut p) = lock(&self.process).take() {
            // Not on this thread: the reader must not wait for a kill grace.
            let _ = std::thread::Builder::new()
                .name("lsp-stop".into())
                .spawn(move || {
                    p.stop(Duration::from_millis(500));
                });
        }
    }

    /// The answer to a request the server sent.
    fn answer(&self, method: &str, params: &Value) -> Result<Value, (i64, String)> {
        match method {
            "workspace/configuration" => {
                let items = params["items"].as_array().cloned().unwrap_or_default();
                Ok(Value::Array(
                    items
                        .iter()
                        .map(|it| match it["section"].as_str() {
                            None | Some("") => self.settings.clone(),
                            Some(section) => section
                                .split('.')
                                .try_fold(&self.settings, |v, k| v.get(k))
                                .cloned()
                                .unwrap_or(Value::Null),
                        })
                        .collect(),
                ))
            }
            "client/registerCapability" => {
                let mut st = lock(&self.state);
                for r in params["registrations"].as_array().into_iter().flatten() {
                    if let Some(m) = r["method"].as_str() {
                        st.registered.push(m.to_string());
                    }
                }
                Ok(Value::Null)
            }
            "client/unregisterCapability" => {
                let mut st = lock(&self.state);
                for r in params["unregisterations"].as_array().into_iter().flatten() {
                    if let Some(m) = r["method"].as_str()
                        && let Some(i) = st.registered.iter().position(|x| x == m)
                    {
                        st.registered.remove(i);
                    }
                }
                Ok(Value::Null)
            }
            "workspace/workspaceFolders" => Ok(json!([{
                "uri": text::uri(&self.root),
                "name": self.root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            }])),
            "workspace/applyEdit" => Ok(json!({
                "applied": false,
                "failureReason": "crush changes files only through its own tools",
            })),
            "window/workDoneProgress/create"
            | "window/showMessageRequest"
            | "window/showDocument"
            | "workspace/diagnostic/refresh"
            | "workspace/semanticTokens/refresh"
            | "workspace/inlayHint/refresh"
            | "workspace/inlineValue/refresh"
            | "workspace/codeLens/refresh" => Ok(Value::Null),
            _ => Err((-32601, format!("method not found: {method}"))),
        }
    }

    fn publish(&self, params: &Value) {
        let Some(uri) = params["uri"].as_str() else {
            return;
        };
        let Some(path) = text::path_of(uri) else {
            return;
        };
        let mut items: Vec<Diagnostic> = params["diagnostics"]
            .as_array()
            .map(|a| a.iter().map(Diagnostic::parse).collect())
            .unwrap_or_default();
        items.truncate(MAX_DIAGNOSTICS_PER_FILE);
        let mut st = lock(&self.state);
        st.seq += 1;
        st.published_at = Some(Instant::now());
        let seq = st.seq;
        let fresh = match (params["version"].as_i64(), st.docs.get(&text::uri(&path))) {
            (Some(v), Some(doc)) => v >= doc.version,
            _ => true,
        };
        let e = st
            .diags
            .entry(path.clone())
            .or_insert_with(|| FileDiagnostics {
                path,
                items: Vec::new(),
                fresh: 0,
            });
        e.items = items;
        if fresh {
            e.fresh = seq;
        }
        drop(st);
        self.changed.notify_all();
    }

    fn dispatch(&self, msg: Value) {
        let id = msg.get("id").cloned();
        match (msg.get("method").and_then(Value::as_str), id) {
            (Some(method), Some(id)) => {
                let reply = match self.answer(method, &msg["params"]) {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err((code, message)) => json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": code, "message": message}}),
                };
                self.send(reply);
            }
            (Some(method), None) => match method {
                "textDocument/publishDiagnostics" => self.publish(&msg["params"]),
                "window/logMessage" | "window/showMessage" if self.debug => {
                    crate::log::debug(&format!(
                        "lsp {}: {}",
                        self.name,
                        msg["params"]["message"].as_str().unwrap_or("")
                    ));
                }
                _ => {}
            },
            (None, Some(id)) => {
                let Some(id) = id.as_i64() else { return };
                let Some(tx) = lock(&self.state).pending.remove(&id) else {
                    return;
                };
                let reply = match msg.get("error") {
                    Some(e) if !e.is_null() => Err(RpcError::Server {
                        code: e["code"].as_i64().unwrap_or(0),
                        message: e["message"].as_str().unwrap_or("error").to_string(),
                    }),
                    _ => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                };
                let _ = tx.send(reply);
            }
            (None, None) => {}
        }
    }
}

fn read_loop(shared: Arc<Shared>, stdout: std::io::PipeReader) {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    let why = loop {
        match wire::read_message(&mut r, MAX_MESSAGE) {
            Ok(body) => match serde_json::from_slice::<Value>(&body) {
                Ok(msg) => shared.dispatch(msg),
                Err(e) => break format!("sent a message that is not JSON ({e})"),
            },
            Err(ReadError::Eof) => break exit_reason(&shared),
            Err(ReadError::Bad(m)) => break m,
            // A server that dies mid-write leaves half a message: say how it ended too.
            Err(ReadError::Cut(m)) => break format!("{} ({m})", exit_reason(&shared)),
        }
    };
    shared.die(&why);
}

/// How the server ended, once its output closed: its exit code or signal when it exits soon,
/// else it is stopped.
fn exit_reason(shared: &Shared) -> String {
    let Some(mut p) = lock(&shared.process).take() else {
        return "exited".into();
    };
    let end = Instant::now() + Duration::from_millis(500);
    while p.running() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    let exited = !p.running();
    let status = p.stop(Duration::from_millis(200));
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) if exited && s.code().is_some() => {
            format!("exited with code {}", s.code().unwrap_or(0))
        }
        Some(s) if exited && s.signal().is_some() => {
            format!("exited, killed by signal {}", s.signal().unwrap_or(0))
        }
        _ if exited => "exited".into(),
        _ => "closed its output (it was stopped)".into(),
    }
}

fn write_loop(shared: Arc<Shared>, rx: Receiver<Value>, mut stdin: std::io::PipeWriter) {
    for msg in rx {
        if let Err(e) = wire::write_message(&mut stdin, &msg) {
            shared.die(&format!("stopped reading its input ({e})"));
            return;
        }
    }
}

impl Client {
    /// Starts the server of `spec` in `root` and initializes it (bounded by the spec's timeout).
    /// `on_dead` is called once if the server dies after that, unless `shutdown` stopped it.
    pub(crate) fn start(
        spec: &ServerSpec,
        root: &Path,
        debug: bool,
        on_dead: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Result<Client, StartError> {
        let mut argv = vec![spec.command.clone()];
        argv.extend(spec.args.iter().cloned());
        let mut ps = proc::Spec::exec(argv, root);
        ps.env = spec.env.clone();
        let stderr: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let (lines, name) = (stderr.clone(), spec.name.clone());
        let mut process = proc::spawn_piped(
            &ps,
            Box::new(move |line| {
                if debug {
                    crate::log::debug(&format!("lsp {name} stderr: {line}"));
                }
                let mut l = lock(&lines);
                if l.len() == 5 {
                    l.pop_front();
                }
                l.push_back(line.chars().take(300).collect());
            }),
        )
        .map_err(|source| StartError::Spawn {
            command: spec.command.clone(),
            source,
        })?;
        let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
            return Err(StartError::NoPipes(spec.command.clone()));
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        let shared = Arc::new(Shared {
            name: spec.name.clone(),
            root: root.to_path_buf(),
            settings: spec.options.clone(),
            debug,
            out: Mutex::new(Some(tx)),
            state: Mutex::new(State {
                next_id: 1,
                pending: HashMap::new(),
                dead: None,
                caps: Value::Null,
                server_info: None,
                encoding: Encoding::Utf16,
                registered: Vec::new(),
                docs: HashMap::new(),
                diags: HashMap::new(),
                seq: 0,
                published_at: None,
            }),
            changed: Condvar::new(),
            stderr,
            started: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            waited: AtomicBool::new(false),
            on_dead,
            process: Mutex::new(Some(process)),
        });
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map(|_| ())
                .map_err(StartError::Thread)
        };
        let (s1, s2) = (shared.clone(), shared.clone());
        let client = Client {
            shared,
            timeout: spec.timeout,
        };
        let started = spawn("lsp-write", Box::new(move || write_loop(s1, rx, stdin)))
            .and_then(|_| spawn("lsp-read", Box::new(move || read_loop(s2, stdout))));
        if let Err(e) = started {
            client.kill();
            return Err(e);
        }
        match client.initialize(spec, root) {
            Ok(()) => {
                client.shared.started.store(true, Ordering::SeqCst);
                Ok(client)
            }
            Err(e) => {
                client.kill();
                Err(e)
            }
        }
    }

    fn initialize(&self, spec: &ServerSpec, root: &Path) -> Result<(), StartError> {
        let root_uri = text::uri(root);
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let params = json!({
            "processId": std::process::id(),
            "clientInfo": {"name": "crush", "version": env!("CARGO_PKG_VERSION")},
            "rootUri": root_uri,
            "rootPath": root.to_string_lossy(),
            "workspaceFolders": [{"uri": root_uri, "name": name}],
            "initializationOptions": spec.init_options,
            "capabilities": client_capabilities(),
        });
        let result = self
            .request("initialize", params)
            .map_err(StartError::Initialize)?;
        {
            let mut st = lock(&self.shared.state);
            st.caps = result["capabilities"].clone();
            st.encoding = Encoding::from_capabilities(&st.caps);
            st.server_info =
                result["serverInfo"]["name"].as_str().map(
                    |n| match result["serverInfo"]["version"].as_str() {
                        Some(v) => format!("{n} {v}"),
                        None => n.to_string(),
                    },
                );
        }
        self.shared.notify("initialized", json!({}));
        if !spec.options.is_null() {
            self.shared.notify(
                "workspace/didChangeConfiguration",
                json!({"settings": spec.options}),
            );
        }
        Ok(())
    }

    /// Sends a request and waits for its answer, bounded by the server's timeout. A server
    /// that does not answer in time is given up as hung.
    pub(crate) fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let id = {
            let mut st = lock(&self.shared.state);
            if let Some(why) = &st.dead {
                return Err(RpcError::Gone(why.clone()));
            }
            let id = st.next_id;
            st.next_id += 1;
            st.pending.insert(id, tx);
            id
        };
        let sent = self
            .shared
            .send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        if !sent {
            lock(&self.shared.state).pending.remove(&id);
            return Err(RpcError::Gone(
                self.dead().unwrap_or_else(|| "stopped".into()),
            ));
        }
        match rx.recv_timeout(self.timeout) {
            Ok(r) => r,
            Err(_) => {
                lock(&self.shared.state).pending.remove(&id);
                let why = format!(
                    "did not answer {method} within {:.1}s",
                    self.timeout.as_secs_f64()
                );
                self.shared.die(&why);
                Err(RpcError::Timeout(why))
            }
        }
    }

    /// Why the server is gone (None while it runs).
    pub(crate) fn dead(&self) -> Option<String> {
        lock(&self.shared.state).dead.clone()
    }

    pub(crate) fn name(&self) -> &str {
        &self.shared.name
    }

    pub(crate) fn root(&self) -> &Path {
        &self.shared.root
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The server's name and version as it gave them.
    pub(crate) fn server_info(&self) -> Option<String> {
        lock(&self.shared.state).server_info.clone()
    }

    pub(crate) fn encoding(&self) -> Encoding {
        lock(&self.shared.state).encoding
    }

    /// Whether the server offers `capability` (e.g. `referencesProvider`) or registered
    /// `method` dynamically.
    pub(crate) fn supports(&self, capability: &str, method: &str) -> bool {
        let st = lock(&self.shared.state);
        let c = &st.caps[capability];
        !(c.is_null() || *c == Value::Bool(false)) || st.registered.iter().any(|m| m == method)
    }

    /// Opens `path` (didOpen) unless it is open already.
    pub(crate) fn open(&self, path: &Path) {
        let uri = text::uri(path);
        let mut st = lock(&self.shared.state);
        if st.dead.is_some() || st.docs.contains_key(&uri) {
            return;
        }
        let Some((content, stamp)) = read_doc(path) else {
            return;
        };
        st.docs.insert(
            uri.clone(),
            Doc {
                version: 1,
                stamp,
                hash: hash(&content),
            },
        );
        // Sent under the lock, so a change queued by another thread follows the open.
        self.shared.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": text::language_id(path),
                "version": 1, "text": content}}),
        );
    }

    /// Tells the server `path` changed on disk (didChange with the whole text, then didSave;
    /// didOpen when it was not open; didClose when it is gone). Returns the publish sequence
    /// number to wait past for fresh diagnostics.
    pub(crate) fn sync(&self, path: &Path) -> u64 {
        let uri = text::uri(path);
        let mut st = lock(&self.shared.state);
        let mark = st.seq;
        if st.dead.is_some() {
            return mark;
        }
        let Some((content, stamp)) = read_doc(path) else {
            if st.docs.remove(&uri).is_some() {
                st.diags.remove(path);
                self.shared.notify(
                    "textDocument/didClose",
                    json!({"textDocument": {"uri": uri}}),
                );
            }
            return mark;
        };
        let h = hash(&content);
        match st.docs.get_mut(&uri) {
            Some(doc) => {
                doc.version += 1;
                doc.stamp = stamp;
                doc.hash = h;
                let version = doc.version;
                self.shared.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": uri, "version": version},
                        "contentChanges": [{"text": content}]}),
                );
                let mut save = json!({"textDocument": {"uri": uri}});
                if st.caps["textDocumentSync"]["save"]["includeText"] == true {
                    save["text"] = json!(content);
                }
                self.shared.notify("textDocument/didSave", save);
            }
            None => {
                st.docs.insert(
                    uri.clone(),
                    Doc {
                        version: 1,
                        stamp,
                        hash: h,
                    },
                );
                self.shared.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": uri, "languageId": text::language_id(path),
                        "version": 1, "text": content}}),
                );
            }
        }
        mark
    }

    /// Re-syncs the open files that changed on disk since they were sent (after a shell
    /// command). Returns how many were sent again.
    pub(crate) fn resync(&self) -> usize {
        let open: Vec<(String, (i64, u64), u64)> = lock(&self.shared.state)
            .docs
            .iter()
            .map(|(u, d)| (u.clone(), d.stamp, d.hash))
            .collect();
        let mut n = 0;
        for (uri, stamp_then, hash_then) in open {
            let Some(path) = text::path_of(&uri) else {
                continue;
            };
            let now = std::fs::metadata(&path).ok().map(|m| stamp(&m));
            if now == Some(stamp_then) {
                continue;
            }
            let same = now.is_some() && read_doc(&path).is_some_and(|(c, _)| hash(&c) == hash_then);
            if same {
                if let Some(d) = lock(&self.shared.state).docs.get_mut(&uri)
                    && let Some(s) = now
                {
                    d.stamp = s;
                }
                continue;
            }
            self.sync(&path);
            n += 1;
        }
        n
    }

    /// The files the server has open.
    pub(crate) fn open_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = lock(&self.shared.state)
            .docs
            .keys()
            .filter_map(|u| text::path_of(u))
            .collect();
        v.sort();
        v
    }

    /// Whether the server is past its start-up work: it has published diagnostics, or a wait
    /// for them already ended. Until then (a server indexing the project), an edit may wait up
    /// to the server's timeout for the first publish.
    pub(crate) fn warm(&self) -> bool {
        self.shared.waited.load(Ordering::SeqCst) || lock(&self.shared.state).seq > 0
    }

    /// The publish sequence number now (to wait past with `wait_diagnostics`).
    pub(crate) fn sync_marker(&self) -> u64 {
        lock(&self.shared.state).seq
    }

    /// Waits for the server's diagnostics after `mark` (see `sync`): until a fresh publish for
    /// `path` (for any file when None) arrives, at the latest at `first`, then until no publish
    /// for any file came for `settle`; never past `deadline`, nor once `cancel` is set.
    pub(crate) fn wait_diagnostics(
        &self,
        path: Option<&Path>,
        mark: u64,
        first: Instant,
        settle: Duration,
        deadline: Instant,
        cancel: &AtomicBool,
    ) -> Waited {
        let start = Instant::now();
        let mut st = lock(&self.shared.state);
        let mut waited = Waited::default();
        // The sequence number and arrival of the last publish seen, once a fresh one came.
        let mut last: Option<(u64, Instant)> = None;
        loop {
            let now = Instant::now();
            if st.dead.is_some() || cancel.load(Ordering::Relaxed) {
                return waited;
            }
            let until = match last {
                None => {
                    let answered = match path {
                        Some(p) => st.diags.get(p).is_some_and(|d| d.fresh > mark),
                        None => st.seq > mark,
                    };
                    if answered {
                        let at = st.published_at.unwrap_or(now);
                        waited.first = Some(at.saturating_duration_since(start));
                        last = Some((st.seq, at));
                        continue;
                    }
                    first.min(deadline)
                }
                Some((seq, at)) => {
                    if st.seq != seq {
                        last = Some((st.seq, st.published_at.unwrap_or(now)));
                        continue;
                    }
                    waited.after_last = Some(now.saturating_duration_since(at));
                    (at + settle).min(deadline)
                }
            };
            if now >= until {
                self.shared.waited.store(true, Ordering::SeqCst);
                return waited;
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, (until - now).min(super::CANCEL_POLL))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Every file's last published diagnostics.
    pub(crate) fn diagnostics(&self) -> Vec<FileDiagnostics> {
        let mut v: Vec<FileDiagnostics> =
            lock(&self.shared.state).diags.values().cloned().collect();
        v.sort_by(|a, b| a.path.cmp(&b.path));
        v
    }

    /// Stops the server politely (`shutdown`, `exit`), then its process group, all within
    /// `bound`.
    pub(crate) fn shutdown(&self, bound: Duration) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let end = Instant::now() + bound;
        if self.dead().is_none() {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let id = {
                let mut st = lock(&self.shared.state);
                let id = st.next_id;
                st.next_id += 1;
                st.pending.insert(id, tx);
                id
            };
            self.shared
                .send(json!({"jsonrpc": "2.0", "id": id, "method": "shutdown", "params": null}));
            if rx.recv_deadline(end).is_ok() {
                self.shared.notify("exit", Value::Null);
            }
        }
        *lock(&self.shared.out) = None;
        let process = lock(&self.shared.process).take();
        if let Some(mut p) = process {
            while p.running() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
            p.stop(Duration::from_millis(200));
        }
        self.shared.die("stopped");
    }

    /// Stops the server at once.
    pub(crate) fn kill(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.die("stopped");
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.kill();
    }
}
