//! `crush acp`: crush as an agent inside an editor, over the Agent Client Protocol (v1):
//! newline-delimited JSON-RPC 2.0 on stdin and stdout (crush(1) ACP).
//!
//! This thread reads the editor's messages (from the reader thread) and dispatches them; it
//! never waits on a session. Each session runs on its own thread (`session.rs`) with its own
//! store connection, so a long turn, a permission question or a slow crushrc never holds up
//! another session, a cancel, or the answer to an editor's request. Everything goes out through
//! one writer thread (`rpc.rs`): stdout carries protocol messages only; diagnostics go to stderr
//! and the project log.
//!
//! When stdin ends, the running turns are canceled (what they did is stored, as for Ctrl-C),
//! the sessions close, the queued messages are written, and crush exits 0; an editor that
//! stopped reading holds that up by the grace of crush(1) ENVIRONMENT, CRUSH_TERM_GRACE, no
//! longer.

mod content;
mod files;
mod rpc;
mod session;
mod sink;

use crate::app::{self, AppError, Global};
use crate::config::ConfigError;
use crate::exit::ExitCode;
use crossbeam_channel::{Receiver, Sender, select, unbounded};
use files::FsCaps;
use rpc::{INVALID_REQUEST, Incoming, Line, METHOD_NOT_FOUND, NOT_FOUND, Peer, RpcError};
use serde_json::{Map, Value, json};
use session::{Job, Kind, Shared};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The protocol version crush speaks; a client asking for a later one gets this one.
const PROTOCOL_VERSION: u64 = 1;

/// How often the dispatcher looks at the signal flag while waiting.
const POLL: Duration = Duration::from_millis(50);

/// An open session as the dispatcher holds it.
struct Handle {
    shared: Arc<Shared>,
    jobs: Sender<Job>,
    generation: u64,
    thread: JoinHandle<()>,
}

/// Why the connection ended.
enum End {
    /// stdin ended.
    Input,
    /// stdout is gone.
    Output,
    /// SIGINT, SIGTERM or SIGHUP.
    Signal,
}

struct Acp {
    peer: Arc<Peer>,
    /// The global flags; `cwd` is the connection's directory (`--cwd`, else the process's).
    global: Global,
    fs: FsCaps,
    sessions: HashMap<String, Handle>,
    generation: u64,
    ended_tx: Sender<(String, u64)>,
    ended_rx: Receiver<(String, u64)>,
    /// Threads still finishing: closed sessions, and requests answered off this thread.
    finishing: Vec<JoinHandle<()>>,
}

pub(crate) fn run(global: &Global) -> Result<ExitCode, AppError> {
    let interrupt = crate::signal::interrupt_flag();
    let cwd = app::working_dir(global)?;
    let peer = Peer::start(std::io::stdout())
        .map_err(|e| AppError::Runtime(format!("cannot start the output thread: {e}")))?;
    let lines = rpc::spawn_reader(std::io::BufReader::new(std::io::stdin()))
        .map_err(|e| AppError::Runtime(format!("cannot start the input thread: {e}")))?;
    let mut g = global.clone();
    g.cwd = Some(cwd);
    let (ended_tx, ended_rx) = unbounded();
    let mut acp = Acp {
        peer,
        global: g,
        fs: FsCaps::default(),
        sessions: HashMap::new(),
        generation: 0,
        ended_tx,
        ended_rx,
        finishing: Vec::new(),
    };
    let end = acp.serve(&lines, &interrupt);
    acp.shutdown();
    Ok(match end {
        End::Input | End::Output => ExitCode::Success,
        End::Signal => crate::signal::interrupted(),
    })
}

/// A diagnostic for stderr and the log.
fn warn(msg: &str) {
    crate::log::warn(&format!("acp: {msg}"));
    crate::ewriteln!("crush: acp: {msg}");
}

/// The params of a request as an object (absent: empty).
fn object(params: &Value) -> Result<&Map<String, Value>, RpcError> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    match params {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(EMPTY.get_or_init(Map::new)),
        _ => Err(RpcError::invalid_params("params must be an object")),
    }
}

fn string<'a>(params: &'a Map<String, Value>, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("\"{key}\" (a string) is required")))
}

/// The model a connection in `global.cwd` would use: what `initialize` and `authenticate` tell.
fn probe(global: &Global) -> Result<crate::config::ResolvedModel, RpcError> {
    let loaded = app::load_config(global).map_err(|e| RpcError::internal(e.to_string()))?;
    loaded
        .resolve_model(global.model.as_deref(), false)
        .map_err(|e| match e {
            ConfigError::NoProvider(m) => RpcError::new(rpc::AUTH_REQUIRED, m),
            e => RpcError::internal(e.to_string()),
        })
}

impl Acp {
    fn serve(&mut self, lines: &Receiver<Line>, interrupt: &AtomicBool) -> End {
        loop {
            if interrupt.load(Ordering::SeqCst) || crate::signal::terminating().is_some() {
                return End::Signal;
            }
            if self.peer.is_closed() {
                return End::Output;
            }
            select! {
                recv(lines) -> l => match l {
                    Ok(Line::Text(t)) => self.handle(&t),
                    Ok(Line::TooLong) => {
                        warn(&format!("a message longer than {} bytes was skipped", rpc::MAX_LINE));
                        self.peer.respond(&Value::Null, Err(RpcError::new(
                            INVALID_REQUEST,
                            format!("message too long (the limit is {} bytes)", rpc::MAX_LINE),
                        )));
                    }
                    // A signal that came with the end of input is the reason.
                    Ok(Line::End) | Err(_) => {
                        return if interrupt.load(Ordering::SeqCst) {
                            End::Signal
                        } else {
                            End::Input
                        };
                    }
                },
                recv(self.ended_rx) -> e => {
                    if let Ok((id, generation)) = e {
                        self.ended(&id, generation);
                    }
                }
                default(POLL) => {}
            }
            self.finishing.retain(|t| !t.is_finished());
        }
    }

    /// A session's thread ended by itself (its open failed).
    fn ended(&mut self, id: &str, generation: u64) {
        if self
            .sessions
            .get(id)
            .is_some_and(|h| h.generation == generation)
            && let Some(h) = self.sessions.remove(id)
        {
            self.finishing.push(h.thread);
        }
    }

    fn handle(&mut self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match rpc::parse(line) {
            Incoming::Invalid { id, error } => {
                warn(&error.message);
                self.peer.respond(&id, Err(error));
            }
            Incoming::Response { id, result } => {
                // A question answered after the turn was canceled is no longer waited for.
                if !self.peer.deliver(&id, result) {
                    crate::log::debug(&format!("acp: an answer to no pending request (id {id})"));
                }
            }
            Incoming::Notification { method, params } => self.notification(&method, &params),
            Incoming::Request { id, method, params } => {
                if let Err(e) = self.request(&id, &method, &params) {
                    if e.code != METHOD_NOT_FOUND {
                        warn(&format!("{method}: {}", e.message));
                    }
                    self.peer.respond(&id, Err(e));
                }
            }
        }
    }

    /// Handles a request; Err is the answer (Ok: answered, or it will be).
    fn request(&mut self, id: &Value, method: &str, params: &Value) -> Result<(), RpcError> {
        let p = object(params)?;
        match method {
            "initialize" => self.initialize(id, p),
            "authenticate" => {
                string(p, "methodId")?;
                let global = self.global.clone();
                self.answer_later(id, move || probe(&global).map(|_| json!({})))
            }
            "session/new" => self.open(Kind::New, id, p),
            "session/load" => self.open(Kind::Load, id, p),
            "session/resume" => self.open(Kind::Resume, id, p),
            "session/list" => {
                let mut global = self.global.clone();
                if let Some(cwd) = p.get("cwd").and_then(Value::as_str) {
                    global.cwd = Some(PathBuf::from(cwd));
                }
                self.answer_later(id, move || list(&global))
            }
            "session/prompt" => self.prompt(id, p),
            "session/set_mode" => {
                let h = self.session(p)?;
                let (yolo, plan) = match string(p, "modeId")? {
                    "default" => (false, false),
                    "yolo" => (true, false),
                    "plan" => (false, true),
                    other => {
                        return Err(RpcError::invalid_params(format!(
                            "unknown mode \"{other}\" (default, yolo or plan)"
                        )));
                    }
                };
                // The next turn asks, or does not; plans, or does not.
                h.shared.yolo.store(yolo, Ordering::SeqCst);
                h.shared.plan.store(plan, Ordering::SeqCst);
                self.peer.respond(id, Ok(json!({})));
                Ok(())
            }
            "session/close" => {
                self.session(p)?;
                let sid = string(p, "sessionId")?.to_string();
                if let Some(h) = self.sessions.remove(&sid) {
                    h.shared.cancel.store(true, Ordering::SeqCst);
                    if h.jobs
                        .send(Job::Close {
                            request: Some(id.clone()),
                        })
                        .is_err()
                    {
                        self.peer.respond(id, Ok(json!({})));
                    }
                    self.finishing.push(h.thread);
                }
                Ok(())
            }
            _ => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            )),
        }
    }

    fn notification(&mut self, method: &str, params: &Value) {
        let p = match object(params) {
            Ok(p) => p,
            Err(e) => return warn(&format!("{method}: {}", e.message)),
        };
        match method {
            "session/cancel" => match self.session(p) {
                // A session with no prompt running has nothing to cancel.
                Ok(h) if h.shared.busy.load(Ordering::SeqCst) => {
                    h.shared.cancel.store(true, Ordering::SeqCst);
                }
                Ok(_) => {}
                Err(e) => warn(&format!("session/cancel: {}", e.message)),
            },
            "$/cancel_request" => {
                let Some(rid) = p.get("requestId") else {
                    return;
                };
                for h in self.sessions.values() {
                    let running = h
                        .shared
                        .prompt_request
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    if running.as_ref() == Some(rid) {
                        h.shared.cancel.store(true, Ordering::SeqCst);
                    }
                }
            }
            other => crate::log::debug(&format!("acp: ignored notification {other}")),
        }
    }

    /// The open session `params.sessionId` names.
    fn session(&self, params: &Map<String, Value>) -> Result<&Handle, RpcError> {
        let sid = string(params, "sessionId")?;
        self.sessions.get(sid).ok_or_else(|| {
            RpcError::new(
                NOT_FOUND,
                format!("no open session '{sid}' (open it with session/new or session/load)"),
            )
        })
    }

    /// Answers `id` from a thread of its own (the work loads a configuration, which may run a
    /// project's crushrc).
    fn answer_later(
        &mut self,
        id: &Value,
        work: impl FnOnce() -> Result<Value, RpcError> + Send + 'static,
    ) -> Result<(), RpcError> {
        let peer = self.peer.clone();
        let rid = id.clone();
        let t = std::thread::Builder::new()
            .name("acp-request".into())
            .spawn(move || {
                let r = work();
                if let Err(e) = &r {
                    warn(&e.message);
                }
                peer.respond(&rid, r);
            })
            .map_err(|e| RpcError::internal(format!("cannot start a thread: {e}")))?;
        self.finishing.push(t);
        Ok(())
    }

    fn initialize(&mut self, id: &Value, p: &Map<String, Value>) -> Result<(), RpcError> {
        if p.get("protocolVersion").and_then(Value::as_u64).is_none() {
            return Err(RpcError::invalid_params(
                "\"protocolVersion\" (an integer) is required",
            ));
        }
        let fs = &p
            .get("clientCapabilities")
            .and_then(|c| c.get("fs"))
            .cloned()
            .unwrap_or(Value::Null);
        self.fs = FsCaps {
            read: fs.get("readTextFile") == Some(&Value::Bool(true)),
            write: fs.get("writeTextFile") == Some(&Value::Bool(true)),
        };
        let global = self.global.clone();
        self.answer_later(id, move || {
            // Images are offered when the model takes them; without a provider, the editor
            // is told what to configure.
            let (image, auth) = match probe(&global) {
                Ok(m) => (m.model.supports_attachments, json!([])),
                Err(e) if e.code == rpc::AUTH_REQUIRED => (
                    false,
                    json!([{"id": "crush-config", "name": "Configure a provider",
                        "description": e.message}]),
                ),
                Err(e) => {
                    warn(&format!("the configuration: {}", e.message));
                    (false, json!([]))
                }
            };
            Ok(json!({
                "protocolVersion": PROTOCOL_VERSION,
                "agentCapabilities": {
                    "loadSession": true,
                    "promptCapabilities": {"image": image, "audio": false, "embeddedContext": true},
                    "mcpCapabilities": {"http": true, "sse": true},
                    "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
                },
                "authMethods": auth,
                "agentInfo": {"name": "crush", "title": "Crush", "version": env!("CARGO_PKG_VERSION")},
            }))
        })
    }

    /// `session/new`, `session/load`, `session/resume`: a session thread opens it and answers.
    fn open(&mut self, kind: Kind, id: &Value, p: &Map<String, Value>) -> Result<(), RpcError> {
        let cwd = PathBuf::from(string(p, "cwd")?);
        let servers = match p.get("mcpServers") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => content::mcp_servers(v, &cwd)
                .map_err(|e| RpcError::invalid_params(e.to_string()))?,
        };
        let sid = match kind {
            Kind::New => crate::store::new_id().map_err(|e| RpcError::internal(e.to_string()))?,
            Kind::Load | Kind::Resume => string(p, "sessionId")?.to_string(),
        };
        if let Some(h) = self.sessions.get(&sid) {
            if h.shared.busy.load(Ordering::SeqCst) {
                return Err(RpcError::new(
                    INVALID_REQUEST,
                    format!("session '{sid}' is running a prompt; cancel it first"),
                ));
            }
            // Opened again: the old thread closes.
            if let Some(h) = self.sessions.remove(&sid) {
                let _ = h.jobs.send(Job::Close { request: None });
                self.finishing.push(h.thread);
            }
        }
        self.generation += 1;
        let shared = Arc::new(Shared::new(self.global.yolo));
        let (jobs_tx, jobs_rx) = unbounded();
        let worker = session::Worker {
            peer: self.peer.clone(),
            global: self.global.clone(),
            open: session::Open {
                kind,
                request: id.clone(),
                id: sid.clone(),
                cwd,
                servers,
                fs: self.fs,
            },
            shared: shared.clone(),
            jobs: jobs_rx,
            ended: self.ended_tx.clone(),
            generation: self.generation,
        };
        let thread = worker
            .spawn()
            .map_err(|e| RpcError::internal(format!("cannot start the session: {e}")))?;
        self.sessions.insert(
            sid,
            Handle {
                shared,
                jobs: jobs_tx,
                generation: self.generation,
                thread,
            },
        );
        Ok(())
    }

    fn prompt(&mut self, id: &Value, p: &Map<String, Value>) -> Result<(), RpcError> {
        let h = self.session(p)?;
        let prompt = p
            .get("prompt")
            .cloned()
            .ok_or_else(|| RpcError::invalid_params("\"prompt\" is required"))?;
        if h.shared.busy.swap(true, Ordering::SeqCst) {
            return Err(RpcError::new(
                INVALID_REQUEST,
                "a prompt is already running in this session; wait for its answer or cancel it",
            ));
        }
        // Cleared here, not on the session's thread: a cancel that follows this prompt is
        // for it.
        h.shared.cancel.store(false, Ordering::SeqCst);
        *h.shared
            .prompt_request
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(id.clone());
        if h.jobs
            .send(Job::Prompt {
                request: id.clone(),
                prompt,
            })
            .is_err()
        {
            h.shared.busy.store(false, Ordering::SeqCst);
            return Err(RpcError::new(NOT_FOUND, "the session has ended"));
        }
        Ok(())
    }

    /// Cancels the running turns, closes the sessions and writes what is queued, each bounded
    /// by the grace of a SIGTERM: an editor that stopped reading cannot keep crush alive.
    fn shutdown(&mut self) {
        // Nothing the editor sends is read any more: questions to it get no answer.
        self.peer.input_ended();
        for (_, h) in self.sessions.drain() {
            if h.shared.busy.load(Ordering::SeqCst) {
                h.shared.cancel.store(true, Ordering::SeqCst);
            }
            drop(h.jobs);
            self.finishing.push(h.thread);
        }
        let grace = crate::signal::grace();
        let finished = |threads: &Vec<JoinHandle<()>>, deadline: Instant| {
            while threads.iter().any(|t| !t.is_finished()) {
                if Instant::now() >= deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            true
        };
        let deadline = Instant::now() + grace;
        if finished(&self.finishing, deadline) && self.peer.flush(deadline) {
            return;
        }
        // The editor does not read: drop the output, so the sessions can store what they have.
        warn("the editor stopped reading; its remaining messages are dropped");
        self.peer.close();
        finished(&self.finishing, Instant::now() + grace);
    }
}

/// `session/list`: the project's top-level sessions, most recent first (the terminal's too).
fn list(global: &Global) -> Result<Value, RpcError> {
    let loaded = app::load_config(global).map_err(|e| RpcError::internal(e.to_string()))?;
    let Some(store) =
        app::open_existing_store(&loaded).map_err(|e| RpcError::internal(e.to_string()))?
    else {
        return Ok(json!({"sessions": []}));
    };
    let sessions = store
        .list_sessions()
        .map_err(|e| RpcError::internal(e.to_string()))?;
    let cwd = loaded.cwd.display().to_string();
    let list: Vec<Value> = sessions
        .iter()
        .map(|s| {
            json!({"sessionId": s.id, "cwd": cwd, "title": s.title,
                "updatedAt": crate::time::rfc3339_secs(s.updated_at)})
        })
        .collect();
    Ok(json!({"sessions": list}))
}
