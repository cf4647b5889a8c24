//! A scriptable language server for the tests, std only: this test binary re-executed with
//! `CRUSH_TEST_LSP_SERVER` naming a script file (see `server_mode`).
//!
//! It speaks a toy language, `.fk`: `def NAME` ... `end` defines a function, `call NAME` calls
//! one. A line with `BAD` is an error ("BAD is not allowed", source `fakecheck`, code `E1`), a
//! line with `WARN` a warning, a `call` of a function defined nowhere an error (`E2`). Every
//! didOpen, didChange and didSave makes it publish the diagnostics of every `.fk` file under its
//! root (open files from their text, the others from disk). It answers definition, references,
//! documentSymbol, workspace/symbol, rename and the call hierarchy.
//!
//! The script (JSON):
//! - `log`: a file every received message is appended to (one JSON per line);
//! - `delay_ms`: wait before publishing; `empty_first`: publish `[]` first, then the results;
//! - `hang_initialize`: never answer `initialize`;
//! - `publish_on_start`: publish every file's diagnostics after `initialized` too (as servers
//!   that check the whole workspace do);
//! - `fault`: `{"on": METHOD, "do": "crash" | "half" | "garbage" | "bad_length" | "huge" | "hang"}`:
//!   what happens when METHOD arrives (exit 3; a line that is not LSP; a bad Content-Length; a
//!   100 MB message; silence);
//! - `ask`: `[{method, params}]` requests sent to the client after `initialized` (the answers
//!   land in the log like every other message);
//! - `capabilities`: replaces the capabilities it advertises.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The variable that puts this binary in language server mode (its value: the script file).
pub(crate) const SERVER_ENV: &str = "CRUSH_TEST_LSP_SERVER";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `lsp` entry of a server running `script` (written into `dir`): this test binary.
pub(crate) fn entry(dir: &Path, name: &str, script: &Value) -> Value {
    let path = dir.join(format!("lsp-{name}.json"));
    std::fs::write(&path, script.to_string()).expect("write the LSP script");
    json!({
        "command": std::env::current_exe().expect("the test binary").to_string_lossy(),
        "env": {SERVER_ENV: path.to_string_lossy()},
        "filetypes": ["fk"],
        "timeout": 5,
    })
}

/// The messages a server logged (one JSON per line).
pub(crate) fn read_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The methods in a log, in order.
pub(crate) fn methods(log: &[Value]) -> Vec<String> {
    log.iter()
        .filter_map(|m| m["method"].as_str().map(str::to_string))
        .collect()
}

fn uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn path_of(uri: &str) -> PathBuf {
    let rest = uri.strip_prefix("file://").unwrap_or(uri).as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        if rest[i] == b'%' && i + 3 <= rest.len() {
            let hex = std::str::from_utf8(&rest[i + 1..i + 3]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(rest[i]);
        i += 1;
    }
    PathBuf::from(String::from_utf8_lossy(&out).into_owned())
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// UTF-16 column of byte `b` in `line`.
fn col(line: &str, b: usize) -> usize {
    line[..b].encode_utf16().count()
}

fn range(l1: usize, c1: usize, l2: usize, c2: usize) -> Value {
    json!({"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}})
}

/// Whole-word occurrences of `word` in `text`: (line, byte).
fn occurrences(text: &str, word: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(at) = line[from..].find(word) {
            let s = from + at;
            let e = s + word.len();
            let before = line[..s].chars().next_back().is_some_and(is_word);
            let after = line[e..].chars().next().is_some_and(is_word);
            if !before && !after {
                out.push((i, s));
            }
            from = e;
        }
    }
    out
}

/// A function of the toy language.
struct Def {
    name: String,
    path: PathBuf,
    line: usize,
    end: usize,
    end_len: usize,
    calls: Vec<(String, usize, usize)>,
}

fn defs_of(path: &Path, text: &str) -> Vec<Def> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(name) = lines[i].trim_start().strip_prefix("def ") {
            let start = i;
            let mut calls = Vec::new();
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim() != "end" {
                if let Some(c) = lines[j].trim_start().strip_prefix("call ") {
                    let b = lines[j].find("call ").unwrap_or(0) + 5;
                    calls.push((c.trim().to_string(), j, b));
                }
                j += 1;
            }
            let end = j.min(lines.len().saturating_sub(1));
            out.push(Def {
                name: name.trim().to_string(),
                path: path.to_path_buf(),
                line: start,
                end,
                end_len: lines.get(end).map_or(0, |l| l.encode_utf16().count()),
                calls,
            });
            i = j;
        }
        i += 1;
    }
    out
}

struct Server {
    script: Value,
    out: Arc<Mutex<std::io::Stdout>>,
    log: Option<Mutex<std::fs::File>>,
    root: Mutex<PathBuf>,
    docs: Mutex<HashMap<String, (i64, String)>>,
}

impl Server {
    fn send(&self, v: &Value) {
        let body = v.to_string();
        let mut o = lock(&self.out);
        let _ = write!(o, "Content-Length: {}\r\n\r\n{body}", body.len());
        let _ = o.flush();
    }

    fn raw(&self, bytes: &[u8]) {
        let mut o = lock(&self.out);
        let _ = o.write_all(bytes);
        let _ = o.flush();
    }

    fn reply(&self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// Every `.fk` file under the root, with its text (open files from the client).
    fn files(&self) -> Vec<(PathBuf, String)> {
        let root = lock(&self.root).clone();
        let docs = lock(&self.docs);
        let mut out: Vec<(PathBuf, String)> = Vec::new();
        let mut stack = vec![root];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                if p.is_dir() {
                    stack.push(p);
                } else if name.ends_with(".fk") {
                    let text = match docs.get(&uri(&p)) {
                        Some((_, t)) => t.clone(),
                        None => std::fs::read_to_string(&p).unwrap_or_default(),
                    };
                    out.push((p, text));
                }
            }
        }
        for (u, (_, t)) in docs.iter() {
            let p = path_of(u);
            if !out.iter().any(|(q, _)| *q == p) {
                out.push((p, t.clone()));
            }
        }
        out.sort();
        out
    }

    fn text_of(&self, uri_s: &str) -> String {
        match lock(&self.docs).get(uri_s) {
            Some((_, t)) => t.clone(),
            None => std::fs::read_to_string(path_of(uri_s)).unwrap_or_default(),
        }
    }

    fn word_at(&self, params: &Value) -> Option<String> {
        let text = self.text_of(params["textDocument"]["uri"].as_str()?);
        let line = text
            .lines()
            .nth(params["position"]["line"].as_u64()? as usize)?;
        let want = params["position"]["character"].as_u64()? as usize;
        let mut units = 0;
        let mut at = line.len();
        for (i, c) in line.char_indices() {
            if units >= want {
                at = i;
                break;
            }
            units += c.len_utf16();
        }
        let start = line[..at]
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_word(*c))
            .last()
            .map_or(at, |(i, _)| i);
        let end = line[at..]
            .char_indices()
            .find(|(_, c)| !is_word(*c))
            .map_or(line.len(), |(i, _)| at + i);
        (start < end).then(|| line[start..end].to_string())
    }

    fn all_defs(&self) -> Vec<Def> {
        self.files()
            .iter()
            .flat_map(|(p, t)| defs_of(p, t))
            .collect()
    }

    fn diagnostics(&self, text: &str, defined: &[String]) -> Vec<Value> {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if let Some(b) = line.find("BAD") {
                out.push(json!({"range": range(i, col(line, b), i, col(line, b) + 3),
                    "severity": 1, "source": "fakecheck", "code": "E1",
                    "message": "BAD is not allowed"}));
            }
            if let Some(b) = line.find("WARN") {
                out.push(json!({"range": range(i, col(line, b), i, col(line, b) + 4),
                    "severity": 2, "source": "fakecheck", "message": "WARN is discouraged"}));
            }
            if let Some(name) = line.trim_start().strip_prefix("call ") {
                let name = name.trim();
                if !defined.iter().any(|d| d == name) {
                    let b = line.find(name).unwrap_or(0);
                    out.push(
                        json!({"range": range(i, col(line, b), i, col(line, b) + name.len()),
                        "severity": 1, "source": "fakecheck", "code": "E2",
                        "message": format!("undefined: {name}")}),
                    );
                }
            }
        }
        out
    }

    fn publish_all(&self) {
        let files = self.files();
        let defined: Vec<String> = files
            .iter()
            .flat_map(|(p, t)| defs_of(p, t))
            .map(|d| d.name)
            .collect();
        let docs = lock(&self.docs).clone();
        for (p, text) in files {
            let u = uri(&p);
            let mut params = json!({"uri": u, "diagnostics": self.diagnostics(&text, &defined)});
            if let Some((v, _)) = docs.get(&u) {
                params["version"] = json!(v);
            }
            self.send(
                &json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                "params": params}),
            );
        }
    }

    fn changed(self: &Arc<Self>) {
        let delay = self.script["delay_ms"].as_u64().unwrap_or(0);
        let empty_first = self.script["empty_first"] == true;
        let s = self.clone();
        std::thread::spawn(move || {
            if empty_first {
                for (p, _) in s.files() {
                    s.send(
                        &json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                        "params": {"uri": uri(&p), "diagnostics": []}}),
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(delay));
            s.publish_all();
        });
    }

    fn item(d: &Def) -> Value {
        json!({"name": d.name, "kind": 12, "uri": uri(&d.path),
            "range": range(d.line, 0, d.end, d.end_len),
            "selectionRange": range(d.line, 4, d.line, 4 + d.name.len())})
    }

    fn fault(&self, method: &str) {
        let f = &self.script["fault"];
        if f["on"].as_str() != Some(method) {
            return;
        }
        match f["do"].as_str().unwrap_or("") {
            "crash" => std::process::exit(3),
            "half" => {
                self.raw(b"Content-Length: 50\r\n\r\n{\"jsonrpc\"");
                std::process::exit(3)
            }
            "garbage" => self.raw(b"this is not LSP at all\r\n\r\n"),
            "bad_length" => self.raw(b"Content-Length: twelve\r\n\r\n{}"),
            "huge" => {
                self.raw(b"Content-Length: 104857600\r\n\r\n");
                let chunk = vec![b' '; 1 << 20];
                for _ in 0..100 {
                    let mut o = lock(&self.out);
                    if o.write_all(&chunk).is_err() {
                        std::process::exit(0);
                    }
                }
            }
            "hang" => std::thread::sleep(Duration::from_secs(3600)),
            _ => {}
        }
    }

    fn handle(self: &Arc<Self>, msg: Value) {
        let method = msg["method"].as_str().unwrap_or("").to_string();
        let id = msg.get("id").cloned();
        let p = &msg["params"];
        self.fault(&method);
        match method.as_str() {
            "initialize" => {
                if let Some(r) = p["rootUri"].as_str() {
                    *lock(&self.root) = path_of(r);
                }
                if self.script["hang_initialize"] == true {
                    return;
                }
                let caps = match self.script.get("capabilities") {
                    Some(c) => c.clone(),
                    None => json!({
                        "textDocumentSync": {"openClose": true, "change": 1, "save": true},
                        "definitionProvider": true, "referencesProvider": true,
                        "documentSymbolProvider": true, "workspaceSymbolProvider": true,
                        "renameProvider": true, "callHierarchyProvider": true,
                    }),
                };
                if let Some(id) = &id {
                    self.reply(
                        id,
                        json!({"capabilities": caps,
                        "serverInfo": {"name": "fake-lsp", "version": "1.0"}}),
                    );
                }
            }
            "initialized" => {
                if self.script["publish_on_start"] == true {
                    self.changed();
                }
                for (i, a) in self.script["ask"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    self.send(&json!({"jsonrpc": "2.0", "id": format!("ask-{i}"),
                        "method": a["method"], "params": a["params"]}));
                }
            }
            "textDocument/didOpen" => {
                let d = &p["textDocument"];
                lock(&self.docs).insert(
                    d["uri"].as_str().unwrap_or("").to_string(),
                    (
                        d["version"].as_i64().unwrap_or(0),
                        d["text"].as_str().unwrap_or("").to_string(),
                    ),
                );
                self.changed();
            }
            "textDocument/didChange" => {
                let d = &p["textDocument"];
                let text = p["contentChanges"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                lock(&self.docs).insert(
                    d["uri"].as_str().unwrap_or("").to_string(),
                    (d["version"].as_i64().unwrap_or(0), text),
                );
                self.changed();
            }
            "textDocument/didClose" => {
                lock(&self.docs).remove(p["textDocument"]["uri"].as_str().unwrap_or(""));
            }
            "textDocument/didSave" => self.changed(),
            "shutdown" => {
                if let Some(id) = &id {
                    self.reply(id, Value::Null);
                }
            }
            "exit" => std::process::exit(0),
            "textDocument/definition" => {
                let word = self.word_at(p).unwrap_or_default();
                let r = self
                    .all_defs()
                    .iter()
                    .find(|d| d.name == word)
                    .map(|d| {
                        json!([{"uri": uri(&d.path),
                        "range": range(d.line, 4, d.line, 4 + d.name.len())}])
                    })
                    .unwrap_or(Value::Null);
                if let Some(id) = &id {
                    self.reply(id, r);
                }
            }
            "textDocument/references" => {
                let word = self.word_at(p).unwrap_or_default();
                let mut locs = Vec::new();
                for (path, text) in self.files() {
                    for (l, b) in occurrences(&text, &word) {
                        let line = text.lines().nth(l).unwrap_or("");
                        locs.push(json!({"uri": uri(&path),
                            "range": range(l, col(line, b), l, col(line, b) + word.len())}));
                    }
                }
                if let Some(id) = &id {
                    self.reply(id, Value::Array(locs));
                }
            }
            "textDocument/rename" => {
                let word = self.word_at(p).unwrap_or_default();
                let new = p["newName"].as_str().unwrap_or("");
                let mut changes = serde_json::Map::new();
                for (path, text) in self.files() {
                    let edits: Vec<Value> = occurrences(&text, &word)
                        .into_iter()
                        .map(|(l, b)| {
                            let line = text.lines().nth(l).unwrap_or("");
                            json!({"range": range(l, col(line, b), l, col(line, b) + word.len()),
                                "newText": new})
                        })
                        .collect();
                    if !edits.is_empty() {
                        changes.insert(uri(&path), Value::Array(edits));
                    }
                }
                if let Some(id) = &id {
                    if word.is_empty() {
                        self.send(&json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": -32602, "message": "no identifier found"}}));
                    } else {
                        self.reply(id, json!({"changes": changes}));
                    }
                }
            }
            "textDocument/documentSymbol" => {
                let u = p["textDocument"]["uri"].as_str().unwrap_or("");
                let syms: Vec<Value> = defs_of(&path_of(u), &self.text_of(u))
                    .iter()
                    .map(|d| {
                        json!({"name": d.name, "kind": 12,
                            "range": range(d.line, 0, d.end, d.end_len),
                            "selectionRange": range(d.line, 4, d.line, 4 + d.name.len())})
                    })
                    .collect();
                if let Some(id) = &id {
                    self.reply(id, Value::Array(syms));
                }
            }
            "workspace/symbol" => {
                let q = p["query"].as_str().unwrap_or("");
                let syms: Vec<Value> = self
                    .all_defs()
                    .iter()
                    .filter(|d| d.name.contains(q))
                    .map(|d| {
                        json!({"name": d.name, "kind": 12, "location": {"uri": uri(&d.path),
                        "range": range(d.line, 0, d.end, d.end_len)}})
                    })
                    .collect();
                if let Some(id) = &id {
                    self.reply(id, Value::Array(syms));
                }
            }
            "textDocument/prepareCallHierarchy" => {
                let word = self.word_at(p).unwrap_or_default();
                let r: Vec<Value> = self
                    .all_defs()
                    .iter()
                    .filter(|d| d.name == word)
                    .map(Self::item)
                    .collect();
                if let Some(id) = &id {
                    self.reply(
                        id,
                        if r.is_empty() {
                            Value::Null
                        } else {
                            Value::Array(r)
                        },
                    );
                }
            }
            "callHierarchy/incomingCalls" | "callHierarchy/outgoingCalls" => {
                let name = p["item"]["name"].as_str().unwrap_or("");
                let defs = self.all_defs();
                let r: Vec<Value> = if method.ends_with("incomingCalls") {
                    defs.iter()
                        .filter(|d| d.calls.iter().any(|c| c.0 == name))
                        .map(|d| json!({"from": Self::item(d), "fromRanges": []}))
                        .collect()
                } else {
                    defs.iter()
                        .filter(|d| d.name == name)
                        .flat_map(|d| d.calls.iter())
                        .filter_map(|c| defs.iter().find(|d| d.name == c.0))
                        .map(|d| json!({"to": Self::item(d), "fromRanges": []}))
                        .collect()
                };
                if let Some(id) = &id {
                    self.reply(id, Value::Array(r));
                }
            }
            _ => {
                if let (Some(id), false) = (&id, method.is_empty()) {
                    self.send(&json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32601, "message": "method not found"}}));
                }
            }
        }
    }
}

/// One framed message from `r` (None at the end).
fn read_one(r: &mut impl BufRead) -> Option<Value> {
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            len = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0u8; len?];
    r.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn server_main(script: &Path) -> ! {
    let script: Value = std::fs::read_to_string(script)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    let log = script["log"].as_str().and_then(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .ok()
            .map(Mutex::new)
    });
    let server = Arc::new(Server {
        script,
        out: Arc::new(Mutex::new(std::io::stdout())),
        log,
        root: Mutex::new(PathBuf::from("/")),
        docs: Mutex::new(HashMap::new()),
    });
    let mut input = BufReader::new(std::io::stdin());
    while let Some(msg) = read_one(&mut input) {
        if let Some(f) = &server.log {
            let mut f = lock(f);
            let _ = writeln!(f, "{msg}");
        }
        server.handle(msg);
    }
    std::process::exit(0)
}

/// Runs before `main`: in language server mode this process is that and nothing else.
extern "C" fn server_mode() {
    if let Some(script) = std::env::var_os(SERVER_ENV) {
        server_main(Path::new(&script));
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static SERVER_MODE: extern "C" fn() = server_mode;
